//! Key formats (agent keys, platform keys, deployment tokens) and how they are stored:
//! a token is shown once and only its SHA-256 is kept.

use rand::distributions::{Alphanumeric, DistString};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

/// Characters of randomness after the prefix: 43 base62 characters carry 256 bits.
pub const KEY_BODY_LEN: usize = 43;

/// What a bearer token is, read from its prefix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyKind {
    /// `svc_…`: an agent API key, accepted only by gateways.
    Agent,
    /// `svc_pk_…`: a workspace platform key, accepted only by the control plane.
    Platform,
    /// `svc_dt_…`: a gateway deployment token, accepted only by the sync service.
    Deployment,
}

impl KeyKind {
    pub fn prefix(self) -> &'static str {
        match self {
            KeyKind::Agent => "svc_",
            KeyKind::Platform => "svc_pk_",
            KeyKind::Deployment => "svc_dt_",
        }
    }

    /// Classifies a token by its prefix and shape; `None` when it is not one of ours.
    pub fn of(token: &str) -> Option<KeyKind> {
        let (kind, body) = if let Some(body) = token.strip_prefix("svc_pk_") {
            (KeyKind::Platform, body)
        } else if let Some(body) = token.strip_prefix("svc_dt_") {
            (KeyKind::Deployment, body)
        } else if let Some(body) = token.strip_prefix("svc_") {
            (KeyKind::Agent, body)
        } else {
            return None;
        };
        let well_formed =
            body.len() == KEY_BODY_LEN && body.bytes().all(|b| b.is_ascii_alphanumeric());
        well_formed.then_some(kind)
    }
}

/// Generates a new token of the given kind from the operating system's random source.
pub fn generate(kind: KeyKind) -> String {
    let body = Alphanumeric.sample_string(&mut rand::rngs::OsRng, KEY_BODY_LEN);
    format!("{}{}", kind.prefix(), body)
}

/// The stored form of a token: lowercase hex SHA-256.
pub fn hash(token: &str) -> String {
    hex::encode(Sha256::digest(token.as_bytes()))
}

/// Compares two stored hashes in constant time.
pub fn hashes_equal(a: &str, b: &str) -> bool {
    a.as_bytes().ct_eq(b.as_bytes()).into()
}

/// A short, non-secret label for a token (its prefix and first four characters), safe to list.
pub fn display_prefix(token: &str) -> String {
    let kind_len = KeyKind::of(token).map_or(0, |k| k.prefix().len());
    token.chars().take(kind_len + 4).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_tokens_classify_as_their_kind() {
        for kind in [KeyKind::Agent, KeyKind::Platform, KeyKind::Deployment] {
            let token = generate(kind);
            assert_eq!(KeyKind::of(&token), Some(kind), "{token}");
            assert_eq!(token.len(), kind.prefix().len() + KEY_BODY_LEN);
        }
    }

    #[test]
    fn malformed_tokens_are_not_ours() {
        assert_eq!(KeyKind::of("sk-abc"), None);
        assert_eq!(KeyKind::of("svc_short"), None);
        assert_eq!(
            KeyKind::of(&format!("svc_{}", "-".repeat(KEY_BODY_LEN))),
            None
        );
    }

    #[test]
    fn hash_is_sha256_hex() {
        assert_eq!(
            hash("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert!(hashes_equal(&hash("x"), &hash("x")));
        assert!(!hashes_equal(&hash("x"), &hash("y")));
    }

    #[test]
    fn prefix_hides_the_secret_part() {
        let token = generate(KeyKind::Platform);
        let shown = display_prefix(&token);
        assert_eq!(shown.len(), "svc_pk_".len() + 4);
        assert!(token.starts_with(&shown));
    }
}
