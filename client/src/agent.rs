//! The agent client: what an agent calls a gateway with. One gateway URL and one agent key (or
//! exchanged token); MCP `tools/list` (cached for the spec's 30 s) and `tools/call`, OpenAI
//! chat completions and Anthropic messages; every call stamped with an activity id (the one
//! set, or a fresh UUIDv4) so its audit events can be found with [`wait_for_audit`]. Refusals
//! arrive as [`ClientError::Gateway`] with the spec's class in [`GatewayErrorKind`].
//!
//! [`GatewayErrorKind`]: crate::error::GatewayErrorKind

pub(crate) mod refusal;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use portcullis_wire::audit::{AuditEventV1, QueryEventsRequest};
use serde::Deserialize;
use serde_json::{json, Value};

use crate::audit::WaitOptions;
use crate::defaults::{REQUEST_TIMEOUT, TOOLS_LIST_CACHE_TTL};
use crate::error::{ClientError, GatewayError, GatewayErrorKind};
use crate::AdminClient;
use refusal::CallIds;

/// The header the gateway reads the caller's activity id from (and echoes back).
pub const ACTIVITY_HEADER: &str = "x-svc-activity-id";

/// A tool as the gateway lists it (`connection/tool`).
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct McpTool {
    pub name: String,
    #[serde(default)]
    pub description: Option<String>,
    #[serde(default, rename = "inputSchema")]
    pub input_schema: Value,
    #[serde(default, rename = "_meta")]
    pub meta: Option<Value>,
}

/// A tool's result (a result with `isError` is [`GatewayErrorKind::ToolExecution`]).
#[derive(Debug, Clone, PartialEq)]
pub struct ToolResult {
    pub content: Vec<Value>,
    pub structured_content: Option<Value>,
    pub activity_id: String,
    pub request_id: Option<String>,
}

/// A model's answer, as the API called shapes it.
#[derive(Debug, Clone, PartialEq)]
pub struct Completion {
    pub body: Value,
    pub activity_id: String,
    pub request_id: Option<String>,
}

/// A `tools/list` answer and when it was fetched.
type ListedTools = (Instant, Vec<McpTool>);

#[derive(Clone)]
pub struct AgentClient {
    http: reqwest::Client,
    url: String,
    gateway_id: String,
    key: String,
    activity_id: Option<String>,
    act_as: Option<String>,
    tools_ttl: Duration,
    tools: Arc<Mutex<Option<ListedTools>>>,
    next_id: Arc<AtomicU64>,
}

impl std::fmt::Debug for AgentClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AgentClient")
            .field("url", &self.url)
            .finish_non_exhaustive()
    }
}

/// A fresh activity id (UUIDv4).
pub fn new_activity_id() -> String {
    uuid::Uuid::new_v4().to_string()
}

/// A provider's API is callable only in a build with its feature: without it, the call is
/// refused before anything is sent.
fn provider_enabled(provider: &'static str, enabled: bool) -> Result<(), ClientError> {
    match enabled {
        true => Ok(()),
        false => Err(ClientError::MissingProviderDependency { provider }),
    }
}

/// The gateway id a gateway URL (`{base}/gateways/{gateway_id}`) names, or why it names none.
pub fn gateway_id_of(gateway_url: &str) -> Result<String, ClientError> {
    let bad = |message: &str| ClientError::GatewayConfiguration {
        gateway_url: gateway_url.to_string(),
        message: message.to_string(),
    };
    if gateway_url.trim().is_empty() {
        return Err(bad(
            "missing: give the gateway URL the agent's endpoints list",
        ));
    }
    let url = url::Url::parse(gateway_url).map_err(|e| bad(&e.to_string()))?;
    if !matches!(url.scheme(), "http" | "https") || url.query().is_some() {
        return Err(bad("must be an http(s) URL without a query"));
    }
    let segments: Vec<&str> = url
        .path_segments()
        .map(|s| s.filter(|p| !p.is_empty()).collect())
        .unwrap_or_default();
    if segments.is_empty() {
        return Err(bad(
            "bare: it needs the gateway's path, /gateways/{gateway_id}",
        ));
    }
    let at = segments.iter().rposition(|s| *s == "gateways");
    match at.map(|i| (segments.get(i + 1), &segments[i + 1..])) {
        Some((Some(id), [_])) => Ok((*id).to_string()),
        Some((Some(id), [_, "mcp" | "v1", ..])) => Err(bad(&format!(
            "ends in a protocol path: give the gateway URL (…/gateways/{id}); the client adds /mcp and /v1"
        ))),
        _ => Err(bad("not scoped to a gateway: it must end in /gateways/{gateway_id}")),
    }
}

