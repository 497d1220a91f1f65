//! The `none` and `hmac` act-as headers (DESIGN §10): base64 of canonical JSON claims, the
//! `hmac` ones signed and timestamped within ±300 s.

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use hmac::{Hmac, Mac};
use portcullis_shared::policy::ActAs;
use serde_json::{Map, Value};
use sha2::Sha256;

use super::refused;
use crate::error::GatewayError;

const SKEW_SECS: i64 = 300;

fn decode(value: &str) -> Result<Map<String, Value>, GatewayError> {
    let bytes = B64
        .decode(value.trim())
        .map_err(|_| refused("actas_malformed", "the header is not base64"))?;
    match serde_json::from_slice(&bytes) {
        Ok(Value::Object(map)) => Ok(map),
        _ => Err(refused(
            "actas_malformed",
            "the header is not a JSON object",
        )),
    }
}

/// Whether `sig` is the HMAC-SHA256 of the claims' canonical JSON (RFC 8785) under `secret`.
/// The same text with non-ASCII characters `\u`-escaped (as Python's `json.dumps` writes it
/// by default) is accepted too: both are sorted, whitespace-free canonical JSON.
fn signed_by(secret: &str, claims: &Map<String, Value>, sig: &[u8]) -> Result<bool, GatewayError> {
    let canonical = portcullis_shared::canonical::to_vec(claims)
        .map_err(|_| refused("actas_malformed", "the claims cannot be canonicalized"))?;
    let matches = |bytes: &[u8]| {
        Hmac::<Sha256>::new_from_slice(secret.as_bytes()).is_ok_and(|mut mac| {
            mac.update(bytes);
            mac.verify_slice(sig).is_ok()
        })
    };
    Ok(matches(&canonical)
        || portcullis_shared::canonical::escape_non_ascii(&canonical).is_some_and(|e| matches(&e)))
}

/// Bounds on an identity's parts: a person is remembered per agent (decisions, tokens), so
/// what one may claim is kept small.
const MAX_SUB: usize = 256;
const MAX_EMAIL: usize = 320;
const MAX_GROUPS: usize = 256;
const MAX_GROUP: usize = 256;

/// The identity in a claims object, read with the given claim names.
pub fn identity(
    map: &Map<String, Value>,
    method: &str,
    email_claim: &str,
    groups_claim: &str,
) -> Result<ActAs, GatewayError> {
    let groups = match map.get(groups_claim) {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::String(one)) => vec![one.clone()],
        Some(Value::Array(items)) => items
            .iter()
            .filter_map(Value::as_str)
            .map(str::to_string)
            .collect(),
        Some(_) => {
            return Err(refused(
                "actas_malformed",
                &format!("{groups_claim} must be a list of strings"),
            ))
        }
    };
    let sub = map.get("sub").and_then(Value::as_str).unwrap_or_default();
    if sub.is_empty() {
        return Err(refused("actas_malformed", "sub is required"));
    }
    let email = map
        .get(email_claim)
        .and_then(Value::as_str)
        .unwrap_or_default();
    if sub.len() > MAX_SUB
        || email.len() > MAX_EMAIL
        || groups.len() > MAX_GROUPS
        || groups.iter().any(|g| g.len() > MAX_GROUP)
    {
        return Err(refused(
            "actas_malformed",
            &format!(
                "the identity is too large (sub ≤ {MAX_SUB}, email ≤ {MAX_EMAIL} bytes, at most \
                 {MAX_GROUPS} groups of ≤ {MAX_GROUP} bytes)"
            ),
        ));
    }
    Ok(ActAs {
        present: true,
        // `none` is what the agent asserts; every other method proves it.
        verified: method != "none",
        method: method.to_string(),
        sub: sub.to_string(),
        // An issuer that says the address is unverified does not vouch for it.
        email: if map.get("email_verified") == Some(&Value::Bool(false)) {
            String::new()
        } else {
            email.to_string()
        },
        groups,
    })
}

/// A `none` header: the identity as the agent asserts it.
pub fn plain(header: &str) -> Result<ActAs, GatewayError> {
    identity(&decode(header)?, "none", "email", "groups")
}

/// An `hmac` header, checked against `secret` at `now_secs`.
pub fn hmac(secret: &str, header: &str, now_secs: i64) -> Result<ActAs, GatewayError> {
    let mut claims = decode(header)?;
    let sig = match claims.remove("sig") {
        Some(Value::String(s)) => B64
            .decode(s)
            .map_err(|_| refused("actas_malformed", "sig is not base64"))?,
        _ => return Err(refused("actas_malformed", "sig is missing")),
    };
    let ts = claims
        .get("ts")
        .and_then(Value::as_i64)
        .ok_or_else(|| refused("actas_malformed", "ts is missing"))?;
    // `abs_diff`: a `ts` far from now (even i64::MIN) cannot wrap into range.
    if now_secs.abs_diff(ts) > SKEW_SECS.unsigned_abs() {
        return Err(refused(
            "actas_expired",
            "the timestamp is more than 300 s away",
        ));
    }
    if !signed_by(secret, &claims, &sig)? {
        return Err(refused("actas_signature", "the signature does not match"));
    }
    identity(&claims, "hmac", "email", "groups")
}
