//! Agents: registration, updates, reads and the status lifecycle.

mod fields;

use portcullis_shared::api::agents::*;
use portcullis_shared::api::workspace::Permission;
use portcullis_shared::ttl;
use serde_json::{Map, Value};

use super::{gateways as gateway_api, unary, views, Access, Ctx, Operation};
use crate::error::{exists, invalid, not_found, precondition, ApiError, ApiResult};
use crate::store::credentials::{self, Owner};
use crate::store::{agents, bundles, gateways, now_ms, Conn, WriteTx};
use crate::validate;

use fields::Patch;

pub fn operations() -> Vec<(&'static str, Operation)> {
    use Permission::*;
    vec![
        (
            "RegisterAgent",
            unary(Access::Platform(AgentsRegister), register),
        ),
        (
            "UpdateAgent",
            unary(Access::Platform(AgentsRegister), update),
        ),
        ("GetAgent", unary(Access::Platform(AgentsView), get)),
        ("ListAgents", unary(Access::Platform(AgentsView), list)),
        (
            "SuspendAgent",
            unary(Access::Platform(AgentsSuspend), suspend),
        ),
        (
            "ReactivateAgent",
            unary(Access::Platform(AgentsSuspend), reactivate),
        ),
        ("RevokeAgent", unary(Access::Platform(AgentsRevoke), revoke)),
        ("DeleteAgent", unary(Access::Platform(AgentsDelete), delete)),
    ]
}

fn list_of(text: &str) -> ApiResult<Vec<String>> {
    serde_json::from_str(text).map_err(|_| views::corrupt("agent list"))
}

/// The agent as the API shows it (the HMAC secret only as a flag).
pub async fn view(conn: &mut Conn, row: &agents::AgentRow) -> ApiResult<Agent> {
    let metadata: Map<String, Value> =
        serde_json::from_str(&row.metadata).map_err(|_| views::corrupt("agent metadata"))?;
    let hmac_set = credentials::shared_keys(conn, Owner::AgentActAs, &row.id)
        .await?
        .is_some();
    Ok(Agent {
        agent_id: row.id.clone(),
        workspace_id: row.workspace_id.clone(),
        name: row.name.clone(),
        status: AgentStatus::parse(&row.status).ok_or_else(|| views::corrupt("agent status"))?,
        status_reason: row.status_reason.clone(),
        parent_id: row.parent_id.clone(),
        metadata,
        token_ttl: ttl::format(u64::try_from(row.token_ttl_secs).unwrap_or(ttl::DEFAULT_SECS)),
        allowed_pool_names: list_of(&row.allowed_pool_names)?,
        allowed_direct_model_names: list_of(&row.allowed_direct_model_names)?,
        allowed_tools: list_of(&row.allowed_tools)?,
        allowed_gateway_ids: gateways::grants_of_agent(conn, &row.id).await?,
        actas_allowed_groups: list_of(&row.actas_allowed_groups)?,
        actas_allowed_emails: list_of(&row.actas_allowed_emails)?,
        actas_allowed_subjects: list_of(&row.actas_allowed_subjects)?,
        actas_method: row.actas_method.as_deref().and_then(ActAsMethod::parse),
        actas_required: row.actas_required != 0,
        actas_provider_id: row.actas_provider_id.clone(),
        actas_oidc_url: row.actas_oidc_url.clone(),
        actas_hmac_secret_set: hmac_set,
        actas_config_name: row.actas_config_name.clone(),
        interactive_access: row.interactive_access != 0,
        created_at: views::ts(row.created_at),
        updated_at: views::ts(row.updated_at),
    })
}

pub async fn load(
    conn: &mut Conn,
    workspace_id: &str,
    id_or_name: &str,
) -> ApiResult<agents::AgentRow> {
    if id_or_name.is_empty() {
        return Err(invalid("agent_id is required (the agent's id or name)"));
    }
    agents::find(conn, workspace_id, id_or_name)
        .await?
        .ok_or_else(|| not_found("agent", &validate::clip(id_or_name)))
}

