//! Act-as verification providers. A provider's HMAC secret is a credential (owner
//! `ActAsProvider`), not a column.

use portcullis_shared::seal::Cipher;

use super::db::{Conn, StoreError};

#[derive(Debug, Clone, sqlx::FromRow)]
pub struct ProviderRow {
    pub id: String,
    pub workspace_id: String,
    pub name: String,
    pub method: String,
    pub issuer: Option<String>,
    pub audience: Option<String>,
    pub jwks_url: Option<String>,
    pub email_claim: String,
    pub groups_claim: String,
    /// 1: an email counts without `email_verified: true` in the token.
    pub trust_unverified_email: i64,
    /// The client this service signs people in with at the issuer (interactive access).
    pub signin_client_id: Option<String>,
    /// Its secret, sealed.
    pub signin_client_secret: Option<String>,
    pub created_at: i64,
    pub updated_at: i64,
}

pub async fn insert(conn: &mut Conn, r: &ProviderRow) -> Result<(), StoreError> {
    sqlx::query(
        "INSERT INTO actas_providers (id, workspace_id, name, method, issuer, audience, \
         jwks_url, email_claim, groups_claim, created_at, updated_at, signin_client_id, \
         signin_client_secret, trust_unverified_email) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)",
    )
    .bind(&r.id)
    .bind(&r.workspace_id)
    .bind(&r.name)
    .bind(&r.method)
    .bind(&r.issuer)
    .bind(&r.audience)
    .bind(&r.jwks_url)
    .bind(&r.email_claim)
    .bind(&r.groups_claim)
    .bind(r.created_at)
    .bind(r.updated_at)
    .bind(&r.signin_client_id)
    .bind(&r.signin_client_secret)
    .bind(r.trust_unverified_email)
    .execute(conn)
    .await?;
    Ok(())
}

/// Writes every mutable field back.
pub async fn update(conn: &mut Conn, r: &ProviderRow) -> Result<(), StoreError> {
    sqlx::query(
        "UPDATE actas_providers SET name = $1, issuer = $2, audience = $3, jwks_url = $4, \
         email_claim = $5, groups_claim = $6, updated_at = $7, signin_client_id = $10, \
         signin_client_secret = $11, trust_unverified_email = $12 \
         WHERE id = $8 AND workspace_id = $9",
    )
    .bind(&r.name)
    .bind(&r.issuer)
    .bind(&r.audience)
    .bind(&r.jwks_url)
    .bind(&r.email_claim)
    .bind(&r.groups_claim)
    .bind(r.updated_at)
    .bind(&r.id)
    .bind(&r.workspace_id)
    .bind(&r.signin_client_id)
    .bind(&r.signin_client_secret)
    .bind(r.trust_unverified_email)
    .execute(conn)
    .await?;
    Ok(())
}

fn signin_label(provider_id: &str) -> String {
    format!("actas_signin:{provider_id}")
}

/// Seals a sign-in client secret for this provider.
pub fn seal_signin_secret(
    cipher: &Cipher,
    provider_id: &str,
    secret: &str,
) -> Result<String, StoreError> {
    Ok(cipher.seal(&signin_label(provider_id), secret.as_bytes())?)
}

/// The provider's sign-in client: its id and secret opened.
pub fn signin_client(
    cipher: &Cipher,
    r: &ProviderRow,
) -> Result<Option<(String, Option<String>)>, StoreError> {
    let Some(id) = &r.signin_client_id else {
        return Ok(None);
    };
    let secret = match &r.signin_client_secret {
        Some(sealed) => {
            let plain = cipher.open(&signin_label(&r.id), sealed)?;
            Some(String::from_utf8(plain).map_err(super::db::corrupt)?)
        }
        None => None,
    };
    Ok(Some((id.clone(), secret)))
}

pub async fn get(
    conn: &mut Conn,
    workspace_id: &str,
    id: &str,
) -> Result<Option<ProviderRow>, StoreError> {
    Ok(
        sqlx::query_as("SELECT * FROM actas_providers WHERE workspace_id = $1 AND id = $2")
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
) -> Result<Option<ProviderRow>, StoreError> {
    Ok(
        sqlx::query_as("SELECT * FROM actas_providers WHERE workspace_id = $1 AND name = $2")
            .bind(workspace_id)
            .bind(name)
            .fetch_optional(conn)
            .await?,
    )
}

pub async fn list(conn: &mut Conn, workspace_id: &str) -> Result<Vec<ProviderRow>, StoreError> {
    Ok(
        sqlx::query_as("SELECT * FROM actas_providers WHERE workspace_id = $1 ORDER BY name, id")
            .bind(workspace_id)
            .fetch_all(conn)
            .await?,
    )
}

pub async fn delete(conn: &mut Conn, workspace_id: &str, id: &str) -> Result<(), StoreError> {
    sqlx::query("DELETE FROM actas_providers WHERE workspace_id = $1 AND id = $2")
        .bind(workspace_id)
        .bind(id)
        .execute(conn)
        .await?;
    Ok(())
}

/// Names of the agents that name the provider in `actas_provider_id`.
pub async fn agents_using(
    conn: &mut Conn,
    workspace_id: &str,
    id: &str,
) -> Result<Vec<String>, StoreError> {
    let rows: Vec<(String,)> = sqlx::query_as(
        "SELECT name FROM agents WHERE workspace_id = $1 AND actas_provider_id = $2 ORDER BY name",
    )
    .bind(workspace_id)
    .bind(id)
    .fetch_all(conn)
    .await?;
    Ok(rows.into_iter().map(|r| r.0).collect())
}
