//! Deliveries: `TestSubscription`, `ListDeliveries`, `GetDelivery`, `ReplayDelivery`,
//! `ReplayFailedDeliveries` and `CancelDeliveryRetry`. A replay is a new delivery of the
//! retained body (same `Service-Event-Id`, a fresh `webhook-id` per attempt); the delivery it
//! replays records it, so bulk replay matches only the last delivery of each chain and is
//! safe to re-run.

use portcullis_shared::api::eventing::*;
use portcullis_shared::api::workspace::Permission;
use serde_json::{json, Value};

use super::{load_destination, load_subscription};
use crate::api::{unary, views, Access, Ctx, Operation};
use crate::audit::webhook_types;
use crate::error::{invalid, not_found, precondition, ApiResult};
use crate::store::webhooks::{self as rows, DeliveryQuery, DeliveryRow};
use crate::store::{now_ms, Conn};
use crate::webhooks::dispatch::new_delivery;
use crate::webhooks::events;

pub fn operations() -> Vec<(&'static str, Operation)> {
    let view = Access::Platform(Permission::EventingView);
    let manage = Access::Platform(Permission::EventingManage);
    let replay = Access::Platform(Permission::EventingReplay);
    vec![
        ("TestSubscription", unary(manage, test)),
        ("ListDeliveries", unary(view, list)),
        ("GetDelivery", unary(view, get)),
        ("ReplayDelivery", unary(replay, replay_one)),
        ("ReplayFailedDeliveries", unary(replay, replay_failed)),
        ("CancelDeliveryRetry", unary(manage, cancel)),
    ]
}

/// Most deliveries one bulk replay handles.
pub const MAX_BULK_REPLAY: u32 = 500;
const DEFAULT_PAGE: u32 = 50;
const MAX_PAGE: u32 = 500;

async fn load(conn: &mut Conn, ws: &str, id: &str) -> ApiResult<DeliveryRow> {
    if id.is_empty() {
        return Err(invalid("delivery_id is required"));
    }
    rows::delivery(conn, ws, id)
        .await?
        .ok_or_else(|| not_found("delivery", &crate::validate::clip(id)))
}

/// Queues an `eventing.test` event for the subscription's destination, filters aside.
async fn test(ctx: Ctx, req: SubscriptionRefRequest) -> ApiResult<TestSubscriptionResponse> {
    let ws = ctx.workspace_id().to_string();
    let mut tx = ctx.store().write_unscoped().await?;
    let sub = load_subscription(tx.conn(), &ws, &req.subscription_id).await?;
    let now = now_ms();
    let event_id = uuid::Uuid::new_v4().to_string();
    let mut data = serde_json::Map::new();
    data.insert("event_id".into(), json!(event_id));
    data.insert("subscription_id".into(), json!(sub.id));
    data.insert("subscription_name".into(), json!(sub.name));
    data.insert(
        "message".into(),
        json!("A test event from Portcullis: this destination receives webhooks."),
    );
    let body = events::body(webhook_types::TEST, &views::ts(now), data).to_string();
    let settings = &ctx.app.webhooks.settings;
    let delivery = new_delivery(&sub, &event_id, webhook_types::TEST, body, now, settings);
    rows::insert_delivery(tx.conn(), &delivery).await?;
    tx.commit().await?;
    ctx.app.webhooks.wake.deliveries.notify_one();
    Ok(TestSubscriptionResponse {
        delivery_id: delivery.id,
    })
}

fn time_arg(field: &str, value: &str) -> ApiResult<i64> {
    chrono::DateTime::parse_from_rfc3339(value)
        .map(|t| t.timestamp_millis())
        .map_err(|_| {
            invalid(format!(
                "{field} must be an RFC 3339 time, like 2026-11-25T10:00:00Z"
            ))
        })
}

fn statuses(list: &[DeliveryStatus]) -> Vec<String> {
    list.iter().map(|s| s.as_str().to_string()).collect()
}