/// Chooses the gateway whose endpoints go with an agent's key or record: the requested one
/// (which the agent must reach), else the only one it reaches. With `required`, an agent
/// reaching several gateways must name one.
pub async fn select_gateway(
    conn: &mut Conn,
    workspace_id: &str,
    agent_id: &str,
    requested: Option<&str>,
    required: bool,
) -> ApiResult<Option<String>> {
    let reachable = gateways::reachable_by_agent(conn, workspace_id, agent_id).await?;
    match requested.filter(|g| !g.is_empty()) {
        Some(g) => {
            let gateway = gateway_api::load(conn, workspace_id, g).await?;
            if !reachable.contains(&gateway.id) {
                return Err(precondition(format!(
                    "the agent cannot reach gateway '{}'; allow it with allowed_gateway_ids or \
                     SetGatewayAgentAccess first",
                    gateway.name
                )));
            }
            Ok(Some(gateway.id))
        }
        None if reachable.len() == 1 => Ok(reachable.into_iter().next()),
        None if reachable.len() > 1 && required => Err(invalid(format!(
            "gateway_id is required: the agent reaches {} gateways",
            reachable.len()
        ))),
        None => Ok(None),
    }
}

async fn save_patch(
    tx: &mut WriteTx,
    ctx: &Ctx,
    row: &agents::AgentRow,
    patch: &fields::Applied,
) -> ApiResult<()> {
    if let Some(ids) = &patch.gateway_ids {
        gateways::clear_agent_grants(tx.conn(), &row.id).await?;
        for id in ids {
            gateways::grant(tx.conn(), id, &row.id, now_ms()).await?;
        }
    }
    match &patch.hmac_secret {
        Some(Some(secret)) => {
            let values = [("secret".to_string(), secret.clone())]
                .into_iter()
                .collect();
            credentials::put(
                tx.conn(),
                ctx.store().cipher(),
                &row.workspace_id,
                Owner::AgentActAs,
                &row.id,
                "",
                &values,
            )
            .await?;
        }
        Some(None) => credentials::delete_all(tx.conn(), Owner::AgentActAs, &row.id).await?,
        None => {}
    }
    Ok(())
}

async fn register(ctx: Ctx, req: RegisterAgentRequest) -> ApiResult<AgentResponse> {
    let name = validate::name("name", &req.name)?;
    let ws = ctx.workspace_id().to_string();
    let patch = Patch::from(&req);
    if patch.touches_rules() {
        ctx.require(Permission::RulesDeploy)?;
    }
    let mut tx = ctx.store().write(&ws).await?;
    if agents::find(tx.conn(), &ws, &name)
        .await?
        .is_some_and(|a| a.name == name)
    {
        return Err(exists(format!("an agent named '{name}' already exists")));
    }
    let parent_id = match req.parent_id.as_deref().filter(|p| !p.is_empty()) {
        Some(p) => {
            let parent = load(tx.conn(), &ws, p).await?;
            if parent.status == AgentStatus::Revoked.as_str() {
                return Err(precondition(format!(
                    "parent agent '{}' is revoked",
                    parent.name
                )));
            }
            Some(parent.id)
        }
        None => None,
    };
    let now = now_ms();
    let mut row = agents::AgentRow {
        id: uuid::Uuid::new_v4().to_string(),
        workspace_id: ws.clone(),
        name,
        // `provisioned` until its first key or interactive grant is issued.
        status: AgentStatus::Provisioned.as_str().to_string(),
        status_reason: None,
        parent_id,
        metadata: "{}".into(),
        token_ttl_secs: ttl::DEFAULT_SECS as i64,
        allowed_pool_names: "[]".into(),
        allowed_direct_model_names: "[]".into(),
        allowed_tools: "[]".into(),
        actas_allowed_groups: "[]".into(),
        actas_allowed_emails: "[]".into(),
        actas_allowed_subjects: "[]".into(),
        actas_method: None,
        actas_required: 0,
        actas_provider_id: None,
        actas_oidc_url: None,
        actas_config_name: None,
        interactive_access: 0,
        created_at: now,
        updated_at: now,
    };
    let applied = patch.apply(tx.conn(), &mut row, false).await?;
    agents::insert(tx.conn(), &row).await?;
    save_patch(&mut tx, &ctx, &row, &applied).await?;
    let agent = view(tx.conn(), &row).await?;
    tx.commit().await?;
    tracing::info!(agent_id = %row.id, "Agent registered.");
    Ok(AgentResponse { agent })
}

