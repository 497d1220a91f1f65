//! Workspaces, platform keys and gateway deployments.

use super::db::{corrupt, from_json, to_json, Conn, StoreError};

#[derive(Debug, Clone, sqlx::FromRow)]
pub struct WorkspaceRow {
    pub id: String,
    pub name: String,
    pub plan: String,
    pub revision: i64,
    pub created_at: i64,
    pub actas_min_method: String,
    pub filter_window_bytes: i64,
    pub filter_window_tokens: i64,
}

impl WorkspaceRow {
    /// The streamed-output filter window: (bytes, tokens).
    pub fn filter_window(&self) -> (u64, u64) {
        let read = |v: i64| u64::try_from(v).unwrap_or_default();
        (
            read(self.filter_window_bytes),
            read(self.filter_window_tokens),
        )
    }
}

pub async fn insert_workspace(conn: &mut Conn, row: &WorkspaceRow) -> Result<(), StoreError> {
    sqlx::query(
        "INSERT INTO workspaces (id, name, plan, revision, created_at) VALUES ($1, $2, $3, $4, $5)",
    )
    .bind(&row.id)
    .bind(&row.name)
    .bind(&row.plan)
    .bind(row.revision)
    .bind(row.created_at)
    .execute(conn)
    .await?;
    Ok(())
}

pub async fn get_workspace(conn: &mut Conn, id: &str) -> Result<Option<WorkspaceRow>, StoreError> {
    Ok(sqlx::query_as("SELECT * FROM workspaces WHERE id = $1")
        .bind(id)
        .fetch_optional(conn)
        .await?)
}

pub async fn set_plan(conn: &mut Conn, id: &str, plan: &str) -> Result<(), StoreError> {
    sqlx::query("UPDATE workspaces SET plan = $1 WHERE id = $2")
        .bind(plan)
        .bind(id)
        .execute(conn)
        .await?;
    Ok(())
}

pub async fn set_actas_min_method(
    conn: &mut Conn,
    id: &str,
    method: &str,
) -> Result<(), StoreError> {
    sqlx::query("UPDATE workspaces SET actas_min_method = $1 WHERE id = $2")
        .bind(method)
        .bind(id)
        .execute(conn)
        .await?;
    Ok(())
}

pub async fn set_filter_window(
    conn: &mut Conn,
    id: &str,
    bytes: i64,
    tokens: i64,
) -> Result<(), StoreError> {
    sqlx::query(
        "UPDATE workspaces SET filter_window_bytes = $1, filter_window_tokens = $2 WHERE id = $3",
    )
    .bind(bytes)
    .bind(tokens)
    .bind(id)
    .execute(conn)
    .await?;
    Ok(())
}

pub async fn workspace_by_name(
    conn: &mut Conn,
    name: &str,
) -> Result<Option<WorkspaceRow>, StoreError> {
    Ok(sqlx::query_as("SELECT * FROM workspaces WHERE name = $1")
        .bind(name)
        .fetch_optional(conn)
        .await?)
}

pub async fn revision(conn: &mut Conn, id: &str) -> Result<u64, StoreError> {
    let row: Option<(i64,)> = sqlx::query_as("SELECT revision FROM workspaces WHERE id = $1")
        .bind(id)
        .fetch_optional(conn)
        .await?;
    let rev = row.map_or(0, |r| r.0);
    u64::try_from(rev).map_err(corrupt)
}

#[derive(Debug, Clone, sqlx::FromRow)]
pub struct PlatformKeyRow {
    pub id: String,
    pub workspace_id: String,
    pub name: String,
    pub role: String,
    /// JSON list of permission names.
    pub permissions: String,
    pub key_hash: String,
    pub prefix: String,
    pub created_at: i64,
}

impl PlatformKeyRow {
    pub fn permission_names(&self) -> Result<Vec<String>, StoreError> {
        from_json(&self.permissions)
    }
}

pub async fn insert_platform_key(conn: &mut Conn, row: &PlatformKeyRow) -> Result<(), StoreError> {
    sqlx::query(
        "INSERT INTO platform_keys (id, workspace_id, name, role, permissions, key_hash, prefix, \
         created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
    )
    .bind(&row.id)
    .bind(&row.workspace_id)
    .bind(&row.name)
    .bind(&row.role)
    .bind(&row.permissions)
    .bind(&row.key_hash)
    .bind(&row.prefix)
    .bind(row.created_at)
    .execute(conn)
    .await?;
    Ok(())
}

pub fn permissions_json(names: &[&str]) -> Result<String, StoreError> {
    to_json(&names)
}