async fn list(ctx: Ctx, req: ListDeliveriesRequest) -> ApiResult<ListDeliveriesResponse> {
    let ws = ctx.workspace_id().to_string();
    let mut conn = ctx.store().read().await?;
    let since = match req.start_time.as_str() {
        "" => None,
        t => Some(time_arg("start_time", t)?),
    };
    let subscription = match req.subscription_id.as_str() {
        "" => None,
        given => Some(load_subscription(&mut conn, &ws, given).await?.id),
    };
    let destination = match req.destination_id.as_str() {
        "" => None,
        given => Some(load_destination(&mut conn, &ws, given).await?.id),
    };
    let before = match req.page_token.split_once(':') {
        None if req.page_token.is_empty() => None,
        Some((at, id)) if at.parse::<i64>().is_ok() => {
            Some((at.parse().unwrap_or(0), id.to_string()))
        }
        _ => return Err(invalid("page_token is not one this server gave")),
    };
    let size = match req.page_size {
        0 => DEFAULT_PAGE,
        n => n.min(MAX_PAGE),
    };
    let query = DeliveryQuery {
        workspace_id: &ws,
        statuses: statuses(&req.statuses),
        since,
        subscription_id: subscription.as_deref(),
        destination_id: destination.as_deref(),
        event_type: (!req.event_type.is_empty()).then_some(req.event_type.as_str()),
        leaves_only: false,
        before,
        limit: i64::from(size) + 1,
    };
    let mut found = rows::query_deliveries(&mut conn, &query).await?;
    let next_page_token = if found.len() > size as usize {
        found.truncate(size as usize);
        found
            .last()
            .map(|d| format!("{}:{}", d.created_at, d.id))
            .unwrap_or_default()
    } else {
        String::new()
    };
    Ok(ListDeliveriesResponse {
        deliveries: found.into_iter().map(view).collect(),
        next_page_token,
    })
}

async fn get(ctx: Ctx, req: GetDeliveryRequest) -> ApiResult<GetDeliveryResponse> {
    let mut conn = ctx.store().read().await?;
    let row = load(&mut conn, ctx.workspace_id(), &req.delivery_id).await?;
    let attempts = rows::attempts(&mut conn, &row.id)
        .await?
        .into_iter()
        .map(|a| Attempt {
            attempt: a.attempt as u32,
            webhook_id: a.webhook_id,
            started_at: views::ts(a.started_at),
            duration_ms: a.duration_ms.max(0) as u64,
            status_code: a.status_code.map(|c| c as u16),
            error: a.error,
        })
        .collect();
    let body = if req.include_body {
        row.retained_body(now_ms())
            .and_then(|b| serde_json::from_str::<Value>(b).ok())
    } else {
        None
    };
    Ok(GetDeliveryResponse {
        delivery: view(row),
        attempts,
        body,
    })
}

/// Why a delivery cannot be replayed now, if it cannot.
async fn replayable(conn: &mut Conn, row: &DeliveryRow) -> ApiResult<Result<(), Refusal>> {
    if row.retained_body(now_ms()).is_none() {
        return Ok(Err(Refusal::BodyExpired));
    }
    match rows::destination(conn, &row.destination_id).await? {
        None => Ok(Err(Refusal::Destination(
            "its destination was deleted".into(),
        ))),
        Some(d) if d.enabled == 0 => Ok(Err(Refusal::Destination(format!(
            "its destination '{}' is disabled; enable it with UpdateDestination first",
            d.name
        )))),
        Some(_) => Ok(Ok(())),
    }
}

enum Refusal {
    BodyExpired,
    Destination(String),
}

/// A new delivery of `row`'s body, due now and recorded on `row`. The body keeps its
/// retention period: replaying does not extend it.
async fn replay(conn: &mut Conn, ctx: &Ctx, row: &DeliveryRow) -> ApiResult<DeliveryRow> {
    let now = now_ms();
    let first_wait = ctx.app.webhooks.settings.schedule[0].as_millis() as i64;
    let copy = DeliveryRow {
        id: uuid::Uuid::new_v4().to_string(),
        status: DeliveryStatus::Pending.as_str().into(),
        attempts: 0,
        next_attempt_at: Some(now + first_wait),
        lease_owner: None,
        lease_until: None,
        last_status_code: None,
        last_error: String::new(),
        replay_of: row.id.clone(),
        replayed_by: String::new(),
        created_at: now,
        updated_at: now,
        ..row.clone()
    };
    rows::insert_delivery(conn, &copy).await?;
    rows::mark_replayed(conn, &row.id, &copy.id, now).await?;
    Ok(copy)
}

async fn replay_one(ctx: Ctx, req: DeliveryRefRequest) -> ApiResult<DeliveryResponse> {
    let ws = ctx.workspace_id().to_string();
    let mut tx = ctx.store().write_unscoped().await?;
    let row = load(tx.conn(), &ws, &req.delivery_id).await?;
    match replayable(tx.conn(), &row).await? {
        Ok(()) => {}
        Err(Refusal::BodyExpired) => {
            return Err(precondition(
                "the delivery's body is past its retention period; it cannot be replayed",
            ))
        }
        Err(Refusal::Destination(why)) => {
            return Err(precondition(format!(
                "the delivery cannot be replayed: {why}"
            )))
        }
    }
    // A delivery still retrying is replaced: its remaining retries stop, as a cancel would
    // stop them, and the replay goes now. An attempt already on the wire still finishes.
    if row.next_attempt_at.is_some() {
        rows::cancel(tx.conn(), &row.id, now_ms()).await?;
    }
    let copy = replay(tx.conn(), &ctx, &row).await?;
    tx.commit().await?;
    ctx.app.webhooks.wake.deliveries.notify_one();
    Ok(DeliveryResponse {
        delivery: view(copy),
    })
}

