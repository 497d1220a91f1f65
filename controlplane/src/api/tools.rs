//! Tool connections: `CreateMCPServerConnection` … `DisconnectMCPServerOAuth`, and the same
//! operations on the REST paths `/v1/tools…`.

pub mod adapters;
pub mod catalog;
pub(crate) mod checks;
pub mod rest;
mod upstream;

use std::collections::BTreeMap;

use portcullis_shared::api::tools::*;
use portcullis_shared::api::workspace::Permission;
use portcullis_shared::api::{AuthMethod, CredentialType, Empty};
use serde_json::Value;

use super::models::resolve_auth;
use super::{peruser, unary, views, Access, Ctx, Operation};
use crate::error::{exists, invalid, not_found, precondition, ApiResult};
use crate::oauth;
use crate::store::credentials::{self, Owner};
use crate::store::{gateways, now_ms, tools, Conn, WriteTx};
use crate::validate;
use portcullis_shared::api::models::BeginOAuthConnectResponse;

pub fn operations() -> Vec<(&'static str, Operation)> {
    let view = Access::Platform(Permission::GatewayView);
    let manage = Access::Platform(Permission::GatewayManage);
    vec![
        ("CreateMCPServerConnection", unary(manage, create)),
        ("UpdateMCPServerConnection", unary(manage, update)),
        ("GetMCPServerConnection", unary(view, get)),
        ("ListMCPServerConnections", unary(view, list)),
        ("DeleteMCPServerConnection", unary(manage, delete)),
        ("SyncMCPServerConnectionTools", unary(manage, sync)),
        ("BeginMCPServerOAuthConnect", unary(manage, begin_oauth)),
        ("DisconnectMCPServerOAuth", unary(manage, disconnect_oauth)),
    ]
}

fn json_text(value: &impl serde::Serialize) -> String {
    serde_json::to_string(value).unwrap_or_else(|_| "null".into())
}

/// Whether a connection or model holds a shared credential.
async fn has_shared_secrets(conn: &mut Conn, owner: Owner, id: &str) -> ApiResult<bool> {
    Ok(credentials::shared_keys(conn, owner, id)
        .await?
        .is_some_and(|keys| !keys.is_empty()))
}

/// For an update that moves a connection or model to another origin: refuses to let the
/// shared API key stored for the old one follow it, unless the update sends new secret values
/// (`secrets_sent`). `refusal` is the error, naming the setting that moved.
pub(super) async fn check_key_replaced(
    conn: &mut Conn,
    (owner, id): (Owner, &str),
    auth: (AuthMethod, CredentialType),
    secrets_sent: bool,
    refusal: &'static str,
) -> ApiResult<()> {
    if auth == (AuthMethod::ApiKey, CredentialType::Shared)
        && !secrets_sent
        && has_shared_secrets(conn, owner, id).await?
    {
        return Err(invalid(refusal));
    }
    Ok(())
}

/// Renames a connection when `name` is sent and differs; the new name must be free.
async fn rename(
    conn: &mut Conn,
    ws: &str,
    row: &mut tools::ToolRow,
    name: Option<&str>,
) -> ApiResult<()> {
    if let Some(name) = name.filter(|n| !n.is_empty() && *n != row.name) {
        let name = checks::connection_name(name)?;
        name_free(conn, ws, &name).await?;
        row.name = name;
    }
    Ok(())
}

/// Fails with `already_exists` when the workspace has a tool connection of this name.
async fn name_free(conn: &mut Conn, ws: &str, name: &str) -> ApiResult<()> {
    match tools::by_name(conn, ws, name).await? {
        Some(_) => Err(exists(format!(
            "a tool connection named '{name}' already exists"
        ))),
        None => Ok(()),
    }
}

pub async fn load(
    conn: &mut Conn,
    workspace_id: &str,
    connection_id: &str,
) -> ApiResult<tools::ToolRow> {
    let id = validate::id("connection_id", connection_id)?;
    tools::get(conn, workspace_id, &id)
        .await?
        .ok_or_else(|| not_found("tool connection", &id))
}

fn write_tools(list: Option<Vec<String>>) -> ApiResult<String> {
    let list = validate::string_list("write_tools", &list.unwrap_or_default(), 512)?;
    Ok(json_text(&list))
}

