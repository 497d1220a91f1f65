//! Act-as verification providers: `CreateActAsProvider` … `DeleteActAsProvider`. An `oidc`
//! provider is an issuer whose tokens gateways verify against its published keys; an `hmac`
//! provider is a shared secret several agents sign identities with.

use std::collections::BTreeMap;

use portcullis_shared::api::actas::*;
use portcullis_shared::api::workspace::Permission;
use portcullis_shared::api::Empty;

use super::{unary, views, Access, Ctx, Operation};
use crate::error::{exists, invalid, not_found, precondition, ApiResult};
use crate::store::actas_providers::{self, ProviderRow};
use crate::store::credentials::{self, Owner};
use crate::store::{now_ms, Conn, WriteTx};
use crate::validate;

pub fn operations() -> Vec<(&'static str, Operation)> {
    let view = Access::Platform(Permission::AgentsView);
    let manage = Access::Platform(Permission::AgentsRegister);
    vec![
        ("CreateActAsProvider", unary(manage, create)),
        ("UpdateActAsProvider", unary(manage, update)),
        ("GetActAsProvider", unary(view, get)),
        ("ListActAsProviders", unary(view, list)),
        ("DeleteActAsProvider", unary(manage, delete)),
    ]
}

const MAX_TEXT: usize = 512;

async fn view(conn: &mut Conn, row: ProviderRow) -> ApiResult<ActAsProvider> {
    let method =
        ProviderMethod::parse(&row.method).ok_or_else(|| views::corrupt("provider method"))?;
    let hmac_secret_set = credentials::shared_keys(conn, Owner::ActAsProvider, &row.id)
        .await?
        .is_some();
    let agents = actas_providers::agents_using(conn, &row.workspace_id, &row.id).await?;
    Ok(ActAsProvider {
        provider_id: row.id,
        workspace_id: row.workspace_id,
        name: row.name,
        method,
        issuer: row.issuer,
        audience: row.audience,
        jwks_url: row.jwks_url,
        email_claim: row.email_claim,
        groups_claim: row.groups_claim,
        trust_unverified_email: row.trust_unverified_email != 0,
        hmac_secret_set,
        signin_client_secret_set: row.signin_client_secret.is_some(),
        signin_client_id: row.signin_client_id,
        agent_count: agents.len() as u64,
        created_at: views::ts(row.created_at),
        updated_at: views::ts(row.updated_at),
    })
}

/// The provider named by id or name.
pub async fn load(conn: &mut Conn, ws: &str, given: &str) -> ApiResult<ProviderRow> {
    if given.is_empty() {
        return Err(invalid("provider_id is required"));
    }
    let found = match actas_providers::get(conn, ws, given).await? {
        Some(p) => Some(p),
        None => actas_providers::by_name(conn, ws, given).await?,
    };
    found.ok_or_else(|| not_found("act-as verification provider", given))
}

fn claim_name(field: &str, value: &str) -> ApiResult<String> {
    let ok = |c: char| c.is_ascii_alphanumeric() || "_-.:/".contains(c);
    if value.is_empty() || value.len() > 128 || !value.chars().all(ok) {
        return Err(invalid(format!(
            "{field} must be 1 to 128 letters, digits and _ - . : /"
        )));
    }
    Ok(value.to_string())
}

fn text(field: &str, value: &str) -> ApiResult<String> {
    if value.len() > MAX_TEXT {
        return Err(invalid(format!(
            "{field} is longer than {MAX_TEXT} characters"
        )));
    }
    Ok(value.to_string())
}

fn hmac_secret(value: &str) -> ApiResult<String> {
    if value.len() < 16 || value.len() > 1024 {
        return Err(invalid("hmac_secret must be 16 to 1024 characters"));
    }
    Ok(value.to_string())
}

/// The provider as it will be stored is whole for its method.
fn check(row: &ProviderRow, has_secret: bool) -> ApiResult<()> {
    match row.method.as_str() {
        "oidc" => {
            if row.issuer.is_none() {
                return Err(invalid("issuer is required for an oidc provider"));
            }
            if row.audience.is_none() {
                return Err(invalid(
                    "audience is required for an oidc provider: the value tokens' aud must hold",
                ));
            }
            if has_secret {
                return Err(invalid("hmac_secret is only for hmac providers"));
            }
        }
        _ => {
            if row.issuer.is_some() || row.audience.is_some() || row.jwks_url.is_some() {
                return Err(invalid(
                    "issuer, audience and jwks_url are only for oidc providers",
                ));
            }
            if !has_secret {
                return Err(invalid("hmac_secret is required for an hmac provider"));
            }
            if row.trust_unverified_email != 0 {
                return Err(invalid(
                    "trust_unverified_email is only for oidc providers: an hmac identity's \
                     email is what the agent signs",
                ));
            }
        }
    }
    Ok(())
}

