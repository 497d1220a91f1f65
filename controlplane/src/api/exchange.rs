//! `ExchangeAgentKey`: an agent key in, a short-lived JWT out (DESIGN §15). The token is
//! signed with the workspace's current Ed25519 key (EdDSA), names the agent (`sub`) and the
//! one gateway that accepts it (`aud`), and lives the agent's `token_ttl`. Gateways check it
//! against the public keys in their snapshot and the agent's status at their current snapshot.

use portcullis_shared::api::agents::{
    ActAsMethod, BoundSubject, ExchangeAgentKeyRequest, ExchangedToken,
};
use portcullis_shared::snapshot::{AgentTokenClaims, AGENT_TOKEN_ISSUER};

use super::agents::select_gateway;
use super::auth::{self, AgentPrincipal};
use super::Principal;
use super::{unary, views, Access, Ctx, Operation};
use crate::error::{invalid, precondition, ApiError, ApiResult};
use crate::store::agents;
use crate::token_signing::sign;
use portcullis_shared::keys::KeyKind;

pub fn operations() -> Vec<(&'static str, Operation)> {
    vec![("ExchangeAgentKey", unary(Access::Agent, exchange))]
}

/// The key being exchanged: the bearer's own, or the one a platform key names in the body.
async fn key_to_exchange(ctx: &Ctx, req: &ExchangeAgentKeyRequest) -> ApiResult<AgentPrincipal> {
    let given = req.agent_key.as_deref().filter(|k| !k.is_empty());
    match (ctx.principal.as_ref(), given) {
        (Principal::Agent(_), Some(_)) => Err(invalid(
            "agent_key is for platform keys; an agent key exchanges itself",
        )),
        (Principal::Agent(a), None) => Ok(a.clone()),
        (Principal::Platform(_), None) => Err(invalid(
            "agent_key is required when a platform key calls ExchangeAgentKey",
        )),
        (Principal::Platform(p), Some(key)) => {
            if KeyKind::of(key) != Some(KeyKind::Agent) {
                return Err(invalid("agent_key must be an agent API key (svc_…)"));
            }
            let mut conn = ctx.store().read().await?;
            auth::agent_key(&mut conn, key)
                .await?
                .filter(|a| a.workspace_id == p.workspace_id)
                .ok_or_else(|| {
                    ApiError::NotFound("agent_key is unknown or revoked in this workspace".into())
                })
        }
        _ => Err(ApiError::PermissionDenied(
            "only an agent key or a platform key can exchange an agent key".into(),
        )),
    }
}

/// The end user a bound agent's key acts for, carried in the token so the gateway need not
/// know which key it was exchanged for.
fn bound_subject(
    agent: &agents::AgentRow,
    caller: &AgentPrincipal,
) -> ApiResult<Option<BoundSubject>> {
    if agent.actas_method.as_deref() != Some(ActAsMethod::Bound.as_str()) {
        return Ok(None);
    }
    caller
        .bound_subject
        .as_deref()
        .map(|s| serde_json::from_str(s).map_err(|_| views::corrupt("key bound_subject")))
        .transpose()
}

async fn exchange(ctx: Ctx, req: ExchangeAgentKeyRequest) -> ApiResult<ExchangedToken> {
    let caller = key_to_exchange(&ctx, &req).await?;
    let ws = caller.workspace_id.clone();
    let mut conn = ctx.store().read().await?;
    let agent = agents::get(&mut conn, &ws, &caller.agent_id)
        .await?
        .ok_or_else(|| ApiError::Unauthenticated("unknown or revoked API key".into()))?;
    if !agent.is_usable() {
        return Err(precondition(format!(
            "agent '{}' is {}; its keys cannot be exchanged",
            agent.name, agent.status
        )));
    }
    let gateway_id = select_gateway(&mut conn, &ws, &agent.id, req.gateway_id.as_deref(), true)
        .await?
        .ok_or_else(|| precondition(format!("agent '{}' reaches no gateway", agent.name)))?;
    let endpoints = views::endpoints(&mut conn, &ws, &gateway_id).await?;
    drop(conn);
    let now = chrono::Utc::now();
    let ttl = u64::try_from(agent.token_ttl_secs).unwrap_or(600);
    let claims = AgentTokenClaims {
        iss: AGENT_TOKEN_ISSUER.to_string(),
        sub: agent.id.clone(),
        aud: gateway_id.clone(),
        iat: now.timestamp(),
        exp: now.timestamp() + i64::try_from(ttl).unwrap_or(600),
        jti: uuid::Uuid::new_v4().to_string(),
        ws: ws.clone(),
        act: bound_subject(&agent, &caller)?,
        grant: None,
    };
    let access_token = sign(ctx.store(), &ws, &claims).await?;
    tracing::info!(agent_id = %agent.id, key_id = %caller.key_id, gateway_id, "Agent key exchanged for a token.");
    Ok(ExchangedToken {
        access_token,
        token_type: "Bearer".into(),
        expires_at: views::ts(claims.exp * 1000),
        expires_in: ttl,
        gateway_id,
        endpoints,
    })
}
