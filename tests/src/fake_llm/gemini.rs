//! Google's `generateContent` and `streamGenerateContent?alt=sse`, as the Gemini API reference
//! shows them, on the Gemini API paths (`/v1beta/models/{model}:…`, key in `x-goog-api-key`)
//! and the Vertex paths (`/v1/projects/{p}/locations/{l}/publishers/google/models/{model}:…`,
//! a bearer token from the fake's token endpoint). Usage comes in `usageMetadata`; function
//! calls come without ids, the first of a turn with a `thoughtSignature`. It refuses what the
//! real API refuses: a wrong key or token, roles other than `user` and `model`, a function
//! call of the current turn sent back without its signature, and a turn of function responses
//! that does not answer the calls before it one for one.

use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{json, Value};

use super::{event_stream, words, Shared};

const PROMPT_TOKENS: u64 = 9;
const CANDIDATE_TOKENS: u64 = 12;
/// The signature the fake gives the first function call of a turn.
pub const SIGNATURE: &str = "Cs8BAVSoXO76+mtlIHRob3VnaHQgc2lnbmF0dXJlfj8+";

pub fn error(status: u16, message: &str) -> Response {
    let code = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let kind = match status {
        400 => "INVALID_ARGUMENT",
        401 => "UNAUTHENTICATED",
        403 => "PERMISSION_DENIED",
        404 => "NOT_FOUND",
        429 => "RESOURCE_EXHAUSTED",
        503 => "UNAVAILABLE",
        _ => "INTERNAL",
    };
    let body = json!({"error": {"code": status, "message": message, "status": kind}});
    (code, axum::Json(body)).into_response()
}

/// A call on `{model}:{method}`; `vertex` says which paths (and so which credential) it came by.
pub(super) fn answer(
    shared: &Shared,
    model_and_method: &str,
    vertex: bool,
    headers: &HeaderMap,
    body: &Value,
) -> Response {
    let Some((model, method)) = model_and_method.rsplit_once(':') else {
        return error(404, "method not found");
    };
    let b = &shared.behaviour;
    if b.status != 200 {
        return error(b.status, &format!("fake upstream failure {}", b.status));
    }
    let authorized = if vertex {
        shared.bearer_ok(headers)
    } else {
        key_ok(b.google_api_key.as_deref(), headers)
    };
    if let Err(refused) = authorized {
        return *refused;
    }
    if let Err(message) = check(body) {
        return error(400, &message);
    }
    let tool = tool_to_call(shared, body);
    match method {
        "generateContent" => axum::Json(whole(model, &b.reply, tool.as_ref())).into_response(),
        "streamGenerateContent" => {
            event_stream(chunks(model, &b.reply, tool.as_ref()), b.chunk_delay_ms)
        }
        other => error(404, &format!("method {other} not found")),
    }
}

fn key_ok(expected: Option<&str>, headers: &HeaderMap) -> Result<(), Box<Response>> {
    let key = headers.get("x-goog-api-key").and_then(|v| v.to_str().ok());
    if key.is_none_or(str::is_empty) || expected.is_some_and(|e| Some(e) != key) {
        return Err(Box::new(error(
            400,
            "API key not valid. Please pass a valid API key.",
        )));
    }
    Ok(())
}

/// The checks the Gemini API makes of `contents` and `tools`.
fn check(body: &Value) -> Result<(), String> {
    let contents = body["contents"]
        .as_array()
        .filter(|c| !c.is_empty())
        .ok_or("* GenerateContentRequest.contents: contents is not specified")?;
    for (i, c) in contents.iter().enumerate() {
        let role = c["role"].as_str().unwrap_or("user");
        if role != "user" && role != "model" {
            return Err(format!(
                "Please use a valid role: user, model. (contents[{i}].role {role})"
            ));
        }
        let parts = c["parts"].as_array().filter(|p| !p.is_empty());
        if parts.is_none() {
            return Err(format!(
                "* GenerateContentRequest.contents[{i}].parts: contents.parts must not be empty."
            ));
        }
    }
    check_function_turns(contents)?;
    check_signatures(contents)?;
    for tool in body["tools"].as_array().into_iter().flatten() {
        for f in tool["functionDeclarations"]
            .as_array()
            .into_iter()
            .flatten()
        {
            if f.get("parameters").is_some() && f.get("parametersJsonSchema").is_some() {
                return Err("parameters and parametersJsonSchema are mutually exclusive".into());
            }
        }
    }
    Ok(())
}

fn parts_with<'a>(content: &'a Value, field: &str) -> Vec<&'a Value> {
    content["parts"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|p| p.get(field))
        .collect()
}

