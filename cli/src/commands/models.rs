//! `portcullis model …`: model connections.

use std::collections::BTreeMap;

use anyhow::{bail, Context as _};
use portcullis_shared::api::gateways::{AddGatewayModelRequest, GatewayResponse};
use portcullis_shared::api::models::*;
use portcullis_shared::api::service::MGMT;
use serde_json::{Map, Value};

use crate::args::{ModelCmd, ModelConfig};
use crate::ctx::{Ctx, Kind, Reply};
use crate::output::{self, Lines};
use crate::parse;

pub async fn run(ctx: &Ctx, cmd: ModelCmd) -> anyhow::Result<()> {
    match cmd {
        ModelCmd::Add {
            name,
            provider,
            config,
            gateways,
        } => add(ctx, name, provider, config, gateways).await,
        ModelCmd::Update {
            model,
            name,
            config,
            clear_secrets,
            clear_attrs,
        } => update(ctx, &model, name, config, clear_secrets, clear_attrs).await,
        ModelCmd::Get { model } => {
            let id = ctx.resolve(Kind::Model, &model).await?;
            let reply = get(ctx, &id).await?;
            ctx.print(&reply, |r| show(&r.model));
            Ok(())
        }
        ModelCmd::List => {
            let req = ListLLMModelConnectionsRequest {
                workspace_id: ctx.ws().await?,
            };
            let reply: Reply<ListLLMModelConnectionsResponse> =
                ctx.send(MGMT, "ListLLMModelConnections", &req).await?;
            ctx.print(&reply, |r| table(&r.models));
            Ok(())
        }
        ModelCmd::Remove { model } => {
            let req = id_request(ctx, &model).await?;
            let message = format!("Removed model {model}.");
            ctx.send_done(MGMT, "DeleteLLMModelConnection", &req, &message)
                .await
        }
        ModelCmd::OauthConnect { model } => {
            let reply: Reply<BeginOAuthConnectResponse> = ctx
                .send(
                    MGMT,
                    "BeginLLMOAuthConnect",
                    &id_request(ctx, &model).await?,
                )
                .await?;
            ctx.print(&reply, |r| {
                Lines::new()
                    .add("consent url", &r.consent_url)
                    .add("expires at", &r.expires_at)
                    .print()
            });
            Ok(())
        }
        ModelCmd::OauthDisconnect { model } => {
            let req = id_request(ctx, &model).await?;
            let message = format!("Disconnected the OAuth grant of model {model}.");
            ctx.send_done(MGMT, "DisconnectLLMOAuth", &req, &message)
                .await
        }
    }
}

async fn id_request(ctx: &Ctx, model: &str) -> anyhow::Result<ModelConnectionIdRequest> {
    Ok(ModelConnectionIdRequest {
        workspace_id: ctx.ws().await?,
        connection_id: ctx.resolve(Kind::Model, model).await?,
    })
}

async fn get(ctx: &Ctx, id: &str) -> anyhow::Result<Reply<ModelConnectionResponse>> {
    let req = ModelConnectionIdRequest {
        workspace_id: ctx.ws().await?,
        connection_id: id.to_string(),
    };
    ctx.send(MGMT, "GetLLMModelConnection", &req).await
}

async fn add(
    ctx: &Ctx,
    name: String,
    provider: String,
    c: ModelConfig,
    gateways: Vec<String>,
) -> anyhow::Result<()> {
    if c.config.is_none() && c.upstream_model.is_none() {
        bail!("--model (the upstream model id) is required, or give the whole --config");
    }
    let attributes = parse::string_map("attr", &c.attrs)?;
    let req = CreateLLMModelConnectionRequest {
        workspace_id: ctx.ws().await?,
        name,
        provider_config: provider_config(&c, Map::new())?,
        secret_values: secrets(&provider, &c)?,
        provider,
        auth_method: c.auth_method,
        credential_type: c.credential_type,
        attributes: (!attributes.is_empty()).then_some(attributes),
        filter_window_bytes: c.filter_window_bytes,
        filter_window_tokens: c.filter_window_tokens,
        auth_config: oauth_config(&c)?,
    };
    let created: Reply<CreateLLMModelConnectionResponse> =
        ctx.send(MGMT, "CreateLLMModelConnection", &req).await?;
    let id = created.body.connection_id.clone();
    for g in &gateways {
        let req = AddGatewayModelRequest {
            workspace_id: ctx.ws().await?,
            gateway_id: ctx.resolve(Kind::Gateway, g).await?,
            connection_id: id.clone(),
        };
        let _: Reply<GatewayResponse> = ctx
            .send(MGMT, "AddGatewayModel", &req)
            .await
            .with_context(|| format!("model created ({id}), but attaching it to gateway {g}"))?;
    }
    if gateways.is_empty() {
        ctx.print(&created, |r| show(&r.model));
    } else {
        // Shows the model with the gateways it now belongs to.
        let reply = get(ctx, &id).await?;
        ctx.print(&reply, |r| show(&r.model));
    }
    Ok(())
}

