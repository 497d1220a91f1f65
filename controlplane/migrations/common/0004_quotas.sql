-- LLM spend quotas. A quota's identity (subject, pool scope, per-caller flag) and window are
-- unique per workspace: creating the same pair again conflicts. Empty strings stand for "none"
-- so the unique index sees them.

CREATE TABLE llm_quotas (
    id            TEXT PRIMARY KEY,
    workspace_id  TEXT NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
    subject_type  TEXT NOT NULL,
    subject_id    TEXT NOT NULL DEFAULT '',
    subject_key   TEXT NOT NULL DEFAULT '',
    pool_id       TEXT NOT NULL DEFAULT '',
    per_caller    BIGINT NOT NULL DEFAULT 0,
    quota_window  TEXT NOT NULL,
    limit_micros  BIGINT NOT NULL,
    name          TEXT NOT NULL DEFAULT '',
    enabled       BIGINT NOT NULL DEFAULT 1,
    scope         TEXT NOT NULL DEFAULT 'total',
    created_at    BIGINT NOT NULL,
    updated_at    BIGINT NOT NULL
);
CREATE UNIQUE INDEX llm_quotas_identity ON llm_quotas
    (workspace_id, subject_type, subject_id, subject_key, pool_id, per_caller, quota_window);
CREATE INDEX llm_quotas_subject ON llm_quotas (workspace_id, subject_id);