async fn put_secret(tx: &mut WriteTx, ctx: &Ctx, row: &ProviderRow, secret: &str) -> ApiResult<()> {
    let values: BTreeMap<String, String> = [("secret".to_string(), secret.to_string())].into();
    credentials::put(
        tx.conn(),
        ctx.store().cipher(),
        &row.workspace_id,
        Owner::ActAsProvider,
        &row.id,
        "",
        &values,
    )
    .await?;
    Ok(())
}

/// Sets the provider's sign-in client: `""` clears it; a new id drops the old secret; a
/// secret needs an id. Only `oidc` providers sign people in.
fn set_signin_client(
    ctx: &Ctx,
    row: &mut ProviderRow,
    id: Option<&str>,
    secret: Option<&str>,
) -> ApiResult<()> {
    match id {
        Some("") => {
            row.signin_client_id = None;
            row.signin_client_secret = None;
        }
        Some(id) if row.signin_client_id.as_deref() != Some(id) => {
            row.signin_client_id = Some(text("signin_client_id", id)?);
            row.signin_client_secret = None;
        }
        _ => {}
    }
    if let Some(secret) = secret {
        if row.signin_client_id.is_none() {
            return Err(invalid("signin_client_secret needs a signin_client_id"));
        }
        let secret = text("signin_client_secret", secret)?;
        let cipher = ctx.store().cipher();
        row.signin_client_secret = Some(actas_providers::seal_signin_secret(
            cipher, &row.id, &secret,
        )?);
    }
    if row.signin_client_id.is_some() && row.method != ProviderMethod::Oidc.as_str() {
        return Err(invalid("signin_client_id is only for oidc providers"));
    }
    Ok(())
}

async fn create(ctx: Ctx, req: CreateActAsProviderRequest) -> ApiResult<ActAsProviderResponse> {
    let name = validate::name("name", &req.name)?;
    let method = req.method.unwrap_or(ProviderMethod::Oidc);
    let ws = ctx.workspace_id().to_string();
    let now = now_ms();
    let row = ProviderRow {
        id: uuid::Uuid::new_v4().to_string(),
        workspace_id: ws.clone(),
        name: name.clone(),
        method: method.as_str().to_string(),
        issuer: req
            .issuer
            .as_deref()
            .map(|v| validate::https_url("issuer", v).map(|_| v.to_string()))
            .transpose()?,
        audience: req
            .audience
            .as_deref()
            .map(|v| text("audience", v))
            .transpose()?,
        jwks_url: req
            .jwks_url
            .as_deref()
            .map(|v| validate::https_url("jwks_url", v).map(|_| v.to_string()))
            .transpose()?,
        email_claim: claim_name("email_claim", req.email_claim.as_deref().unwrap_or("email"))?,
        groups_claim: claim_name(
            "groups_claim",
            req.groups_claim.as_deref().unwrap_or("groups"),
        )?,
        trust_unverified_email: i64::from(req.trust_unverified_email.unwrap_or(false)),
        signin_client_id: None,
        signin_client_secret: None,
        created_at: now,
        updated_at: now,
    };
    let mut row = row;
    let (id, secret) = (
        req.signin_client_id.as_deref(),
        req.signin_client_secret.as_deref(),
    );
    set_signin_client(&ctx, &mut row, id, secret)?;
    let secret = req.hmac_secret.as_deref().map(hmac_secret).transpose()?;
    check(&row, secret.is_some())?;
    let mut tx = ctx.store().write(&ws).await?;
    if actas_providers::by_name(tx.conn(), &ws, &name)
        .await?
        .is_some()
    {
        return Err(exists(format!(
            "an act-as verification provider named '{name}' already exists"
        )));
    }
    actas_providers::insert(tx.conn(), &row).await?;
    if let Some(secret) = &secret {
        put_secret(&mut tx, &ctx, &row, secret).await?;
    }
    let provider = view(tx.conn(), row).await?;
    tx.commit().await?;
    tracing::info!(provider_id = %provider.provider_id, "Act-as verification provider created.");
    Ok(ActAsProviderResponse { provider })
}

