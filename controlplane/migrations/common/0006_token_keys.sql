-- The Ed25519 key pairs exchanged agent tokens (ExchangeAgentKey) are signed with, one current
-- per workspace. The private key is sealed with the master key like every secret; the public
-- key (`x`, base64url) reaches gateways in the snapshot, also for a day after the key is
-- retired, so tokens it signed stay valid until they expire.
CREATE TABLE token_keys (
    kid           TEXT PRIMARY KEY,
    workspace_id  TEXT NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
    x             TEXT NOT NULL,
    sealed        TEXT NOT NULL,
    created_at    BIGINT NOT NULL,
    retired_at    BIGINT
);
CREATE INDEX token_keys_workspace ON token_keys (workspace_id, created_at);
