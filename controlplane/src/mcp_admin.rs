//! The MCP admin server: `POST {base_url}/mcp`, stateless Streamable HTTP with JSON replies,
//! authenticated by a platform key. Every `svc_*` tool runs its operations through the
//! operation core as the key that called it, so permissions, validation and the
//! `mgmt.operation` audit event (with surface `mcp` and the tool's name) are the Connect API's.
//! An operation's error is the tool's result (`isError`, with the Connect code and message);
//! an unknown tool or arguments that do not fit its schema are JSON-RPC errors.

mod agents;
#[cfg(test)]
mod coverage;
mod gateways;
pub mod kit;
mod models;
mod quotas;
mod tools;
mod webhooks;

use std::sync::{Arc, LazyLock};

use axum::body::Body;
use axum::extract::State;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::Router;
use portcullis_shared::api::workspace::Permission;
use portcullis_shared::jsonrpc::{self, Parsed};
use serde_json::{json, Value};

use crate::api::{Access, Principal, MAX_BODY_BYTES};
use crate::error::ApiError;
use crate::App;
use kit::{Args, Tool};

const INSTRUCTIONS: &str = "Manage this Portcullis workspace: models, tools and their \
catalogs, gateways, agents and their keys, spend quotas (in USD) and webhook deliveries. \
Resources are named by name or id. What a call may do is what the platform key may do.";

/// Every admin tool, in listing order.
pub static TOOLS: LazyLock<Vec<Tool>> = LazyLock::new(|| {
    let mut all = models::tools();
    all.extend(tools::tools());
    all.extend(gateways::tools());
    all.extend(agents::tools());
    all.extend(quotas::tools());
    all.extend(webhooks::tools());
    all
});

pub fn routes() -> Router<Arc<App>> {
    Router::new().route("/mcp", post(handle).get(no_stream).delete(no_stream))
}

/// This server keeps no sessions and opens no server-to-client stream.
async fn no_stream() -> Response {
    (
        StatusCode::METHOD_NOT_ALLOWED,
        [(header::ALLOW, "POST")],
        "the MCP admin server is stateless: send JSON-RPC messages with POST",
    )
        .into_response()
}

async fn handle(State(app): State<Arc<App>>, headers: HeaderMap, body: Body) -> Response {
    let any = Access::Platform(Permission::GatewayView);
    let principal = match crate::api::auth::authenticate(&app.store, &headers, any).await {
        Ok(p) => Arc::new(p),
        Err(e) => return refused(StatusCode::UNAUTHORIZED, &e.to_string()),
    };
    let Ok(raw) = axum::body::to_bytes(body, MAX_BODY_BYTES).await else {
        return refused(
            StatusCode::PAYLOAD_TOO_LARGE,
            &format!("the request body is larger than {MAX_BODY_BYTES} bytes"),
        );
    };
    match jsonrpc::parse(&raw) {
        Parsed::Notification => StatusCode::ACCEPTED.into_response(),
        Parsed::Malformed { id, code, message } => {
            answer(jsonrpc::reply(id, Err((code, message, None))))
        }
        Parsed::Request { method, id, params } => {
            let outcome = dispatch(&app, principal, &method, params).await;
            answer(jsonrpc::reply(id, outcome))
        }
    }
}

type Outcome = Result<Value, (i64, String, Option<Value>)>;

async fn dispatch(
    app: &Arc<App>,
    principal: Arc<Principal>,
    method: &str,
    params: Value,
) -> Outcome {
    match method {
        "initialize" => Ok(jsonrpc::initialize_result(
            &params,
            "portcullis-admin",
            Some(INSTRUCTIONS),
        )),
        "ping" => Ok(json!({})),
        "tools/list" => Ok(json!({"tools": TOOLS.iter().map(Tool::listing).collect::<Vec<_>>()})),
        "tools/call" => call(app, principal, params).await,
        other => Err((
            jsonrpc::METHOD_NOT_FOUND,
            format!("method not found: {other}"),
            None,
        )),
    }
}

async fn call(app: &Arc<App>, principal: Arc<Principal>, params: Value) -> Outcome {
    let bad = |message: String| Err((jsonrpc::INVALID_PARAMS, message, None));
    let Some(name) = params.get("name").and_then(Value::as_str) else {
        return bad("params.name is required".into());
    };
    let Some(tool) = TOOLS.iter().find(|t| t.name == name) else {
        return bad(format!("unknown tool: {name}"));
    };
    let map = match params.get("arguments") {
        None | Some(Value::Null) => Default::default(),
        Some(Value::Object(map)) => map.clone(),
        Some(_) => return bad("params.arguments must be an object".into()),
    };
    if let Err(message) = tool.check(&map) {
        return bad(message);
    }
    let request_id: Arc<str> = uuid::Uuid::new_v4().to_string().into();
    let args = Args {
        app: app.clone(),
        principal,
        request_id: request_id.clone(),
        tool: tool.name,
        map,
    };
    Ok(match (tool.run)(args).await {
        Ok(value) => json!({
            "content": [{"type": "text", "text": value.to_string()}],
            "structuredContent": value,
            "isError": false,
        }),
        Err(err) => tool_error(&err, &request_id),
    })
}

