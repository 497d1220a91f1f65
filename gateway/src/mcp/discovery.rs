//! Discovery: the gateway lists each shared tool connection's operations when it starts and
//! when the connection changes, and reports them to the control plane's catalog
//! (`SyncService/ReportTools`). Runs on the background runtime, never on a request.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use portcullis_shared::api::tools::{DiscoveredTool, ReportToolsRequest};
use serde_json::Value;

use crate::snapshot::{Compiled, ToolEntry, ToolTransport};
use crate::Gateway;

async fn report(gw: &Gateway, tool: &ToolEntry, tools: &[Value]) -> Result<(), String> {
    let url = format!(
        "{}/svc.sync.v1.SyncService/ReportTools",
        gw.config.control_plane_url.trim_end_matches('/')
    );
    let body = ReportToolsRequest {
        workspace_id: None,
        connection_id: tool.id.clone(),
        tools: DiscoveredTool::from_listed(tools),
    };
    let response = gw
        .control_http()
        .post(url)
        .bearer_auth(&gw.config.token)
        .json(&body)
        .timeout(Duration::from_secs(30))
        .send()
        .await
        .map_err(|_| "the control plane is unreachable".to_string())?;
    if !response.status().is_success() {
        return Err(format!("the control plane answered {}", response.status()));
    }
    Ok(())
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
pub fn discover_changed(gw: &Arc<Gateway>, snap: &Arc<Compiled>) {
    let attached: HashSet<&str> = snap
        .gateways
        .values()
        .flat_map(|g| g.tool_connections.iter().map(|t| t.id.as_str()))
        .collect();
    let todo: Vec<Arc<ToolEntry>> = {
        let mut reported = gw.reported.lock().unwrap_or_else(|e| e.into_inner());
        let todo: Vec<Arc<ToolEntry>> = snap
            .tools
            .values()
            .filter(|t| t.unavailable.is_none() && !t.per_user)
            .filter(|t| {
                !matches!(t.transport, ToolTransport::Stdio { .. })
                    || attached.contains(t.id.as_str())
            })
            .filter(|t| !matches!(&t.transport, ToolTransport::Http { actas_headers, .. } if !actas_headers.is_empty()))
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
