//! Model connections: `CreateLLMModelConnection` … `DisconnectLLMOAuth`.

pub(super) mod checks;

use std::collections::BTreeMap;

use portcullis_shared::api::models::*;
use portcullis_shared::api::workspace::Permission;
use portcullis_shared::api::{AuthMethod, CredentialType, Empty};
use portcullis_shared::provider;
use serde_json::{Map, Value};

use super::{unary, views, Access, Ctx, Operation};
use crate::error::{exists, invalid, not_found, precondition, ApiResult};
use crate::oauth;
use crate::store::credentials::{self, Owner};
use crate::store::{gateways, models, now_ms, pools, Conn};
use crate::validate;

pub use checks::{resolve_auth, updated_auth};

pub fn operations() -> Vec<(&'static str, Operation)> {
    let view = Access::Platform(Permission::GatewayView);
    let manage = Access::Platform(Permission::GatewayManage);
    vec![
        ("CreateLLMModelConnection", unary(manage, create)),
        ("UpdateLLMModelConnection", unary(manage, update)),
        ("GetLLMModelConnection", unary(view, get)),
        ("ListLLMModelConnections", unary(view, list)),
        ("DeleteLLMModelConnection", unary(manage, delete)),
        ("BeginLLMOAuthConnect", unary(manage, begin_oauth)),
        ("DisconnectLLMOAuth", unary(manage, disconnect_oauth)),
    ]
}

/// Model and pool names share one namespace: both are what agents send as `model`.
pub async fn ensure_model_name_free(
    conn: &mut Conn,
    workspace_id: &str,
    name: &str,
) -> ApiResult<()> {
    if models::by_name(conn, workspace_id, name).await?.is_some() {
        return Err(exists(format!(
            "a model connection named '{name}' already exists"
        )));
    }
    if pools::by_name(conn, workspace_id, name).await?.is_some() {
        return Err(exists(format!(
            "a pool named '{name}' already exists; models and pools share the names agents send \
             as `model`"
        )));
    }
    Ok(())
}

async fn create(
    ctx: Ctx,
    req: CreateLLMModelConnectionRequest,
) -> ApiResult<CreateLLMModelConnectionResponse> {
    let name = validate::name("name", &req.name)?;
    let provider = provider::find(&req.provider).ok_or_else(|| {
        invalid(format!(
            "provider '{}' is unknown; known providers: {}",
            validate::clip(&req.provider),
            provider::known_ids()
        ))
    })?;
    let config = req.provider_config.ok_or_else(|| {
        invalid(
            "provider_config is required and must hold at least `model` (the upstream model id)",
        )
    })?;
    checks::check_provider_config(provider, &config)?;
    let (auth_method, credential_type) = resolve_auth(req.auth_method, req.credential_type)?;
    let secrets = req.secret_values.unwrap_or_default();
    checks::check_secrets(provider, auth_method, credential_type, &secrets)?;
    let attributes = req.attributes.unwrap_or_default();
    validate::attributes("attributes", &attributes)?;
    let (bytes, tokens) = checks::filter_window(
        req.filter_window_bytes.unwrap_or(0),
        req.filter_window_tokens.unwrap_or(0),
    )?;
    let (auth_config, client_secret) =
        super::tools::checks::auth_config(auth_method, &req.auth_config.unwrap_or_default())?;

    let ws = ctx.workspace_id().to_string();
    let store = ctx.store();
    let mut tx = store.write(&ws).await?;
    ensure_model_name_free(tx.conn(), &ws, &name).await?;
    let now = now_ms();
    let row = models::ModelRow {
        id: uuid::Uuid::new_v4().to_string(),
        workspace_id: ws.clone(),
        name,
        provider: provider.id.to_string(),
        provider_config: serde_json::Value::Object(config).to_string(),
        auth_method: auth_method.as_str().to_string(),
        credential_type: credential_type.as_str().to_string(),
        attributes: serde_json::to_string(&attributes).unwrap_or_else(|_| "{}".into()),
        filter_window_bytes: bytes,
        filter_window_tokens: tokens,
        created_at: now,
        updated_at: now,
        auth_config: serde_json::Value::Object(auth_config).to_string(),
    };
    models::insert(tx.conn(), &row).await?;
    put_client_secret(tx.conn(), store.cipher(), &ws, &row.id, client_secret).await?;
    put_shared_key(tx.conn(), store.cipher(), &ws, &row.id, &secrets).await?;
    let model = views::model(tx.conn(), &row).await?;
    tx.commit().await?;
    tracing::info!(connection_id = %row.id, provider = %row.provider, "Model connection created.");
    Ok(CreateLLMModelConnectionResponse {
        connection_id: row.id,
        model,
    })
}

