//! A fake MCP server over Streamable HTTP that requires an API key, records what it received
//! and can answer in JSON or SSE. Tools: `whoami` (echoes the headers it got), `fail`
//! (an `isError` result), `structured` (`structuredContent`), and `page2` on a second page of
//! `tools/list`.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::Router;
use serde_json::{json, Value};

#[derive(Default)]
struct Shared {
    key: String,
    sse: bool,
    headers: Mutex<Vec<HeaderMap>>,
    requests: Mutex<Vec<(String, HeaderMap)>>,
    sessions: Mutex<Vec<String>>,
    lists: AtomicU64,
    initializes: AtomicU64,
    forget: AtomicBool,
}

pub struct FakeMcp {
    pub addr: std::net::SocketAddr,
    shared: Arc<Shared>,
    _task: tokio::task::JoinHandle<()>,
}

impl FakeMcp {
    /// Requires `Authorization: Bearer <key>`; `sse` answers requests as event streams.
    pub async fn start(key: &str, sse: bool) -> Self {
        let shared = Arc::new(Shared {
            key: key.to_string(),
            sse,
            ..Shared::default()
        });
        let router = Router::new()
            .route("/mcp", post(handle))
            .with_state(shared.clone());
        let (addr, task) = crate::process::serve(router).await;
        Self {
            addr,
            shared,
            _task: task,
        }
    }

    pub fn url(&self) -> String {
        format!("http://{}/mcp", self.addr)
    }

    /// Every request's headers, in order.
    pub fn headers(&self) -> Vec<HeaderMap> {
        lock(&self.shared.headers).clone()
    }

    /// Every authorized JSON-RPC message's method and headers, in order.
    pub fn requests(&self) -> Vec<(String, HeaderMap)> {
        lock(&self.shared.requests).clone()
    }

    pub fn list_calls(&self) -> u64 {
        self.shared.lists.load(Ordering::SeqCst)
    }

    pub fn initializes(&self) -> u64 {
        self.shared.initializes.load(Ordering::SeqCst)
    }

    /// Forgets every session: the next request with an old session id gets 404.
    pub fn expire_sessions(&self) {
        lock(&self.shared.sessions).clear();
        self.shared.forget.store(true, Ordering::SeqCst);
    }
}

fn tool(name: &str) -> Value {
    json!({"name": name, "description": format!("the {name} tool"), "inputSchema": {"type": "object", "properties": {}}})
}

/// Locks `m`, even when a panic elsewhere poisoned it.
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Records the request, checks its key and session, and answers its JSON-RPC message: with
/// the result as JSON or an event stream, and a session id when it opened one.
async fn handle(
    State(s): State<Arc<Shared>>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Response {
    lock(&s.headers).push(headers.clone());
    let expected = format!("Bearer {}", s.key);
    if headers.get("authorization").and_then(|v| v.to_str().ok()) != Some(expected.as_str()) {
        return (StatusCode::UNAUTHORIZED, "missing or wrong API key").into_response();
    }
    let Ok(message) = serde_json::from_slice::<Value>(&body) else {
        return (StatusCode::BAD_REQUEST, "not JSON").into_response();
    };
    let method = message["method"].as_str().unwrap_or_default().to_string();
    lock(&s.requests).push((method.clone(), headers.clone()));
    let session = headers
        .get("mcp-session-id")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    if method != "initialize" {
        let known = session
            .as_ref()
            .is_some_and(|id| lock(&s.sessions).contains(id));
        if !known {
            return (StatusCode::NOT_FOUND, "unknown session").into_response();
        }
    }
    let Some(id) = message.get("id").cloned() else {
        return StatusCode::ACCEPTED.into_response();
    };
    let mut new_session = None;
    let result = match method.as_str() {
        "initialize" => {
            s.initializes.fetch_add(1, Ordering::SeqCst);
            let sid = uuid::Uuid::new_v4().to_string();
            lock(&s.sessions).push(sid.clone());
            new_session = Some(sid);
            json!({"protocolVersion": "2025-06-18", "capabilities": {"tools": {}}, "serverInfo": {"name": "fake", "version": "1"}})
        }
        "tools/list" => {
            s.lists.fetch_add(1, Ordering::SeqCst);
            if message["params"]["cursor"] == "2" {
                json!({"tools": [tool("page2")]})
            } else {
                json!({"tools": [tool("whoami"), tool("fail"), tool("structured")], "nextCursor": "2"})
            }
        }
        "tools/call" => match call(&message, &headers) {
            Ok(result) => result,
            Err(error) => return rpc_error(&id, error),
        },
        _ => return rpc_error(&id, json!({"code": -32601, "message": "method not found"})),
    };
    let reply = json!({"jsonrpc": "2.0", "id": id, "result": result});
    let mut response = if s.sse {
        let text = format!("event: message\ndata: {reply}\n\n");
        ([("content-type", "text/event-stream")], text).into_response()
    } else {
        axum::Json(reply).into_response()
    };
    if let Some(sid) = new_session {
        if let Ok(v) = sid.parse() {
            response.headers_mut().insert("mcp-session-id", v);
        }
    }
    response
}

/// A `tools/call` result, or the JSON-RPC error for a tool the server does not have.
fn call(message: &Value, headers: &HeaderMap) -> Result<Value, Value> {
    Ok(
        match message["params"]["name"].as_str().unwrap_or_default() {
            "whoami" => {
                let seen: serde_json::Map<String, Value> = headers
                    .iter()
                    .map(|(k, v)| (k.to_string(), json!(v.to_str().unwrap_or_default())))
                    .collect();
                json!({"content": [{"type": "text", "text": serde_json::to_string(&seen).unwrap_or_default()}]})
            }
            "fail" => {
                json!({"content": [{"type": "text", "text": "the tool failed on purpose"}], "isError": true})
            }
            "structured" => {
                json!({"content": [{"type": "text", "text": "{\"temperature\":21}"}], "structuredContent": {"temperature": 21}})
            }
            "page2" => json!({"content": [{"type": "text", "text": "from page two"}]}),
            other => {
                return Err(json!({"code": -32602, "message": format!("unknown tool {other}")}))
            }
        },
    )
}

/// A JSON-RPC error reply to the message `id`.
fn rpc_error(id: &Value, error: Value) -> Response {
    axum::Json(json!({"jsonrpc": "2.0", "id": id, "error": error})).into_response()
}

/// A stateless MCP server answering from memory, for load tests: `initialize`, `tools/list`
/// (one tool, `echo`) and `tools/call` in JSON, notifications with 202.
pub fn stateless_router() -> Router {
    Router::new().route("/mcp", post(stateless))
}

async fn stateless(body: axum::body::Bytes) -> Response {
    let Ok(message) = serde_json::from_slice::<Value>(&body) else {
        return (StatusCode::BAD_REQUEST, "not JSON").into_response();
    };
    let Some(id) = message.get("id").cloned() else {
        return StatusCode::ACCEPTED.into_response();
    };
    let result = match message["method"].as_str().unwrap_or_default() {
        "initialize" => {
            json!({"protocolVersion": "2025-06-18", "capabilities": {"tools": {}}, "serverInfo": {"name": "bench", "version": "1"}})
        }
        "tools/list" => json!({"tools": [tool("echo")]}),
        "tools/call" => json!({"content": [{"type": "text", "text": "ok"}]}),
        "ping" => json!({}),
        _ => return rpc_error(&id, json!({"code": -32601, "message": "method not found"})),
    };
    axum::Json(json!({"jsonrpc": "2.0", "id": id, "result": result})).into_response()
}
