//! `svc.audit.v1.AuditService`: `QueryEvents` (cursor pages, every filter), `GetEvent`, and
//! `StreamEvents` (Connect server streaming, a live tail); and `SyncService/IngestAudit`, where
//! gateways ship their spooled events.

pub mod stream;

use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use base64::Engine;
use portcullis_shared::api::workspace::Permission;
use portcullis_shared::audit::*;

use super::{unary, Access, Ctx, Operation};
use crate::audit::{self as hub, payload_matches, time_ms};
use crate::error::{invalid, ApiError, ApiResult};
use crate::store::audit::{self as events, Cond};

pub const DEFAULT_PAGE_SIZE: u32 = 50;
pub const MAX_PAGE_SIZE: u32 = 1000;
const RESULTS: [&str; 3] = [results::ALLOWED, results::DENIED, results::ERROR];

pub fn operations() -> Vec<(&'static str, Operation)> {
    let view = Access::Platform(Permission::GatewayView);
    vec![
        ("QueryEvents", unary(view, query)),
        ("GetEvent", unary(view, get)),
    ]
}

pub fn sync_operations() -> Vec<(&'static str, Operation)> {
    vec![("IngestAudit", unary(Access::Deployment, ingest))]
}

fn token(time: i64, id: &str) -> String {
    B64.encode(format!("{time}:{id}"))
}

fn untoken(text: &str) -> ApiResult<(i64, String)> {
    let bad = || invalid("page_token is not one this service issued");
    let raw = String::from_utf8(B64.decode(text).map_err(|_| bad())?).map_err(|_| bad())?;
    let (t, id) = raw.split_once(':').ok_or_else(bad)?;
    Ok((t.parse().map_err(|_| bad())?, id.to_string()))
}

fn time_filter(field: &str, value: &Option<String>) -> ApiResult<Option<i64>> {
    match value.as_deref().filter(|v| !v.is_empty()) {
        None => Ok(None),
        Some(v) => time_ms(v)
            .map(Some)
            .ok_or_else(|| invalid(format!("{field} must be an RFC 3339 time"))),
    }
}

/// The column conditions of a query (everything but the payload filters).
fn conditions(q: &QueryEventsRequest) -> ApiResult<Vec<Cond>> {
    if let Some(bad) = q.results.iter().find(|r| !RESULTS.contains(&r.as_str())) {
        return Err(invalid(format!(
            "results: '{bad}' is not one of {}",
            RESULTS.join(", ")
        )));
    }
    for f in &q.payload_filters {
        if f.field.is_empty() || f.values.is_empty() {
            return Err(invalid(
                "payload_filters entries need a field and at least one value",
            ));
        }
    }
    let mut c = Vec::new();
    let mut eq = |col: &'static str, v: &Option<String>| {
        if let Some(v) = v.as_deref().filter(|v| !v.is_empty()) {
            c.push(Cond::Eq(col, v.to_string()));
        }
    };
    eq("actor_id", &q.actor);
    eq("producer_service", &q.producer_service);
    eq("surface", &q.request_surface);
    eq("operation", &q.operation);
    eq("resource_id", &q.primary_resource_id);
    eq("resource_kind", &q.primary_resource_kind);
    eq("trace_id", &q.trace_id);
    eq("activity_id", &q.activity_id);
    if let Some(r) = q.resource.as_deref().filter(|r| !r.is_empty()) {
        c.push(Cond::Resource(r.to_string()));
    }
    c.push(Cond::In("type", q.event_types.clone()));
    c.push(Cond::In("result", q.results.clone()));
    c.push(Cond::In("agent_id", q.agent_ids.clone()));
    if let Some(t) = time_filter("start_time", &q.start_time)? {
        c.push(Cond::TimeFrom(t));
    }
    if let Some(t) = time_filter("end_time", &q.end_time)? {
        c.push(Cond::TimeTo(t));
    }
    Ok(c)
}

