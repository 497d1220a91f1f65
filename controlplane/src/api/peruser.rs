//! Per-user credentials (DESIGN §14): a gateway asks for a person's credential for a
//! per-user connection (`SyncService/GetCredential`) and gets it, or a fresh one-use link
//! (ten minutes, bound to the connection and the person) where the person stores one; the
//! administrator lists who has one and deletes them.

use std::collections::BTreeMap;

use portcullis_shared::api::credentials::*;
use portcullis_shared::api::workspace::Permission;
use portcullis_shared::api::{AuthMethod, CredentialType, Empty};
use portcullis_shared::keys;
use portcullis_shared::snapshot::{
    CredentialOwner, GetCredentialRequest, GetCredentialResponse, Secrets,
};

use super::{unary, views, Access, Ctx, Operation};
use crate::error::{invalid, not_found, precondition, ApiResult};
use crate::oauth;
use crate::store::credentials::{self, Owner};
use crate::store::{models, now_ms, provision, tools, Conn};
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

/// A per-user API-key connection: how a person's key becomes the header it sends.
pub struct PerUser {
    pub owner: Owner,
    pub id: String,
    pub name: String,
    /// A model's provider (its API-key header); `None` for a tool (`Authorization: Bearer`,
    /// or the header `auth_config.header` names).
    provider: Option<String>,
    /// A tool's header and scheme (an installed adapter's), when not `Authorization: Bearer`.
    header: Option<(String, String)>,
    /// Each person consents at the provider (per-user OAuth) instead of entering a key.
    pub oauth: bool,
}

impl PerUser {
    /// The stored values for a key a person entered.
    pub fn secret(&self, key: &str) -> Result<BTreeMap<String, String>, String> {
        let (header, scheme) = match (&self.provider, &self.header) {
            (Some(provider), _) => {
                let (h, v) = portcullis_shared::provider::api_key_secret(provider, key)?;
                return Ok([(h, v)].into());
            }
            (None, Some((h, s))) => (h.clone(), s.clone()),
            (None, None) => ("Authorization".to_string(), "Bearer ".to_string()),
        };
        // A key pasted with its scheme is not prefixed twice.
        let bare = key
            .get(..scheme.len())
            .filter(|p| !scheme.is_empty() && p.eq_ignore_ascii_case(&scheme))
            .map_or(key, |_| &key[scheme.len()..]);
        let (name, value) = (header, format!("{scheme}{bare}"));
        Ok([(name, value)].into())
    }
}

/// The connection, which must take per-user API keys.
pub async fn per_user(conn: &mut Conn, ws: &str, owner: Owner, id: &str) -> ApiResult<PerUser> {
    per_user_of(conn, ws, Some(owner), id).await
}

/// [`per_user`]; with no owner given, the tool with this id, else the model.
async fn per_user_of(
    conn: &mut Conn,
    ws: &str,
    owner: Option<Owner>,
    id: &str,
) -> ApiResult<PerUser> {
    let id = validate::id("connection_id", id)?;
    let tool = match owner {
        Some(Owner::Model) => None,
        _ => tools::get(conn, ws, &id).await?,
    };
    let (owner, name, method, ctype, provider, header) = match (tool, owner) {
        (Some(t), _) => {
            let config: serde_json::Value =
                serde_json::from_str(&t.auth_config).unwrap_or_default();
            let header = config["header"]
                .as_str()
                .filter(|h| !h.is_empty())
                .map(|h| {
                    (
                        h.to_string(),
                        config["scheme"].as_str().unwrap_or_default().to_string(),
                    )
                });
            (
                Owner::Tool,
                t.name,
                t.auth_method,
                t.credential_type,
                None,
                header,
            )
        }
        (None, Some(Owner::Model) | None) => {
            let m = models::get(conn, ws, &id)
                .await?
                .ok_or_else(|| not_found("model", &id))?;
            let (name, method, ctype) = (m.name, m.auth_method, m.credential_type);
            (Owner::Model, name, method, ctype, Some(m.provider), None)
        }
        (None, Some(_)) => return Err(not_found("tool connection", &id)),
    };
    if ctype != CredentialType::PerUser.as_str() {
        return Err(precondition(format!(
            "'{name}' does not use per-user credentials"
        )));
    }
    let oauth = method == AuthMethod::OAuth.as_str();
    Ok(PerUser {
        owner,
        id,
        name,
        provider,
        header,
        oauth,
    })
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

/// A connection id names a tool or a model.
async fn either(conn: &mut Conn, ws: &str, id: &str) -> ApiResult<PerUser> {
    per_user_of(conn, ws, None, id).await
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

#[cfg(test)]
mod tests {
    use super::*;

    fn tool(header: Option<(&str, &str)>) -> PerUser {
        PerUser {
            owner: Owner::Tool,
            id: "t".into(),
            name: "t".into(),
            provider: None,
            header: header.map(|(h, s)| (h.to_string(), s.to_string())),
            oauth: false,
        }
    }

    #[test]
    fn a_key_becomes_its_header_once_prefixed() {
        let plain = tool(None).secret("abc").unwrap();
        assert_eq!(plain["Authorization"], "Bearer abc");
        let pasted = tool(None).secret("bearer abc").unwrap();
        assert_eq!(pasted["Authorization"], "Bearer abc", "not prefixed twice");
        let custom = tool(Some(("X-Api-Key", ""))).secret("abc").unwrap();
        assert_eq!(custom["X-Api-Key"], "abc");
        let model = PerUser {
            provider: Some("anthropic".into()),
            ..tool(None)
        };
        assert_eq!(model.secret("sk-ant").unwrap()["x-api-key"], "sk-ant");
    }
}
