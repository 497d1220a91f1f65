//! Anthropic both ways over real processes: the official Anthropic SDK on `/v1/messages` to an
//! OpenAI-shaped model and to an Anthropic model, the official OpenAI SDK to an Anthropic model,
//! plain, streamed and with tools; refusals as the SDK's exception classes; pools that mix
//! shapes; quotas charged from Anthropic's usage; `custom` forwarding untouched.

use portcullis_tests::controlplane::{AGENTS, MGMT};
use portcullis_tests::fake_llm::RunningFake;
use portcullis_tests::{python, Backend, FakeLlm};
use serde_json::{json, Value};

use crate::audit::{activity, by_activity, wait};
use crate::world::{http, model, world_with, World, UPSTREAM_MODEL, UPSTREAM_SECRET};

const ANTHROPIC_SECRET: &str = "sk-ant-upstream-7c1e55d0b2";
const CLAUDE: &str = "claude-sonnet-4-5-20250929";

/// An Anthropic model connection called `name` on this fake.
async fn claude(w: &World, name: &str, fake: &RunningFake) -> String {
    let m =
        w.cp.ok(
            MGMT,
            "CreateLLMModelConnection",
            w.cp.body(json!({"name": name, "provider": "anthropic",
                "provider_config": {"model": CLAUDE, "base_url": fake.anthropic_base_url()},
                "secret_values": {"x-api-key": ANTHROPIC_SECRET}})),
        )
        .await;
    m["connection_id"].as_str().unwrap().to_string()
}

async fn attach(w: &World, ids: &[&str], allowed: &[&str]) {
    for id in ids {
        w.cp.ok(
            MGMT,
            "AddGatewayModel",
            w.cp.body(json!({"gateway_id": w.gateway_id, "connection_id": id})),
        )
        .await;
    }
    w.cp.ok(
        AGENTS,
        "UpdateAgent",
        w.cp.body(json!({"agent_id": "bot", "allowed_direct_model_names": allowed})),
    )
    .await;
    w.gw.caught_up(&w.cp).await;
}

/// `gpt` (OpenAI-shaped) and `claude` (Anthropic) on one fake that calls tools when offered.
async fn both() -> World {
    let fake = FakeLlm::openai()
        .anthropic_key(ANTHROPIC_SECRET)
        .tool_call(json!({"location": "Paris"}));
    let w = world_with(Backend::Sqlite, fake).await;
    let id = claude(&w, "claude", &w.fake).await;
    attach(&w, &[&id], &["gpt", "claude"]).await;
    w
}

fn anthropic_base(w: &World) -> String {
    w.gw.gateway_url(&w.gateway_id)
}

