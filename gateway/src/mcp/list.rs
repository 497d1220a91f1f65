//! `tools/list`: what this agent may use through this gateway, cached per caller.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use http::{HeaderName, HeaderValue};
use portcullis_shared::api::tools::ToolStatus;
use portcullis_shared::audit::catalog::ToolList;
use portcullis_shared::audit::AuditEvent;
use portcullis_shared::policy::Action;
use serde_json::{json, Value};

use super::discovery;
use super::table::{GatewayTools, ToolEntry, ToolTransport};
use crate::error::RpcError;
use crate::request::RequestCtx;
use crate::{audit, authz, Gateway};

/// How long a caller's tool list is reused (the spec's client default).
pub const TTL: Duration = Duration::from_secs(30);
const PAGE: usize = 100;

struct Cached {
    revision: u64,
    at: Instant,
    tools: Arc<Vec<Value>>,
}

/// Tool lists by gateway, agent, workspace and act-as identity. A new snapshot revision makes
/// every entry stale.
#[derive(Default)]
pub struct ToolsCache {
    entries: Mutex<HashMap<String, Cached>>,
}

impl ToolsCache {
    fn get(&self, key: &str, revision: u64) -> Option<Arc<Vec<Value>>> {
        let map = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        map.get(key)
            .filter(|c| c.revision == revision && c.at.elapsed() < TTL)
            .map(|c| c.tools.clone())
    }

    /// Forgets every list (operations were found that they left out).
    pub fn clear(&self) {
        self.entries
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clear();
    }

    fn put(&self, key: String, revision: u64, tools: Arc<Vec<Value>>) {
        let mut map = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        map.retain(|_, c| c.revision == revision && c.at.elapsed() < TTL);
        map.insert(
            key,
            Cached {
                revision,
                at: Instant::now(),
                tools,
            },
        );
    }
}

/// The act-as headers a connection forwards; fails closed when it has some and the caller
/// presented no assertion.
pub fn actas_headers(
    tool: &ToolEntry,
    rc: &RequestCtx<'_>,
) -> Result<Vec<(HeaderName, HeaderValue)>, String> {
    let ToolTransport::Http { actas_headers, .. } = &tool.transport else {
        return Ok(Vec::new());
    };
    if actas_headers.is_empty() {
        return Ok(Vec::new());
    }
    let raw = rc.act_as_raw.as_deref().ok_or_else(|| {
        format!(
            "tool '{}' forwards the caller's act-as identity, and this request carries none",
            tool.name
        )
    })?;
    let mut value = HeaderValue::from_str(raw)
        .map_err(|_| "the act-as assertion is not a valid header value".to_string())?;
    value.set_sensitive(true);
    Ok(actas_headers
        .iter()
        .map(|h| (h.clone(), value.clone()))
        .collect())
}

fn cache_key(rc: &RequestCtx<'_>) -> String {
    let a = rc.context.typed().act_as.clone();
    format!(
        "{}|{}|{}|{}|{}|{}|{}",
        rc.gateway.id,
        rc.agent.id,
        rc.workspace_id,
        a.method,
        a.sub,
        a.email,
        a.groups.join(",")
    )
}

pub async fn tools_list(
    gw: &Arc<Gateway>,
    rc: &RequestCtx<'_>,
    offered: &GatewayTools,
    params: &Value,
) -> Result<Value, RpcError> {
    let offset = match params.get("cursor").and_then(Value::as_str) {
        None => 0,
        Some(c) => c
            .parse::<usize>()
            .map_err(|_| RpcError::new(-32602, "invalid cursor"))?,
    };
    let key = cache_key(rc);
    let mut advisories = Vec::new();
    let tools = match gw.tools_cache.get(&key, rc.revision) {
        Some(tools) => tools,
        None => {
            // Only a fresh list is audited; cache hits are not (the spec's rule).
            let started = Instant::now();
            let found = discover(gw, rc, offered).await;
            let tools = Arc::new(found.tools);
            // A list that asks for credentials is not kept: the next one may not need to.
            if found.advisories.is_empty() {
                gw.tools_cache.put(key, rc.revision, tools.clone());
            }
            advisories = found.advisories;
            if gw.audit.enabled() {
                gw.audit
                    .emit(list_event(rc, tools.len(), found.failed, started.elapsed()));
            }
            tools
        }
    };
    if offset > tools.len() {
        return Err(RpcError::new(-32602, "invalid cursor"));
    }
    let page: Vec<Value> = tools.iter().skip(offset).take(PAGE).cloned().collect();
    let mut result = json!({"tools": page});
    if !advisories.is_empty() {
        result["_meta"] = json!({"auth_required": advisories});
    }
    if offset + PAGE < tools.len() {
        result["nextCursor"] = json!((offset + PAGE).to_string());
    }
    Ok(result)
}

/// Lists every attached connection upstream and keeps what this agent may discover. A
/// connection that fails is left out (and logged); operations not yet in the catalog are
/// reported for it and left out until the next snapshot has them.
/// What one fresh list found: the tools, the connections that failed, and the per-user
/// connections the caller has yet to provide a credential for.
struct Found {
    tools: Vec<Value>,
    failed: Vec<String>,
    advisories: Vec<Value>,
}

