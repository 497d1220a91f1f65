//! MCP tool connections and their catalog.

use super::db::{Conn, StoreError};

#[derive(Debug, Clone, sqlx::FromRow)]
pub struct ToolRow {
    pub id: String,
    pub workspace_id: String,
    pub name: String,
    pub protocol: String,
    /// JSON object.
    pub protocol_config: String,
    pub auth_method: String,
    pub credential_type: String,
    /// JSON object.
    pub auth_config: String,
    /// JSON value.
    pub field_classifications: String,
    /// JSON list of operation names.
    pub write_tools: String,
    pub created_at: i64,
    pub updated_at: i64,
}

pub async fn insert(conn: &mut Conn, r: &ToolRow) -> Result<(), StoreError> {
    sqlx::query(
        "INSERT INTO tool_connections (id, workspace_id, name, protocol, protocol_config, \
         auth_method, credential_type, auth_config, field_classifications, write_tools, \
         created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)",
    )
    .bind(&r.id)
    .bind(&r.workspace_id)
    .bind(&r.name)
    .bind(&r.protocol)
    .bind(&r.protocol_config)
    .bind(&r.auth_method)
    .bind(&r.credential_type)
    .bind(&r.auth_config)
    .bind(&r.field_classifications)
    .bind(&r.write_tools)
    .bind(r.created_at)
    .bind(r.updated_at)
    .execute(conn)
    .await?;
    Ok(())
}

pub async fn update(conn: &mut Conn, r: &ToolRow) -> Result<(), StoreError> {
    sqlx::query(
        "UPDATE tool_connections SET name = $1, protocol = $2, protocol_config = $3, \
         auth_method = $4, credential_type = $5, auth_config = $6, field_classifications = $7, \
         write_tools = $8, updated_at = $9 WHERE id = $10 AND workspace_id = $11",
    )
    .bind(&r.name)
    .bind(&r.protocol)
    .bind(&r.protocol_config)
    .bind(&r.auth_method)
    .bind(&r.credential_type)
    .bind(&r.auth_config)
    .bind(&r.field_classifications)
    .bind(&r.write_tools)
    .bind(r.updated_at)
    .bind(&r.id)
    .bind(&r.workspace_id)
    .execute(conn)
    .await?;
    Ok(())
}

pub async fn get(
    conn: &mut Conn,
    workspace_id: &str,
    id: &str,
) -> Result<Option<ToolRow>, StoreError> {
    Ok(
        sqlx::query_as("SELECT * FROM tool_connections WHERE workspace_id = $1 AND id = $2")
            .bind(workspace_id)
            .bind(id)
            .fetch_optional(conn)
            .await?,
    )
}

pub async fn by_name(
    conn: &mut Conn,
    workspace_id: &str,
    name: &str,
) -> Result<Option<ToolRow>, StoreError> {
    Ok(
        sqlx::query_as("SELECT * FROM tool_connections WHERE workspace_id = $1 AND name = $2")
            .bind(workspace_id)
            .bind(name)
            .fetch_optional(conn)
            .await?,
    )
}

pub async fn list(conn: &mut Conn, workspace_id: &str) -> Result<Vec<ToolRow>, StoreError> {
    Ok(
        sqlx::query_as("SELECT * FROM tool_connections WHERE workspace_id = $1 ORDER BY name, id")
            .bind(workspace_id)
            .fetch_all(conn)
            .await?,
    )
}

/// Deletes the connection; its catalog goes with it (foreign key).
pub async fn delete(conn: &mut Conn, workspace_id: &str, id: &str) -> Result<bool, StoreError> {
    let done = sqlx::query("DELETE FROM tool_connections WHERE workspace_id = $1 AND id = $2")
        .bind(workspace_id)
        .bind(id)
        .execute(conn)
        .await?;
    Ok(done.rows_affected() > 0)
}

#[derive(Debug, Clone, sqlx::FromRow)]
pub struct CatalogRow {
    pub connection_id: String,
    pub tool: String,
    pub description: String,
    pub input_schema: Option<String>,
    pub status: String,
    pub message: Option<String>,
    pub discovered: i64,
    pub updated_at: i64,
}

