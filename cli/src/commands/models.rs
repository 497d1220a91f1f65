//! `portcullis model …`

use serde_json::{json, Map, Value};

use crate::args::{ModelCmd, ModelConfig};
use crate::ctx::{Ctx, Kind};
use crate::{output, parse};

const FIELDS: &[(&str, &str)] = &[
    ("name", "/model/name"),
    ("connection_id", "/model/connection_id"),
    ("provider", "/model/provider"),
    ("upstream model", "/model/provider_config/model"),
    ("base_url", "/model/provider_config/base_url"),
    ("auth", "/model/auth_method"),
    ("credential", "/model/credential_type"),
    ("secret keys", "/model/secret_keys"),
    ("has credential", "/model/has_credential"),
    ("attributes", "/model/attributes"),
    ("gateways", "/model/gateways"),
    ("pools", "/model/pools"),
];

/// Overlays the config flags on `base` (a copy of the stored provider_config).
fn provider_config(
    c: &ModelConfig,
    mut base: Map<String, Value>,
) -> anyhow::Result<Option<Map<String, Value>>> {
    if let Some(text) = &c.config {
        return match serde_json::from_str(text)? {
            Value::Object(map) => Ok(Some(map)),
            _ => anyhow::bail!("--config must be a JSON object"),
        };
    }
    let flags = [
        ("model", &c.upstream_model),
        ("base_url", &c.base_url),
        ("region", &c.region),
        ("project", &c.project),
        ("location", &c.location),
        ("api_version", &c.api_version),
    ];
    if flags.iter().all(|(_, v)| v.is_none()) {
        return Ok(None);
    }
    for (key, value) in flags {
        if let Some(v) = value {
            base.insert(key.into(), Value::String(v.clone()));
        }
    }
    Ok(Some(base))
}

fn secrets(provider: &str, c: &ModelConfig) -> anyhow::Result<Option<Map<String, Value>>> {
    let mut map = parse::pairs("secret", &c.secrets)?;
    if let Some(key) = &c.api_key {
        let (header, value) = parse::api_key_secret(provider, key)?;
        map.insert(header, Value::String(value));
    }
    Ok((!map.is_empty()).then_some(map))
}

