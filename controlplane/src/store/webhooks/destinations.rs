//! Webhook destinations: where deliveries go, with their sealed signing secrets and
//! provider settings.

use crate::store::{Conn, StoreError};

#[derive(Debug, Clone, sqlx::FromRow)]
pub struct DestinationRow {
    pub id: String,
    pub workspace_id: String,
    pub name: String,
    pub provider: String,
    pub endpoint: String,
    /// JSON object: the provider's settings that are not secret.
    pub settings: String,
    /// Sealed JSON object: the provider's secret settings.
    pub sealed_settings: Option<String>,
    pub key_id: String,
    /// Sealed `whsec_` secret.
    pub secret: String,
    pub previous_key_id: Option<String>,
    pub previous_secret: Option<String>,
    /// Until when the previous secret still signs (Unix ms).
    pub previous_until: Option<i64>,
    pub enabled: i64,
    pub disabled_reason: String,
    pub created_at: i64,
    pub updated_at: i64,
}

pub async fn insert_destination(conn: &mut Conn, r: &DestinationRow) -> Result<(), StoreError> {
    sqlx::query(
        "INSERT INTO webhook_destinations (id, workspace_id, name, provider, endpoint, settings, \
         sealed_settings, key_id, secret, previous_key_id, previous_secret, previous_until, \
         enabled, disabled_reason, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, \
         $8, $9, $10, $11, $12, $13, $14, $15, $16)",
    )
    .bind(&r.id)
    .bind(&r.workspace_id)
    .bind(&r.name)
    .bind(&r.provider)
    .bind(&r.endpoint)
    .bind(&r.settings)
    .bind(&r.sealed_settings)
    .bind(&r.key_id)
    .bind(&r.secret)
    .bind(&r.previous_key_id)
    .bind(&r.previous_secret)
    .bind(r.previous_until)
    .bind(r.enabled)
    .bind(&r.disabled_reason)
    .bind(r.created_at)
    .bind(r.updated_at)
    .execute(conn)
    .await?;
    Ok(())
}

/// Writes every mutable field back.
pub async fn update_destination(conn: &mut Conn, r: &DestinationRow) -> Result<(), StoreError> {
    sqlx::query(
        "UPDATE webhook_destinations SET name = $1, endpoint = $2, settings = $3, \
         sealed_settings = $4, key_id = $5, secret = $6, previous_key_id = $7, \
         previous_secret = $8, previous_until = $9, enabled = $10, disabled_reason = $11, \
         updated_at = $12 WHERE id = $13 AND workspace_id = $14",
    )
    .bind(&r.name)
    .bind(&r.endpoint)
    .bind(&r.settings)
    .bind(&r.sealed_settings)
    .bind(&r.key_id)
    .bind(&r.secret)
    .bind(&r.previous_key_id)
    .bind(&r.previous_secret)
    .bind(r.previous_until)
    .bind(r.enabled)
    .bind(&r.disabled_reason)
    .bind(r.updated_at)
    .bind(&r.id)
    .bind(&r.workspace_id)
    .execute(conn)
    .await?;
    Ok(())
}

/// The destination with this id or, failing that, this name.
pub async fn find_destination(
    conn: &mut Conn,
    workspace_id: &str,
    given: &str,
) -> Result<Option<DestinationRow>, StoreError> {
    Ok(sqlx::query_as(
        "SELECT * FROM webhook_destinations WHERE workspace_id = $1 AND (id = $2 OR name = $2) \
         ORDER BY CASE WHEN id = $2 THEN 0 ELSE 1 END LIMIT 1",
    )
    .bind(workspace_id)
    .bind(given)
    .fetch_optional(conn)
    .await?)
}

/// A destination by id alone (the sender's lookup).
pub async fn destination(conn: &mut Conn, id: &str) -> Result<Option<DestinationRow>, StoreError> {
    Ok(
        sqlx::query_as("SELECT * FROM webhook_destinations WHERE id = $1")
            .bind(id)
            .fetch_optional(conn)
            .await?,
    )
}

pub async fn list_destinations(
    conn: &mut Conn,
    workspace_id: &str,
) -> Result<Vec<DestinationRow>, StoreError> {
    Ok(sqlx::query_as(
        "SELECT * FROM webhook_destinations WHERE workspace_id = $1 ORDER BY name, id",
    )
    .bind(workspace_id)
    .fetch_all(conn)
    .await?)
}

pub async fn delete_destination(conn: &mut Conn, id: &str) -> Result<(), StoreError> {
    sqlx::query("DELETE FROM webhook_destinations WHERE id = $1")
        .bind(id)
        .execute(conn)
        .await?;
    Ok(())
}

/// Stops deliveries to a destination (its endpoint answered `410 Gone`).
pub async fn disable_destination(
    conn: &mut Conn,
    id: &str,
    reason: &str,
    now: i64,
) -> Result<(), StoreError> {
    sqlx::query(
        "UPDATE webhook_destinations SET enabled = 0, disabled_reason = $1, updated_at = $2 \
         WHERE id = $3",
    )
    .bind(reason)
    .bind(now)
    .bind(id)
    .execute(conn)
    .await?;
    Ok(())
}