pub async fn catalog(conn: &mut Conn, connection_id: &str) -> Result<Vec<CatalogRow>, StoreError> {
    Ok(
        sqlx::query_as("SELECT * FROM tool_catalog WHERE connection_id = $1 ORDER BY tool")
            .bind(connection_id)
            .fetch_all(conn)
            .await?,
    )
}

/// Every catalog entry of a workspace, by connection and name.
pub async fn workspace_catalog(
    conn: &mut Conn,
    workspace_id: &str,
) -> Result<Vec<CatalogRow>, StoreError> {
    Ok(sqlx::query_as(
        "SELECT k.* FROM tool_catalog k JOIN tool_connections c ON c.id = k.connection_id \
         WHERE c.workspace_id = $1 ORDER BY k.connection_id, k.tool",
    )
    .bind(workspace_id)
    .fetch_all(conn)
    .await?)
}

pub async fn catalog_entry(
    conn: &mut Conn,
    connection_id: &str,
    tool: &str,
) -> Result<Option<CatalogRow>, StoreError> {
    Ok(
        sqlx::query_as("SELECT * FROM tool_catalog WHERE connection_id = $1 AND tool = $2")
            .bind(connection_id)
            .bind(tool)
            .fetch_optional(conn)
            .await?,
    )
}

/// Records an operation a gateway saw upstream: new ones start `active`; a known one keeps
/// its status and gets the new description and schema. Returns whether anything changed.
pub async fn record_discovered(
    conn: &mut Conn,
    connection_id: &str,
    tool: &str,
    description: &str,
    input_schema: Option<&str>,
    now: i64,
) -> Result<bool, StoreError> {
    let existing = catalog_entry(conn, connection_id, tool).await?;
    match existing {
        Some(row)
            if row.discovered != 0
                && row.description == description
                && row.input_schema.as_deref() == input_schema =>
        {
            Ok(false)
        }
        Some(_) => {
            sqlx::query(
                "UPDATE tool_catalog SET description = $1, input_schema = $2, discovered = 1, \
                 updated_at = $3 WHERE connection_id = $4 AND tool = $5",
            )
            .bind(description)
            .bind(input_schema)
            .bind(now)
            .bind(connection_id)
            .bind(tool)
            .execute(conn)
            .await?;
            Ok(true)
        }
        None => {
            sqlx::query(
                "INSERT INTO tool_catalog (connection_id, tool, description, input_schema, status, \
                 message, discovered, updated_at) VALUES ($1, $2, $3, $4, 'active', NULL, 1, $5)",
            )
            .bind(connection_id)
            .bind(tool)
            .bind(description)
            .bind(input_schema)
            .bind(now)
            .execute(conn)
            .await?;
            Ok(true)
        }
    }
}

/// Sets an operation's status, creating the entry (undiscovered) when it is not yet known.
pub async fn set_status(
    conn: &mut Conn,
    connection_id: &str,
    tool: &str,
    status: &str,
    message: Option<&str>,
    now: i64,
) -> Result<(), StoreError> {
    sqlx::query(
        "INSERT INTO tool_catalog (connection_id, tool, description, input_schema, status, message, \
         discovered, updated_at) VALUES ($1, $2, '', NULL, $3, $4, 0, $5) \
         ON CONFLICT (connection_id, tool) DO UPDATE SET status = excluded.status, \
         message = excluded.message, updated_at = excluded.updated_at",
    )
    .bind(connection_id)
    .bind(tool)
    .bind(status)
    .bind(message)
    .bind(now)
    .execute(conn)
    .await?;
    Ok(())
}

/// Blocked operations of a workspace: (connection name, tool, when its status was set).
pub async fn blocked(
    conn: &mut Conn,
    workspace_id: &str,
) -> Result<Vec<(String, String, i64)>, StoreError> {
    Ok(sqlx::query_as(
        "SELECT c.name, k.tool, k.updated_at FROM tool_catalog k JOIN tool_connections c ON c.id = k.connection_id \
         WHERE c.workspace_id = $1 AND k.status = 'blocked' ORDER BY c.name, k.tool",
    )
    .bind(workspace_id)
    .fetch_all(conn)
    .await?)
}
