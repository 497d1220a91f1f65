//! `portcullis webhook delivery list|get|replay|replay-failed|cancel`.

use anyhow::Context as _;
use portcullis_shared::api::eventing::*;
use portcullis_shared::api::service::EVENTING;

use crate::args::DeliveryCmd;
use crate::ctx::{Ctx, Reply};
use crate::output::{self, Lines};
use crate::parse::time_arg;

pub async fn run(ctx: &Ctx, cmd: DeliveryCmd) -> anyhow::Result<()> {
    let workspace_id = ctx.ws().await?;
    let reply: Reply<DeliveryResponse> = match cmd {
        DeliveryCmd::List {
            statuses,
            since,
            subscription,
            destination,
            event_type,
            max,
            page_token,
        } => {
            let req = ListDeliveriesRequest {
                workspace_id,
                statuses,
                start_time: since_arg(since.as_deref())?.unwrap_or_default(),
                subscription_id: subscription.unwrap_or_default(),
                destination_id: destination.unwrap_or_default(),
                event_type: event_type.unwrap_or_default(),
                page_size: max.unwrap_or_default(),
                page_token: page_token.unwrap_or_default(),
            };
            let reply: Reply<ListDeliveriesResponse> =
                ctx.send(EVENTING, "ListDeliveries", &req).await?;
            ctx.print(&reply, page);
            return Ok(());
        }
        DeliveryCmd::Get {
            delivery_id,
            include_body,
        } => {
            let req = GetDeliveryRequest {
                workspace_id,
                delivery_id,
                include_body,
            };
            let reply: Reply<GetDeliveryResponse> = ctx.send(EVENTING, "GetDelivery", &req).await?;
            ctx.print(&reply, |r| show_with_attempts(r, include_body));
            return Ok(());
        }
        DeliveryCmd::Replay { delivery_id } => {
            let req = delivery_ref(workspace_id, delivery_id);
            ctx.send(EVENTING, "ReplayDelivery", &req).await?
        }
        DeliveryCmd::ReplayFailed {
            since,
            subscription,
            destination,
            statuses,
            max,
        } => {
            let req = ReplayFailedDeliveriesRequest {
                workspace_id,
                since: since_arg(Some(since.as_str()))?.unwrap_or_default(),
                destination_id: destination.unwrap_or_default(),
                subscription_id: subscription.unwrap_or_default(),
                statuses,
                max_deliveries: max.unwrap_or_default(),
            };
            let reply: Reply<ReplayFailedDeliveriesResponse> =
                ctx.send(EVENTING, "ReplayFailedDeliveries", &req).await?;
            ctx.print(&reply, replayed);
            return Ok(());
        }
        DeliveryCmd::Cancel { delivery_id } => {
            let req = delivery_ref(workspace_id, delivery_id);
            ctx.send(EVENTING, "CancelDeliveryRetry", &req).await?
        }
    };
    ctx.print(&reply, |r| show(&r.delivery));
    Ok(())
}

fn since_arg(since: Option<&str>) -> anyhow::Result<Option<String>> {
    since.map(time_arg).transpose().context("--since")
}

fn delivery_ref(workspace_id: String, delivery_id: String) -> DeliveryRefRequest {
    DeliveryRefRequest {
        workspace_id,
        delivery_id,
    }
}

/// One page of deliveries, and the flag that fetches the next.
fn page(r: &ListDeliveriesResponse) {
    table(&r.deliveries);
    if !r.next_page_token.is_empty() {
        output::line(&format!("next page: --page-token {}", r.next_page_token));
    }
}

/// One delivery, its attempts, and its body when asked for (`include_body`).
fn show_with_attempts(r: &GetDeliveryResponse, include_body: bool) {
    show(&r.delivery);
    attempts(&r.attempts);
    if let Some(body) = &r.body {
        output::line("body:");
        output::json(body);
    } else if include_body {
        output::line("body: no longer retained");
    }
}

/// What `delivery replay-failed` matched and replayed.
fn replayed(r: &ReplayFailedDeliveriesResponse) {
    Lines::new()
        .add("matched", r.matched)
        .add("replayed", r.replayed)
        .add("skipped (body expired)", r.skipped_body_expired)
        .add("failed", r.failed)
        .add("replays", output::join(&r.replay_delivery_ids))
        .print();
}

/// The last attempt's outcome: its HTTP status, else its error, else `-`.
fn last_outcome(d: &Delivery) -> String {
    match (d.last_status_code, d.last_error.as_str()) {
        (Some(code), _) => code.to_string(),
        (None, "") => "-".into(),
        (None, error) => error.chars().take(40).collect(),
    }
}

fn table(deliveries: &[Delivery]) {
    let rows = deliveries
        .iter()
        .map(|d| {
            vec![
                d.created_at.clone(),
                d.delivery_id.clone(),
                d.event_type.clone(),
                d.status.as_str().to_string(),
                d.attempts.to_string(),
                last_outcome(d),
                d.next_attempt_at.clone().unwrap_or_else(|| "-".into()),
            ]
        })
        .collect();
    output::table(
        &[
            "created",
            "id",
            "event",
            "status",
            "attempts",
            "last",
            "next attempt",
        ],
        rows,
    );
}

fn show(d: &Delivery) {
    Lines::new()
        .add("delivery_id", &d.delivery_id)
        .add("event_type", &d.event_type)
        .add("event_id", &d.event_id)
        .add("status", d.status.as_str())
        .add("attempts", d.attempts)
        .opt("last_status_code", d.last_status_code)
        .add("last_error", &d.last_error)
        .opt("next_attempt_at", d.next_attempt_at.as_ref())
        .add("subscription_id", &d.subscription_id)
        .add("destination_id", &d.destination_id)
        .add("replay_of", &d.replay_of)
        .add("body_expires_at", &d.body_expires_at)
        .add("created_at", &d.created_at)
        .add("updated_at", &d.updated_at)
        .print();
}

fn attempts(attempts: &[Attempt]) {
    if attempts.is_empty() {
        return;
    }
    let rows = attempts
        .iter()
        .map(|a| {
            vec![
                a.attempt.to_string(),
                a.started_at.clone(),
                format!("{} ms", a.duration_ms),
                a.status_code.map_or_else(|| "-".into(), |c| c.to_string()),
                if a.error.is_empty() {
                    "-".into()
                } else {
                    a.error.clone()
                },
                a.webhook_id.clone(),
            ]
        })
        .collect();
    output::line("");
    output::table(
        &[
            "attempt",
            "started",
            "took",
            "status",
            "error",
            "webhook id",
        ],
        rows,
    );
}
