//! Model pools: `CreateLLMPool` … `RemoveLLMPoolMember`.

use portcullis_shared::api::pools::*;
use portcullis_shared::api::workspace::Permission;
use portcullis_shared::api::Empty;

use super::models::ensure_model_name_free;
use super::{unary, views, Access, Ctx, Operation};
use crate::error::{exists, invalid, not_found, ApiError, ApiResult};
use crate::store::{gateways, models, now_ms, pools, Conn};
use crate::validate;

pub fn operations() -> Vec<(&'static str, Operation)> {
    let view = Access::Platform(Permission::GatewayView);
    let manage = Access::Platform(Permission::GatewayManage);
    vec![
        ("CreateLLMPool", unary(manage, create)),
        ("UpdateLLMPool", unary(manage, update)),
        ("GetLLMPool", unary(view, get)),
        ("ListLLMPools", unary(view, list)),
        ("DeleteLLMPool", unary(manage, delete)),
        ("AddLLMPoolMember", unary(manage, add_member)),
        ("RemoveLLMPoolMember", unary(manage, remove_member)),
    ]
}

const MAX_MEMBERS: usize = 64;

/// Checks one member and resolves it to (connection id, weight, priority).
async fn member(
    conn: &mut Conn,
    workspace_id: &str,
    field: &str,
    connection_id: &str,
    weight: Option<u32>,
    priority: Option<u32>,
) -> ApiResult<(String, u32, u32)> {
    let id = validate::id(&format!("{field}.connection_id"), connection_id)?;
    if models::get(conn, workspace_id, &id).await?.is_none() {
        return Err(not_found("model connection", &id));
    }
    let weight = weight.unwrap_or(1);
    if weight == 0 || weight > 10_000 {
        return Err(invalid(format!(
            "{field}.weight must be between 1 and 10000"
        )));
    }
    Ok((id, weight, priority.unwrap_or(0)))
}

async fn members(
    conn: &mut Conn,
    workspace_id: &str,
    inputs: &[PoolMemberInput],
) -> ApiResult<Vec<(String, u32, u32)>> {
    if inputs.len() > MAX_MEMBERS {
        return Err(invalid(format!(
            "members has more than {MAX_MEMBERS} entries"
        )));
    }
    let mut out: Vec<(String, u32, u32)> = Vec::new();
    for (i, m) in inputs.iter().enumerate() {
        let field = format!("members[{i}]");
        let resolved = member(
            conn,
            workspace_id,
            &field,
            &m.connection_id,
            m.weight,
            m.priority,
        )
        .await?;
        if out.iter().any(|o| o.0 == resolved.0) {
            return Err(invalid(format!(
                "{field}: model {} is listed twice",
                resolved.0
            )));
        }
        out.push(resolved);
    }
    Ok(out)
}

async fn load(conn: &mut Conn, workspace_id: &str, pool_id: &str) -> ApiResult<pools::PoolRow> {
    let id = validate::id("pool_id", pool_id)?;
    pools::get(conn, workspace_id, &id)
        .await?
        .ok_or_else(|| not_found("pool", &id))
}

async fn create(ctx: Ctx, req: CreateLLMPoolRequest) -> ApiResult<PoolResponse> {
    let name = validate::name("name", &req.name)?;
    let ws = ctx.workspace_id().to_string();
    let mut tx = ctx.store().write(&ws).await?;
    ensure_model_name_free(tx.conn(), &ws, &name).await?;
    let resolved = members(tx.conn(), &ws, &req.members).await?;
    let now = now_ms();
    let row = pools::PoolRow {
        id: uuid::Uuid::new_v4().to_string(),
        workspace_id: ws.clone(),
        name,
        strategy: req
            .strategy
            .unwrap_or(PoolStrategy::RoundRobin)
            .as_str()
            .to_string(),
        created_at: now,
        updated_at: now,
    };
    pools::insert(tx.conn(), &row).await?;
    pools::replace_members(tx.conn(), &row.id, &resolved).await?;
    let pool = views::pool(tx.conn(), &row).await?;
    tx.commit().await?;
    tracing::info!(pool_id = %row.id, "Pool created.");
    Ok(PoolResponse { pool })
}

