//! Interactive access (DESIGN §15): registered MCP clients, authorization steps under way,
//! grants and the refresh tokens beneath them, people's remembered consents, and this
//! service's own client at each OpenID provider it signs people in with. Secrets are kept as
//! SHA-256 hashes (what callers present) or sealed (what this service presents).

use portcullis_shared::seal::Cipher;

use super::db::{Conn, StoreError};

#[derive(Debug, Clone, sqlx::FromRow)]
pub struct ClientRow {
    pub client_id: String,
    pub client_name: String,
    /// JSON list of the exact redirect URIs the client registered.
    pub redirect_uris: String,
    /// `none`, `client_secret_basic` or `client_secret_post`.
    pub auth_method: String,
    /// SHA-256 of the client's secret; empty for a public client.
    pub secret_hash: String,
    pub created_at: i64,
}

/// Records a client: a new registration, or a client known by its metadata document (again:
/// what the document says now replaces its name and redirect URIs).
pub async fn save_client(conn: &mut Conn, r: &ClientRow) -> Result<(), StoreError> {
    sqlx::query(
        "INSERT INTO interactive_clients (client_id, client_name, redirect_uris, auth_method, \
         secret_hash, created_at) VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (client_id) \
         DO UPDATE SET client_name = $2, redirect_uris = $3",
    )
    .bind(&r.client_id)
    .bind(&r.client_name)
    .bind(&r.redirect_uris)
    .bind(&r.auth_method)
    .bind(&r.secret_hash)
    .bind(r.created_at)
    .execute(conn)
    .await?;
    Ok(())
}

pub async fn client(conn: &mut Conn, client_id: &str) -> Result<Option<ClientRow>, StoreError> {
    Ok(
        sqlx::query_as("SELECT * FROM interactive_clients WHERE client_id = $1")
            .bind(client_id)
            .fetch_optional(conn)
            .await?,
    )
}

/// Notes that a code was issued to the client (the first time counts), so that it is kept.
pub async fn mark_client_used(
    conn: &mut Conn,
    client_id: &str,
    now: i64,
) -> Result<(), StoreError> {
    sqlx::query(
        "UPDATE interactive_clients SET used_at = $1 WHERE client_id = $2 AND used_at IS NULL",
    )
    .bind(now)
    .bind(client_id)
    .execute(conn)
    .await?;
    Ok(())
}

/// How long a registered client to which no code was ever issued is kept.
pub const UNUSED_CLIENT_MS: i64 = 24 * 3600 * 1000;

fn pending_label(kind: &str, key_hash: &str) -> String {
    format!("interactive_{kind}:{key_hash}")
}

/// Records one step of an authorization under way, its data sealed.
pub async fn put_pending(
    conn: &mut Conn,
    cipher: &Cipher,
    kind: &str,
    key_hash: &str,
    workspace_id: &str,
    data: &str,
    expires_at: i64,
) -> Result<(), StoreError> {
    let sealed = cipher.seal(&pending_label(kind, key_hash), data.as_bytes())?;
    sqlx::query(
        "INSERT INTO interactive_pending (key_hash, kind, workspace_id, data, expires_at) \
         VALUES ($1, $2, $3, $4, $5)",
    )
    .bind(key_hash)
    .bind(kind)
    .bind(workspace_id)
    .bind(sealed)
    .bind(expires_at)
    .execute(conn)
    .await?;
    Ok(())
}

/// Removes the step named by `key_hash` and returns its data opened, with its expiry: a step
/// is used once, whether or not it has expired (the caller checks).
pub async fn take_pending(
    conn: &mut Conn,
    cipher: &Cipher,
    kind: &str,
    key_hash: &str,
) -> Result<Option<(String, i64)>, StoreError> {
    let row: Option<(String, i64)> = sqlx::query_as(
        "DELETE FROM interactive_pending WHERE key_hash = $1 AND kind = $2 \
         RETURNING data, expires_at",
    )
    .bind(key_hash)
    .bind(kind)
    .fetch_optional(&mut *conn)
    .await?;
    let Some((sealed, expires_at)) = row else {
        return Ok(None);
    };
    let data = cipher.open(&pending_label(kind, key_hash), &sealed)?;
    let data = String::from_utf8(data).map_err(super::db::corrupt)?;
    Ok(Some((data, expires_at)))
}

