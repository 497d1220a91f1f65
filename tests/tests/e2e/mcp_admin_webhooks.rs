//! The MCP admin server's webhook delivery tools, driven by the official MCP Python SDK, each
//! with its effect checked through the Connect API: test events dead-lettered while the
//! receiver is down, replayed by id and in bulk, a waiting delivery canceled, and a rotated
//! subscription secret signing alongside the old one.

use portcullis_tests::controlplane::EVENTING;
use portcullis_tests::receiver::{verify, Answer, Receiver};
use portcullis_tests::ControlPlane;
use serde_json::{json, Value};

use crate::eventing::wait_attempted;
use crate::mcp_admin::{ok, refused, session};
use crate::mcp_admin_more::text;
use crate::webhooks::{delivery, settled};

/// Retries a second apart: a delivery that keeps failing is dead-lettered in about 2 s.
const WEBHOOK_ENV: &[(&str, &str)] = &[
    ("PORTCULLIS_ALLOW_PRIVATE_WEBHOOK_TARGETS", "true"),
    ("PORTCULLIS_WEBHOOK_RETRY_SCHEDULE", "0s,1s,1s"),
];

mod webhook_deliveries_through_the_tools {
    use portcullis_tests::{Backend, ControlPlane};

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn sqlite() {
        let cp = ControlPlane::start_with(Backend::Sqlite, super::WEBHOOK_ENV).await;
        super::webhook_deliveries_through_the_tools(&cp).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn postgres() {
        let cp = ControlPlane::start_with(Backend::Postgres, super::WEBHOOK_ENV).await;
        super::webhook_deliveries_through_the_tools(&cp).await;
    }
}

async fn webhook_deliveries_through_the_tools(cp: &ControlPlane) {
    let receiver = Receiver::start().await;
    let created = cp
        .ok(
            EVENTING,
            "CreateSubscription",
            cp.body(json!({"name": "ops", "event_types": ["eventing.test"],
                "delivery_endpoint": receiver.url()})),
        )
        .await;
    let first_secret = text(&created["signing_secret"]);
    let destination = created["destination"].clone();

    // Two test events while the receiver is down: both end in the dead-letter queue.
    let dead = test_events_while_down_are_dead_lettered(cp, &receiver).await;
    // Back, but the next delivery is told to wait an hour: it stays pending.
    let waiting = a_delivery_told_to_wait_stays_pending(cp, &receiver).await;

    let dead_detail = delivery(cp, &dead[0]).await;
    let out = delivery_tools_session(cp, &dead, &waiting).await;
    // The read is the Connect reply: three failed attempts, and the body as sent.
    let got = ok(&out, 0);
    assert_eq!(got, dead_detail);
    assert_eq!(got["delivery"]["status"], "dlq");
    assert_eq!(got["attempts"].as_array().unwrap().len(), 3, "{got:#}");
    assert_eq!(got["attempts"][2]["status_code"], 503);
    assert_eq!(got["body"]["type"], "eventing.test");

    // One replayed by id, the other by the bulk replay, which skips the replayed one.
    replays_by_id_and_in_bulk_each_succeed(cp, &out, &dead).await;

    // Canceled: no more attempts; a second cancel and an unknown delivery are refused.
    a_canceled_delivery_is_attempted_no_more(cp, &out, &waiting).await;

    // Rotated: the destination has a new key, and the next delivery is signed with the new
    // secret (and, for the grace period, the old one).
    the_next_delivery_is_signed_with_both_secrets(cp, &out, &receiver, &first_secret, &destination)
        .await;
}

/// Two test deliveries to `ops` while the receiver is down (and one to an unknown
/// subscription): their ids, once dead-lettered.
async fn test_events_while_down_are_dead_lettered(
    cp: &ControlPlane,
    receiver: &Receiver,
) -> Vec<String> {
    receiver.set_down(true);
    let out = session(
        cp,
        &cp.key,
        &[
            (
                "svc_webhooks_subscription_test",
                json!({"subscription": "ops"}),
            ),
            (
                "svc_webhooks_subscription_test",
                json!({"subscription": "ops"}),
            ),
            (
                "svc_webhooks_subscription_test",
                json!({"subscription": "nope"}),
            ),
        ],
    )
    .await;
    let dead: Vec<String> = (0..2).map(|i| text(&ok(&out, i)["delivery_id"])).collect();
    assert_eq!(refused(&out, 2), "not_found");
    for id in &dead {
        settled(cp, id, "dlq").await;
    }
    dead
}

/// A test delivery the receiver answers with a retry an hour later: its id.
async fn a_delivery_told_to_wait_stays_pending(cp: &ControlPlane, receiver: &Receiver) -> String {
    receiver.set_down(false);
    receiver.plan(&[Answer::RetryAfter(429, 3600)]);
    let out = session(
        cp,
        &cp.key,
        &[(
            "svc_webhooks_subscription_test",
            json!({"subscription": "ops"}),
        )],
    )
    .await;
    let waiting = text(&ok(&out, 0)["delivery_id"]);
    wait_attempted(cp, &waiting).await;
    waiting
}

/// Reads and replays the dead deliveries, cancels the waiting one (twice, and an unknown one),
/// rotates the secret and sends another test event.
async fn delivery_tools_session(cp: &ControlPlane, dead: &[String], waiting: &str) -> Value {
    let missing = "00000000-0000-4000-8000-000000000000";
    session(
        cp,
        &cp.key,
        &[
            (
                "svc_webhooks_delivery_get",
                json!({"delivery_id": dead[0], "include_body": true}),
            ),
            (
                "svc_webhooks_delivery_replay",
                json!({"delivery_id": dead[0]}),
            ),
            (
                "svc_webhooks_delivery_replay_failed",
                json!({"since": "1h", "subscription": "ops"}),
            ),
            (
                "svc_webhooks_delivery_cancel",
                json!({"delivery_id": waiting}),
            ),
            (
                "svc_webhooks_delivery_cancel",
                json!({"delivery_id": waiting}),
            ),
            (
                "svc_webhooks_delivery_cancel",
                json!({"delivery_id": missing}),
            ),
            (
                "svc_webhooks_subscription_rotate_secret",
                json!({"subscription": "ops"}),
            ),
            (
                "svc_webhooks_subscription_test",
                json!({"subscription": "ops"}),
            ),
        ],
    )
    .await
}

async fn replays_by_id_and_in_bulk_each_succeed(cp: &ControlPlane, out: &Value, dead: &[String]) {
    let replay = ok(out, 1)["delivery"].clone();
    assert_eq!(replay["replay_of"], dead[0].as_str());
    let bulk = ok(out, 2);
    assert_eq!(
        (bulk["matched"].as_u64(), bulk["replayed"].as_u64()),
        (Some(1), Some(1)),
        "{bulk}"
    );
    let bulk_id = text(&bulk["replay_delivery_ids"][0]);
    for (original, again) in [
        (&dead[0], text(&replay["delivery_id"])),
        (&dead[1], bulk_id),
    ] {
        settled(cp, &again, "succeeded").await;
        let d = delivery(cp, original).await;
        assert_eq!(d["delivery"]["replayed_by"], again.as_str(), "{d:#}");
    }
}

async fn a_canceled_delivery_is_attempted_no_more(cp: &ControlPlane, out: &Value, waiting: &str) {
    assert_eq!(ok(out, 3)["delivery"]["status"], "canceled");
    assert_eq!(refused(out, 4), "failed_precondition");
    assert_eq!(refused(out, 5), "not_found");
    let d = delivery(cp, waiting).await;
    assert_eq!(d["delivery"]["status"], "canceled");
    assert!(d["delivery"]["next_attempt_at"].is_null(), "{d:#}");
    assert_eq!(d["delivery"]["attempts"], 1);
}

async fn the_next_delivery_is_signed_with_both_secrets(
    cp: &ControlPlane,
    out: &Value,
    receiver: &Receiver,
    first_secret: &str,
    destination: &Value,
) {
    let rotated = ok(out, 6);
    let new_secret = text(&rotated["signing_secret"]);
    assert!(new_secret.starts_with("whsec_"), "{rotated}");
    assert_ne!(new_secret, first_secret);
    assert_eq!(rotated["destination_id"], destination["destination_id"]);
    assert_ne!(rotated["key_id"], destination["key_id"]);
    let listed = cp
        .ok(EVENTING, "ListDestinations", cp.body(json!({})))
        .await;
    assert_eq!(listed["destinations"][0]["key_id"], rotated["key_id"]);
    assert!(
        !listed.to_string().contains(&new_secret),
        "never shown again"
    );
    let after = settled(cp, &text(&ok(out, 7)["delivery_id"]), "succeeded").await;
    let event_id = text(&after["delivery"]["event_id"]);
    let seen: Vec<_> = receiver
        .seen()
        .into_iter()
        .filter(|s| s.header("service-event-id") == event_id)
        .collect();
    assert_eq!(seen.len(), 1);
    let checked = verify(&[new_secret.as_str(), first_secret], &seen).await;
    assert_eq!(checked[0]["verified"], json!([true, true]), "{checked:#?}");
}
