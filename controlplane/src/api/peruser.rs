//! Per-user credentials (DESIGN §14): a gateway asks for a person's credential for a
//! per-user connection (`SyncService/GetCredential`) and gets it, or a fresh one-use link
//! (ten minutes, bound to the connection and the person) where the person stores one; the
//! administrator lists who has one and deletes them.

use portcullis_shared::api::credentials::*;
use portcullis_shared::api::workspace::Permission;
use portcullis_shared::api::Empty;
use portcullis_shared::keys;
use portcullis_shared::snapshot::{
    CredentialOwner, GetCredentialRequest, GetCredentialResponse, Secrets,
};

use super::{unary, views, Access, Ctx, Operation};
use crate::error::{invalid, not_found, precondition, ApiResult};
use crate::oauth;
use crate::per_user::{either, per_user};
use crate::store::credentials::{self, Owner};
use crate::store::{now_ms, provision};
use crate::validate;

/// How long a provision link is valid.
pub const LINK_TTL_MS: i64 = 10 * 60 * 1000;

pub fn sync_operations() -> Vec<(&'static str, Operation)> {
    vec![("GetCredential", unary(Access::Deployment, get_credential))]
}

pub fn operations() -> Vec<(&'static str, Operation)> {
    vec![
        (
            "ListUserCredentials",
            unary(Access::Platform(Permission::GatewayView), list),
        ),
        (
            "DeleteUserCredential",
            unary(Access::Platform(Permission::GatewayManage), delete),
        ),
    ]
}

/// Which page a link opens, and for whom.
pub enum LinkFor<'a> {
    /// A person's own credential, asked for by the call of the agent with this id: the person
    /// signs in where that agent's people do before the link does anything.
    Person { agent_id: &'a str },
    /// An administrator's consent, handed back to that administrator only.
    Administrator,
}

/// A fresh one-use link for `subject` (`""`: an administrator's shared consent) to store
/// their credential for the connection.
pub async fn mint_link(
    ctx: &Ctx,
    ws: &str,
    (owner, id): (Owner, &str),
    subject: &str,
    link_for: LinkFor<'_>,
) -> ApiResult<(String, String)> {
    let (page, agent_id) = match link_for {
        LinkFor::Person { agent_id } => ("provision", agent_id),
        LinkFor::Administrator => ("connect", ""),
    };
    let token = link_token();
    let expires_at = now_ms() + LINK_TTL_MS;
    let mut tx = ctx.store().write_unscoped().await?;
    provision::insert(
        tx.conn(),
        &provision::ProvisionRow {
            token_hash: keys::hash(&token),
            workspace_id: ws.to_string(),
            owner_kind: owner.as_str().to_string(),
            owner_id: id.to_string(),
            subject: subject.to_string(),
            expires_at,
            used_at: None,
            page: page.to_string(),
            agent_id: agent_id.to_string(),
        },
    )
    .await?;
    tx.commit().await?;
    Ok((
        format!("{}/{page}/{token}", ctx.app.base_url),
        views::ts(expires_at),
    ))
}

/// 43 random base62 characters (256 bits) from the operating system.
fn link_token() -> String {
    use rand::distributions::{Alphanumeric, DistString};
    Alphanumeric.sample_string(&mut rand::rngs::OsRng, 43)
}

fn owner_of(o: CredentialOwner) -> Owner {
    match o {
        CredentialOwner::Tool => Owner::Tool,
        CredentialOwner::Model => Owner::Model,
    }
}