/// Deletes steps expired before `now`, refresh tokens past their lifetime, and clients
/// registered more than [`UNUSED_CLIENT_MS`] before `now` that no code, grant or consent ever
/// used; how many clients.
pub async fn purge(conn: &mut Conn, now: i64) -> Result<u64, StoreError> {
    sqlx::query("DELETE FROM interactive_pending WHERE expires_at < $1")
        .bind(now)
        .execute(&mut *conn)
        .await?;
    sqlx::query("DELETE FROM interactive_refresh_tokens WHERE expires_at < $1")
        .bind(now)
        .execute(&mut *conn)
        .await?;
    let clients = sqlx::query(
        "DELETE FROM interactive_clients WHERE used_at IS NULL AND created_at < $1 \
         AND NOT EXISTS (SELECT 1 FROM interactive_grants g \
                         WHERE g.client_id = interactive_clients.client_id) \
         AND NOT EXISTS (SELECT 1 FROM interactive_consents c \
                         WHERE c.client_id = interactive_clients.client_id)",
    )
    .bind(now - UNUSED_CLIENT_MS)
    .execute(conn)
    .await?;
    Ok(clients.rows_affected())
}

#[derive(Debug, Clone, sqlx::FromRow)]
pub struct GrantRow {
    pub id: String,
    pub workspace_id: String,
    pub agent_id: String,
    pub gateway_id: String,
    pub client_id: String,
    pub subject: String,
    pub email: String,
    pub created_at: i64,
    pub last_used_at: i64,
    pub revoked_at: Option<i64>,
}

pub async fn insert_grant(conn: &mut Conn, r: &GrantRow) -> Result<(), StoreError> {
    sqlx::query(
        "INSERT INTO interactive_grants (id, workspace_id, agent_id, gateway_id, client_id, \
         subject, email, created_at, last_used_at, revoked_at) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
    )
    .bind(&r.id)
    .bind(&r.workspace_id)
    .bind(&r.agent_id)
    .bind(&r.gateway_id)
    .bind(&r.client_id)
    .bind(&r.subject)
    .bind(&r.email)
    .bind(r.created_at)
    .bind(r.last_used_at)
    .bind(r.revoked_at)
    .execute(conn)
    .await?;
    Ok(())
}

pub async fn grant(conn: &mut Conn, id: &str) -> Result<Option<GrantRow>, StoreError> {
    Ok(
        sqlx::query_as("SELECT * FROM interactive_grants WHERE id = $1")
            .bind(id)
            .fetch_optional(conn)
            .await?,
    )
}

/// A grant as listed: with its agent's and client's names and its outstanding refresh tokens.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct ListedGrant {
    #[sqlx(flatten)]
    pub grant: GrantRow,
    pub agent_name: String,
    pub client_name: String,
    pub refresh_tokens: i64,
}

/// The workspace's live grants, of one agent or all, newest first.
pub async fn list_grants(
    conn: &mut Conn,
    workspace_id: &str,
    agent_id: Option<&str>,
) -> Result<Vec<ListedGrant>, StoreError> {
    Ok(sqlx::query_as(
        "SELECT g.*, a.name AS agent_name, COALESCE(c.client_name, '') AS client_name, \
         (SELECT COUNT(*) FROM interactive_refresh_tokens t WHERE t.grant_id = g.id \
          AND t.used_at IS NULL) AS refresh_tokens \
         FROM interactive_grants g JOIN agents a ON a.id = g.agent_id \
         LEFT JOIN interactive_clients c ON c.client_id = g.client_id \
         WHERE g.workspace_id = $1 AND g.revoked_at IS NULL AND ($2 = '' OR g.agent_id = $2) \
         ORDER BY g.created_at DESC, g.id",
    )
    .bind(workspace_id)
    .bind(agent_id.unwrap_or_default())
    .fetch_all(conn)
    .await?)
}