impl AgentClient {
    /// A client of the gateway at `gateway_url` (`{base}/gateways/{gateway_id}`, as the
    /// agent's endpoints give it), authenticated by an agent API key or exchanged token.
    pub fn new(gateway_url: &str, agent_key: &str) -> Result<Self, ClientError> {
        let gateway_id = gateway_id_of(gateway_url)?;
        if agent_key.trim().is_empty() {
            return Err(ClientError::Configuration("the agent key is empty".into()));
        }
        let http = reqwest::Client::builder()
            .timeout(REQUEST_TIMEOUT)
            .build()
            .map_err(|e| ClientError::Configuration(e.to_string()))?;
        Ok(Self {
            http,
            url: gateway_url.trim_end_matches('/').to_string(),
            gateway_id,
            key: agent_key.trim().to_string(),
            activity_id: None,
            act_as: None,
            tools_ttl: TOOLS_LIST_CACHE_TTL,
            tools: Arc::default(),
            next_id: Arc::new(AtomicU64::new(1)),
        })
    }

    /// [`AgentClient::new`] for the gateway selected elsewhere (an exchange, a config file):
    /// a URL naming another gateway is a configuration error.
    pub fn for_gateway(
        gateway_url: &str,
        agent_key: &str,
        gateway_id: &str,
    ) -> Result<Self, ClientError> {
        let client = Self::new(gateway_url, agent_key)?;
        if client.gateway_id != gateway_id {
            return Err(ClientError::GatewayConfiguration {
                gateway_url: gateway_url.to_string(),
                message: format!(
                    "names gateway {}, not the selected {gateway_id}",
                    client.gateway_id
                ),
            });
        }
        Ok(client)
    }

    pub fn gateway_id(&self) -> &str {
        &self.gateway_id
    }

    /// The same client, stamping every call with this activity id.
    pub fn with_activity_id(&self, activity_id: &str) -> Self {
        Self {
            activity_id: Some(activity_id.to_string()),
            ..self.clone()
        }
    }

    /// The same client, acting for a person: `header` is the act-as header value
    /// ([`crate::act_as`] builds it).
    pub fn with_act_as(&self, header: &str) -> Self {
        Self {
            act_as: Some(header.to_string()),
            tools: Arc::default(),
            ..self.clone()
        }
    }

    /// How long a `tools/list` answer is reused (30 s by default; zero never reuses).
    pub fn with_tools_cache_ttl(mut self, ttl: Duration) -> Self {
        self.tools_ttl = ttl;
        self
    }

    /// Every tool this agent may use here (all pages), from the cache while it is fresh.
    pub async fn list_tools(&self) -> Result<Vec<McpTool>, ClientError> {
        if let Some((at, tools)) = self
            .tools
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
        {
            if at.elapsed() < self.tools_ttl {
                return Ok(tools.clone());
            }
        }
        let mut tools = Vec::new();
        let mut cursor: Option<String> = None;
        let mut advised = false;
        for pages in 1.. {
            if pages > 100 {
                return Err(self.decode(
                    "tools/list",
                    serde::de::Error::custom("the list did not end after 100 pages"),
                ));
            }
            let params = cursor
                .as_ref()
                .map_or_else(|| json!({}), |c| json!({"cursor": c}));
            let (page, _) = self.rpc("tools/list", params, "").await?;
            let listed: Vec<McpTool> = serde_json::from_value(page["tools"].clone())
                .map_err(|e| self.decode("tools/list", e))?;
            tools.extend(listed);
            // A list that asks for credentials is not kept: the next one may not need to.
            advised |= page["_meta"].get("auth_required").is_some();
            cursor = page["nextCursor"].as_str().map(str::to_string);
            if cursor.is_none() {
                break;
            }
        }
        if !advised {
            *self.tools.lock().unwrap_or_else(|e| e.into_inner()) =
                Some((Instant::now(), tools.clone()));
        }
        Ok(tools)
    }

    /// Drops the cached `tools/list` answer.
    pub fn forget_tools(&self) {
        *self.tools.lock().unwrap_or_else(|e| e.into_inner()) = None;
    }

