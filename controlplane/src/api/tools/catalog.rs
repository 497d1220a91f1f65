//! The catalog of discovered operations: `ListConnectionTools`, `BlockTool`,
//! `DeprecateTool`, `RestoreTool`. A blocked operation is hidden and denied whatever the rules
//! say (a managed workspace forbid); a deprecated one stays callable with a warning; the status
//! persists when a gateway sees the operation again.

use portcullis_shared::api::tools::*;
use portcullis_shared::api::workspace::Permission;

use super::load;
use crate::api::{unary, views, Access, Ctx, Operation};
use crate::error::{invalid, ApiError, ApiResult};
use crate::store::{now_ms, tools};
use crate::validate;

pub fn operations() -> Vec<(&'static str, Operation)> {
    let view = Access::Platform(Permission::GatewayView);
    let manage = Access::Platform(Permission::GatewayManage);
    vec![
        ("ListConnectionTools", unary(view, list)),
        ("BlockTool", unary(manage, block)),
        ("DeprecateTool", unary(manage, deprecate)),
        ("RestoreTool", unary(manage, restore)),
    ]
}

pub fn entry(row: &tools::CatalogRow, with_schema: bool) -> ApiResult<CatalogEntry> {
    Ok(CatalogEntry {
        name: row.tool.clone(),
        description: row.description.clone(),
        status: ToolStatus::parse(&row.status).ok_or_else(|| views::corrupt("tool status"))?,
        message: row.message.clone(),
        input_schema: match (&row.input_schema, with_schema) {
            (Some(text), true) => serde_json::from_str(text).ok(),
            _ => None,
        },
        discovered: row.discovered != 0,
    })
}

/// The stored catalog, whatever the gateway memberships and rules.
async fn list(ctx: Ctx, req: ListConnectionToolsRequest) -> ApiResult<ListConnectionToolsResponse> {
    let mut conn = ctx.store().read().await?;
    let row = load(&mut conn, ctx.workspace_id(), &req.connection_id).await?;
    let mut out = Vec::new();
    for c in tools::catalog(&mut conn, &row.id).await? {
        if c.status == ToolStatus::Blocked.as_str() && !req.include_blocked {
            continue;
        }
        out.push(entry(&c, req.with_schema)?);
    }
    Ok(ListConnectionToolsResponse { tools: out })
}

fn tool_name(value: &str) -> ApiResult<String> {
    if value.is_empty()
        || value.len() > 128
        || value.chars().any(|c| c.is_whitespace() || c.is_control())
    {
        return Err(invalid(
            "tool must be an operation name without spaces (at most 128 characters)",
        ));
    }
    Ok(value.to_string())
}

fn message(text: Option<String>) -> ApiResult<Option<String>> {
    match text {
        Some(m) if m.len() > 1024 => Err(invalid("message is longer than 1024 characters")),
        Some(m) if m.trim().is_empty() => Ok(None),
        other => Ok(other),
    }
}

async fn set(
    ctx: Ctx,
    req: ToolStatusRequest,
    status: ToolStatus,
) -> ApiResult<CatalogEntryResponse> {
    let tool = tool_name(&req.tool)?;
    let message = if status == ToolStatus::Active {
        None
    } else {
        message(req.message)?
    };
    let ws = ctx.workspace_id().to_string();
    let mut tx = ctx.store().write(&ws).await?;
    let row = load(tx.conn(), &ws, &req.connection_id).await?;
    tools::set_status(
        tx.conn(),
        &row.id,
        &tool,
        status.as_str(),
        message.as_deref(),
        now_ms(),
    )
    .await?;
    let stored = tools::catalog_entry(tx.conn(), &row.id, &tool)
        .await?
        .ok_or_else(|| ApiError::Internal("catalog entry vanished".into()))?;
    let out = entry(&stored, false)?;
    tx.commit().await?;
    tracing::info!(connection_id = %row.id, tool = %validate::clip(&tool), status = status.as_str(), "Tool status set.");
    Ok(CatalogEntryResponse { tool: out })
}

async fn block(ctx: Ctx, req: ToolStatusRequest) -> ApiResult<CatalogEntryResponse> {
    set(ctx, req, ToolStatus::Blocked).await
}

async fn deprecate(ctx: Ctx, req: ToolStatusRequest) -> ApiResult<CatalogEntryResponse> {
    set(ctx, req, ToolStatus::Deprecated).await
}

async fn restore(ctx: Ctx, req: ToolStatusRequest) -> ApiResult<CatalogEntryResponse> {
    set(ctx, req, ToolStatus::Active).await
}
