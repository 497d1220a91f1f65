//! Guards on real calls: the official OpenAI and Anthropic SDKs, whole and streamed, see
//! redacted answers or a refusal that lets no matched byte through; the MCP SDK sees redacted
//! tool results and refused arguments; every match is an audit event that never holds the
//! matched text.

use portcullis_shared::audit::QueryEventsRequest;
use portcullis_tests::controlplane::{AGENTS, MGMT, RULES};
use portcullis_tests::everything::Everything;
use portcullis_tests::{python, Backend, FakeLlm};
use serde_json::{json, Value};

use crate::audit::{all, wait};
use crate::mcp::Mcp;
use crate::world::{world_with, World};

const ANTHROPIC_SECRET: &str = "sk-ant-upstream-91c0d2e7aa";
const CARD: &str = "4111 1111 1111 1111";

fn reply() -> String {
    format!(
        "Here is the summary you asked for, with every detail checked twice. The card on file \
         is {CARD}, and the rest of the account looks fine."
    )
}

/// `gpt` (OpenAI-shaped) and `claude` (Anthropic) answering `reply()`.
async fn models() -> World {
    let fake = FakeLlm::openai()
        .anthropic_key(ANTHROPIC_SECRET)
        .reply(&reply());
    let w = world_with(Backend::Sqlite, fake).await;
    let claude =
        w.cp.ok(
            MGMT,
            "CreateLLMModelConnection",
            w.cp.body(json!({"name": "claude", "provider": "anthropic",
                "provider_config": {"model": "claude-sonnet-4-5-20250929",
                    "base_url": w.fake.anthropic_base_url()},
                "secret_values": {"x-api-key": ANTHROPIC_SECRET}})),
        )
        .await["connection_id"]
            .as_str()
            .unwrap()
            .to_string();
    w.cp.ok(
        MGMT,
        "AddGatewayModel",
        w.cp.body(json!({"gateway_id": w.gateway_id, "connection_id": claude})),
    )
    .await;
    w.cp.ok(
        AGENTS,
        "UpdateAgent",
        w.cp.body(json!({"agent_id": "bot", "allowed_direct_model_names": ["gpt", "claude"]})),
    )
    .await;
    w
}

async fn openai(w: &World, mode: &str) -> Value {
    python::run("openai_chat.py", &[&w.openai_base(), &w.key, "gpt", mode]).await
}

async fn anthropic(w: &World, mode: &str) -> Value {
    let base = w.gw.gateway_url(&w.gateway_id);
    python::run("anthropic_messages.py", &[&base, &w.key, "claude", mode]).await
}

