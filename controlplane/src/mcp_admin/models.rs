//! `svc_model_*` and `svc_gateway_model_add`: model connections by name.

use serde_json::{json, Map, Value};

use super::kit::{opt, reply, req, Args, Effect, Joining, Named, Tool, Ty};
use crate::error::{invalid, ApiResult};

const AUTH: &[&str] = &["none", "api-key", "oauth"];
const CREDENTIAL: &[&str] = &["none", "shared", "per-user"];

pub fn tools() -> Vec<Tool> {
    let mut list = vec![add_tool(), update_tool()];
    list.extend(read_and_remove_tools());
    list.extend(oauth_tools());
    list.push(gateway_model_add_tool());
    list
}

/// `svc_model_add`: a model connection, its API key and the gateways it joins.
fn add_tool() -> Tool {
    Tool {
        name: "svc_model_add",
        description: "Add a model connection: what agents send as `model`, the provider, its \
                      config (`model` is the upstream id) and, optionally, the API key \
                      (stored sealed, never shown again) and the gateways to attach it to.",
        effect: Effect::Write,
        params: vec![
            req("name", Ty::Str, "The name agents send as `model`; unique in the workspace."),
            req("provider", Ty::Str, "Provider id: openai, anthropic, google, vertex, bedrock, azure_openai, openai_compatible, …"),
            opt("provider_config", Ty::Object, "`model` (upstream id, required), `base_url`, `region`, `project`, `location`, `api_version`, `pricing`."),
            opt("api_key", Ty::Str, "The provider API key, sent upstream in the provider's header."),
            opt("gateways", Ty::StrList, "Gateways (names or ids) to attach the model to."),
            opt("auth_method", Ty::Str, "How the gateway authenticates upstream.").one_of(AUTH),
            opt("credential_type", Ty::Str, "Whose credential: one shared, or each end user's.").one_of(CREDENTIAL),
            opt("attributes", Ty::Object, "Trusted metadata for rules (string values)."),
        ],
        operations: &["CreateLLMModelConnection", "AddGatewayModel", "GetLLMModelConnection"],
        run: |a| reply(add(a)),
    }
}

/// `svc_model_update`: changes the parameters sent.
fn update_tool() -> Tool {
    Tool {
        name: "svc_model_update",
        description: "Change a model connection; only the parameters sent change. \
                      `provider_config` and `attributes` each replace the whole object.",
        effect: Effect::Write,
        params: vec![
            req("name", Ty::Str, "The model's name (or id)."),
            opt(
                "provider_config",
                Ty::Object,
                "Replaces the provider config.",
            ),
            opt("attributes", Ty::Object, "Replaces the attributes."),
            opt(
                "auth_method",
                Ty::Str,
                "Switching deletes the stored credential.",
            )
            .one_of(AUTH),
            opt("credential_type", Ty::Str, "Shared or per-user.").one_of(CREDENTIAL),
            opt("api_key", Ty::Str, "Replaces the stored API key."),
        ],
        operations: &["GetLLMModelConnection", "UpdateLLMModelConnection"],
        run: |a| reply(update(a)),
    }
}

/// `svc_model_get`, `svc_model_list` and `svc_model_remove`.
fn read_and_remove_tools() -> Vec<Tool> {
    vec![
        Tool {
            name: "svc_model_get",
            description: "A model connection by name: provider, config, auth, memberships (never the key).",
            effect: Effect::Read,
            params: vec![req("name", Ty::Str, "The model's name (or id).")],
            operations: &["GetLLMModelConnection"],
            run: |a| reply(by_name(a, "GetLLMModelConnection")),
        },
        Tool {
            name: "svc_model_list",
            description: "Every model connection of the workspace.",
            effect: Effect::Read,
            params: vec![],
            operations: &["ListLLMModelConnections"],
            run: |a| reply(async move { a.call("ListLLMModelConnections", json!({})).await }),
        },
        Tool {
            name: "svc_model_remove",
            description: "Delete a model connection: it leaves every pool and gateway and its credentials are deleted.",
            effect: Effect::Destructive,
            params: vec![req("name", Ty::Str, "The model's name (or id).")],
            operations: &["DeleteLLMModelConnection"],
            run: |a| reply(by_name(a, "DeleteLLMModelConnection")),
        },
    ]
}

