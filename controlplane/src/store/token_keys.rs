//! The Ed25519 key pairs exchanged agent tokens are signed with: one current per workspace,
//! created on first use and replaced after [`ROTATE_AFTER`]; a retired key stays published for
//! [`PUBLISHED_AFTER_RETIREMENT`] so the tokens it signed live out their `token_ttl`. Private
//! keys are sealed with the master key.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use portcullis_shared::seal::Cipher;
use portcullis_shared::snapshot::SnapTokenKey;
use ring::signature::KeyPair;

use super::db::{now_ms, Conn, StoreError};

/// A signing key is replaced after 30 days.
pub const ROTATE_AFTER_MS: i64 = 30 * 24 * 3600 * 1000;
/// A retired key is published this long: the longest `token_ttl` and a minute of leeway.
pub const PUBLISHED_AFTER_RETIREMENT_MS: i64 = (24 * 3600 + 60) * 1000;

/// The key a token is signed with: its id and its PKCS#8 document.
pub struct SigningKey {
    pub kid: String,
    pub pkcs8: Vec<u8>,
}

fn aad(kid: &str) -> String {
    format!("token_key:{kid}")
}

/// The workspace's newest unretired key: (kid, sealed private key, created at).
async fn newest(
    conn: &mut Conn,
    workspace_id: &str,
) -> Result<Option<(String, String, i64)>, StoreError> {
    Ok(sqlx::query_as(
        "SELECT kid, sealed, created_at FROM token_keys WHERE workspace_id = $1 \
         AND retired_at IS NULL ORDER BY created_at DESC LIMIT 1",
    )
    .bind(workspace_id)
    .fetch_optional(conn)
    .await?)
}

/// The workspace's current signing key when it has one younger than [`ROTATE_AFTER_MS`];
/// reads only.
pub async fn fresh(
    conn: &mut Conn,
    cipher: &Cipher,
    workspace_id: &str,
) -> Result<Option<SigningKey>, StoreError> {
    match newest(conn, workspace_id).await? {
        Some((kid, sealed, created_at)) if now_ms() - created_at < ROTATE_AFTER_MS => {
            let pkcs8 = cipher.open(&aad(&kid), &sealed)?;
            Ok(Some(SigningKey { kid, pkcs8 }))
        }
        _ => Ok(None),
    }
}

/// The workspace's current signing key, created (and the previous one retired) when there is
/// none or it is older than [`ROTATE_AFTER_MS`]. Call inside a write transaction: a new key
/// changes what gateways must know.
pub async fn current(
    conn: &mut Conn,
    cipher: &Cipher,
    workspace_id: &str,
) -> Result<SigningKey, StoreError> {
    if let Some(key) = fresh(conn, cipher, workspace_id).await? {
        return Ok(key);
    }
    let now = now_ms();
    if let Some((kid, _, _)) = newest(conn, workspace_id).await? {
        sqlx::query("UPDATE token_keys SET retired_at = $1 WHERE kid = $2")
            .bind(now)
            .bind(&kid)
            .execute(&mut *conn)
            .await?;
    }
    create(conn, cipher, workspace_id, now).await
}

async fn create(
    conn: &mut Conn,
    cipher: &Cipher,
    workspace_id: &str,
    now: i64,
) -> Result<SigningKey, StoreError> {
    let rng = ring::rand::SystemRandom::new();
    let document = ring::signature::Ed25519KeyPair::generate_pkcs8(&rng).map_err(|_| {
        StoreError::Corrupt("the system random source failed to make a signing key".into())
    })?;
    let pair = ring::signature::Ed25519KeyPair::from_pkcs8(document.as_ref())
        .map_err(|_| StoreError::Corrupt("a new signing key could not be read back".into()))?;
    let kid = uuid::Uuid::new_v4().simple().to_string();
    let x = URL_SAFE_NO_PAD.encode(pair.public_key().as_ref());
    let sealed = cipher.seal(&aad(&kid), document.as_ref())?;
    sqlx::query(
        "INSERT INTO token_keys (kid, workspace_id, x, sealed, created_at) \
         VALUES ($1, $2, $3, $4, $5)",
    )
    .bind(&kid)
    .bind(workspace_id)
    .bind(&x)
    .bind(&sealed)
    .bind(now)
    .execute(&mut *conn)
    .await?;
    Ok(SigningKey {
        kid,
        pkcs8: document.as_ref().to_vec(),
    })
}

/// The public keys gateways accept tokens of: the current key and those retired less than
/// [`PUBLISHED_AFTER_RETIREMENT_MS`] ago.
pub async fn published(
    conn: &mut Conn,
    workspace_id: &str,
) -> Result<Vec<SnapTokenKey>, StoreError> {
    let since = now_ms() - PUBLISHED_AFTER_RETIREMENT_MS;
    let rows: Vec<(String, String)> = sqlx::query_as(
        "SELECT kid, x FROM token_keys WHERE workspace_id = $1 \
         AND (retired_at IS NULL OR retired_at > $2) ORDER BY created_at",
    )
    .bind(workspace_id)
    .bind(since)
    .fetch_all(conn)
    .await?;
    Ok(rows
        .into_iter()
        .map(|(kid, x)| SnapTokenKey { kid, x })
        .collect())
}
