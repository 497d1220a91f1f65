//! Discovery: the gateway lists each shared tool connection's operations when it starts and
//! when the connection changes, and reports them to the control plane's catalog
//! (`SyncService/ReportTools`), on the background runtime. A connection only a caller can
//! list — per-user, or forwarding the caller's act-as identity ([`by_caller`]) — is listed
//! with that caller's credential and identity: by the lists people make, and by a call for an
//! operation the snapshot's catalog does not have yet ([`OnCall`]).

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use portcullis_shared::api::tools::{
    CatalogEntry, DiscoveredTool, ReportToolsRequest, ReportToolsResponse, ToolStatus,
};
use serde_json::Value;

use super::table::{GatewayTools, ToolEntry, ToolTransport, ToolsByName};
use crate::Gateway;

async fn report(
    gw: &Gateway,
    tool: &ToolEntry,
    tools: &[Value],
) -> Result<ReportToolsResponse, String> {
    let request = ReportToolsRequest {
        workspace_id: None,
        connection_id: tool.id.clone(),
        tools: DiscoveredTool::from_listed(tools),
    };
    gw.control
        .report_tools(&request)
        .await
        .map_err(|e| e.to_string())
}

/// Lists one connection upstream and reports it.
async fn discover_one(gw: &Arc<Gateway>, tool: &Arc<ToolEntry>) -> Result<usize, String> {
    let session = gw
        .upstreams
        .session(gw, tool)
        .await
        .map_err(|e| e.to_string())?;
    let tools = session
        .list_all_tools(gw, &[])
        .await
        .map_err(|e| e.to_string())?;
    report(gw, tool, &tools).await?;
    Ok(tools.len())
}

/// Discovers every shared connection whose configuration this process has not reported yet.
/// Connections that forward act-as identities are discovered on the first list that has one.
/// A stdio connection's command runs only once some gateway offers it.
pub fn discover_changed<'a>(
    gw: &Arc<Gateway>,
    tools: &ToolsByName,
    offered: impl Iterator<Item = &'a GatewayTools>,
) {
    let attached: HashSet<&str> = offered
        .flat_map(|g| g.connections.iter().map(|t| t.id.as_str()))
        .collect();
    let todo: Vec<Arc<ToolEntry>> = {
        let mut reported = gw.reported.lock().unwrap_or_else(|e| e.into_inner());
        let todo: Vec<Arc<ToolEntry>> = tools
            .values()
            .filter(|t| t.unavailable.is_none() && !t.per_user)
            .filter(|t| {
                !matches!(t.transport, ToolTransport::Stdio { .. })
                    || attached.contains(t.id.as_str())
            })
            .filter(|t| !forwards_actas(t))
            .filter(|t| reported.get(&t.id) != Some(&t.fingerprint))
            .cloned()
            .collect();
        // Claimed now, so a snapshot arriving meanwhile does not start the same work again.
        for t in &todo {
            reported.insert(t.id.clone(), t.fingerprint.clone());
        }
        todo
    };
    if todo.is_empty() {
        return;
    }
    let gw = gw.clone();
    gw.background.clone().spawn(async move {
        for tool in todo {
            match discover_one(&gw, &tool).await {
                Ok(count) => {
                    tracing::info!(tool = %tool.name, operations = count, "Tool operations discovered and reported.");
                }
                Err(e) => {
                    gw.reported.lock().unwrap_or_else(|e| e.into_inner()).remove(&tool.id);
                    tracing::warn!(tool = %tool.name, error = %e, "Tool discovery failed; retrying on the next snapshot.");
                }
            }
        }
    });
}

/// Reports operations a list found that the catalog does not have yet.
pub fn report_later(gw: &Arc<Gateway>, tool: &Arc<ToolEntry>, tools: Vec<Value>) {
    let (gw, tool) = (gw.clone(), tool.clone());
    gw.background.clone().spawn(async move {
        if let Err(e) = report(&gw, &tool, &tools).await {
            tracing::warn!(tool = %tool.name, error = %e, "Could not report newly seen operations.");
        }
    });
}

