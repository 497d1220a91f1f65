//! `ListInteractiveGrants` and `RevokeInteractiveGrant` (DESIGN §15): the grants people gave
//! MCP clients to use agents interactively. A platform key is no person, so it holds no grants
//! of its own: it lists everyone's (`all_users`, or one agent's) with `agents.view`, and
//! revokes anyone's with `agentkeys.manage`. Revoking ends the grant's refresh tokens at once
//! and its access tokens when gateways next sync.

use portcullis_shared::api::interactive::{
    InteractiveGrant, ListInteractiveGrantsRequest, ListInteractiveGrantsResponse,
    RevokeInteractiveGrantRequest, RevokeInteractiveGrantResponse,
};
use portcullis_shared::api::workspace::Permission;

use super::{unary, Access, Ctx, Operation};
use crate::error::{invalid, not_found, ApiResult};
use crate::store::{agents, interactive, now_ms, ts};

pub fn operations() -> Vec<(&'static str, Operation)> {
    vec![
        (
            "ListInteractiveGrants",
            unary(Access::Platform(Permission::AgentsView), list),
        ),
        (
            "RevokeInteractiveGrant",
            unary(Access::Platform(Permission::AgentKeysManage), revoke),
        ),
    ]
}

async fn list(
    ctx: Ctx,
    req: ListInteractiveGrantsRequest,
) -> ApiResult<ListInteractiveGrantsResponse> {
    let ws = ctx.workspace_id().to_string();
    let agent_ref = req.agent_id.as_deref().filter(|a| !a.is_empty());
    if !req.all_users && agent_ref.is_none() {
        return Err(invalid(
            "a platform key holds no personal interactive grants: set all_users=true (or \
             agent_id) to list everyone's",
        ));
    }
    let mut conn = ctx.store().read().await?;
    let agent_id = match agent_ref {
        Some(r) => Some(
            agents::find(&mut conn, &ws, r)
                .await?
                .ok_or_else(|| not_found("agent", r))?
                .id,
        ),
        None => None,
    };
    let grants = interactive::list_grants(&mut conn, &ws, agent_id.as_deref())
        .await?
        .into_iter()
        .map(|l| InteractiveGrant {
            agent_name: l.agent_name,
            grant_id: l.grant.id,
            agent_id: l.grant.agent_id,
            gateway_id: l.grant.gateway_id,
            client_id: l.grant.client_id,
            client_name: l.client_name,
            subject: l.grant.subject,
            email: l.grant.email,
            created_at: ts(l.grant.created_at),
            last_used_at: ts(l.grant.last_used_at),
            refresh_tokens: u64::try_from(l.refresh_tokens).unwrap_or(0),
        })
        .collect();
    Ok(ListInteractiveGrantsResponse { grants })
}

async fn revoke(
    ctx: Ctx,
    req: RevokeInteractiveGrantRequest,
) -> ApiResult<RevokeInteractiveGrantResponse> {
    let ws = ctx.workspace_id().to_string();
    if uuid::Uuid::parse_str(&req.grant_id).is_err() {
        return Err(invalid("grant_id must be a UUID"));
    }
    let mut tx = ctx.store().write(&ws).await?;
    let grant = interactive::grant(tx.conn(), &req.grant_id)
        .await?
        .filter(|g| g.workspace_id == ws)
        .ok_or_else(|| not_found("interactive grant", &req.grant_id))?;
    let revoked = interactive::revoke_grant(tx.conn(), &grant.id, now_ms()).await?;
    tx.commit().await?;
    if revoked.is_some() {
        tracing::info!(grant_id = %grant.id, agent_id = %grant.agent_id, "Interactive grant revoked.");
    }
    Ok(RevokeInteractiveGrantResponse {
        grant_id: grant.id,
        revoked: revoked.is_some(),
        refresh_tokens_revoked: revoked.unwrap_or(0),
    })
}
