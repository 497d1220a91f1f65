//! Step four for tool calls: the gateway's MCP endpoint, stateless Streamable HTTP with JSON
//! responses. `initialize`, `ping`, notifications (202), `tools/list` (membership ∩ not blocked
//! ∩ `mcp:discover`, paginated, cached per caller), `tools/call` (membership, status,
//! `mcp:call`, then the upstream); anything else is -32601. Tool names are `connection/tool`.

pub mod compile;
pub mod discovery;
mod guard;
mod list;
pub mod table;
pub mod upstream;

use portcullis_shared::api::guards::GuardStage;
use portcullis_shared::api::tools::ToolStatus;
use portcullis_shared::jsonrpc::{self, Parsed};
use portcullis_shared::policy::Action;
use serde_json::{json, Value};

use crate::error::{Denial, GatewayError, RpcError};
use crate::request::RequestCtx;
use crate::session::Session;
use crate::{audit, authz, respond, Gateway};

pub use list::ToolsCache;
use table::Tools;

/// `POST …/mcp`. A request that fails outside a tool call (which records `tool.call`) is
/// recorded as `mcp.request`.
pub async fn handle(
    gw: &std::sync::Arc<Gateway>,
    session: &mut Session,
    rc: &RequestCtx<'_>,
    tools: Tools<'_>,
) -> Result<(), GatewayError> {
    let (raw, _held) = crate::body::read(session, gw.config.max_body_bytes, &gw.body_budget)
        .await
        .inspect_err(|e| record_failure(gw, rc, "", -32600, &e.to_string()))?;
    let (method, id, outcome) = match jsonrpc::parse(&raw) {
        Parsed::Notification => return accepted(session, rc).await,
        Parsed::Request { method, id, params } => {
            let outcome = dispatch(gw, (rc, tools), &method, &params).await;
            (method, id, outcome)
        }
        Parsed::Malformed { id, code, message } => {
            (String::new(), id, Err(RpcError::new(code, message)))
        }
    };
    if let Err(e) = &outcome {
        if method != "tools/call" {
            record_failure(gw, rc, &method, e.code, &e.message);
        }
    }
    reply(session, rc, id, outcome).await
}

async fn dispatch(
    gw: &std::sync::Arc<Gateway>,
    (rc, tools): (&RequestCtx<'_>, Tools<'_>),
    method: &str,
    params: &Value,
) -> Result<Value, RpcError> {
    match method {
        "initialize" => Ok(jsonrpc::initialize_result(
            params,
            "portcullis-gateway",
            None,
        )),
        "ping" => Ok(json!({})),
        "tools/list" => list::tools_list(gw, rc, tools.gateway, params).await,
        "tools/call" => {
            let started = std::time::Instant::now();
            let mut guards = crate::guard::Log::default();
            let outcome = call(gw, (rc, tools), params, &mut guards).await;
            if gw.audit.enabled() {
                let latency = started.elapsed();
                gw.audit
                    .emit(call_event((rc, tools), params, &outcome, latency, guards));
            }
            outcome
        }
        other => Err(RpcError::new(-32601, format!("method not found: {other}"))),
    }
}

/// `mcp.request` for a request that failed outside a tool call: its method and JSON-RPC
/// error (never its parameters).
fn record_failure(gw: &Gateway, rc: &RequestCtx<'_>, method: &str, code: i64, message: &str) {
    use portcullis_shared::audit::{catalog, results};
    if !gw.audit.enabled() {
        return;
    }
    let resource = audit::resource("gateway", &rc.gateway.id, &rc.gateway.name);
    let method: String = method.chars().take(100).collect();
    let reason_code = match code {
        -32700 => "parse_error",
        -32600 => "invalid_request",
        -32601 => "method_not_found",
        -32602 => "invalid_params",
        _ => "internal_error",
    };
    let payload = catalog::McpRequest {
        method: method.clone(),
        gateway_id: rc.gateway.id.clone(),
        error: catalog::RpcFailure {
            code,
            message: message.chars().take(500).collect(),
        },
        reason_code: reason_code.into(),
    };
    let mut e = audit::event(rc, results::ERROR, resource, payload);
    e.request.rpc_method = method;
    e.data_handling.omitted = vec!["request.params".into()];
    gw.audit.emit(e);
}

async fn accepted(session: &mut Session, rc: &RequestCtx<'_>) -> Result<(), GatewayError> {
    respond::bytes(
        session,
        202,
        "application/json",
        bytes::Bytes::new(),
        rc.request_id,
        &rc.echo_headers(""),
    )
    .await
    .map_err(|e| GatewayError::Internal(e.to_string()))
}