async fn anthropic_sdk(w: &World, model: &str, mode: &str) -> Value {
    let base = anthropic_base(w);
    python::run("anthropic_messages.py", &[&base, &w.key, model, mode]).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_anthropic_sdk_reaches_openai_shaped_and_anthropic_models() {
    let w = both().await;
    for model in ["gpt", "claude"] {
        the_anthropic_sdk_gets_plain_and_streamed_answers(&w, model).await;
        the_anthropic_sdk_uses_tools(&w, model).await;
    }
    let bearer = python::run(
        "anthropic_messages.py",
        &[&anthropic_base(&w), &w.key, "claude", "plain", "bearer"],
    )
    .await;
    assert_eq!(
        bearer["content"], "Hello from the fake upstream.",
        "{bearer}"
    );
    let models = anthropic_sdk(&w, "ignored", "models").await;
    assert_eq!(models["models"], json!(["claude", "gpt"]), "{models}");

    each_upstream_gets_its_own_key_and_model_id(&w);
}

async fn the_anthropic_sdk_gets_plain_and_streamed_answers(w: &World, model: &str) {
    let plain = anthropic_sdk(w, model, "plain").await;
    assert_eq!(
        plain["content"], "Hello from the fake upstream.",
        "{model}: {plain}"
    );
    assert_eq!(plain["stop_reason"], "end_turn");
    assert_eq!(plain["served_by"], model);
    assert_eq!(
        (
            plain["usage"]["input_tokens"].as_u64(),
            plain["usage"]["output_tokens"].as_u64()
        ),
        (Some(9), Some(12)),
        "{model}: {plain}"
    );
    let streamed = anthropic_sdk(w, model, "stream").await;
    assert_eq!(
        streamed["content"], "Hello from the fake upstream.",
        "{model}: {streamed}"
    );
    assert!(
        streamed["chunks"].as_u64().unwrap() > 1,
        "streamed in pieces: {streamed}"
    );
    assert_eq!(
        streamed["usage"]["output_tokens"], 12,
        "{model}: {streamed}"
    );
}

async fn the_anthropic_sdk_uses_tools(w: &World, model: &str) {
    for mode in ["tools", "tools-stream"] {
        let t = anthropic_sdk(w, model, mode).await;
        assert_eq!(t["stop_reason"], "tool_use", "{model} {mode}: {t}");
        let uses = t["tool_uses"].as_array().unwrap();
        assert_eq!(uses.len(), 2, "two tool uses, each with its id: {t}");
        assert_ne!(uses[0]["id"], uses[1]["id"]);
        for u in uses {
            assert_eq!(u["name"], "get_weather");
            assert_eq!(
                u["input"],
                json!({"location": "Paris"}),
                "{model} {mode}: {t}"
            );
        }
        assert_eq!(
            t["final"], "Hello from the fake upstream.",
            "the results were accepted: {t}"
        );
    }
}

fn each_upstream_gets_its_own_key_and_model_id(w: &World) {
    for r in w.fake.requests() {
        for (name, value) in &r.headers {
            assert!(
                !value.to_str().unwrap_or_default().contains(&w.key),
                "the agent key reached the upstream in {name}"
            );
        }
        if r.path == "/v1/messages" {
            assert_eq!(
                r.headers["x-api-key"], ANTHROPIC_SECRET,
                "the stored key is sent"
            );
            assert!(
                r.headers.contains_key("anthropic-version"),
                "the caller's anthropic-version is passed on"
            );
            assert_eq!(
                r.body["model"], CLAUDE,
                "model is rewritten to the upstream id"
            );
        } else {
            let bearer = format!("Bearer {UPSTREAM_SECRET}");
            assert_eq!(r.headers["authorization"], bearer.as_str());
            assert_eq!(r.body["model"], UPSTREAM_MODEL);
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_openai_sdk_calls_an_anthropic_model() {
    let w = both().await;
    let base = w.openai_base();
    let plain = python::run("openai_chat.py", &[&base, &w.key, "claude", "plain"]).await;
    assert_eq!(plain["content"], "Hello from the fake upstream.", "{plain}");
    assert_eq!(plain["model"], CLAUDE);
    assert_eq!(
        (
            plain["usage"]["prompt_tokens"].as_u64(),
            plain["usage"]["total_tokens"].as_u64()
        ),
        (Some(9), Some(21)),
        "{plain}"
    );
    let streamed = python::run("openai_chat.py", &[&base, &w.key, "claude", "stream-usage"]).await;
    assert_eq!(
        streamed["content"], "Hello from the fake upstream.",
        "{streamed}"
    );
    assert_eq!(streamed["usage"]["completion_tokens"], 12, "{streamed}");
    let quiet = python::run("openai_chat.py", &[&base, &w.key, "claude", "stream"]).await;
    assert_eq!(
        quiet["usage"],
        Value::Null,
        "usage only when asked for: {quiet}"
    );
    for mode in ["tools", "tools-stream"] {
        let t = python::run("openai_chat.py", &[&base, &w.key, "claude", mode]).await;
        let calls = t["tool_calls"]
            .as_array()
            .unwrap_or_else(|| panic!("{mode}: {t}"));
        assert_eq!(calls.len(), 2, "{mode}: {t}");
        assert_ne!(calls[0]["id"], calls[1]["id"]);
        for c in calls {
            assert_eq!(c["name"], "get_weather");
            assert_eq!(c["arguments"], json!({"location": "Paris"}), "{mode}: {t}");
        }
        assert_eq!(t["final"], "Hello from the fake upstream.", "{mode}: {t}");
    }
    let sent: Vec<_> = w
        .fake
        .requests()
        .into_iter()
        .filter(|r| r.path == "/v1/messages")
        .collect();
    assert!(sent.len() >= 7, "every call reached the Anthropic endpoint");
    for r in &sent {
        assert_eq!(r.headers["x-api-key"], ANTHROPIC_SECRET);
        assert_eq!(
            r.headers["anthropic-version"], "2023-06-01",
            "the version the gateway speaks"
        );
        assert_eq!(
            r.headers["anthropic-version"], "2023-06-01",
            "the version the gateway speaks"
        );
        assert!(
            r.body["max_tokens"].is_u64(),
            "Anthropic needs max_tokens: {}",
            r.body
        );
    }
}

/// A raw `POST /v1/messages` as `bot`, with an activity id.
async fn messages(w: &World, key: &str, body: Value) -> (crate::world::Http, String) {
    let id = activity();
    let r = http(
        reqwest::Client::new()
            .post(format!("{}/v1/messages", anthropic_base(w)))
            .header("x-api-key", key)
            .header("anthropic-version", "2023-06-01")
            .header("x-svc-activity-id", &id)
            .json(&body),
    )
    .await;
    (r, id)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refusals_on_messages_are_anthropic_sdk_exceptions() {
    let w = both().await;
    // The fake refuses what the real API refuses.
    the_fake_refuses_what_the_real_api_refuses(&w).await;

    unknown_keys_and_models_are_sdk_errors(&w).await;

    // Attached but not allowed: a policy denial, with its reason.
    a_model_not_allowed_is_a_permission_error(&w).await;

    // The gateway itself refuses a request without max_tokens, as Anthropic does, and nothing
    // reaches an upstream.
    the_gateway_refuses_a_request_without_max_tokens(&w).await;

    // A used-up quota: 429, which the SDK raises as RateLimitError.
    a_used_up_quota_is_a_rate_limit_error(&w).await;
}

async fn the_fake_refuses_what_the_real_api_refuses(w: &World) {
    let direct = reqwest::Client::new()
        .post(format!("{}/v1/messages", w.fake.anthropic_base_url()))
        .header("x-api-key", ANTHROPIC_SECRET);
    let r = http(
        direct
            .try_clone()
            .unwrap()
            .json(&json!({"model": "m", "max_tokens": 5, "messages": []})),
    )
    .await;
    assert_eq!(r.status, 400, "no anthropic-version: {}", r.text);
    let r = http(
        direct
            .header("anthropic-version", "2023-06-01")
            .json(&json!({"model": "m", "messages": []})),
    )
    .await;
    assert!(r.text.contains("max_tokens"), "{}", r.text);
}

async fn unknown_keys_and_models_are_sdk_errors(w: &World) {
    let base = anthropic_base(w);
    let bad_key = format!("svc_{}", "A".repeat(43));
    let r = python::run(
        "anthropic_messages.py",
        &[&base, &bad_key, "claude", "error"],
    )
    .await;
    assert_eq!(r["error"]["class"], "AuthenticationError", "{r}");
    assert_eq!(r["error"]["body"]["type"], "error");
    assert_eq!(r["error"]["body"]["error"]["type"], "authentication_error");

    let r = anthropic_sdk(w, "nope", "error").await;
    assert_eq!(
        (r["error"]["class"].as_str(), r["error"]["status"].as_u64()),
        (Some("NotFoundError"), Some(404)),
        "{r}"
    );
}

async fn a_model_not_allowed_is_a_permission_error(w: &World) {
    let other = claude(w, "other", &w.fake).await;
    attach(w, &[&other], &["gpt", "claude"]).await;
    let r = anthropic_sdk(w, "other", "error").await;
    assert_eq!(r["error"]["class"], "PermissionDeniedError", "{r}");
    let error = &r["error"]["body"]["error"];
    assert_eq!(error["type"], "permission_error");
    assert_eq!(
        (
            error["reason_code"].as_str(),
            error["determining_policy"].as_str()
        ),
        (Some("no_permit"), Some("default-deny")),
        "{r}"
    );
}

async fn the_gateway_refuses_a_request_without_max_tokens(w: &World) {
    let before = w.fake.requests().len();
    let (r, _) = messages(
        w,
        &w.key,
        json!({"model": "claude", "messages": [{"role": "user", "content": "hi"}]}),
    )
    .await;
    assert_eq!(
        (r.status, r.body["error"]["type"].as_str()),
        (400, Some("invalid_request_error")),
        "{}",
        r.text
    );
    assert!(r.body["error"]["message"]
        .as_str()
        .unwrap()
        .contains("max_tokens"));
    assert_eq!(w.fake.requests().len(), before);
}

async fn a_used_up_quota_is_a_rate_limit_error(w: &World) {
    let cp = &w.cp;
    let agent = cp
        .ok(AGENTS, "GetAgent", cp.body(json!({"agent_id": "bot"})))
        .await["agent"]["agent_id"]
        .clone();
    cp.ok(
        MGMT,
        "CreateLLMQuota",
        cp.body(json!({"subject_type": "agent", "subject_id": agent, "limit_micros": 1})),
    )
    .await;
    w.gw.caught_up(cp).await;
    let r = anthropic_sdk(w, "claude", "error").await;
    assert_eq!(r["error"]["class"], "RateLimitError", "{r}");
    assert!(r["error"]["body"]["error"]["quota_id"].is_string(), "{r}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pools_of_both_shapes_fail_over_from_either_api() {
    let w = both().await;
    let cp = &w.cp;
    let down = FakeLlm::anthropic().status(529).start().await;
    let claude_down = claude(&w, "claude-down", &down).await;
    let gpt_down = model(cp, "gpt-down", &down.base_url()).await;
    let listed = cp
        .ok(MGMT, "ListLLMModelConnections", cp.body(json!({})))
        .await;
    let id_of = |name: &str| {
        listed["models"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["name"] == name)
            .map(|m| m["connection_id"].as_str().unwrap().to_string())
            .unwrap()
    };
    for (pool, first, second) in [
        ("to-openai", claude_down.clone(), id_of("gpt")),
        ("to-anthropic", gpt_down.clone(), id_of("claude")),
    ] {
        let members = json!([{"connection_id": first, "priority": 0}, {"connection_id": second, "priority": 1}]);
        let p = cp
            .ok(
                MGMT,
                "CreateLLMPool",
                cp.body(json!({"name": pool, "strategy": "priority", "members": members})),
            )
            .await;
        cp.ok(
            MGMT,
            "AddGatewayPool",
            cp.body(json!({"gateway_id": w.gateway_id, "pool_id": p["pool"]["pool_id"]})),
        )
        .await;
    }
    cp.ok(
        AGENTS,
        "UpdateAgent",
        cp.body(json!({"agent_id": "bot", "allowed_pool_names": ["to-openai", "to-anthropic"]})),
    )
    .await;
    w.gw.caught_up(cp).await;
    for (pool, serves) in [("to-openai", "gpt"), ("to-anthropic", "claude")] {
        let a = anthropic_sdk(&w, pool, "plain").await;
        assert_eq!(
            (a["content"].as_str(), a["served_by"].as_str()),
            (Some("Hello from the fake upstream."), Some(serves)),
            "{pool}: {a}"
        );
        let o = python::run("openai_chat.py", &[&w.openai_base(), &w.key, pool, "plain"]).await;
        assert_eq!(
            (o["content"].as_str(), o["served_by"].as_str()),
            (Some("Hello from the fake upstream."), Some(serves)),
            "{pool}: {o}"
        );
        let (_, id) = messages(&w, &w.key, json!({"model": pool, "max_tokens": 16, "messages": [{"role": "user", "content": "hi"}]})).await;
        let e = wait(cp, &by_activity(cp, &id, &["model.call"])).await;
        assert_eq!(
            (
                e.payload["attempts"].as_u64(),
                e.payload["served_by"].as_str()
            ),
            (Some(2), Some(serves)),
            "{}",
            e.payload
        );
    }
    assert!(
        down.requests().len() >= 4,
        "the failing members were tried first"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_quota_on_an_anthropic_model_is_charged_its_real_usage() {
    let w = both().await;
    let cp = &w.cp;
    let listed = cp
        .ok(MGMT, "ListLLMModelConnections", cp.body(json!({})))
        .await;
    let claude_id = listed["models"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["name"] == "claude")
        .unwrap()["connection_id"]
        .clone();
    cp.ok(
        MGMT,
        "CreateLLMQuota",
        cp.body(json!({"subject_type": "model", "subject_id": claude_id, "limit_micros": 9000})),
    )
    .await;
    w.gw.caught_up(cp).await;
    anthropic_calls_are_charged_their_real_usage(&w).await;
    an_openai_stream_is_charged_without_showing_usage(&w).await;
    // Until the quota has no room for another worst case; then 429 in Anthropic's shape.
    a_full_quota_refuses_in_anthropics_shape(&w).await;
}

/// What one call to `claude` costs: claude-sonnet-4 at 3 and 15 USD per million tokens: 9 in
/// and 12 out cost 27 + 180 µUSD.
const CLAUDE_CALL_MICROS: u64 = 9 * 3 + 12 * 15;

/// A `claude` request with room for 64 tokens.
fn claude_body(stream: bool) -> Value {
    json!({"model": "claude", "max_tokens": 64, "stream": stream, "messages": [{"role": "user", "content": "hi"}]})
}

async fn anthropic_calls_are_charged_their_real_usage(w: &World) {
    let cp = &w.cp;
    for (how, stream) in [("anthropic plain", false), ("anthropic streamed", true)] {
        let (r, id) = messages(w, &w.key, claude_body(stream)).await;
        assert_eq!(r.status, 200, "{how}: {}", r.text);
        let e = wait(cp, &by_activity(cp, &id, &["model.call"])).await;
        assert_eq!(
            e.payload["cost_micros"], CLAUDE_CALL_MICROS,
            "{how}: {}",
            e.payload
        );
        assert_eq!(
            e.payload["charges"][0]["micros"], CLAUDE_CALL_MICROS,
            "{how}: {}",
            e.payload
        );
        assert_eq!(
            (e.payload["api"].as_str(), e.payload["translated"].as_bool()),
            (Some("anthropic.messages"), Some(false))
        );
    }
}

async fn an_openai_stream_is_charged_without_showing_usage(w: &World) {
    let cp = &w.cp;
    let id = activity();
    let streamed = http(
        reqwest::Client::new()
            .post(format!("{}/chat/completions", w.openai_base()))
            .bearer_auth(&w.key)
            .header("x-svc-activity-id", &id)
            .json(&json!({"model": "claude", "max_tokens": 64, "stream": true, "messages": [{"role": "user", "content": "hi"}]})),
    )
    .await;
    assert_eq!(streamed.status, 200, "{}", streamed.text);
    assert!(
        !streamed.text.contains("\"usage\""),
        "the caller did not ask for usage: {}",
        streamed.text
    );
    let e = wait(cp, &by_activity(cp, &id, &["model.call"])).await;
    assert_eq!(
        e.payload["cost_micros"], CLAUDE_CALL_MICROS,
        "openai streamed: {}",
        e.payload
    );
    assert_eq!(
        (
            e.payload["api"].as_str(),
            e.payload["provider"].as_str(),
            e.payload["translated"].as_bool()
        ),
        (
            Some("openai.chat.completions"),
            Some("anthropic"),
            Some(true)
        )
    );
}

async fn a_full_quota_refuses_in_anthropics_shape(w: &World) {
    let mut refused = None;
    for _ in 0..60 {
        let (r, _) = messages(w, &w.key, claude_body(false)).await;
        if r.status != 200 {
            refused = Some(r);
            break;
        }
    }
    let r = refused.expect("the quota refused a call at last");
    assert_eq!(
        (
            r.status,
            r.body["error"]["type"].as_str(),
            r.body["error"]["code"].as_str()
        ),
        (429, Some("rate_limit_error"), Some("quota_exceeded")),
        "{}",
        r.text
    );
    assert!(r.headers.contains_key("retry-after"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn custom_forwards_the_request_untouched() {
    let w = both().await;
    let cp = &w.cp;
    let m = cp
        .ok(MGMT, "CreateLLMModelConnection", cp.body(json!({"name": "house", "provider": "custom",
            "provider_config": {"model": "house-model", "base_url": w.fake.base_url()},
            "secret_values": {"x-api-key": ANTHROPIC_SECRET, "anthropic-version": "2023-06-01", "Authorization": format!("Bearer {UPSTREAM_SECRET}")}})))
        .await;
    let id = m["connection_id"].as_str().unwrap().to_string();
    attach(&w, &[&id], &["gpt", "claude", "house"]).await;
    let before = w.fake.requests().len();
    let openai = python::run(
        "openai_chat.py",
        &[&w.openai_base(), &w.key, "house", "stream"],
    )
    .await;
    assert_eq!(
        openai["content"], "Hello from the fake upstream.",
        "{openai}"
    );
    let anthropic = anthropic_sdk(&w, "house", "plain").await;
    assert_eq!(
        anthropic["content"], "Hello from the fake upstream.",
        "{anthropic}"
    );
    let sent = &w.fake.requests()[before..];
    assert_eq!(sent[0].path, "/v1/chat/completions");
    assert_eq!(
        sent[0].body["model"], "house",
        "no model rewrite: {}",
        sent[0].body
    );
    assert!(
        sent[0].body.get("stream_options").is_none(),
        "no translation: {}",
        sent[0].body
    );
    assert_eq!(sent[1].path, "/v1/messages");
    assert_eq!(sent[1].body["model"], "house");
    assert_eq!(
        sent[1].body["system"], "Be brief.",
        "the caller's body as sent"
    );
}

/// Issue 38, L5: `anthropic-beta` values and server tools reach an Anthropic model only when
/// its connection lists them; otherwise the call is refused, naming what was asked, and nothing
/// is sent upstream.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn betas_and_server_tools_pass_only_when_the_model_lists_them() {
    let w = both().await;
    let send = |beta: Option<&'static str>, body: Value| {
        let mut request = reqwest::Client::new()
            .post(format!("{}/v1/messages", anthropic_base(&w)))
            .header("x-api-key", &w.key)
            .header("anthropic-version", "2023-06-01")
            .json(&body);
        if let Some(b) = beta {
            request = request.header("anthropic-beta", b);
        }
        http(request)
    };
    let plain = json!({"model": "claude", "max_tokens": 16, "messages": [{"role": "user", "content": "hi"}]});
    let mut searching = plain.clone();
    searching["tools"] = json!([{"type": "web_search_20250305", "name": "web_search", "max_uses": 1},
        {"name": "lookup", "input_schema": {"type": "object"}}]);
    let before = w.fake.requests_to("/v1/messages").len();
    let r = send(Some("computer-use-2025-01-24"), plain.clone()).await;
    assert_eq!(r.status, 400, "{}", r.text);
    assert!(
        r.text.contains("computer-use-2025-01-24") && r.text.contains("anthropic_betas"),
        "{}",
        r.text
    );
    let r = send(None, searching.clone()).await;
    assert_eq!(r.status, 400, "{}", r.text);
    assert!(r.text.contains("web_search_20250305"), "{}", r.text);
    assert_eq!(
        w.fake.requests_to("/v1/messages").len(),
        before,
        "nothing reached the model"
    );

    let id =
        w.cp.ok(MGMT, "ListLLMModelConnections", w.cp.body(json!({})))
            .await["models"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["name"] == "claude")
            .unwrap()["connection_id"]
            .clone();
    w.cp.ok(MGMT, "UpdateLLMModelConnection", w.cp.body(json!({"connection_id": id,
        "provider_config": {"model": CLAUDE, "base_url": w.fake.anthropic_base_url(),
            "anthropic_betas": ["computer-use-2025-01-24"], "server_tools": ["web_search_20250305"]}})))
        .await;
    w.cp.call(MGMT, "UpdateLLMModelConnection", w.cp.body(json!({"connection_id": id,
        "provider_config": {"model": CLAUDE, "base_url": w.fake.anthropic_base_url(), "server_tools": ["web search"]}})))
        .await
        .expect_error("invalid_argument", 400)
        .mentions("server_tools");
    w.gw.caught_up(&w.cp).await;
    let r = send(Some("computer-use-2025-01-24"), searching).await;
    assert_eq!(r.status, 200, "{}", r.text);
    let sent = w.fake.requests_to("/v1/messages");
    let last = sent.last().unwrap();
    assert_eq!(last.headers["anthropic-beta"], "computer-use-2025-01-24");
    assert_eq!(last.body["tools"][0]["type"], "web_search_20250305");
}
