-- Webhooks (DESIGN §8, §10): destinations (where events go, with their sealed signing secrets),
-- subscriptions (which events go there), the outbox of stored audit events waiting to be
-- matched (written in the ingest's own transaction, so an acknowledged event is never missed),
-- deliveries (a durable queue claimed with leases) and the history of their attempts.
CREATE TABLE webhook_destinations (
    id               TEXT PRIMARY KEY,
    workspace_id     TEXT NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
    name             TEXT NOT NULL,
    provider         TEXT NOT NULL,
    endpoint         TEXT NOT NULL DEFAULT '',
    settings         TEXT NOT NULL DEFAULT '{}',
    sealed_settings  TEXT,
    key_id           TEXT NOT NULL,
    secret           TEXT NOT NULL,
    previous_key_id  TEXT,
    previous_secret  TEXT,
    previous_until   BIGINT,
    enabled          BIGINT NOT NULL DEFAULT 1,
    disabled_reason  TEXT NOT NULL DEFAULT '',
    created_at       BIGINT NOT NULL,
    updated_at       BIGINT NOT NULL,
    UNIQUE (workspace_id, name)
);

CREATE TABLE webhook_subscriptions (
    id              TEXT PRIMARY KEY,
    workspace_id    TEXT NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
    name            TEXT NOT NULL,
    destination_id  TEXT NOT NULL REFERENCES webhook_destinations(id),
    event_types     TEXT NOT NULL,
    filters         TEXT NOT NULL DEFAULT '[]',
    enabled         BIGINT NOT NULL DEFAULT 1,
    created_at      BIGINT NOT NULL,
    updated_at      BIGINT NOT NULL,
    UNIQUE (workspace_id, name)
);
CREATE INDEX webhook_subscriptions_destination ON webhook_subscriptions (destination_id);

CREATE TABLE webhook_outbox (
    event_id      TEXT PRIMARY KEY,
    workspace_id  TEXT NOT NULL,
    queued_at     BIGINT NOT NULL
);
CREATE INDEX webhook_outbox_queued ON webhook_outbox (queued_at);

-- `next_attempt_at` is set while another attempt is due (`pending`, `failed`) and NULL once
-- the delivery is settled. `replayed_by` names the latest replay, so a bulk replay matches
-- only the last delivery of a chain.
CREATE TABLE webhook_deliveries (
    id                TEXT PRIMARY KEY,
    workspace_id      TEXT NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
    subscription_id   TEXT NOT NULL,
    destination_id    TEXT NOT NULL,
    event_id          TEXT NOT NULL,
    event_type        TEXT NOT NULL,
    status            TEXT NOT NULL,
    attempts          BIGINT NOT NULL DEFAULT 0,
    next_attempt_at   BIGINT,
    lease_owner       TEXT,
    lease_until       BIGINT,
    last_status_code  BIGINT,
    last_error        TEXT NOT NULL DEFAULT '',
    replay_of         TEXT NOT NULL DEFAULT '',
    replayed_by       TEXT NOT NULL DEFAULT '',
    body              TEXT,
    body_expires_at   BIGINT NOT NULL,
    created_at        BIGINT NOT NULL,
    updated_at        BIGINT NOT NULL
);
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_attempt_at);
CREATE INDEX webhook_deliveries_created ON webhook_deliveries (workspace_id, created_at);

CREATE TABLE webhook_attempts (
    delivery_id  TEXT NOT NULL REFERENCES webhook_deliveries(id) ON DELETE CASCADE,
    attempt      BIGINT NOT NULL,
    webhook_id   TEXT NOT NULL,
    started_at   BIGINT NOT NULL,
    duration_ms  BIGINT NOT NULL,
    status_code  BIGINT,
    error        TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (delivery_id, attempt)
);
