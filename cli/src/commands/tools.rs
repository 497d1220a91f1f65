//! `portcullis tool …`

use serde_json::{json, Map, Value};

use super::done;
use crate::args::{HeaderCmd, InstallArgs, ToolCmd, ToolFields};
use crate::ctx::{Ctx, Kind};
use crate::{output, parse};

const FIELDS: &[(&str, &str)] = &[
    ("name", "/tool/name"),
    ("connection_id", "/tool/connection_id"),
    ("protocol", "/tool/protocol"),
    ("url", "/tool/protocol_config/url"),
    ("command", "/tool/protocol_config/command"),
    ("headers", "/tool/protocol_config/headers"),
    ("auth", "/tool/auth_method"),
    ("credential", "/tool/credential_type"),
    ("secret keys", "/tool/secret_keys"),
    ("operations", "/tool/tool_count"),
    ("gateways", "/tool/gateways"),
];

/// `NAME=VALUE`, `NAME=secret:KEY` or `NAME=actas` → a header entry.
pub fn header(spec: &str) -> anyhow::Result<Value> {
    let (name, value) = parse::pair("header", spec)?;
    Ok(match value.as_str() {
        "actas" => json!({"name": name, "source": "actas"}),
        v => match v.strip_prefix("secret:") {
            Some(key) => json!({"name": name, "source": "secret", "value": key}),
            None => json!({"name": name, "source": "literal", "value": v}),
        },
    })
}

/// The protocol config from the flags, starting from `base` (the stored config on update).
fn protocol_config(
    f: &ToolFields,
    protocol: &str,
    mut base: Map<String, Value>,
) -> anyhow::Result<Value> {
    match protocol {
        "stdio" => {
            if let Some(c) = &f.command {
                base.insert("command".into(), json!(c));
            }
            if !f.args.is_empty() {
                base.insert("args".into(), json!(f.args));
            }
            if !f.env.is_empty() {
                base.insert("env".into(), Value::Object(parse::pairs("env", &f.env)?));
            }
            if let Some(c) = &f.cwd {
                base.insert("cwd".into(), json!(c));
            }
            base.remove("url");
            base.remove("headers");
        }
        _ => {
            if let Some(u) = &f.url {
                base.insert("url".into(), json!(u));
            }
            if !f.headers.is_empty() {
                let list: anyhow::Result<Vec<Value>> =
                    f.headers.iter().map(|h| header(h)).collect();
                base.insert("headers".into(), Value::Array(list?));
            }
            for key in ["command", "args", "env", "cwd"] {
                base.remove(key);
            }
        }
    }
    Ok(Value::Object(base))
}

fn secrets(f: &ToolFields) -> anyhow::Result<Map<String, Value>> {
    let mut map = parse::pairs("secret", &f.secrets)?;
    if let Some(a) = &f.authorization {
        map.insert("Authorization".into(), json!(a));
    }
    Ok(map)
}

fn auth(body: &mut Value, f: &ToolFields) -> anyhow::Result<()> {
    for (key, value) in [
        ("auth_method", &f.auth_method),
        ("credential_type", &f.credential_type),
    ] {
        if let Some(v) = value {
            body[key] = json!(v);
        }
    }
    if let Some(text) = &f.oauth_config {
        body["auth_config"] = Value::Object(parse::json_object("oauth-config", text)?);
    }
    Ok(())
}

/// Sends an update carrying the full state to keep, as the API's overwrite rules require.
async fn update_with(
    ctx: &Ctx,
    id: &str,
    stored: &Value,
    changes: impl FnOnce(&mut Value),
) -> anyhow::Result<Value> {
    let t = &stored["tool"];
    let mut body = json!({
        "connection_id": id,
        "protocol": t["protocol"],
        "protocol_config": t["protocol_config"],
        "field_classifications": t["field_classifications"],
        "write_tools": t["write_tools"],
    });
    changes(&mut body);
    ctx.mgmt("UpdateMCPServerConnection", body).await
}

