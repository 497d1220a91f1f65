//! Model pools and their members.

use super::db::{Conn, StoreError};

#[derive(Debug, Clone, sqlx::FromRow)]
pub struct PoolRow {
    pub id: String,
    pub workspace_id: String,
    pub name: String,
    pub strategy: String,
    pub created_at: i64,
    pub updated_at: i64,
}

#[derive(Debug, Clone, sqlx::FromRow)]
pub struct MemberRow {
    pub pool_id: String,
    pub connection_id: String,
    pub weight: i64,
    pub priority: i64,
    pub position: i64,
    /// The member model's name (joined).
    pub name: String,
}

pub async fn insert(conn: &mut Conn, row: &PoolRow) -> Result<(), StoreError> {
    sqlx::query(
        "INSERT INTO pools (id, workspace_id, name, strategy, created_at, updated_at) \
         VALUES ($1, $2, $3, $4, $5, $6)",
    )
    .bind(&row.id)
    .bind(&row.workspace_id)
    .bind(&row.name)
    .bind(&row.strategy)
    .bind(row.created_at)
    .bind(row.updated_at)
    .execute(conn)
    .await?;
    Ok(())
}

pub async fn update(conn: &mut Conn, row: &PoolRow) -> Result<(), StoreError> {
    sqlx::query(
        "UPDATE pools SET name = $1, strategy = $2, updated_at = $3 \
         WHERE id = $4 AND workspace_id = $5",
    )
    .bind(&row.name)
    .bind(&row.strategy)
    .bind(row.updated_at)
    .bind(&row.id)
    .bind(&row.workspace_id)
    .execute(conn)
    .await?;
    Ok(())
}

pub async fn get(
    conn: &mut Conn,
    workspace_id: &str,
    id: &str,
) -> Result<Option<PoolRow>, StoreError> {
    Ok(
        sqlx::query_as("SELECT * FROM pools WHERE workspace_id = $1 AND id = $2")
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
) -> Result<Option<PoolRow>, StoreError> {
    Ok(
        sqlx::query_as("SELECT * FROM pools WHERE workspace_id = $1 AND name = $2")
            .bind(workspace_id)
            .bind(name)
            .fetch_optional(conn)
            .await?,
    )
}

pub async fn list(conn: &mut Conn, workspace_id: &str) -> Result<Vec<PoolRow>, StoreError> {
    Ok(
        sqlx::query_as("SELECT * FROM pools WHERE workspace_id = $1 ORDER BY name, id")
            .bind(workspace_id)
            .fetch_all(conn)
            .await?,
    )
}

pub async fn delete(conn: &mut Conn, workspace_id: &str, id: &str) -> Result<bool, StoreError> {
    let done = sqlx::query("DELETE FROM pools WHERE workspace_id = $1 AND id = $2")
        .bind(workspace_id)
        .bind(id)
        .execute(conn)
        .await?;
    Ok(done.rows_affected() > 0)
}

const MEMBER_SELECT: &str = "SELECT m.pool_id, m.connection_id, m.weight, m.priority, \
     m.position, c.name FROM pool_members m JOIN model_connections c ON c.id = m.connection_id";

/// Members of one pool, in position order.
pub async fn members(conn: &mut Conn, pool_id: &str) -> Result<Vec<MemberRow>, StoreError> {
    Ok(sqlx::query_as(&format!(
        "{MEMBER_SELECT} WHERE m.pool_id = $1 ORDER BY m.position"
    ))
    .bind(pool_id)
    .fetch_all(conn)
    .await?)
}

/// Members of every pool of a workspace, in pool and position order.
pub async fn all_members(
    conn: &mut Conn,
    workspace_id: &str,
) -> Result<Vec<MemberRow>, StoreError> {
    Ok(sqlx::query_as(&format!(
        "{MEMBER_SELECT} WHERE c.workspace_id = $1 ORDER BY m.pool_id, m.position"
    ))
    .bind(workspace_id)
    .fetch_all(conn)
    .await?)
}

pub async fn replace_members(
    conn: &mut Conn,
    pool_id: &str,
    members: &[(String, u32, u32)],
) -> Result<(), StoreError> {
    sqlx::query("DELETE FROM pool_members WHERE pool_id = $1")
        .bind(pool_id)
        .execute(&mut *conn)
        .await?;
    for (position, (connection_id, weight, priority)) in members.iter().enumerate() {
        add_member(
            conn,
            pool_id,
            connection_id,
            *weight,
            *priority,
            position as i64,
        )
        .await?;
    }
    Ok(())
}

pub async fn add_member(
    conn: &mut Conn,
    pool_id: &str,
    connection_id: &str,
    weight: u32,
    priority: u32,
    position: i64,
) -> Result<(), StoreError> {
    sqlx::query(
        "INSERT INTO pool_members (pool_id, connection_id, weight, priority, position) \
         VALUES ($1, $2, $3, $4, $5)",
    )
    .bind(pool_id)
    .bind(connection_id)
    .bind(i64::from(weight))
    .bind(i64::from(priority))
    .bind(position)
    .execute(conn)
    .await?;
    Ok(())
}

pub async fn next_position(conn: &mut Conn, pool_id: &str) -> Result<i64, StoreError> {
    let row: (Option<i64>,) =
        sqlx::query_as("SELECT MAX(position) FROM pool_members WHERE pool_id = $1")
            .bind(pool_id)
            .fetch_one(conn)
            .await?;
    Ok(row.0.map_or(0, |p| p + 1))
}

pub async fn remove_member(
    conn: &mut Conn,
    pool_id: &str,
    connection_id: &str,
) -> Result<bool, StoreError> {
    let done = sqlx::query("DELETE FROM pool_members WHERE pool_id = $1 AND connection_id = $2")
        .bind(pool_id)
        .bind(connection_id)
        .execute(conn)
        .await?;
    Ok(done.rows_affected() > 0)
}

/// Pools a model connection belongs to: (pool id, pool name).
pub async fn pools_of_model(
    conn: &mut Conn,
    connection_id: &str,
) -> Result<Vec<(String, String)>, StoreError> {
    Ok(sqlx::query_as(
        "SELECT p.id, p.name FROM pool_members m JOIN pools p ON p.id = m.pool_id \
         WHERE m.connection_id = $1 ORDER BY p.name",
    )
    .bind(connection_id)
    .fetch_all(conn)
    .await?)
}