/// An operation's refusal as the tool's result, in the Connect API's terms.
fn tool_error(err: &ApiError, request_id: &str) -> Value {
    let connect = err.to_connect(request_id);
    let error = json!({
        "code": connect.code.as_str(),
        "message": connect.message,
        "request_id": request_id,
    });
    json!({
        "content": [{"type": "text", "text": format!("{}: {}", connect.code.as_str(), connect.message)}],
        "structuredContent": {"error": error},
        "isError": true,
    })
}

fn answer(body: Value) -> Response {
    axum::Json(body).into_response()
}

/// A request refused before any JSON-RPC message was read.
fn refused(status: StatusCode, message: &str) -> Response {
    let body = jsonrpc::reply(
        Value::Null,
        Err((jsonrpc::INVALID_REQUEST, message.to_string(), None)),
    );
    (status, axum::Json(body)).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_tool_runs_registered_operations_and_has_a_unique_name() {
        let registry = crate::api::Registry::new();
        let mut names = std::collections::HashSet::new();
        for tool in TOOLS.iter() {
            assert!(names.insert(tool.name), "{} listed twice", tool.name);
            assert!(tool.name.starts_with("svc_"), "{}", tool.name);
            for op in tool.operations {
                assert!(
                    registry.path_of(op).is_some(),
                    "{}: no operation {op}",
                    tool.name
                );
            }
            let listing = tool.listing();
            assert_eq!(listing["inputSchema"]["type"], "object");
        }
    }

    /// Every MCP tool the spec names (Model, Tool, Agent, Gateway and model-quota, and Webhook
    /// operations).
    const SPEC_TOOLS: &[&str] = &[
        "svc_model_add",
        "svc_model_update",
        "svc_model_get",
        "svc_model_list",
        "svc_model_remove",
        "svc_model_oauth_connect",
        "svc_model_oauth_disconnect",
        "svc_gateway_model_add",
        "svc_tool_add",
        "svc_tool_update",
        "svc_tool_get",
        "svc_tool_list",
        "svc_tool_remove",
        "svc_tool_oauth_connect",
        "svc_tool_oauth_disconnect",
        "svc_tools_for_connection",
        "svc_tool_block",
        "svc_tool_deprecate",
        "svc_tool_restore",
        "svc_gateway_tool_source_add",
        "svc_agents_list",
        "svc_agents_get",
        "svc_agents_register",
        "svc_agents_update",
        "svc_agents_interactive_grants_list",
        "svc_agents_interactive_grants_revoke",
        "svc_agents_suspend",
        "svc_agents_reactivate",
        "svc_agents_revoke",
        "svc_agents_delete",
        "svc_tools_list",
        "svc_agents_create_key",
        "svc_agents_list_keys",
        "svc_agents_rotate_key",
        "svc_agents_revoke_key",
        "svc_gateway_quota_set",
        "svc_gateway_quota_update",
        "svc_gateway_quota_list",
        "svc_gateway_quota_remove",
        "svc_model_quota_set",
        "svc_model_quota_update",
        "svc_model_quota_list",
        "svc_model_quota_remove",
        "svc_webhooks_subscription_test",
        "svc_webhooks_subscription_rotate_secret",
        "svc_webhooks_delivery_list",
        "svc_webhooks_delivery_get",
        "svc_webhooks_delivery_replay",
        "svc_webhooks_delivery_replay_failed",
        "svc_webhooks_delivery_cancel",
    ];

    #[test]
    fn every_tool_the_spec_names_is_served_and_documented() {
        let docs = include_str!("../../docs/api.md");
        for name in SPEC_TOOLS {
            assert!(
                TOOLS.iter().any(|t| t.name == *name),
                "{name} is not served"
            );
        }
        for tool in TOOLS.iter() {
            assert!(
                docs.contains(&format!("| `{}` |", tool.name)),
                "{} is not in docs/api.md",
                tool.name
            );
        }
    }

    #[test]
    fn arguments_are_checked_against_the_schema() {
        let tool = TOOLS
            .iter()
            .find(|t| t.name == "svc_gateway_quota_set")
            .unwrap();
        let args = |v: Value| v.as_object().unwrap().clone();
        assert!(tool
            .check(&args(json!({"gateway": "g", "limit_usd": 2.5})))
            .is_ok());
        let err = tool.check(&args(json!({"gateway": "g"}))).unwrap_err();
        assert!(err.contains("'limit_usd' is required"), "{err}");
        let err = tool
            .check(&args(json!({"gateway": "g", "limit_usd": "2"})))
            .unwrap_err();
        assert!(err.contains("must be a number"), "{err}");
        let err = tool
            .check(&args(json!({"gateway": "g", "limit_usd": 1, "x": 1})))
            .unwrap_err();
        assert!(err.contains("unknown argument 'x'"), "{err}");
        let err = tool
            .check(&args(
                json!({"gateway": "g", "limit_usd": 1, "window": "weekly"}),
            ))
            .unwrap_err();
        assert!(err.contains("one of daily, monthly"), "{err}");
    }
}
