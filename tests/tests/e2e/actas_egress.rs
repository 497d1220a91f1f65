//! The act-as egress header of a tool connection (`protocol_config.headers` entry with
//! `"source": "actas"`) over real processes: the gateway forwards the caller's admitted raw
//! act-as assertion (an HMAC header, an OpenID ID token), exactly as the caller sent it, in the
//! configured header on `tools/list` and `tools/call`, and never writes it to its log or the
//! audit trail. A request that carries no raw assertion fails closed: no act-as header, a key
//! bound to a person, a token exchanged for that key and an interactive sign-in alike leave the
//! tool out of `tools/list`, and `tools/call` is refused (`actas_required`) before anything
//! reaches the upstream.

use std::time::Duration;

use axum::http::HeaderMap;
use portcullis_shared::audit::QueryEventsRequest;
use portcullis_tests::act_as::hmac_header;
use portcullis_tests::controlplane::{AGENTS, MGMT};
use portcullis_tests::fake_mcp::FakeMcp;
use portcullis_tests::oidc::OidcIssuer;
use portcullis_tests::python;
use serde_json::{json, Value};

use crate::mcp::Mcp;

/// The egress header the tool connection forwards the assertion in.
const HEADER: &str = "x-end-user";
/// The HMAC act-as secret of agent `bot`.
const SECRET: &str = "0123456789abcdef-egress-secret";
const TOOL: &str = "fake/whoami";

/// A gateway offering the fake upstream as tool connection `fake`, which forwards the act-as
/// assertion in `X-End-User`; agent `bot` signs act-as headers with [`SECRET`] and may call
/// `fake/whoami`. The catalog is filled by a first call.
async fn setup() -> (Mcp, FakeMcp) {
    let m = Mcp::start().await;
    let fake = FakeMcp::start("upstream-key", false).await;
    let cp = &m.cp;
    let id = cp
        .ok(
            MGMT,
            "CreateMCPServerConnection",
            cp.body(json!({"name": "fake", "protocol": "streamable-http",
                "secret_values": {"Authorization": "Bearer upstream-key"},
                "protocol_config": {"url": fake.url(),
                    "headers": [{"name": "X-End-User", "source": "actas"}]}})),
        )
        .await["connection_id"]
        .as_str()
        .unwrap()
        .to_string();
    cp.ok(
        MGMT,
        "AddGatewayToolSource",
        cp.body(json!({"gateway_id": cp.default_gateway_id, "connection_id": id})),
    )
    .await;
    cp.ok(
        AGENTS,
        "UpdateAgent",
        cp.body(json!({"agent_id": "bot", "actas_method": "hmac",
            "actas_hmac_secret": SECRET, "allowed_tools": [TOOL]})),
    )
    .await;
    m.gw.caught_up(cp).await;
    // Such a connection is not discovered at start: the first call that carries an assertion
    // discovers it, and is answered; lists show the tool from then on.
    let primer = hmac_header("primer", SECRET);
    let first = call(&m, &m.key, Some(&primer)).await;
    assert!(echoed(&first).is_object(), "{first}");
    let list = rpc(&m, &m.key, Some(&primer), "tools/list", json!({})).await;
    assert!(names(&list).iter().any(|n| n == TOOL), "{list}");
    (m, fake)
}

fn mcp_url(m: &Mcp) -> String {
    format!("{}/mcp", m.gw.gateway_url(&m.cp.default_gateway_id))
}

/// A JSON-RPC request to the gateway's `/mcp` with `bearer` and, when given, `x-svc-act-as`.
async fn rpc(m: &Mcp, bearer: &str, act_as: Option<&str>, method: &str, params: Value) -> Value {
    let mut request = reqwest::Client::new()
        .post(mcp_url(m))
        .bearer_auth(bearer)
        .header("x-svc-activity-id", uuid::Uuid::new_v4().to_string())
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}));
    if let Some(h) = act_as {
        request = request.header("x-svc-act-as", h);
    }
    let r = request.send().await.unwrap();
    let status = r.status().as_u16();
    let text = r.text().await.unwrap();
    assert_eq!(status, 200, "{method}: {text}");
    serde_json::from_str(&text).unwrap()
}

fn names(list: &Value) -> Vec<String> {
    list["result"]["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("not a list: {list}"))
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_string())
        .collect()
}

async fn call(m: &Mcp, bearer: &str, act_as: Option<&str>) -> Value {
    rpc(
        m,
        bearer,
        act_as,
        "tools/call",
        json!({"name": TOOL, "arguments": {}}),
    )
    .await
}

