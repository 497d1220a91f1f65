//! The act-as header (`X-Svc-Act-As`) under each act-as method of the agent
//! (`portcullis_gateway::actas`): never a panic; an identity is admitted only within the
//! bounds on its parts; a `bound` agent or one without a method admits no header; and an
//! `hmac` header is admitted only when its signature and timestamp check out when recomputed
//! here. (The `oidc` method's tokens are the `jwt` target's.)
#![no_main]

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use hmac::{Hmac, Mac};
use libfuzzer_sys::fuzz_target;
use portcullis_gateway::fuzzing::{act_as, HMAC_SECRET};
use portcullis_shared::api::agents::ActAsMethod;
use portcullis_shared::policy::ActAs;
use serde_json::Value;
use sha2::Sha256;

/// The time the headers are read at (the seeds' `ts`).
const NOW: i64 = 1_700_000_000;

const METHODS: [Option<ActAsMethod>; 5] = [
    None,
    Some(ActAsMethod::None),
    Some(ActAsMethod::Hmac),
    Some(ActAsMethod::Oidc),
    Some(ActAsMethod::Bound),
];

fn bounded(who: &ActAs) {
    assert!(who.present && !who.sub.is_empty() && who.sub.len() <= 256);
    assert!(who.email.len() <= 320);
    assert!(who.groups.len() <= 256 && who.groups.iter().all(|g| g.len() <= 256));
}

/// Whether the header's `sig` is the HMAC of its other claims, canonical, under the secret,
/// and its `ts` is within 300 s of [`NOW`].
fn really_signed(header: &[u8]) -> bool {
    let Ok(text) = std::str::from_utf8(header) else {
        return false;
    };
    let Ok(json) = STANDARD.decode(text.trim()) else {
        return false;
    };
    let Ok(Value::Object(mut claims)) = serde_json::from_slice::<Value>(&json) else {
        return false;
    };
    let Some(Value::String(sig)) = claims.remove("sig") else {
        return false;
    };
    let Ok(sig) = STANDARD.decode(sig) else {
        return false;
    };
    let Some(ts) = claims.get("ts").and_then(Value::as_i64) else {
        return false;
    };
    let Ok(canonical) = portcullis_shared::canonical::to_vec(&claims) else {
        return false;
    };
    let verifies = |bytes: &[u8]| {
        let mut mac = Hmac::<Sha256>::new_from_slice(HMAC_SECRET.as_bytes())
            .unwrap_or_else(|e| panic!("{e}"));
        mac.update(bytes);
        mac.verify_slice(&sig).is_ok()
    };
    let escaped = portcullis_shared::canonical::escape_non_ascii(&canonical);
    NOW.abs_diff(ts) <= 300 && (verifies(&canonical) || escaped.is_some_and(|e| verifies(&e)))
}

fuzz_target!(|input: &[u8]| {
    let Some((&selector, header)) = input.split_first() else {
        return;
    };
    let method = METHODS[usize::from(selector) % METHODS.len()];
    let Ok(who) = act_as(method, Some(header), NOW) else {
        if method == Some(ActAsMethod::Oidc) {
            if let Ok(text) = std::str::from_utf8(header) {
                let _ = portcullis_gateway::actas::oidc::header(text.trim());
            }
        }
        return;
    };
    bounded(&who);
    match method {
        Some(ActAsMethod::None) => assert!(!who.verified && who.method == "none"),
        Some(ActAsMethod::Hmac) => {
            assert!(who.verified && who.method == "hmac");
            assert!(really_signed(header), "a forged hmac header was admitted");
        }
        other => panic!("{other:?} admitted a header"),
    }
});
