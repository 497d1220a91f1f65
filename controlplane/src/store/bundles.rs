//! Admin-deployed rule bundles.

use super::db::{Conn, StoreError};

#[derive(Debug, Clone, sqlx::FromRow)]
pub struct BundleRow {
    pub id: String,
    pub workspace_id: String,
    pub name: String,
    pub scope: String,
    /// `''` for workspace scope.
    pub scope_id: String,
    pub policies: String,
    /// JSON list of qualified policy ids.
    pub policy_ids: String,
    pub created_at: i64,
}

pub async fn insert(conn: &mut Conn, r: &BundleRow) -> Result<(), StoreError> {
    sqlx::query(
        "INSERT INTO rule_bundles (id, workspace_id, name, scope, scope_id, policies, \
         policy_ids, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
    )
    .bind(&r.id)
    .bind(&r.workspace_id)
    .bind(&r.name)
    .bind(&r.scope)
    .bind(&r.scope_id)
    .bind(&r.policies)
    .bind(&r.policy_ids)
    .bind(r.created_at)
    .execute(conn)
    .await?;
    Ok(())
}

pub async fn by_name(
    conn: &mut Conn,
    workspace_id: &str,
    scope: &str,
    scope_id: &str,
    name: &str,
) -> Result<Option<BundleRow>, StoreError> {
    Ok(sqlx::query_as(
        "SELECT * FROM rule_bundles WHERE workspace_id = $1 AND scope = $2 AND scope_id = $3 \
         AND name = $4",
    )
    .bind(workspace_id)
    .bind(scope)
    .bind(scope_id)
    .bind(name)
    .fetch_optional(conn)
    .await?)
}

pub async fn list(conn: &mut Conn, workspace_id: &str) -> Result<Vec<BundleRow>, StoreError> {
    Ok(sqlx::query_as(
        "SELECT * FROM rule_bundles WHERE workspace_id = $1 ORDER BY scope, scope_id, created_at, id",
    )
    .bind(workspace_id)
    .fetch_all(conn)
    .await?)
}

pub async fn delete(conn: &mut Conn, workspace_id: &str, id: &str) -> Result<bool, StoreError> {
    let done = sqlx::query("DELETE FROM rule_bundles WHERE workspace_id = $1 AND id = $2")
        .bind(workspace_id)
        .bind(id)
        .execute(conn)
        .await?;
    Ok(done.rows_affected() > 0)
}

/// Removes bundles scoped to a deleted gateway or agent.
pub async fn delete_scope(conn: &mut Conn, scope: &str, scope_id: &str) -> Result<(), StoreError> {
    sqlx::query("DELETE FROM rule_bundles WHERE scope = $1 AND scope_id = $2")
        .bind(scope)
        .bind(scope_id)
        .execute(conn)
        .await?;
    Ok(())
}
