//! `svc_model_quota_*` and `svc_gateway_quota_*`: USD spend quotas, with amounts in USD
//! (the API's micros) and subjects by name.

use serde_json::{json, Value};

use super::kit::{opt, reply, req, Args, Effect, Named, Param, Tool, Ty};
use crate::error::{invalid, ApiResult};

const WINDOWS: &[&str] = &["daily", "monthly"];
/// `act-as` is the spec's MCP spelling; the API's `act_as` is accepted too.
const SUBJECTS: &[&str] = &[
    "workspace",
    "agent",
    "act-as",
    "act_as",
    "pool",
    "model",
    "gateway",
];

fn quota_id() -> Param {
    req("quota_id", Ty::Str, "The quota's id.")
}

fn changes() -> Vec<Param> {
    vec![
        quota_id(),
        opt("limit_usd", Ty::Num, "The new limit in USD."),
        opt("window", Ty::Str, "The new window.").one_of(WINDOWS),
        opt("name", Ty::Str, "The new name."),
        opt("enabled", Ty::Bool, "Enforce (true) or only track (false)."),
    ]
}

pub fn tools() -> Vec<Tool> {
    let mut list = model_quota_tools();
    list.extend(gateway_quota_tools());
    list
}

/// What `svc_model_quota_set` takes: the subject (named by the parameter of its kind), the
/// limit, its window and the quota's settings.
fn model_quota_set_params() -> Vec<Param> {
    vec![
        req("subject", Ty::Str, "What the quota limits.").one_of(SUBJECTS),
        req("limit_usd", Ty::Num, "The limit in USD."),
        opt(
            "model",
            Ty::Str,
            "For subject model: the model's name (or id).",
        ),
        opt(
            "pool",
            Ty::Str,
            "For subject pool: the pool; for subject model: scopes it to this pool.",
        ),
        opt(
            "agent",
            Ty::Str,
            "For subject agent: the agent's name (or id).",
        ),
        opt(
            "gateway",
            Ty::Str,
            "For subject gateway: the gateway's name (or id).",
        ),
        opt(
            "subject_key",
            Ty::Str,
            "For subject act-as: the end user's OIDC sub.",
        ),
        opt("window", Ty::Str, "Default monthly.").one_of(WINDOWS),
        opt("name", Ty::Str, "A name for the quota."),
        opt(
            "per_caller",
            Ty::Bool,
            "For subject model: every agent and end user gets its own budget.",
        ),
        opt("disabled", Ty::Bool, "Create without enforcing."),
    ]
}

/// `svc_model_quota_*`: quotas of any subject.
fn model_quota_tools() -> Vec<Tool> {
    vec![
        Tool {
            name: "svc_model_quota_set",
            description: "Set a USD spend quota on the workspace, an agent, a verified end user \
                          (act-as), a pool, a model (optionally within one pool) or a gateway.",
            effect: Effect::Write,
            params: model_quota_set_params(),
            operations: &["CreateLLMQuota"],
            run: |a| reply(model_quota_set(a)),
        },
        Tool {
            name: "svc_model_quota_update",
            description:
                "Change a quota's limit, window, name or enforcement; its subject never changes.",
            effect: Effect::Write,
            params: changes(),
            operations: &["UpdateLLMQuota"],
            run: |a| reply(update(a, "UpdateLLMQuota")),
        },
        Tool {
            name: "svc_model_quota_list",
            description: "Every spend quota of the workspace, disabled ones included.",
            effect: Effect::Read,
            params: vec![],
            operations: &["ListLLMQuotas"],
            run: |a| reply(async move { a.call("ListLLMQuotas", json!({})).await }),
        },
        Tool {
            name: "svc_model_quota_remove",
            description: "Delete a quota.",
            effect: Effect::Destructive,
            params: vec![quota_id()],
            operations: &["DeleteLLMQuota"],
            run: |a| reply(by_id(a, "DeleteLLMQuota")),
        },
    ]
}