pub async fn run(ctx: &Ctx, cmd: ModelCmd) -> anyhow::Result<()> {
    match cmd {
        ModelCmd::Add {
            name,
            provider,
            config,
            gateways,
        } => {
            let mut body = json!({"name": name, "provider": provider});
            if let Some(pc) = provider_config(&config, Map::new())? {
                body["provider_config"] = Value::Object(pc);
            }
            for (key, value) in [
                ("auth_method", &config.auth_method),
                ("credential_type", &config.credential_type),
            ] {
                if let Some(v) = value {
                    body[key] = json!(v);
                }
            }
            if let Some(s) = secrets(&provider, &config)? {
                body["secret_values"] = Value::Object(s);
            }
            if !config.attrs.is_empty() {
                body["attributes"] = Value::Object(parse::pairs("attr", &config.attrs)?);
            }
            if let Some(b) = config.filter_window_bytes {
                body["filter_window_bytes"] = json!(b);
            }
            if let Some(t) = config.filter_window_tokens {
                body["filter_window_tokens"] = json!(t);
            }
            let reply = ctx.mgmt("CreateLLMModelConnection", body).await?;
            let id = reply["connection_id"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            let mut shown = reply.clone();
            for g in gateways {
                let gateway_id = ctx.resolve(Kind::Gateway, &g).await?;
                ctx.mgmt(
                    "AddGatewayModel",
                    json!({"gateway_id": gateway_id, "connection_id": id}),
                )
                .await?;
                shown = ctx
                    .mgmt("GetLLMModelConnection", json!({"connection_id": id}))
                    .await?;
            }
            output::show(ctx.json, &shown, FIELDS);
        }
        ModelCmd::Update {
            model,
            name,
            config,
            clear_secrets,
            clear_attrs,
        } => {
            let id = ctx.resolve(Kind::Model, &model).await?;
            let current = ctx
                .mgmt("GetLLMModelConnection", json!({"connection_id": id}))
                .await?;
            let stored = current["model"]["provider_config"]
                .as_object()
                .cloned()
                .unwrap_or_default();
            let provider = current["model"]["provider"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            let mut body = json!({"connection_id": id});
            if let Some(n) = name {
                body["name"] = json!(n);
            }
            if let Some(pc) = provider_config(&config, stored)? {
                body["provider_config"] = Value::Object(pc);
            }
            for (key, value) in [
                ("auth_method", &config.auth_method),
                ("credential_type", &config.credential_type),
            ] {
                if let Some(v) = value {
                    body[key] = json!(v);
                }
            }
            match (secrets(&provider, &config)?, clear_secrets) {
                (Some(_), true) => {
                    anyhow::bail!("--clear-secrets cannot be combined with --api-key or --secret")
                }
                (Some(s), false) => {
                    body["secret_values"] = Value::Object(s);
                    body["secret_values_provided"] = json!(true);
                }
                (None, true) => body["secret_values_provided"] = json!(true),
                (None, false) => {}
            }
            if clear_attrs || !config.attrs.is_empty() {
                body["attributes"] = Value::Object(parse::pairs("attr", &config.attrs)?);
                body["attributes_provided"] = json!(true);
            }
            if config.filter_window_bytes.is_some() || config.filter_window_tokens.is_some() {
                body["filter_window_bytes"] = json!(config.filter_window_bytes.unwrap_or(0));
                body["filter_window_tokens"] = json!(config.filter_window_tokens.unwrap_or(0));
                body["filter_window_provided"] = json!(true);
            }
            let reply = ctx.mgmt("UpdateLLMModelConnection", body).await?;
            output::show(ctx.json, &reply, FIELDS);
        }
        ModelCmd::Get { model } => {
            let id = ctx.resolve(Kind::Model, &model).await?;
            let reply = ctx
                .mgmt("GetLLMModelConnection", json!({"connection_id": id}))
                .await?;
            output::show(ctx.json, &reply, FIELDS);
        }
        ModelCmd::List => {
            let reply = ctx.mgmt("ListLLMModelConnections", json!({})).await?;
            output::list(
                ctx.json,
                &reply,
                "models",
                &[
                    "/name",
                    "/connection_id",
                    "/provider",
                    "/provider_config/model",
                    "/auth_method",
                ],
            );
        }
        ModelCmd::Remove { model } => {
            let id = ctx.resolve(Kind::Model, &model).await?;
            let reply = ctx
                .mgmt("DeleteLLMModelConnection", json!({"connection_id": id}))
                .await?;
            done(ctx, &reply, &format!("Removed model {model}."));
        }
        ModelCmd::OauthConnect { model } => {
            let id = ctx.resolve(Kind::Model, &model).await?;
            let reply = ctx
                .mgmt("BeginLLMOAuthConnect", json!({"connection_id": id}))
                .await?;
            output::show(
                ctx.json,
                &reply,
                &[
                    ("consent URL", "/consent_url"),
                    ("expires at", "/expires_at"),
                ],
            );
        }
        ModelCmd::OauthDisconnect { model } => {
            let id = ctx.resolve(Kind::Model, &model).await?;
            let reply = ctx
                .mgmt("DisconnectLLMOAuth", json!({"connection_id": id}))
                .await?;
            done(ctx, &reply, &format!("Disconnected model {model}."));
        }
    }
    Ok(())
}

/// Prints a confirmation (or the empty JSON reply).
pub fn done(ctx: &Ctx, reply: &Value, message: &str) {
    if ctx.json {
        output::show(true, reply, &[]);
    } else {
        println!("{message}");
    }
}