async fn reply(
    session: &mut Session,
    rc: &RequestCtx<'_>,
    id: Value,
    outcome: Result<Value, RpcError>,
) -> Result<(), GatewayError> {
    let body = respond::jsonrpc_reply(id, outcome);
    respond::json(session, 200, &body, rc.request_id, &rc.echo_headers(""))
        .await
        .map_err(|e| GatewayError::Internal(e.to_string()))
}

/// `tool.call` for a call that was allowed (whatever its upstream made of it), or
/// `access.denied` when a rule or the catalog refused it. Arguments and results are not
/// recorded.
fn call_event(
    (rc, tools): (&RequestCtx<'_>, Tools<'_>),
    params: &Value,
    outcome: &Result<Value, RpcError>,
    latency: std::time::Duration,
    guards: crate::guard::Log,
) -> portcullis_shared::audit::AuditEventV1 {
    use portcullis_shared::audit::{catalog, results};
    let name = params
        .get("name")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let connection_id = name
        .split_once('/')
        .and_then(|(c, _)| tools.by_name.get(c))
        .map(|t| t.id.as_str())
        .unwrap_or_default();
    let resource = audit::resource("tool", connection_id, name);
    if let Err(RpcError {
        denial: Some(d), ..
    }) = outcome
    {
        let mut e = audit::denial_event(rc, resource, "mcp:call", d);
        e.request.rpc_method = "tools/call".into();
        return e.into_v1();
    }
    let (guards, delivered) = guards.into_fields();
    let mut payload = catalog::ToolCall {
        tool: name.to_string(),
        connection_id: connection_id.to_string(),
        gateway_id: rc.gateway.id.clone(),
        latency_ms: audit::millis(latency),
        guards,
        delivered,
        ..Default::default()
    };
    let result = match outcome {
        Ok(result) => {
            payload.is_error = Some(result.get("isError") == Some(&Value::Bool(true)));
            results::ALLOWED
        }
        Err(err) => {
            let message = err.message.chars().take(500).collect();
            payload.error = Some(catalog::RpcFailure {
                code: err.code,
                message,
            });
            results::ERROR
        }
    };
    let mut e = audit::event(rc, result, resource, payload);
    e.request.rpc_method = "tools/call".into();
    e.data_handling.omitted = vec!["request.arguments".into(), "response.content".into()];
    e.into_v1()
}

/// Checks membership, catalog status and `mcp:call`, then calls the upstream and returns its
/// result untouched (`content`, `structuredContent`, `isError` as given).
async fn call(
    gw: &std::sync::Arc<Gateway>,
    (rc, tools): (&RequestCtx<'_>, Tools<'_>),
    params: &Value,
    guards: &mut crate::guard::Log,
) -> Result<Value, RpcError> {
    let name = params
        .get("name")
        .and_then(Value::as_str)
        .ok_or_else(|| RpcError::new(-32602, "params.name is required (connection/tool)"))?;
    let (entry, tool) = offered(rc, tools, name)?;
    let cataloged = entry.catalog.get(tool);
    // A per-user call goes with the person's own credential; one without it learns where to
    // provide it.
    let person = match entry.per_user {
        true => Some(person(gw, rc, entry).await?),
        false => None,
    };
    let extra = list::actas_headers(entry, rc)
        .map_err(|why| RpcError::gateway(why, "actas_required", rc.request_id))?;
    let mut arguments = params
        .get("arguments")
        .cloned()
        .unwrap_or_else(|| json!({}));
    let stage = GuardStage::ToolArguments;
    guard::guard(gw, rc, entry, tool, stage, &mut arguments, name, guards)
        .map_err(|f| guard::refusal(&f, rc.request_id))?;
    let session = gw
        .upstreams
        .session_as(gw, entry, person.as_ref().map(|(sub, h)| (sub.as_str(), h)))
        .await
        .map_err(|e| RpcError::gateway(e.to_string(), "upstream_error", rc.request_id))?;
    if cataloged.is_none() {
        // Not in the snapshot's catalog yet: discovered with this caller's credential and
        // act-as identity.
        let statuses = gw
            .discovered_on_call
            .statuses(gw, entry, &session, &extra)
            .await
            .map_err(|e| RpcError::gateway(e, "upstream_error", rc.request_id))?;
        let status = statuses.get(tool).ok_or_else(|| {
            RpcError::new(-32602, format!("{name} is not offered by its upstream"))
        })?;
        if let Some(refusal) = blocked(name, status, rc.request_id) {
            return Err(refusal);
        }
    }
    let mut upstream_params = json!({"name": tool, "arguments": arguments});
    if let Some(meta) = params.get("_meta") {
        upstream_params["_meta"] = meta.clone();
    }
    let answer = session
        .call(gw, "tools/call", upstream_params, &extra)
        .await;
    let mut result = upstream_answer(rc, entry, name, answer)?;
    guard::guard(
        gw,
        rc,
        entry,
        tool,
        GuardStage::ToolResult,
        &mut result,
        name,
        guards,
    )
    .map_err(|f| guard::refusal(&f, rc.request_id))?;
    Ok(result)
}