pub async fn run(ctx: &Ctx, cmd: ToolCmd) -> anyhow::Result<()> {
    let reply = match cmd {
        ToolCmd::Add {
            name,
            fields,
            gateways,
        } => add(ctx, name, &fields, gateways).await?,
        ToolCmd::Update { tool, name, fields } => update(ctx, &tool, name, &fields).await?,
        ToolCmd::Get { tool } => on_tool(ctx, "GetMCPServerConnection", &tool, json!({})).await?,
        ToolCmd::List => return list(ctx).await,
        ToolCmd::Remove { tool } => {
            let reply = on_tool(ctx, "DeleteMCPServerConnection", &tool, json!({})).await?;
            done(ctx, &reply, &format!("Removed tool {tool}."));
            return Ok(());
        }
        ToolCmd::Catalog => return catalog(ctx).await,
        ToolCmd::Install(args) => return install(ctx, args).await,
        ToolCmd::Upgrade { tool } => upgrade(ctx, &tool).await?,
        ToolCmd::Uninstall { tool } => {
            let reply = on_tool(ctx, "UninstallCatalogConnection", &tool, json!({})).await?;
            let message = format!("Uninstalled {tool} and deleted its credential.");
            done(ctx, &reply, &message);
            return Ok(());
        }
        ToolCmd::OauthConnect { tool, act_as_sub } => {
            return oauth_connect(ctx, &tool, act_as_sub).await
        }
        ToolCmd::OauthDisconnect { tool } => {
            let reply = on_tool(ctx, "DisconnectMCPServerOAuth", &tool, json!({})).await?;
            let message = format!("Disconnected the OAuth grant of tool {tool}.");
            done(ctx, &reply, &message);
            return Ok(());
        }
        ToolCmd::Sync { tool, act_as_sub } => {
            let extra = json!({"act_as_sub": act_as_sub});
            let reply = on_tool(ctx, "SyncMCPServerConnectionTools", &tool, extra).await?;
            output::list(ctx.json, &reply, "tools", &["/name", "/status"]);
            return Ok(());
        }
        ToolCmd::Block {
            tool,
            operation,
            message,
        } => status(ctx, "BlockTool", &tool, &operation, message).await?,
        ToolCmd::Deprecate {
            tool,
            operation,
            message,
        } => status(ctx, "DeprecateTool", &tool, &operation, message).await?,
        ToolCmd::Restore { tool, operation } => {
            status(ctx, "RestoreTool", &tool, &operation, None).await?
        }
        ToolCmd::Tools {
            tool,
            with_schema,
            include_blocked,
        } => return operations(ctx, &tool, with_schema, include_blocked).await,
        ToolCmd::Header(h) => return headers(ctx, h).await,
    };
    output::show(ctx.json, &reply, FIELDS);
    Ok(())
}

/// Sets the secrets and write tools the flags give; a body without them keeps the stored ones.
fn set_secrets_and_write_tools(body: &mut Value, secrets: Map<String, Value>, f: &ToolFields) {
    if !secrets.is_empty() {
        body["secret_values"] = Value::Object(secrets);
    }
    if !f.write_tools.is_empty() {
        body["write_tools"] = json!(f.write_tools);
    }
}

/// `tool add`: creates the connection, then attaches it to each gateway in turn.
async fn add(
    ctx: &Ctx,
    name: String,
    fields: &ToolFields,
    gateways: Vec<String>,
) -> anyhow::Result<Value> {
    let protocol = fields
        .protocol
        .clone()
        .unwrap_or_else(|| "streamable-http".into());
    let config = protocol_config(fields, &protocol, Map::new())?;
    let mut body = json!({"name": name, "protocol": protocol, "protocol_config": config});
    auth(&mut body, fields)?;
    set_secrets_and_write_tools(&mut body, secrets(fields)?, fields);
    let mut reply = ctx.mgmt("CreateMCPServerConnection", body).await?;
    let id = connection_id(&reply);
    for g in gateways {
        let gateway_id = ctx.resolve(Kind::Gateway, &g).await?;
        reply = attach(ctx, &id, &gateway_id).await?;
    }
    Ok(reply)
}

