//! Per-user API keys end to end: a person without a credential gets `auth_required` in
//! `tools/list` and a `credential_required` refusal with a working `provision_url`; the link
//! asks them to sign in (a real `oidc-provider`) and refuses anyone but its person; after they
//! enter their key on that page their calls succeed with it, another person is still refused,
//! a link works once; a deleted credential stops being used within the gateway's 60 s bound;
//! and a per-user model answers the OpenAI SDK with 401 and the link, then succeeds.

use std::time::{Duration, Instant};

use portcullis_client::{AgentClient, GatewayErrorKind};
use portcullis_tests::act_as::hmac_header;
use portcullis_tests::controlplane::MGMT;
use portcullis_tests::fake_mcp::FakeMcp;
use portcullis_tests::oidc::OidcIssuer;
use portcullis_tests::{python, Backend, ControlPlane, FakeLlm, GatewayProcess};
use serde_json::{json, Value};

const SECRET: &str = "0123456789abcdef-peruser-hmac";
const U1_KEY: &str = "u1-own-upstream-key-7f3a";

struct Setup {
    /// Where the agent's people sign in.
    issuer: OidcIssuer,
    cp: ControlPlane,
    gw: GatewayProcess,
    key: String,
    tool_id: String,
}

async fn setup(fake_url: &str) -> Setup {
    let issuer = OidcIssuer::start().await;
    let cp = ControlPlane::start(Backend::Sqlite).await;
    let tool = cp
        .ok(
            MGMT,
            "CreateMCPServerConnection",
            cp.body(
                json!({"name": "pu", "protocol": "streamable-http", "auth_method": "api-key",
                "credential_type": "per-user", "protocol_config": {"url": fake_url}}),
            ),
        )
        .await;
    let tool_id = tool["connection_id"].as_str().unwrap().to_string();
    cp.ok(
        MGMT,
        "AddGatewayToolSource",
        cp.body(json!({"gateway_id": cp.default_gateway_id, "connection_id": tool_id})),
    )
    .await;
    let key = crate::world::register_with_key(
        &cp,
        json!({"name": "bot", "allowed_gateway_ids": [cp.default_gateway_id],
            "allowed_tools": ["pu/whoami"], "actas_method": "hmac", "actas_hmac_secret": SECRET,
            "actas_allowed_subjects": ["u1", "u2"], "actas_oidc_url": issuer.issuer}),
    )
    .await;
    let gw = GatewayProcess::start(&cp).await;
    Setup {
        issuer,
        cp,
        gw,
        key,
        tool_id,
    }
}

impl Setup {
    /// One JSON-RPC call to the gateway's MCP endpoint as `sub`.
    async fn rpc(&self, sub: &str, method: &str, params: Value) -> Value {
        self.rpc_as(&hmac_header(sub, SECRET), method, params).await
    }

    /// One JSON-RPC call with this act-as header.
    async fn rpc_as(&self, act_as: &str, method: &str, params: Value) -> Value {
        let url = format!("{}/mcp", self.gw.gateway_url(&self.cp.default_gateway_id));
        let r = reqwest::Client::new()
            .post(url)
            .bearer_auth(&self.key)
            .header("x-svc-act-as", act_as)
            .json(&json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status().as_u16(), 200);
        r.json().await.unwrap()
    }

    async fn call(&self, sub: &str) -> Value {
        self.rpc(
            sub,
            "tools/call",
            json!({"name": "pu/whoami", "arguments": {}}),
        )
        .await
    }
}

fn link(refusal: &Value) -> String {
    assert_eq!(refusal["error"]["code"], -32001, "{refusal}");
    let data = &refusal["error"]["data"];
    assert_eq!(data["reason_code"], "credential_required", "{refusal}");
    assert_eq!(data["connection_name"], "pu");
    assert!(data["expires_at"].as_str().is_some_and(|t| !t.is_empty()));
    data["provision_url"].as_str().unwrap().to_string()
}