async fn replay_failed(
    ctx: Ctx,
    req: ReplayFailedDeliveriesRequest,
) -> ApiResult<ReplayFailedDeliveriesResponse> {
    if req.since.is_empty() {
        return Err(invalid(
            "since is required: replay deliveries created since this time",
        ));
    }
    let since = time_arg("since", &req.since)?;
    let wanted = if req.statuses.is_empty() {
        vec![DeliveryStatus::Failed, DeliveryStatus::Dlq]
    } else {
        req.statuses.clone()
    };
    if let Some(s) = wanted
        .iter()
        .find(|s| !matches!(s, DeliveryStatus::Failed | DeliveryStatus::Dlq))
    {
        return Err(invalid(format!(
            "statuses: bulk replay takes failed and dlq, not {} (canceled deliveries are never \
             recovered by bulk replay)",
            s.as_str()
        )));
    }
    let max = match req.max_deliveries {
        0 => MAX_BULK_REPLAY,
        n if n > MAX_BULK_REPLAY => {
            return Err(invalid(format!(
                "max_deliveries: at most {MAX_BULK_REPLAY} per run"
            )))
        }
        n => n,
    };
    let ws = ctx.workspace_id().to_string();
    let mut tx = ctx.store().write_unscoped().await?;
    let subscription = match req.subscription_id.as_str() {
        "" => None,
        given => Some(load_subscription(tx.conn(), &ws, given).await?.id),
    };
    let destination = match req.destination_id.as_str() {
        "" => None,
        given => Some(load_destination(tx.conn(), &ws, given).await?.id),
    };
    let query = DeliveryQuery {
        workspace_id: &ws,
        statuses: statuses(&wanted),
        since: Some(since),
        subscription_id: subscription.as_deref(),
        destination_id: destination.as_deref(),
        leaves_only: true,
        limit: i64::from(max),
        ..Default::default()
    };
    let matched = rows::query_deliveries(tx.conn(), &query).await?;
    let mut reply = ReplayFailedDeliveriesResponse {
        matched: matched.len() as u32,
        ..Default::default()
    };
    for row in &matched {
        match replayable(tx.conn(), row).await? {
            Ok(()) => {
                let copy = replay(tx.conn(), &ctx, row).await?;
                reply.replayed += 1;
                reply.replay_delivery_ids.push(copy.id);
            }
            Err(Refusal::BodyExpired) => reply.skipped_body_expired += 1,
            Err(Refusal::Destination(_)) => reply.failed += 1,
        }
    }
    tx.commit().await?;
    ctx.app.webhooks.wake.deliveries.notify_one();
    Ok(reply)
}

async fn cancel(ctx: Ctx, req: DeliveryRefRequest) -> ApiResult<DeliveryResponse> {
    let ws = ctx.workspace_id().to_string();
    let mut tx = ctx.store().write_unscoped().await?;
    let row = load(tx.conn(), &ws, &req.delivery_id).await?;
    if !rows::cancel(tx.conn(), &row.id, now_ms()).await? {
        return Err(precondition(format!(
            "the delivery is {}; only a pending delivery's retries can be canceled",
            row.status
        )));
    }
    let row = load(tx.conn(), &ws, &row.id).await?;
    tx.commit().await?;
    Ok(DeliveryResponse {
        delivery: view(row),
    })
}

pub fn view(row: DeliveryRow) -> Delivery {
    Delivery {
        delivery_id: row.id,
        workspace_id: row.workspace_id,
        subscription_id: row.subscription_id,
        destination_id: row.destination_id,
        event_id: row.event_id,
        event_type: row.event_type,
        status: DeliveryStatus::parse(&row.status).unwrap_or(DeliveryStatus::Failed),
        attempts: row.attempts.max(0) as u32,
        next_attempt_at: row.next_attempt_at.map(views::ts),
        last_status_code: row.last_status_code.map(|c| c as u16),
        last_error: row.last_error,
        replay_of: row.replay_of,
        replayed_by: row.replayed_by,
        body_expires_at: views::ts(row.body_expires_at),
        created_at: views::ts(row.created_at),
        updated_at: views::ts(row.updated_at),
    }
}
