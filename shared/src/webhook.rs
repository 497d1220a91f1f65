//! Standard Webhooks signing (<https://www.standardwebhooks.com>): a `whsec_` secret is 32
//! random bytes in base64; each attempt is signed over `{webhook-id}.{webhook-timestamp}.{body}`
//! with HMAC-SHA256 and sent as `v1,<base64>`, one per live key, space-separated, current first.

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use hmac::{Hmac, Mac};
use rand::RngCore;
use sha2::Sha256;

/// Prefix of a webhook signing secret.
pub const SECRET_PREFIX: &str = "whsec_";
/// Prefix of a signing secret's id.
pub const KEY_ID_PREFIX: &str = "key_";

/// A new signing secret and its id.
pub fn new_secret() -> (String, String) {
    let mut bytes = [0u8; 32];
    rand::rngs::OsRng.fill_bytes(&mut bytes);
    let mut id = [0u8; 12];
    rand::rngs::OsRng.fill_bytes(&mut id);
    (
        format!("{KEY_ID_PREFIX}{}", hex::encode(id)),
        format!("{SECRET_PREFIX}{}", STANDARD.encode(bytes)),
    )
}

/// The key bytes of a `whsec_` secret; `None` when it is not one.
fn key_bytes(secret: &str) -> Option<Vec<u8>> {
    STANDARD.decode(secret.strip_prefix(SECRET_PREFIX)?).ok()
}

/// The `webhook-signature` header for one attempt: a `v1,` signature per secret, in order.
/// Secrets that are not `whsec_` secrets are skipped.
pub fn signature_header(secrets: &[&str], webhook_id: &str, timestamp: i64, body: &[u8]) -> String {
    let mut out = String::new();
    for key in secrets.iter().filter_map(|s| key_bytes(s)) {
        let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(&key) else {
            continue;
        };
        mac.update(webhook_id.as_bytes());
        mac.update(b".");
        mac.update(timestamp.to_string().as_bytes());
        mac.update(b".");
        mac.update(body);
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str("v1,");
        out.push_str(&STANDARD.encode(mac.finalize().into_bytes()));
    }
    out
}

/// Whether `header` carries a valid signature of the message by `secret` (what a receiver
/// checks; the control plane's tests use it).
pub fn verify(secret: &str, header: &str, webhook_id: &str, timestamp: i64, body: &[u8]) -> bool {
    let expected = signature_header(&[secret], webhook_id, timestamp, body);
    !expected.is_empty() && header.split(' ').any(|s| s == expected)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    /// The example from the Standard Webhooks specification's reference libraries.
    #[test]
    fn signs_like_the_reference_implementation() {
        let secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
        let id = "msg_p5jXN8AQM9LWM0D4loKWxJek";
        let body = br#"{"test": 2432232314}"#;
        let header = signature_header(&[secret], id, 1614265330, body);
        assert_eq!(header, "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=");
        assert!(verify(secret, &header, id, 1614265330, body));
        assert!(!verify(secret, &header, id, 1614265331, body));
    }

    #[test]
    fn rotation_signs_with_both_keys_current_first() {
        let (_, old) = new_secret();
        let (key_id, new) = new_secret();
        assert!(key_id.starts_with("key_") && new.starts_with("whsec_"));
        let header = signature_header(&[&new, &old], "msg_1", 1, b"{}");
        let parts: Vec<&str> = header.split(' ').collect();
        assert_eq!(parts.len(), 2);
        assert_eq!(parts[0], signature_header(&[&new], "msg_1", 1, b"{}"));
        assert!(verify(&old, &header, "msg_1", 1, b"{}"));
        assert!(!verify("whsec_", &header, "msg_1", 1, b"{}"));
    }
}
