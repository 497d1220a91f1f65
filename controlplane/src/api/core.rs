//! The operation core: (principal, operation, JSON body) → JSON reply or an API error, with
//! the permission check, body validation, the `mgmt.operation` audit event and the metrics
//! inside. Connect, the REST variant and the MCP admin server are front doors onto
//! [`execute`]; they only authenticate and shape requests and replies.

use std::sync::Arc;
use std::time::Instant;

use axum::body::Bytes;
use portcullis_shared::api::workspace::Permission;
use serde_json::Value;

use super::{Access, Ctx, Principal};
use crate::error::ApiResult;
use crate::App;

/// The front door a call came through, recorded in its audit event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Door {
    /// `POST /<service>/<Operation>`.
    Connect,
    /// The REST variant (`/v1/tools…`).
    Rest,
    /// The MCP admin server (`POST /mcp`), naming the `svc_*` tool that made the call.
    Mcp(&'static str),
}

impl Door {
    pub fn as_str(self) -> &'static str {
        match self {
            Door::Connect => "connect",
            Door::Rest => "rest",
            Door::Mcp(_) => "mcp",
        }
    }
}

/// One call of an operation by an authenticated principal.
pub struct Call<'a> {
    pub principal: Arc<Principal>,
    /// `<service>/<Operation>`.
    pub path: &'a str,
    pub body: Bytes,
    pub door: Door,
    pub request_id: &'a str,
    /// When the request arrived (the recorded latency includes authenticating it).
    pub started: Instant,
}

/// Runs one operation and records it (audit for changes, metrics for all).
pub async fn execute(app: &Arc<App>, call: Call<'_>) -> ApiResult<Value> {
    let started = call.started;
    let principal = call.principal.clone();
    let result = run(app, call.principal, call.path, call.body, call.request_id).await;
    if let Err(err) = &result {
        if err.is_internal() {
            tracing::error!(request_id = call.request_id, operation = %call.path, error = %err, "Operation failed.");
        }
    }
    let code = code_of(&result);
    record(
        app,
        Some(&principal),
        call.path,
        call.door,
        code,
        call.request_id,
    )
    .await;
    finish(app, call.path, code, started, call.request_id);
    result
}

/// The operation's access rule, or `unimplemented` for a path no operation has.
pub fn access(app: &App, path: &str) -> ApiResult<Access> {
    app.registry.get(path).map(|op| op.access)
}

async fn run(
    app: &Arc<App>,
    principal: Arc<Principal>,
    path: &str,
    body: Bytes,
    request_id: &str,
) -> ApiResult<Value> {
    let operation = app.registry.get(path)?;
    match (operation.access, principal.as_ref()) {
        (Access::Platform(permission), _) => principal.require(permission)?,
        // A platform key exchanging an agent's key manages that agent's keys.
        (Access::Agent, Principal::Platform(_)) => {
            principal.require(Permission::AgentKeysManage)?
        }
        (Access::Agent, Principal::Agent(_)) => {}
        (Access::Deployment, Principal::Deployment(_)) => {}
        (Access::Agent, _) => {
            principal.as_agent()?;
        }
        (Access::Deployment, _) => {
            principal.as_deployment()?;
        }
    }
    let ctx = Ctx {
        app: app.clone(),
        principal,
        request_id: request_id.into(),
    };
    (operation.call)(ctx, body).await
}

/// The Connect code of a result, as recorded.
pub fn code_of(result: &ApiResult<Value>) -> &'static str {
    match result {
        Ok(_) => "ok",
        Err(e) => e.to_connect("").code.as_str(),
    }
}

/// Whether an operation only reads (reads are not audited).
fn reads(path: &str) -> bool {
    let method = path.rsplit('/').next().unwrap_or_default();
    ["Get", "List", "Query"]
        .iter()
        .any(|r| method.starts_with(r))
}

/// Records a change made by a platform key, or an agent's own operation (exchanging its
/// key), as `mgmt.operation` with the door it came through; gateways' sync traffic and reads
/// are not audited.
pub async fn record(
    app: &Arc<App>,
    principal: Option<&Arc<Principal>>,
    path: &str,
    door: Door,
    code: &str,
    request_id: &str,
) {
    if reads(path) || !app.registry.operations.contains_key(path) {
        return;
    }
    let (workspace_id, caller) = match principal.map(Arc::as_ref) {
        Some(Principal::Platform(p)) => (
            p.workspace_id.as_str(),
            crate::audit::Caller::PlatformKey {
                id: &p.key_id,
                name: &p.key_name,
            },
        ),
        Some(Principal::Agent(a)) => (
            a.workspace_id.as_str(),
            crate::audit::Caller::Agent {
                agent_id: &a.agent_id,
                key_id: &a.key_id,
            },
        ),
        _ => return,
    };
    let mut event = crate::audit::mgmt_event(workspace_id, caller, path, code, request_id);
    event.payload.surface = Some(door.as_str().into());
    if let Door::Mcp(tool) = door {
        event.payload.tool = Some(tool.into());
        event.request.http_route = "/mcp".into();
    }
    if let Err(e) = crate::audit::store(&app.store, &app.audit, vec![event]).await {
        tracing::error!(request_id, error = %e, "Could not record the operation's audit event.");
    }
}

/// Counts the call and logs it.
pub fn finish(app: &App, path: &str, code: &'static str, started: Instant, request_id: &str) {
    let label = if app.registry.operations.contains_key(path) {
        path
    } else {
        "unknown"
    };
    app.metrics.record(label, code, started.elapsed());
    tracing::info!(
        request_id,
        operation = label,
        code,
        elapsed_ms = started.elapsed().as_secs_f64() * 1000.0,
        "Handled."
    );
}