/// Omitted fields keep their stored values (secret values, attributes and the filter window
/// change only with their `*_provided` flag) and the provider never changes; moving the
/// config to another origin or switching auth deletes the stored credential.
async fn update(
    ctx: Ctx,
    mut req: UpdateLLMModelConnectionRequest,
) -> ApiResult<ModelConnectionResponse> {
    let id = validate::id("connection_id", &req.connection_id)?;
    let ws = ctx.workspace_id().to_string();
    let store = ctx.store();
    let mut tx = store.write(&ws).await?;
    let mut row = models::get(tx.conn(), &ws, &id)
        .await?
        .ok_or_else(|| not_found("model connection", &id))?;
    let provider = provider::find(&row.provider).ok_or_else(|| views::corrupt("provider"))?;
    check_provider_kept(&row, req.provider.as_deref())?;
    if let Some(name) = req
        .name
        .as_deref()
        .filter(|n| !n.is_empty() && *n != row.name)
    {
        let name = validate::name("name", name)?;
        ensure_model_name_free(tx.conn(), &ws, &name).await?;
        row.name = name;
    }
    let moved = match req.provider_config.take() {
        Some(config) => set_provider_config(provider, &mut row, config)?,
        None => false,
    };

    let current = views::auth_pair(&row.auth_method, &row.credential_type)?;
    let (method, ctype) = checks::updated_auth(current, req.auth_method, req.credential_type)?;
    let auth_changed = (method, ctype) != current;
    if moved {
        leave_old_origin(tx.conn(), &row, (method, ctype), req.secret_values_provided).await?;
    }
    if auth_changed {
        // Switching how the upstream is authenticated deletes the stored credential.
        credentials::delete_all(tx.conn(), Owner::Model, &row.id).await?;
        row.auth_method = method.as_str().to_string();
        row.credential_type = ctype.as_str().to_string();
    }
    let auth_config = req.auth_config.take();
    set_auth_config(
        tx.conn(),
        store.cipher(),
        &ws,
        &mut row,
        method,
        auth_config,
    )
    .await?;

    // A value sent without its `*_provided` flag is ignored (the stored one is kept), so a
    // client that echoes the whole record back cannot clobber secrets.
    if req.secret_values_provided {
        let values = req.secret_values.take().unwrap_or_default();
        checks::check_secrets(provider, method, ctype, &values)?;
        // Only the shared credential: people's own keys stay.
        credentials::delete_subject(tx.conn(), Owner::Model, &row.id, "").await?;
        put_shared_key(tx.conn(), store.cipher(), &ws, &row.id, &values).await?;
    }
    set_attributes_and_window(&mut row, req)?;

    row.updated_at = now_ms();
    models::update(tx.conn(), &row).await?;
    let model = views::model(tx.conn(), &row).await?;
    tx.commit().await?;
    tracing::info!(connection_id = %row.id, auth_changed, "Model connection updated.");
    Ok(ModelConnectionResponse { model })
}

/// Refuses an update naming another provider than the model's.
fn check_provider_kept(row: &models::ModelRow, provider: Option<&str>) -> ApiResult<()> {
    match provider.filter(|p| !p.is_empty() && *p != row.provider) {
        Some(p) => Err(invalid(format!(
            "provider cannot change (this model uses '{}', not '{}'); add a new model and replace \
             it in pools and gateways",
            row.provider,
            validate::clip(p)
        ))),
        None => Ok(()),
    }
}