/// `field_classifications`: an object mapping a field of structured results (a name, or a
/// JSON pointer with `*` for every member) to its class, which `tool_result` guards act on
/// (DESIGN §16).
fn classifications(value: Option<Value>) -> ApiResult<String> {
    let value = value.unwrap_or(Value::Null);
    let shape = "field_classifications maps fields of structured results to a class, e.g. \
                 {\"ssn\": \"us_ssn\", \"/customers/*/email\": \"email\"}";
    match &value {
        Value::Null => {}
        Value::Object(map) => {
            for (field, class) in map {
                let class = class.as_str().unwrap_or_default();
                if field.is_empty() || field.len() > 512 || class.is_empty() || class.len() > 64 {
                    return Err(crate::error::invalid(format!(
                        "{shape}; '{field}' does not (a field of 1 to 512 characters, a class \
                         of 1 to 64)"
                    )));
                }
            }
        }
        _ => return Err(crate::error::invalid(shape)),
    }
    let text = json_text(&value);
    if text.len() > 64 * 1024 {
        return Err(crate::error::invalid(
            "field_classifications is larger than 64 KiB",
        ));
    }
    Ok(text)
}

/// Stores the connection's shared secret values sealed (nothing when there are none).
async fn put_shared(
    tx: &mut WriteTx,
    ctx: &Ctx,
    ws: &str,
    id: &str,
    secrets: &BTreeMap<String, String>,
) -> ApiResult<()> {
    if !secrets.is_empty() {
        credentials::put(
            tx.conn(),
            ctx.store().cipher(),
            ws,
            Owner::Tool,
            id,
            "",
            secrets,
        )
        .await?;
    }
    Ok(())
}

/// Stores the OAuth client secret sealed (or deletes it when `None` and `replace`).
async fn store_client_secret(
    tx: &mut WriteTx,
    ctx: &Ctx,
    ws: &str,
    id: &str,
    secret: Option<String>,
) -> ApiResult<()> {
    if let Some(secret) = secret {
        let values: BTreeMap<String, String> = [("client_secret".to_string(), secret)].into();
        credentials::put(
            tx.conn(),
            ctx.store().cipher(),
            ws,
            Owner::ToolOAuthClient,
            id,
            "",
            &values,
        )
        .await?;
    }
    Ok(())
}

async fn create(
    ctx: Ctx,
    req: CreateMCPServerConnectionRequest,
) -> ApiResult<CreateMCPServerConnectionResponse> {
    let name = checks::connection_name(&req.name)?;
    let protocol = checks::protocol(&req.protocol)?;
    if protocol == Protocol::Stdio {
        ctx.require(Permission::ToolsStdio)?;
    }
    let allow_stdio = ctx.app.config.allow_stdio_tools;
    let config = checks::config(protocol, req.protocol_config.as_ref(), true, allow_stdio)?;
    let (method, ctype) = resolve_auth(req.auth_method, req.credential_type)?;
    let secrets = req.secret_values.unwrap_or_default();
    checks::check_secrets(method, ctype, &secrets)?;
    let keys: Vec<String> = secrets.keys().cloned().collect();
    checks::check_whole(protocol, &config, method, ctype, &keys)?;
    let (auth_config, client_secret) =
        checks::auth_config(method, &req.auth_config.unwrap_or_default())?;

    let ws = ctx.workspace_id().to_string();
    let mut tx = ctx.store().write(&ws).await?;
    name_free(tx.conn(), &ws, &name).await?;
    let now = now_ms();
    let row = tools::ToolRow {
        id: uuid::Uuid::new_v4().to_string(),
        workspace_id: ws.clone(),
        name,
        protocol: protocol.as_str().to_string(),
        protocol_config: json_text(&config.to_value()),
        auth_method: method.as_str().to_string(),
        credential_type: ctype.as_str().to_string(),
        auth_config: json_text(&auth_config),
        field_classifications: classifications(req.field_classifications)?,
        write_tools: write_tools(req.write_tools)?,
        created_at: now,
        updated_at: now,
    };
    tools::insert(tx.conn(), &row).await?;
    put_shared(&mut tx, &ctx, &ws, &row.id, &secrets).await?;
    store_client_secret(&mut tx, &ctx, &ws, &row.id, client_secret).await?;
    let tool = views::tool(tx.conn(), &row).await?;
    tx.commit().await?;
    tracing::info!(connection_id = %row.id, protocol = %row.protocol, "Tool connection created.");
    Ok(CreateMCPServerConnectionResponse {
        connection_id: row.id,
        tool,
    })
}