/// Revokes a live grant, deletes its refresh tokens and the person's remembered consent for
/// its client and agent (the next sign-in asks again); how many refresh tokens there were, or
/// `None` when the grant was not live.
pub async fn revoke_grant(conn: &mut Conn, id: &str, now: i64) -> Result<Option<u64>, StoreError> {
    let done: Option<(String, String, String)> = sqlx::query_as(
        "UPDATE interactive_grants SET revoked_at = $1 WHERE id = $2 AND revoked_at IS NULL \
         RETURNING subject, client_id, agent_id",
    )
    .bind(now)
    .bind(id)
    .fetch_optional(&mut *conn)
    .await?;
    let Some((subject, client_id, agent_id)) = done else {
        return Ok(None);
    };
    forget_consent(conn, &subject, &client_id, &agent_id).await?;
    let tokens = sqlx::query(
        "DELETE FROM interactive_refresh_tokens WHERE grant_id = $1 AND used_at IS NULL",
    )
    .bind(id)
    .execute(conn)
    .await?;
    Ok(Some(tokens.rows_affected()))
}

/// Whether the person (`sub` at the agent's OpenID provider) consented to the client using
/// the agent as them.
pub async fn has_consent(
    conn: &mut Conn,
    subject: &str,
    client_id: &str,
    agent_id: &str,
) -> Result<bool, StoreError> {
    let row: Option<(i64,)> = sqlx::query_as(
        "SELECT created_at FROM interactive_consents WHERE subject = $1 AND client_id = $2 \
         AND agent_id = $3",
    )
    .bind(subject)
    .bind(client_id)
    .bind(agent_id)
    .fetch_optional(conn)
    .await?;
    Ok(row.is_some())
}

/// Remembers the person's consent to the client using the agent as them.
pub async fn put_consent(
    conn: &mut Conn,
    workspace_id: &str,
    subject: &str,
    client_id: &str,
    agent_id: &str,
    now: i64,
) -> Result<(), StoreError> {
    sqlx::query(
        "INSERT INTO interactive_consents (workspace_id, subject, client_id, agent_id, \
         created_at) VALUES ($1, $2, $3, $4, $5) \
         ON CONFLICT (subject, client_id, agent_id) DO NOTHING",
    )
    .bind(workspace_id)
    .bind(subject)
    .bind(client_id)
    .bind(agent_id)
    .bind(now)
    .execute(conn)
    .await?;
    Ok(())
}

async fn forget_consent(
    conn: &mut Conn,
    subject: &str,
    client_id: &str,
    agent_id: &str,
) -> Result<(), StoreError> {
    sqlx::query(
        "DELETE FROM interactive_consents WHERE subject = $1 AND client_id = $2 \
         AND agent_id = $3",
    )
    .bind(subject)
    .bind(client_id)
    .bind(agent_id)
    .execute(conn)
    .await?;
    Ok(())
}

/// The live grants of one agent (to revoke those its settings no longer admit).
pub async fn agent_grants(conn: &mut Conn, agent_id: &str) -> Result<Vec<GrantRow>, StoreError> {
    Ok(sqlx::query_as(
        "SELECT * FROM interactive_grants WHERE agent_id = $1 AND revoked_at IS NULL",
    )
    .bind(agent_id)
    .fetch_all(conn)
    .await?)
}

/// Grants of the workspace revoked at or after `since`.
pub async fn revoked_since(
    conn: &mut Conn,
    workspace_id: &str,
    since: i64,
) -> Result<Vec<String>, StoreError> {
    let rows: Vec<(String,)> = sqlx::query_as(
        "SELECT id FROM interactive_grants WHERE workspace_id = $1 AND revoked_at >= $2 \
         ORDER BY id",
    )
    .bind(workspace_id)
    .bind(since)
    .fetch_all(conn)
    .await?;
    Ok(rows.into_iter().map(|r| r.0).collect())
}

pub async fn touch_grant(conn: &mut Conn, id: &str, now: i64) -> Result<(), StoreError> {
    sqlx::query("UPDATE interactive_grants SET last_used_at = $1 WHERE id = $2")
        .bind(now)
        .bind(id)
        .execute(conn)
        .await?;
    Ok(())
}

