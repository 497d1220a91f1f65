//! Amazon Bedrock's Converse API, as its reference shows it: `POST /model/{modelId}/converse`
//! and `/converse-stream` (an `application/vnd.amazon.eventstream` of `messageStart`,
//! `contentBlockStart`, `contentBlockDelta`, `contentBlockStop`, `messageStop` and `metadata`
//! events, each payload padded with `p`). Errors are `{"message": …}` with the exception's name
//! in `x-amzn-ErrorType`. It authenticates as Bedrock does: a SigV4 signature for service
//! `bedrock` by a registered key (with its session token, for keys STS issued), or a Bedrock
//! API key as a bearer token; and it refuses what Converse refuses: roles out of turn, a turn
//! of tool uses not answered one for one by tool results, content that is not a list.

use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{json, Value};

use super::{byte_stream, sigv4, words, Shared};

const INPUT_TOKENS: u64 = 9;
const OUTPUT_TOKENS: u64 = 12;
const PADDING: &str = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJ";

pub fn error(status: u16, exception: &str, message: &str) -> Response {
    let code = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let kind = format!("{exception}:http://internal.amazon.com/coral/com.amazon.bedrock/");
    (
        code,
        [("x-amzn-errortype", kind)],
        axum::Json(json!({"message": message})),
    )
        .into_response()
}

fn failure(status: u16) -> Response {
    let (exception, message) = match status {
        429 => (
            "ThrottlingException",
            "Too many requests, please wait before trying again.",
        ),
        424 => (
            "ModelErrorException",
            "The model failed to process the request.",
        ),
        503 => (
            "ServiceUnavailableException",
            "Bedrock is unable to process your request.",
        ),
        403 => (
            "AccessDeniedException",
            "You don't have access to the model with the specified model ID.",
        ),
        _ => (
            "InternalServerException",
            "The server encountered an internal error.",
        ),
    };
    error(status, exception, message)
}

/// A request as received, for the signature check.
pub(super) struct Received<'a> {
    pub path: &'a str,
    pub query: &'a str,
    pub headers: &'a HeaderMap,
    pub bytes: &'a [u8],
}

/// `{modelId}/converse` or `{modelId}/converse-stream`.
pub(super) fn answer(shared: &Shared, rest: &str, request: &Received<'_>) -> Response {
    let Some((model, operation)) = rest.rsplit_once('/') else {
        return error(404, "UnknownOperationException", "Unknown operation");
    };
    let b = &shared.behaviour;
    if b.status != 200 {
        return failure(b.status);
    }
    if let Err(refused) = authenticate(shared, request) {
        return *refused;
    }
    let body: Value = serde_json::from_slice(request.bytes).unwrap_or(Value::Null);
    if let Err(message) = check(&body) {
        return error(400, "ValidationException", &message);
    }
    let tool = tool_to_use(shared, &body);
    match operation {
        "converse" => axum::Json(whole(&b.reply, tool.as_ref())).into_response(),
        "converse-stream" => byte_stream(
            frames(&b.reply, tool.as_ref()),
            b.chunk_delay_ms,
            "application/vnd.amazon.eventstream",
        ),
        _ => error(
            404,
            "UnknownOperationException",
            &format!("{model}: unknown operation"),
        ),
    }
}

fn authenticate(shared: &Shared, r: &Received<'_>) -> Result<(), Box<Response>> {
    let auth = r
        .headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    let api_key = shared.behaviour.bedrock_api_key.as_deref();
    let state = shared.cloud();
    if let Some(bearer) = auth.strip_prefix("Bearer ") {
        return match api_key {
            Some(key) if key == bearer => Ok(()),
            None if state.aws_keys.is_empty() => Ok(()),
            _ => Err(Box::new(error(
                403,
                "UnrecognizedClientException",
                "Invalid API Key format: Must start with pre-defined prefix",
            ))),
        };
    }
    if state.aws_keys.is_empty() && api_key.is_none() && !auth.is_empty() {
        return Ok(());
    }
    sigv4::verify(
        &state.aws_keys,
        "bedrock",
        "POST",
        r.path,
        r.query,
        r.headers,
        r.bytes,
    )
    .map(|_| ())
    .map_err(|why| {
        let (exception, message) = why.split_once(": ").unwrap_or((why.as_str(), ""));
        let exception = match exception {
            "MissingAuthenticationToken" | "IncompleteSignature" => "IncompleteSignatureException",
            "SignatureDoesNotMatch" => "InvalidSignatureException",
            other => other,
        };
        Box::new(error(403, exception, message))
    })
}

