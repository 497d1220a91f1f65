//! The client side of MCP's Streamable HTTP transport, shared by the gateway (its upstream
//! sessions) and the control plane (an administrator's catalog sync): JSON-RPC POSTs answered
//! with JSON or an SSE stream, the `Mcp-Session-Id` the server hands out, and a fresh
//! `initialize` when it expires.

use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

use futures_util::StreamExt;
use http::{HeaderName, HeaderValue};
use serde_json::{json, Value};

use crate::sse::{self, Events};

/// How requests are sent: the HTTP client, how long an answer may take, and the name this
/// client gives in `initialize`.
#[derive(Clone)]
pub struct Link {
    pub http: reqwest::Client,
    pub timeout: Duration,
    pub client_name: &'static str,
    /// Whether the server may be at a loopback or private address ([`crate::egress`]); the
    /// client's resolver filters names, this covers IP-literal URLs.
    pub allow_private: bool,
}

/// The protocol version asked for.
pub const PROTOCOL_VERSION: &str = "2025-06-18";

#[derive(Debug, thiserror::Error)]
pub enum UpstreamError {
    /// The upstream answered with a JSON-RPC error: passed on as it is.
    #[error("upstream error {code}: {message}")]
    Rpc {
        code: i64,
        message: String,
        data: Option<Value>,
    },
    /// No usable answer.
    #[error("{0}")]
    Transport(String),
    /// The upstream forgot our session; initialize again.
    #[error("the upstream session expired")]
    SessionExpired,
}

/// The `initialize` request a client named `client_name` sends.
pub fn initialize_params(client_name: &str) -> Value {
    json!({
        "protocolVersion": PROTOCOL_VERSION,
        "capabilities": {},
        "clientInfo": {"name": client_name, "version": env!("CARGO_PKG_VERSION")}
    })
}

/// Splits a JSON-RPC response into its result or error.
pub fn outcome(message: Value) -> Result<Value, UpstreamError> {
    if let Some(error) = message.get("error") {
        return Err(UpstreamError::Rpc {
            code: error.get("code").and_then(Value::as_i64).unwrap_or(-32603),
            message: error
                .get("message")
                .and_then(Value::as_str)
                .unwrap_or("upstream error")
                .to_string(),
            data: error.get("data").cloned(),
        });
    }
    message
        .get("result")
        .cloned()
        .ok_or_else(|| UpstreamError::Transport("the upstream answered without a result".into()))
}

#[derive(Clone, Default)]
struct State {
    session_id: Option<String>,
    version: String,
}

pub struct HttpSession {
    url: reqwest::Url,
    headers: Vec<(HeaderName, HeaderValue)>,
    /// The initialized session, read on every call.
    state: std::sync::Mutex<Option<State>>,
    /// Serializes the handshake.
    init: tokio::sync::Mutex<()>,
    next_id: AtomicI64,
}

impl HttpSession {
    pub fn new(url: reqwest::Url, headers: Vec<(HeaderName, HeaderValue)>) -> Self {
        Self {
            url,
            headers,
            state: std::sync::Mutex::new(None),
            init: tokio::sync::Mutex::new(()),
            next_id: AtomicI64::new(1),
        }
    }

    pub async fn call(
        &self,
        link: &Link,
        method: &str,
        params: Value,
        extra: &[(HeaderName, HeaderValue)],
    ) -> Result<Value, UpstreamError> {
        for attempt in 0..2 {
            let state = self.ensure(link, extra).await?;
            let id = self.next_id.fetch_add(1, Ordering::Relaxed);
            let message = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
            match self.post(link, &state, &message, extra, Some(id)).await {
                Err(UpstreamError::SessionExpired) if attempt == 0 => {
                    let mut guard = self.state.lock().unwrap_or_else(|e| e.into_inner());
                    if guard.as_ref().map(|s| &s.session_id) == Some(&state.session_id) {
                        *guard = None;
                    }
                }
                Ok(reply) => return outcome(reply.unwrap_or(Value::Null)),
                Err(e) => return Err(e),
            }
        }
        Err(UpstreamError::Transport(
            "the upstream session expired twice in a row".into(),
        ))
    }

    fn current(&self) -> Option<State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Initializes once (concurrent callers wait for the same handshake).
    async fn ensure(
        &self,
        link: &Link,
        extra: &[(HeaderName, HeaderValue)],
    ) -> Result<State, UpstreamError> {
        if let Some(state) = self.current() {
            return Ok(state);
        }
        let _init = self.init.lock().await;
        if let Some(state) = self.current() {
            return Ok(state);
        }
        let fresh = State {
            session_id: None,
            version: PROTOCOL_VERSION.to_string(),
        };
        let message = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": initialize_params(link.client_name)});
        let (reply, session_id) = self
            .post_raw(link, &fresh, &message, extra, Some(0))
            .await?;
        let result = outcome(reply.unwrap_or(Value::Null))?;
        let version = result
            .get("protocolVersion")
            .and_then(Value::as_str)
            .unwrap_or(PROTOCOL_VERSION)
            .to_string();
        let state = State {
            session_id,
            version,
        };
        let note = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
        self.post(link, &state, &note, extra, None).await?;
        *self.state.lock().unwrap_or_else(|e| e.into_inner()) = Some(state.clone());
        Ok(state)
    }