pub async fn insert_refresh(
    conn: &mut Conn,
    token_hash: &str,
    grant_id: &str,
    expires_at: i64,
) -> Result<(), StoreError> {
    sqlx::query(
        "INSERT INTO interactive_refresh_tokens (token_hash, grant_id, expires_at, used_at) \
         VALUES ($1, $2, $3, NULL)",
    )
    .bind(token_hash)
    .bind(grant_id)
    .bind(expires_at)
    .execute(conn)
    .await?;
    Ok(())
}

#[derive(Debug, Clone, sqlx::FromRow)]
pub struct RefreshRow {
    pub token_hash: String,
    pub grant_id: String,
    pub expires_at: i64,
    pub used_at: Option<i64>,
}

pub async fn refresh_row(
    conn: &mut Conn,
    token_hash: &str,
) -> Result<Option<RefreshRow>, StoreError> {
    Ok(
        sqlx::query_as("SELECT * FROM interactive_refresh_tokens WHERE token_hash = $1")
            .bind(token_hash)
            .fetch_optional(conn)
            .await?,
    )
}

/// Uses a refresh token up and issues the next one under the same grant; `false` (nothing
/// changed) when the token had been used already.
pub async fn rotate_refresh(
    conn: &mut Conn,
    used_hash: &str,
    next_hash: &str,
    grant_id: &str,
    expires_at: i64,
    now: i64,
) -> Result<bool, StoreError> {
    let done = sqlx::query(
        "UPDATE interactive_refresh_tokens SET used_at = $1 WHERE token_hash = $2 \
         AND used_at IS NULL",
    )
    .bind(now)
    .bind(used_hash)
    .execute(&mut *conn)
    .await?;
    if done.rows_affected() == 0 {
        return Ok(false);
    }
    insert_refresh(conn, next_hash, grant_id, expires_at).await?;
    touch_grant(conn, grant_id, now).await?;
    Ok(true)
}

/// Deletes one refresh token (RFC 7009 revocation); its grant, if the token was live.
pub async fn delete_refresh(
    conn: &mut Conn,
    token_hash: &str,
) -> Result<Option<String>, StoreError> {
    let row: Option<(String,)> = sqlx::query_as(
        "DELETE FROM interactive_refresh_tokens WHERE token_hash = $1 AND used_at IS NULL \
         RETURNING grant_id",
    )
    .bind(token_hash)
    .fetch_optional(conn)
    .await?;
    Ok(row.map(|r| r.0))
}

fn signin_label(workspace_id: &str, issuer: &str) -> String {
    format!("interactive_signin:{workspace_id}:{issuer}")
}

/// This service's client at an OpenID provider: its id and secret.
pub async fn signin_client(
    conn: &mut Conn,
    cipher: &Cipher,
    workspace_id: &str,
    issuer: &str,
) -> Result<Option<(String, Option<String>)>, StoreError> {
    let row: Option<(String, String)> = sqlx::query_as(
        "SELECT client_id, client_secret FROM interactive_signin_clients \
         WHERE workspace_id = $1 AND issuer = $2",
    )
    .bind(workspace_id)
    .bind(issuer)
    .fetch_optional(conn)
    .await?;
    let Some((id, sealed)) = row else {
        return Ok(None);
    };
    if sealed.is_empty() {
        return Ok(Some((id, None)));
    }
    let secret = cipher.open(&signin_label(workspace_id, issuer), &sealed)?;
    let secret = String::from_utf8(secret).map_err(super::db::corrupt)?;
    Ok(Some((id, Some(secret))))
}

pub async fn put_signin_client(
    conn: &mut Conn,
    cipher: &Cipher,
    workspace_id: &str,
    issuer: &str,
    client_id: &str,
    secret: Option<&str>,
) -> Result<(), StoreError> {
    let sealed = match secret {
        Some(s) => cipher.seal(&signin_label(workspace_id, issuer), s.as_bytes())?,
        None => String::new(),
    };
    sqlx::query(
        "INSERT INTO interactive_signin_clients (workspace_id, issuer, client_id, client_secret) \
         VALUES ($1, $2, $3, $4) ON CONFLICT (workspace_id, issuer) \
         DO UPDATE SET client_id = $3, client_secret = $4",
    )
    .bind(workspace_id)
    .bind(issuer)
    .bind(client_id)
    .bind(sealed)
    .execute(conn)
    .await?;
    Ok(())
}

#[cfg(test)]
mod tests;
