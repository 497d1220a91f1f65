//! Upstreams that accept only access tokens the test OpenID provider issued for them: each
//! bearer token is introspected at the provider (RFC 7662, as resource server
//! `portcullis-rs`) and must be active with the upstream's URL as its audience; otherwise
//! 401 with `WWW-Authenticate`. Two of them on one port:
//! - an MCP server at `/mcp` (Streamable HTTP, stateless, JSON answers) publishing RFC 9728
//!   metadata that names the provider; tool `whoami` answers with the token's `sub`;
//! - an OpenAI-shaped model at `/v1` (resource `http://<addr>/v1`): `POST
//!   /v1/chat/completions` answers with the token's `sub` as the assistant's text.

use std::sync::{Arc, Mutex, OnceLock};

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use serde_json::{json, Value};

struct Shared {
    issuer: String,
    url: OnceLock<String>,
    http: reqwest::Client,
    /// Every bearer token presented, accepted or not.
    tokens: Mutex<Vec<String>>,
    refused: Mutex<u64>,
}

pub struct OAuthUpstream {
    pub addr: std::net::SocketAddr,
    shared: Arc<Shared>,
    _task: tokio::task::JoinHandle<()>,
}

impl OAuthUpstream {
    /// Trusts the provider at `issuer` (an [`crate::oidc::OidcIssuer`]).
    pub async fn start(issuer: &str) -> Self {
        let shared = Arc::new(Shared {
            issuer: issuer.to_string(),
            url: OnceLock::new(),
            http: reqwest::Client::builder()
                .no_proxy()
                .build()
                .expect("http client"),
            tokens: Mutex::default(),
            refused: Mutex::default(),
        });
        let router = Router::new()
            .route("/mcp", post(handle))
            .route("/.well-known/oauth-protected-resource/mcp", get(metadata))
            .route("/v1/chat/completions", post(chat))
            .with_state(shared.clone());
        let (addr, task) = crate::process::serve(router).await;
        let _ = shared.url.set(format!("http://{addr}/mcp"));
        Self {
            addr,
            shared,
            _task: task,
        }
    }

    pub fn url(&self) -> String {
        format!("http://{}/mcp", self.addr)
    }

    /// The model's base URL, also the resource its tokens must be issued for.
    pub fn llm_base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// Every bearer token presented so far.
    pub fn tokens(&self) -> Vec<String> {
        self.shared
            .tokens
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Requests refused for want of a valid token.
    pub fn refused(&self) -> u64 {
        *self
            .shared
            .refused
            .lock()
            .unwrap_or_else(|e| e.into_inner())
    }
}

async fn metadata(State(s): State<Arc<Shared>>) -> Response {
    axum::Json(json!({
        "resource": s.url.get(),
        "authorization_servers": [s.issuer],
        "scopes_supported": ["tools"],
        "bearer_methods_supported": ["header"],
    }))
    .into_response()
}

/// The `sub` of an active token issued for `audience`, by introspection.
async fn subject(s: &Shared, token: &str, audience: &str) -> Option<String> {
    let answer: Value = s
        .http
        .post(format!("{}/token/introspection", s.issuer))
        .basic_auth("portcullis-rs", Some("portcullis-rs-secret"))
        .form(&[("token", token)])
        .send()
        .await
        .ok()?
        .json()
        .await
        .ok()?;
    let for_us = match &answer["aud"] {
        Value::String(a) => a == audience,
        Value::Array(a) => a.iter().any(|v| v == audience),
        _ => false,
    };
    (answer["active"] == true && for_us)
        .then(|| answer["sub"].as_str().map(str::to_string))
        .flatten()
}

fn unauthorized(s: &Shared) -> Response {
    *s.refused.lock().unwrap_or_else(|e| e.into_inner()) += 1;
    let metadata = s.url.get().map_or(String::new(), |u| {
        u.replace("/mcp", "/.well-known/oauth-protected-resource/mcp")
    });
    let challenge = format!("Bearer error=\"invalid_token\", resource_metadata=\"{metadata}\"");
    (
        StatusCode::UNAUTHORIZED,
        [("www-authenticate", challenge)],
        "a valid access token from the provider is required",
    )
        .into_response()
}

/// The caller's `sub`, from a bearer token issued for `audience`.
async fn caller(s: &Shared, headers: &HeaderMap, audience: &str) -> Option<String> {
    let token = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))?
        .to_string();
    s.tokens
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .push(token.clone());
    subject(s, &token, audience).await
}

async fn chat(State(s): State<Arc<Shared>>, headers: HeaderMap) -> Response {
    let audience = s
        .url
        .get()
        .map_or(String::new(), |u| u.replace("/mcp", "/v1"));
    let Some(sub) = caller(&s, &headers, &audience).await else {
        return unauthorized(&s);
    };
    axum::Json(json!({
        "id": "chatcmpl-oauth", "object": "chat.completion", "created": 0, "model": "oauth-model",
        "choices": [{"index": 0, "finish_reason": "stop",
            "message": {"role": "assistant", "content": sub}}],
        "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4},
    }))
    .into_response()
}

async fn handle(
    State(s): State<Arc<Shared>>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Response {
    let audience = s.url.get().cloned().unwrap_or_default();
    let Some(sub) = caller(&s, &headers, &audience).await else {
        return unauthorized(&s);
    };
    let Ok(message) = serde_json::from_slice::<Value>(&body) else {
        return (StatusCode::BAD_REQUEST, "not JSON").into_response();
    };
    let Some(id) = message.get("id").cloned() else {
        return StatusCode::ACCEPTED.into_response();
    };
    let result = match message["method"].as_str().unwrap_or_default() {
        "initialize" => json!({"protocolVersion": "2025-06-18", "capabilities": {"tools": {}},
            "serverInfo": {"name": "oauth-protected", "version": "1"}}),
        "tools/list" => {
            json!({"tools": [{"name": "whoami", "description": "who the token belongs to",
            "inputSchema": {"type": "object", "properties": {}}}]})
        }
        "tools/call" if message["params"]["name"] == "whoami" => {
            json!({"content": [{"type": "text", "text": sub}]})
        }
        "ping" => json!({}),
        _ => {
            let error = json!({"code": -32601, "message": "method not found"});
            return axum::Json(json!({"jsonrpc": "2.0", "id": id, "error": error})).into_response();
        }
    };
    axum::Json(json!({"jsonrpc": "2.0", "id": id, "result": result})).into_response()
}
