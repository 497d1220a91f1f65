//! LLM spend quotas: `CreateLLMQuota`, `UpdateLLMQuota`, `ListLLMQuotas`, `DeleteLLMQuota`,
//! and the gateway variants (`SetGatewayQuota`, `UpdateGatewayQuota`, `ListGatewayQuotas`,
//! `RemoveGatewayQuota`, what the MCP tools `svc_gateway_quota_*` call), which touch gateway
//! quotas only and refuse the ids of other quotas. A quota's subject (type, id or key, pool
//! scope, per-caller flag) is fixed at create and, with its window, unique in the workspace.
//! Free-plan workspaces may create none.

use portcullis_shared::api::quotas::*;
use portcullis_shared::api::workspace::Permission;
use portcullis_shared::api::Empty;

use super::{unary, views, Access, Ctx, Operation};
use crate::error::{exists, invalid, not_found, ApiError, ApiResult};
use crate::store::{agents, gateways, models, now_ms, pools, quotas, workspaces, Conn, StoreError};
use crate::validate;

pub fn operations() -> Vec<(&'static str, Operation)> {
    let view = Access::Platform(Permission::GatewayView);
    let manage = Access::Platform(Permission::GatewayManage);
    vec![
        ("CreateLLMQuota", unary(manage, create)),
        ("UpdateLLMQuota", unary(manage, update)),
        ("ListLLMQuotas", unary(view, list)),
        ("DeleteLLMQuota", unary(manage, delete)),
        ("SetGatewayQuota", unary(manage, set_gateway)),
        ("UpdateGatewayQuota", unary(manage, update_gateway)),
        ("ListGatewayQuotas", unary(view, list_gateway)),
        ("RemoveGatewayQuota", unary(manage, remove_gateway)),
    ]
}

const SCOPES: [&str; 1] = ["total"];

fn check_limit(limit: u64) -> ApiResult<i64> {
    if limit > MAX_LIMIT_MICROS {
        return Err(invalid(format!(
            "limit_micros must be at most {MAX_LIMIT_MICROS} (2^53 - 1 micro-USD, the largest \
             integer every JSON client holds exactly)"
        )));
    }
    i64::try_from(limit).map_err(|_| invalid("limit_micros is too large"))
}

fn check_name(name: Option<&str>) -> ApiResult<String> {
    let name = name.unwrap_or_default().trim();
    if name.chars().count() > 200 || name.chars().any(char::is_control) {
        return Err(invalid(
            "name must be at most 200 characters, without control characters",
        ));
    }
    Ok(name.to_string())
}

/// Checks the subject fields against the subject type and that the subject exists; returns
/// (subject_id, subject_key, pool_id) as stored.
async fn subject(
    conn: &mut Conn,
    ws: &str,
    req: &CreateLLMQuotaRequest,
) -> ApiResult<(String, String, String)> {
    check_subject_fields(req)?;
    let id = subject_id(conn, ws, req).await?;
    let key = subject_key(req)?;
    let pool = match req.pool_id.as_deref() {
        None => String::new(),
        Some(raw) => {
            let pool_id = validate::id("pool_id", raw)?;
            if pools::get(conn, ws, &pool_id).await?.is_none() {
                return Err(not_found("pool", &pool_id));
            }
            pool_id
        }
    };
    Ok((id, key, pool))
}

/// Refuses the fields that do not go with the subject type: a subject key but for act-as
/// quotas, a pool scope or per-caller budgets but for model quotas.
fn check_subject_fields(req: &CreateLLMQuotaRequest) -> ApiResult<()> {
    let t = req.subject_type;
    let name = t.as_str();
    if t != QuotaSubject::ActAs && req.subject_key.is_some() {
        return Err(invalid(format!(
            "subject_key is only for subject_type act_as, not {name}"
        )));
    }
    if req.pool_id.is_some() && t != QuotaSubject::Model {
        return Err(invalid(format!(
            "pool_id scopes model quotas only, not {name} quotas"
        )));
    }
    if req.per_caller == Some(true) && t != QuotaSubject::Model {
        return Err(invalid(format!(
            "per_caller applies to model quotas only, not {name} quotas"
        )));
    }
    Ok(())
}

