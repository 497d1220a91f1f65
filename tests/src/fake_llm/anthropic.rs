//! Anthropic's Messages API, as its reference shows it: whole messages, the SSE event stream
//! (text and tool use, `ping` included), errors in `{"type": "error", …}`. It refuses what the
//! real API refuses: a missing or wrong `x-api-key` (401), a missing `anthropic-version`, a
//! missing `max_tokens`, roles other than user and assistant, and tool uses not answered by a
//! tool result in the next user turn (400). On Vertex (`…/publishers/anthropic/models/{model}:
//! rawPredict` and `:streamRawPredict`) the model is in the path, never in the body, the body
//! names `anthropic_version: vertex-2023-10-16`, and the caller holds a Google bearer token.

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{json, Value};

use super::{event_stream, words, Shared};

const INPUT_TOKENS: u64 = 9;
const OUTPUT_TOKENS: u64 = 12;

fn error(status: u16, kind: &str, message: &str) -> Response {
    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let body = json!({"type": "error", "error": {"type": kind, "message": message},
        "request_id": "req_fake"});
    (status, axum::Json(body)).into_response()
}

fn refusal(shared: &Shared, headers: &HeaderMap, body: &Value) -> Option<Response> {
    let key = headers.get("x-api-key").and_then(|v| v.to_str().ok());
    let expected = shared.behaviour.anthropic_key.as_deref();
    if key.is_none_or(str::is_empty) || expected.is_some_and(|e| Some(e) != key) {
        return Some(error(401, "authentication_error", "invalid x-api-key"));
    }
    if !headers.contains_key("anthropic-version") {
        return Some(error(
            400,
            "invalid_request_error",
            "anthropic-version: header is required",
        ));
    }
    if !body["model"].is_string() {
        return Some(error(400, "invalid_request_error", "model: Field required"));
    }
    invalid(body)
}

/// What both Anthropic's API and Vertex refuse in a body.
fn invalid(body: &Value) -> Option<Response> {
    if !body["max_tokens"].is_u64() {
        return Some(error(
            400,
            "invalid_request_error",
            "max_tokens: Field required",
        ));
    }
    turns(body)
        .err()
        .map(|m| error(400, "invalid_request_error", &m))
}

/// What Vertex refuses of a Claude call.
fn vertex_refusal(
    shared: &Shared,
    headers: &HeaderMap,
    body: &Value,
    method: &str,
) -> Option<Response> {
    if let Err(refused) = shared.bearer_ok(headers) {
        return Some(*refused);
    }
    if body["anthropic_version"] != "vertex-2023-10-16" {
        return Some(error(
            400,
            "invalid_request_error",
            "anthropic_version: must be vertex-2023-10-16",
        ));
    }
    if body.get("model").is_some() {
        return Some(error(
            400,
            "invalid_request_error",
            "model: Extra inputs are not permitted",
        ));
    }
    if (method == "streamRawPredict") != (body["stream"] == true) {
        return Some(error(
            400,
            "invalid_request_error",
            "stream must be true on streamRawPredict only",
        ));
    }
    invalid(body)
}

/// Roles alternate as the API allows, and every tool use is answered in the next turn.
fn turns(body: &Value) -> Result<(), String> {
    let messages = body["messages"]
        .as_array()
        .ok_or("messages: Field required")?;
    let mut pending: Vec<&str> = Vec::new();
    for (i, m) in messages.iter().enumerate() {
        let role = m["role"].as_str().unwrap_or_default();
        if role != "user" && role != "assistant" {
            return Err(format!(
                "messages.{i}.role: Input should be 'user' or 'assistant'"
            ));
        }
        let blocks: Vec<&Value> = m["content"]
            .as_array()
            .map(|b| b.iter().collect())
            .unwrap_or_default();
        let of = |kind: &str, field: &str| -> Vec<&str> {
            blocks
                .iter()
                .filter(|b| b["type"] == kind)
                .filter_map(|b| b[field].as_str())
                .collect()
        };
        if role == "user" {
            let answered = of("tool_result", "tool_use_id");
            if let Some(missing) = pending.iter().find(|id| !answered.contains(id)) {
                return Err(format!("messages.{i}: tool_use ids were found without tool_result blocks immediately after: {missing}"));
            }
            pending.clear();
        } else {
            pending = of("tool_use", "id");
        }
    }
    Ok(())
}

