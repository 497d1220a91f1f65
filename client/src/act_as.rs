//! The `x-svc-act-as` header an agent sends to act for a person. Which form the gateway
//! accepts is the agent's `actas_method`, set by an administrator:
//!
//! - [`none`]: the identity as the agent asserts it. The gateway trusts the agent for it, so
//!   it counts only where the workspace admits `none` (`actas_min_method`) and is audited as
//!   asserted.
//! - [`hmac`]: the identity signed with the agent's (or its provider's) shared secret and
//!   timestamped; the gateway refuses it more than 300 s from its clock.
//! - [`oidc`]: the person's own ID token from a trusted OpenID issuer, passed on unchanged.
//! - `bound` agents send no header: the identity comes from their key.

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine as _;
use hmac::{Hmac, Mac};
use serde_json::{Map, Value};
use sha2::Sha256;

use crate::ClientError;

/// The header's name.
pub const HEADER: &str = "x-svc-act-as";

/// The person an agent acts for.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Identity {
    pub sub: String,
    pub email: String,
    pub groups: Vec<String>,
}

impl Identity {
    pub fn new(sub: impl Into<String>) -> Self {
        Self {
            sub: sub.into(),
            ..Self::default()
        }
    }

    fn claims(&self) -> Result<Map<String, Value>, ClientError> {
        if self.sub.is_empty() {
            return Err(ClientError::Invalid(
                "an act-as identity needs a sub".into(),
            ));
        }
        let mut claims = Map::new();
        claims.insert("sub".into(), Value::String(self.sub.clone()));
        claims.insert("email".into(), Value::String(self.email.clone()));
        claims.insert("groups".into(), Value::from(self.groups.clone()));
        Ok(claims)
    }
}

fn canonical(claims: &Map<String, Value>) -> Result<Vec<u8>, ClientError> {
    portcullis_wire::canonical::to_vec(claims)
        .map_err(|e| ClientError::Invalid(format!("act-as claims: {e}")))
}

/// `none`: base64 of the identity's canonical JSON.
pub fn none(identity: &Identity) -> Result<String, ClientError> {
    Ok(B64.encode(canonical(&identity.claims()?)?))
}

/// `hmac`: the identity with `ts` (Unix seconds, now) signed with HMAC-SHA256 over its
/// canonical JSON, the signature in `sig`, the whole base64.
pub fn hmac(identity: &Identity, secret: &str) -> Result<String, ClientError> {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    hmac_at(identity, secret, i64::try_from(now).unwrap_or(i64::MAX))
}

/// [`hmac`] at a given time.
pub fn hmac_at(identity: &Identity, secret: &str, ts: i64) -> Result<String, ClientError> {
    if secret.is_empty() {
        return Err(ClientError::Invalid(
            "the act-as HMAC secret is empty".into(),
        ));
    }
    let mut claims = identity.claims()?;
    claims.insert("ts".into(), Value::from(ts));
    let mut mac = Hmac::<Sha256>::new_from_slice(secret.as_bytes())
        .map_err(|e| ClientError::Invalid(format!("act-as HMAC secret: {e}")))?;
    mac.update(&canonical(&claims)?);
    claims.insert(
        "sig".into(),
        Value::String(B64.encode(mac.finalize().into_bytes())),
    );
    Ok(B64.encode(canonical(&claims)?))
}

/// `oidc`: the person's ID token, unchanged, once it has a JWT's three parts.
pub fn oidc(id_token: &str) -> Result<String, ClientError> {
    let token = id_token.trim();
    let parts: Vec<&str> = token.split('.').collect();
    let base64url = |p: &str| {
        p.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    };
    if parts.len() != 3
        || parts[..2].iter().any(|p| p.is_empty())
        || !parts.iter().all(|p| base64url(p))
    {
        return Err(ClientError::Invalid(
            "an act-as OIDC token must be a JWT (three base64url parts)".into(),
        ));
    }
    Ok(token.to_string())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    /// Headers signed by Python's standard library, shared with the gateway's own tests.
    const FIXTURE: &str = include_str!("../../gateway/tests/fixtures/act_as/hmac.json");

    #[test]
    fn hmac_headers_match_ones_signed_outside_rust() {
        let fixture: Value = serde_json::from_str(FIXTURE).unwrap();
        let secret = fixture["secret"].as_str().unwrap();
        let mut matched = 0;
        for case in fixture["hmac"].as_array().unwrap() {
            if case["name"].as_str().unwrap().contains("escaped") {
                continue;
            }
            let c = &case["claims"];
            let identity = Identity {
                sub: c["sub"].as_str().unwrap().into(),
                email: c["email"].as_str().unwrap().into(),
                groups: serde_json::from_value(c["groups"].clone()).unwrap(),
            };
            let header = hmac_at(&identity, secret, case["ts"].as_i64().unwrap()).unwrap();
            assert_eq!(header, case["header"].as_str().unwrap(), "{}", case["name"]);
            matched += 1;
        }
        assert!(matched >= 2);
    }

    #[test]
    fn none_and_oidc_and_refusals() {
        let header = none(&Identity::new("u1")).unwrap();
        assert_eq!(
            B64.decode(header).unwrap(),
            br#"{"email":"","groups":[],"sub":"u1"}"#
        );
        assert!(none(&Identity::default()).is_err());
        assert!(hmac(&Identity::new("u1"), "").is_err());
        assert_eq!(oidc(" a.b.c ").unwrap(), "a.b.c");
        for bad in ["a.b", "a..c", "a.b.c.d", "a b.c.d", "x.y.z=="] {
            assert!(oidc(bad).is_err(), "{bad}");
        }
    }
}
