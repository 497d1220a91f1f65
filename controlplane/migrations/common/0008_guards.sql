-- Guards (DESIGN §16): what gateways look for in model input and output and in tool arguments
-- and results, and whether a match blocks the call or is redacted. `config` is the kind's
-- settings as JSON text; `scope` is JSON `{gateways, models, tools}` of ids, or NULL for
-- everywhere. Ids of resources deleted since stay in the scope (a list whose members are all
-- gone matches nothing; it does not widen to everywhere).
CREATE TABLE guards (
    id            TEXT PRIMARY KEY,
    workspace_id  TEXT NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
    name          TEXT NOT NULL,
    stage         TEXT NOT NULL,
    kind          TEXT NOT NULL,
    action        TEXT NOT NULL,
    config        TEXT NOT NULL,
    enabled       BIGINT NOT NULL DEFAULT 1,
    scope         TEXT,
    created_at    BIGINT NOT NULL,
    updated_at    BIGINT NOT NULL,
    UNIQUE (workspace_id, name)
);
