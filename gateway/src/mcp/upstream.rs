//! Calling upstream MCP servers: one session per tool connection (and credential subject),
//! kept across requests and replaced when the connection's configuration changes. Sessions
//! speak JSON-RPC over Streamable HTTP or over a child process's stdio; results come back as
//! the upstream sent them.

pub mod rest;
mod stdio;

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::Arc;

use serde_json::Value;

use crate::mcp::table::{ToolEntry, ToolTransport};
use crate::Gateway;

pub use portcullis_shared::mcp_client::{
    initialize_params, outcome, HttpSession, UpstreamError, PROTOCOL_VERSION,
};
pub use stdio::StdioSession;

/// The name the gateway gives upstreams in `initialize`.
pub const GATEWAY_CLIENT: &str = "portcullis-gateway";

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
            Session::Http(s) => s.call(&gw.mcp_link(), method, params, extra).await,
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
        portcullis_shared::mcp_client::list_all_tools(|params| {
            self.call(gw, "tools/list", params, extra)
        })
        .await
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
    /// connection, or the shared one: pooled per (connection, person). A shared OAuth
    /// connection's session carries its current access token.
    pub async fn session_as(
        &self,
        gw: &Arc<Gateway>,
        tool: &ToolEntry,
        person: Option<(&str, &crate::peruser::Headers)>,
    ) -> Result<Arc<Session>, UpstreamError> {
        if let Some(why) = &tool.unavailable {
            return Err(UpstreamError::Transport(why.clone()));
        }
        if person.is_none() && tool.shared_oauth {
            let grant = shared_grant(gw, tool).await?;
            return self.open(gw, tool, Some(("", &grant))).await;
        }
        self.open(gw, tool, person).await
    }

    async fn open(
        &self,
        gw: &Arc<Gateway>,
        tool: &ToolEntry,
        person: Option<(&str, &crate::peruser::Headers)>,
    ) -> Result<Arc<Session>, UpstreamError> {
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

/// A shared OAuth connection's current access token, as headers.
async fn shared_grant(
    gw: &Gateway,
    tool: &ToolEntry,
) -> Result<crate::peruser::Headers, UpstreamError> {
    let owner = portcullis_shared::snapshot::CredentialOwner::Tool;
    match gw.credentials.lookup(gw, owner, &tool.id, ("", "")).await {
        Ok(Ok(headers)) => Ok(headers),
        Ok(Err(_)) => Err(UpstreamError::Transport(format!(
            "tool '{}' is not connected: an administrator must complete its OAuth consent",
            tool.name
        ))),
        Err(e) => Err(UpstreamError::Transport(e.to_string())),
    }
}
