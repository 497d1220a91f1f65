-- MCP tool connections and the catalog of their discovered operations.

CREATE TABLE tool_connections (
    id                     TEXT PRIMARY KEY,
    workspace_id           TEXT NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
    name                   TEXT NOT NULL,
    protocol               TEXT NOT NULL,
    -- JSON: {url, headers} for streamable-http, {command, args, env, cwd} for stdio.
    protocol_config        TEXT NOT NULL,
    auth_method            TEXT NOT NULL,
    credential_type        TEXT NOT NULL,
    -- JSON: OAuth client settings; the client secret lives in credentials.
    auth_config            TEXT NOT NULL,
    field_classifications  TEXT NOT NULL,
    write_tools            TEXT NOT NULL,
    created_at             BIGINT NOT NULL,
    updated_at             BIGINT NOT NULL,
    UNIQUE (workspace_id, name)
);

-- status: active | deprecated | blocked. A status survives rediscovery; only restore resets it.
CREATE TABLE tool_catalog (
    connection_id  TEXT NOT NULL REFERENCES tool_connections(id) ON DELETE CASCADE,
    tool           TEXT NOT NULL,
    description    TEXT NOT NULL,
    input_schema   TEXT,
    status         TEXT NOT NULL,
    message        TEXT,
    discovered     BIGINT NOT NULL DEFAULT 0,
    updated_at     BIGINT NOT NULL,
    PRIMARY KEY (connection_id, tool)
);
