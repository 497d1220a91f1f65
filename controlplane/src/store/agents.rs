//! Agents and their API keys.

use super::db::{Conn, StoreError};

#[derive(Debug, Clone, sqlx::FromRow)]
pub struct AgentRow {
    pub id: String,
    pub workspace_id: String,
    pub name: String,
    pub status: String,
    pub status_reason: Option<String>,
    pub parent_id: Option<String>,
    /// JSON object.
    pub metadata: String,
    pub token_ttl_secs: i64,
    /// JSON lists of strings.
    pub allowed_pool_names: String,
    pub allowed_direct_model_names: String,
    pub allowed_tools: String,
    pub actas_allowed_groups: String,
    pub actas_allowed_emails: String,
    pub actas_allowed_subjects: String,
    pub actas_method: Option<String>,
    pub actas_required: i64,
    pub actas_provider_id: Option<String>,
    pub actas_oidc_url: Option<String>,
    pub actas_config_name: Option<String>,
    pub interactive_access: i64,
    pub created_at: i64,
    pub updated_at: i64,
}

impl AgentRow {
    /// Whether the agent may be called: `active` or `provisioned`.
    pub fn is_usable(&self) -> bool {
        portcullis_shared::api::agents::AgentStatus::parse(&self.status)
            .is_some_and(portcullis_shared::api::agents::AgentStatus::is_usable)
    }
}

pub async fn insert(conn: &mut Conn, r: &AgentRow) -> Result<(), StoreError> {
    sqlx::query(
        "INSERT INTO agents (id, workspace_id, name, status, status_reason, parent_id, metadata, \
         token_ttl_secs, allowed_pool_names, allowed_direct_model_names, allowed_tools, \
         actas_allowed_groups, actas_allowed_emails, actas_allowed_subjects, actas_method, \
         actas_required, actas_provider_id, actas_oidc_url, actas_config_name, \
         interactive_access, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, \
         $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22)",
    )
    .bind(&r.id)
    .bind(&r.workspace_id)
    .bind(&r.name)
    .bind(&r.status)
    .bind(&r.status_reason)
    .bind(&r.parent_id)
    .bind(&r.metadata)
    .bind(r.token_ttl_secs)
    .bind(&r.allowed_pool_names)
    .bind(&r.allowed_direct_model_names)
    .bind(&r.allowed_tools)
    .bind(&r.actas_allowed_groups)
    .bind(&r.actas_allowed_emails)
    .bind(&r.actas_allowed_subjects)
    .bind(&r.actas_method)
    .bind(r.actas_required)
    .bind(&r.actas_provider_id)
    .bind(&r.actas_oidc_url)
    .bind(&r.actas_config_name)
    .bind(r.interactive_access)
    .bind(r.created_at)
    .bind(r.updated_at)
    .execute(conn)
    .await?;
    Ok(())
}

/// Writes every mutable field back.
pub async fn update(conn: &mut Conn, r: &AgentRow) -> Result<(), StoreError> {
    sqlx::query(
        "UPDATE agents SET status = $1, status_reason = $2, metadata = $3, token_ttl_secs = $4, \
         allowed_pool_names = $5, allowed_direct_model_names = $6, allowed_tools = $7, \
         actas_allowed_groups = $8, actas_allowed_emails = $9, actas_allowed_subjects = $10, \
         actas_method = $11, actas_required = $12, actas_provider_id = $13, \
         actas_oidc_url = $14, actas_config_name = $15, interactive_access = $16, \
         updated_at = $17 WHERE id = $18 AND workspace_id = $19",
    )
    .bind(&r.status)
    .bind(&r.status_reason)
    .bind(&r.metadata)
    .bind(r.token_ttl_secs)
    .bind(&r.allowed_pool_names)
    .bind(&r.allowed_direct_model_names)
    .bind(&r.allowed_tools)
    .bind(&r.actas_allowed_groups)
    .bind(&r.actas_allowed_emails)
    .bind(&r.actas_allowed_subjects)
    .bind(&r.actas_method)
    .bind(r.actas_required)
    .bind(&r.actas_provider_id)
    .bind(&r.actas_oidc_url)
    .bind(&r.actas_config_name)
    .bind(r.interactive_access)
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
) -> Result<Option<AgentRow>, StoreError> {
    Ok(
        sqlx::query_as("SELECT * FROM agents WHERE workspace_id = $1 AND id = $2")
            .bind(workspace_id)
            .bind(id)
            .fetch_optional(conn)
            .await?,
    )
}

