//! JWTs from outside: agent tokens (`Authorization: Bearer`, checked by
//! `portcullis_gateway::authn` against the snapshot's EdDSA keys) and act-as `oidc` tokens
//! (`portcullis_gateway::actas::oidc`, checked against an issuer's key). The keys here have no
//! private half anyone holds, so whatever the token, never a panic and never a caller or an
//! identity.
#![no_main]

use std::sync::OnceLock;

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use libfuzzer_sys::fuzz_target;
use portcullis_gateway::actas::oidc::{self, Audience, Issuers, OidcConfig};
use portcullis_gateway::snapshot::Compiled;

/// An Ed25519 public key (32 bytes of 7) whose private key nobody has.
fn public_key() -> String {
    URL_SAFE_NO_PAD.encode([7u8; 32])
}

fn snapshot() -> &'static Compiled {
    static SNAPSHOT: OnceLock<Compiled> = OnceLock::new();
    SNAPSHOT.get_or_init(portcullis_gateway::fuzzing::agent_token_snapshot)
}

fn oidc_config() -> &'static OidcConfig {
    static CONFIG: OnceLock<OidcConfig> = OnceLock::new();
    CONFIG.get_or_init(|| OidcConfig {
        keys: Issuers::default().source("https://idp.example", true),
        issuer: Some("https://idp.example".into()),
        audience: Audience::Fixed("gw-users".into()),
        email_claim: "email".into(),
        groups_claim: "groups".into(),
        trust_unverified_email: false,
    })
}

fuzz_target!(|token: &str| {
    assert!(
        portcullis_gateway::authn::authenticate(&snapshot().authn, token, "g").is_err(),
        "a forged agent token was admitted"
    );
    if let Ok((alg, _kid)) = oidc::header(token) {
        let key = jsonwebtoken::DecodingKey::from_ed_components(&public_key())
            .unwrap_or_else(|e| panic!("{e}"));
        let admitted = oidc::validate(
            token,
            alg,
            &key,
            "https://idp.example",
            &["gw-users".to_string()],
            oidc_config(),
        );
        assert!(admitted.is_err(), "a forged act-as token was admitted");
    }
});