/// The spec's update rules: protocol, config, classifications and write tools are overwritten
/// (an omitted protocol keeps the stored one, since a connection cannot be without one); an
/// empty auth method, credential type, auth config or name keeps the stored value; a header
/// list replaces the stored list whole; switching auth clears the credential.
async fn update(
    ctx: Ctx,
    req: UpdateMCPServerConnectionRequest,
) -> ApiResult<ToolConnectionResponse> {
    let ws = ctx.workspace_id().to_string();
    let mut tx = ctx.store().write(&ws).await?;
    let mut row = load(tx.conn(), &ws, &req.connection_id).await?;
    let stored_protocol =
        Protocol::parse(&row.protocol).ok_or_else(|| views::corrupt("protocol"))?;
    if stored_protocol == Protocol::Rest {
        return adapters::update_installed(&ctx, tx, row, req).await;
    }
    let (protocol, config, config_text) = updated_protocol(&ctx, &row, stored_protocol, &req)?;
    rename(tx.conn(), &ws, &mut row, req.name.as_deref()).await?;
    let current = views::auth_pair(&row.auth_method, &row.credential_type)?;
    let (method, ctype) =
        super::models::updated_auth(current, req.auth_method, req.credential_type)?;
    let auth_changed = (method, ctype) != current;
    let stored_config: Value = serde_json::from_str(&row.protocol_config).unwrap_or_default();
    // Credentials given for one server never follow its connection to another.
    let moved = validate::origin_moved(&stored_config, &config.to_value(), "url");
    let new_secrets = req.secret_values.filter(|s| !s.is_empty());
    if moved && validate::config_origin(&config.to_value(), "url").is_some() {
        let refusal = "protocol_config.url moves this connection to another origin: its stored \
                       secrets were given for the old one; send secret_values again";
        check_key_replaced(
            tx.conn(),
            (Owner::Tool, &row.id),
            (method, ctype),
            new_secrets.is_some(),
            refusal,
        )
        .await?;
    }
    if let Some(s) = &new_secrets {
        checks::check_secrets(method, ctype, s)?;
    }
    let keys: Vec<String> = match &new_secrets {
        Some(s) => s.keys().cloned().collect(),
        None if auth_changed || moved => Vec::new(),
        None => credentials::shared_keys(tx.conn(), Owner::Tool, &row.id)
            .await?
            .unwrap_or_default(),
    };
    checks::check_whole(protocol, &config, method, ctype, &keys)?;
    let client_secret = set_auth_config(&mut row, method, req.auth_config)?;
    if auth_changed || moved {
        credentials::delete_all(tx.conn(), Owner::Tool, &row.id).await?;
        if moved || method != AuthMethod::OAuth {
            credentials::delete_all(tx.conn(), Owner::ToolOAuthClient, &row.id).await?;
        }
    }
    if let Some(s) = &new_secrets {
        put_shared(&mut tx, &ctx, &ws, &row.id, s).await?;
    }
    store_client_secret(&mut tx, &ctx, &ws, &row.id, client_secret).await?;
    row.protocol = protocol.as_str().to_string();
    row.protocol_config = config_text;
    row.auth_method = method.as_str().to_string();
    row.credential_type = ctype.as_str().to_string();
    row.field_classifications = classifications(req.field_classifications)?;
    row.write_tools = write_tools(req.write_tools)?;
    row.updated_at = now_ms();
    tools::update(tx.conn(), &row).await?;
    let tool = views::tool(tx.conn(), &row).await?;
    tx.commit().await?;
    tracing::info!(connection_id = %row.id, auth_changed, "Tool connection updated.");
    Ok(ToolConnectionResponse { tool })
}