/// Finds an agent by id or, failing that, by name.
pub async fn find(
    conn: &mut Conn,
    workspace_id: &str,
    id_or_name: &str,
) -> Result<Option<AgentRow>, StoreError> {
    Ok(sqlx::query_as(
        "SELECT * FROM agents WHERE workspace_id = $1 AND (id = $2 OR name = $2) \
         ORDER BY CASE WHEN id = $2 THEN 0 ELSE 1 END LIMIT 1",
    )
    .bind(workspace_id)
    .bind(id_or_name)
    .fetch_optional(conn)
    .await?)
}

pub async fn list(
    conn: &mut Conn,
    workspace_id: &str,
    status: Option<&str>,
    limit: i64,
    offset: i64,
) -> Result<(Vec<AgentRow>, i64), StoreError> {
    let status = status.unwrap_or("");
    let rows = sqlx::query_as(
        "SELECT * FROM agents WHERE workspace_id = $1 AND ($2 = '' OR status = $2) \
         ORDER BY created_at, id LIMIT $3 OFFSET $4",
    )
    .bind(workspace_id)
    .bind(status)
    .bind(limit)
    .bind(offset)
    .fetch_all(&mut *conn)
    .await?;
    let total: (i64,) = sqlx::query_as(
        "SELECT COUNT(*) FROM agents WHERE workspace_id = $1 AND ($2 = '' OR status = $2)",
    )
    .bind(workspace_id)
    .bind(status)
    .fetch_one(conn)
    .await?;
    Ok((rows, total.0))
}

pub async fn all(conn: &mut Conn, workspace_id: &str) -> Result<Vec<AgentRow>, StoreError> {
    Ok(
        sqlx::query_as("SELECT * FROM agents WHERE workspace_id = $1 ORDER BY created_at, id")
            .bind(workspace_id)
            .fetch_all(conn)
            .await?,
    )
}

/// Ids of every descendant of an agent, parents before children.
pub async fn descendants(
    conn: &mut Conn,
    workspace_id: &str,
    id: &str,
) -> Result<Vec<String>, StoreError> {
    let mut out = Vec::new();
    let mut frontier = vec![id.to_string()];
    while let Some(parent) = frontier.pop() {
        let children: Vec<(String,)> = sqlx::query_as(
            "SELECT id FROM agents WHERE workspace_id = $1 AND parent_id = $2 ORDER BY created_at, id",
        )
        .bind(workspace_id)
        .bind(&parent)
        .fetch_all(&mut *conn)
        .await?;
        for (child,) in children {
            if !out.contains(&child) {
                frontier.push(child.clone());
                out.push(child);
            }
        }
    }
    Ok(out)
}

pub async fn delete(conn: &mut Conn, workspace_id: &str, id: &str) -> Result<bool, StoreError> {
    let done = sqlx::query("DELETE FROM agents WHERE workspace_id = $1 AND id = $2")
        .bind(workspace_id)
        .bind(id)
        .execute(conn)
        .await?;
    Ok(done.rows_affected() > 0)
}

#[derive(Debug, Clone, sqlx::FromRow)]
pub struct KeyRow {
    pub id: String,
    pub workspace_id: String,
    pub agent_id: String,
    pub name: String,
    pub key_hash: String,
    pub prefix: String,
    pub gateway_id: Option<String>,
    pub created_at: i64,
    pub rotated_at: Option<i64>,
    /// JSON `{sub, email, groups}` of the end user the key is bound to.
    pub bound_subject: Option<String>,
}

