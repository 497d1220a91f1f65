//! The credential step's own cost, apart from any network: signing a Bedrock Converse request
//! with SigV4 (`aws-sigv4` over the exact body sent), and taking a cached Google token or AWS
//! credentials from the expiring cache that every call to a cloud model goes through; and
//! authenticating a caller by agent key or by exchanged token; verifying an act-as OIDC token
//! on first sight and once remembered; and a person's credential (or an OAuth access token)
//! found in the gateway's cache among 100,000 others.
//! `cargo bench -p portcullis-gateway --bench credentials`.

#![allow(clippy::expect_used, clippy::unwrap_used)] // a benchmark: a failure should stop it loudly

use std::time::Duration;

use aws_credential_types::Credentials;
use criterion::{criterion_group, criterion_main, Criterion};
use portcullis_gateway::cloud::aws;
use portcullis_gateway::cloud::cache::Expiring;

fn sigv4(c: &mut Criterion) {
    let url = reqwest::Url::parse(
        "https://bedrock-runtime.us-east-1.amazonaws.com/model/us.anthropic.claude-sonnet-4-5-20250929-v1%3A0/converse",
    )
    .expect("url");
    let body = br#"{"messages":[{"role":"user","content":[{"text":"Say hello."}]}],"inferenceConfig":{"maxTokens":1024}}"#;
    let keys = Credentials::new(
        "AKIDEXAMPLE",
        "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY",
        None,
        None,
        "bench",
    );
    let temporary = Credentials::new(
        "ASIAEXAMPLE",
        "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY",
        Some("FwoGZXIvYXdzEXAMPLE".into()),
        None,
        "bench",
    );
    let headers = [("content-type", "application/json")];
    c.bench_function("sigv4 sign a Converse request (stored keys)", |b| {
        b.iter(|| aws::sign(&keys, "us-east-1", &url, &headers, body).expect("signed"))
    });
    c.bench_function("sigv4 sign a Converse request (assumed role)", |b| {
        b.iter(|| aws::sign(&temporary, "us-east-1", &url, &headers, body).expect("signed"))
    });
}

fn cached_token(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("runtime");
    let cache = Expiring::<String>::new(Duration::from_secs(60));
    let fetch = || async {
        Ok::<_, ()>((
            "ya29.cached-token".to_string(),
            Some(Duration::from_secs(3600)),
        ))
    };
    runtime.block_on(cache.get(fetch)).expect("first fetch");
    c.bench_function("cached Google token (fresh)", |b| {
        b.iter(|| runtime.block_on(cache.get(fetch)).expect("cached"))
    });
}

/// A token as `ExchangeAgentKey` signs it (agent `a`, gateway `g`, workspace `w`, key `k1`),
/// and the signing key's public half.
fn exchanged_token() -> (String, Vec<u8>) {
    use ring::signature::KeyPair;
    let rng = ring::rand::SystemRandom::new();
    let pkcs8 = ring::signature::Ed25519KeyPair::generate_pkcs8(&rng).unwrap();
    let pair = ring::signature::Ed25519KeyPair::from_pkcs8(pkcs8.as_ref()).unwrap();
    let mut header = jsonwebtoken::Header::new(jsonwebtoken::Algorithm::EdDSA);
    header.kid = Some("k1".into());
    let now = chrono::Utc::now().timestamp();
    let claims = portcullis_shared::snapshot::AgentTokenClaims {
        iss: portcullis_shared::snapshot::AGENT_TOKEN_ISSUER.into(),
        sub: "a".into(),
        aud: "g".into(),
        iat: now,
        exp: now + 600,
        jti: "j".into(),
        ws: "w".into(),
        act: None,
        grant: None,
    };
    let signing = jsonwebtoken::EncodingKey::from_ed_der(pkcs8.as_ref());
    let token = jsonwebtoken::encode(&header, &claims, &signing).unwrap();
    (token, pair.public_key().as_ref().to_vec())
}