/// On a per-user connection, whose credential lists it.
enum Person {
    As(String, crate::peruser::Headers),
    /// No verified person: nothing of it is listed.
    Skip,
    /// The caller has no credential yet: where to provide it.
    Advise(Value),
    Failed,
}

async fn person(gw: &Gateway, rc: &RequestCtx<'_>, tool: &ToolEntry) -> Person {
    let Ok(subject) = crate::peruser::subject(rc, &tool.name) else {
        return Person::Skip;
    };
    let owner = portcullis_shared::snapshot::CredentialOwner::Tool;
    match gw
        .credentials
        .lookup(gw, owner, &tool.id, (&subject, &rc.agent.id))
        .await
    {
        Ok(Ok(headers)) => Person::As(subject, headers),
        Ok(Err(m)) => Person::Advise(json!({
            "connection_name": m.connection_name,
            "provision_url": m.provision_url,
            "expires_at": m.expires_at,
        })),
        Err(e) => {
            tracing::warn!(request_id = rc.request_id, tool = %tool.name, error = %e, "Could not fetch a person's credential.");
            Person::Failed
        }
    }
}

async fn discover(gw: &Arc<Gateway>, rc: &RequestCtx<'_>, offered: &GatewayTools) -> Found {
    let mut out = Vec::new();
    let mut failed = Vec::new();
    let mut advisories = Vec::new();
    for tool in &offered.connections {
        let extra = match actas_headers(tool, rc) {
            Ok(h) => h,
            Err(why) => {
                tracing::debug!(request_id = rc.request_id, tool = %tool.name, why, "Tool left out of the list.");
                continue;
            }
        };
        let person = match tool.per_user {
            false => None,
            true => match person(gw, rc, tool).await {
                Person::As(sub, headers) => Some((sub, headers)),
                Person::Skip => continue,
                Person::Advise(advice) => {
                    advisories.push(advice);
                    continue;
                }
                Person::Failed => {
                    failed.push(tool.name.clone());
                    continue;
                }
            },
        };
        let person = person.as_ref().map(|(sub, h)| (sub.as_str(), h));
        let listed = match gw.upstreams.session_as(gw, tool, person).await {
            Ok(session) => session.list_all_tools(gw, &extra).await,
            Err(e) => Err(e),
        };
        let listed = match listed {
            Ok(list) => list,
            Err(e) => {
                tracing::warn!(request_id = rc.request_id, tool = %tool.name, error = %e, "Could not list a tool connection's operations.");
                failed.push(tool.name.clone());
                continue;
            }
        };
        let unknown = keep_discoverable(gw, rc, (offered, tool), listed, &mut out);
        if !unknown.is_empty() {
            discovery::report_later(gw, tool, unknown);
        }
    }
    Found {
        tools: out,
        failed,
        advisories,
    }
}

/// Of an upstream's list, the operations this gateway offers, the catalog does not block and
/// `mcp:discover` allows, named `connection/tool` (a deprecated one marked in `_meta`), into
/// `out`; the operations the catalog does not have yet, returned for reporting.
fn keep_discoverable(
    gw: &Gateway,
    rc: &RequestCtx<'_>,
    (offered, tool): (&GatewayTools, &Arc<ToolEntry>),
    listed: Vec<Value>,
    out: &mut Vec<Value>,
) -> Vec<Value> {
    let mut unknown = Vec::new();
    for mut t in listed {
        let Some(name) = t.get("name").and_then(Value::as_str).map(str::to_string) else {
            continue;
        };
        if !offered.offers(&tool.id, &name) {
            continue;
        }
        // What a call discovered answers until the snapshot's catalog has it.
        let cataloged = tool
            .catalog
            .get(&name)
            .cloned()
            .or_else(|| gw.discovered_on_call.peek(tool, &name));
        let (status, message) = match cataloged {
            None => {
                unknown.push(t);
                continue;
            }
            Some((ToolStatus::Blocked, _)) => continue,
            Some(found) => found,
        };
        let full = format!("{}/{name}", tool.name);
        let decision = authz::check_tool(
            &rc.rules,
            Action::McpDiscover,
            &full,
            &rc.context,
            rc.memoize,
        );
        if decision.is_err() {
            continue;
        }
        t["name"] = json!(full);
        if status == ToolStatus::Deprecated {
            let mut meta = t
                .get("_meta")
                .cloned()
                .filter(Value::is_object)
                .unwrap_or_else(|| json!({}));
            meta["portcullis/deprecated"] = json!(message.unwrap_or_else(|| "deprecated".into()));
            t["_meta"] = meta;
        }
        out.push(t);
    }
    unknown
}

fn list_event(
    rc: &RequestCtx<'_>,
    count: usize,
    failed: Vec<String>,
    latency: std::time::Duration,
) -> AuditEvent<ToolList> {
    use portcullis_shared::audit::results;
    let resource = audit::resource("gateway", &rc.gateway.id, &rc.gateway.name);
    let result = if failed.is_empty() {
        results::ALLOWED
    } else {
        results::ERROR
    };
    let payload = ToolList {
        gateway_id: rc.gateway.id.clone(),
        tools: count as u64,
        failed_connections: failed,
        latency_ms: audit::millis(latency),
    };
    let mut e = audit::event(rc, result, resource, payload);
    e.request.rpc_method = "tools/list".into();
    e
}