    /// Calls `connection/tool`. A result the tool marked `isError` is an error of class
    /// tool execution, carrying its content.
    pub async fn call_tool(&self, name: &str, arguments: Value) -> Result<ToolResult, ClientError> {
        let params = json!({"name": name, "arguments": arguments});
        let (result, call) = self.rpc("tools/call", params, name).await?;
        let content = result["content"].as_array().cloned().unwrap_or_default();
        let structured_content = result
            .get("structuredContent")
            .filter(|v| !v.is_null())
            .cloned();
        if result["isError"] == Value::Bool(true) {
            let message = content
                .iter()
                .find_map(|c| c["text"].as_str())
                .unwrap_or("the tool reported an error")
                .to_string();
            return Err(self.refused(
                GatewayErrorKind::ToolExecution {
                    tool: name.to_string(),
                    content,
                    structured_content,
                },
                message,
                200,
                call,
            ));
        }
        Ok(ToolResult {
            content,
            structured_content,
            activity_id: call.activity_id.unwrap_or_default(),
            request_id: call.request_id,
        })
    }

    /// The models and pools this agent may call here (`GET …/v1/models`), by name.
    pub async fn list_models(&self) -> Result<Vec<String>, ClientError> {
        let (status, reply, call) = self
            .send(reqwest::Method::GET, "/v1/models", None, "")
            .await?;
        if !(200..300).contains(&status) {
            return Err(ClientError::Gateway(Box::new(refusal::classify(
                status, &reply, call,
            ))));
        }
        let listed = reply["data"]
            .as_array()
            .ok_or_else(|| ClientError::Decode {
                path: format!("{}/v1/models", self.url),
                message: "the reply has no data list".into(),
            })?;
        Ok(listed
            .iter()
            .filter_map(|m| m["id"].as_str().map(str::to_string))
            .collect())
    }

    /// `POST …/v1/chat/completions` (OpenAI's shape; `model` names a model or pool). Needs
    /// the `openai` feature (on by default).
    pub async fn chat_completions(&self, body: &Value) -> Result<Completion, ClientError> {
        provider_enabled("openai", cfg!(feature = "openai"))?;
        self.model_call("/v1/chat/completions", body).await
    }

    /// `POST …/v1/messages` (Anthropic's shape; `max_tokens` is required). Needs the
    /// `anthropic` feature (on by default).
    pub async fn messages(&self, body: &Value) -> Result<Completion, ClientError> {
        provider_enabled("anthropic", cfg!(feature = "anthropic"))?;
        self.model_call("/v1/messages", body).await
    }

    async fn model_call(&self, path: &str, body: &Value) -> Result<Completion, ClientError> {
        let model = body["model"].as_str().unwrap_or_default();
        let (status, reply, call) = self.post(path, body, model).await?;
        if !(200..300).contains(&status) {
            return Err(ClientError::Gateway(Box::new(refusal::classify(
                status, &reply, call,
            ))));
        }
        Ok(Completion {
            body: reply,
            activity_id: call.activity_id.unwrap_or_default(),
            request_id: call.request_id,
        })
    }