async fn update(ctx: Ctx, req: UpdateAgentRequest) -> ApiResult<AgentResponse> {
    let ws = ctx.workspace_id().to_string();
    let patch = Patch::from(&req);
    let mut tx = ctx.store().write(&ws).await?;
    let mut row = load(tx.conn(), &ws, &req.agent_id).await?;
    if row.status == AgentStatus::Revoked.as_str() {
        return Err(precondition(format!(
            "agent '{}' is revoked and cannot change",
            row.name
        )));
    }
    let before = fields::RuleInputs::of(tx.conn(), &row).await?;
    let applied = patch.apply(tx.conn(), &mut row, true).await?;
    let after = fields::RuleInputs::after(&row, &applied, &before)?;
    if before != after {
        ctx.require(Permission::RulesDeploy)?;
    }
    row.updated_at = now_ms();
    agents::update(tx.conn(), &row).await?;
    save_patch(&mut tx, &ctx, &row, &applied).await?;
    // People the agent no longer admits (interactive access off, or off its allow lists)
    // lose their grants with the change.
    crate::interactive::revoke_unadmitted(tx.conn(), &row).await?;
    let agent = view(tx.conn(), &row).await?;
    tx.commit().await?;
    tracing::info!(agent_id = %row.id, rules_changed = before != after, "Agent updated.");
    Ok(AgentResponse { agent })
}

async fn get(ctx: Ctx, req: GetAgentRequest) -> ApiResult<GetAgentResponse> {
    let ws = ctx.workspace_id();
    let mut conn = ctx.store().read().await?;
    let row = load(&mut conn, ws, &req.agent_id).await?;
    let gateway_id =
        select_gateway(&mut conn, ws, &row.id, req.gateway_id.as_deref(), false).await?;
    let endpoints = match &gateway_id {
        Some(g) => views::endpoints(&mut conn, ws, g).await?,
        None => None,
    };
    Ok(GetAgentResponse {
        agent: view(&mut conn, &row).await?,
        gateway_id,
        endpoints,
    })
}

async fn list(ctx: Ctx, req: ListAgentsRequest) -> ApiResult<ListAgentsResponse> {
    let limit = req.limit.unwrap_or(100);
    if limit == 0 || limit > 1000 {
        return Err(invalid("limit must be between 1 and 1000 (default 100)"));
    }
    let mut conn = ctx.store().read().await?;
    let status = req.status.map(AgentStatus::as_str);
    let (rows, total) = agents::list(
        &mut conn,
        ctx.workspace_id(),
        status,
        i64::from(limit),
        i64::from(req.offset.unwrap_or(0)),
    )
    .await?;
    let mut out = Vec::with_capacity(rows.len());
    for row in &rows {
        out.push(view(&mut conn, row).await?);
    }
    Ok(ListAgentsResponse {
        agents: out,
        total: u64::try_from(total).unwrap_or_default(),
    })
}

fn reason(text: Option<String>) -> ApiResult<Option<String>> {
    match text {
        Some(r) if r.len() > 1024 => Err(invalid("reason is longer than 1024 characters")),
        Some(r) if r.trim().is_empty() => Ok(None),
        other => Ok(other),
    }
}

/// Sets a status, saves, and returns the rendered agent.
async fn set_status(
    tx: &mut WriteTx,
    row: &mut agents::AgentRow,
    status: AgentStatus,
    why: Option<String>,
) -> ApiResult<()> {
    row.status = status.as_str().to_string();
    row.status_reason = why;
    row.updated_at = now_ms();
    agents::update(tx.conn(), row).await?;
    Ok(())
}

async fn suspend(ctx: Ctx, req: AgentLifecycleRequest) -> ApiResult<AgentLifecycleResponse> {
    let why = reason(req.reason)?;
    let ws = ctx.workspace_id().to_string();
    let mut tx = ctx.store().write(&ws).await?;
    let mut row = load(tx.conn(), &ws, &req.agent_id).await?;
    if !row.is_usable() {
        return Err(precondition(format!(
            "agent '{}' is {}; only an active or provisioned agent can be suspended",
            row.name, row.status
        )));
    }
    set_status(&mut tx, &mut row, AgentStatus::Suspended, why.clone()).await?;
    let mut affected = vec![row.id.clone()];
    if req.cascade {
        for id in agents::descendants(tx.conn(), &ws, &row.id).await? {
            if let Some(mut child) = agents::get(tx.conn(), &ws, &id).await? {
                if child.is_usable() {
                    set_status(&mut tx, &mut child, AgentStatus::Suspended, why.clone()).await?;
                    affected.push(child.id);
                }
            }
        }
    }
    let mut names = Vec::with_capacity(affected.len());
    for id in &affected {
        let name = agents::get(tx.conn(), &ws, id).await?.map(|a| a.name);
        names.push(name.unwrap_or_default());
    }
    let agent = view(tx.conn(), &row).await?;
    tx.commit().await?;
    tracing::info!(agent_id = %row.id, cascade = req.cascade, count = affected.len(), "Agent suspended.");
    for (id, name) in affected.iter().zip(&names) {
        let resource = portcullis_shared::audit::ResourceRef {
            kind: "agent".into(),
            id: id.clone(),
            name: name.clone(),
            ..Default::default()
        };
        let payload = portcullis_shared::audit::catalog::AgentSuspended {
            agent_id: id.clone(),
            agent_name: name.clone(),
            cascade: *id != row.id,
            suspended_by: row.id.clone(),
            reason: why.clone(),
        };
        ctx.record_change(resource, payload).await;
    }
    Ok(AgentLifecycleResponse {
        agent,
        affected_agent_ids: affected,
    })
}