/// Connecting and disconnecting a model's shared OAuth grant.
fn oauth_tools() -> Vec<Tool> {
    vec![
        Tool {
            name: "svc_model_oauth_connect",
            description: "Start the administrator's OAuth consent for a shared-OAuth model; returns the one-time connect URL.",
            effect: Effect::Write,
            params: vec![req("name", Ty::Str, "The model's name (or id).")],
            operations: &["BeginLLMOAuthConnect"],
            run: |a| reply(by_name(a, "BeginLLMOAuthConnect")),
        },
        Tool {
            name: "svc_model_oauth_disconnect",
            description: "Disconnect a model's shared OAuth grant (the client settings stay).",
            effect: Effect::Destructive,
            params: vec![req("name", Ty::Str, "The model's name (or id).")],
            operations: &["DisconnectLLMOAuth"],
            run: |a| reply(by_name(a, "DisconnectLLMOAuth")),
        },
    ]
}

/// `svc_gateway_model_add`: attaches a model to a gateway.
fn gateway_model_add_tool() -> Tool {
    Tool {
        name: "svc_gateway_model_add",
        description: "Attach a model to a gateway, so agents of that gateway can call it.",
        effect: Effect::Write,
        params: vec![
            req("gateway", Ty::Str, "The gateway's name (or id)."),
            req("model", Ty::Str, "The model's name (or id)."),
        ],
        operations: &["AddGatewayModel"],
        run: |a| {
            reply(async move {
                let gateway_id = a.resolve(Named::Gateway, "gateway").await?;
                let connection_id = a.resolve(Named::Model, "model").await?;
                a.call(
                    "AddGatewayModel",
                    json!({"gateway_id": gateway_id, "connection_id": connection_id}),
                )
                .await
            })
        },
    }
}

/// Runs an operation that takes the model named by `name` as `connection_id`.
async fn by_name(a: Args, method: &'static str) -> ApiResult<Value> {
    let id = a.resolve(Named::Model, "name").await?;
    a.call(method, json!({"connection_id": id})).await
}

/// `{header: value}` for an API key, in the provider's header.
fn key_secret(a: &Args, provider: &str) -> ApiResult<Option<Value>> {
    let Some(key) = a.str("api_key") else {
        return Ok(None);
    };
    let (header, value) =
        portcullis_shared::provider::api_key_secret(provider, key).map_err(invalid)?;
    let mut map = Map::new();
    map.insert(header, Value::String(value));
    Ok(Some(Value::Object(map)))
}

async fn add(a: Args) -> ApiResult<Value> {
    let provider = a.need("provider")?;
    let mut body = Value::Object(a.take(&[
        "name",
        "provider",
        "provider_config",
        "auth_method",
        "credential_type",
        "attributes",
    ]));
    if let Some(secret) = key_secret(&a, &provider)? {
        body["secret_values"] = secret;
    }
    // Gateways are checked before anything is created.
    let gateway_ids = a.gateway_ids().await?;
    let created = a.call("CreateLLMModelConnection", body).await?;
    let how = Joining {
        attach: "AddGatewayModel",
        get: "GetLLMModelConnection",
        field: "model",
    };
    a.join(created, gateway_ids, how).await
}

async fn update(a: Args) -> ApiResult<Value> {
    let id = a.resolve(Named::Model, "name").await?;
    let mut body = Value::Object(a.take(&["provider_config", "auth_method", "credential_type"]));
    body["connection_id"] = id.clone().into();
    if let Some(attributes) = a.map.get("attributes").filter(|v| !v.is_null()) {
        body["attributes"] = attributes.clone();
        body["attributes_provided"] = true.into();
    }
    if a.str("api_key").is_some() {
        let stored = a
            .call("GetLLMModelConnection", json!({"connection_id": id}))
            .await?;
        let provider = stored["model"]["provider"].as_str().unwrap_or_default();
        body["secret_values"] = key_secret(&a, provider)?.unwrap_or_default();
        body["secret_values_provided"] = true.into();
    }
    a.call("UpdateLLMModelConnection", body).await
}
