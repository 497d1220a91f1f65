//! The `x-svc-act-as` header an agent sends to act for a person, signed as the `hmac` act-as
//! method wants it: the claims with `ts`, canonical JSON (RFC 8785), HMAC-SHA256 under the
//! agent's secret in `sig`, the whole base64. [`python_header`] builds the same header with
//! Python's standard library, as a client outside this codebase would.

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
    let canonical = portcullis_shared::canonical::to_vec(&claims).expect("claims");
    let mut mac = Hmac::<Sha256>::new_from_slice(secret.as_bytes()).expect("key");
    mac.update(&canonical);
    claims.insert(
        "sig".into(),
        Value::String(B64.encode(mac.finalize().into_bytes())),
    );
    B64.encode(portcullis_shared::canonical::to_vec(&claims).expect("header"))
}

/// The same header, signed now by `tests/python/act_as_sign.py` (Python's `hmac`, `json` and
/// `base64` only). With `escape_non_ascii`, non-ASCII characters are `\u`-escaped as
/// `json.dumps` does by default; without it they are UTF-8, as RFC 8785 writes them.
pub async fn python_header(secret: &str, claims: &Value, escape_non_ascii: bool) -> String {
    let script = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("python/act_as_sign.py");
    let mut command = tokio::process::Command::new(crate::python::interpreter());
    command
        .arg(script)
        .arg("hmac")
        .arg(secret)
        .arg(claims.to_string());
    if escape_non_ascii {
        command.arg("--escape-non-ascii");
    }
    let out = command.output().await.expect("run act_as_sign.py");
    assert!(
        out.status.success(),
        "act_as_sign.py: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .expect("utf-8")
        .trim()
        .to_string()
}