/// The subject id as stored: the workspace's own, none for act-as quotas, else the id of an
/// agent, pool, model or gateway of the workspace.
async fn subject_id(conn: &mut Conn, ws: &str, req: &CreateLLMQuotaRequest) -> ApiResult<String> {
    let t = req.subject_type;
    let name = t.as_str();
    match t {
        QuotaSubject::Workspace => match req.subject_id.as_deref() {
            None => Ok(ws.to_string()),
            Some(id) if id == ws => Ok(ws.to_string()),
            Some(_) => Err(invalid(
                "subject_id of a workspace quota must be omitted (or be this workspace's id)",
            )),
        },
        QuotaSubject::ActAs => {
            if req.subject_id.is_some() {
                return Err(invalid(
                    "act_as quotas name the end user by subject_key (the OIDC sub), not subject_id",
                ));
            }
            Ok(String::new())
        }
        _ => {
            let raw = req.subject_id.as_deref().ok_or_else(|| {
                invalid(format!(
                    "subject_id is required for {name} quotas (the {name} id)"
                ))
            })?;
            let id = validate::id("subject_id", raw)?;
            let found = match t {
                QuotaSubject::Agent => agents::get(conn, ws, &id).await?.is_some(),
                QuotaSubject::Pool => pools::get(conn, ws, &id).await?.is_some(),
                QuotaSubject::Model => models::get(conn, ws, &id).await?.is_some(),
                QuotaSubject::Gateway => gateways::get(conn, ws, &id).await?.is_some(),
                QuotaSubject::Workspace | QuotaSubject::ActAs => true,
            };
            if !found {
                let what = if t == QuotaSubject::Model {
                    "model connection"
                } else {
                    name
                };
                return Err(not_found(what, &id));
            }
            Ok(id)
        }
    }
}

/// The subject key as stored: the end user's OIDC sub of an act-as quota, else empty.
fn subject_key(req: &CreateLLMQuotaRequest) -> ApiResult<String> {
    match (req.subject_type, req.subject_key.as_deref().map(str::trim)) {
        (QuotaSubject::ActAs, None | Some("")) => Err(invalid(
            "subject_key is required for act_as quotas: the verified end user's OIDC sub",
        )),
        (QuotaSubject::ActAs, Some(k)) if k.len() > 256 || k.chars().any(char::is_control) => Err(
            invalid("subject_key must be at most 256 characters, without control characters"),
        ),
        (QuotaSubject::ActAs, Some(k)) => Ok(k.to_string()),
        _ => Ok(String::new()),
    }
}

fn conflict(row: &quotas::QuotaRow) -> ApiError {
    exists(format!(
        "a {} quota for this subject already exists for the {} window ({}); update it instead",
        row.subject_type, row.quota_window, row.id
    ))
}

/// A quota write's error as answered: [`conflict`] when the write lost to a concurrent one of
/// the same identity on the unique index.
fn conflict_or(row: &quotas::QuotaRow, e: StoreError) -> ApiError {
    if e.is_unique_violation() {
        conflict(row)
    } else {
        e.into()
    }
}