/// `tool update`: the flags given change the stored connection; the protocol config starts
/// from the stored one.
async fn update(
    ctx: &Ctx,
    tool: &str,
    name: Option<String>,
    fields: &ToolFields,
) -> anyhow::Result<Value> {
    let id = ctx.resolve(Kind::Tool, tool).await?;
    let stored = get(ctx, &id).await?;
    let protocol = fields.protocol.clone().unwrap_or_else(|| {
        stored["tool"]["protocol"]
            .as_str()
            .unwrap_or("streamable-http")
            .to_string()
    });
    let base = stored["tool"]["protocol_config"]
        .as_object()
        .cloned()
        .unwrap_or_default();
    let config = protocol_config(fields, &protocol, base)?;
    let s = secrets(fields)?;
    let mut changes = json!({});
    auth(&mut changes, fields)?;
    update_with(ctx, &id, &stored, |body| {
        body["protocol"] = json!(protocol);
        body["protocol_config"] = config;
        if let Some(n) = name {
            body["name"] = json!(n);
        }
        if let (Some(body), Value::Object(changes)) = (body.as_object_mut(), changes) {
            body.extend(changes);
        }
        set_secrets_and_write_tools(body, s, fields);
    })
    .await
}

/// `tool list`.
async fn list(ctx: &Ctx) -> anyhow::Result<()> {
    let reply = ctx.mgmt("ListMCPServerConnections", json!({})).await?;
    output::list(
        ctx.json,
        &reply,
        "tools",
        &[
            "/name",
            "/connection_id",
            "/protocol",
            "/auth_method",
            "/tool_count",
        ],
    );
    Ok(())
}

/// `tool catalog`: the services `tool install` can install.
async fn catalog(ctx: &Ctx) -> anyhow::Result<()> {
    let reply = ctx.mgmt("ListCatalogServices", json!({})).await?;
    output::list(
        ctx.json,
        &reply,
        "services",
        &[
            "/slug",
            "/version",
            "/auth_method",
            "/auth_header_name",
            "/supports_per_user",
            "/operations",
        ],
    );
    Ok(())
}

/// `tool upgrade`: moves a catalog connection to the catalog's current version.
async fn upgrade(ctx: &Ctx, tool: &str) -> anyhow::Result<Value> {
    let reply = on_tool(ctx, "UpgradeCatalogConnection", tool, json!({})).await?;
    if !ctx.json {
        println!(
            "{tool}: v{} → v{}",
            reply["from_version"], reply["to_version"]
        );
    }
    Ok(reply)
}

/// `tool oauth-connect`: prints the consent URL that completes the grant.
async fn oauth_connect(ctx: &Ctx, tool: &str, act_as_sub: Option<String>) -> anyhow::Result<()> {
    let extra = json!({"act_as_sub": act_as_sub});
    let reply = on_tool(ctx, "BeginMCPServerOAuthConnect", tool, extra).await?;
    output::show(
        ctx.json,
        &reply,
        &[
            ("consent url", "/consent_url"),
            ("expires at", "/expires_at"),
        ],
    );
    Ok(())
}

/// `tool tools`: the operations a connection discovered.
async fn operations(
    ctx: &Ctx,
    tool: &str,
    with_schema: bool,
    include_blocked: bool,
) -> anyhow::Result<()> {
    let body = json!({"connection_id": ctx.resolve(Kind::Tool, tool).await?, "with_schema": with_schema, "include_blocked": include_blocked});
    let reply = ctx.mgmt("ListConnectionTools", body).await?;
    output::list(
        ctx.json,
        &reply,
        "tools",
        &["/name", "/status", "/message", "/description"],
    );
    Ok(())
}

/// The stored connection with this id.
async fn get(ctx: &Ctx, id: &str) -> anyhow::Result<Value> {
    ctx.mgmt("GetMCPServerConnection", json!({"connection_id": id}))
        .await
}