pub async fn platform_key_by_hash(
    conn: &mut Conn,
    key_hash: &str,
) -> Result<Option<PlatformKeyRow>, StoreError> {
    Ok(
        sqlx::query_as("SELECT * FROM platform_keys WHERE key_hash = $1")
            .bind(key_hash)
            .fetch_optional(conn)
            .await?,
    )
}

pub async fn list_platform_keys(
    conn: &mut Conn,
    workspace_id: &str,
) -> Result<Vec<PlatformKeyRow>, StoreError> {
    Ok(sqlx::query_as(
        "SELECT * FROM platform_keys WHERE workspace_id = $1 ORDER BY created_at, id",
    )
    .bind(workspace_id)
    .fetch_all(conn)
    .await?)
}

pub async fn delete_platform_key(
    conn: &mut Conn,
    workspace_id: &str,
    id: &str,
) -> Result<bool, StoreError> {
    let done = sqlx::query("DELETE FROM platform_keys WHERE workspace_id = $1 AND id = $2")
        .bind(workspace_id)
        .bind(id)
        .execute(conn)
        .await?;
    Ok(done.rows_affected() > 0)
}

pub async fn count_admin_keys(conn: &mut Conn, workspace_id: &str) -> Result<i64, StoreError> {
    let row: (i64,) = sqlx::query_as(
        "SELECT COUNT(*) FROM platform_keys WHERE workspace_id = $1 AND role = 'admin'",
    )
    .bind(workspace_id)
    .fetch_one(conn)
    .await?;
    Ok(row.0)
}

#[derive(Debug, Clone, sqlx::FromRow)]
pub struct DeploymentRow {
    pub id: String,
    pub workspace_id: String,
    pub name: String,
    pub public_url: String,
    pub token_hash: String,
    pub prefix: String,
    pub created_at: i64,
    pub last_seen_at: Option<i64>,
}

pub async fn insert_deployment(conn: &mut Conn, row: &DeploymentRow) -> Result<(), StoreError> {
    sqlx::query(
        "INSERT INTO deployments (id, workspace_id, name, public_url, token_hash, prefix, \
         created_at) VALUES ($1, $2, $3, $4, $5, $6, $7)",
    )
    .bind(&row.id)
    .bind(&row.workspace_id)
    .bind(&row.name)
    .bind(&row.public_url)
    .bind(&row.token_hash)
    .bind(&row.prefix)
    .bind(row.created_at)
    .execute(conn)
    .await?;
    Ok(())
}

pub async fn deployment_by_hash(
    conn: &mut Conn,
    token_hash: &str,
) -> Result<Option<DeploymentRow>, StoreError> {
    Ok(
        sqlx::query_as("SELECT * FROM deployments WHERE token_hash = $1")
            .bind(token_hash)
            .fetch_optional(conn)
            .await?,
    )
}

pub async fn list_deployments(
    conn: &mut Conn,
    workspace_id: &str,
) -> Result<Vec<DeploymentRow>, StoreError> {
    Ok(
        sqlx::query_as("SELECT * FROM deployments WHERE workspace_id = $1 ORDER BY created_at, id")
            .bind(workspace_id)
            .fetch_all(conn)
            .await?,
    )
}

pub async fn delete_deployment(
    conn: &mut Conn,
    workspace_id: &str,
    id: &str,
) -> Result<bool, StoreError> {
    let done = sqlx::query("DELETE FROM deployments WHERE workspace_id = $1 AND id = $2")
        .bind(workspace_id)
        .bind(id)
        .execute(conn)
        .await?;
    Ok(done.rows_affected() > 0)
}

pub async fn set_deployment_url(
    conn: &mut Conn,
    id: &str,
    public_url: &str,
) -> Result<(), StoreError> {
    sqlx::query("UPDATE deployments SET public_url = $1 WHERE id = $2")
        .bind(public_url)
        .bind(id)
        .execute(conn)
        .await?;
    Ok(())
}

pub async fn touch_deployment(conn: &mut Conn, id: &str, now: i64) -> Result<(), StoreError> {
    sqlx::query("UPDATE deployments SET last_seen_at = $1 WHERE id = $2")
        .bind(now)
        .bind(id)
        .execute(conn)
        .await?;
    Ok(())
}

/// The public base URL gateway endpoints are built on: the workspace's first deployment's.
pub async fn gateway_public_base(
    conn: &mut Conn,
    workspace_id: &str,
) -> Result<Option<String>, StoreError> {
    let row: Option<(String,)> = sqlx::query_as(
        "SELECT public_url FROM deployments WHERE workspace_id = $1 AND public_url <> '' \
         ORDER BY created_at, id LIMIT 1",
    )
    .bind(workspace_id)
    .fetch_optional(conn)
    .await?;
    Ok(row.map(|r| r.0))
}