async fn create(ctx: Ctx, req: CreateLLMQuotaRequest) -> ApiResult<QuotaResponse> {
    let ws = ctx.workspace_id().to_string();
    let limit = check_limit(req.limit_micros)?;
    let name = check_name(req.name.as_deref())?;
    let scope = req.scope.clone().unwrap_or_else(|| "total".into());
    if !SCOPES.contains(&scope.as_str()) {
        return Err(invalid(format!(
            "scope '{scope}' is not supported; the scope is {}",
            SCOPES.join(", ")
        )));
    }
    let mut tx = ctx.store().write(&ws).await?;
    let plan = workspaces::get_workspace(tx.conn(), &ws)
        .await?
        .map(|w| w.plan)
        .unwrap_or_default();
    if plan == "free" {
        return Err(ApiError::FailedPrecondition(
            "the free plan allows no cost quotas (its create limit is zero); quotas come with the pro plan"
                .into(),
        ));
    }
    let (subject_id, subject_key, pool_id) = subject(tx.conn(), &ws, &req).await?;
    let now = now_ms();
    let row = quotas::QuotaRow {
        id: uuid::Uuid::new_v4().to_string(),
        workspace_id: ws.clone(),
        subject_type: req.subject_type.as_str().to_string(),
        subject_id,
        subject_key,
        pool_id,
        per_caller: i64::from(req.per_caller.unwrap_or(false)),
        quota_window: req.window.unwrap_or_default().as_str().to_string(),
        limit_micros: limit,
        name,
        enabled: i64::from(!req.disabled.unwrap_or(false)),
        scope,
        created_at: now,
        updated_at: now,
    };
    if let Some(existing) = quotas::find_identity(tx.conn(), &row).await? {
        return Err(conflict(&existing));
    }
    // A concurrent create of the same identity loses on the unique index.
    quotas::insert(tx.conn(), &row)
        .await
        .map_err(|e| conflict_or(&row, e))?;
    let quota = views::quota(&row);
    tx.commit().await?;
    tracing::info!(quota_id = %row.id, subject_type = %row.subject_type, "Quota created.");
    Ok(QuotaResponse { quota })
}

/// `SyncService/GetSpend`: the recorded spend of every day of the current month (so of
/// today too), per quota and caller, for a gateway to seed its counters with.
pub fn sync_operations() -> Vec<(&'static str, Operation)> {
    vec![("GetSpend", unary(Access::Deployment, get_spend))]
}

async fn get_spend(
    ctx: Ctx,
    _req: portcullis_shared::snapshot::GetSpendRequest,
) -> ApiResult<portcullis_shared::snapshot::GetSpendResponse> {
    use portcullis_shared::snapshot::{day_index, month_start_day, Charge, GetSpendResponse};
    let mut conn = ctx.store().read().await?;
    let from = month_start_day(day_index(now_ms() / 1000));
    let spend = quotas::spend_since(&mut conn, ctx.workspace_id(), from)
        .await?
        .into_iter()
        .map(|(quota_id, day, caller, micros)| Charge {
            quota_id,
            day,
            caller,
            micros: u64::try_from(micros).unwrap_or(0),
        })
        .collect();
    Ok(GetSpendResponse {
        workspace_id: ctx.workspace_id().to_string(),
        spend,
    })
}

/// Loads a quota; `only` refuses quotas of other subjects (the gateway variants).
async fn load(
    conn: &mut Conn,
    ws: &str,
    quota_id: &str,
    only: Option<QuotaSubject>,
) -> ApiResult<quotas::QuotaRow> {
    let id = validate::id("quota_id", quota_id)?;
    let row = quotas::get(conn, ws, &id)
        .await?
        .ok_or_else(|| not_found("quota", &id))?;
    match only {
        Some(want) if row.subject_type != want.as_str() => Err(invalid(format!(
            "quota_id {id} is not a {} quota (its subject is {}); use the LLM quota operations for it",
            want.as_str(),
            row.subject_type
        ))),
        _ => Ok(row),
    }
}

async fn update(ctx: Ctx, req: UpdateLLMQuotaRequest) -> ApiResult<QuotaResponse> {
    update_only(ctx, req, None).await
}