fn events(types: &[&str]) -> QueryEventsRequest {
    QueryEventsRequest {
        event_types: types.iter().map(|t| t.to_string()).collect(),
        ..Default::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn model_answers_are_redacted_or_stopped_in_both_apis_whole_and_streamed() {
    let w = models().await;
    let guard =
        w.cp.ok(
            RULES,
            "CreateGuard",
            w.cp.body(
                json!({"name": "cards", "stage": "llm_output", "kind": "pii",
                "action": "redact", "config": {"types": ["card_number"]}}),
            ),
        )
        .await["guard"]["guard_id"]
            .as_str()
            .unwrap()
            .to_string();
    w.gw.caught_up(&w.cp).await;
    both_apis_get_the_card_redacted_whole_and_streamed(&w, &guard).await;

    w.cp.ok(
        RULES,
        "UpdateGuard",
        w.cp.body(json!({"guard_id": "cards", "action": "block"})),
    )
    .await;
    w.gw.caught_up(&w.cp).await;
    a_blocking_guard_refuses_whole_answers_and_cuts_streams(&w).await;
    // One event per match, without the matched text; the calls say what was delivered.
    filtered_events_hold_no_matched_text(&w).await;
}

async fn both_apis_get_the_card_redacted_whole_and_streamed(w: &World, guard: &str) {
    let redacted = reply().replace(CARD, "[REDACTED:card_number]");
    for (what, out) in [
        ("openai", openai(w, "plain").await),
        ("openai stream", openai(w, "stream").await),
        ("anthropic", anthropic(w, "plain").await),
        ("anthropic stream", anthropic(w, "stream").await),
    ] {
        assert_eq!(out["content"], redacted.as_str(), "{what}: {out}");
        if what.ends_with("stream") {
            assert!(
                out["chunks"].as_u64().unwrap() > 3,
                "{what}: the clean text still streams: {out}"
            );
        }
    }
    let mut filter = events(&["model.call"]);
    filter.workspace_id = Some(w.cp.workspace_id.clone());
    let call = wait(&w.cp, &filter).await;
    assert_eq!(call.payload["delivered"], "redacted", "{:?}", call.payload);
    assert_eq!(call.payload["guards"][0]["guard_id"], guard);
    assert_eq!(call.payload["guards"][0]["matches"], 1);
}

async fn a_blocking_guard_refuses_whole_answers_and_cuts_streams(w: &World) {
    let out = openai(w, "plain").await;
    assert_eq!(out["error"]["status"], 403, "{out}");
    assert_eq!(out["error"]["body"]["code"], "output_filtered", "{out}");
    let out = anthropic(w, "plain").await;
    assert_eq!(out["error"]["status"], 403, "{out}");
    assert_eq!(
        out["error"]["body"]["error"]["type"], "permission_error",
        "{out}"
    );
    let before = reply()[..reply().find(CARD).unwrap()].to_string();
    for (what, out) in [
        ("openai stream", openai(w, "stream").await),
        ("anthropic stream", anthropic(w, "stream").await),
    ] {
        let got = out["content"].as_str().unwrap();
        assert!(
            out["stream_error"]["message"]
                .as_str()
                .unwrap()
                .contains("cards"),
            "{what}: {out}"
        );
        assert!(
            before.starts_with(got),
            "{what}: only clean text before the match: {out}"
        );
        assert!(!got.contains("4111"), "{what}: {out}");
    }
}

async fn filtered_events_hold_no_matched_text(w: &World) {
    let mut filter = events(&["llm.output.filtered"]);
    filter.workspace_id = Some(w.cp.workspace_id.clone());
    wait(&w.cp, &filter).await;
    let found = all(&w.cp, &filter, 100).await;
    assert!(found.len() >= 4, "{}", found.len());
    for e in &found {
        let text = serde_json::to_string(e).unwrap();
        assert!(!text.contains("4111"), "{text}");
        assert_eq!(e.payload["guard"], "cards");
    }
    let mut filter = events(&["model.call"]);
    filter.workspace_id = Some(w.cp.workspace_id.clone());
    let delivered: Vec<String> = all(&w.cp, &filter, 100)
        .await
        .iter()
        .filter_map(|e| e.payload["delivered"].as_str().map(str::to_string))
        .collect();
    assert!(delivered.iter().any(|d| d == "nothing"), "{delivered:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn model_input_guards_redact_what_the_upstream_sees() {
    let w = models().await;
    w.cp.ok(
        RULES,
        "CreateGuard",
        w.cp.body(
            json!({"name": "hello", "stage": "llm_input", "kind": "keywords",
            "action": "redact", "config": {"keywords": ["hello"]}, "scope": {"models": ["gpt"]}}),
        ),
    )
    .await;
    w.gw.caught_up(&w.cp).await;
    let out = openai(&w, "plain").await;
    assert!(out["content"].is_string(), "{out}");
    let sent = w.fake.requests_to("/chat/completions");
    let body = &sent.last().unwrap().body;
    assert_eq!(
        body["messages"][0]["content"], "Say [REDACTED:keyword].",
        "{body}"
    );
    // Out of scope: claude's requests go as they were sent.
    anthropic(&w, "plain").await;
    let sent = w.fake.requests_to("/messages");
    assert_eq!(
        sent.last().unwrap().body["messages"][0]["content"],
        "Say hello."
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tool_results_are_redacted_and_arguments_refused_through_the_mcp_sdk() {
    let m = Mcp::start().await;
    let server = Everything::http().await;
    m.attach(
        json!({"name": "everything", "protocol": "streamable-http", "auth_method": "none",
        "protocol_config": {"url": server.url},
        "field_classifications": {"conditions": "weather"}}),
    )
    .await;
    m.allow(&["everything/echo", "everything/get-structured-content"])
        .await;
    for guard in [
        // Acts on fields classified `weather` whole (its own keyword never occurs).
        json!({"name": "weather", "stage": "tool_result", "kind": "keywords", "action": "redact",
            "config": {"keywords": ["tornado warning"]}}),
        json!({"name": "mild", "stage": "tool_result", "kind": "json_schema", "action": "block",
            "config": {"operations": ["get-structured-content"], "schema": {"type": "object",
                "properties": {"temperature": {"type": "number", "maximum": 50}}}}}),
        json!({"name": "mail", "stage": "tool_result", "kind": "pii", "action": "redact",
            "config": {"types": ["email"]}, "scope": {"tools": ["everything"]}}),
        json!({"name": "falcon", "stage": "tool_arguments", "kind": "keywords",
            "action": "block", "config": {"keywords": ["Project Falcon"]}}),
    ] {
        m.cp.ok(RULES, "CreateGuard", m.cp.body(guard)).await;
    }
    m.gw.caught_up(&m.cp).await;
    let out = m
        .sdk(&[
            "everything/echo",
            r#"{"message": "write to ana@example.com"}"#,
            "everything/echo",
            r#"{"message": "about project falcon"}"#,
            "everything/get-structured-content",
            r#"{"location": "New York"}"#,
            "everything/get-structured-content",
            r#"{"location": "Los Angeles"}"#,
        ])
        .await;
    let calls = out["calls"].as_array().unwrap();
    assert_eq!(
        calls[0]["content"][0]["text"], "Echo: write to [REDACTED:email]",
        "{out}"
    );
    let refused = &calls[1]["error"];
    assert_eq!(refused["data"]["reason_code"], "input_filtered", "{out}");
    assert_eq!(refused["data"]["guard"], "falcon", "{out}");
    // A result that conforms to the schema goes as it came; one that does not, nowhere.
    assert_eq!(calls[2]["structuredContent"]["temperature"], 33, "{out}");
    assert_eq!(
        calls[2]["structuredContent"]["conditions"], "[REDACTED:weather]",
        "{out}"
    );
    assert!(!calls[2].to_string().contains("Cloudy"), "{out}");
    assert_eq!(
        calls[3]["error"]["data"]["reason_code"], "output_filtered",
        "{out}"
    );
    assert_eq!(calls[3]["error"]["data"]["guard"], "mild", "{out}");
    assert!(!calls[3].to_string().contains("Sunny"), "{out}");
    let mut filter = events(&["mcp.tool_result.filtered"]);
    filter.workspace_id = Some(m.cp.workspace_id.clone());
    wait(&m.cp, &filter).await;
    let filtered = all(&m.cp, &filter, 100).await;
    let mail = filtered.iter().find(|e| e.payload["guard"] == "mail");
    assert!(mail.is_some(), "{filtered:?}");
    assert!(!serde_json::to_string(&filtered).unwrap().contains("ana@"));
    let mut filter = events(&["tool.call"]);
    filter.workspace_id = Some(m.cp.workspace_id.clone());
    wait(&m.cp, &filter).await;
    let calls = all(&m.cp, &filter, 100).await;
    assert!(
        calls.iter().any(|c| c.payload["delivered"] == "redacted"),
        "{:?}",
        calls.iter().map(|c| &c.payload).collect::<Vec<_>>()
    );
}

/// The streamed chunks that carry text, from a raw call with these extra headers.
async fn text_chunks(w: &World, headers: &[(&str, &str)]) -> (u16, Vec<String>) {
    let mut request = reqwest::Client::new()
        .post(format!("{}/chat/completions", w.openai_base()))
        .bearer_auth(&w.key)
        .json(&json!({"model": "gpt", "stream": true,
            "messages": [{"role": "user", "content": "Say hello."}]}));
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let reply = request.send().await.unwrap();
    let status = reply.status().as_u16();
    let text = reply.text().await.unwrap();
    let chunks = text
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .filter_map(|d| serde_json::from_str::<Value>(d).ok())
        .filter_map(|c| {
            c["choices"][0]["delta"]["content"]
                .as_str()
                .map(str::to_string)
        })
        .filter(|t| !t.is_empty())
        .collect();
    (status, chunks)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_largest_of_the_workspace_model_and_request_windows_holds_the_stream() {
    let w = models().await;
    w.cp.ok(
        RULES,
        "CreateGuard",
        w.cp.body(
            json!({"name": "cards", "stage": "llm_output", "kind": "pii",
            "action": "redact", "config": {"types": ["card_number"]}}),
        ),
    )
    .await;
    w.gw.caught_up(&w.cp).await;
    let redacted = reply().replace(CARD, "[REDACTED:card_number]");
    // No window set: held only as long as the longest card number, so the text still streams.
    let (status, chunks) = text_chunks(&w, &[]).await;
    assert_eq!((status, chunks.concat()), (200, redacted.clone()));
    assert!(chunks.len() > 10, "{chunks:?}");
    // A request that asks for a window longer than the answer gets it in one piece.
    let (_, chunks) = text_chunks(&w, &[("x-svc-filter-window-bytes", "4096")]).await;
    assert_eq!(chunks, std::slice::from_ref(&redacted));
    let (status, _) = text_chunks(&w, &[("x-svc-filter-window-bytes", "2000000")]).await;
    assert_eq!(status, 400);
    // So does every request once the workspace sets one.
    let err =
        w.cp.call(
            MGMT,
            "UpdateWorkspace",
            w.cp.body(json!({"filter_window_tokens": 5000})),
        )
        .await;
    assert_eq!(err.body["code"], "invalid_argument", "{}", err.text);
    let ws =
        w.cp.ok(
            MGMT,
            "UpdateWorkspace",
            w.cp.body(json!({"filter_window_tokens": 1024})),
        )
        .await;
    assert_eq!(ws["workspace"]["filter_window_tokens"], 1024);
    w.gw.caught_up(&w.cp).await;
    let (_, chunks) = text_chunks(&w, &[]).await;
    assert_eq!(chunks, [redacted]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rules_can_treat_write_tools_apart() {
    let m = Mcp::start().await;
    let server = Everything::http().await;
    m.attach(
        json!({"name": "everything", "protocol": "streamable-http", "auth_method": "none",
        "protocol_config": {"url": server.url}, "write_tools": ["get-sum"]}),
    )
    .await;
    m.allow(&["everything/echo", "everything/get-sum"]).await;
    m.cp.ok(
        RULES,
        "DeployRuleBundle",
        m.cp.body(json!({"policies": "@id(\"no-writes\") forbid (principal, \
            action == Svc::Action::\"mcp:call\", resource) when { resource.write };"})),
    )
    .await;
    m.gw.caught_up(&m.cp).await;
    let out = m
        .sdk(&[
            "everything/echo",
            r#"{"message": "read"}"#,
            "everything/get-sum",
            r#"{"a": 1, "b": 2}"#,
        ])
        .await;
    let calls = out["calls"].as_array().unwrap();
    assert_eq!(calls[0]["content"][0]["text"], "Echo: read", "{out}");
    let denied = &calls[1]["error"]["data"];
    assert_eq!(denied["reason_code"], "forbidden", "{out}");
    assert!(
        denied["determining_policy"]
            .as_str()
            .unwrap()
            .ends_with("no-writes"),
        "{out}"
    );
}