async fn update(ctx: Ctx, req: UpdateActAsProviderRequest) -> ApiResult<ActAsProviderResponse> {
    let ws = ctx.workspace_id().to_string();
    let mut tx = ctx.store().write(&ws).await?;
    let mut row = load(tx.conn(), &ws, &req.provider_id).await?;
    // Whom a provider trusts decides whom its agents' allow lists admit.
    let trust_changes = req.issuer.is_some()
        || req.audience.is_some()
        || req.jwks_url.is_some()
        || req.email_claim.is_some()
        || req.groups_claim.is_some()
        || req.trust_unverified_email.is_some()
        || req.hmac_secret.is_some();
    if trust_changes
        && !actas_providers::agents_using(tx.conn(), &ws, &row.id)
            .await?
            .is_empty()
    {
        ctx.require(Permission::RulesDeploy)?;
    }
    if let Some(name) = &req.name {
        let name = validate::name("name", name)?;
        if name != row.name
            && actas_providers::by_name(tx.conn(), &ws, &name)
                .await?
                .is_some()
        {
            return Err(exists(format!(
                "an act-as verification provider named '{name}' already exists"
            )));
        }
        row.name = name;
    }
    if let Some(issuer) = &req.issuer {
        validate::https_url("issuer", issuer)?;
        row.issuer = Some(issuer.clone());
    }
    if let Some(audience) = &req.audience {
        row.audience = Some(text("audience", audience)?);
    }
    if let Some(url) = &req.jwks_url {
        row.jwks_url = if url.is_empty() {
            None
        } else {
            validate::https_url("jwks_url", url)?;
            Some(url.clone())
        };
    }
    if let Some(claim) = &req.email_claim {
        row.email_claim = claim_name("email_claim", claim)?;
    }
    if let Some(claim) = &req.groups_claim {
        row.groups_claim = claim_name("groups_claim", claim)?;
    }
    if let Some(trust) = req.trust_unverified_email {
        row.trust_unverified_email = i64::from(trust);
    }
    let (id, secret) = (
        req.signin_client_id.as_deref(),
        req.signin_client_secret.as_deref(),
    );
    set_signin_client(&ctx, &mut row, id, secret)?;
    let secret = req.hmac_secret.as_deref().map(hmac_secret).transpose()?;
    let stored = credentials::shared_keys(tx.conn(), Owner::ActAsProvider, &row.id)
        .await?
        .is_some();
    check(&row, secret.is_some() || stored)?;
    row.updated_at = now_ms();
    actas_providers::update(tx.conn(), &row).await?;
    if let Some(secret) = &secret {
        put_secret(&mut tx, &ctx, &row, secret).await?;
    }
    let provider = view(tx.conn(), row).await?;
    tx.commit().await?;
    Ok(ActAsProviderResponse { provider })
}

async fn get(ctx: Ctx, req: ActAsProviderRefRequest) -> ApiResult<ActAsProviderResponse> {
    let mut conn = ctx.store().read().await?;
    let row = load(&mut conn, ctx.workspace_id(), &req.provider_id).await?;
    Ok(ActAsProviderResponse {
        provider: view(&mut conn, row).await?,
    })
}

async fn list(ctx: Ctx, _req: ListActAsProvidersRequest) -> ApiResult<ListActAsProvidersResponse> {
    let mut conn = ctx.store().read().await?;
    let mut providers = Vec::new();
    for row in actas_providers::list(&mut conn, ctx.workspace_id()).await? {
        providers.push(view(&mut conn, row).await?);
    }
    Ok(ListActAsProvidersResponse { providers })
}

/// Refused while an agent names the provider: deleting it would leave those agents unable to
/// verify anyone.
async fn delete(ctx: Ctx, req: ActAsProviderRefRequest) -> ApiResult<Empty> {
    let ws = ctx.workspace_id().to_string();
    let mut tx = ctx.store().write(&ws).await?;
    let row = load(tx.conn(), &ws, &req.provider_id).await?;
    let users = actas_providers::agents_using(tx.conn(), &ws, &row.id).await?;
    if !users.is_empty() {
        return Err(precondition(format!(
            "act-as verification provider '{}' is used by agents {}; point them elsewhere first",
            row.name,
            users.join(", ")
        )));
    }
    credentials::delete_all(tx.conn(), Owner::ActAsProvider, &row.id).await?;
    actas_providers::delete(tx.conn(), &ws, &row.id).await?;
    tx.commit().await?;
    Ok(Empty {})
}
