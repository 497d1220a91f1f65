//! The `x-svc-act-as` header an agent sends to act for a person, signed as the `hmac` act-as
//! method wants it: the claims with `ts`, canonical JSON (keys sorted), HMAC-SHA256 under the
//! agent's secret in `sig`, the whole base64.

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine as _;
use hmac::{Hmac, Mac};
use serde_json::{Map, Value};
use sha2::Sha256;

/// A header for end user `sub`, signed now with `secret`.
pub fn hmac_header(sub: &str, secret: &str) -> String {
    let mut claims = Map::new();
    claims.insert("sub".into(), Value::String(sub.into()));
    claims.insert("ts".into(), Value::from(chrono::Utc::now().timestamp()));
    // serde_json's map keeps keys sorted: this is the canonical form.
    let canonical = serde_json::to_vec(&Value::Object(claims.clone())).expect("claims");
    let mut mac = Hmac::<Sha256>::new_from_slice(secret.as_bytes()).expect("key");
    mac.update(&canonical);
    claims.insert(
        "sig".into(),
        Value::String(B64.encode(mac.finalize().into_bytes())),
    );
    B64.encode(serde_json::to_vec(&Value::Object(claims)).expect("header"))
}
