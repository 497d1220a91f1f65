-- Audit events: the whole AuditEventV1 in `body`, with the fields dashboards filter on
-- lifted into indexed columns. Ingest is idempotent by event id.

CREATE TABLE audit_events (
    event_id          TEXT PRIMARY KEY,
    workspace_id      TEXT NOT NULL,
    time_ms           BIGINT NOT NULL,
    type              TEXT NOT NULL,
    result            TEXT NOT NULL,
    agent_id          TEXT NOT NULL DEFAULT '',
    actor_id          TEXT NOT NULL DEFAULT '',
    resource_kind     TEXT NOT NULL DEFAULT '',
    resource_id       TEXT NOT NULL DEFAULT '',
    resource_name     TEXT NOT NULL DEFAULT '',
    producer_service  TEXT NOT NULL DEFAULT '',
    surface           TEXT NOT NULL DEFAULT '',
    operation         TEXT NOT NULL DEFAULT '',
    trace_id          TEXT NOT NULL DEFAULT '',
    activity_id       TEXT NOT NULL DEFAULT '',
    body              TEXT NOT NULL,
    ingested_at       BIGINT NOT NULL
);
CREATE INDEX audit_time ON audit_events (workspace_id, time_ms, event_id);
CREATE INDEX audit_agent ON audit_events (workspace_id, agent_id, time_ms);
CREATE INDEX audit_resource ON audit_events (workspace_id, resource_id, time_ms);
CREATE INDEX audit_type ON audit_events (workspace_id, type, time_ms);
CREATE INDEX audit_result ON audit_events (workspace_id, result, time_ms);
CREATE INDEX audit_trace ON audit_events (workspace_id, trace_id);
CREATE INDEX audit_activity ON audit_events (workspace_id, activity_id);
