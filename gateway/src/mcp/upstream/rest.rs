//! A catalog adapter served as an MCP server: `tools/list` answers the installed operations,
//! `tools/call` checks the arguments against the operation's schema, makes its one HTTP
//! request with the stored credential, and returns the projected JSON answer as
//! `structuredContent` (a refusal by the service is a tool result with `isError`).

use std::collections::HashMap;
use std::sync::Arc;

use http::{HeaderName, HeaderValue};
use portcullis_shared::adapter::{self, Installed, Operation};
use serde_json::{json, Value};

use super::UpstreamError;
use crate::Gateway;

/// Longest a service may take to answer one call.
const CALL_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// An installed adapter, compiled: validators per operation and the headers every request
/// carries (the adapter's own and the credential).
pub struct RestAdapter {
    installed: Installed,
    validators: HashMap<String, jsonschema::Validator>,
    headers: Vec<(HeaderName, HeaderValue)>,
    /// Secret values, scrubbed from what the service says back.
    secrets: Vec<String>,
}

impl std::fmt::Debug for RestAdapter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RestAdapter")
            .field("slug", &self.installed.slug)
            .field("version", &self.installed.version)
            .finish_non_exhaustive()
    }
}

impl RestAdapter {
    /// Compiles an installed adapter with the connection's stored secrets.
    pub fn compile(
        installed: Installed,
        secrets: &std::collections::BTreeMap<String, String>,
    ) -> Result<Self, String> {
        let mut validators = HashMap::new();
        for op in installed.operations() {
            validators.insert(op.name.clone(), adapter::validator(&op.input_schema)?);
        }
        let header = |name: &str, value: &str| {
            let name = HeaderName::from_bytes(name.as_bytes())
                .map_err(|_| format!("{name:?} is not a header name"))?;
            let mut value = HeaderValue::from_str(value)
                .map_err(|_| format!("the value of header {name} is not valid"))?;
            value.set_sensitive(true);
            Ok::<_, String>((name, value))
        };
        let mut headers = Vec::new();
        for (name, value) in &installed.definition.headers {
            headers.push(header(name, value)?);
        }
        let auth = &installed.definition.auth;
        let mut kept = Vec::new();
        if let Some(secret) = secrets.get(&auth.header) {
            let value = if secret.starts_with(&auth.scheme) {
                secret.clone()
            } else {
                format!("{}{secret}", auth.scheme)
            };
            headers.push(header(&auth.header, &value)?);
            let bare = value
                .strip_prefix(&auth.scheme)
                .unwrap_or(&value)
                .to_string();
            kept.extend([value.clone(), bare]);
        }
        Ok(Self {
            installed,
            validators,
            headers,
            secrets: kept,
        })
    }

    pub async fn call(
        &self,
        gw: &Gateway,
        method: &str,
        params: Value,
        person: &[(HeaderName, HeaderValue)],
    ) -> Result<Value, UpstreamError> {
        match method {
            "tools/list" => Ok(json!({
                "tools": self.installed.operations().map(Operation::listing).collect::<Vec<_>>()
            })),
            "tools/call" => self.call_tool(gw, &params, person).await,
            other => Err(UpstreamError::Rpc {
                code: -32601,
                message: format!(
                    "a catalog adapter answers tools/list and tools/call, not {other}"
                ),
                data: None,
            }),
        }
    }

    async fn call_tool(
        &self,
        gw: &Gateway,
        params: &Value,
        person: &[(HeaderName, HeaderValue)],
    ) -> Result<Value, UpstreamError> {
        let name = params["name"].as_str().unwrap_or_default();
        let (Some(op), Some(validator)) = (
            self.installed.operations().find(|o| o.name == name),
            self.validators.get(name),
        ) else {
            return Err(UpstreamError::Rpc {
                code: -32602,
                message: format!("unknown tool {name}"),
                data: None,
            });
        };
        let arguments = match &params["arguments"] {
            Value::Null => json!({}),
            a => a.clone(),
        };
        let wrong = adapter::violations(validator, &arguments);
        if !wrong.is_empty() {
            return Ok(failed(format!(
                "the arguments do not fit {name}'s schema: {wrong}"
            )));
        }
        let args = arguments.as_object().cloned().unwrap_or_default();
        let request = op
            .request(self.installed.base(), &args)
            .map_err(UpstreamError::Transport)?;
        let method = reqwest::Method::from_bytes(request.method.as_bytes())
            .map_err(|e| UpstreamError::Transport(e.to_string()))?;
        // An IP-literal host is seen by no resolver: the egress policy is checked here.
        portcullis_shared::egress::check_url(&request.url, gw.config.allow_private_targets)
            .map_err(|e| UpstreamError::Transport(format!("{}: {e}", self.installed.slug)))?;
        let mut builder = gw
            .http()
            .request(method, request.url)
            .timeout(CALL_TIMEOUT)
            .header(http::header::ACCEPT, "application/json");
        for (name, value) in self.headers.iter().chain(person) {
            builder = builder.header(name, value);
        }
        if let Some(body) = &request.body {
            builder = builder.json(body);
        }
        let response = builder.send().await.map_err(|e| {
            UpstreamError::Transport(format!("{}: {}", self.installed.slug, e.without_url()))
        })?;
        let status = response.status().as_u16();
        let body = read_capped(response).await?;
        let answer: Value = serde_json::from_slice(&body).unwrap_or_else(|_| {
            let text: String = String::from_utf8_lossy(&body).chars().take(2000).collect();
            json!({"message": text})
        });
        Ok(match op.outcome(status, &answer) {
            Ok(structured) => json!({
                "content": [{"type": "text", "text": structured.to_string()}],
                "structuredContent": structured,
            }),
            Err(message) => failed(self.scrub(message, person)),
        })
    }

    /// The message without the connection's or the person's credential in it.
    fn scrub(&self, mut message: String, person: &[(HeaderName, HeaderValue)]) -> String {
        let theirs = person
            .iter()
            .filter_map(|(_, v)| v.to_str().ok())
            .flat_map(|v| [v.to_string(), v.rsplit(' ').next().unwrap_or(v).to_string()]);
        for s in self
            .secrets
            .iter()
            .cloned()
            .chain(theirs)
            .filter(|s| s.len() >= 8)
        {
            message = message.replace(s.as_str(), "[redacted]");
        }
        message
    }
}

/// Largest answer read from a service.
const MAX_ANSWER_BYTES: usize = 8 * 1024 * 1024;

/// The answer's body, refused past [`MAX_ANSWER_BYTES`].
async fn read_capped(mut response: reqwest::Response) -> Result<Vec<u8>, UpstreamError> {
    let mut body = Vec::new();
    while let Some(chunk) = response
        .chunk()
        .await
        .map_err(|e| UpstreamError::Transport(e.without_url().to_string()))?
    {
        if body.len() + chunk.len() > MAX_ANSWER_BYTES {
            return Err(UpstreamError::Transport(format!(
                "the service answered more than {MAX_ANSWER_BYTES} bytes"
            )));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// A tool result the service (or the arguments) made fail.
fn failed(message: String) -> Value {
    json!({"content": [{"type": "text", "text": message}], "isError": true})
}

/// A session over a compiled adapter (no handshake: each call is one HTTP request), with the
/// person's credential headers on a per-user connection.
pub struct RestSession {
    pub adapter: Arc<RestAdapter>,
    pub person: Vec<(HeaderName, HeaderValue)>,
}