async fn update(
    ctx: &Ctx,
    model: &str,
    name: Option<String>,
    c: ModelConfig,
    clear_secrets: bool,
    clear_attrs: bool,
) -> anyhow::Result<()> {
    let id = ctx.resolve(Kind::Model, model).await?;
    let current = get(ctx, &id).await?.body.model;
    let secret_values = secrets(&current.provider, &c)?;
    let secret_values_provided = clear_secrets || secret_values.is_some();
    let attributes_provided = clear_attrs || !c.attrs.is_empty();
    let window_provided = c.filter_window_bytes.is_some() || c.filter_window_tokens.is_some();
    let req = UpdateLLMModelConnectionRequest {
        workspace_id: ctx.ws().await?,
        connection_id: id,
        name,
        provider: None,
        provider_config: provider_config(&c, current.provider_config)?,
        auth_method: c.auth_method,
        credential_type: c.credential_type,
        secret_values: secret_values_provided.then(|| secret_values.unwrap_or_default()),
        secret_values_provided,
        attributes: attributes_provided
            .then(|| parse::string_map("attr", &c.attrs))
            .transpose()?,
        attributes_provided,
        // The API replaces both bounds together; one given keeps the stored other.
        filter_window_bytes: window_provided
            .then(|| c.filter_window_bytes.unwrap_or(current.filter_window_bytes)),
        filter_window_tokens: window_provided.then(|| {
            c.filter_window_tokens
                .unwrap_or(current.filter_window_tokens)
        }),
        filter_window_provided: window_provided,
        auth_config: oauth_config(&c)?,
    };
    let reply: Reply<ModelConnectionResponse> =
        ctx.send(MGMT, "UpdateLLMModelConnection", &req).await?;
    ctx.print(&reply, |r| show(&r.model));
    Ok(())
}

/// `--oauth-config`, which must be a JSON object.
fn oauth_config(c: &ModelConfig) -> anyhow::Result<Option<Map<String, Value>>> {
    c.oauth_config
        .as_deref()
        .map(|text| parse::json_object("oauth-config", text))
        .transpose()
}