/// The protocol and config an update leaves (an omitted protocol keeps the stored one), with
/// the config as stored. Setting up a stdio server, or changing one, needs the stdio
/// permission.
fn updated_protocol(
    ctx: &Ctx,
    row: &tools::ToolRow,
    stored_protocol: Protocol,
    req: &UpdateMCPServerConnectionRequest,
) -> ApiResult<(Protocol, checks::Config, String)> {
    let protocol = match req.protocol.as_deref().filter(|p| !p.is_empty()) {
        Some(p) => checks::protocol(p)?,
        None => stored_protocol,
    };
    let config = checks::config(
        protocol,
        req.protocol_config.as_ref(),
        false,
        ctx.app.config.allow_stdio_tools,
    )?;
    let config_text = json_text(&config.to_value());
    if protocol == Protocol::Stdio
        && (stored_protocol != Protocol::Stdio || config_text != row.protocol_config)
    {
        ctx.require(Permission::ToolsStdio)?;
    }
    Ok((protocol, config, config_text))
}

/// Replaces the OAuth client settings when sent, returning a client secret given with them to
/// store; a connection not on OAuth keeps none.
fn set_auth_config(
    row: &mut tools::ToolRow,
    method: AuthMethod,
    sent: Option<serde_json::Map<String, Value>>,
) -> ApiResult<Option<String>> {
    let mut client_secret = None;
    if let Some(c) = sent.filter(|c| !c.is_empty()) {
        let (settings, secret) = checks::auth_config(method, &c)?;
        row.auth_config = json_text(&settings);
        client_secret = secret;
    } else if method != AuthMethod::OAuth {
        row.auth_config = "{}".into();
    }
    Ok(client_secret)
}

async fn get(ctx: Ctx, req: ToolConnectionIdRequest) -> ApiResult<ToolConnectionResponse> {
    let mut conn = ctx.store().read().await?;
    let row = load(&mut conn, ctx.workspace_id(), &req.connection_id).await?;
    Ok(ToolConnectionResponse {
        tool: views::tool(&mut conn, &row).await?,
    })
}

async fn list(
    ctx: Ctx,
    _req: ListMCPServerConnectionsRequest,
) -> ApiResult<ListMCPServerConnectionsResponse> {
    let mut conn = ctx.store().read().await?;
    let mut out = Vec::new();
    for row in tools::list(&mut conn, ctx.workspace_id()).await? {
        out.push(views::tool(&mut conn, &row).await?);
    }
    Ok(ListMCPServerConnectionsResponse { tools: out })
}

/// Removing a tool detaches it from every gateway (agents routing through it lose it) and
/// deletes its credentials, header configuration and catalog.
async fn delete(ctx: Ctx, req: ToolConnectionIdRequest) -> ApiResult<Empty> {
    let ws = ctx.workspace_id().to_string();
    let mut tx = ctx.store().write(&ws).await?;
    let row = load(tx.conn(), &ws, &req.connection_id).await?;
    gateways::remove_target(tx.conn(), &row.id).await?;
    credentials::delete_all(tx.conn(), Owner::Tool, &row.id).await?;
    credentials::delete_all(tx.conn(), Owner::ToolOAuthClient, &row.id).await?;
    tools::delete(tx.conn(), &ws, &row.id).await?;
    tx.commit().await?;
    tracing::info!(connection_id = %row.id, "Tool connection deleted.");
    Ok(Empty {})
}