    /// One JSON-RPC request to `…/mcp`: its result, or the refusal in the spec's classes.
    async fn rpc(
        &self,
        method: &str,
        params: Value,
        target: &str,
    ) -> Result<(Value, CallIds), ClientError> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let message = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        let (status, reply, call) = self.post("/mcp", &message, target).await?;
        if reply.get("error").is_some_and(|e| !e.is_null()) || !(200..300).contains(&status) {
            return Err(ClientError::Gateway(Box::new(refusal::classify(
                status, &reply, call,
            ))));
        }
        Ok((reply["result"].clone(), call))
    }

    async fn post(
        &self,
        path: &str,
        body: &Value,
        target: &str,
    ) -> Result<(u16, Value, CallIds), ClientError> {
        self.send(reqwest::Method::POST, path, Some(body), target)
            .await
    }

    /// One request to `{gateway_url}{path}`: its status, JSON reply and the call's ids.
    async fn send(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<&Value>,
        target: &str,
    ) -> Result<(u16, Value, CallIds), ClientError> {
        let activity_id = self.activity_id.clone().unwrap_or_else(new_activity_id);
        let mut request = self
            .http
            .request(method, format!("{}{path}", self.url))
            .bearer_auth(&self.key)
            .header("accept", "application/json, text/event-stream")
            .header(ACTIVITY_HEADER, &activity_id);
        if let Some(body) = body {
            request = request.json(body);
        }
        if let Some(header) = &self.act_as {
            request = request.header(crate::act_as::HEADER, header);
        }
        let mut call = CallIds {
            activity_id: Some(activity_id),
            gateway_id: Some(self.gateway_id.clone()),
            request_id: None,
            target: target.to_string(),
            retry_after: None,
        };
        let response = match request.send().await {
            Ok(r) => r,
            Err(e) => {
                let message = format!("could not reach {}: {e}", self.url);
                return Err(self.refused(GatewayErrorKind::Unavailable, message, 0, call));
            }
        };
        let status = response.status().as_u16();
        let header = |name: &str| {
            response
                .headers()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::to_string)
        };
        call.request_id = header("x-request-id");
        call.retry_after = header("retry-after").and_then(|v| v.parse().ok());
        let text = response.text().await.unwrap_or_default();
        let reply =
            serde_json::from_str(&text).unwrap_or_else(|_| json!({"error": {"message": text}}));
        Ok((status, reply, call))
    }

    fn refused(
        &self,
        kind: GatewayErrorKind,
        message: String,
        status: u16,
        call: CallIds,
    ) -> ClientError {
        ClientError::Gateway(Box::new(GatewayError {
            kind,
            message,
            status_code: status,
            request_id: call.request_id,
            activity_id: call.activity_id,
            gateway_id: call.gateway_id,
        }))
    }

    fn decode(&self, what: &str, e: serde_json::Error) -> ClientError {
        ClientError::Decode {
            path: format!("{}/mcp {what}", self.url),
            message: e.to_string(),
        }
    }
}

/// Waits (the spec's 30 s, polling every 0.5 s) for an audit event of `event_type` recorded
/// under `activity_id`, as the control plane stores it.
pub async fn wait_for_audit(
    admin: &AdminClient,
    activity_id: &str,
    event_type: &str,
    options: WaitOptions,
) -> Result<AuditEventV1, ClientError> {
    let filter = QueryEventsRequest {
        activity_id: Some(activity_id.to_string()),
        event_types: vec![event_type.to_string()],
        ..Default::default()
    };
    admin.wait_for_event(&filter, options).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gateway_urls_are_checked() {
        let id = |u: &str| gateway_id_of(u);
        assert_eq!(id("http://gw:8080/gateways/g1").unwrap(), "g1");
        assert_eq!(id("https://gw/base/gateways/g1/").unwrap(), "g1");
        for (url, says) in [
            ("", "missing"),
            ("http://gw:8080", "bare"),
            ("http://gw/gateways/g1/mcp", "protocol path"),
            ("http://gw/gateways/g1/v1", "protocol path"),
            ("http://gw/gateways/g1/v1/chat/completions", "protocol path"),
            ("http://gw/other/g1", "not scoped"),
            ("ftp://gw/gateways/g1", "http(s)"),
        ] {
            let err = id(url).unwrap_err();
            assert!(
                matches!(&err, ClientError::GatewayConfiguration { gateway_url, message } if gateway_url == url && message.contains(says)),
                "{url}: {err}"
            );
        }
        let err = AgentClient::for_gateway("http://gw/gateways/g1", "k", "g2").unwrap_err();
        assert!(err.to_string().contains("not the selected g2"), "{err}");
        assert!(AgentClient::new("http://gw/gateways/g1", " ").is_err());
    }
}

#[cfg(test)]
mod provider_features {
    use super::*;

    #[test]
    fn a_provider_without_its_feature_is_a_missing_dependency() {
        assert!(provider_enabled("openai", true).is_ok());
        let err = provider_enabled("anthropic", false).unwrap_err();
        assert!(
            matches!(
                err,
                ClientError::MissingProviderDependency {
                    provider: "anthropic"
                }
            ),
            "{err}"
        );
    }

    /// Run by `scripts/test` in a build without the provider features.
    #[cfg(not(any(feature = "openai", feature = "anthropic")))]
    #[tokio::test]
    async fn model_calls_are_refused_before_anything_is_sent() {
        let client = AgentClient::new("http://127.0.0.1:9/gateways/g1", "svc_k").unwrap();
        let body = json!({"model": "m", "max_tokens": 8, "messages": []});
        for (err, provider) in [
            (client.chat_completions(&body).await.unwrap_err(), "openai"),
            (client.messages(&body).await.unwrap_err(), "anthropic"),
        ] {
            assert!(
                matches!(&err, ClientError::MissingProviderDependency { provider: p } if *p == provider),
                "{err}"
            );
        }
    }
}
