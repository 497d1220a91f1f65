-- Interactive access (DESIGN §15): the control plane is the OAuth authorization server of the
-- gateways' `/mcp`, and signs people in through the agent's OpenID provider.

-- MCP clients registered here (RFC 7591). `secret_hash` is the SHA-256 of a confidential
-- client's secret, '' for a public client; `redirect_uris` is a JSON list.
CREATE TABLE interactive_clients (
    client_id        TEXT PRIMARY KEY,
    client_name      TEXT NOT NULL,
    redirect_uris    TEXT NOT NULL,
    auth_method      TEXT NOT NULL,
    secret_hash      TEXT NOT NULL,
    created_at       BIGINT NOT NULL
);

-- Steps of an authorization under way, found by the SHA-256 of the value that names them and
-- used once: `signin` by the `state` sent to the OpenID provider, `code` by the authorization
-- code given to the MCP client. `data` is the sealed JSON of what the step carries.
CREATE TABLE interactive_pending (
    key_hash      TEXT PRIMARY KEY,
    kind          TEXT NOT NULL,
    workspace_id  TEXT NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
    data          TEXT NOT NULL,
    expires_at    BIGINT NOT NULL
);

CREATE INDEX interactive_pending_expiry ON interactive_pending (expires_at);

-- One person's authorization of one MCP client to use one agent on one gateway.
CREATE TABLE interactive_grants (
    id            TEXT PRIMARY KEY,
    workspace_id  TEXT NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
    agent_id      TEXT NOT NULL REFERENCES agents(id) ON DELETE CASCADE,
    gateway_id    TEXT NOT NULL,
    client_id     TEXT NOT NULL,
    subject       TEXT NOT NULL,
    email         TEXT NOT NULL,
    created_at    BIGINT NOT NULL,
    last_used_at  BIGINT NOT NULL,
    revoked_at    BIGINT
);

CREATE INDEX interactive_grants_workspace ON interactive_grants (workspace_id, agent_id);

-- Refresh tokens under a grant, by SHA-256; rotated on use (a used one presented again
-- revokes its grant).
CREATE TABLE interactive_refresh_tokens (
    token_hash    TEXT PRIMARY KEY,
    grant_id      TEXT NOT NULL REFERENCES interactive_grants(id) ON DELETE CASCADE,
    expires_at    BIGINT NOT NULL,
    used_at       BIGINT
);

CREATE INDEX interactive_refresh_tokens_grant ON interactive_refresh_tokens (grant_id);

-- The client this service registered at an OpenID provider to sign people in, per workspace
-- and issuer; its secret is sealed.
CREATE TABLE interactive_signin_clients (
    workspace_id  TEXT NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
    issuer        TEXT NOT NULL,
    client_id     TEXT NOT NULL,
    client_secret TEXT NOT NULL,
    PRIMARY KEY (workspace_id, issuer)
);

-- An OpenID provider's client for signing people in, where the provider offers no dynamic
-- registration: its id, and its secret sealed.
ALTER TABLE actas_providers ADD COLUMN signin_client_id TEXT;
ALTER TABLE actas_providers ADD COLUMN signin_client_secret TEXT;