async fn reactivate(ctx: Ctx, req: ReactivateAgentRequest) -> ApiResult<AgentLifecycleResponse> {
    let ws = ctx.workspace_id().to_string();
    let mut tx = ctx.store().write(&ws).await?;
    let mut row = load(tx.conn(), &ws, &req.agent_id).await?;
    if row.status != AgentStatus::Suspended.as_str() {
        return Err(precondition(format!(
            "agent '{}' is {}; only a suspended agent can be reactivated",
            row.name, row.status
        )));
    }
    // Back to what it was before: `active` once it has been given a key or a grant.
    let back = match agents::has_credentials(tx.conn(), &row.id).await? {
        true => AgentStatus::Active,
        false => AgentStatus::Provisioned,
    };
    set_status(&mut tx, &mut row, back, None).await?;
    let agent = view(tx.conn(), &row).await?;
    tx.commit().await?;
    tracing::info!(agent_id = %row.id, "Agent reactivated.");
    Ok(AgentLifecycleResponse {
        agent,
        affected_agent_ids: vec![row.id],
    })
}

/// Revocation is permanent; revoking a revoked agent changes nothing.
async fn revoke(ctx: Ctx, req: AgentLifecycleRequest) -> ApiResult<AgentLifecycleResponse> {
    if req.cascade {
        return Err(invalid(
            "cascade applies to suspend and delete, not to revoke",
        ));
    }
    let why = reason(req.reason)?;
    let ws = ctx.workspace_id().to_string();
    let mut tx = ctx.store().write(&ws).await?;
    let mut row = load(tx.conn(), &ws, &req.agent_id).await?;
    let mut affected = Vec::new();
    if row.status != AgentStatus::Revoked.as_str() {
        set_status(&mut tx, &mut row, AgentStatus::Revoked, why).await?;
        affected.push(row.id.clone());
    }
    let agent = view(tx.conn(), &row).await?;
    tx.commit().await?;
    tracing::info!(agent_id = %row.id, "Agent revoked.");
    Ok(AgentLifecycleResponse {
        agent,
        affected_agent_ids: affected,
    })
}

/// Deletes a revoked agent and all its data; `cascade` also deletes its descendants.
async fn delete(ctx: Ctx, req: AgentLifecycleRequest) -> ApiResult<DeleteAgentResponse> {
    reason(req.reason)?;
    let ws = ctx.workspace_id().to_string();
    let mut tx = ctx.store().write(&ws).await?;
    let row = load(tx.conn(), &ws, &req.agent_id).await?;
    if row.status != AgentStatus::Revoked.as_str() {
        return Err(precondition(format!(
            "agent '{}' is {}; revoke it before deleting",
            row.name, row.status
        )));
    }
    let descendants = agents::descendants(tx.conn(), &ws, &row.id).await?;
    if !descendants.is_empty() && !req.cascade {
        return Err(precondition(format!(
            "agent '{}' has {} descendant agent(s); pass cascade=true to delete them too",
            row.name,
            descendants.len()
        )));
    }
    // Children before parents, so no row is left pointing at a deleted parent.
    let mut order = descendants;
    order.reverse();
    order.push(row.id.clone());
    for id in &order {
        credentials::delete_all(tx.conn(), Owner::AgentActAs, id).await?;
        bundles::delete_scope(tx.conn(), "agent", id).await?;
        crate::store::quotas::delete_for(tx.conn(), &ws, id).await?;
        if !agents::delete(tx.conn(), &ws, id).await? {
            return Err(ApiError::Internal(format!(
                "agent {id} vanished during delete"
            )));
        }
    }
    tx.commit().await?;
    tracing::info!(agent_id = %row.id, count = order.len(), "Agent deleted.");
    Ok(DeleteAgentResponse {
        deleted_agent_ids: order,
    })
}
