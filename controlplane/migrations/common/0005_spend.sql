-- The record of spend: what completed calls were charged, per quota, UTC day (days since
-- 1970-01-01) and, for per-caller quotas, caller. Added to as `model.call` events are stored
-- (in the same transaction, once per event), so it never counts an event twice. Kept per day
-- so a quota's window (daily or monthly) can change without losing what was spent in it.
CREATE TABLE quota_spend (
    quota_id      TEXT NOT NULL,
    day           BIGINT NOT NULL,
    caller        TEXT NOT NULL DEFAULT '',
    workspace_id  TEXT NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
    spent_micros  BIGINT NOT NULL DEFAULT 0,
    PRIMARY KEY (quota_id, day, caller)
);
CREATE INDEX quota_spend_workspace ON quota_spend (workspace_id, day);
