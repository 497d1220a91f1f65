//! Webhook subscriptions: which events (by type and filters) go to which destination.

use crate::store::{Conn, StoreError};

#[derive(Debug, Clone, sqlx::FromRow)]
pub struct SubscriptionRow {
    pub id: String,
    pub workspace_id: String,
    pub name: String,
    pub destination_id: String,
    /// JSON list of event types.
    pub event_types: String,
    /// JSON list of `key=value` / `key~=glob` filters.
    pub filters: String,
    pub enabled: i64,
    pub created_at: i64,
    pub updated_at: i64,
}

pub async fn insert_subscription(conn: &mut Conn, r: &SubscriptionRow) -> Result<(), StoreError> {
    sqlx::query(
        "INSERT INTO webhook_subscriptions (id, workspace_id, name, destination_id, event_types, \
         filters, enabled, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
    )
    .bind(&r.id)
    .bind(&r.workspace_id)
    .bind(&r.name)
    .bind(&r.destination_id)
    .bind(&r.event_types)
    .bind(&r.filters)
    .bind(r.enabled)
    .bind(r.created_at)
    .bind(r.updated_at)
    .execute(conn)
    .await?;
    Ok(())
}

pub async fn update_subscription(conn: &mut Conn, r: &SubscriptionRow) -> Result<(), StoreError> {
    sqlx::query(
        "UPDATE webhook_subscriptions SET name = $1, event_types = $2, filters = $3, \
         enabled = $4, updated_at = $5 WHERE id = $6 AND workspace_id = $7",
    )
    .bind(&r.name)
    .bind(&r.event_types)
    .bind(&r.filters)
    .bind(r.enabled)
    .bind(r.updated_at)
    .bind(&r.id)
    .bind(&r.workspace_id)
    .execute(conn)
    .await?;
    Ok(())
}

/// The subscription with this id or, failing that, this name.
pub async fn find_subscription(
    conn: &mut Conn,
    workspace_id: &str,
    given: &str,
) -> Result<Option<SubscriptionRow>, StoreError> {
    Ok(sqlx::query_as(
        "SELECT * FROM webhook_subscriptions WHERE workspace_id = $1 AND (id = $2 OR name = $2) \
         ORDER BY CASE WHEN id = $2 THEN 0 ELSE 1 END LIMIT 1",
    )
    .bind(workspace_id)
    .bind(given)
    .fetch_optional(conn)
    .await?)
}

pub async fn list_subscriptions(
    conn: &mut Conn,
    workspace_id: &str,
) -> Result<Vec<SubscriptionRow>, StoreError> {
    Ok(sqlx::query_as(
        "SELECT * FROM webhook_subscriptions WHERE workspace_id = $1 ORDER BY name, id",
    )
    .bind(workspace_id)
    .fetch_all(conn)
    .await?)
}

/// How many subscriptions send to a destination.
pub async fn subscriptions_of(conn: &mut Conn, destination_id: &str) -> Result<i64, StoreError> {
    let (n,): (i64,) =
        sqlx::query_as("SELECT COUNT(*) FROM webhook_subscriptions WHERE destination_id = $1")
            .bind(destination_id)
            .fetch_one(conn)
            .await?;
    Ok(n)
}

pub async fn delete_subscription(conn: &mut Conn, id: &str) -> Result<(), StoreError> {
    sqlx::query("DELETE FROM webhook_subscriptions WHERE id = $1")
        .bind(id)
        .execute(conn)
        .await?;
    Ok(())
}

/// The workspaces with an enabled subscription: only their events are queued.
pub async fn subscribed_workspaces(conn: &mut Conn) -> Result<Vec<String>, StoreError> {
    let rows: Vec<(String,)> =
        sqlx::query_as("SELECT DISTINCT workspace_id FROM webhook_subscriptions WHERE enabled = 1")
            .fetch_all(conn)
            .await?;
    Ok(rows.into_iter().map(|(w,)| w).collect())
}

/// Enabled subscriptions of a workspace (the dispatcher's view).
pub async fn enabled_subscriptions(
    conn: &mut Conn,
    workspace_id: &str,
) -> Result<Vec<SubscriptionRow>, StoreError> {
    Ok(sqlx::query_as(
        "SELECT * FROM webhook_subscriptions WHERE workspace_id = $1 AND enabled = 1",
    )
    .bind(workspace_id)
    .fetch_all(conn)
    .await?)
}
