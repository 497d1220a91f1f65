-- Act-as strength and sources (DESIGN §15): the workspace's floor on act-as identities, the
-- verification providers agents name with `actas_provider_id`, and the end user a key is bound
-- to for agents whose act-as method is `bound`. A provider's HMAC secret lives sealed in
-- `credentials` (owner kind `actas_provider`).
ALTER TABLE workspaces ADD COLUMN actas_min_method TEXT NOT NULL DEFAULT 'none';

CREATE TABLE actas_providers (
    id            TEXT PRIMARY KEY,
    workspace_id  TEXT NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
    name          TEXT NOT NULL,
    method        TEXT NOT NULL,
    issuer        TEXT,
    audience      TEXT,
    jwks_url      TEXT,
    email_claim   TEXT NOT NULL DEFAULT 'email',
    groups_claim  TEXT NOT NULL DEFAULT 'groups',
    created_at    BIGINT NOT NULL,
    updated_at    BIGINT NOT NULL,
    UNIQUE (workspace_id, name)
);

-- JSON `{sub, email, groups}`, or NULL for a key bound to no one.
ALTER TABLE agent_keys ADD COLUMN bound_subject TEXT;

-- Before providers existed, `actas_provider_id` was free text that named nothing; it now
-- must name a provider of the workspace.
UPDATE agents SET actas_provider_id = NULL WHERE actas_provider_id IS NOT NULL;