/// The provider_config to send: `--config` whole, or the flags overlaid on `base` (empty on
/// add, the stored config on update); `None` when no config flag was given.
fn provider_config(
    c: &ModelConfig,
    mut base: Map<String, Value>,
) -> anyhow::Result<Option<Map<String, Value>>> {
    if let Some(text) = &c.config {
        return match serde_json::from_str(text).context("--config is not valid JSON")? {
            Value::Object(map) => Ok(Some(map)),
            _ => bail!("--config must be a JSON object"),
        };
    }
    let flags = [
        ("model", &c.upstream_model),
        ("base_url", &c.base_url),
        ("region", &c.region),
        ("project", &c.project),
        ("location", &c.location),
        ("api_version", &c.api_version),
        ("role_arn", &c.role_arn),
        ("external_id", &c.external_id),
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

/// `--secret` values plus `--api-key` under the provider's header; `None` when neither given.
fn secrets(provider: &str, c: &ModelConfig) -> anyhow::Result<Option<BTreeMap<String, String>>> {
    let mut map = parse::string_map("secret", &c.secrets)?;
    if let Some(key) = &c.api_key {
        let (header, value) = parse::api_key_secret(provider, key)?;
        map.insert(header, value);
    }
    let aws = [
        ("aws_access_key_id", &c.aws_access_key_id),
        ("aws_secret_access_key", &c.aws_secret_access_key),
        ("aws_session_token", &c.aws_session_token),
    ];
    for (field, value) in aws {
        if let Some(v) = value {
            map.insert(field.into(), v.clone());
        }
    }
    if let Some(path) = &c.service_account_file {
        let json =
            std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        map.insert("service_account_json".into(), json);
    }
    Ok((!map.is_empty()).then_some(map))
}

fn config_text(config: &Map<String, Value>) -> String {
    let parts: Vec<String> = config
        .iter()
        .filter(|(k, _)| k.as_str() != "model")
        .map(|(k, v)| match v {
            Value::String(s) => format!("{k}={s}"),
            other => format!("{k}={other}"),
        })
        .collect();
    parts.join(", ")
}

fn upstream(m: &ModelConnection) -> &str {
    m.provider_config
        .get("model")
        .and_then(Value::as_str)
        .unwrap_or("-")
}

fn show(m: &ModelConnection) {
    let attributes: Vec<String> = m
        .attributes
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    let window = (m.filter_window_bytes > 0 || m.filter_window_tokens > 0).then(|| {
        format!(
            "{} bytes, {} tokens",
            m.filter_window_bytes, m.filter_window_tokens
        )
    });
    Lines::new()
        .add("name", &m.name)
        .add("connection_id", &m.connection_id)
        .add("provider", &m.provider)
        .add("upstream model", upstream(m))
        .add("config", config_text(&m.provider_config))
        .add("auth", m.auth_method.as_str())
        .add("credential", m.credential_type.as_str())
        .add("secrets stored", output::join(&m.secret_keys))
        .add("has credential", output::yes(m.has_credential))
        .opt("oauth", m.oauth_state.as_ref())
        .add("attributes", output::join(&attributes))
        .opt("filter window", window)
        .add("gateways", output::names(&m.gateways))
        .add("pools", output::names(&m.pools))
        .print();
}

fn table(models: &[ModelConnection]) {
    let rows = models
        .iter()
        .map(|m| {
            vec![
                m.name.clone(),
                m.connection_id.clone(),
                m.provider.clone(),
                upstream(m).to_string(),
                format!("{}/{}", m.auth_method.as_str(), m.credential_type.as_str()),
                output::names(&m.gateways),
            ]
        })
        .collect();
    output::table(
        &["name", "id", "provider", "model", "auth", "gateways"],
        rows,
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_flags_overlay_the_stored_config() {
        let mut stored = Map::new();
        stored.insert("model".into(), "old".into());
        stored.insert("base_url".into(), "http://a".into());
        let c = ModelConfig {
            upstream_model: Some("new".into()),
            ..ModelConfig::default()
        };
        let out = provider_config(&c, stored.clone()).unwrap().unwrap();
        assert_eq!(out["model"], "new");
        assert_eq!(out["base_url"], "http://a", "unnamed keys are kept");
        assert!(provider_config(&ModelConfig::default(), stored)
            .unwrap()
            .is_none());
        let whole = ModelConfig {
            config: Some(r#"{"model":"x"}"#.into()),
            region: Some("ignored".into()),
            ..ModelConfig::default()
        };
        let out = provider_config(&whole, Map::new()).unwrap().unwrap();
        assert_eq!(Value::Object(out), serde_json::json!({"model": "x"}));
        let bad = ModelConfig {
            config: Some("[1]".into()),
            ..ModelConfig::default()
        };
        assert!(provider_config(&bad, Map::new()).is_err());
    }

    #[test]
    fn api_key_and_secrets_merge() {
        let c = ModelConfig {
            api_key: Some("sk".into()),
            secrets: vec!["X-Org=acme".into()],
            ..ModelConfig::default()
        };
        let map = secrets("openai", &c).unwrap().unwrap();
        assert_eq!(map["Authorization"], "Bearer sk");
        assert_eq!(map["X-Org"], "acme");
        assert!(secrets("openai", &ModelConfig::default())
            .unwrap()
            .is_none());
    }
}
