//! Signing agent tokens (DESIGN §15): claims are signed with the workspace's current Ed25519
//! key (EdDSA), the key created or replaced when it is due. Both mints of agent tokens sign
//! here: `ExchangeAgentKey` (an agent key in, a token out) and interactive access (a grant's
//! token, traded for a code or a refresh token).

use portcullis_shared::snapshot::AgentTokenClaims;

use crate::error::{ApiError, ApiResult};
use crate::store::{token_keys, Store};

/// Signs agent-token claims with the workspace's current key.
pub(crate) async fn sign(store: &Store, ws: &str, claims: &AgentTokenClaims) -> ApiResult<String> {
    let key = signing_key(store, ws).await?;
    let mut header = jsonwebtoken::Header::new(jsonwebtoken::Algorithm::EdDSA);
    header.kid = Some(key.kid);
    let signing = jsonwebtoken::EncodingKey::from_ed_der(&key.pkcs8);
    jsonwebtoken::encode(&header, claims, &signing)
        .map_err(|e| ApiError::Internal(format!("signing the agent token: {e}")))
}

/// How long a new signing key is held back before its first token: gateways learn a key from
/// the snapshot its creation produces, and a token they cannot check yet would be refused.
const NEW_KEY_SETTLE: std::time::Duration = std::time::Duration::from_secs(2);

/// The workspace's current signing key, created or replaced when it is due (a write, so
/// gateways learn the public key; the first token under a new key waits [`NEW_KEY_SETTLE`]).
pub(crate) async fn signing_key(store: &Store, ws: &str) -> ApiResult<token_keys::SigningKey> {
    let cipher = store.cipher();
    let mut conn = store.read().await?;
    if let Some(key) = token_keys::fresh(&mut conn, cipher, ws).await? {
        return Ok(key);
    }
    drop(conn);
    let mut tx = store.write(ws).await?;
    let key = token_keys::current(tx.conn(), cipher, ws).await?;
    tx.commit().await?;
    tokio::time::sleep(NEW_KEY_SETTLE).await;
    Ok(key)
}
