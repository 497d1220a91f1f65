//! Gateways: lifecycle, default marker, memberships and access grants.

use portcullis_shared::api::gateways::*;
use portcullis_shared::api::workspace::Permission;
use portcullis_shared::api::Empty;

use super::{unary, views, Access, Ctx, Operation};
use crate::error::{exists, invalid, not_found, ApiError, ApiResult};
use crate::store::{agents, bundles, gateways, models, now_ms, pools, Conn, WriteTx};
use crate::validate;

pub fn operations() -> Vec<(&'static str, Operation)> {
    let view = Access::Platform(Permission::GatewayView);
    let manage = Access::Platform(Permission::GatewayManage);
    vec![
        ("CreateGateway", unary(manage, create)),
        ("UpdateGateway", unary(manage, update)),
        ("GetGateway", unary(view, get)),
        ("ListGateways", unary(view, list)),
        ("DeleteGateway", unary(manage, delete)),
        ("SetGatewayState", unary(manage, set_state)),
        ("SetDefaultGateway", unary(manage, set_default)),
        ("AddGatewayPool", unary(manage, add_pool)),
        ("AddGatewayModel", unary(manage, add_model)),
        ("AddGatewayTool", unary(manage, add_tool)),
        ("AddGatewayToolSource", unary(manage, add_tool_source)),
        ("RemoveGatewayMember", unary(manage, remove_member)),
        ("SetGatewayAgentAccess", unary(manage, set_agent_access)),
        (
            "SetGatewayAllAgentsAccess",
            unary(manage, set_all_agents_access),
        ),
    ]
}

pub async fn load(
    conn: &mut Conn,
    workspace_id: &str,
    gateway_id: &str,
) -> ApiResult<gateways::GatewayRow> {
    let id = validate::id("gateway_id", gateway_id)?;
    gateways::get(conn, workspace_id, &id)
        .await?
        .ok_or_else(|| not_found("gateway", &id))
}

async fn ensure_name_free(conn: &mut Conn, workspace_id: &str, name: &str) -> ApiResult<()> {
    if gateways::by_name(conn, workspace_id, name).await?.is_some() {
        return Err(exists(format!("a gateway named '{name}' already exists")));
    }
    Ok(())
}

fn check_description(description: &str) -> ApiResult<()> {
    if description.len() > 1024 {
        return Err(invalid("description is longer than 1024 characters"));
    }
    Ok(())
}

/// Saves the row, renders it, commits.
async fn finish(mut tx: WriteTx, mut row: gateways::GatewayRow) -> ApiResult<GatewayResponse> {
    row.updated_at = now_ms();
    gateways::update(tx.conn(), &row).await?;
    let gateway = views::gateway(tx.conn(), &row).await?;
    tx.commit().await?;
    Ok(GatewayResponse { gateway })
}

async fn create(ctx: Ctx, req: CreateGatewayRequest) -> ApiResult<GatewayResponse> {
    let name = validate::name("name", &req.name)?;
    check_description(&req.description)?;
    let ws = ctx.workspace_id().to_string();
    let mut tx = ctx.store().write(&ws).await?;
    ensure_name_free(tx.conn(), &ws, &name).await?;
    let now = now_ms();
    let row = gateways::GatewayRow {
        id: uuid::Uuid::new_v4().to_string(),
        workspace_id: ws.clone(),
        name,
        description: req.description,
        state: GatewayState::Active.as_str().to_string(),
        is_default: 0,
        all_agents: 0,
        created_at: now,
        updated_at: now,
    };
    gateways::insert(tx.conn(), &row).await?;
    let gateway = views::gateway(tx.conn(), &row).await?;
    tx.commit().await?;
    tracing::info!(gateway_id = %row.id, "Gateway created.");
    Ok(GatewayResponse { gateway })
}

async fn update(ctx: Ctx, req: UpdateGatewayRequest) -> ApiResult<GatewayResponse> {
    let ws = ctx.workspace_id().to_string();
    let mut tx = ctx.store().write(&ws).await?;
    let mut row = load(tx.conn(), &ws, &req.gateway_id).await?;
    if let Some(name) = req
        .name
        .as_deref()
        .filter(|n| !n.is_empty() && *n != row.name)
    {
        let name = validate::name("name", name)?;
        ensure_name_free(tx.conn(), &ws, &name).await?;
        row.name = name;
    }
    if let Some(description) = req.description {
        check_description(&description)?;
        row.description = description;
    }
    finish(tx, row).await
}

async fn get(ctx: Ctx, req: GatewayIdRequest) -> ApiResult<GatewayResponse> {
    let mut conn = ctx.store().read().await?;
    let row = load(&mut conn, ctx.workspace_id(), &req.gateway_id).await?;
    Ok(GatewayResponse {
        gateway: views::gateway(&mut conn, &row).await?,
    })
}

