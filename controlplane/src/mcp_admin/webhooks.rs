//! `svc_webhooks_*`: testing subscriptions, rotating their secrets, and reading, replaying
//! and cancelling deliveries. Times may be durations back from now (`24h`).

use serde_json::{json, Value};

use super::kit::{opt, reply, req, Args, Effect, Param, Tool, Ty};
use crate::error::ApiResult;

const STATUSES: &str = "Statuses: pending, failed, succeeded, dlq, canceled.";

fn subscription() -> Param {
    req("subscription", Ty::Str, "The subscription's name (or id).")
}

fn delivery_id() -> Param {
    req("delivery_id", Ty::Str, "The delivery's id.")
}

pub fn tools() -> Vec<Tool> {
    vec![
        Tool {
            name: "svc_webhooks_subscription_test",
            description: "Send a test event to a subscription's destination; read the outcome with svc_webhooks_delivery_get.",
            effect: Effect::Write,
            params: vec![subscription()],
            operations: &["TestSubscription"],
            run: |a| reply(by_subscription(a, "TestSubscription")),
        },
        Tool {
            name: "svc_webhooks_subscription_rotate_secret",
            description: "Rotate a subscription's signing secret (the old one signs for 24 h more); the new secret is returned once.",
            effect: Effect::Write,
            params: vec![subscription()],
            operations: &["RotateSubscriptionSecret"],
            run: |a| reply(by_subscription(a, "RotateSubscriptionSecret")),
        },
        Tool {
            name: "svc_webhooks_delivery_list",
            description: "Webhook deliveries, newest first, with filters.",
            effect: Effect::Read,
            params: vec![
                opt("statuses", Ty::StrList, STATUSES),
                opt("since", Ty::Str, "Only deliveries since this time: 24h, 7d or RFC 3339."),
                opt("subscription", Ty::Str, "Only this subscription's (name or id)."),
                opt("destination_id", Ty::Str, "Only this destination's."),
                opt("event_type", Ty::Str, "Only this event type."),
                opt("page_size", Ty::Int, "Page size."),
                opt("page_token", Ty::Str, "The next_page_token of the previous page."),
            ],
            operations: &["ListDeliveries"],
            run: |a| reply(list(a)),
        },
        Tool {
            name: "svc_webhooks_delivery_get",
            description: "One delivery with its attempts and, while retained, its body.",
            effect: Effect::Read,
            params: vec![delivery_id(), opt("include_body", Ty::Bool, "Include the body as sent.")],
            operations: &["GetDelivery"],
            run: |a| {
                reply(async move {
                    let body = Value::Object(a.take(&["delivery_id", "include_body"]));
                    a.call("GetDelivery", body).await
                })
            },
        },
        Tool {
            name: "svc_webhooks_delivery_replay",
            description: "Deliver a delivery's retained body again, as a new delivery.",
            effect: Effect::Write,
            params: vec![delivery_id()],
            operations: &["ReplayDelivery"],
            run: |a| reply(by_delivery(a, "ReplayDelivery")),
        },
        Tool {
            name: "svc_webhooks_delivery_replay_failed",
            description: "Replay every failed or dead-lettered delivery since a time (at most 500 per run; safe to re-run).",
            effect: Effect::Write,
            params: vec![
                req("since", Ty::Str, "24h, 7d or an RFC 3339 time."),
                opt("subscription", Ty::Str, "Only this subscription's (name or id)."),
                opt("destination_id", Ty::Str, "Only this destination's."),
                opt("statuses", Ty::StrList, STATUSES),
                opt("max_deliveries", Ty::Int, "At most this many (default and limit 500)."),
            ],
            operations: &["ReplayFailedDeliveries"],
            run: |a| reply(replay_failed(a)),
        },
        Tool {
            name: "svc_webhooks_delivery_cancel",
            description: "Stop retrying a pending delivery.",
            effect: Effect::Destructive,
            params: vec![delivery_id()],
            operations: &["CancelDeliveryRetry"],
            run: |a| reply(by_delivery(a, "CancelDeliveryRetry")),
        },
    ]
}

async fn by_subscription(a: Args, method: &'static str) -> ApiResult<Value> {
    let body = json!({"subscription_id": a.need("subscription")?});
    a.call(method, body).await
}

async fn by_delivery(a: Args, method: &'static str) -> ApiResult<Value> {
    let body = json!({"delivery_id": a.need("delivery_id")?});
    a.call(method, body).await
}

async fn list(a: Args) -> ApiResult<Value> {
    let mut body = Value::Object(a.take(&[
        "statuses",
        "destination_id",
        "event_type",
        "page_size",
        "page_token",
    ]));
    if let Some(start) = a.since("since")? {
        body["start_time"] = start.into();
    }
    if let Some(s) = a.str("subscription") {
        body["subscription_id"] = s.into();
    }
    a.call("ListDeliveries", body).await
}

async fn replay_failed(a: Args) -> ApiResult<Value> {
    let mut body = Value::Object(a.take(&["destination_id", "statuses", "max_deliveries"]));
    body["since"] = a.since("since")?.unwrap_or_default().into();
    if let Some(s) = a.str("subscription") {
        body["subscription_id"] = s.into();
    }
    a.call("ReplayFailedDeliveries", body).await
}