/// The tool to use, when the request offers tools and does not already answer a tool use.
fn tool_to_use(shared: &Shared, body: &Value) -> Option<(String, Value)> {
    let (_, args) = shared.behaviour.tool_call.clone()?;
    let name = body["tools"][0]["name"].as_str()?.to_string();
    let last = body["messages"].as_array()?.last()?;
    let answering = last["content"]
        .as_array()
        .is_some_and(|b| b.iter().any(|b| b["type"] == "tool_result"));
    (!answering).then_some((name, args))
}

pub(super) async fn messages(
    State(shared): State<Shared>,
    uri: axum::http::Uri,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Response {
    let body = shared.receive(&uri, &headers, &body).await;
    if let Some(failed) = failure(&shared) {
        return failed;
    }
    if let Some(refused) = refusal(&shared, &headers, &body) {
        return refused;
    }
    let model = body["model"].as_str().unwrap_or_default().to_string();
    reply(&shared, &model, &body)
}

/// A Claude call on Vertex: `{model}:rawPredict` or `{model}:streamRawPredict`.
pub(super) fn vertex(
    shared: &Shared,
    model_and_method: &str,
    headers: &HeaderMap,
    body: &Value,
) -> Response {
    let (model, method) = model_and_method
        .rsplit_once(':')
        .unwrap_or((model_and_method, ""));
    if let Some(failed) = failure(shared) {
        return failed;
    }
    if let Some(refused) = vertex_refusal(shared, headers, body, method) {
        return refused;
    }
    reply(shared, model, body)
}

fn failure(shared: &Shared) -> Option<Response> {
    let b = &shared.behaviour;
    if b.status != 200 {
        let kind = if b.status == 529 {
            "overloaded_error"
        } else {
            "api_error"
        };
        return Some(error(
            b.status,
            kind,
            &format!("fake upstream failure {}", b.status),
        ));
    }
    None
}

fn reply(shared: &Shared, model: &str, body: &Value) -> Response {
    let b = &shared.behaviour;
    let tool = tool_to_use(shared, body);
    if body["stream"] != true {
        return axum::Json(message(model, &b.reply, tool)).into_response();
    }
    event_stream(stream_events(model, &b.reply, tool), b.chunk_delay_ms)
}

fn uses(tool: &(String, Value)) -> Vec<Value> {
    (0..2)
        .map(|i| json!({"type": "tool_use", "id": format!("toolu_fake{i}"), "name": tool.0, "input": tool.1}))
        .collect()
}

fn message(model: &str, text: &str, tool: Option<(String, Value)>) -> Value {
    let (content, stop) = match &tool {
        Some(t) => (Value::Array(uses(t)), "tool_use"),
        None => (json!([{"type": "text", "text": text}]), "end_turn"),
    };
    json!({"id": "msg_fake01", "type": "message", "role": "assistant", "model": model,
        "content": content, "stop_reason": stop, "stop_sequence": null,
        "usage": {"input_tokens": INPUT_TOKENS, "output_tokens": OUTPUT_TOKENS,
            "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}})
}

fn event(data: Value) -> String {
    let name = data["type"].as_str().unwrap_or_default().to_string();
    format!("event: {name}\ndata: {data}\n\n")
}

fn stream_events(model: &str, text: &str, tool: Option<(String, Value)>) -> Vec<String> {
    let mut start = message(model, "", None);
    start["content"] = json!([]);
    start["stop_reason"] = Value::Null;
    start["usage"]["output_tokens"] = json!(1);
    let mut events = vec![event(json!({"type": "message_start", "message": start}))];
    let stop = match &tool {
        Some(t) => {
            for (index, block) in uses(t).into_iter().enumerate() {
                let mut empty = block.clone();
                empty["input"] = json!({});
                events.push(event(
                    json!({"type": "content_block_start", "index": index, "content_block": empty}),
                ));
                let args = block["input"].to_string();
                let (a, b) = args.split_at(args.len() / 2);
                for piece in ["", a, b] {
                    events.push(event(json!({"type": "content_block_delta", "index": index,
                        "delta": {"type": "input_json_delta", "partial_json": piece}})));
                }
                events.push(event(json!({"type": "content_block_stop", "index": index})));
            }
            "tool_use"
        }
        None => {
            events.push(event(json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}})));
            events.push(event(json!({"type": "ping"})));
            for word in words(text) {
                events.push(event(json!({"type": "content_block_delta", "index": 0,
                    "delta": {"type": "text_delta", "text": word}})));
            }
            events.push(event(json!({"type": "content_block_stop", "index": 0})));
            "end_turn"
        }
    };
    events.push(event(
        json!({"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": null},
        "usage": {"output_tokens": OUTPUT_TOKENS}}),
    ));
    events.push(event(json!({"type": "message_stop"})));
    events
}
