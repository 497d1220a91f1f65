//! Provision tokens: one-use, short-lived links bound to a connection and a person's `sub`.
//! Only their SHA-256 is stored.

use super::db::{Conn, StoreError};

#[derive(Debug, Clone, sqlx::FromRow)]
pub struct ProvisionRow {
    pub token_hash: String,
    pub workspace_id: String,
    pub owner_kind: String,
    pub owner_id: String,
    pub subject: String,
    pub expires_at: i64,
    pub used_at: Option<i64>,
    /// `provision` or `connect` (`""`: made before links were bound to their person).
    pub page: String,
    /// The agent whose call made a provision link (`""` for an administrator's).
    pub agent_id: String,
}

impl ProvisionRow {
    /// Whether only its person may use the link, after signing in: a link an agent's call
    /// made for a person (an administrator's link goes back to that administrator only).
    pub fn needs_person(&self) -> bool {
        self.page != "connect" && !self.subject.is_empty()
    }
}

pub async fn insert(conn: &mut Conn, r: &ProvisionRow) -> Result<(), StoreError> {
    sqlx::query(
        "INSERT INTO provision_tokens (token_hash, workspace_id, owner_kind, owner_id, subject, \
         expires_at, used_at, page, agent_id) VALUES ($1, $2, $3, $4, $5, $6, NULL, $7, $8)",
    )
    .bind(&r.token_hash)
    .bind(&r.workspace_id)
    .bind(&r.owner_kind)
    .bind(&r.owner_id)
    .bind(&r.subject)
    .bind(r.expires_at)
    .bind(&r.page)
    .bind(&r.agent_id)
    .execute(conn)
    .await?;
    Ok(())
}

/// The token, used or not.
pub async fn get(conn: &mut Conn, token_hash: &str) -> Result<Option<ProvisionRow>, StoreError> {
    Ok(
        sqlx::query_as("SELECT * FROM provision_tokens WHERE token_hash = $1")
            .bind(token_hash)
            .fetch_optional(conn)
            .await?,
    )
}

/// Marks the token used if it is unused and unexpired; whether it was.
pub async fn take(conn: &mut Conn, token_hash: &str, now: i64) -> Result<bool, StoreError> {
    let done = sqlx::query(
        "UPDATE provision_tokens SET used_at = $2 WHERE token_hash = $1 AND used_at IS NULL \
         AND expires_at > $2",
    )
    .bind(token_hash)
    .bind(now)
    .execute(conn)
    .await?;
    Ok(done.rows_affected() == 1)
}

/// Deletes tokens expired before `before`.
pub async fn purge(conn: &mut Conn, before: i64) -> Result<u64, StoreError> {
    let done = sqlx::query("DELETE FROM provision_tokens WHERE expires_at < $1")
        .bind(before)
        .execute(conn)
        .await?;
    Ok(done.rows_affected())
}
