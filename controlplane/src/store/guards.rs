//! Guards: what gateways look for in what flows through them. `config` and `scope` are JSON
//! text; the API module checks them before they are written.

use super::db::{Conn, StoreError};

#[derive(Debug, Clone, sqlx::FromRow)]
pub struct GuardRow {
    pub id: String,
    pub workspace_id: String,
    pub name: String,
    pub stage: String,
    pub kind: String,
    pub action: String,
    /// JSON value: the kind's settings.
    pub config: String,
    pub enabled: i64,
    /// JSON `{gateways, models, tools}` of ids; `None` for everywhere.
    pub scope: Option<String>,
    pub created_at: i64,
    pub updated_at: i64,
}

pub async fn insert(conn: &mut Conn, r: &GuardRow) -> Result<(), StoreError> {
    sqlx::query(
        "INSERT INTO guards (id, workspace_id, name, stage, kind, action, config, enabled, \
         scope, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)",
    )
    .bind(&r.id)
    .bind(&r.workspace_id)
    .bind(&r.name)
    .bind(&r.stage)
    .bind(&r.kind)
    .bind(&r.action)
    .bind(&r.config)
    .bind(r.enabled)
    .bind(&r.scope)
    .bind(r.created_at)
    .bind(r.updated_at)
    .execute(conn)
    .await?;
    Ok(())
}

/// Writes every mutable field back.
pub async fn update(conn: &mut Conn, r: &GuardRow) -> Result<(), StoreError> {
    sqlx::query(
        "UPDATE guards SET name = $1, stage = $2, kind = $3, action = $4, config = $5, \
         enabled = $6, scope = $7, updated_at = $8 WHERE id = $9 AND workspace_id = $10",
    )
    .bind(&r.name)
    .bind(&r.stage)
    .bind(&r.kind)
    .bind(&r.action)
    .bind(&r.config)
    .bind(r.enabled)
    .bind(&r.scope)
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
) -> Result<Option<GuardRow>, StoreError> {
    Ok(
        sqlx::query_as("SELECT * FROM guards WHERE workspace_id = $1 AND id = $2")
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
) -> Result<Option<GuardRow>, StoreError> {
    Ok(
        sqlx::query_as("SELECT * FROM guards WHERE workspace_id = $1 AND name = $2")
            .bind(workspace_id)
            .bind(name)
            .fetch_optional(conn)
            .await?,
    )
}

/// The workspace's guards, or those of one stage, by name.
pub async fn list(
    conn: &mut Conn,
    workspace_id: &str,
    stage: Option<&str>,
) -> Result<Vec<GuardRow>, StoreError> {
    let rows = match stage {
        Some(stage) => {
            sqlx::query_as(
                "SELECT * FROM guards WHERE workspace_id = $1 AND stage = $2 ORDER BY name, id",
            )
            .bind(workspace_id)
            .bind(stage)
            .fetch_all(conn)
            .await?
        }
        None => {
            sqlx::query_as("SELECT * FROM guards WHERE workspace_id = $1 ORDER BY name, id")
                .bind(workspace_id)
                .fetch_all(conn)
                .await?
        }
    };
    Ok(rows)
}

/// The guards gateways enforce.
pub async fn enabled(conn: &mut Conn, workspace_id: &str) -> Result<Vec<GuardRow>, StoreError> {
    Ok(sqlx::query_as(
        "SELECT * FROM guards WHERE workspace_id = $1 AND enabled = 1 ORDER BY name, id",
    )
    .bind(workspace_id)
    .fetch_all(conn)
    .await?)
}

pub async fn delete(conn: &mut Conn, workspace_id: &str, id: &str) -> Result<bool, StoreError> {
    let done = sqlx::query("DELETE FROM guards WHERE workspace_id = $1 AND id = $2")
        .bind(workspace_id)
        .bind(id)
        .execute(conn)
        .await?;
    Ok(done.rows_affected() > 0)
}