/// Newest first, `page_size` (default 50) at a time; `next_page_token` continues.
async fn query(ctx: Ctx, req: QueryEventsRequest) -> ApiResult<QueryEventsResponse> {
    let size = req.page_size.unwrap_or(DEFAULT_PAGE_SIZE);
    if size == 0 || size > MAX_PAGE_SIZE {
        return Err(invalid(format!(
            "page_size must be between 1 and {MAX_PAGE_SIZE} (default {DEFAULT_PAGE_SIZE})"
        )));
    }
    let size = size as usize;
    let base = conditions(&req)?;
    let mut cursor = match req.page_token.as_deref().filter(|t| !t.is_empty()) {
        Some(t) => Some(untoken(t)?),
        None => None,
    };
    // With payload filters, rows are filtered here; read ahead until the page is full.
    let batch = if req.payload_filters.is_empty() {
        size + 1
    } else {
        (size * 4).max(200)
    };
    let mut conn = ctx.store().read().await?;
    let mut page: Vec<(i64, String, AuditEventV1)> = Vec::new();
    loop {
        let mut conds: Vec<Cond> = Vec::new();
        conds.extend(base.iter().map(clone_cond));
        if let Some((t, id)) = &cursor {
            conds.push(Cond::Before(*t, id.clone()));
        }
        let rows = events::query(&mut conn, ctx.workspace_id(), &conds, batch as i64).await?;
        let exhausted = rows.len() < batch;
        cursor = rows.last().map(|(t, id, _)| (*t, id.clone()));
        for row in rows {
            if payload_matches(&req.payload_filters, &row.2) {
                page.push(row);
                if page.len() > size {
                    break;
                }
            }
        }
        if exhausted || page.len() > size {
            break;
        }
    }
    let next_page_token = if page.len() > size {
        page.truncate(size);
        page.last().map(|(t, id, _)| token(*t, id))
    } else {
        None
    };
    Ok(QueryEventsResponse {
        events: page.into_iter().map(|(_, _, e)| e).collect(),
        next_page_token,
    })
}

fn clone_cond(c: &Cond) -> Cond {
    match c {
        Cond::Eq(col, v) => Cond::Eq(col, v.clone()),
        Cond::In(col, v) => Cond::In(col, v.clone()),
        Cond::Resource(v) => Cond::Resource(v.clone()),
        Cond::TimeFrom(t) => Cond::TimeFrom(*t),
        Cond::TimeTo(t) => Cond::TimeTo(*t),
        Cond::Before(t, id) => Cond::Before(*t, id.clone()),
    }
}

async fn get(ctx: Ctx, req: GetEventRequest) -> ApiResult<GetEventResponse> {
    let mut conn = ctx.store().read().await?;
    let event = events::get(&mut conn, ctx.workspace_id(), &req.event_id)
        .await?
        .ok_or_else(|| {
            ApiError::NotFound(format!(
                "event {} not found in this workspace",
                crate::validate::clip(&req.event_id)
            ))
        })?;
    Ok(GetEventResponse { event })
}

/// Stores a gateway's batch; events of another workspace, or without an id or time, are
/// refused one by one (and logged), the rest stored once each.
async fn ingest(
    ctx: Ctx,
    req: IngestAuditRequest<hub::Incoming>,
) -> ApiResult<IngestAuditResponse> {
    if req.events.len() > 1000 {
        return Err(invalid("a batch holds at most 1000 events"));
    }
    let ws = ctx.workspace_id().to_string();
    let mut events = req.events;
    // A gateway's own events (e.g. `audit.dropped`) belong to its deployment's workspace.
    for e in &mut events {
        if e.event.scope.workspace_id.is_empty() {
            e.set_workspace(&ws);
        }
    }
    let (good, bad): (Vec<_>, Vec<_>) = events.into_iter().partition(|e| {
        let e = &e.event;
        e.scope.workspace_id == ws
            && !e.event_id.is_empty()
            && e.event_id.len() <= 100
            && time_ms(&e.time).is_some()
    });
    if !bad.is_empty() {
        tracing::warn!(
            refused = bad.len(),
            "Audit events from a gateway refused: wrong workspace, id or time."
        );
    }
    let stored = hub::store_incoming(ctx.store(), &ctx.app.audit, good).await?;
    Ok(IngestAuditResponse { stored })
}