/// The connection and operation `name` (`connection/tool`) names, when this gateway offers
/// it, its catalog status admits calls (or it is discovered on call) and `mcp:call` allows
/// it.
fn offered<'t>(
    rc: &RequestCtx<'_>,
    tools: Tools<'t>,
    name: &'t str,
) -> Result<(&'t std::sync::Arc<table::ToolEntry>, &'t str), RpcError> {
    let unknown = || RpcError::new(-32602, format!("unknown tool: {name}"));
    let (connection, tool) = name.split_once('/').ok_or_else(unknown)?;
    let entry = tools.by_name.get(connection).ok_or_else(unknown)?;
    if !tools.gateway.offers(&entry.id, tool) {
        return Err(unknown());
    }
    match entry.catalog.get(tool) {
        None if !discovery::by_caller(entry) => return Err(not_cataloged(name)),
        Some(status) => {
            if let Some(refusal) = blocked(name, status, rc.request_id) {
                return Err(refusal);
            }
        }
        None => {}
    }
    authz::check_tool(&rc.rules, Action::McpCall, name, &rc.context, rc.memoize)
        .map_err(|d| RpcError::denied(&d, rc.request_id))?;
    Ok((entry, tool))
}

/// The upstream's result, or its failure as the caller's JSON-RPC error: the upstream's own
/// error is guarded and marked as such (its data nested, so an upstream cannot pass off a
/// refusal — a denial, a provision link — as the gateway's).
fn upstream_answer(
    rc: &RequestCtx<'_>,
    entry: &table::ToolEntry,
    name: &str,
    answer: Result<Value, upstream::UpstreamError>,
) -> Result<Value, RpcError> {
    match answer {
        Ok(result) => Ok(result),
        Err(upstream::UpstreamError::Rpc {
            code,
            mut message,
            mut data,
        }) => {
            guard::upstream_error(rc, entry, &mut message, &mut data)
                .map_err(|f| guard::refusal(&f, rc.request_id))?;
            let code = if code == -32001 { -32603 } else { code };
            let data = json!({"reason_code": "upstream_rpc_error", "upstream": data,
                "request_id": rc.request_id});
            Err(RpcError {
                code,
                message,
                data: Some(data),
                denial: None,
            })
        }
        Err(e) => Err(RpcError::gateway(
            format!("{name}: {e}"),
            "upstream_error",
            rc.request_id,
        )),
    }
}

/// On a per-user tool, the calling person and their credential; a person without one gets
/// the link to provide it (JSON-RPC -32001 with `credential_required`, HTTP 200: a 401 here
/// would send MCP clients into their own OAuth flow).
async fn person(
    gw: &Gateway,
    rc: &RequestCtx<'_>,
    entry: &table::ToolEntry,
) -> Result<(String, crate::peruser::Headers), RpcError> {
    let refused = |e: GatewayError| {
        let (_, code) = e.openai_type_and_code();
        RpcError::gateway(e.to_string(), code, rc.request_id)
    };
    let subject = crate::peruser::subject(rc, &entry.name).map_err(refused)?;
    let owner = portcullis_shared::snapshot::CredentialOwner::Tool;
    match gw
        .credentials
        .lookup(gw, owner, &entry.id, (&subject, &rc.agent.id))
        .await
        .map_err(refused)?
    {
        Ok(headers) => Ok((subject, headers)),
        Err(missing) => {
            gw.metrics.credential_required();
            let err = GatewayError::CredentialRequired(Box::new(missing));
            Err(RpcError::refused(&err, rc.request_id))
        }
    }
}

/// A blocked operation's refusal (a denial, with its administrator's message).
fn blocked(
    name: &str,
    (status, message): &crate::mcp::discovery::Status,
    request_id: &str,
) -> Option<RpcError> {
    if *status != ToolStatus::Blocked {
        return None;
    }
    let reason = match message {
        Some(m) => format!("{name} is blocked: {m}"),
        None => format!("{name} is blocked"),
    };
    let d = Denial {
        reason,
        reason_code: "blocked",
        determining_policy: format!("blocked/{name}"),
    };
    Some(RpcError::denied(&d, request_id))
}

fn not_cataloged(name: &str) -> RpcError {
    RpcError::new(
        -32602,
        format!("{name} is not in the catalog yet; list the tools first"),
    )
}