/// A turn of function calls is answered by the next turn, one response per call, by name.
fn check_function_turns(contents: &[Value]) -> Result<(), String> {
    for (i, pair) in contents.windows(2).enumerate() {
        let calls = parts_with(&pair[0], "functionCall");
        let responses = parts_with(&pair[1], "functionResponse");
        if calls.is_empty() && responses.is_empty() {
            continue;
        }
        if !calls.is_empty() && calls.len() != responses.len() {
            return Err(format!("Please ensure that the number of function response parts is equal to the number of function call parts of the function call turn. (contents[{}])", i + 1));
        }
        let names = |v: &[&Value]| {
            let mut n: Vec<String> = v.iter().map(|p| p["name"].to_string()).collect();
            n.sort();
            n
        };
        if names(&calls) != names(&responses) {
            return Err(format!(
                "function responses at contents[{}] do not name the calls before them",
                i + 1
            ));
        }
    }
    Ok(())
}

/// The function calls of the current turn (since the last user text) carry the signature the
/// model gave them, on the first call of each model content.
fn check_signatures(contents: &[Value]) -> Result<(), String> {
    let last_text = contents
        .iter()
        .rposition(|c| c["role"] != "model" && !parts_with(c, "text").is_empty())
        .unwrap_or(0);
    for (i, c) in contents.iter().enumerate().skip(last_text) {
        let parts = c["parts"].as_array().into_iter().flatten();
        let first_call = parts.clone().find(|p| p.get("functionCall").is_some());
        if let Some(call) = first_call {
            let signature = call["thoughtSignature"].as_str().unwrap_or_default();
            if signature != SIGNATURE {
                return Err(format!("Function call is missing a thought_signature in functionCall parts. This is required for tools to work correctly, and missing thought_signature may lead to degraded model performance. (contents[{i}])"));
            }
        }
    }
    Ok(())
}

/// The function to call, when the request declares functions and does not answer a call.
fn tool_to_call(shared: &Shared, body: &Value) -> Option<(String, Value)> {
    let (_, args) = shared.behaviour.tool_call.clone()?;
    let name = body["tools"][0]["functionDeclarations"][0]["name"]
        .as_str()?
        .to_string();
    let last = body["contents"].as_array()?.last()?;
    parts_with(last, "functionResponse")
        .is_empty()
        .then_some((name, args))
}

fn usage(candidates: u64) -> Value {
    json!({"promptTokenCount": PROMPT_TOKENS, "candidatesTokenCount": candidates,
        "totalTokenCount": PROMPT_TOKENS + candidates,
        "promptTokensDetails": [{"modality": "TEXT", "tokenCount": PROMPT_TOKENS}]})
}

fn calls(tool: &(String, Value)) -> Value {
    json!([{"functionCall": {"name": tool.0, "args": tool.1}, "thoughtSignature": SIGNATURE},
        {"functionCall": {"name": tool.0, "args": tool.1}}])
}

fn response(model: &str, parts: Value, finish: Option<&str>, usage: Value) -> Value {
    let mut candidate = json!({"content": {"role": "model", "parts": parts}, "index": 0});
    if let Some(finish) = finish {
        candidate["finishReason"] = json!(finish);
    }
    json!({"candidates": [candidate], "usageMetadata": usage, "modelVersion": model,
        "responseId": "fakeGeminiResp01"})
}

fn whole(model: &str, text: &str, tool: Option<&(String, Value)>) -> Value {
    let parts = tool.map_or_else(|| json!([{"text": text}]), calls);
    response(model, parts, Some("STOP"), usage(CANDIDATE_TOKENS))
}

/// Server-sent chunks as `alt=sse` gives them: each a whole response holding the next piece,
/// usage so far on each, the finish reason and the full usage on the last.
fn chunks(model: &str, text: &str, tool: Option<&(String, Value)>) -> Vec<String> {
    let data = |v: Value| format!("data: {v}\r\n\r\n");
    if let Some(tool) = tool {
        return vec![data(response(
            model,
            calls(tool),
            Some("STOP"),
            usage(CANDIDATE_TOKENS),
        ))];
    }
    let pieces: Vec<&str> = words(text).collect();
    let last = pieces.len().saturating_sub(1);
    pieces
        .iter()
        .enumerate()
        .map(|(i, piece)| {
            let (finish, used) = if i == last {
                (Some("STOP"), usage(CANDIDATE_TOKENS))
            } else {
                (
                    None,
                    json!({"promptTokenCount": PROMPT_TOKENS, "totalTokenCount": PROMPT_TOKENS}),
                )
            };
            data(response(model, json!([{"text": piece}]), finish, used))
        })
        .collect()
}