/// The `connection_id` of a create or install reply.
fn connection_id(reply: &Value) -> String {
    reply["connection_id"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// Attaches the whole connection to a gateway; returns the connection as it now reads.
async fn attach(ctx: &Ctx, id: &str, gateway_id: &str) -> anyhow::Result<Value> {
    ctx.mgmt(
        "AddGatewayToolSource",
        json!({"gateway_id": gateway_id, "connection_id": id}),
    )
    .await?;
    get(ctx, id).await
}

/// Runs a management operation on the tool connection named (or with this id), with `extra`
/// fields beside its `connection_id`.
async fn on_tool(ctx: &Ctx, op: &str, tool: &str, mut extra: Value) -> anyhow::Result<Value> {
    extra["connection_id"] = json!(ctx.resolve(Kind::Tool, tool).await?);
    ctx.mgmt(op, extra).await
}

async fn status(
    ctx: &Ctx,
    op: &str,
    tool: &str,
    operation: &str,
    message: Option<String>,
) -> anyhow::Result<Value> {
    let body = json!({"connection_id": ctx.resolve(Kind::Tool, tool).await?, "tool": operation, "message": message});
    let reply = ctx.mgmt(op, body).await?;
    if !ctx.json {
        println!(
            "{}/{operation}: {}",
            tool,
            reply["tool"]["status"].as_str().unwrap_or("?")
        );
    }
    Ok(json!({}))
}

async fn headers(ctx: &Ctx, cmd: HeaderCmd) -> anyhow::Result<()> {
    let tool = match &cmd {
        HeaderCmd::List { tool } | HeaderCmd::Add { tool, .. } | HeaderCmd::Remove { tool, .. } => {
            tool.clone()
        }
    };
    let id = ctx.resolve(Kind::Tool, &tool).await?;
    let stored = get(ctx, &id).await?;
    let mut list: Vec<Value> = stored["tool"]["protocol_config"]["headers"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let same = |h: &Value, name: &str| {
        h["name"]
            .as_str()
            .is_some_and(|n| n.eq_ignore_ascii_case(name))
    };
    match cmd {
        HeaderCmd::List { .. } => {
            output::list(
                ctx.json,
                &json!({"headers": list}),
                "headers",
                &["/name", "/source", "/value"],
            );
            return Ok(());
        }
        HeaderCmd::Add { header: spec, .. } => {
            let entry = header(&spec)?;
            let name = entry["name"].as_str().unwrap_or_default().to_string();
            list.retain(|h| !same(h, &name));
            list.push(entry);
        }
        HeaderCmd::Remove { name, .. } => {
            let before = list.len();
            list.retain(|h| !same(h, &name));
            if list.len() == before {
                anyhow::bail!("tool {tool} has no header named {name}");
            }
        }
    }
    // The header list is replaced whole, together with the rest of the stored state.
    let reply = update_with(ctx, &id, &stored, |body| {
        body["protocol_config"]["headers"] = Value::Array(list)
    })
    .await?;
    output::list(
        ctx.json,
        &json!({"headers": reply["tool"]["protocol_config"]["headers"]}),
        "headers",
        &["/name", "/source", "/value"],
    );
    Ok(())
}

/// `tool install`: the adapter's auth header carries the key; gateways attach after.
async fn install(ctx: &Ctx, a: InstallArgs) -> anyhow::Result<()> {
    let services = ctx.mgmt("ListCatalogServices", json!({})).await?;
    let header = services["services"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|s| s["slug"] == a.slug.as_str())
        .and_then(|s| s["auth_header_name"].as_str())
        .unwrap_or_default()
        .to_string();
    let mut body = json!({"slug": a.slug, "name": a.name, "tool_filter": a.operations});
    if let Some(key) = a.api_key {
        body["secret_values"] = json!({ header: key });
    }
    if a.per_user {
        body["credential_type"] = json!("per-user");
    }
    if let Some(url) = a.base_url {
        body["base_url"] = json!(url);
    }
    // Gateways are checked before anything is installed.
    let mut gateway_ids = Vec::new();
    for g in &a.gateways {
        gateway_ids.push(ctx.resolve(Kind::Gateway, g).await?);
    }
    let mut reply = ctx.mgmt("InstallCatalogConnection", body).await?;
    let id = connection_id(&reply);
    for gateway_id in gateway_ids {
        reply = attach(ctx, &id, &gateway_id).await?;
    }
    output::show(ctx.json, &reply, FIELDS);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_specs() {
        assert_eq!(
            header("X-Team=blue").unwrap(),
            json!({"name": "X-Team", "source": "literal", "value": "blue"})
        );
        assert_eq!(
            header("X-Key=secret:api").unwrap(),
            json!({"name": "X-Key", "source": "secret", "value": "api"})
        );
        assert_eq!(
            header("X-As=actas").unwrap(),
            json!({"name": "X-As", "source": "actas"})
        );
        assert!(header("nothing").is_err());
    }
}