async fn list(ctx: Ctx, _req: ListGatewaysRequest) -> ApiResult<ListGatewaysResponse> {
    let mut conn = ctx.store().read().await?;
    let mut out = Vec::new();
    for row in gateways::list(&mut conn, ctx.workspace_id()).await? {
        out.push(views::gateway(&mut conn, &row).await?);
    }
    Ok(ListGatewaysResponse { gateways: out })
}

/// Deleting a gateway removes its memberships, grants and gateway-scoped rule bundles; the
/// connections and pools it held stay. Callers still using its URL fail closed (404).
async fn delete(ctx: Ctx, req: GatewayIdRequest) -> ApiResult<Empty> {
    let ws = ctx.workspace_id().to_string();
    let mut tx = ctx.store().write(&ws).await?;
    let row = load(tx.conn(), &ws, &req.gateway_id).await?;
    bundles::delete_scope(tx.conn(), "gateway", &row.id).await?;
    crate::store::quotas::delete_for(tx.conn(), &ws, &row.id).await?;
    gateways::delete(tx.conn(), &ws, &row.id).await?;
    tx.commit().await?;
    tracing::info!(gateway_id = %row.id, "Gateway deleted.");
    Ok(Empty {})
}

async fn set_state(ctx: Ctx, req: SetGatewayStateRequest) -> ApiResult<GatewayResponse> {
    let ws = ctx.workspace_id().to_string();
    let mut tx = ctx.store().write(&ws).await?;
    let mut row = load(tx.conn(), &ws, &req.gateway_id).await?;
    row.state = req.state.as_str().to_string();
    tracing::info!(gateway_id = %row.id, state = %row.state, "Gateway state set.");
    finish(tx, row).await
}

/// The default marker does not enforce anything; exactly one gateway carries it.
async fn set_default(ctx: Ctx, req: GatewayIdRequest) -> ApiResult<GatewayResponse> {
    let ws = ctx.workspace_id().to_string();
    let mut tx = ctx.store().write(&ws).await?;
    let mut row = load(tx.conn(), &ws, &req.gateway_id).await?;
    gateways::clear_default(tx.conn(), &ws).await?;
    row.is_default = 1;
    finish(tx, row).await
}

async fn add_pool(ctx: Ctx, req: AddGatewayPoolRequest) -> ApiResult<GatewayResponse> {
    let ws = ctx.workspace_id().to_string();
    let mut tx = ctx.store().write(&ws).await?;
    let row = load(tx.conn(), &ws, &req.gateway_id).await?;
    let pool_id = validate::id("pool_id", &req.pool_id)?;
    let pool = pools::get(tx.conn(), &ws, &pool_id)
        .await?
        .ok_or_else(|| not_found("pool", &pool_id))?;
    if !gateways::add_member(
        tx.conn(),
        &row.id,
        MemberKind::Pool.as_str(),
        &pool.id,
        "",
        now_ms(),
    )
    .await?
    {
        return Err(exists(format!(
            "pool '{}' is already attached to gateway '{}'",
            pool.name, row.name
        )));
    }
    finish(tx, row).await
}

async fn add_model(ctx: Ctx, req: AddGatewayModelRequest) -> ApiResult<GatewayResponse> {
    let ws = ctx.workspace_id().to_string();
    let mut tx = ctx.store().write(&ws).await?;
    let row = load(tx.conn(), &ws, &req.gateway_id).await?;
    let model_id = validate::id("connection_id", &req.connection_id)?;
    let model = models::get(tx.conn(), &ws, &model_id)
        .await?
        .ok_or_else(|| not_found("model connection", &model_id))?;
    if !gateways::add_member(
        tx.conn(),
        &row.id,
        MemberKind::Model.as_str(),
        &model.id,
        "",
        now_ms(),
    )
    .await?
    {
        return Err(exists(format!(
            "model '{}' is already attached to gateway '{}'",
            model.name, row.name
        )));
    }
    finish(tx, row).await
}

