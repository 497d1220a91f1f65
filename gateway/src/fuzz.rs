//! Strategies the fuzz targets share: bearer-like strings and JWT-shaped tokens with any
//! algorithm, the claims a target wants, and any signature.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use proptest::prelude::*;
use serde_json::Value;

/// A JWT under `kid` `k1`: any of the usual algorithms (accepted or not), the given claims,
/// random signature bytes.
pub fn jwt_shaped(claims: impl Strategy<Value = Value>) -> impl Strategy<Value = String> {
    let alg = prop_oneof![
        Just("EdDSA"),
        Just("none"),
        Just("HS256"),
        Just("RS256"),
        Just("ES256")
    ];
    let sig = proptest::collection::vec(any::<u8>(), 0..96);
    (alg, claims, sig).prop_map(|(alg, claims, sig)| {
        let header = serde_json::json!({"alg": alg, "kid": "k1", "typ": "JWT"});
        format!(
            "{}.{}.{}",
            URL_SAFE_NO_PAD.encode(header.to_string()),
            URL_SAFE_NO_PAD.encode(claims.to_string()),
            URL_SAFE_NO_PAD.encode(sig)
        )
    })
}

/// Any string, three dotted base64url-ish parts, or a JWT-shaped token.
pub fn token_like(jwt: impl Strategy<Value = String>) -> impl Strategy<Value = String> {
    prop_oneof![
        any::<String>(),
        "[A-Za-z0-9_-]{0,40}\\.[A-Za-z0-9_-]{0,40}\\.[A-Za-z0-9_-]{0,40}",
        jwt,
    ]
}