pub async fn insert_key(conn: &mut Conn, r: &KeyRow) -> Result<(), StoreError> {
    sqlx::query(
        "INSERT INTO agent_keys (id, workspace_id, agent_id, name, key_hash, prefix, gateway_id, \
         created_at, rotated_at, bound_subject) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
    )
    .bind(&r.id)
    .bind(&r.workspace_id)
    .bind(&r.agent_id)
    .bind(&r.name)
    .bind(&r.key_hash)
    .bind(&r.prefix)
    .bind(&r.gateway_id)
    .bind(r.created_at)
    .bind(r.rotated_at)
    .bind(&r.bound_subject)
    .execute(conn)
    .await?;
    Ok(())
}

pub async fn rotate_key(conn: &mut Conn, r: &KeyRow) -> Result<(), StoreError> {
    sqlx::query(
        "UPDATE agent_keys SET key_hash = $1, prefix = $2, gateway_id = $3, rotated_at = $4, \
         bound_subject = $5 WHERE id = $6",
    )
    .bind(&r.key_hash)
    .bind(&r.prefix)
    .bind(&r.gateway_id)
    .bind(r.rotated_at)
    .bind(&r.bound_subject)
    .bind(&r.id)
    .execute(conn)
    .await?;
    Ok(())
}

/// The key whose token hashes to `key_hash`.
pub async fn key_by_hash(conn: &mut Conn, key_hash: &str) -> Result<Option<KeyRow>, StoreError> {
    Ok(
        sqlx::query_as("SELECT * FROM agent_keys WHERE key_hash = $1")
            .bind(key_hash)
            .fetch_optional(conn)
            .await?,
    )
}

pub async fn key_by_name(
    conn: &mut Conn,
    agent_id: &str,
    name: &str,
) -> Result<Option<KeyRow>, StoreError> {
    Ok(
        sqlx::query_as("SELECT * FROM agent_keys WHERE agent_id = $1 AND name = $2")
            .bind(agent_id)
            .bind(name)
            .fetch_optional(conn)
            .await?,
    )
}

pub async fn keys(conn: &mut Conn, agent_id: &str) -> Result<Vec<KeyRow>, StoreError> {
    Ok(
        sqlx::query_as("SELECT * FROM agent_keys WHERE agent_id = $1 ORDER BY created_at, id")
            .bind(agent_id)
            .fetch_all(conn)
            .await?,
    )
}

/// Marks a `provisioned` agent `active`: its first key or interactive grant was issued.
pub async fn activate(conn: &mut Conn, id: &str, now: i64) -> Result<(), StoreError> {
    sqlx::query(
        "UPDATE agents SET status = 'active', updated_at = $1 WHERE id = $2 \
         AND status = 'provisioned'",
    )
    .bind(now)
    .bind(id)
    .execute(conn)
    .await?;
    Ok(())
}

/// Whether the agent was ever given a way to call: a key, or a person's interactive grant.
pub async fn has_credentials(conn: &mut Conn, id: &str) -> Result<bool, StoreError> {
    let (count,): (i64,) = sqlx::query_as(
        "SELECT (SELECT COUNT(*) FROM agent_keys WHERE agent_id = $1) \
         + (SELECT COUNT(*) FROM interactive_grants WHERE agent_id = $1)",
    )
    .bind(id)
    .fetch_one(conn)
    .await?;
    Ok(count > 0)
}

pub async fn all_keys(conn: &mut Conn, workspace_id: &str) -> Result<Vec<KeyRow>, StoreError> {
    Ok(sqlx::query_as(
        "SELECT * FROM agent_keys WHERE workspace_id = $1 ORDER BY agent_id, created_at",
    )
    .bind(workspace_id)
    .fetch_all(conn)
    .await?)
}

pub async fn delete_key(conn: &mut Conn, id: &str) -> Result<(), StoreError> {
    sqlx::query("DELETE FROM agent_keys WHERE id = $1")
        .bind(id)
        .execute(conn)
        .await?;
    Ok(())
}