/// Attaches one discovered operation of a tool connection.
async fn add_tool(ctx: Ctx, req: AddGatewayToolRequest) -> ApiResult<GatewayResponse> {
    let ws = ctx.workspace_id().to_string();
    let mut tx = ctx.store().write(&ws).await?;
    let row = load(tx.conn(), &ws, &req.gateway_id).await?;
    let tool = super::tools::load(tx.conn(), &ws, &req.connection_id).await?;
    let discovered = crate::store::tools::catalog_entry(tx.conn(), &tool.id, &req.tool)
        .await?
        .is_some_and(|e| e.discovered != 0);
    if !discovered {
        return Err(ApiError::NotFound(format!(
            "tool '{}' has no discovered operation '{}'; list its catalog with ListConnectionTools",
            tool.name,
            validate::clip(&req.tool)
        )));
    }
    if !gateways::add_member(
        tx.conn(),
        &row.id,
        MemberKind::Tool.as_str(),
        &tool.id,
        &req.tool,
        now_ms(),
    )
    .await?
    {
        return Err(exists(format!(
            "{}/{} is already attached to gateway '{}'",
            tool.name, req.tool, row.name
        )));
    }
    finish(tx, row).await
}

/// Attaches a whole tool connection: every operation it offers, now and later.
async fn add_tool_source(ctx: Ctx, req: AddGatewayToolSourceRequest) -> ApiResult<GatewayResponse> {
    let ws = ctx.workspace_id().to_string();
    let mut tx = ctx.store().write(&ws).await?;
    let row = load(tx.conn(), &ws, &req.gateway_id).await?;
    let tool = super::tools::load(tx.conn(), &ws, &req.connection_id).await?;
    if !gateways::add_member(
        tx.conn(),
        &row.id,
        MemberKind::ToolSource.as_str(),
        &tool.id,
        "",
        now_ms(),
    )
    .await?
    {
        return Err(exists(format!(
            "tool '{}' is already attached to gateway '{}'",
            tool.name, row.name
        )));
    }
    finish(tx, row).await
}

async fn remove_member(ctx: Ctx, req: RemoveGatewayMemberRequest) -> ApiResult<GatewayResponse> {
    let ws = ctx.workspace_id().to_string();
    let mut tx = ctx.store().write(&ws).await?;
    let row = load(tx.conn(), &ws, &req.gateway_id).await?;
    let (kind, target, tool) = match (&req.pool_id, &req.connection_id, &req.tool) {
        (Some(pool), None, None) => (
            MemberKind::Pool,
            validate::id("pool_id", pool)?,
            String::new(),
        ),
        (None, Some(conn_id), None) => (
            MemberKind::Model,
            validate::id("connection_id", conn_id)?,
            String::new(),
        ),
        (None, Some(conn_id), Some(tool)) => (
            MemberKind::Tool,
            validate::id("connection_id", conn_id)?,
            tool.clone(),
        ),
        _ => {
            return Err(invalid(
                "name exactly one membership: pool_id, or connection_id (with tool for one \
                 operation)",
            ))
        }
    };
    let mut removed =
        gateways::remove_member(tx.conn(), &row.id, kind.as_str(), &target, &tool).await?;
    if !removed && kind == MemberKind::Model {
        // A connection id may name a whole tool source.
        removed = gateways::remove_member(
            tx.conn(),
            &row.id,
            MemberKind::ToolSource.as_str(),
            &target,
            "",
        )
        .await?;
    }
    if !removed {
        return Err(ApiError::NotFound(format!(
            "{target} is not a member of gateway '{}'",
            row.name
        )));
    }
    finish(tx, row).await
}

/// Grants or withdraws one agent's access; the same relation as the agent's
/// `allowed_gateway_ids`, so the agent's rule bundle changes with it.
async fn set_agent_access(
    ctx: Ctx,
    req: SetGatewayAgentAccessRequest,
) -> ApiResult<GatewayResponse> {
    ctx.require(Permission::RulesDeploy)?;
    let ws = ctx.workspace_id().to_string();
    let mut tx = ctx.store().write(&ws).await?;
    let row = load(tx.conn(), &ws, &req.gateway_id).await?;
    let agent = agents::find(tx.conn(), &ws, &req.agent_id)
        .await?
        .ok_or_else(|| not_found("agent", &req.agent_id))?;
    if req.granted {
        gateways::grant(tx.conn(), &row.id, &agent.id, now_ms()).await?;
    } else {
        gateways::revoke_grant(tx.conn(), &row.id, &agent.id).await?;
    }
    tracing::info!(gateway_id = %row.id, agent_id = %agent.id, granted = req.granted, "Gateway access set.");
    finish(tx, row).await
}

async fn set_all_agents_access(
    ctx: Ctx,
    req: SetGatewayAllAgentsAccessRequest,
) -> ApiResult<GatewayResponse> {
    ctx.require(Permission::RulesDeploy)?;
    let ws = ctx.workspace_id().to_string();
    let mut tx = ctx.store().write(&ws).await?;
    let mut row = load(tx.conn(), &ws, &req.gateway_id).await?;
    row.all_agents = i64::from(req.granted);
    tracing::info!(gateway_id = %row.id, granted = req.granted, "All-agents access set.");
    finish(tx, row).await
}
