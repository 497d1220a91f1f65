//! Model connections.

use super::db::{Conn, StoreError};

#[derive(Debug, Clone, sqlx::FromRow)]
pub struct ModelRow {
    pub id: String,
    pub workspace_id: String,
    pub name: String,
    pub provider: String,
    /// JSON object.
    pub provider_config: String,
    pub auth_method: String,
    pub credential_type: String,
    /// JSON object of strings.
    pub attributes: String,
    pub filter_window_bytes: i64,
    pub filter_window_tokens: i64,
    pub created_at: i64,
    pub updated_at: i64,
    /// OAuth client settings (JSON object, without the client secret).
    pub auth_config: String,
}

pub async fn insert(conn: &mut Conn, row: &ModelRow) -> Result<(), StoreError> {
    sqlx::query(
        "INSERT INTO model_connections (id, workspace_id, name, provider, provider_config, \
         auth_method, credential_type, attributes, filter_window_bytes, filter_window_tokens, \
         created_at, updated_at, auth_config) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)",
    )
    .bind(&row.id)
    .bind(&row.workspace_id)
    .bind(&row.name)
    .bind(&row.provider)
    .bind(&row.provider_config)
    .bind(&row.auth_method)
    .bind(&row.credential_type)
    .bind(&row.attributes)
    .bind(row.filter_window_bytes)
    .bind(row.filter_window_tokens)
    .bind(row.created_at)
    .bind(row.updated_at)
    .bind(&row.auth_config)
    .execute(conn)
    .await?;
    Ok(())
}

pub async fn update(conn: &mut Conn, row: &ModelRow) -> Result<(), StoreError> {
    sqlx::query(
        "UPDATE model_connections SET name = $1, provider_config = $2, auth_method = $3, \
         credential_type = $4, attributes = $5, filter_window_bytes = $6, \
         filter_window_tokens = $7, updated_at = $8, auth_config = $11 \
         WHERE id = $9 AND workspace_id = $10",
    )
    .bind(&row.name)
    .bind(&row.provider_config)
    .bind(&row.auth_method)
    .bind(&row.credential_type)
    .bind(&row.attributes)
    .bind(row.filter_window_bytes)
    .bind(row.filter_window_tokens)
    .bind(row.updated_at)
    .bind(&row.id)
    .bind(&row.workspace_id)
    .bind(&row.auth_config)
    .execute(conn)
    .await?;
    Ok(())
}

pub async fn get(
    conn: &mut Conn,
    workspace_id: &str,
    id: &str,
) -> Result<Option<ModelRow>, StoreError> {
    Ok(
        sqlx::query_as("SELECT * FROM model_connections WHERE workspace_id = $1 AND id = $2")
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
) -> Result<Option<ModelRow>, StoreError> {
    Ok(
        sqlx::query_as("SELECT * FROM model_connections WHERE workspace_id = $1 AND name = $2")
            .bind(workspace_id)
            .bind(name)
            .fetch_optional(conn)
            .await?,
    )
}

pub async fn list(conn: &mut Conn, workspace_id: &str) -> Result<Vec<ModelRow>, StoreError> {
    Ok(
        sqlx::query_as("SELECT * FROM model_connections WHERE workspace_id = $1 ORDER BY name, id")
            .bind(workspace_id)
            .fetch_all(conn)
            .await?,
    )
}

/// Deletes the connection; pool memberships go with it (foreign key), gateway memberships are
/// removed by the caller.
pub async fn delete(conn: &mut Conn, workspace_id: &str, id: &str) -> Result<bool, StoreError> {
    let done = sqlx::query("DELETE FROM model_connections WHERE workspace_id = $1 AND id = $2")
        .bind(workspace_id)
        .bind(id)
        .execute(conn)
        .await?;
    Ok(done.rows_affected() > 0)
}
