//! OpenAI's chat completions, as its API reference shows them: whole completions, SSE chunks
//! (tool calls streamed as OpenAI streams them), the usage chunk when asked for, errors.

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{json, Value};

use super::{event_stream, words, Shared};

const CREATED: u64 = 1_694_268_190;
const USAGE: &str = r#"{"prompt_tokens": 9, "completion_tokens": 12, "total_tokens": 21}"#;

fn usage() -> Value {
    serde_json::from_str(USAGE).unwrap_or(Value::Null)
}

fn error(status: u16, message: &str, kind: &str) -> Response {
    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let body = json!({"error": {"message": message, "type": kind, "param": null, "code": null}});
    (status, axum::Json(body)).into_response()
}

/// OpenAI refuses a `tool` message that answers no call of the assistant turn before it.
fn check_tool_results(body: &Value) -> Result<(), String> {
    let mut open: Vec<String> = Vec::new();
    for m in body["messages"].as_array().into_iter().flatten() {
        match m["role"].as_str() {
            Some("assistant") => {
                open = m["tool_calls"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|c| c["id"].as_str().map(str::to_string))
                    .collect();
            }
            Some("tool") => {
                let id = m["tool_call_id"].as_str().unwrap_or_default();
                if !open.iter().any(|o| o == id) {
                    return Err(format!("Invalid parameter: messages with role 'tool' must be a response to a preceeding message with 'tool_calls' ({id})"));
                }
            }
            _ => open.clear(),
        }
    }
    Ok(())
}

/// The tool to call, when the request offers tools and is not already answering a call.
fn tool_to_call(shared: &Shared, body: &Value) -> Option<(String, Value)> {
    let (_, args) = shared.behaviour.tool_call.clone()?;
    let name = body["tools"][0]["function"]["name"].as_str()?.to_string();
    let last = body["messages"].as_array()?.last()?;
    (last["role"] != "tool").then_some((name, args))
}

pub(super) async fn chat(
    State(shared): State<Shared>,
    uri: axum::http::Uri,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Response {
    let body = shared.receive(&uri, &headers, &body).await;
    let b = &shared.behaviour;
    if b.status != 200 {
        return error(
            b.status,
            &format!("fake upstream failure {}", b.status),
            "server_error",
        );
    }
    if let Err(message) = check_tool_results(&body) {
        return error(400, &message, "invalid_request_error");
    }
    let model = body["model"].as_str().unwrap_or("unknown").to_string();
    let tool = tool_to_call(&shared, &body);
    if body["stream"] != true {
        return axum::Json(completion(&model, &b.reply, tool)).into_response();
    }
    let include_usage = body["stream_options"]["include_usage"] == true;
    event_stream(
        stream_events(&model, &b.reply, tool, include_usage),
        b.chunk_delay_ms,
    )
}

fn calls(tool: &(String, Value)) -> Vec<Value> {
    (0..2)
        .map(|i| {
            json!({"id": format!("call_fake{i}"), "type": "function",
            "function": {"name": tool.0, "arguments": tool.1.to_string()}})
        })
        .collect()
}

fn completion(model: &str, text: &str, tool: Option<(String, Value)>) -> Value {
    let (message, finish) = match &tool {
        Some(t) => (
            json!({"role": "assistant", "content": null, "tool_calls": calls(t)}),
            "tool_calls",
        ),
        None => (json!({"role": "assistant", "content": text}), "stop"),
    };
    json!({
        "id": "chatcmpl-123", "object": "chat.completion", "created": CREATED, "model": model,
        "system_fingerprint": "fp_44709d6fcb",
        "choices": [{"index": 0, "message": message, "logprobs": null, "finish_reason": finish}],
        "usage": usage()
    })
}

fn chunk(model: &str, delta: Value, finish: Value) -> String {
    let c = json!({"id": "chatcmpl-123", "object": "chat.completion.chunk", "created": CREATED, "model": model,
        "system_fingerprint": "fp_44709d6fcb", "choices": [{"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish}]});
    format!("data: {c}\n\n")
}

fn stream_events(
    model: &str,
    text: &str,
    tool: Option<(String, Value)>,
    include_usage: bool,
) -> Vec<String> {
    let mut events = vec![chunk(
        model,
        json!({"role": "assistant", "content": ""}),
        Value::Null,
    )];
    let finish = match &tool {
        Some(t) => {
            // Each call: its id and name with empty arguments, then the arguments in pieces.
            for (i, call) in calls(t).iter().enumerate() {
                let start = json!({"tool_calls": [{"index": i, "id": call["id"], "type": "function",
                    "function": {"name": t.0, "arguments": ""}}]});
                events.push(chunk(model, start, Value::Null));
                let args = call["function"]["arguments"].as_str().unwrap_or_default();
                let (a, b) = args.split_at(args.len() / 2);
                for piece in [a, b] {
                    let delta =
                        json!({"tool_calls": [{"index": i, "function": {"arguments": piece}}]});
                    events.push(chunk(model, delta, Value::Null));
                }
            }
            "tool_calls"
        }
        None => {
            for word in words(text) {
                events.push(chunk(model, json!({"content": word}), Value::Null));
            }
            "stop"
        }
    };
    events.push(chunk(model, json!({}), json!(finish)));
    if include_usage {
        let u = json!({"id": "chatcmpl-123", "object": "chat.completion.chunk", "created": CREATED, "model": model,
            "system_fingerprint": "fp_44709d6fcb", "choices": [], "usage": usage()});
        events.push(format!("data: {u}\n\n"));
    }
    events.push("data: [DONE]\n\n".to_string());
    events
}
