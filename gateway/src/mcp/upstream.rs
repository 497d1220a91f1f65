//! Calling upstream MCP servers: one session per tool connection (and credential subject),
//! kept across requests and replaced when the connection's configuration changes. Sessions
//! speak JSON-RPC over Streamable HTTP or over a child process's stdio; results come back as
//! the upstream sent them.

pub mod rest;
mod stdio;
mod streamable;

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::Arc;

use serde_json::{json, Value};

use crate::snapshot::{ToolEntry, ToolTransport};
use crate::Gateway;

pub use stdio::StdioSession;
pub use streamable::HttpSession;

/// The protocol version the gateway asks upstreams for.
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

/// The `initialize` request the gateway sends.
pub fn initialize_params() -> Value {
    json!({
        "protocolVersion": PROTOCOL_VERSION,
        "capabilities": {},
        "clientInfo": {"name": "portcullis-gateway", "version": env!("CARGO_PKG_VERSION")}
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

pub enum Session {
    Http(HttpSession),
    Stdio(StdioSession),
    Rest(rest::RestSession),
}

impl Session {
    /// Sends one request and returns its result. `extra` headers (act-as) go on HTTP only.
    pub async fn call(
        &self,
        gw: &Gateway,
        method: &str,
        params: Value,
        extra: &[(http::HeaderName, http::HeaderValue)],
    ) -> Result<Value, UpstreamError> {
        match self {
            Session::Http(s) => s.call(gw, method, params, extra).await,
            Session::Stdio(s) => s.call(gw, method, params).await,
            Session::Rest(s) => s.adapter.call(gw, method, params, &s.person).await,
        }
    }

    fn alive(&self) -> bool {
        match self {
            Session::Http(_) | Session::Rest(_) => true,
            Session::Stdio(s) => s.alive(),
        }
    }

    /// Every tool the upstream offers, following `nextCursor` to the end.
    pub async fn list_all_tools(
        &self,
        gw: &Gateway,
        extra: &[(http::HeaderName, http::HeaderValue)],
    ) -> Result<Vec<Value>, UpstreamError> {
        let mut tools = Vec::new();
        let mut cursor: Option<String> = None;
        for _page in 0..100 {
            let params = match &cursor {
                Some(c) => json!({"cursor": c}),
                None => json!({}),
            };
            let result = self.call(gw, "tools/list", params, extra).await?;
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
}

/// Sessions by connection, keyed to the connection's fingerprint. Lookups take a plain lock;
/// creating a session (which may start a process) is serialized separately.
#[derive(Default)]
pub struct Pool {
    sessions: std::sync::Mutex<HashMap<String, (String, Arc<Session>)>>,
    creating: tokio::sync::Mutex<()>,
}

impl Pool {
    fn lookup(&self, key: &str, fingerprint: &str) -> Option<Arc<Session>> {
        let sessions = self.sessions.lock().unwrap_or_else(|e| e.into_inner());
        sessions
            .get(key)
            .filter(|(f, session)| f == fingerprint && session.alive())
            .map(|(_, session)| session.clone())
    }

    /// The connection's shared session.
    pub async fn session(
        &self,
        gw: &Arc<Gateway>,
        tool: &ToolEntry,
    ) -> Result<Arc<Session>, UpstreamError> {
        self.session_as(gw, tool, None).await
    }

    /// The session of one person (their `sub` and credential headers) on a per-user
    /// connection, or the shared one: pooled per (connection, person).
    pub async fn session_as(
        &self,
        gw: &Arc<Gateway>,
        tool: &ToolEntry,
        person: Option<(&str, &crate::peruser::Headers)>,
    ) -> Result<Arc<Session>, UpstreamError> {
        if let Some(why) = &tool.unavailable {
            return Err(UpstreamError::Transport(why.clone()));
        }
        // A person's session also follows their credential: a replaced one (seen within a
        // minute, when the cached one is fetched again) replaces the session.
        // The shared session is looked up without allocating: this runs on every call.
        let (key, fingerprint): (Cow<'_, str>, Cow<'_, str>) = match person {
            Some((sub, headers)) => (
                format!("{}|{sub}", tool.id).into(),
                format!("{}|{}", tool.fingerprint, headers.digest).into(),
            ),
            None => (tool.id.as_str().into(), tool.fingerprint.as_str().into()),
        };
        if let Some(session) = self.lookup(&key, &fingerprint) {
            return Ok(session);
        }
        let _creating = self.creating.lock().await;
        if let Some(session) = self.lookup(&key, &fingerprint) {
            return Ok(session);
        }
        let own: Vec<(http::HeaderName, http::HeaderValue)> =
            person.map(|(_, h)| h.headers.clone()).unwrap_or_default();
        let session = Arc::new(match &tool.transport {
            ToolTransport::Http { url, headers, .. } => {
                let mut headers = headers.clone();
                headers.extend(own);
                Session::Http(HttpSession::new(url.clone(), headers))
            }
            ToolTransport::Rest { adapter } => Session::Rest(rest::RestSession {
                adapter: adapter.clone(),
                person: own,
            }),
            ToolTransport::Stdio { .. } if person.is_some() => {
                return Err(UpstreamError::Transport(
                    "per-user credentials are sent over HTTP; a stdio tool cannot take them".into(),
                ))
            }
            ToolTransport::Stdio {
                command,
                args,
                env,
                cwd,
            } => {
                if !gw.config.allow_stdio_tools {
                    return Err(UpstreamError::Transport(
                        "this gateway does not run stdio tools".into(),
                    ));
                }
                Session::Stdio(
                    StdioSession::spawn(gw, &tool.name, command, args, env, cwd.as_deref()).await?,
                )
            }
        });
        let mut sessions = self.sessions.lock().unwrap_or_else(|e| e.into_inner());
        if person.is_some() {
            // People's sessions go when their connection's do, or when this person's does:
            // one per (connection, person) at most, none for a connection no longer current.
            let people = format!("{}|", tool.id);
            sessions.retain(|k, (f, _)| {
                !k.starts_with(&people) || f.split('|').next() == Some(tool.fingerprint.as_str())
            });
        }
        sessions.insert(
            key.into_owned(),
            (fingerprint.into_owned(), session.clone()),
        );
        Ok(session)
    }
}