/// What checking an exchanged agent token costs: the EdDSA signature and the claims, as
/// `authn.rs` checks them.
fn agent_token(c: &mut Criterion) {
    let (token, public) = exchanged_token();
    let key = jsonwebtoken::DecodingKey::from_ed_der(&public);
    let mut validation = jsonwebtoken::Validation::new(jsonwebtoken::Algorithm::EdDSA);
    validation.leeway = 30;
    validation.set_audience(&["g"]);
    validation.set_issuer(&[portcullis_shared::snapshot::AGENT_TOKEN_ISSUER]);
    c.bench_function("agent token: EdDSA signature and claims", |b| {
        b.iter(|| {
            jsonwebtoken::decode::<portcullis_shared::snapshot::AgentTokenClaims>(
                &token,
                &key,
                &validation,
            )
            .unwrap()
        })
    });
}

/// `authn::authenticate` as a request runs it, on a compiled snapshot: with the agent key
/// (hash and lookup), and with an exchanged token after its first use (remembered).
fn authenticate(c: &mut Criterion) {
    use portcullis_gateway::{authn, snapshot};
    let (token, public) = exchanged_token();
    let x = {
        use base64::Engine;
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(public)
    };
    let key = portcullis_shared::keys::generate(portcullis_shared::keys::KeyKind::Agent);
    let key = key.as_str();
    let snap: portcullis_shared::snapshot::Snapshot = serde_json::from_value(serde_json::json!({
        "workspace_id": "w", "revision": 1, "deployment_id": "d", "public_url": "http://gw",
        "generated_at": "", "models": [], "pools": [], "bundles": [],
        "gateways": [{"gateway_id": "g", "name": "default", "state": "active", "is_default": true,
            "all_agents": true, "agent_ids": [], "model_ids": [], "pool_ids": []}],
        "agents": [{"agent_id": "a", "name": "bot", "status": "active", "parent_id": null,
            "key_hashes": [portcullis_shared::keys::hash(key)], "token_ttl_secs": 600,
            "actas_method": null, "actas_required": false, "actas_provider_id": null,
            "actas_oidc_url": null, "actas_hmac_secret": null}],
        "token_keys": [{"kid": "k1", "x": x}]
    }))
    .unwrap();
    let compiled = snapshot::compile(&snap, &snapshot::Runtime::default()).unwrap();
    c.bench_function("authenticate: agent key", |b| {
        b.iter(|| {
            authn::authenticate(&compiled.authn, key, "g")
                .unwrap()
                .agent
                .id
                .len()
        })
    });
    c.bench_function("authenticate: exchanged token, remembered", |b| {
        b.iter(|| {
            authn::authenticate(&compiled.authn, &token, "g")
                .unwrap()
                .agent
                .id
                .len()
        })
    });
}

/// An act-as OIDC token signed by a fresh key pair (`EdDSA` or `ES256`), and its verifier.
fn oidc_token(alg: jsonwebtoken::Algorithm) -> (String, jsonwebtoken::DecodingKey) {
    use base64::engine::general_purpose::URL_SAFE_NO_PAD;
    use base64::Engine;
    use ring::signature::{self, KeyPair};
    let rng = ring::rand::SystemRandom::new();
    let (encoding, decoding) = if alg == jsonwebtoken::Algorithm::EdDSA {
        let pkcs8 = signature::Ed25519KeyPair::generate_pkcs8(&rng).unwrap();
        let pair = signature::Ed25519KeyPair::from_pkcs8(pkcs8.as_ref()).unwrap();
        let x = URL_SAFE_NO_PAD.encode(pair.public_key().as_ref());
        (
            jsonwebtoken::EncodingKey::from_ed_der(pkcs8.as_ref()),
            jsonwebtoken::DecodingKey::from_ed_components(&x).unwrap(),
        )
    } else {
        let fixed = &signature::ECDSA_P256_SHA256_FIXED_SIGNING;
        let pkcs8 = signature::EcdsaKeyPair::generate_pkcs8(fixed, &rng).unwrap();
        let pair = signature::EcdsaKeyPair::from_pkcs8(fixed, pkcs8.as_ref(), &rng).unwrap();
        let point = pair.public_key().as_ref();
        let (x, y) = (
            URL_SAFE_NO_PAD.encode(&point[1..33]),
            URL_SAFE_NO_PAD.encode(&point[33..]),
        );
        (
            jsonwebtoken::EncodingKey::from_ec_der(pkcs8.as_ref()),
            jsonwebtoken::DecodingKey::from_ec_components(&x, &y).unwrap(),
        )
    };
    let mut header = jsonwebtoken::Header::new(alg);
    header.kid = Some("k1".into());
    let now = chrono::Utc::now().timestamp();
    let claims = serde_json::json!({"iss": "https://idp.example", "aud": "gw-users",
        "sub": "u1", "email": "u1@corp.com", "groups": ["eng"], "iat": now, "exp": now + 600});
    (
        jsonwebtoken::encode(&header, &claims, &encoding).unwrap(),
        decoding,
    )
}

