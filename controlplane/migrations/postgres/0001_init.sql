-- Portcullis control-plane store, PostgreSQL. Ids are UUID text, times are Unix milliseconds,
-- booleans are 0/1, lists and maps are JSON text. Upstream secrets live only in
-- `credentials.ciphertext` (AES-256-GCM); keys and tokens only as SHA-256 hex.

CREATE TABLE workspaces (
    id          TEXT PRIMARY KEY,
    name        TEXT NOT NULL UNIQUE,
    plan        TEXT NOT NULL DEFAULT 'pro',
    revision    BIGINT NOT NULL DEFAULT 1,
    created_at  BIGINT NOT NULL
);

CREATE TABLE platform_keys (
    id            TEXT PRIMARY KEY,
    workspace_id  TEXT NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
    name          TEXT NOT NULL,
    role          TEXT NOT NULL,
    permissions   TEXT NOT NULL,
    key_hash      TEXT NOT NULL UNIQUE,
    prefix        TEXT NOT NULL,
    created_at    BIGINT NOT NULL,
    UNIQUE (workspace_id, name)
);

CREATE TABLE deployments (
    id            TEXT PRIMARY KEY,
    workspace_id  TEXT NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
    name          TEXT NOT NULL,
    public_url    TEXT NOT NULL,
    token_hash    TEXT NOT NULL UNIQUE,
    prefix        TEXT NOT NULL,
    created_at    BIGINT NOT NULL,
    last_seen_at  BIGINT,
    UNIQUE (workspace_id, name)
);

CREATE TABLE model_connections (
    id                    TEXT PRIMARY KEY,
    workspace_id          TEXT NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
    name                  TEXT NOT NULL,
    provider              TEXT NOT NULL,
    provider_config       TEXT NOT NULL,
    auth_method           TEXT NOT NULL,
    credential_type       TEXT NOT NULL,
    attributes            TEXT NOT NULL,
    filter_window_bytes   BIGINT NOT NULL DEFAULT 0,
    filter_window_tokens  BIGINT NOT NULL DEFAULT 0,
    created_at            BIGINT NOT NULL,
    updated_at            BIGINT NOT NULL,
    UNIQUE (workspace_id, name)
);

-- One encrypted secret bundle per owner and subject ('' = shared).
CREATE TABLE credentials (
    owner_kind    TEXT NOT NULL,
    owner_id      TEXT NOT NULL,
    subject       TEXT NOT NULL DEFAULT '',
    workspace_id  TEXT NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
    secret_keys   TEXT NOT NULL,
    ciphertext    TEXT NOT NULL,
    created_at    BIGINT NOT NULL,
    updated_at    BIGINT NOT NULL,
    PRIMARY KEY (owner_kind, owner_id, subject)
);

CREATE TABLE pools (
    id            TEXT PRIMARY KEY,
    workspace_id  TEXT NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
    name          TEXT NOT NULL,
    strategy      TEXT NOT NULL,
    created_at    BIGINT NOT NULL,
    updated_at    BIGINT NOT NULL,
    UNIQUE (workspace_id, name)
);

CREATE TABLE pool_members (
    pool_id        TEXT NOT NULL REFERENCES pools(id) ON DELETE CASCADE,
    connection_id  TEXT NOT NULL REFERENCES model_connections(id) ON DELETE CASCADE,
    weight         BIGINT NOT NULL,
    priority       BIGINT NOT NULL,
    position       BIGINT NOT NULL,
    PRIMARY KEY (pool_id, connection_id)
);
CREATE INDEX pool_members_connection ON pool_members (connection_id);

CREATE TABLE gateways (
    id            TEXT PRIMARY KEY,
    workspace_id  TEXT NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
    name          TEXT NOT NULL,
    description   TEXT NOT NULL,
    state         TEXT NOT NULL,
    is_default    BIGINT NOT NULL DEFAULT 0,
    all_agents    BIGINT NOT NULL DEFAULT 0,
    created_at    BIGINT NOT NULL,
    updated_at    BIGINT NOT NULL,
    UNIQUE (workspace_id, name)
);

-- kind: model | pool | tool | tool_source; target_id: connection or pool id; tool: '' unless kind = tool.
CREATE TABLE gateway_members (
    gateway_id  TEXT NOT NULL REFERENCES gateways(id) ON DELETE CASCADE,
    kind        TEXT NOT NULL,
    target_id   TEXT NOT NULL,
    tool        TEXT NOT NULL DEFAULT '',
    created_at  BIGINT NOT NULL,
    PRIMARY KEY (gateway_id, kind, target_id, tool)
);
CREATE INDEX gateway_members_target ON gateway_members (target_id);

CREATE TABLE agents (
    id                          TEXT PRIMARY KEY,
    workspace_id                TEXT NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
    name                        TEXT NOT NULL,
    status                      TEXT NOT NULL,
    status_reason               TEXT,
    parent_id                   TEXT REFERENCES agents(id),
    metadata                    TEXT NOT NULL,
    token_ttl_secs              BIGINT NOT NULL,
    allowed_pool_names          TEXT NOT NULL,
    allowed_direct_model_names  TEXT NOT NULL,
    allowed_tools               TEXT NOT NULL,
    actas_allowed_groups        TEXT NOT NULL,
    actas_allowed_emails        TEXT NOT NULL,
    actas_allowed_subjects      TEXT NOT NULL,
    actas_method                TEXT,
    actas_required              BIGINT NOT NULL DEFAULT 0,
    actas_provider_id           TEXT,
    actas_oidc_url              TEXT,
    actas_config_name           TEXT,
    interactive_access          BIGINT NOT NULL DEFAULT 0,
    created_at                  BIGINT NOT NULL,
    updated_at                  BIGINT NOT NULL,
    UNIQUE (workspace_id, name)
);
CREATE INDEX agents_parent ON agents (parent_id);

-- One relation seen two ways: a gateway's per-agent grants and an agent's allowed_gateway_ids.
CREATE TABLE gateway_agent_grants (
    gateway_id  TEXT NOT NULL REFERENCES gateways(id) ON DELETE CASCADE,
    agent_id    TEXT NOT NULL REFERENCES agents(id) ON DELETE CASCADE,
    created_at  BIGINT NOT NULL,
    PRIMARY KEY (gateway_id, agent_id)
);
CREATE INDEX gateway_agent_grants_agent ON gateway_agent_grants (agent_id);

CREATE TABLE agent_keys (
    id            TEXT PRIMARY KEY,
    workspace_id  TEXT NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
    agent_id      TEXT NOT NULL REFERENCES agents(id) ON DELETE CASCADE,
    name          TEXT NOT NULL,
    key_hash      TEXT NOT NULL UNIQUE,
    prefix        TEXT NOT NULL,
    gateway_id    TEXT,
    created_at    BIGINT NOT NULL,
    rotated_at    BIGINT,
    UNIQUE (agent_id, name)
);

-- Admin-deployed bundles. Managed bundles (compiled from agents) are derived, not stored.
CREATE TABLE rule_bundles (
    id            TEXT PRIMARY KEY,
    workspace_id  TEXT NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
    name          TEXT NOT NULL,
    scope         TEXT NOT NULL,
    scope_id      TEXT NOT NULL DEFAULT '',
    policies      TEXT NOT NULL,
    policy_ids    TEXT NOT NULL,
    created_at    BIGINT NOT NULL,
    UNIQUE (workspace_id, scope, scope_id, name)
);
