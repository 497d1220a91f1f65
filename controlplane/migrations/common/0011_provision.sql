-- One-use links a person opens to store their own credential for a per-user connection
-- (a tool or a model), bound to the connection and the person's verified `sub`.
CREATE TABLE provision_tokens (
    token_hash    TEXT PRIMARY KEY,
    workspace_id  TEXT NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
    owner_kind    TEXT NOT NULL,
    owner_id      TEXT NOT NULL,
    subject       TEXT NOT NULL,
    expires_at    BIGINT NOT NULL,
    used_at       BIGINT
);

CREATE INDEX provision_tokens_expiry ON provision_tokens (expires_at);
