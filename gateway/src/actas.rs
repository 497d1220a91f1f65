//! Who the agent acts for, from `X-Svc-Act-As`, checked by the agent's act-as method:
//! `none` (canonical JSON, base64) and `hmac` (signed, within ±300 s) are verified here;
//! a header on an agent without a method, or with `bound`, fails closed.

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use hmac::{Hmac, Mac};
use portcullis_shared::api::agents::ActAsMethod;
use portcullis_shared::policy::ActAs;
use serde_json::{Map, Value};
use sha2::Sha256;

use crate::error::GatewayError;
use crate::snapshot::AgentEntry;

pub const HEADER: &str = "x-svc-act-as";
const SKEW_SECS: i64 = 300;

fn bad(msg: &str) -> GatewayError {
    GatewayError::Forbidden(format!("act-as identity refused: {msg}"))
}

fn decode(value: &str) -> Result<Map<String, Value>, GatewayError> {
    let bytes = B64
        .decode(value.trim())
        .map_err(|_| bad("the header is not base64"))?;
    match serde_json::from_slice(&bytes) {
        Ok(Value::Object(map)) => Ok(map),
        _ => Err(bad("the header is not a JSON object")),
    }
}

/// Whether `sig` is the HMAC-SHA256 of the claims' canonical JSON (RFC 8785) under `secret`.
/// The same text with non-ASCII characters `\u`-escaped (as Python's `json.dumps` writes it
/// by default) is accepted too: both are sorted, whitespace-free canonical JSON.
fn signed_by(secret: &str, claims: &Map<String, Value>, sig: &[u8]) -> Result<bool, GatewayError> {
    let canonical = portcullis_shared::canonical::to_vec(claims).map_err(|_| bad("claims"))?;
    let matches = |bytes: &[u8]| {
        Hmac::<Sha256>::new_from_slice(secret.as_bytes()).is_ok_and(|mut mac| {
            mac.update(bytes);
            mac.verify_slice(sig).is_ok()
        })
    };
    Ok(matches(&canonical)
        || portcullis_shared::canonical::escape_non_ascii(&canonical).is_some_and(|e| matches(&e)))
}

fn identity(map: &Map<String, Value>, method: &str) -> Result<ActAs, GatewayError> {
    let text = |k: &str| {
        map.get(k)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    let groups = match map.get("groups") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(items)) => items
            .iter()
            .filter_map(Value::as_str)
            .map(str::to_string)
            .collect(),
        Some(_) => return Err(bad("groups must be a list of strings")),
    };
    let sub = text("sub");
    if sub.is_empty() {
        return Err(bad("sub is required"));
    }
    Ok(ActAs {
        present: true,
        verified: true,
        method: method.to_string(),
        sub,
        email: text("email"),
        groups,
    })
}

