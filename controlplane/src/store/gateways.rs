//! Gateways, their memberships and their per-agent access grants.

use super::db::{Conn, StoreError};

#[derive(Debug, Clone, sqlx::FromRow)]
pub struct GatewayRow {
    pub id: String,
    pub workspace_id: String,
    pub name: String,
    pub description: String,
    pub state: String,
    pub is_default: i64,
    pub all_agents: i64,
    pub created_at: i64,
    pub updated_at: i64,
}

#[derive(Debug, Clone, sqlx::FromRow)]
pub struct MemberRow {
    pub gateway_id: String,
    pub kind: String,
    pub target_id: String,
    pub tool: String,
    pub created_at: i64,
}

pub async fn insert(conn: &mut Conn, row: &GatewayRow) -> Result<(), StoreError> {
    sqlx::query(
        "INSERT INTO gateways (id, workspace_id, name, description, state, is_default, \
         all_agents, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
    )
    .bind(&row.id)
    .bind(&row.workspace_id)
    .bind(&row.name)
    .bind(&row.description)
    .bind(&row.state)
    .bind(row.is_default)
    .bind(row.all_agents)
    .bind(row.created_at)
    .bind(row.updated_at)
    .execute(conn)
    .await?;
    Ok(())
}

pub async fn update(conn: &mut Conn, row: &GatewayRow) -> Result<(), StoreError> {
    sqlx::query(
        "UPDATE gateways SET name = $1, description = $2, state = $3, is_default = $4, \
         all_agents = $5, updated_at = $6 WHERE id = $7 AND workspace_id = $8",
    )
    .bind(&row.name)
    .bind(&row.description)
    .bind(&row.state)
    .bind(row.is_default)
    .bind(row.all_agents)
    .bind(row.updated_at)
    .bind(&row.id)
    .bind(&row.workspace_id)
    .execute(conn)
    .await?;
    Ok(())
}

pub async fn clear_default(conn: &mut Conn, workspace_id: &str) -> Result<(), StoreError> {
    sqlx::query("UPDATE gateways SET is_default = 0 WHERE workspace_id = $1 AND is_default = 1")
        .bind(workspace_id)
        .execute(conn)
        .await?;
    Ok(())
}

