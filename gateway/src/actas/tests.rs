//! The act-as decoders on headers from outside: fixtures signed by other languages, tampering,
//! timing, and a fuzz target over every method.

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use hmac::{Hmac, Mac};
use portcullis_shared::api::agents::ActAsMethod;
use portcullis_shared::policy::ActAs;
use serde_json::{Map, Value};
use sha2::Sha256;

use super::AgentActAs as AgentEntry;
use super::{identify, Step};
use crate::error::GatewayError;

/// The identity a header yields on its own (without the OIDC step).
fn verify(agent: &AgentEntry, header: Option<&[u8]>, now: i64) -> Result<ActAs, GatewayError> {
    match identify(agent, header, None, now)? {
        Step::Done(a) => Ok(a),
        Step::Oidc(_) => Err(GatewayError::Internal("an OIDC step".into())),
    }
}

mod unit {
    use super::*;

    pub(super) fn agent(method: Option<ActAsMethod>) -> AgentEntry {
        crate::fuzzing::agent(method)
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
    const FIXTURE: &str = include_str!("../../tests/fixtures/act_as/hmac.json");

    #[test]
    fn headers_signed_outside_rust_are_verified() {
        let fixture: Value = serde_json::from_str(FIXTURE).unwrap();
        let mut a = agent(Some(ActAsMethod::Hmac));
        a.hmac_secret = fixture["secret"].as_str().map(str::to_string);
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
            let mut other = a.hmac_secret.clone().unwrap();
            other.push('x');
            let mut wrong = agent(Some(ActAsMethod::Hmac));
            wrong.hmac_secret = Some(other);
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
        a.hmac_secret = fixture["secret"].as_str().map(str::to_string);
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
mod fuzz {
    use super::unit::agent;
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

/// Act-as `oidc` tokens: each claim and signature check refuses with its own reason code, and
/// `none` and shared-secret algorithms are refused before any key is looked at.
mod oidc_tokens {
    use base64::engine::general_purpose::URL_SAFE_NO_PAD;
    use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header};
    use ring::signature::{Ed25519KeyPair, KeyPair};
    use serde_json::json;

    use super::super::oidc::{self, Audience, OidcConfig};
    use super::*;

    pub(super) struct Signer {
        encoding: EncodingKey,
        pub decoding: DecodingKey,
    }

    pub(super) fn signer() -> Signer {
        let rng = ring::rand::SystemRandom::new();
        let pkcs8 = Ed25519KeyPair::generate_pkcs8(&rng).unwrap();
        let pair = Ed25519KeyPair::from_pkcs8(pkcs8.as_ref()).unwrap();
        let x = URL_SAFE_NO_PAD.encode(pair.public_key().as_ref());
        Signer {
            encoding: EncodingKey::from_ed_der(pkcs8.as_ref()),
            decoding: DecodingKey::from_ed_components(&x).unwrap(),
        }
    }

    pub(super) fn config() -> OidcConfig {
        OidcConfig {
            keys: oidc::Issuers::default().source("https://idp.example", true),
            issuer: Some("https://idp.example".into()),
            audience: Audience::Fixed("gw-users".into()),
            email_claim: "mail".into(),
            groups_claim: "https://corp/groups".into(),
            trust_unverified_email: false,
        }
    }

    fn token(s: &Signer, claims: Value) -> String {
        let mut header = Header::new(Algorithm::EdDSA);
        header.kid = Some("k1".into());
        jsonwebtoken::encode(&header, &claims, &s.encoding).unwrap()
    }

    fn claims(now: i64) -> Value {
        json!({"iss": "https://idp.example", "aud": ["gw-users", "other"], "sub": "u1",
            "mail": "u1@corp.com", "email_verified": true, "https://corp/groups": ["eng"],
            "iat": now, "exp": now + 300})
    }

    fn check(s: &Signer, token: &str) -> Result<ActAs, GatewayError> {
        check_with(s, token, &config())
    }

    fn check_with(s: &Signer, token: &str, cfg: &OidcConfig) -> Result<ActAs, GatewayError> {
        let (alg, kid) = oidc::header(token)?;
        assert_eq!(kid, "k1");
        oidc::validate(
            token,
            alg,
            &s.decoding,
            "https://idp.example",
            &["gw-users".to_string()],
            cfg,
        )
        .map(|r| r.identity())
    }

    #[test]
    fn an_email_counts_only_when_verified_unless_the_provider_is_trusted() {
        let s = signer();
        let now = chrono::Utc::now().timestamp();
        let mut unsaid = claims(now);
        unsaid.as_object_mut().unwrap().remove("email_verified");
        let mut unverified = claims(now);
        unverified["email_verified"] = json!("true");
        for c in [unsaid.clone(), unverified] {
            let got = check(&s, &token(&s, c)).unwrap();
            assert_eq!((got.sub.as_str(), got.email.as_str()), ("u1", ""));
        }
        let trusting = OidcConfig {
            trust_unverified_email: true,
            ..config()
        };
        let got = check_with(&s, &token(&s, unsaid), &trusting).unwrap();
        assert_eq!(got.email, "u1@corp.com");
        let mut denied = claims(now);
        denied["email_verified"] = json!(false);
        let got = check_with(&s, &token(&s, denied), &trusting).unwrap();
        assert_eq!(
            got.email, "",
            "an email the issuer says is unverified never counts"
        );
    }

    fn code(r: Result<ActAs, GatewayError>) -> &'static str {
        match r {
            Err(GatewayError::ActAsRefused { code, .. }) => code,
            Err(e) => panic!("not an act-as refusal: {e}"),
            Ok(a) => panic!("admitted {}", a.sub),
        }
    }

    #[test]
    fn a_valid_token_yields_its_identity_by_the_configured_claims() {
        let s = signer();
        let now = chrono::Utc::now().timestamp();
        let got = check(&s, &token(&s, claims(now))).unwrap();
        assert_eq!(
            (got.sub.as_str(), got.email.as_str(), got.groups.clone()),
            ("u1", "u1@corp.com", vec!["eng".to_string()])
        );
        assert!(got.verified && got.present);
        assert_eq!(got.method, "oidc");
    }

    #[test]
    fn each_bad_claim_has_its_reason() {
        let s = signer();
        let now = chrono::Utc::now().timestamp();
        let with = |k: &str, v: Value| {
            let mut c = claims(now);
            c[k] = v;
            token(&s, c)
        };
        assert_eq!(
            code(check(&s, &with("aud", json!("nope")))),
            "actas_audience"
        );
        assert_eq!(
            code(check(&s, &with("exp", json!(now - 3600)))),
            "actas_expired"
        );
        assert_eq!(
            code(check(&s, &with("nbf", json!(now + 3600)))),
            "actas_not_yet_valid"
        );
        assert_eq!(
            code(check(&s, &with("iss", json!("https://evil")))),
            "actas_issuer"
        );
        let other = signer();
        assert_eq!(
            code(check(&s, &token(&other, claims(now)))),
            "actas_signature"
        );
        let mut no_sub = claims(now);
        no_sub.as_object_mut().unwrap().remove("sub");
        assert_eq!(code(check(&s, &token(&s, no_sub))), "actas_malformed");
    }

    #[test]
    fn none_and_shared_secret_algorithms_are_refused() {
        let body = URL_SAFE_NO_PAD.encode(claims(0).to_string());
        for alg in ["none", "HS256", "HS512", "RS384", ""] {
            let head = URL_SAFE_NO_PAD.encode(json!({"alg": alg, "kid": "k1"}).to_string());
            let r = oidc::header(&format!("{head}.{body}."));
            assert!(
                matches!(
                    r,
                    Err(GatewayError::ActAsRefused {
                        code: "actas_alg_refused",
                        ..
                    })
                ),
                "{alg}"
            );
        }
        let head = URL_SAFE_NO_PAD.encode(json!({"alg": "EdDSA"}).to_string());
        assert!(oidc::header(&format!("{head}.{body}.x")).is_err(), "no kid");
    }
}

/// Arbitrary JWT-shaped act-as tokens, with any algorithm, claims and signature: never a
/// panic, never an identity.
mod oidc_fuzz {
    use proptest::prelude::*;

    use super::super::oidc;
    use super::oidc_tokens::{config, signer};

    fn token() -> impl Strategy<Value = String> {
        let claims = (any::<i64>(), "[a-z:/.]{0,20}").prop_map(|(exp, aud)| {
            serde_json::json!({"iss": "https://idp.example", "sub": "u", "aud": aud, "exp": exp})
        });
        crate::fuzz::token_like(crate::fuzz::jwt_shaped(claims))
    }

    proptest! {
        #[test]
        fn forged_tokens_never_yield_an_identity(t in token()) {
            let s = signer();
            let admitted = oidc::header(&t).and_then(|(alg, _)| {
                oidc::validate(&t, alg, &s.decoding, "https://idp.example",
                    &["gw-users".to_string()], &config())
            });
            prop_assert!(admitted.is_err());
        }
    }
}

/// Identities are bounded, and an email the issuer marks unverified is dropped.
mod identity_limits {
    use serde_json::json;

    use super::super::claims::identity;
    use crate::error::GatewayError;

    fn claims(v: serde_json::Value) -> serde_json::Map<String, serde_json::Value> {
        v.as_object().unwrap().clone()
    }

    #[test]
    fn oversized_parts_are_refused() {
        let many: Vec<String> = (0..300).map(|i| format!("g{i}")).collect();
        for c in [
            json!({"sub": "x".repeat(300)}),
            json!({"sub": "u", "email": "e".repeat(400)}),
            json!({"sub": "u", "groups": many}),
            json!({"sub": "u", "groups": ["g".repeat(300)]}),
        ] {
            let r = identity(&claims(c), "oidc", "email", "groups");
            assert!(matches!(
                r,
                Err(GatewayError::ActAsRefused {
                    code: "actas_malformed",
                    ..
                })
            ));
        }
    }

    #[test]
    fn an_unverified_email_is_dropped() {
        let c = claims(json!({"sub": "u", "email": "ceo@corp.com", "email_verified": false}));
        assert_eq!(identity(&c, "oidc", "email", "groups").unwrap().email, "");
        let c = claims(json!({"sub": "u", "email": "me@corp.com", "email_verified": true}));
        assert_eq!(
            identity(&c, "oidc", "email", "groups").unwrap().email,
            "me@corp.com"
        );
    }
}