/// Replaces the provider config; returns whether it moves the model to another origin.
fn set_provider_config(
    provider: &provider::Provider,
    row: &mut models::ModelRow,
    config: Map<String, Value>,
) -> ApiResult<bool> {
    checks::check_provider_config(provider, &config)?;
    let stored: Value = serde_json::from_str(&row.provider_config).unwrap_or_default();
    let config = Value::Object(config);
    // Credentials given for one endpoint never follow the model to another.
    let moved = validate::origin_moved(&stored, &config, "base_url");
    row.provider_config = config.to_string();
    Ok(moved)
}

/// The model moved to another origin: its credentials and OAuth client are deleted. A shared
/// key stored for the old origin is not silently dropped: the update must send a new one.
async fn leave_old_origin(
    conn: &mut Conn,
    row: &models::ModelRow,
    auth: (AuthMethod, CredentialType),
    secrets_sent: bool,
) -> ApiResult<()> {
    let to_somewhere = validate::config_origin(
        &serde_json::from_str(&row.provider_config).unwrap_or_default(),
        "base_url",
    )
    .is_some();
    if to_somewhere {
        let refusal = "provider_config.base_url moves this model to another origin: its stored \
                       key was given for the old one; send secret_values again";
        super::tools::check_key_replaced(
            conn,
            (Owner::Model, &row.id),
            auth,
            secrets_sent,
            refusal,
        )
        .await?;
    }
    credentials::delete_all(conn, Owner::Model, &row.id).await?;
    credentials::delete_all(conn, Owner::ModelOAuthClient, &row.id).await?;
    Ok(())
}

/// Replaces the OAuth client settings when sent (sealing a client secret given with them); a
/// model not on OAuth keeps none.
async fn set_auth_config(
    conn: &mut Conn,
    cipher: &portcullis_shared::seal::Cipher,
    ws: &str,
    row: &mut models::ModelRow,
    method: AuthMethod,
    sent: Option<Map<String, Value>>,
) -> ApiResult<()> {
    if let Some(c) = sent.filter(|c| !c.is_empty()) {
        let (settings, secret) = super::tools::checks::auth_config(method, &c)?;
        row.auth_config = Value::Object(settings).to_string();
        put_client_secret(conn, cipher, ws, &row.id, secret).await?;
    } else if method != AuthMethod::OAuth {
        row.auth_config = "{}".into();
        credentials::delete_all(conn, Owner::ModelOAuthClient, &row.id).await?;
    }
    Ok(())
}

/// The attributes and the filter window, each replaced only with its `*_provided` flag.
fn set_attributes_and_window(
    row: &mut models::ModelRow,
    req: UpdateLLMModelConnectionRequest,
) -> ApiResult<()> {
    if req.attributes_provided {
        let attrs = req.attributes.unwrap_or_default();
        validate::attributes("attributes", &attrs)?;
        row.attributes = serde_json::to_string(&attrs).unwrap_or_else(|_| "{}".into());
    }
    if req.filter_window_provided {
        let (bytes, tokens) = checks::filter_window(
            req.filter_window_bytes.unwrap_or(0),
            req.filter_window_tokens.unwrap_or(0),
        )?;
        row.filter_window_bytes = bytes;
        row.filter_window_tokens = tokens;
    }
    Ok(())
}

async fn get(ctx: Ctx, req: ModelConnectionIdRequest) -> ApiResult<ModelConnectionResponse> {
    let id = validate::id("connection_id", &req.connection_id)?;
    let mut conn = ctx.store().read().await?;
    let row = models::get(&mut conn, ctx.workspace_id(), &id)
        .await?
        .ok_or_else(|| not_found("model connection", &id))?;
    Ok(ModelConnectionResponse {
        model: views::model(&mut conn, &row).await?,
    })
}