pub async fn get(
    conn: &mut Conn,
    workspace_id: &str,
    id: &str,
) -> Result<Option<GatewayRow>, StoreError> {
    Ok(
        sqlx::query_as("SELECT * FROM gateways WHERE workspace_id = $1 AND id = $2")
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
) -> Result<Option<GatewayRow>, StoreError> {
    Ok(
        sqlx::query_as("SELECT * FROM gateways WHERE workspace_id = $1 AND name = $2")
            .bind(workspace_id)
            .bind(name)
            .fetch_optional(conn)
            .await?,
    )
}

pub async fn list(conn: &mut Conn, workspace_id: &str) -> Result<Vec<GatewayRow>, StoreError> {
    Ok(
        sqlx::query_as("SELECT * FROM gateways WHERE workspace_id = $1 ORDER BY name, id")
            .bind(workspace_id)
            .fetch_all(conn)
            .await?,
    )
}

/// Deletes the gateway; memberships and grants go with it (foreign keys).
pub async fn delete(conn: &mut Conn, workspace_id: &str, id: &str) -> Result<bool, StoreError> {
    let done = sqlx::query("DELETE FROM gateways WHERE workspace_id = $1 AND id = $2")
        .bind(workspace_id)
        .bind(id)
        .execute(conn)
        .await?;
    Ok(done.rows_affected() > 0)
}

pub async fn members(conn: &mut Conn, gateway_id: &str) -> Result<Vec<MemberRow>, StoreError> {
    Ok(sqlx::query_as(
        "SELECT * FROM gateway_members WHERE gateway_id = $1 ORDER BY created_at, kind, target_id, tool",
    )
    .bind(gateway_id)
    .fetch_all(conn)
    .await?)
}

pub async fn all_members(
    conn: &mut Conn,
    workspace_id: &str,
) -> Result<Vec<MemberRow>, StoreError> {
    Ok(sqlx::query_as(
        "SELECT m.* FROM gateway_members m JOIN gateways g ON g.id = m.gateway_id \
         WHERE g.workspace_id = $1 ORDER BY m.gateway_id, m.created_at, m.kind, m.target_id, m.tool",
    )
    .bind(workspace_id)
    .fetch_all(conn)
    .await?)
}

/// Adds a membership; `false` when it already exists.
pub async fn add_member(
    conn: &mut Conn,
    gateway_id: &str,
    kind: &str,
    target_id: &str,
    tool: &str,
    now: i64,
) -> Result<bool, StoreError> {
    let done = sqlx::query(
        "INSERT INTO gateway_members (gateway_id, kind, target_id, tool, created_at) \
         VALUES ($1, $2, $3, $4, $5) ON CONFLICT DO NOTHING",
    )
    .bind(gateway_id)
    .bind(kind)
    .bind(target_id)
    .bind(tool)
    .bind(now)
    .execute(conn)
    .await?;
    Ok(done.rows_affected() > 0)
}

pub async fn remove_member(
    conn: &mut Conn,
    gateway_id: &str,
    kind: &str,
    target_id: &str,
    tool: &str,
) -> Result<bool, StoreError> {
    let done = sqlx::query(
        "DELETE FROM gateway_members WHERE gateway_id = $1 AND kind = $2 AND target_id = $3 \
         AND tool = $4",
    )
    .bind(gateway_id)
    .bind(kind)
    .bind(target_id)
    .bind(tool)
    .execute(conn)
    .await?;
    Ok(done.rows_affected() > 0)
}

/// Removes every membership pointing at a model, pool or connection.
pub async fn remove_target(conn: &mut Conn, target_id: &str) -> Result<(), StoreError> {
    sqlx::query("DELETE FROM gateway_members WHERE target_id = $1")
        .bind(target_id)
        .execute(conn)
        .await?;
    Ok(())
}

/// Gateways a model, pool or connection is a member of: (gateway id, gateway name).
pub async fn gateways_of_target(
    conn: &mut Conn,
    target_id: &str,
) -> Result<Vec<(String, String)>, StoreError> {
    Ok(sqlx::query_as(
        "SELECT DISTINCT g.id, g.name FROM gateway_members m JOIN gateways g ON g.id = m.gateway_id \
         WHERE m.target_id = $1 ORDER BY g.name",
    )
    .bind(target_id)
    .fetch_all(conn)
    .await?)
}

pub async fn grant(
    conn: &mut Conn,
    gateway_id: &str,
    agent_id: &str,
    now: i64,
) -> Result<(), StoreError> {
    sqlx::query(
        "INSERT INTO gateway_agent_grants (gateway_id, agent_id, created_at) VALUES ($1, $2, $3) \
         ON CONFLICT DO NOTHING",
    )
    .bind(gateway_id)
    .bind(agent_id)
    .bind(now)
    .execute(conn)
    .await?;
    Ok(())
}

pub async fn revoke_grant(
    conn: &mut Conn,
    gateway_id: &str,
    agent_id: &str,
) -> Result<(), StoreError> {
    sqlx::query("DELETE FROM gateway_agent_grants WHERE gateway_id = $1 AND agent_id = $2")
        .bind(gateway_id)
        .bind(agent_id)
        .execute(conn)
        .await?;
    Ok(())
}

pub async fn clear_agent_grants(conn: &mut Conn, agent_id: &str) -> Result<(), StoreError> {
    sqlx::query("DELETE FROM gateway_agent_grants WHERE agent_id = $1")
        .bind(agent_id)
        .execute(conn)
        .await?;
    Ok(())
}

/// Agents granted one gateway, by id.
pub async fn granted_agents(conn: &mut Conn, gateway_id: &str) -> Result<Vec<String>, StoreError> {
    let rows: Vec<(String,)> = sqlx::query_as(
        "SELECT agent_id FROM gateway_agent_grants WHERE gateway_id = $1 ORDER BY agent_id",
    )
    .bind(gateway_id)
    .fetch_all(conn)
    .await?;
    Ok(rows.into_iter().map(|r| r.0).collect())
}

/// Every grant of a workspace: (gateway id, agent id).
pub async fn all_grants(
    conn: &mut Conn,
    workspace_id: &str,
) -> Result<Vec<(String, String)>, StoreError> {
    Ok(sqlx::query_as(
        "SELECT r.gateway_id, r.agent_id FROM gateway_agent_grants r \
         JOIN gateways g ON g.id = r.gateway_id WHERE g.workspace_id = $1 \
         ORDER BY r.gateway_id, r.agent_id",
    )
    .bind(workspace_id)
    .fetch_all(conn)
    .await?)
}

/// Gateways one agent is granted individually.
pub async fn grants_of_agent(conn: &mut Conn, agent_id: &str) -> Result<Vec<String>, StoreError> {
    let rows: Vec<(String,)> = sqlx::query_as(
        "SELECT gateway_id FROM gateway_agent_grants WHERE agent_id = $1 ORDER BY gateway_id",
    )
    .bind(agent_id)
    .fetch_all(conn)
    .await?;
    Ok(rows.into_iter().map(|r| r.0).collect())
}

/// Gateways an agent can reach: its grants plus every all-agents gateway.
pub async fn reachable_by_agent(
    conn: &mut Conn,
    workspace_id: &str,
    agent_id: &str,
) -> Result<Vec<String>, StoreError> {
    let rows: Vec<(String,)> = sqlx::query_as(
        "SELECT id FROM gateways WHERE workspace_id = $1 AND (all_agents = 1 OR id IN \
         (SELECT gateway_id FROM gateway_agent_grants WHERE agent_id = $2)) ORDER BY name, id",
    )
    .bind(workspace_id)
    .bind(agent_id)
    .fetch_all(conn)
    .await?;
    Ok(rows.into_iter().map(|r| r.0).collect())
}

/// A gateway by id alone (a gateway's URL names no workspace).
pub async fn by_id(conn: &mut Conn, id: &str) -> Result<Option<GatewayRow>, StoreError> {
    Ok(sqlx::query_as("SELECT * FROM gateways WHERE id = $1")
        .bind(id)
        .fetch_optional(conn)
        .await?)
}