    async fn post(
        &self,
        link: &Link,
        state: &State,
        message: &Value,
        extra: &[(HeaderName, HeaderValue)],
        id: Option<i64>,
    ) -> Result<Option<Value>, UpstreamError> {
        self.post_raw(link, state, message, extra, id)
            .await
            .map(|(reply, _)| reply)
    }

    /// Sends one message; returns the response with `id` (if any) and the session id header.
    async fn post_raw(
        &self,
        link: &Link,
        state: &State,
        message: &Value,
        extra: &[(HeaderName, HeaderValue)],
        id: Option<i64>,
    ) -> Result<(Option<Value>, Option<String>), UpstreamError> {
        crate::egress::check_url(&self.url, link.allow_private)
            .map_err(|e| UpstreamError::Transport(format!("the upstream is refused: {e}")))?;
        let mut request = link
            .http
            .post(self.url.clone())
            .header(http::header::CONTENT_TYPE, "application/json")
            .header(http::header::ACCEPT, "application/json, text/event-stream")
            .header("mcp-protocol-version", state.version.as_str())
            .body(message.to_string());
        if let Some(sid) = &state.session_id {
            request = request.header("mcp-session-id", sid.as_str());
        }
        for (name, value) in self.headers.iter().chain(extra) {
            request = request.header(name, value);
        }
        let response = tokio::time::timeout(link.timeout, request.send())
            .await
            .map_err(|_| UpstreamError::Transport("the upstream sent no response in time".into()))?
            .map_err(|e| {
                UpstreamError::Transport(if e.is_connect() {
                    "could not connect to the upstream".into()
                } else {
                    "the request to the upstream failed".into()
                })
            })?;
        let status = response.status();
        if status == reqwest::StatusCode::NOT_FOUND && state.session_id.is_some() {
            return Err(UpstreamError::SessionExpired);
        }
        if !status.is_success() {
            return Err(UpstreamError::Transport(format!(
                "the upstream answered HTTP {}",
                status.as_u16()
            )));
        }
        let session_id = response
            .headers()
            .get("mcp-session-id")
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        let Some(id) = id else {
            return Ok((None, session_id));
        };
        let is_sse = response
            .headers()
            .get(http::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("text/event-stream"));
        let reply = if is_sse {
            read_sse(link, response, id).await?
        } else {
            read_json(response).await?
        };
        Ok((Some(reply), session_id))
    }
}

/// Reads a JSON answer of at most [`sse::MAX_EVENT_BYTES`], the bound of one message either way.
async fn read_json(response: reqwest::Response) -> Result<Value, UpstreamError> {
    let bytes = crate::egress::read_capped(response, sse::MAX_EVENT_BYTES)
        .await
        .map_err(|e| match e {
            crate::egress::EgressError::TooLarge(_) => UpstreamError::Transport(format!(
                "the upstream's answer is larger than {} bytes",
                sse::MAX_EVENT_BYTES
            )),
            _ => UpstreamError::Transport("the upstream's answer broke off".into()),
        })?;
    serde_json::from_slice(&bytes)
        .map_err(|_| UpstreamError::Transport("the upstream's answer is not JSON".into()))
}

/// Reads events until the response to `id` arrives.
async fn read_sse(
    link: &Link,
    response: reqwest::Response,
    id: i64,
) -> Result<Value, UpstreamError> {
    let mut body = response.bytes_stream();
    let mut events = Events::default();
    loop {
        let chunk = tokio::time::timeout(link.timeout, body.next())
            .await
            .map_err(|_| {
                UpstreamError::Transport("the upstream's event stream went quiet".into())
            })?;
        match chunk {
            Some(Ok(bytes)) => events.push(&bytes),
            Some(Err(_)) => {
                return Err(UpstreamError::Transport(
                    "the upstream's event stream broke off".into(),
                ))
            }
            None => {
                return Err(UpstreamError::Transport(
                    "the upstream's event stream ended without an answer".into(),
                ))
            }
        }
        while let Some((event, end)) = events
            .next_event()
            .map_err(|e| UpstreamError::Transport(e.to_string()))?
        {
            let data = sse::data(&event[..end]);
            let Ok(message) = serde_json::from_str::<Value>(&data) else {
                continue;
            };
            if message.get("id").and_then(Value::as_i64) == Some(id)
                && (message.get("result").is_some() || message.get("error").is_some())
            {
                return Ok(message);
            }
        }
    }
}

/// Every tool a server offers, following `nextCursor` to the end; `page` sends one
/// `tools/list` with the given params.
pub async fn list_all_tools<F, Fut>(mut page: F) -> Result<Vec<Value>, UpstreamError>
where
    F: FnMut(Value) -> Fut,
    Fut: std::future::Future<Output = Result<Value, UpstreamError>>,
{
    let mut tools = Vec::new();
    let mut cursor: Option<String> = None;
    for _page in 0..100 {
        let params = match &cursor {
            Some(c) => json!({"cursor": c}),
            None => json!({}),
        };
        let result = page(params).await?;
        if let Some(list) = result.get("tools").and_then(Value::as_array) {
            tools.extend(list.iter().cloned());
        }
        cursor = result
            .get("nextCursor")
            .and_then(Value::as_str)
            .filter(|c| !c.is_empty())
            .map(str::to_string);
        if cursor.is_none() {
            return Ok(tools);
        }
    }
    Err(UpstreamError::Transport(
        "the upstream's tool list did not end after 100 pages".into(),
    ))
}