/// Manual sync is for per-user tools, with the administrator's own credential; shared tools
/// are synced by the gateways.
async fn sync(ctx: Ctx, req: ToolSubjectRequest) -> ApiResult<SyncToolsResponse> {
    let ws = ctx.workspace_id().to_string();
    let mut conn = ctx.store().read().await?;
    let row = load(&mut conn, &ws, &req.connection_id).await?;
    if row.credential_type != CredentialType::PerUser.as_str() {
        return Err(precondition(format!(
            "tool '{}' is not per-user; shared tools are synced by the gateways when they start and when the connection changes",
            row.name
        )));
    }
    let subject = admin_subject(req.act_as_sub.as_deref())?;
    let credential = if row.auth_method == AuthMethod::OAuth.as_str() {
        let c = oauth::connection(&ctx.app, &mut conn, &ws, Owner::Tool, &row.id).await?;
        oauth::tokens::current(&ctx.app, &c, &subject)
            .await?
            .map(|g| g.header(now_ms()).0)
    } else {
        credentials::open(
            &mut conn,
            ctx.store().cipher(),
            Owner::Tool,
            &row.id,
            &subject,
        )
        .await?
    };
    drop(conn);
    let Some(credential) = credential else {
        return Err(precondition(format!(
            "no credential is stored for subject '{}' on tool '{}'; provision one first",
            validate::clip(&subject),
            row.name
        )));
    };
    let listed = upstream::list_tools(&ctx.app.oauth, &row, &credential).await?;
    let mut tx = ctx.store().write(&ws).await?;
    let found = DiscoveredTool::from_listed(&listed);
    let (added, changed) = super::sync::record(tx.conn(), &row.id, &found).await?;
    let mut out = Vec::new();
    for c in tools::catalog(tx.conn(), &row.id).await? {
        out.push(catalog::entry(&c, false)?);
    }
    if changed {
        tx.commit().await?;
    }
    tracing::info!(connection_id = %row.id, added, "Per-user tool synced with an administrator's credential.");
    Ok(SyncToolsResponse { tools: out })
}

/// The administrator a per-user consent or sync acts as: `act_as_sub`, else their email.
/// (Platform keys carry no person's email to default to.)
fn admin_subject(act_as_sub: Option<&str>) -> ApiResult<String> {
    let subject = act_as_sub
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .ok_or_else(|| {
            invalid(
                "act_as_sub is required on a per-user tool: name the administrator's own act-as \
                 subject (the verified sub their agents act as)",
            )
        })?;
    if subject.len() > 320 {
        return Err(invalid("act_as_sub is longer than 320 characters"));
    }
    Ok(subject)
}

/// A one-time consent link: the tool's shared grant, or on a per-user tool the calling
/// administrator's own.
async fn begin_oauth(ctx: Ctx, req: ToolSubjectRequest) -> ApiResult<BeginOAuthConnectResponse> {
    let ws = ctx.workspace_id().to_string();
    let mut conn = ctx.store().read().await?;
    let id = validate::id("connection_id", &req.connection_id)?;
    let c = oauth::connection(&ctx.app, &mut conn, &ws, Owner::Tool, &id).await?;
    drop(conn);
    let subject = match c.per_user {
        true => admin_subject(req.act_as_sub.as_deref())?,
        false => String::new(),
    };
    // Endpoints and the client are found now, so a misconfiguration is reported here rather
    // than to whoever opens the link.
    oauth::provider(&ctx.app, &c, true).await?;
    let (url, expires_at) = peruser::mint_link(
        &ctx,
        &ws,
        (Owner::Tool, &c.id),
        &subject,
        peruser::LinkFor::Administrator,
    )
    .await?;
    Ok(BeginOAuthConnectResponse {
        consent_url: url,
        expires_at,
    })
}

/// Revokes the tool's grants at the provider and deletes them; the client settings stay.
/// Disconnecting a disconnected tool has no effect.
async fn disconnect_oauth(ctx: Ctx, req: ToolConnectionIdRequest) -> ApiResult<Empty> {
    let ws = ctx.workspace_id().to_string();
    let mut conn = ctx.store().read().await?;
    let id = validate::id("connection_id", &req.connection_id)?;
    let c = oauth::connection(&ctx.app, &mut conn, &ws, Owner::Tool, &id).await?;
    drop(conn);
    oauth::disconnect(&ctx.app, &c).await?;
    Ok(Empty {})
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use serde_json::json;

    use super::classifications;

    #[test]
    fn field_classifications_map_fields_to_classes() {
        let ok = json!({"ssn": "us_ssn", "/customers/*/email": "email"});
        assert_eq!(classifications(Some(ok.clone())).unwrap(), ok.to_string());
        assert_eq!(classifications(None).unwrap(), "null");
        for bad in [
            json!(["ssn"]),
            json!({"ssn": ""}),
            json!({"ssn": 5}),
            json!({"": "pii"}),
        ] {
            let e = classifications(Some(bad.clone())).unwrap_err().to_string();
            assert!(e.contains("maps fields"), "{bad}: {e}");
        }
    }
}
