//! Behaviours other people's code depends on, checked the way an outside client sees them: act-as
//! headers signed outside Rust, upstream failures as 502, and an audit event for every call.

use portcullis_shared::audit::AuditEventV1;
use portcullis_tests::act_as::python_header;
use portcullis_tests::controlplane::{AGENTS, MGMT};
use portcullis_tests::{python, FakeLlm};
use serde_json::{json, Value};

use crate::audit::{activity, by_activity, wait};
use crate::world::{http, model, world, Http, World, UPSTREAM_SECRET};

const SECRET: &str = "conformance-hmac-secret-0123456789";
const EMAIL: &str = "zoë.ångström@example.com";

/// A chat call as `bot`, with extra headers and an activity id to find its audit event by.
async fn call(w: &World, body: Value, headers: &[(&str, String)]) -> (Http, String) {
    let id = activity();
    let mut request = reqwest::Client::new()
        .post(format!("{}/chat/completions", w.openai_base()))
        .bearer_auth(&w.key)
        .header("x-svc-activity-id", &id)
        .header("content-type", "application/json")
        .body(body.to_string());
    for (name, value) in headers {
        request = request.header(*name, value);
    }
    (http(request).await, id)
}

fn chat_body(model: &str) -> Value {
    json!({"model": model, "messages": [{"role": "user", "content": "hi"}]})
}

async fn model_call(w: &World, activity: &str) -> AuditEventV1 {
    wait(&w.cp, &by_activity(&w.cp, activity, &["model.call"])).await
}

/// DESIGN §10: `sig = base64(HMAC-SHA256(secret, canonical_json(claims)))`. A header signed by
/// Python's standard library is admitted, whether it writes non-ASCII as UTF-8 (RFC 8785) or
/// as `\u` escapes (`json.dumps`' default), and the verified email meets the allow list.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn act_as_headers_signed_outside_rust_are_verified() {
    let w = world().await;
    let cp = &w.cp;
    cp.ok(
        AGENTS,
        "UpdateAgent",
        cp.body(
            json!({"agent_id": "bot", "actas_method": "hmac", "actas_hmac_secret": SECRET,
            "actas_required": true, "actas_allowed_emails": [EMAIL]}),
        ),
    )
    .await;
    w.gw.caught_up(cp).await;
    let claims = json!({"sub": "00u-zoe", "email": EMAIL, "groups": ["eng", "ops/日本"]});
    for escape in [false, true] {
        let header = python_header(SECRET, &claims, escape).await;
        let (r, id) = call(&w, chat_body("gpt"), &[("x-svc-act-as", header)]).await;
        assert_eq!(r.status, 200, "escape={escape}: {}", r.text);
        let event = model_call(&w, &id).await;
        let person = event.on_behalf_of.expect("acted for a person");
        assert_eq!(
            (person.id.as_str(), person.email.as_str()),
            ("00u-zoe", EMAIL)
        );
        assert_eq!(person.display, "verified by hmac");
    }

    // Another person is signed correctly and still refused by the allow list.
    let other = json!({"sub": "00u-eve", "email": "eve@example.com", "groups": []});
    let header = python_header(SECRET, &other, false).await;
    let (r, _) = call(&w, chat_body("gpt"), &[("x-svc-act-as", header)]).await;
    assert_eq!(r.status, 403, "{}", r.text);
    assert_eq!(r.body["error"]["code"], "policy_denied", "{}", r.text);
    // A header signed with another secret is refused as a bad signature.
    let header = python_header("some-other-secret-0123456789", &claims, false).await;
    let (r, _) = call(&w, chat_body("gpt"), &[("x-svc-act-as", header)]).await;
    assert_eq!(r.status, 403, "{}", r.text);
    assert!(
        r.body["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("signature"),
        "{}",
        r.text
    );
}

/// DESIGN §5, §13: an upstream 5xx is the gateway's 502 in the caller's shape, naming the model,
/// after a pool's failover is exhausted; the audit event keeps the upstream's status.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upstream_5xx_is_a_502_naming_the_model() {
    let w = world().await;
    let cp = &w.cp;
    let broken = FakeLlm::openai().status(500).start().await;
    let unavailable = FakeLlm::openai().status(503).start().await;
    let ids = [
        model(cp, "broken", &broken.base_url()).await,
        model(cp, "unavailable", &unavailable.base_url()).await,
    ];
    let members: Vec<_> = ids.iter().map(|id| json!({"connection_id": id})).collect();
    let pool = cp
        .ok(
            MGMT,
            "CreateLLMPool",
            cp.body(json!({"name": "both-down", "members": members})),
        )
        .await;
    for (op, field, id) in [
        ("AddGatewayModel", "connection_id", ids[0].as_str()),
        (
            "AddGatewayPool",
            "pool_id",
            pool["pool"]["pool_id"].as_str().unwrap(),
        ),
    ] {
        cp.ok(
            MGMT,
            op,
            cp.body(json!({"gateway_id": w.gateway_id, field: id})),
        )
        .await;
    }
    cp.ok(
        AGENTS,
        "UpdateAgent",
        cp.body(
            json!({"agent_id": "bot", "allowed_direct_model_names": ["gpt", "broken"],
            "allowed_pool_names": ["both-down"]}),
        ),
    )
    .await;
    w.gw.caught_up(cp).await;

    let (r, id) = call(&w, chat_body("broken"), &[]).await;
    assert_eq!(r.status, 502, "{}", r.text);
    let error = &r.body["error"];
    assert_eq!(error["code"], "upstream_failed", "{}", r.text);
    let message = error["message"].as_str().unwrap();
    assert!(
        message.contains("'broken'") && message.contains("500"),
        "{message}"
    );
    assert!(!r.text.contains(UPSTREAM_SECRET));
    let event = model_call(&w, &id).await;
    assert_eq!(event.result, "RESULT_ERROR");
    assert_eq!(event.payload["upstream_status"], 500, "{}", event.payload);
    assert_eq!(event.payload["status"], 502);
    assert_eq!(event.payload["reason_code"], "upstream_failed");

    let (r, id) = call(&w, chat_body("both-down"), &[]).await;
    assert_eq!(r.status, 502, "{}", r.text);
    assert_eq!(
        (broken.requests().len(), unavailable.requests().len()),
        (2, 1),
        "the pool tried both members before answering"
    );
    let event = model_call(&w, &id).await;
    assert_eq!(event.payload["attempts"], 2, "{}", event.payload);

    // The official SDK sees a server error it can tell from a refusal.
    let base = w.openai_base();
    let out = python::run("openai_chat.py", &[&base, &w.key, "broken", "plain"]).await;
    assert_eq!(out["error"]["status"], 502, "{out}");
}

