//! Act-as identity over real processes: an agent passing its user's ID token from a real
//! OpenID provider (`oidc-provider` from npm), verified against the provider's published keys
//! through a workspace verification provider or the inline discovery URL; every kind of bad
//! token refused with its own reason code; key rotation at the provider picked up without a
//! restart, and the key set not fetched per call. Then the workspace's floor on act-as
//! strength, and keys bound to an end user.

use portcullis_client::act_as;
use portcullis_tests::controlplane::{AGENTS, MGMT};
use portcullis_tests::oidc::OidcIssuer;
use serde_json::{json, Value};

use crate::world::{http, world, Http, World};

async fn chat_as(w: &World, bearer: &str, act_as: Option<&str>) -> Http {
    let mut req = reqwest::Client::new()
        .post(format!(
            "{}/v1/chat/completions",
            w.gw.gateway_url(&w.gateway_id)
        ))
        .bearer_auth(bearer)
        .json(&json!({"model": "gpt", "messages": [{"role": "user", "content": "hi"}]}));
    if let Some(h) = act_as {
        req = req.header("x-svc-act-as", h);
    }
    http(req).await
}

fn code(r: &Http) -> &str {
    r.body["error"]["code"].as_str().unwrap_or_default()
}

async fn update_bot(w: &World, fields: Value) {
    let mut body = json!({"agent_id": "bot"});
    body.as_object_mut()
        .unwrap()
        .extend(fields.as_object().unwrap().clone());
    w.cp.ok(AGENTS, "UpdateAgent", w.cp.body(body)).await;
    w.gw.caught_up(&w.cp).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_passes_its_users_id_token_and_the_gateway_verifies_it() {
    let idp = OidcIssuer::start().await;
    let w = world().await;
    let provider =
        w.cp.ok(
            AGENTS,
            "CreateActAsProvider",
            w.cp.body(json!({"name": "corp-idp", "issuer": idp.issuer,
                "audience": OidcIssuer::client_id()})),
        )
        .await;
    assert_eq!(provider["provider"]["method"], "oidc", "{provider}");
    update_bot(
        &w,
        // Tokens the provider issues carry groups; forged ones only an email.
        json!({"actas_method": "oidc", "actas_provider_id": "corp-idp",
            "actas_allowed_groups": ["eng"], "actas_allowed_emails": ["alice@example.com"]}),
    )
    .await;

    let alice = an_issued_token_admits_its_person_who_is_recorded(&w, &idp).await;
    let bob = idp.id_token("bob", "bob@corp.com", &["ops"]).await;
    let r = chat_as(&w, &w.key, Some(&bob)).await;
    assert_eq!((r.status, code(&r)), (403, "policy_denied"), "{}", r.text);

    every_bad_token_is_refused_with_its_reason(&w, &idp).await;

    // The key set is fetched once, not per call.
    let fetched = idp.jwks_hits().await;
    assert!(fetched >= 1);
    for _ in 0..10 {
        let r = chat_as(&w, &w.key, Some(&alice)).await;
        assert_eq!(r.status, 200, "{}", r.text);
        let fresh = idp.forge("valid", "alice", None).await;
        assert_eq!(chat_as(&w, &w.key, Some(&fresh)).await.status, 200);
    }
    assert_eq!(
        idp.jwks_hits().await,
        fetched,
        "the JWKS was fetched per call"
    );

    // The provider rotates its key: the next token names an unknown kid, and the gateway
    // refetches (once, past its floor on refetches) without a restart.
    let kid = idp.rotate().await;
    assert_ne!(kid, "k1");
    tokio::time::sleep(std::time::Duration::from_secs(6)).await;
    let rotated = idp.id_token("alice", "alice@corp.com", &["eng"]).await;
    let r = chat_as(&w, &w.key, Some(&rotated)).await;
    assert_eq!(r.status, 200, "after rotation: {}", r.text);
    assert_eq!(idp.jwks_hits().await, fetched + 1);

    // The inline form: discovery from the issuer URL, the token's aud names the agent.
    the_inline_form_wants_the_agent_as_audience(&w, &idp, &rotated).await;
}

/// Alice's token from the provider passes, and the audit record names her: her act-as header.
async fn an_issued_token_admits_its_person_who_is_recorded(w: &World, idp: &OidcIssuer) -> String {
    let alice = act_as::oidc(&idp.id_token("alice", "alice@corp.com", &["eng"]).await).unwrap();
    let r = chat_as(w, &w.key, Some(&alice)).await;
    assert_eq!(r.status, 200, "a token the provider issued: {}", r.text);
    // The verified person is the audit record's on_behalf_of.
    let activity = crate::audit::activity();
    let r = http(
        reqwest::Client::new()
            .post(format!(
                "{}/v1/chat/completions",
                w.gw.gateway_url(&w.gateway_id)
            ))
            .bearer_auth(&w.key)
            .header("x-svc-act-as", &alice)
            .header("x-svc-activity-id", &activity)
            .json(&json!({"model": "gpt", "messages": [{"role": "user", "content": "hi"}]})),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text);
    let event = crate::audit::wait(
        &w.cp,
        &crate::audit::by_activity(&w.cp, &activity, &["model.call"]),
    )
    .await;
    let person = event.on_behalf_of.expect("the person is recorded");
    assert_eq!(
        (
            person.id.as_str(),
            person.email.as_str(),
            person.display.as_str()
        ),
        ("alice", "alice@corp.com", "verified by oidc")
    );
    alice
}

async fn every_bad_token_is_refused_with_its_reason(w: &World, idp: &OidcIssuer) {
    for (kind, reason) in [
        ("wrong_aud", "actas_audience"),
        ("expired", "actas_expired"),
        ("other_key", "actas_signature"),
        ("alg_none", "actas_alg_refused"),
        ("hs256", "actas_alg_refused"),
        ("other_issuer", "actas_issuer"),
        ("not_yet", "actas_not_yet_valid"),
    ] {
        let token = idp.forge(kind, "alice", None).await;
        let r = chat_as(w, &w.key, Some(&token)).await;
        assert_eq!((r.status, code(&r)), (403, reason), "{kind}: {}", r.text);
    }
    for kind in ["es256", "eddsa", "valid"] {
        let token = idp.forge(kind, "alice", None).await;
        let r = chat_as(w, &w.key, Some(&token)).await;
        assert_eq!(r.status, 200, "{kind}: {}", r.text);
    }
}

async fn the_inline_form_wants_the_agent_as_audience(w: &World, idp: &OidcIssuer, rotated: &str) {
    let agent_id =
        w.cp.ok(AGENTS, "GetAgent", w.cp.body(json!({"agent_id": "bot"})))
            .await["agent"]["agent_id"]
            .as_str()
            .unwrap()
            .to_string();
    w.cp.call(
        AGENTS,
        "DeleteActAsProvider",
        w.cp.body(json!({"provider_id": "corp-idp"})),
    )
    .await
    .expect_error("failed_precondition", 400)
    .mentions("bot");
    update_bot(
        w,
        json!({"actas_provider_id": "", "actas_oidc_url": idp.issuer,
            "actas_allowed_groups": [], "actas_allowed_emails": []}),
    )
    .await;
    let for_agent = idp.forge("valid", "alice", Some(&agent_id)).await;
    let r = chat_as(w, &w.key, Some(&for_agent)).await;
    assert_eq!(r.status, 200, "aud = the agent: {}", r.text);
    let r = chat_as(w, &w.key, Some(rotated)).await;
    assert_eq!((r.status, code(&r)), (403, "actas_audience"), "{}", r.text);
    w.cp.ok(
        AGENTS,
        "DeleteActAsProvider",
        w.cp.body(json!({"provider_id": "corp-idp"})),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_workspace_floor_refuses_weaker_identities() {
    let w = world().await;
    // The SDK's helpers build every header here.
    let plain = |sub: &str| act_as::none(&act_as::Identity::new(sub)).unwrap();
    update_bot(
        &w,
        json!({"actas_method": "none", "actas_allowed_subjects": ["u1"]}),
    )
    .await;
    // The default admits `none`: an asserted identity passes the allow list it names.
    assert_eq!(chat_as(&w, &w.key, Some(&plain("u1"))).await.status, 200);
    let r = chat_as(&w, &w.key, Some(&plain("u2"))).await;
    assert_eq!((r.status, code(&r)), (403, "policy_denied"), "{}", r.text);

    let ws =
        w.cp.ok(
            MGMT,
            "UpdateWorkspace",
            w.cp.body(json!({"actas_min_method": "hmac"})),
        )
        .await;
    assert_eq!(ws["workspace"]["actas_min_method"], "hmac", "{ws}");
    w.gw.caught_up(&w.cp).await;
    let r = chat_as(&w, &w.key, Some(&plain("u1"))).await;
    assert_eq!((r.status, code(&r)), (403, "actas_too_weak"), "{}", r.text);
    assert!(r.text.contains("hmac"), "{}", r.text);

    let secret = "0123456789abcdef-shared";
    w.cp.ok(
        AGENTS,
        "CreateActAsProvider",
        w.cp.body(json!({"name": "signer", "method": "hmac", "hmac_secret": secret})),
    )
    .await;
    update_bot(
        &w,
        json!({"actas_method": "hmac", "actas_provider_id": "signer"}),
    )
    .await;
    let signed = act_as::hmac(&act_as::Identity::new("u1"), secret).unwrap();
    let r = chat_as(&w, &w.key, Some(&signed)).await;
    assert_eq!(r.status, 200, "hmac with the provider's secret: {}", r.text);
    let wrong = act_as::hmac(&act_as::Identity::new("u1"), "another-secret-0000").unwrap();
    let r = chat_as(&w, &w.key, Some(&wrong)).await;
    assert_eq!((r.status, code(&r)), (403, "actas_signature"), "{}", r.text);

    // An issuer that cannot be reached: the call fails closed, and says to retry.
    w.cp.ok(
        AGENTS,
        "CreateActAsProvider",
        w.cp.body(json!({"name": "down", "issuer": "http://127.0.0.1:1", "audience": "x"})),
    )
    .await;
    update_bot(
        &w,
        json!({"actas_method": "oidc", "actas_provider_id": "down"}),
    )
    .await;
    use base64::Engine;
    let b64 = |v: Value| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v.to_string());
    let token = format!(
        "{}.{}.c2ln",
        b64(json!({"alg": "RS256", "kid": "k1"})),
        b64(json!({"sub": "u1"}))
    );
    let r = chat_as(&w, &w.key, Some(&token)).await;
    assert_eq!(
        (r.status, code(&r)),
        (503, "actas_issuer_unavailable"),
        "{}",
        r.text
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bound_key_acts_for_its_user_and_refuses_a_header() {
    let w = world().await;
    update_bot(
        &w,
        json!({"actas_method": "bound", "actas_allowed_groups": ["eng"]}),
    )
    .await;
    w.cp.call(
        AGENTS,
        "CreateAgentKey",
        w.cp.body(json!({"agent_id": "bot", "name": "bad", "bound_subject": {"sub": ""}})),
    )
    .await
    .expect_error("invalid_argument", 400)
    .mentions("bound_subject.sub");
    let issued =
        w.cp.ok(
            AGENTS,
            "CreateAgentKey",
            w.cp.body(json!({"agent_id": "bot", "name": "carol",
                "bound_subject": {"sub": "carol", "email": "carol@corp.com", "groups": ["eng"]}})),
        )
        .await;
    assert_eq!(issued["key"]["bound_subject"]["sub"], "carol", "{issued}");
    let carol = issued["token"].as_str().unwrap().to_string();
    w.gw.caught_up(&w.cp).await;

    let r = chat_as(&w, &carol, None).await;
    assert_eq!(
        r.status, 200,
        "the bound user passes the allow list: {}",
        r.text
    );
    let r = chat_as(&w, &w.key, None).await;
    assert_eq!(r.status, 403, "an unbound key acts for no one: {}", r.text);
    use base64::Engine;
    let header = base64::engine::general_purpose::STANDARD.encode(r#"{"sub":"carol"}"#);
    let r = chat_as(&w, &carol, Some(&header)).await;
    assert_eq!((r.status, code(&r)), (403, "actas_bound"), "{}", r.text);

    // A token exchanged for the bound key acts for the same user.
    let t = portcullis_client::exchange_agent_key(&w.cp.url, &carol, None)
        .await
        .unwrap();
    w.gw.caught_up(&w.cp).await;
    let r = chat_as(&w, &t.access_token, None).await;
    assert_eq!(r.status, 200, "{}", r.text);
}

/// Verification providers on both stores: validation, names, secrets never shown, and no
/// deletion while an agent names one.
async fn providers_are_checked_and_kept(cp: &portcullis_tests::ControlPlane) {
    incomplete_providers_are_refused(cp).await;
    let id = providers_are_made_once_and_listed_without_secrets(cp).await;
    only_oidc_providers_verify_agents(cp).await;
    let got = cp
        .ok(
            AGENTS,
            "UpdateActAsProvider",
            cp.body(json!({"provider_id": "idp", "jwks_url": "https://idp.example/keys"})),
        )
        .await;
    assert_eq!(got["provider"]["jwks_url"], "https://idp.example/keys");
    assert_eq!(got["provider"]["agent_count"], 1);
    assert_eq!(got["provider"]["groups_claim"], "https://corp/groups");
    a_provider_is_deleted_only_when_no_agent_names_it(cp, &id).await;
}

/// `CreateActAsProvider` with this body.
async fn create_provider(
    cp: &portcullis_tests::ControlPlane,
    body: Value,
) -> portcullis_tests::Reply {
    cp.call(AGENTS, "CreateActAsProvider", cp.body(body)).await
}

async fn incomplete_providers_are_refused(cp: &portcullis_tests::ControlPlane) {
    create_provider(cp, json!({"name": "idp", "issuer": "https://idp.example"}))
        .await
        .expect_error("invalid_argument", 400)
        .mentions("audience");
    create_provider(
        cp,
        json!({"name": "idp", "issuer": "http://idp.example", "audience": "a"}),
    )
    .await
    .expect_error("invalid_argument", 400)
    .mentions("https");
    create_provider(
        cp,
        json!({"name": "sig", "method": "hmac", "hmac_secret": "short"}),
    )
    .await
    .expect_error("invalid_argument", 400)
    .mentions("16");
}

/// An OIDC provider `idp` (once only) and an HMAC one `sig`: `idp`'s id.
async fn providers_are_made_once_and_listed_without_secrets(
    cp: &portcullis_tests::ControlPlane,
) -> String {
    let made = cp
        .ok(
            AGENTS,
            "CreateActAsProvider",
            cp.body(
                json!({"name": "idp", "issuer": "https://idp.example", "audience": "gw",
                "groups_claim": "https://corp/groups"}),
            ),
        )
        .await;
    let id = made["provider"]["provider_id"]
        .as_str()
        .unwrap()
        .to_string();
    create_provider(
        cp,
        json!({"name": "idp", "issuer": "https://idp.example", "audience": "gw"}),
    )
    .await
    .expect_error("already_exists", 409);
    let secret = "0123456789abcdef-secret";
    let sig = cp
        .ok(
            AGENTS,
            "CreateActAsProvider",
            cp.body(json!({"name": "sig", "method": "hmac", "hmac_secret": secret})),
        )
        .await;
    assert_eq!(sig["provider"]["hmac_secret_set"], true);
    let listed = cp
        .ok(AGENTS, "ListActAsProviders", cp.body(json!({})))
        .await;
    assert!(!listed.to_string().contains(secret), "a secret was listed");
    assert_eq!(listed["providers"].as_array().unwrap().len(), 2);
    id
}

async fn only_oidc_providers_verify_agents(cp: &portcullis_tests::ControlPlane) {
    cp.ok(
        AGENTS,
        "RegisterAgent",
        cp.body(json!({"name": "a1", "actas_method": "oidc", "actas_provider_id": "idp"})),
    )
    .await;
    cp.call(
        AGENTS,
        "RegisterAgent",
        cp.body(json!({"name": "a2", "actas_method": "oidc", "actas_provider_id": "sig"})),
    )
    .await
    .expect_error("invalid_argument", 400)
    .mentions("hmac");
    cp.call(
        AGENTS,
        "RegisterAgent",
        cp.body(json!({"name": "a3", "actas_method": "oidc", "actas_provider_id": "nope"})),
    )
    .await
    .expect_error("not_found", 404);
}

async fn a_provider_is_deleted_only_when_no_agent_names_it(
    cp: &portcullis_tests::ControlPlane,
    id: &str,
) {
    cp.call(
        AGENTS,
        "DeleteActAsProvider",
        cp.body(json!({"provider_id": id})),
    )
    .await
    .expect_error("failed_precondition", 400);
    cp.ok(
        AGENTS,
        "DeleteActAsProvider",
        cp.body(json!({"provider_id": "sig"})),
    )
    .await;
    cp.call(
        AGENTS,
        "GetActAsProvider",
        cp.body(json!({"provider_id": "sig"})),
    )
    .await
    .expect_error("not_found", 404);
}

portcullis_tests::on_both_backends!(providers_are_checked_and_kept);