async fn update(ctx: Ctx, req: UpdateLLMPoolRequest) -> ApiResult<PoolResponse> {
    let ws = ctx.workspace_id().to_string();
    let mut tx = ctx.store().write(&ws).await?;
    let mut row = load(tx.conn(), &ws, &req.pool_id).await?;
    if let Some(name) = req
        .name
        .as_deref()
        .filter(|n| !n.is_empty() && *n != row.name)
    {
        let name = validate::name("name", name)?;
        ensure_model_name_free(tx.conn(), &ws, &name).await?;
        row.name = name;
    }
    if let Some(strategy) = req.strategy {
        row.strategy = strategy.as_str().to_string();
    }
    if let Some(inputs) = &req.members {
        let resolved = members(tx.conn(), &ws, inputs).await?;
        pools::replace_members(tx.conn(), &row.id, &resolved).await?;
    }
    row.updated_at = now_ms();
    pools::update(tx.conn(), &row).await?;
    let pool = views::pool(tx.conn(), &row).await?;
    tx.commit().await?;
    Ok(PoolResponse { pool })
}

async fn get(ctx: Ctx, req: PoolIdRequest) -> ApiResult<PoolResponse> {
    let mut conn = ctx.store().read().await?;
    let row = load(&mut conn, ctx.workspace_id(), &req.pool_id).await?;
    Ok(PoolResponse {
        pool: views::pool(&mut conn, &row).await?,
    })
}

async fn list(ctx: Ctx, _req: ListLLMPoolsRequest) -> ApiResult<ListLLMPoolsResponse> {
    let mut conn = ctx.store().read().await?;
    let mut out = Vec::new();
    for row in pools::list(&mut conn, ctx.workspace_id()).await? {
        out.push(views::pool(&mut conn, &row).await?);
    }
    Ok(ListLLMPoolsResponse { pools: out })
}

/// Deleting a pool removes it from gateways and drops its quotas; its member models stay.
async fn delete(ctx: Ctx, req: PoolIdRequest) -> ApiResult<Empty> {
    let ws = ctx.workspace_id().to_string();
    let mut tx = ctx.store().write(&ws).await?;
    let row = load(tx.conn(), &ws, &req.pool_id).await?;
    gateways::remove_target(tx.conn(), &row.id).await?;
    crate::store::quotas::delete_for(tx.conn(), &ws, &row.id).await?;
    pools::delete(tx.conn(), &ws, &row.id).await?;
    tx.commit().await?;
    tracing::info!(pool_id = %row.id, "Pool deleted.");
    Ok(Empty {})
}

async fn add_member(ctx: Ctx, req: AddLLMPoolMemberRequest) -> ApiResult<PoolResponse> {
    let ws = ctx.workspace_id().to_string();
    let mut tx = ctx.store().write(&ws).await?;
    let mut row = load(tx.conn(), &ws, &req.pool_id).await?;
    let (id, weight, priority) = member(
        tx.conn(),
        &ws,
        "member",
        &req.connection_id,
        req.weight,
        req.priority,
    )
    .await?;
    if pools::members(tx.conn(), &row.id)
        .await?
        .iter()
        .any(|m| m.connection_id == id)
    {
        return Err(exists(format!(
            "model {id} is already a member of pool '{}'",
            row.name
        )));
    }
    if pools::members(tx.conn(), &row.id).await?.len() >= MAX_MEMBERS {
        return Err(invalid(format!(
            "a pool holds at most {MAX_MEMBERS} members"
        )));
    }
    let position = pools::next_position(tx.conn(), &row.id).await?;
    pools::add_member(tx.conn(), &row.id, &id, weight, priority, position).await?;
    row.updated_at = now_ms();
    pools::update(tx.conn(), &row).await?;
    let pool = views::pool(tx.conn(), &row).await?;
    tx.commit().await?;
    Ok(PoolResponse { pool })
}

async fn remove_member(ctx: Ctx, req: RemoveLLMPoolMemberRequest) -> ApiResult<PoolResponse> {
    let ws = ctx.workspace_id().to_string();
    let mut tx = ctx.store().write(&ws).await?;
    let mut row = load(tx.conn(), &ws, &req.pool_id).await?;
    let id = validate::id("connection_id", &req.connection_id)?;
    if !pools::remove_member(tx.conn(), &row.id, &id).await? {
        return Err(ApiError::NotFound(format!(
            "model {id} is not a member of pool '{}'",
            row.name
        )));
    }
    row.updated_at = now_ms();
    pools::update(tx.conn(), &row).await?;
    let pool = views::pool(tx.conn(), &row).await?;
    tx.commit().await?;
    Ok(PoolResponse { pool })
}