async fn list(
    ctx: Ctx,
    _req: ListLLMModelConnectionsRequest,
) -> ApiResult<ListLLMModelConnectionsResponse> {
    let mut conn = ctx.store().read().await?;
    let mut out = Vec::new();
    for row in models::list(&mut conn, ctx.workspace_id()).await? {
        out.push(views::model(&mut conn, &row).await?);
    }
    Ok(ListLLMModelConnectionsResponse { models: out })
}

/// Deleting a model removes it from every pool and gateway and deletes its credentials.
async fn delete(ctx: Ctx, req: ModelConnectionIdRequest) -> ApiResult<Empty> {
    let id = validate::id("connection_id", &req.connection_id)?;
    let ws = ctx.workspace_id().to_string();
    let mut tx = ctx.store().write(&ws).await?;
    if models::get(tx.conn(), &ws, &id).await?.is_none() {
        return Err(not_found("model connection", &id));
    }
    gateways::remove_target(tx.conn(), &id).await?;
    credentials::delete_all(tx.conn(), Owner::Model, &id).await?;
    credentials::delete_all(tx.conn(), Owner::ModelOAuthClient, &id).await?;
    crate::store::quotas::delete_for(tx.conn(), &ws, &id).await?;
    models::delete(tx.conn(), &ws, &id).await?;
    tx.commit().await?;
    tracing::info!(connection_id = %id, "Model connection deleted.");
    Ok(Empty {})
}

/// Stores a model's shared credential sealed (nothing when the values are empty).
async fn put_shared_key(
    conn: &mut Conn,
    cipher: &portcullis_shared::seal::Cipher,
    ws: &str,
    id: &str,
    values: &BTreeMap<String, String>,
) -> ApiResult<()> {
    if !values.is_empty() {
        credentials::put(conn, cipher, ws, Owner::Model, id, "", values).await?;
    }
    Ok(())
}

/// Stores a model's OAuth client secret sealed (nothing when none was given).
async fn put_client_secret(
    conn: &mut Conn,
    cipher: &portcullis_shared::seal::Cipher,
    ws: &str,
    id: &str,
    secret: Option<String>,
) -> ApiResult<()> {
    if let Some(secret) = secret {
        let values = [("client_secret".to_string(), secret)].into();
        credentials::put(conn, cipher, ws, Owner::ModelOAuthClient, id, "", &values).await?;
    }
    Ok(())
}

/// A one-time consent link for the model's shared grant. People connect per-user OAuth
/// models themselves, through the link their first call returns.
async fn begin_oauth(
    ctx: Ctx,
    req: ModelConnectionIdRequest,
) -> ApiResult<BeginOAuthConnectResponse> {
    let ws = ctx.workspace_id().to_string();
    let id = validate::id("connection_id", &req.connection_id)?;
    let mut conn = ctx.store().read().await?;
    let c = oauth::connection(&ctx.app, &mut conn, &ws, Owner::Model, &id).await?;
    drop(conn);
    if c.per_user {
        return Err(precondition(format!(
            "model '{}' uses per-user OAuth: each end user connects through the provision URL \
             returned on their first call",
            c.name
        )));
    }
    oauth::provider(&ctx.app, &c, true).await?;
    let (url, expires_at) = super::peruser::mint_link(
        &ctx,
        &ws,
        (Owner::Model, &c.id),
        "",
        super::peruser::LinkFor::Administrator,
    )
    .await?;
    Ok(BeginOAuthConnectResponse {
        consent_url: url,
        expires_at,
    })
}

/// Revokes the model's grants at the provider and deletes them; the client settings stay.
/// Disconnecting a disconnected model has no effect.
async fn disconnect_oauth(ctx: Ctx, req: ModelConnectionIdRequest) -> ApiResult<Empty> {
    let ws = ctx.workspace_id().to_string();
    let id = validate::id("connection_id", &req.connection_id)?;
    let mut conn = ctx.store().read().await?;
    let c = oauth::connection(&ctx.app, &mut conn, &ws, Owner::Model, &id).await?;
    drop(conn);
    oauth::disconnect(&ctx.app, &c).await?;
    Ok(Empty {})
}
