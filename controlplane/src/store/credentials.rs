//! Encrypted credentials: one sealed JSON map of secret values per owner and subject.
//! Only the key names are readable without the master key.

use std::collections::BTreeMap;

use portcullis_shared::seal::Cipher;

use super::db::{from_json, now_ms, to_json, Conn, StoreError};

/// Who a credential belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Owner {
    Model,
    Tool,
    /// A tool's OAuth client secret.
    ToolOAuthClient,
    /// A model's OAuth client secret.
    ModelOAuthClient,
    AgentActAs,
    /// An act-as verification provider's HMAC secret.
    ActAsProvider,
}

impl Owner {
    pub fn parse(s: &str) -> Option<Self> {
        [
            Owner::Model,
            Owner::Tool,
            Owner::ToolOAuthClient,
            Owner::ModelOAuthClient,
            Owner::AgentActAs,
            Owner::ActAsProvider,
        ]
        .into_iter()
        .find(|o| o.as_str() == s)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Owner::Model => "model",
            Owner::Tool => "tool",
            Owner::ToolOAuthClient => "tool_oauth_client",
            Owner::ModelOAuthClient => "model_oauth_client",
            Owner::AgentActAs => "agent_actas",
            Owner::ActAsProvider => "actas_provider",
        }
    }
}

fn label(owner: Owner, owner_id: &str, subject: &str) -> String {
    format!("{}:{}:{}", owner.as_str(), owner_id, subject)
}

/// Replaces the shared (`subject = ""`) or per-user credential of an owner.
pub async fn put(
    conn: &mut Conn,
    cipher: &Cipher,
    workspace_id: &str,
    owner: Owner,
    owner_id: &str,
    subject: &str,
    values: &BTreeMap<String, String>,
) -> Result<(), StoreError> {
    let plaintext = to_json(values)?;
    let sealed = cipher.seal(&label(owner, owner_id, subject), plaintext.as_bytes())?;
    let keys: Vec<&String> = values.keys().collect();
    let now = now_ms();
    sqlx::query(
        "INSERT INTO credentials (owner_kind, owner_id, subject, workspace_id, secret_keys, \
         ciphertext, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $7) \
         ON CONFLICT (owner_kind, owner_id, subject) DO UPDATE SET \
         secret_keys = excluded.secret_keys, ciphertext = excluded.ciphertext, \
         updated_at = excluded.updated_at",
    )
    .bind(owner.as_str())
    .bind(owner_id)
    .bind(subject)
    .bind(workspace_id)
    .bind(to_json(&keys)?)
    .bind(sealed)
    .bind(now)
    .execute(conn)
    .await?;
    Ok(())
}

/// Deletes every credential (shared and per-user) of an owner.
pub async fn delete_all(conn: &mut Conn, owner: Owner, owner_id: &str) -> Result<(), StoreError> {
    sqlx::query("DELETE FROM credentials WHERE owner_kind = $1 AND owner_id = $2")
        .bind(owner.as_str())
        .bind(owner_id)
        .execute(conn)
        .await?;
    Ok(())
}

/// The key names of the shared credential, readable without decrypting.
pub async fn shared_keys(
    conn: &mut Conn,
    owner: Owner,
    owner_id: &str,
) -> Result<Option<Vec<String>>, StoreError> {
    let row: Option<(String,)> = sqlx::query_as(
        "SELECT secret_keys FROM credentials WHERE owner_kind = $1 AND owner_id = $2 \
         AND subject = ''",
    )
    .bind(owner.as_str())
    .bind(owner_id)
    .fetch_optional(conn)
    .await?;
    row.map(|r| from_json(&r.0)).transpose()
}

/// When an owner's credential for `subject` was first stored (a replacement keeps it; a
/// credential deleted and stored again gets a new one).
pub async fn stored_since(
    conn: &mut Conn,
    owner: Owner,
    owner_id: &str,
    subject: &str,
) -> Result<Option<i64>, StoreError> {
    let row: Option<(i64,)> = sqlx::query_as(
        "SELECT created_at FROM credentials WHERE owner_kind = $1 AND owner_id = $2 \
         AND subject = $3",
    )
    .bind(owner.as_str())
    .bind(owner_id)
    .bind(subject)
    .fetch_optional(conn)
    .await?;
    Ok(row.map(|r| r.0))
}

/// Decrypts the shared credential of an owner.
pub async fn open_shared(
    conn: &mut Conn,
    cipher: &Cipher,
    owner: Owner,
    owner_id: &str,
) -> Result<Option<BTreeMap<String, String>>, StoreError> {
    open(conn, cipher, owner, owner_id, "").await
}

/// Decrypts an owner's credential for one subject (`""` is the shared one).
pub async fn open(
    conn: &mut Conn,
    cipher: &Cipher,
    owner: Owner,
    owner_id: &str,
    subject: &str,
) -> Result<Option<BTreeMap<String, String>>, StoreError> {
    let row: Option<(String,)> = sqlx::query_as(
        "SELECT ciphertext FROM credentials WHERE owner_kind = $1 AND owner_id = $2 \
         AND subject = $3",
    )
    .bind(owner.as_str())
    .bind(owner_id)
    .bind(subject)
    .fetch_optional(conn)
    .await?;
    let Some((sealed,)) = row else {
        return Ok(None);
    };
    let plaintext = cipher.open(&label(owner, owner_id, subject), &sealed)?;
    let text = String::from_utf8(plaintext).map_err(super::db::corrupt)?;
    from_json(&text).map(Some)
}

/// The subjects with a per-user credential on an owner, and when each was stored.
pub async fn subjects(
    conn: &mut Conn,
    owner: Owner,
    owner_id: &str,
) -> Result<Vec<(String, i64)>, StoreError> {
    Ok(sqlx::query_as(
        "SELECT subject, updated_at FROM credentials WHERE owner_kind = $1 AND owner_id = $2 \
         AND subject <> '' ORDER BY subject",
    )
    .bind(owner.as_str())
    .bind(owner_id)
    .fetch_all(conn)
    .await?)
}

/// Deletes one subject's credential; whether there was one.
pub async fn delete_subject(
    conn: &mut Conn,
    owner: Owner,
    owner_id: &str,
    subject: &str,
) -> Result<bool, StoreError> {
    let done = sqlx::query(
        "DELETE FROM credentials WHERE owner_kind = $1 AND owner_id = $2 AND subject = $3",
    )
    .bind(owner.as_str())
    .bind(owner_id)
    .bind(subject)
    .execute(conn)
    .await?;
    Ok(done.rows_affected() == 1)
}