/// Act-as `oidc`: the first sight of a token (header, signature, claims, identity), by
/// algorithm, and every later call with it (`recall`: the memory of verified tokens).
fn actas_oidc(c: &mut Criterion) {
    use portcullis_gateway::actas::oidc;
    use portcullis_gateway::snapshot;
    let snap: portcullis_shared::snapshot::Snapshot = serde_json::from_value(serde_json::json!({
        "workspace_id": "w", "revision": 1, "deployment_id": "d", "public_url": "http://gw",
        "generated_at": "", "models": [], "pools": [], "bundles": [],
        "gateways": [{"gateway_id": "g", "name": "default", "state": "active", "is_default": true,
            "all_agents": true, "agent_ids": [], "model_ids": [], "pool_ids": []}],
        "agents": [{"agent_id": "a", "name": "bot", "status": "active", "parent_id": null,
            "key_hashes": [], "token_ttl_secs": 600, "actas_method": "oidc",
            "actas_required": false, "actas_provider_id": "p", "actas_oidc_url": null,
            "actas_hmac_secret": null}],
        "actas_providers": [{"provider_id": "p", "name": "idp", "method": "oidc",
            "issuer": "https://idp.example", "audience": "gw-users", "email_claim": "email",
            "groups_claim": "groups"}]
    }))
    .unwrap();
    let compiled = snapshot::compile(&snap, &snapshot::Runtime::default()).unwrap();
    let agent = &compiled.authn.agents[0].act_as;
    let cfg = agent.oidc.as_deref().unwrap();
    let audiences = ["gw-users".to_string()];
    for (name, alg) in [
        ("EdDSA", jsonwebtoken::Algorithm::EdDSA),
        ("ES256", jsonwebtoken::Algorithm::ES256),
    ] {
        let (token, key) = oidc_token(alg);
        c.bench_function(&format!("act-as oidc: {name} token, first sight"), |b| {
            b.iter(|| {
                let (alg, _) = oidc::header(&token).unwrap();
                oidc::validate(&token, alg, &key, "https://idp.example", &audiences, cfg).unwrap()
            })
        });
    }
    let (token, key) = oidc_token(jsonwebtoken::Algorithm::EdDSA);
    let verified = oidc::validate(
        &token,
        jsonwebtoken::Algorithm::EdDSA,
        &key,
        "https://idp.example",
        &audiences,
        cfg,
    )
    .unwrap();
    agent
        .oidc_memory
        .write()
        .unwrap()
        .insert(token.clone().into(), verified);
    let now = chrono::Utc::now().timestamp();
    c.bench_function("act-as oidc: remembered token", |b| {
        b.iter(|| {
            oidc::recall(agent, &token, "g", now)
                .unwrap()
                .unwrap()
                .sub
                .len()
        })
    });
}

fn person_credential(c: &mut Criterion) {
    use portcullis_gateway::peruser::{Credential, Credentials};
    let cache = Credentials::default();
    let header = |v: &str| {
        let name = http::HeaderName::from_static("authorization");
        let value = http::HeaderValue::from_str(&format!("Bearer {v}")).expect("header");
        std::sync::Arc::new(Credential {
            headers: vec![(name, value)],
            digest: v.to_string(),
        })
    };
    let hour = Duration::from_secs(3600);
    for connection in 0..100 {
        for person in 0..1000 {
            let (id, sub) = (
                format!("connection-{connection}"),
                format!("person-{person}"),
            );
            cache.keep(&id, &sub, header(&format!("{connection}-{person}")), hour);
        }
    }
    c.bench_function(
        "a person's credential from the cache (100 x 1,000 kept)",
        |b| b.iter(|| cache.cached("connection-42", "person-421").expect("cached")),
    );
}

criterion_group!(
    benches,
    sigv4,
    cached_token,
    agent_token,
    authenticate,
    actas_oidc,
    person_credential
);
criterion_main!(benches);
