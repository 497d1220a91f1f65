-- The workspace's streamed-output filter window (SPEC: a model's 0 uses the workspace
-- setting; the largest of workspace, model and request applies). 0 = nothing beyond the
-- guards' own need.
ALTER TABLE workspaces ADD COLUMN filter_window_bytes BIGINT NOT NULL DEFAULT 0;
ALTER TABLE workspaces ADD COLUMN filter_window_tokens BIGINT NOT NULL DEFAULT 0;
