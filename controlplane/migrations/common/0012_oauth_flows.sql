-- OAuth consents under way: one row per authorization request sent to a provider, found by
-- the SHA-256 of its `state` when the provider redirects back, and deleted then (one use).
-- `subject` is '' for a connection's shared grant, else the person's verified `sub`; the PKCE
-- verifier is sealed like every secret.
CREATE TABLE oauth_flows (
    state_hash    TEXT PRIMARY KEY,
    workspace_id  TEXT NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
    owner_kind    TEXT NOT NULL,
    owner_id      TEXT NOT NULL,
    subject       TEXT NOT NULL,
    verifier      TEXT NOT NULL,
    expires_at    BIGINT NOT NULL
);

CREATE INDEX oauth_flows_owner ON oauth_flows (owner_id, subject);