async fn get_credential(ctx: Ctx, req: GetCredentialRequest) -> ApiResult<GetCredentialResponse> {
    let ws = ctx.workspace_id().to_string();
    if req.subject.len() > 320 {
        return Err(invalid(
            "subject must be the person's verified act-as sub and its source (up to 320 characters)",
        ));
    }
    let owner = owner_of(req.owner);
    if req.subject.is_empty() {
        return shared_oauth(&ctx, &ws, owner, &req.connection_id).await;
    }
    let mut conn = ctx.store().read().await?;
    let c = per_user(&mut conn, &ws, owner, &req.connection_id).await?;
    let stored = if c.oauth {
        let oc = oauth::connection(&ctx.app, &mut conn, &ws, owner, &c.id).await?;
        drop(conn);
        oauth::tokens::current(&ctx.app, &oc, &req.subject)
            .await?
            .map(|g| g.header(now_ms()))
            .map(|(h, keep)| (h, Some(keep)))
    } else {
        let values =
            credentials::open(&mut conn, ctx.store().cipher(), owner, &c.id, &req.subject).await?;
        values.map(|v| (v, None))
    };
    if let Some((values, cache_seconds)) = stored {
        return Ok(GetCredentialResponse {
            secret_values: Some(Secrets(values)),
            connection_name: c.name,
            provision_url: None,
            expires_at: None,
            cache_seconds,
        });
    }
    // A gateway older than person-bound links names no agent: its links are refused when
    // opened, with a request for a new one.
    let agent_id = match req.agent_id.as_str() {
        "" => String::new(),
        id => crate::validate::id("agent_id", id)?,
    };
    let link_for = LinkFor::Person {
        agent_id: &agent_id,
    };
    let (url, expires_at) = mint_link(&ctx, &ws, (c.owner, &c.id), &req.subject, link_for).await?;
    Ok(GetCredentialResponse {
        secret_values: None,
        connection_name: c.name,
        provision_url: Some(url),
        expires_at: Some(expires_at),
        cache_seconds: None,
    })
}

/// A shared OAuth connection's current access token (refreshed when due).
async fn shared_oauth(
    ctx: &Ctx,
    ws: &str,
    owner: Owner,
    id: &str,
) -> ApiResult<GetCredentialResponse> {
    let id = validate::id("connection_id", id)?;
    let mut conn = ctx.store().read().await?;
    let c = oauth::connection(&ctx.app, &mut conn, ws, owner, &id).await?;
    drop(conn);
    let (kind, begin) = match owner {
        Owner::Model => ("model", "BeginLLMOAuthConnect"),
        _ => ("tool", "BeginMCPServerOAuthConnect"),
    };
    if c.per_user {
        return Err(invalid(format!(
            "{kind} '{}' uses each person's own grant: the subject is required",
            c.name
        )));
    }
    let Some(grant) = oauth::tokens::current(&ctx.app, &c, "").await? else {
        return Err(precondition(format!(
            "{kind} '{}' is not connected: an administrator must complete its OAuth consent \
             ({begin})",
            c.name
        )));
    };
    let (values, keep) = grant.header(now_ms());
    Ok(GetCredentialResponse {
        secret_values: Some(Secrets(values)),
        connection_name: c.name,
        provision_url: None,
        expires_at: None,
        cache_seconds: Some(keep),
    })
}

async fn list(ctx: Ctx, req: UserCredentialsRequest) -> ApiResult<ListUserCredentialsResponse> {
    let mut conn = ctx.store().read().await?;
    let c = either(&mut conn, ctx.workspace_id(), &req.connection_id).await?;
    let credentials = credentials::subjects(&mut conn, c.owner, &c.id)
        .await?
        .into_iter()
        .map(|(subject, at)| UserCredential {
            subject,
            updated_at: views::ts(at),
        })
        .collect();
    Ok(ListUserCredentialsResponse { credentials })
}

/// Deletes a person's credential; an OAuth grant is revoked at the provider first.
async fn delete(ctx: Ctx, req: DeleteUserCredentialRequest) -> ApiResult<Empty> {
    let ws = ctx.workspace_id().to_string();
    let mut conn = ctx.store().read().await?;
    let c = either(&mut conn, &ws, &req.connection_id).await?;
    let found = if c.oauth {
        let oc = oauth::connection(&ctx.app, &mut conn, &ws, c.owner, &c.id).await?;
        drop(conn);
        oauth::tokens::revoke_subject(&ctx.app, &oc, &req.subject).await?
    } else {
        drop(conn);
        let mut tx = ctx.store().write_unscoped().await?;
        let found = credentials::delete_subject(tx.conn(), c.owner, &c.id, &req.subject).await?;
        tx.commit().await?;
        found
    };
    if !found {
        return Err(not_found(
            "credential of subject",
            &validate::clip(&req.subject),
        ));
    }
    Ok(Empty {})
}