/// The verified identity for Cedar's context, or why the request is refused.
pub fn verify(
    agent: &AgentEntry,
    header: Option<&[u8]>,
    now_secs: i64,
) -> Result<ActAs, GatewayError> {
    let header = match header {
        None if agent.actas_required => {
            return Err(GatewayError::Forbidden(format!(
                "agent '{}' must act for a verified person: send {HEADER}",
                agent.name
            )))
        }
        None => return Ok(ActAs::default()),
        Some(h) => std::str::from_utf8(h).map_err(|_| bad("the header is not text"))?,
    };
    match agent.actas_method {
        None => Err(GatewayError::BadRequest(format!(
            "agent '{}' has no act-as method configured; do not send {HEADER}",
            agent.name
        ))),
        Some(ActAsMethod::Bound) => Err(bad(
            "this agent's identity is bound on the server; the header is not accepted",
        )),
        Some(ActAsMethod::None) => identity(&decode(header)?, "none"),
        Some(ActAsMethod::Hmac) => {
            let secret = agent
                .actas_hmac_secret
                .as_deref()
                .ok_or_else(|| bad("no HMAC secret is configured"))?;
            let mut claims = decode(header)?;
            let sig = match claims.remove("sig") {
                Some(Value::String(s)) => B64.decode(s).map_err(|_| bad("sig is not base64"))?,
                _ => return Err(bad("sig is missing")),
            };
            let ts = claims
                .get("ts")
                .and_then(Value::as_i64)
                .ok_or_else(|| bad("ts is missing"))?;
            // `abs_diff`: a `ts` far from now (even i64::MIN) cannot wrap into range.
            if now_secs.abs_diff(ts) > SKEW_SECS.unsigned_abs() {
                return Err(bad("the timestamp is more than 300 s away"));
            }
            if !signed_by(secret, &claims, &sig)? {
                return Err(bad("the signature does not match"));
            }
            identity(&claims, "hmac")
        }
        Some(ActAsMethod::Oidc) => Err(bad(
            "OIDC verification is not available in this gateway version",
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cedar_policy::PolicySet;
    use portcullis_shared::api::agents::AgentStatus;
    use portcullis_shared::policy::{uid, Kind};

    pub(super) fn agent(method: Option<ActAsMethod>) -> AgentEntry {
        AgentEntry {
            id: "a".into(),
            name: "a".into(),
            status: AgentStatus::Active,
            uid: uid(Kind::Agent, "a"),
            policies: PolicySet::new(),
            actas_method: method,
            actas_required: false,
            actas_hmac_secret: Some("0123456789abcdef".into()),
            memo: std::sync::OnceLock::new(),
            tool_memo: std::sync::RwLock::default(),
        }
    }

    fn signed(claims: Value, secret: &str) -> String {
        let canonical = portcullis_shared::canonical::to_vec(&claims).unwrap();
        let mut mac = Hmac::<Sha256>::new_from_slice(secret.as_bytes()).unwrap();
        mac.update(&canonical);
        let mut with_sig = claims.as_object().unwrap().clone();
        with_sig.insert(
            "sig".into(),
            Value::String(B64.encode(mac.finalize().into_bytes())),
        );
        B64.encode(serde_json::to_vec(&Value::Object(with_sig)).unwrap())
    }

    /// Headers signed by Python's standard library (tests/python/act_as_sign.py), with
    /// non-ASCII emails and groups, written as UTF-8 and as `\u` escapes.
    const FIXTURE: &str = include_str!("../tests/fixtures/act_as/hmac.json");

    #[test]
    fn headers_signed_outside_rust_are_verified() {
        let fixture: Value = serde_json::from_str(FIXTURE).unwrap();
        let mut a = agent(Some(ActAsMethod::Hmac));
        a.actas_hmac_secret = fixture["secret"].as_str().map(str::to_string);
        for case in fixture["hmac"].as_array().unwrap() {
            let header = case["header"].as_str().unwrap();
            let ts = case["ts"].as_i64().unwrap();
            let got = verify(&a, Some(header.as_bytes()), ts + 10)
                .unwrap_or_else(|e| panic!("{}: {e}", case["name"]));
            let claims = &case["claims"];
            assert_eq!(got.sub, claims["sub"].as_str().unwrap(), "{}", case["name"]);
            assert_eq!(got.email, claims["email"].as_str().unwrap());
            assert_eq!(serde_json::json!(got.groups), claims["groups"]);
            assert!(got.verified);
            let mut other = a.actas_hmac_secret.clone().unwrap();
            other.push('x');
            let mut wrong = agent(Some(ActAsMethod::Hmac));
            wrong.actas_hmac_secret = Some(other);
            assert!(verify(&wrong, Some(header.as_bytes()), ts).is_err());
        }
        for case in fixture["none"].as_array().unwrap() {
            let header = case["header"].as_str().unwrap();
            let got = verify(&agent(Some(ActAsMethod::None)), Some(header.as_bytes()), 0).unwrap();
            assert_eq!(got.email, case["claims"]["email"].as_str().unwrap());
        }
    }

    #[test]
    fn a_tampered_claim_breaks_the_signature() {
        let fixture: Value = serde_json::from_str(FIXTURE).unwrap();
        let mut a = agent(Some(ActAsMethod::Hmac));
        a.actas_hmac_secret = fixture["secret"].as_str().map(str::to_string);
        let case = &fixture["hmac"][0];
        let raw = B64.decode(case["header"].as_str().unwrap()).unwrap();
        let mut claims: Map<String, Value> = serde_json::from_slice(&raw).unwrap();
        claims.insert("sub".into(), Value::String("someone-else".into()));
        let forged = B64.encode(serde_json::to_vec(&claims).unwrap());
        let err = verify(&a, Some(forged.as_bytes()), case["ts"].as_i64().unwrap()).unwrap_err();
        assert!(err.to_string().contains("signature"), "{err}");
    }

    #[test]
    fn hmac_is_verified_and_timed() {
        let a = agent(Some(ActAsMethod::Hmac));
        let claims =
            serde_json::json!({"sub": "u1", "email": "u@x.com", "groups": ["eng"], "ts": 1000});
        let ok = verify(
            &a,
            Some(signed(claims.clone(), "0123456789abcdef").as_bytes()),
            1100,
        )
        .unwrap();
        assert_eq!(
            (ok.sub.as_str(), ok.verified, ok.groups.len()),
            ("u1", true, 1)
        );
        assert!(verify(
            &a,
            Some(signed(claims.clone(), "wrong-secret-000").as_bytes()),
            1100
        )
        .is_err());
        assert!(verify(
            &a,
            Some(signed(claims, "0123456789abcdef").as_bytes()),
            2000
        )
        .is_err());
    }

    #[test]
    fn plain_identity_and_refusals() {
        let header = B64.encode(br#"{"email":"u@x.com","groups":[],"sub":"u1"}"#);
        let got = verify(&agent(Some(ActAsMethod::None)), Some(header.as_bytes()), 0).unwrap();
        assert_eq!(got.method, "none");
        assert!(verify(&agent(None), Some(header.as_bytes()), 0).is_err());
        assert!(verify(&agent(Some(ActAsMethod::Bound)), Some(header.as_bytes()), 0).is_err());
        assert!(!verify(&agent(None), None, 0).unwrap().present);
    }
}

/// Arbitrary headers, and well-formed JSON claims with any signature: never a panic, and an
/// HMAC agent admits none of them.
#[cfg(test)]
mod fuzz {
    use super::tests::agent;
    use super::*;
    use proptest::prelude::*;

    fn claims() -> impl Strategy<Value = Vec<u8>> {
        let text = "[a-z@.0-9]{0,12}";
        (
            text,
            text,
            any::<i64>(),
            proptest::collection::vec(any::<u8>(), 0..40),
        )
            .prop_map(|(sub, email, ts, sig)| {
                let json = serde_json::json!({"sub": sub, "email": email, "ts": ts,
                    "groups": [sub], "sig": B64.encode(sig)});
                B64.encode(serde_json::to_vec(&json).unwrap_or_default())
                    .into_bytes()
            })
    }

    fn header() -> impl Strategy<Value = Vec<u8>> {
        prop_oneof![
            proptest::collection::vec(any::<u8>(), 0..200),
            "[A-Za-z0-9+/=]{0,120}".prop_map(String::into_bytes),
            claims(),
        ]
    }

    proptest! {
        #[test]
        fn headers_never_panic_and_forged_hmac_is_refused(h in header(), now in any::<i64>()) {
            let hmac = agent(Some(ActAsMethod::Hmac));
            prop_assert!(verify(&hmac, Some(&h), now).is_err());
            for method in [None, Some(ActAsMethod::None), Some(ActAsMethod::Bound), Some(ActAsMethod::Oidc)] {
                let _ = verify(&agent(method), Some(&h), now);
            }
        }
    }
}