/// A status from the catalog: the operation's status and its administrator's message.
pub type Status = (ToolStatus, Option<String>);

/// How long a connection's operations discovered on a call answer calls before the upstream
/// is asked again (the snapshot's catalog has them well before).
const FOUND_TTL: Duration = Duration::from_secs(30);

/// What one discovery on a call found: its configuration, when, and each
/// operation's catalog status.
struct Found {
    fingerprint: String,
    at: Instant,
    statuses: Arc<HashMap<String, Status>>,
}

/// Whether a connection forwards the caller's act-as identity upstream.
fn forwards_actas(tool: &ToolEntry) -> bool {
    matches!(&tool.transport, ToolTransport::Http { actas_headers, .. } if !actas_headers.is_empty())
}

/// Whether only a caller can list the connection: it is per-user, or forwards the caller's
/// act-as identity. Such a connection is discovered by callers' lists and calls.
pub fn by_caller(tool: &ToolEntry) -> bool {
    tool.per_user || forwards_actas(tool)
}

/// Connections discovered for calls the snapshot's catalog cannot answer yet ([`by_caller`]
/// ones): one discovery at a time per connection, shared by every call waiting on it.
#[derive(Default)]
pub struct OnCall {
    connections: Mutex<HashMap<String, Arc<tokio::sync::Mutex<Option<Found>>>>>,
}

impl OnCall {
    /// The catalog status of the connection's operations, discovered with this caller's
    /// session (and act-as headers) unless a discovery made meanwhile still answers. The
    /// operations are recorded in the control plane's catalog before they are answered for;
    /// when it cannot be reached, nothing is.
    pub async fn statuses(
        &self,
        gw: &Gateway,
        tool: &ToolEntry,
        session: &super::upstream::Session,
        extra: &[(http::HeaderName, http::HeaderValue)],
    ) -> Result<Arc<HashMap<String, Status>>, String> {
        let slot = {
            let mut map = self.connections.lock().unwrap_or_else(|e| e.into_inner());
            map.retain(|_, slot| in_use_or_fresh(slot));
            map.entry(tool.id.clone()).or_default().clone()
        };
        let mut found = slot.lock().await;
        if let Some(f) = found.as_ref().filter(|f| f.answers(tool)) {
            return Ok(f.statuses.clone());
        }
        let listed = session
            .list_all_tools(gw, extra)
            .await
            .map_err(|e| format!("{}: {e}", tool.name))?;
        let reported = report(gw, tool, &listed).await?;
        let statuses = Arc::new(by_name(reported.catalog));
        *found = Some(Found {
            fingerprint: tool.fingerprint.clone(),
            at: Instant::now(),
            statuses: statuses.clone(),
        });
        // Lists made before now left these operations out.
        gw.tools_cache.clear();
        Ok(statuses)
    }

    /// An operation's status from a discovery that still answers, without waiting for one
    /// in progress: how a list shows what a call just found, before the snapshot has it.
    pub fn peek(&self, tool: &ToolEntry, name: &str) -> Option<Status> {
        let slot = self
            .connections
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&tool.id)?
            .clone();
        let found = slot.try_lock().ok()?;
        let found = found.as_ref().filter(|f| f.answers(tool))?;
        found.statuses.get(name).cloned()
    }
}

impl Found {
    /// Whether this discovery still answers for the connection as now configured.
    fn answers(&self, tool: &ToolEntry) -> bool {
        self.at.elapsed() < FOUND_TTL && self.fingerprint == tool.fingerprint
    }
}

/// Whether a connection's entry is worth keeping: a call holds it, or what it found is still
/// young.
fn in_use_or_fresh(slot: &Arc<tokio::sync::Mutex<Option<Found>>>) -> bool {
    Arc::strong_count(slot) > 1
        || slot.try_lock().map_or(true, |f| {
            f.as_ref().is_some_and(|f| f.at.elapsed() < FOUND_TTL)
        })
}

fn by_name(catalog: Vec<CatalogEntry>) -> HashMap<String, Status> {
    catalog
        .into_iter()
        .map(|c| (c.name, (c.status, c.message)))
        .collect()
}
