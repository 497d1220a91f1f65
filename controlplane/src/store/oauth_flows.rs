//! OAuth consents under way (DESIGN §14): the PKCE verifier of each authorization request,
//! sealed, found by the SHA-256 of its `state` and used once; and the client settings a
//! consent registers.

use portcullis_shared::seal::Cipher;

use super::credentials::Owner;
use super::db::{Conn, StoreError};

#[derive(Debug, Clone, sqlx::FromRow)]
pub struct FlowRow {
    pub state_hash: String,
    pub workspace_id: String,
    pub owner_kind: String,
    pub owner_id: String,
    /// `""` for a connection's shared grant, else the person's `sub`.
    pub subject: String,
    /// The PKCE verifier, sealed.
    pub verifier: String,
    pub expires_at: i64,
}

fn label(state_hash: &str) -> String {
    format!("oauth_flow:{state_hash}")
}

/// Records a request sent to a provider, its verifier sealed.
pub async fn insert(
    conn: &mut Conn,
    cipher: &Cipher,
    mut row: FlowRow,
    verifier: &str,
) -> Result<(), StoreError> {
    row.verifier = cipher.seal(&label(&row.state_hash), verifier.as_bytes())?;
    sqlx::query(
        "INSERT INTO oauth_flows (state_hash, workspace_id, owner_kind, owner_id, subject, \
         verifier, expires_at) VALUES ($1, $2, $3, $4, $5, $6, $7)",
    )
    .bind(&row.state_hash)
    .bind(&row.workspace_id)
    .bind(&row.owner_kind)
    .bind(&row.owner_id)
    .bind(&row.subject)
    .bind(&row.verifier)
    .bind(row.expires_at)
    .execute(conn)
    .await?;
    Ok(())
}

/// Removes the flow of this state and returns it with its verifier opened: a state is used
/// once, whether or not it has expired (the caller checks `expires_at`).
pub async fn take(
    conn: &mut Conn,
    cipher: &Cipher,
    state_hash: &str,
) -> Result<Option<(FlowRow, String)>, StoreError> {
    let row: Option<FlowRow> =
        sqlx::query_as("DELETE FROM oauth_flows WHERE state_hash = $1 RETURNING *")
            .bind(state_hash)
            .fetch_optional(&mut *conn)
            .await?;
    let Some(row) = row else { return Ok(None) };
    let verifier = cipher.open(&label(&row.state_hash), &row.verifier)?;
    let verifier = String::from_utf8(verifier).map_err(super::db::corrupt)?;
    Ok(Some((row, verifier)))
}

/// Whether a shared consent of this connection is under way: an unused connect link or an
/// authorization request not yet answered, unexpired.
pub async fn shared_pending(conn: &mut Conn, owner_id: &str, now: i64) -> Result<bool, StoreError> {
    let (n,): (i64,) = sqlx::query_as(
        "SELECT (SELECT COUNT(*) FROM oauth_flows WHERE owner_id = $1 AND subject = '' \
         AND expires_at > $2) + (SELECT COUNT(*) FROM provision_tokens WHERE owner_id = $1 \
         AND subject = '' AND used_at IS NULL AND expires_at > $2)",
    )
    .bind(owner_id)
    .bind(now)
    .fetch_one(conn)
    .await?;
    Ok(n > 0)
}

/// Cancels a connection's shared consents under way: unused connect links and unanswered
/// authorization requests (on disconnect, and once one consent has completed).
pub async fn cancel_shared(conn: &mut Conn, owner_id: &str) -> Result<(), StoreError> {
    sqlx::query("DELETE FROM oauth_flows WHERE owner_id = $1 AND subject = ''")
        .bind(owner_id)
        .execute(&mut *conn)
        .await?;
    sqlx::query(
        "DELETE FROM provision_tokens WHERE owner_id = $1 AND subject = '' AND used_at IS NULL",
    )
    .bind(owner_id)
    .execute(conn)
    .await?;
    Ok(())
}

/// Replaces a connection's OAuth client settings only (a registered client id): callers of
/// the upstream need not start over, so the connection's fingerprint stays.
pub async fn set_client_settings(
    conn: &mut Conn,
    owner: Owner,
    workspace_id: &str,
    id: &str,
    auth_config: &str,
) -> Result<(), StoreError> {
    let table = match owner {
        Owner::Model => "model_connections",
        _ => "tool_connections",
    };
    sqlx::query(&format!(
        "UPDATE {table} SET auth_config = $1 WHERE id = $2 AND workspace_id = $3"
    ))
    .bind(auth_config)
    .bind(id)
    .bind(workspace_id)
    .execute(conn)
    .await?;
    Ok(())
}

/// Deletes flows expired before `before`.
pub async fn purge(conn: &mut Conn, before: i64) -> Result<u64, StoreError> {
    let done = sqlx::query("DELETE FROM oauth_flows WHERE expires_at < $1")
        .bind(before)
        .execute(conn)
        .await?;
    Ok(done.rows_affected())
}