/// `svc_gateway_quota_*`: quotas of gateways only.
fn gateway_quota_tools() -> Vec<Tool> {
    vec![
        Tool {
            name: "svc_gateway_quota_set",
            description: "Set a USD spend quota on one gateway.",
            effect: Effect::Write,
            params: vec![
                req("gateway", Ty::Str, "The gateway's name (or id)."),
                req("limit_usd", Ty::Num, "The limit in USD."),
                opt("window", Ty::Str, "Default monthly.").one_of(WINDOWS),
                opt("name", Ty::Str, "A name for the quota."),
                opt("disabled", Ty::Bool, "Create without enforcing."),
            ],
            operations: &["SetGatewayQuota"],
            run: |a| reply(gateway_quota_set(a)),
        },
        Tool {
            name: "svc_gateway_quota_update",
            description: "Change a gateway quota; a quota of another subject is refused.",
            effect: Effect::Write,
            params: changes(),
            operations: &["UpdateGatewayQuota"],
            run: |a| reply(update(a, "UpdateGatewayQuota")),
        },
        Tool {
            name: "svc_gateway_quota_list",
            description: "Gateway quotas, of every gateway or of one.",
            effect: Effect::Read,
            params: vec![opt("gateway", Ty::Str, "Only this gateway's (name or id).")],
            operations: &["ListGatewayQuotas"],
            run: |a| {
                reply(async move {
                    let mut body = json!({});
                    if a.str("gateway").is_some() {
                        body["gateway_id"] = a.resolve(Named::Gateway, "gateway").await?.into();
                    }
                    a.call("ListGatewayQuotas", body).await
                })
            },
        },
        Tool {
            name: "svc_gateway_quota_remove",
            description: "Delete a gateway quota; a quota of another subject is refused.",
            effect: Effect::Destructive,
            params: vec![quota_id()],
            operations: &["RemoveGatewayQuota"],
            run: |a| reply(by_id(a, "RemoveGatewayQuota")),
        },
    ]
}

async fn by_id(a: Args, method: &'static str) -> ApiResult<Value> {
    let body = json!({"quota_id": a.need("quota_id")?});
    a.call(method, body).await
}

async fn update(a: Args, method: &'static str) -> ApiResult<Value> {
    let mut body = Value::Object(a.take(&["quota_id", "window", "name", "enabled"]));
    if let Some(micros) = a.micros("limit_usd")? {
        body["limit_micros"] = micros.into();
    }
    a.call(method, body).await
}

async fn gateway_quota_set(a: Args) -> ApiResult<Value> {
    let mut body = Value::Object(a.take(&["window", "name", "disabled"]));
    body["gateway_id"] = a.resolve(Named::Gateway, "gateway").await?.into();
    body["limit_micros"] = a.micros("limit_usd")?.unwrap_or_default().into();
    a.call("SetGatewayQuota", body).await
}

async fn model_quota_set(a: Args) -> ApiResult<Value> {
    let subject = a.need("subject")?;
    let mut body = Value::Object(a.take(&["window", "name", "per_caller", "disabled"]));
    body["subject_type"] = subject.as_str().into();
    body["limit_micros"] = a.micros("limit_usd")?.unwrap_or_default().into();
    let needs = |arg: &str| {
        invalid(format!(
            "svc_model_quota_set: subject {subject} needs '{arg}'"
        ))
    };
    match subject.as_str() {
        "model" => {
            a.str("model").ok_or_else(|| needs("model"))?;
            body["subject_id"] = a.resolve(Named::Model, "model").await?.into();
            if a.str("pool").is_some() {
                body["pool_id"] = a.resolve(Named::Pool, "pool").await?.into();
            }
        }
        "pool" => {
            a.str("pool").ok_or_else(|| needs("pool"))?;
            body["subject_id"] = a.resolve(Named::Pool, "pool").await?.into();
        }
        "gateway" => {
            a.str("gateway").ok_or_else(|| needs("gateway"))?;
            body["subject_id"] = a.resolve(Named::Gateway, "gateway").await?.into();
        }
        "agent" => {
            let agent = a.str("agent").ok_or_else(|| needs("agent"))?;
            let found = a.call("GetAgent", json!({"agent_id": agent})).await?;
            body["subject_id"] = found["agent"]["agent_id"].clone();
        }
        "act-as" | "act_as" => {
            body["subject_key"] = a
                .str("subject_key")
                .ok_or_else(|| needs("subject_key"))?
                .into();
        }
        _ => {}
    }
    a.call("CreateLLMQuota", body).await
}