/// The headers `whoami` saw, from its result.
fn echoed(reply: &Value) -> Value {
    let text = reply["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("no whoami result: {reply}"));
    serde_json::from_str(text).unwrap()
}

/// The headers of the upstream requests for `method` since the `from`th.
fn sent(fake: &FakeMcp, from: usize, method: &str) -> Vec<HeaderMap> {
    fake.requests()
        .into_iter()
        .skip(from)
        .filter(|(m, _)| m == method)
        .map(|(_, h)| h)
        .collect()
}

/// Every upstream `method` request since the `from`th (there is one at least) carried `raw`,
/// exactly, once, in the configured header and in no other.
fn assert_forwarded(fake: &FakeMcp, from: usize, method: &str, raw: &str) {
    let sent = sent(fake, from, method);
    assert!(!sent.is_empty(), "no {method} reached the upstream");
    for h in sent {
        let values: Vec<&str> = h
            .get_all(HEADER)
            .iter()
            .map(|v| v.to_str().unwrap())
            .collect();
        assert_eq!(values, [raw], "{method}: {h:?}");
        for (name, value) in &h {
            if name.as_str() != HEADER {
                assert!(
                    !value.to_str().unwrap_or_default().contains(raw),
                    "{method}: the assertion also went out in {name}"
                );
            }
        }
    }
}

/// Refused for want of a raw assertion: the tool is left out of the list and the call is
/// refused with `actas_required`, and neither reached the upstream.
async fn assert_fails_closed(m: &Mcp, fake: &FakeMcp, bearer: &str, who: &str) {
    let from = fake.requests().len();
    let list = rpc(m, bearer, None, "tools/list", json!({})).await;
    assert!(list.get("error").is_none(), "{who}: {list}");
    assert!(
        !names(&list).iter().any(|n| n == TOOL),
        "{who}: the tool is listed: {list}"
    );
    let refused = call(m, bearer, None).await;
    assert_eq!(
        refused["error"]["data"]["reason_code"], "actas_required",
        "{who}: {refused}"
    );
    assert!(refused.get("result").is_none(), "{who}: {refused}");
    for method in ["tools/list", "tools/call"] {
        assert!(
            sent(fake, from, method).is_empty(),
            "{who}: a {method} reached the upstream"
        );
    }
}

/// No event of the workspace's audit trail holds any of `needles`.
/// No audit event holds any of `needles`, once the `calls` tool calls made are all audited.
async fn assert_not_audited(m: &Mcp, needles: &[&str], calls: usize) {
    let cp = &m.cp;
    let filter = QueryEventsRequest {
        workspace_id: Some(cp.workspace_id.clone()),
        event_types: vec!["tool.call".into()],
        ..Default::default()
    };
    // Gateway audit lands asynchronously: wait for the calls above, then read everything.
    let started = std::time::Instant::now();
    while crate::audit::all(cp, &filter, 500).await.len() < calls {
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "the tool calls were not audited"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let everything = QueryEventsRequest {
        workspace_id: Some(cp.workspace_id.clone()),
        ..Default::default()
    };
    let events = crate::audit::all(cp, &everything, 500).await;
    let text = serde_json::to_string(&events).unwrap();
    for needle in needles {
        assert!(!text.contains(needle), "an assertion was audited: {needle}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_callers_raw_assertion_reaches_the_upstream_as_sent() {
    let (m, fake) = setup().await;
    let cp = &m.cp;

    // HMAC: the list and the call carry the caller's header as it was sent.
    let alice = hmac_header("alice", SECRET);
    let from = fake.requests().len();
    let list = rpc(&m, &m.key, Some(&alice), "tools/list", json!({})).await;
    assert_eq!(names(&list), [TOOL], "{list}");
    assert_forwarded(&fake, from, "tools/list", &alice);
    let from = fake.requests().len();
    let reply = call(&m, &m.key, Some(&alice)).await;
    let seen = echoed(&reply);
    assert_eq!(seen[HEADER], alice.as_str(), "{seen}");
    assert!(seen.get("x-svc-act-as").is_none(), "{seen}");
    assert_eq!(seen["authorization"], "Bearer upstream-key");
    assert_forwarded(&fake, from, "tools/call", &alice);
    // Each call carries its own caller's assertion over the shared upstream session.
    let bob = hmac_header("bob", SECRET);
    let from = fake.requests().len();
    let seen = echoed(&call(&m, &m.key, Some(&bob)).await);
    assert_eq!(seen[HEADER], bob.as_str(), "{seen}");
    assert_forwarded(&fake, from, "tools/call", &bob);

    // OIDC: the person's ID token, unchanged.
    let idp = OidcIssuer::start().await;
    cp.ok(
        AGENTS,
        "CreateActAsProvider",
        cp.body(json!({"name": "corp-idp", "issuer": idp.issuer,
            "audience": OidcIssuer::client_id()})),
    )
    .await;
    cp.ok(
        AGENTS,
        "RegisterAgent",
        cp.body(
            json!({"name": "reader", "allowed_gateway_ids": [cp.default_gateway_id],
            "allowed_tools": [TOOL], "actas_method": "oidc", "actas_provider_id": "corp-idp"}),
        ),
    )
    .await;
    let reader = cp
        .ok(
            AGENTS,
            "CreateAgentKey",
            cp.body(json!({"agent_id": "reader", "name": "k"})),
        )
        .await["token"]
        .as_str()
        .unwrap()
        .to_string();
    m.gw.caught_up(cp).await;
    let token = idp.id_token("carol", "carol@corp.com", &["eng"]).await;
    let from = fake.requests().len();
    let list = rpc(&m, &reader, Some(&token), "tools/list", json!({})).await;
    assert_eq!(names(&list), [TOOL], "{list}");
    assert_forwarded(&fake, from, "tools/list", &token);
    let from = fake.requests().len();
    let seen = echoed(&call(&m, &reader, Some(&token)).await);
    assert_eq!(seen[HEADER], token.as_str(), "{seen}");
    assert_forwarded(&fake, from, "tools/call", &token);

    // The assertions are neither logged nor audited (nor is the token's signature alone).
    let signature = token.rsplit('.').next().unwrap();
    let needles = [alice.as_str(), bob.as_str(), token.as_str(), signature];
    // The setup's first call, alice's, bob's and the OpenID caller's.
    assert_not_audited(&m, &needles, 4).await;
    let logs = format!("{}{}", m.gw.logs(), cp.logs());
    for needle in needles {
        assert!(!logs.contains(needle), "an assertion was logged: {needle}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_without_a_raw_assertion_fails_closed() {
    let (m, fake) = setup().await;
    let cp = &m.cp;
    let from = fake.requests().len();

    // No act-as header at all.
    assert_fails_closed(&m, &fake, &m.key, "no act-as header").await;

    // A key bound to a person, and a token exchanged for it: a verified identity, but no
    // assertion to forward.
    cp.ok(
        AGENTS,
        "RegisterAgent",
        cp.body(
            json!({"name": "kiosk", "allowed_gateway_ids": [cp.default_gateway_id],
            "allowed_tools": [TOOL], "actas_method": "bound"}),
        ),
    )
    .await;
    let carol = cp
        .ok(
            AGENTS,
            "CreateAgentKey",
            cp.body(json!({"agent_id": "kiosk", "name": "carol",
                "bound_subject": {"sub": "carol", "email": "carol@corp.com"}})),
        )
        .await["token"]
        .as_str()
        .unwrap()
        .to_string();
    let exchanged = portcullis_client::exchange_agent_key(&cp.url, &carol, None)
        .await
        .unwrap()
        .access_token;
    assert_eq!(
        crate::interactive::claims(&exchanged)["act"]["sub"],
        "carol",
        "the exchanged token carries the bound person"
    );

    // A person signed in interactively.
    let issuer = OidcIssuer::start().await;
    cp.ok(
        AGENTS,
        "RegisterAgent",
        cp.body(
            json!({"name": "desk", "allowed_gateway_ids": [cp.default_gateway_id],
            "allowed_tools": [TOOL], "actas_method": "oidc", "actas_oidc_url": issuer.issuer,
            "actas_allowed_emails": ["alice@example.com"], "interactive_access": true}),
        ),
    )
    .await;
    let local = json!({"name": "local", "public_url": m.gw.url});
    cp.ok(MGMT, "CreateDeployment", cp.body(local)).await;
    m.gw.caught_up(cp).await;

    assert_fails_closed(&m, &fake, &carol, "a bound key").await;
    assert_fails_closed(&m, &fake, &exchanged, "a token exchanged for a bound key").await;

    let out = python::run(
        "mcp_interactive.py",
        &[&mcp_url(&m), &issuer.issuer, "alice"],
    )
    .await;
    assert!(out.get("error").is_none(), "{out}");
    assert_eq!(out["tools"], json!([]), "the tool is left out: {out}");
    let access = out["tokens"]["access_token"].as_str().unwrap().to_string();
    assert_eq!(
        crate::interactive::claims(&access)["act"]["email"],
        "alice@example.com"
    );
    assert_fails_closed(&m, &fake, &access, "an interactive sign-in").await;

    // Nothing went out for any of them, with the header or without.
    let after: Vec<String> = fake
        .requests()
        .into_iter()
        .skip(from)
        .map(|(method, _)| method)
        .collect();
    assert!(
        !after.iter().any(|m| m == "tools/list" || m == "tools/call"),
        "{after:?}"
    );
}