/// A key posted to a link as a script would, without signing in.
async fn post_unsigned(url: &str, key: &str) -> (u16, String) {
    let r = reqwest::Client::new()
        .post(url)
        .form(&[("api_key", key), ("form_token", "guessed")])
        .send()
        .await
        .unwrap();
    (r.status().as_u16(), r.text().await.unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn per_user_tool_provisioned_then_revoked() {
    let fake = FakeMcp::start(U1_KEY, false).await;
    let s = setup(&fake.url()).await;

    // No credential yet: the list advises, the call refuses with a link.
    let listed = s.rpc("u1", "tools/list", json!({})).await;
    assert_eq!(listed["result"]["tools"], json!([]), "{listed}");
    let advice = &listed["result"]["_meta"]["auth_required"][0];
    assert_eq!(advice["connection_name"], "pu", "{listed}");
    assert!(advice["provision_url"]
        .as_str()
        .unwrap()
        .contains("/provision/"));
    let url = link(&s.call("u1").await);

    // Opened without signing in, the link sends the browser to sign in, and nothing else.
    the_link_first_sends_the_browser_to_sign_in(&s, &url).await;

    // Someone else who got hold of the link: refused, audited, and the link still works.
    someone_else_with_the_link_is_refused_and_audited(&s, &url).await;

    // The page, as the person's browser sees it after signing in; the key stored once.
    the_person_stores_their_key_once(&s, &url).await;

    // u1's calls now carry u1's key (the first list records the operations in the catalog).
    the_persons_calls_carry_their_key(&s).await;

    // Stored sealed, never logged.
    assert!(
        !s.cp.dump_store().await.contains(U1_KEY),
        "the key is stored sealed"
    );
    assert!(!s.cp.logs().contains(U1_KEY) && !s.gw.logs().contains(U1_KEY));

    // Audited without the key; counted in /metrics.
    provisioning_is_audited_without_the_key_and_counted(&s).await;

    // Deleted at the control plane: the gateway stops using it within 60 s.
    a_deleted_credential_stops_being_used(&s).await;
}

async fn the_link_first_sends_the_browser_to_sign_in(s: &Setup, url: &str) {
    let no_redirects = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let page = no_redirects.get(url).send().await.unwrap();
    assert!(page.status().is_redirection(), "{}", page.status());
    let location = page.headers()["location"].to_str().unwrap();
    assert!(location.starts_with(&s.issuer.issuer), "{location}");
    let (status, html) = post_unsigned(url, "posted-by-a-script").await;
    assert_eq!(
        status, 403,
        "a key without the signed-in form is refused: {html}"
    );
}

async fn someone_else_with_the_link_is_refused_and_audited(s: &Setup, url: &str) {
    let (status, html) = s.issuer.provide(url, "u2", "u2-key-for-u1").await;
    assert_eq!(status, 403, "{html}");
    assert!(html.contains("made for another person") && html.contains("u2@example.com"));
    let refused =
        s.cp.ok(
            "svc.audit.v1.AuditService",
            "QueryEvents",
            s.cp.body(json!({"event_types": ["credential.provision_refused"]})),
        )
        .await;
    let e = &refused["events"][0];
    assert_eq!(
        e["payload"]["signed_in_email"], "u2@example.com",
        "{refused}"
    );
    assert_eq!(e["result"], "RESULT_DENIED");
    assert!(!s.cp.dump_store().await.contains("u2-key-for-u1"));
}

async fn the_person_stores_their_key_once(s: &Setup, url: &str) {
    let shown = s.issuer.visit(url, "u1", "", None, None).await;
    assert_eq!(shown["status"], 200, "{shown}");
    assert_eq!(shown["headers"]["cache-control"], "no-store");
    let html = shown["body"].as_str().unwrap();
    assert!(
        html.contains("name=\"api_key\"") && html.contains("pu"),
        "{html}"
    );
    let (status, html) = s.issuer.provide(url, "u1", U1_KEY).await;
    assert_eq!(status, 200, "{html}");
    assert!(
        html.contains("is stored") && !html.contains(U1_KEY),
        "{html}"
    );
    let (status, _) = s.issuer.provide(url, "u1", "another").await;
    assert_eq!(status, 410, "a link works once");
    let expired = link(&s.call("u2").await);
    let _ = s
        .cp
        .db_strings("UPDATE provision_tokens SET expires_at = 0 WHERE used_at IS NULL AND token_hash <> $1 RETURNING token_hash", "")
        .await;
    assert_eq!(
        s.issuer.provide(&expired, "u2", U1_KEY).await.0,
        410,
        "an expired link is refused"
    );
}

async fn the_persons_calls_carry_their_key(s: &Setup) {
    let mut answer = Value::Null;
    for _ in 0..100 {
        s.rpc("u1", "tools/list", json!({})).await;
        answer = s.call("u1").await;
        if answer.get("result").is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let seen = answer["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("{answer}"));
    assert!(seen.contains(&format!("Bearer {U1_KEY}")), "{seen}");
    let listed = s.rpc("u1", "tools/list", json!({})).await;
    assert_eq!(
        listed["result"]["tools"][0]["name"], "pu/whoami",
        "{listed}"
    );
    assert!(listed["result"]["_meta"].is_null());
    link(&s.call("u2").await);
}

async fn provisioning_is_audited_without_the_key_and_counted(s: &Setup) {
    let events =
        s.cp.ok(
            "svc.audit.v1.AuditService",
            "QueryEvents",
            s.cp.body(json!({"event_types": ["credential.provisioned"]})),
        )
        .await;
    let e = &events["events"][0];
    assert_eq!(e["actor"]["kind"], "ACTOR_KIND_USER");
    assert!(
        e["actor"]["id"].as_str().unwrap().starts_with("u1|hmac:"),
        "an HMAC person's credential is the agent's: {e}"
    );
    assert!(!events.to_string().contains(U1_KEY));
    let metrics = reqwest::get(format!("{}/metrics", s.gw.url))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let count: u64 = metrics
        .lines()
        .find_map(|l| l.strip_prefix("portcullis_gateway_credential_required_total "))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or(0);
    assert!(count >= 3, "{metrics}");
}

async fn a_deleted_credential_stops_being_used(s: &Setup) {
    let listed =
        s.cp.ok(
            MGMT,
            "ListUserCredentials",
            s.cp.body(json!({"connection_id": s.tool_id})),
        )
        .await;
    let subject = listed["credentials"][0]["subject"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(subject.starts_with("u1|hmac:"), "{subject}");
    let dir = tempfile::tempdir().unwrap();
    let (code, out, err) =
        crate::cli::as_admin(&s.cp, dir.path(), vec!["credential", "list", "pu"]).await;
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("u1") && !out.contains(U1_KEY), "{out}");
    let (code, out, err) = crate::cli::as_admin(
        &s.cp,
        dir.path(),
        vec!["credential", "delete", "pu", &subject],
    )
    .await;
    assert_eq!(code, 0, "{out}{err}");
    let deleted = Instant::now();
    loop {
        if s.call("u1").await.get("error").is_some() {
            break;
        }
        assert!(
            deleted.elapsed() < Duration::from_secs(61),
            "still used after 61 s"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    println!(
        "a deleted per-user credential stopped being used after {:?}",
        deleted.elapsed()
    );
}

/// A person identified by an OpenID token: their link is theirs by `sub` at the same provider,
/// so someone else signed in there is refused and they are not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_openid_persons_link_is_matched_by_sub() {
    let fake = FakeMcp::start(U1_KEY, false).await;
    let s = setup(&fake.url()).await;
    let bot =
        s.cp.ok(
            portcullis_tests::controlplane::AGENTS,
            "UpdateAgent",
            s.cp.body(json!({"agent_id": "bot", "actas_method": "oidc",
                "actas_allowed_subjects": ["alice"]})),
        )
        .await;
    let agent_id = bot["agent"]["agent_id"].as_str().unwrap().to_string();
    s.gw.caught_up(&s.cp).await;
    let token = s.issuer.forge("valid", "alice", Some(&agent_id)).await;
    let params = json!({"name": "pu/whoami", "arguments": {}});
    let url = link(&s.rpc_as(&token, "tools/call", params.clone()).await);
    let (status, html) = s.issuer.provide(&url, "bob", "bobs-key").await;
    assert_eq!(status, 403, "{html}");
    let (status, html) = s.issuer.provide(&url, "alice", U1_KEY).await;
    assert_eq!(status, 200, "{html}");
    let listed =
        s.cp.ok(
            MGMT,
            "ListUserCredentials",
            s.cp.body(json!({"connection_id": s.tool_id})),
        )
        .await;
    assert_eq!(listed["credentials"][0]["subject"], "alice", "{listed}");
}

/// A person with a stored key calls a per-user tool in a fresh session without listing first
/// (as a stateless MCP client, or one that knows the tool from another replica, does): the
/// gateway discovers the connection with that person's credential and answers; the operation
/// is in the catalog from then on. One without a credential still gets the link; an operation
/// the upstream does not have is refused as unknown.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_person_with_a_key_calls_without_listing_first() {
    let fake = FakeMcp::start(U1_KEY, false).await;
    let s = setup(&fake.url()).await;
    let url = link(&s.call("u1").await);
    assert_eq!(s.issuer.provide(&url, "u1", U1_KEY).await.0, 200);

    let answer = s.call("u1").await;
    let seen = answer["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("the first call, with no list before it: {answer}"));
    assert!(seen.contains(&format!("Bearer {U1_KEY}")), "{seen}");
    let catalog =
        s.cp.ok(
            MGMT,
            "ListConnectionTools",
            s.cp.body(json!({"connection_id": s.tool_id})),
        )
        .await;
    let whoami = catalog["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "whoami")
        .unwrap_or_else(|| panic!("recorded by the call: {catalog}"));
    assert_eq!(whoami["status"], "active", "{catalog}");

    // Someone without a credential: the link, not a catalog error.
    link(&s.call("u2").await);
    // An operation the upstream does not offer: unknown, whoever asks.
    s.cp.ok(
        portcullis_tests::controlplane::AGENTS,
        "UpdateAgent",
        s.cp.body(json!({"agent_id": "bot", "allowed_tools": ["pu/whoami", "pu/nope"]})),
    )
    .await;
    s.gw.caught_up(&s.cp).await;
    let params = json!({"name": "pu/nope", "arguments": {}});
    let unknown = s.rpc("u1", "tools/call", params).await;
    assert_eq!(unknown["error"]["code"], -32602, "{unknown}");
    assert!(
        unknown["error"]["message"]
            .as_str()
            .unwrap()
            .contains("pu/nope is not offered by its upstream"),
        "{unknown}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn per_user_model_through_the_openai_sdk() {
    let issuer = OidcIssuer::start().await;
    let cp = ControlPlane::start(Backend::Sqlite).await;
    let fake = FakeLlm::openai().start().await;
    let model = cp
        .ok(
            MGMT,
            "CreateLLMModelConnection",
            cp.body(json!({"name": "mine", "provider": "openai_compatible", "auth_method": "api-key",
                "credential_type": "per-user",
                "provider_config": {"model": "gpt-4o-mini-2024-07-18", "base_url": fake.base_url()}})),
        )
        .await;
    cp.ok(
        MGMT,
        "AddGatewayModel",
        cp.body(
            json!({"gateway_id": cp.default_gateway_id, "connection_id": model["connection_id"]}),
        ),
    )
    .await;
    let key = crate::world::register_with_key(
        &cp,
        json!({"name": "bot", "allowed_gateway_ids": [cp.default_gateway_id],
            "allowed_direct_model_names": ["mine"], "actas_method": "hmac",
            "actas_hmac_secret": SECRET, "actas_allowed_subjects": ["u1"],
            "actas_oidc_url": issuer.issuer}),
    )
    .await;
    let gw = GatewayProcess::start(&cp).await;
    let base = format!("{}/v1", gw.gateway_url(&cp.default_gateway_id));
    let headers = json!({"x-svc-act-as": hmac_header("u1", SECRET)}).to_string();
    let env = [("PORTCULLIS_HEADERS", headers.as_str())];
    let out = python::run_with_env("openai_chat.py", &[&base, &key, "mine", "plain"], &env).await;
    assert_eq!(out["error"]["status"], 401, "{out}");
    let body = &out["error"]["body"];
    assert_eq!(body["type"], "credential_required", "{out}");
    assert_eq!(body["connection_name"], "mine");
    let url = body["provision_url"].as_str().unwrap();
    // The Rust SDK reads the same refusal as its class, with the link.
    let client = AgentClient::new(&gw.gateway_url(&cp.default_gateway_id), &key)
        .unwrap()
        .with_act_as(&hmac_header("u1", SECRET));
    let chat = json!({"model": "mine", "messages": [{"role": "user", "content": "hi"}]});
    let err = client.chat_completions(&chat).await.unwrap_err();
    match &err.gateway().unwrap().kind {
        GatewayErrorKind::CredentialRequired {
            connection_name,
            provision_url,
            expires_at,
        } => {
            assert_eq!(connection_name, "mine");
            assert!(provision_url.contains("/provision/") && !expires_at.is_empty());
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(err.status_code(), Some(401));
    assert_eq!(issuer.provide(url, "u1", "sk-u1-model-key").await.0, 200);
    let out = python::run_with_env("openai_chat.py", &[&base, &key, "mine", "plain"], &env).await;
    assert!(out.get("error").is_none(), "{out}");
    let sent = fake.requests();
    let auth = sent.last().unwrap().headers["authorization"]
        .to_str()
        .unwrap()
        .to_string();
    assert_eq!(
        auth, "Bearer sk-u1-model-key",
        "the person's own key went upstream"
    );
}