/// What Converse validates of `messages` and the request's fields.
fn check(body: &Value) -> Result<(), String> {
    if body.get("modelId").is_some() || body.get("model").is_some() {
        return Err("Malformed input request: the model is named in the path, not the body".into());
    }
    let messages = body["messages"]
        .as_array()
        .ok_or("1 validation error detected: Value null at 'messages' failed to satisfy constraint: Member must not be null")?;
    let mut pending: Vec<&str> = Vec::new();
    for (i, m) in messages.iter().enumerate() {
        let role = m["role"].as_str().unwrap_or_default();
        let expected = if i % 2 == 0 { "user" } else { "assistant" };
        if role != expected {
            return Err("A conversation must start with a user message and alternate between user and assistant roles.".into());
        }
        let blocks = m["content"].as_array().ok_or(format!(
            "Malformed input request: messages.{i}.content must be a list"
        ))?;
        let of = |kind: &str, field: &str| -> Vec<&str> {
            blocks
                .iter()
                .filter_map(|b| b[kind][field].as_str())
                .collect()
        };
        if role == "user" {
            let answered = of("toolResult", "toolUseId");
            if pending.len() != answered.len() || pending.iter().any(|id| !answered.contains(id)) {
                return Err(format!(
                    "Expected toolResult blocks at messages.{i}.content for the following Ids: {}",
                    pending.join(", ")
                ));
            }
            pending.clear();
        } else {
            pending = of("toolUse", "toolUseId");
        }
    }
    for t in body["toolConfig"]["tools"].as_array().into_iter().flatten() {
        if !t["toolSpec"]["inputSchema"]["json"].is_object() {
            return Err("The value at toolConfig.tools.0.toolSpec.inputSchema.json is not a valid JSON object".into());
        }
    }
    Ok(())
}

fn tool_to_use(shared: &Shared, body: &Value) -> Option<(String, Value)> {
    let (_, args) = shared.behaviour.tool_call.clone()?;
    let name = body["toolConfig"]["tools"][0]["toolSpec"]["name"]
        .as_str()?
        .to_string();
    let last = body["messages"].as_array()?.last()?;
    let answering = last["content"]
        .as_array()
        .is_some_and(|b| b.iter().any(|b| b.get("toolResult").is_some()));
    (!answering).then_some((name, args))
}

fn usage() -> Value {
    json!({"inputTokens": INPUT_TOKENS, "outputTokens": OUTPUT_TOKENS,
        "totalTokens": INPUT_TOKENS + OUTPUT_TOKENS})
}

fn tool_id(i: usize) -> String {
    format!("tooluse_fakeBdrk{i}")
}

fn whole(text: &str, tool: Option<&(String, Value)>) -> Value {
    let (content, stop) = match tool {
        Some((name, input)) => (
            (0..2)
                .map(
                    |i| json!({"toolUse": {"toolUseId": tool_id(i), "name": name, "input": input}}),
                )
                .collect(),
            "tool_use",
        ),
        None => (json!([{"text": text}]), "end_turn"),
    };
    json!({"output": {"message": {"role": "assistant", "content": content}},
        "stopReason": stop, "usage": usage(), "metrics": {"latencyMs": 120}})
}

fn frame(event: &str, mut payload: Value) -> Vec<u8> {
    use aws_smithy_types::event_stream::{Header, HeaderValue, Message};
    payload["p"] = json!(PADDING);
    let message = Message::new(payload.to_string().into_bytes())
        .add_header(Header::new(
            ":event-type",
            HeaderValue::String(event.to_string().into()),
        ))
        .add_header(Header::new(
            ":content-type",
            HeaderValue::String("application/json".into()),
        ))
        .add_header(Header::new(
            ":message-type",
            HeaderValue::String("event".into()),
        ));
    let mut out = Vec::new();
    aws_smithy_eventstream::frame::write_message_to(&message, &mut out).expect("a frame");
    out
}

fn frames(text: &str, tool: Option<&(String, Value)>) -> Vec<Vec<u8>> {
    let mut out = vec![frame("messageStart", json!({"role": "assistant"}))];
    let stop = match tool {
        Some((name, input)) => {
            for i in 0..2 {
                out.push(frame(
                    "contentBlockStart",
                    json!({"contentBlockIndex": i,
                    "start": {"toolUse": {"toolUseId": tool_id(i), "name": name}}}),
                ));
                let args = input.to_string();
                let (a, b) = args.split_at(args.len() / 2);
                for piece in [a, b] {
                    out.push(frame(
                        "contentBlockDelta",
                        json!({"contentBlockIndex": i,
                        "delta": {"toolUse": {"input": piece}}}),
                    ));
                }
                out.push(frame("contentBlockStop", json!({"contentBlockIndex": i})));
            }
            "tool_use"
        }
        None => {
            for piece in words(text) {
                out.push(frame(
                    "contentBlockDelta",
                    json!({"contentBlockIndex": 0,
                    "delta": {"text": piece}}),
                ));
            }
            out.push(frame("contentBlockStop", json!({"contentBlockIndex": 0})));
            "end_turn"
        }
    };
    out.push(frame("messageStop", json!({"stopReason": stop})));
    out.push(frame(
        "metadata",
        json!({"usage": usage(), "metrics": {"latencyMs": 120}}),
    ));
    out
}