async fn update_only(
    ctx: Ctx,
    req: UpdateLLMQuotaRequest,
    only: Option<QuotaSubject>,
) -> ApiResult<QuotaResponse> {
    let fixed = [
        ("subject_type", req.subject_type.is_some()),
        ("subject_id", req.subject_id.is_some()),
        ("subject_key", req.subject_key.is_some()),
        ("pool_id", req.pool_id.is_some()),
        ("per_caller", req.per_caller.is_some()),
        ("scope", req.scope.is_some()),
    ];
    if let Some((field, _)) = fixed.iter().find(|(_, given)| *given) {
        return Err(invalid(format!(
            "{field} cannot change after create: a quota's subject is fixed; delete it and create another"
        )));
    }
    let ws = ctx.workspace_id().to_string();
    let mut tx = ctx.store().write(&ws).await?;
    let mut row = load(tx.conn(), &ws, &req.quota_id, only).await?;
    if let Some(name) = req.name.as_deref() {
        row.name = check_name(Some(name))?;
    }
    if let Some(limit) = req.limit_micros {
        row.limit_micros = check_limit(limit)?;
    }
    if let Some(window) = req.window {
        row.quota_window = window.as_str().to_string();
    }
    if let Some(enabled) = req.enabled {
        row.enabled = i64::from(enabled);
    }
    row.updated_at = now_ms();
    if let Some(existing) = quotas::find_identity(tx.conn(), &row).await? {
        return Err(conflict(&existing));
    }
    quotas::update(tx.conn(), &row)
        .await
        .map_err(|e| conflict_or(&row, e))?;
    let quota = views::quota(&row);
    tx.commit().await?;
    Ok(QuotaResponse { quota })
}

async fn list(ctx: Ctx, _req: ListLLMQuotasRequest) -> ApiResult<ListLLMQuotasResponse> {
    let mut conn = ctx.store().read().await?;
    let rows = quotas::list(&mut conn, ctx.workspace_id()).await?;
    Ok(ListLLMQuotasResponse {
        quotas: rows.iter().map(views::quota).collect(),
    })
}

async fn delete(ctx: Ctx, req: DeleteLLMQuotaRequest) -> ApiResult<Empty> {
    delete_only(ctx, req, None).await
}

async fn delete_only(
    ctx: Ctx,
    req: DeleteLLMQuotaRequest,
    only: Option<QuotaSubject>,
) -> ApiResult<Empty> {
    let ws = ctx.workspace_id().to_string();
    let mut tx = ctx.store().write(&ws).await?;
    let row = load(tx.conn(), &ws, &req.quota_id, only).await?;
    quotas::delete(tx.conn(), &ws, &row.id).await?;
    tx.commit().await?;
    tracing::info!(quota_id = %row.id, "Quota deleted.");
    Ok(Empty {})
}

async fn set_gateway(ctx: Ctx, req: SetGatewayQuotaRequest) -> ApiResult<QuotaResponse> {
    let req = CreateLLMQuotaRequest {
        workspace_id: req.workspace_id,
        subject_type: QuotaSubject::Gateway,
        subject_id: Some(req.gateway_id),
        limit_micros: req.limit_micros,
        window: req.window,
        name: req.name,
        disabled: req.disabled,
        ..Default::default()
    };
    create(ctx, req).await
}

async fn update_gateway(ctx: Ctx, req: UpdateLLMQuotaRequest) -> ApiResult<QuotaResponse> {
    update_only(ctx, req, Some(QuotaSubject::Gateway)).await
}

async fn remove_gateway(ctx: Ctx, req: DeleteLLMQuotaRequest) -> ApiResult<Empty> {
    delete_only(ctx, req, Some(QuotaSubject::Gateway)).await
}

async fn list_gateway(ctx: Ctx, req: ListGatewayQuotasRequest) -> ApiResult<ListLLMQuotasResponse> {
    let gateway = match req.gateway_id.as_deref() {
        Some(raw) => Some(validate::id("gateway_id", raw)?),
        None => None,
    };
    let mut conn = ctx.store().read().await?;
    if let Some(id) = &gateway {
        if gateways::get(&mut conn, ctx.workspace_id(), id)
            .await?
            .is_none()
        {
            return Err(not_found("gateway", id));
        }
    }
    let rows = quotas::list(&mut conn, ctx.workspace_id()).await?;
    Ok(ListLLMQuotasResponse {
        quotas: rows
            .iter()
            .filter(|q| q.subject_type == QuotaSubject::Gateway.as_str())
            .filter(|q| gateway.as_ref().is_none_or(|g| *g == q.subject_id))
            .map(views::quota)
            .collect(),
    })
}
