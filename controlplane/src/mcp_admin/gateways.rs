//! `svc_gateway_*`: gateways and their members, by name. The spec names only the attach
//! tools; the rest complete the family so a gateway can be managed end to end.

use serde_json::{json, Value};

use super::kit::{opt, reply, req, Args, Effect, Named, Tool, Ty};
use crate::error::{invalid, ApiResult};

fn gateway() -> super::kit::Param {
    req("gateway", Ty::Str, "The gateway's name (or id).")
}

pub fn tools() -> Vec<Tool> {
    vec![
        Tool {
            name: "svc_gateway_list",
            description: "Every gateway of the workspace, with state and the default marker.",
            effect: Effect::Read,
            params: vec![],
            operations: &["ListGateways"],
            run: |a| reply(async move { a.call("ListGateways", json!({})).await }),
        },
        Tool {
            name: "svc_gateway_get",
            description: "One gateway: state, members, endpoints and agent grants.",
            effect: Effect::Read,
            params: vec![gateway()],
            operations: &["GetGateway"],
            run: |a| reply(by_name(a, "GetGateway")),
        },
        Tool {
            name: "svc_gateway_add",
            description: "Create a gateway (active, with no members).",
            effect: Effect::Write,
            params: vec![
                req("name", Ty::Str, "The gateway's name, unique in the workspace."),
                opt("description", Ty::Str, "What it is for."),
            ],
            operations: &["CreateGateway"],
            run: |a| {
                reply(async move {
                    let body = Value::Object(a.take(&["name", "description"]));
                    a.call("CreateGateway", body).await
                })
            },
        },
        Tool {
            name: "svc_gateway_remove",
            description: "Delete a gateway: its memberships, grants and gateway rules go; connections and pools stay.",
            effect: Effect::Destructive,
            params: vec![gateway()],
            operations: &["DeleteGateway"],
            run: |a| reply(by_name(a, "DeleteGateway")),
        },
        Tool {
            name: "svc_gateway_member_remove",
            description: "Detach one member from a gateway: a model, a pool, a whole tool connection, or one tool of it.",
            effect: Effect::Destructive,
            params: vec![
                gateway(),
                opt("model", Ty::Str, "A model's name (or id)."),
                opt("pool", Ty::Str, "A pool's name (or id)."),
                opt("connection", Ty::Str, "A tool connection's name (or id)."),
                opt("tool", Ty::Str, "With connection: only this tool."),
            ],
            operations: &["RemoveGatewayMember"],
            run: |a| reply(remove_member(a)),
        },
    ]
}

async fn by_name(a: Args, method: &'static str) -> ApiResult<Value> {
    let id = a.resolve(Named::Gateway, "gateway").await?;
    a.call(method, json!({"gateway_id": id})).await
}

async fn remove_member(a: Args) -> ApiResult<Value> {
    let mut body = json!({"gateway_id": a.resolve(Named::Gateway, "gateway").await?});
    let given: Vec<&str> = ["model", "pool", "connection"]
        .into_iter()
        .filter(|k| a.str(k).is_some())
        .collect();
    match given.as_slice() {
        ["model"] => body["connection_id"] = a.resolve(Named::Model, "model").await?.into(),
        ["pool"] => body["pool_id"] = a.resolve(Named::Pool, "pool").await?.into(),
        ["connection"] => {
            body["connection_id"] = a.resolve(Named::Tool, "connection").await?.into();
            if let Some(tool) = a.str("tool") {
                body["tool"] = tool.into();
            }
        }
        _ => {
            return Err(invalid(
                "svc_gateway_member_remove: give exactly one of model, pool or connection",
            ))
        }
    }
    a.call("RemoveGatewayMember", body).await
}