/// SPEC: the service records an audit event for each call, failures after authentication
/// included, with the result and a reason code.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_authenticated_call_is_audited() {
    let w = world().await;
    // A model the gateway cannot call: it has no stored credential.
    a_keyless_model_is_attached_and_allowed(&w).await;
    failed_model_calls_are_audited_with_a_reason_code(&w).await;

    // MCP: a body that is not JSON-RPC, and a method the gateway does not serve.
    failed_mcp_requests_are_audited(&w).await;
}

async fn a_keyless_model_is_attached_and_allowed(w: &World) {
    let cp = &w.cp;
    let keyless = cp
        .ok(
            MGMT,
            "CreateLLMModelConnection",
            cp.body(json!({"name": "keyless", "provider": "openai",
                "provider_config": {"model": "gpt-4o-mini", "base_url": w.fake.base_url()}})),
        )
        .await;
    cp.ok(
        MGMT,
        "AddGatewayModel",
        cp.body(json!({"gateway_id": w.gateway_id, "connection_id": keyless["connection_id"]})),
    )
    .await;
    cp.ok(
        AGENTS,
        "UpdateAgent",
        cp.body(json!({"agent_id": "bot", "allowed_direct_model_names": ["gpt", "keyless"]})),
    )
    .await;
    w.gw.caught_up(cp).await;
}

async fn failed_model_calls_are_audited_with_a_reason_code(w: &World) {
    let not_json = Value::String("{not json".into());
    let cases = [
        (chat_body("nope"), 404, "model_not_found", "nope"),
        (json!({"messages": []}), 400, "invalid_request", ""),
        (not_json, 400, "invalid_request", ""),
        (chat_body("keyless"), 400, "unsupported", "keyless"),
    ];
    for (body, status, reason, named) in cases {
        let body = match body {
            Value::String(raw) => raw,
            other => other.to_string(),
        };
        let id = activity();
        let r = http(
            reqwest::Client::new()
                .post(format!("{}/chat/completions", w.openai_base()))
                .bearer_auth(&w.key)
                .header("x-svc-activity-id", &id)
                .header("content-type", "application/json")
                .body(body),
        )
        .await;
        assert_eq!(r.status, status, "{}", r.text);
        let event = model_call(w, &id).await;
        assert_eq!(event.result, "RESULT_ERROR", "{reason}");
        assert_eq!(event.payload["reason_code"], reason, "{}", event.payload);
        assert_eq!(event.payload["status"], status);
        assert_eq!(event.resource.name, named);
        assert_eq!(
            event.actor.id, event.scope.agent_id,
            "the agent is the actor"
        );
    }
}

async fn failed_mcp_requests_are_audited(w: &World) {
    let cp = &w.cp;
    let mcp = format!("{}/mcp", w.gw.gateway_url(&w.gateway_id));
    for (body, code, method) in [
        ("{oops".to_string(), -32700, ""),
        (
            json!({"jsonrpc": "2.0", "id": 1, "method": "resources/list"}).to_string(),
            -32601,
            "resources/list",
        ),
    ] {
        let id = activity();
        let r = http(
            reqwest::Client::new()
                .post(&mcp)
                .bearer_auth(&w.key)
                .header("x-svc-activity-id", &id)
                .header("content-type", "application/json")
                .header("accept", "application/json, text/event-stream")
                .body(body),
        )
        .await;
        assert_eq!(r.body["error"]["code"], code, "{}", r.text);
        let event = wait(cp, &by_activity(cp, &id, &["mcp.request"])).await;
        assert_eq!(event.result, "RESULT_ERROR");
        assert_eq!(event.payload["error"]["code"], code, "{}", event.payload);
        assert_eq!(event.request.rpc_method, method);
        assert_eq!(event.request.surface, "INITIATOR_SURFACE_GATEWAY_MCP");
    }
}
