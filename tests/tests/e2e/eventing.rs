//! Webhook subscriptions and destinations through their life, judged by what the next
//! delivery does: `GetSubscription`, `UpdateSubscription` (a new event-type filter or field
//! filter is what the next event meets), `DeleteSubscription` (pending deliveries canceled, no
//! more deliveries, the destination stays), `UpdateDestination` (a new endpoint receives the
//! next event; enabling clears a `410 Gone`), `RotateDestinationSecret` (the next delivery is
//! signed with the new secret first, the old one only for its grace period) and
//! `DeleteDestination` (refused while used; its deliveries can no longer be replayed). Each
//! refuses one bad input and changes nothing. Bulk replay (`ReplayFailedDeliveries`) counts a
//! delivery whose body expired as `skipped_body_expired`, and replays at most 500 per run;
//! a body counts as expired once its `body_expires_at` has passed, purged yet or not.

use std::collections::BTreeSet;

use portcullis_tests::controlplane::{AGENTS, EVENTING, RULES};
use portcullis_tests::receiver::{verify, Answer, Receiver, Seen};
use portcullis_tests::{Backend, ControlPlane, Reply};
use serde_json::{json, Value};

use crate::webhooks::{deliveries, delivery, settled, subscribe, test_event, text};

/// Private targets allowed (the receivers are on loopback); a failed first attempt is retried
/// only after an hour, so a delivery can be caught pending.
const ENV: &[(&str, &str)] = &[
    ("PORTCULLIS_ALLOW_PRIVATE_WEBHOOK_TARGETS", "true"),
    ("PORTCULLIS_WEBHOOK_RETRY_SCHEDULE", "0s,1h"),
];

const SUSPENDED: &str = "agent.suspended";
const DEPLOYED: &str = "authorization.rule_bundle.deployed";
const TEST: &str = "eventing.test";

async fn op(cp: &ControlPlane, operation: &str, fields: Value) -> Value {
    cp.ok(EVENTING, operation, cp.body(fields)).await
}

async fn refused(cp: &ControlPlane, operation: &str, fields: Value) -> Reply {
    cp.call(EVENTING, operation, cp.body(fields)).await
}

/// Registers agent `name` and suspends it: one `agent.suspended` event naming it.
async fn suspend(cp: &ControlPlane, name: &str) {
    cp.ok(AGENTS, "RegisterAgent", cp.body(json!({"name": name})))
        .await;
    let body = json!({"agent_id": name, "reason": "testing"});
    cp.ok(AGENTS, "SuspendAgent", cp.body(body)).await;
}

async fn deploy(cp: &ControlPlane, bundle: &str) {
    let policies =
        "@id(\"all\")\npermit (principal, action == Svc::Action::\"mcp:call\", resource);";
    let body = json!({"name": bundle, "policies": policies});
    cp.ok(RULES, "DeployRuleBundle", cp.body(body)).await;
}

/// Whether the request is the `agent.suspended` event of agent `name`.
fn suspension_of(s: &Seen, name: &str) -> bool {
    let body = s.json();
    body["type"] == SUSPENDED && body["data"]["agent_name"] == name
}

/// Waits until `witness` (a subscription to every event, unfiltered) got agent `name`'s
/// suspension: the deliveries of that event to every subscription exist by then, since one
/// event is matched to all subscriptions at once.
async fn witnessed(witness: &Receiver, name: &str) {
    let what = format!("the suspension of {name}");
    witness.wait_for(&what, |s| suspension_of(s, name)).await;
}

async fn subscription(cp: &ControlPlane, given: &str) -> Value {
    op(cp, "GetSubscription", json!({"subscription_id": given})).await["subscription"].clone()
}

async fn destination(cp: &ControlPlane, id: &str) -> Value {
    let listed = op(cp, "ListDestinations", json!({})).await;
    let found = listed["destinations"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["destination_id"] == id)
        .cloned();
    found.unwrap_or(Value::Null)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn subscriptions_are_read_updated_and_deleted() {
    let cp = ControlPlane::start_with(Backend::Sqlite, ENV).await;
    let (hooks, witness) = (Receiver::start().await, Receiver::start().await);
    let all = json!({"name": "witness", "event_types": [SUSPENDED, DEPLOYED],
        "delivery_endpoint": witness.url()});
    subscribe(&cp, all).await;
    let created = subscribe(
        &cp,
        json!({"name": "ops", "event_types": [SUSPENDED], "filters": ["agent_name~=a-*"],
            "delivery_endpoint": hooks.url()}),
    )
    .await;
    let id = text(&created["subscription"]["subscription_id"]).to_string();
    get_subscription_by_id_or_name(&cp, &created).await;
    suspend(&cp, "a-one").await;
    hooks
        .wait_for("a-one's suspension", |s| suspension_of(s, "a-one"))
        .await;
    update_subscription_changes_what_is_delivered(&cp, &hooks, &witness, &id).await;
    update_subscription_refusals_change_nothing(&cp, &id).await;
    let destination_id = text(&created["destination"]["destination_id"]).to_string();
    delete_subscription_stops_deliveries(&cp, &hooks, &witness, &id, &destination_id).await;
}

async fn get_subscription_by_id_or_name(cp: &ControlPlane, created: &Value) {
    let want = &created["subscription"];
    assert_eq!(want["name"], "ops");
    assert_eq!(want["event_types"], json!([SUSPENDED]));
    assert_eq!(want["filters"], json!(["agent_name~=a-*"]));
    assert_eq!(want["enabled"], true);
    assert_eq!(
        want["destination_id"],
        created["destination"]["destination_id"]
    );
    let id = text(&want["subscription_id"]);
    assert_eq!(&subscription(cp, id).await, want);
    assert_eq!(&subscription(cp, "ops").await, want);
    let by_alias = op(cp, "GetSubscription", json!({"subscription": "ops"})).await;
    assert_eq!(&by_alias["subscription"], want);
    refused(cp, "GetSubscription", json!({"subscription_id": "nope"}))
        .await
        .expect_error("not_found", 404)
        .mentions("nope");
    refused(cp, "GetSubscription", json!({}))
        .await
        .expect_error("invalid_argument", 400)
        .mentions("missing field `subscription_id`");
}

/// A new event-type list, then a new field filter: each is what the next event meets; while
/// disabled it receives nothing.
async fn update_subscription_changes_what_is_delivered(
    cp: &ControlPlane,
    hooks: &Receiver,
    witness: &Receiver,
    id: &str,
) {
    let before = subscription(cp, id).await;
    let fields = json!({"subscription_id": id, "name": "ops-renamed", "event_types": [DEPLOYED]});
    let updated = op(cp, "UpdateSubscription", fields).await["subscription"].clone();
    assert_eq!(updated["name"], "ops-renamed");
    assert_eq!(updated["event_types"], json!([DEPLOYED]));
    assert_eq!(
        updated["filters"], before["filters"],
        "left out, filters stay"
    );
    assert_eq!(updated["destination_id"], before["destination_id"]);
    assert_eq!(updated["created_at"], before["created_at"]);
    assert_eq!(subscription(cp, "ops-renamed").await, updated);

    // No longer subscribed to suspensions; now to deployments.
    suspend(cp, "a-two").await;
    witnessed(witness, "a-two").await;
    deploy(cp, "first").await;
    let seen = hooks
        .wait_for("the deployment", |s| s.json()["type"] == DEPLOYED)
        .await;
    assert!(!seen.iter().any(|s| suspension_of(s, "a-two")), "{seen:#?}");
    assert_eq!(
        deliveries(cp, json!({"subscription_id": id})).await.len(),
        2
    );

    // Filters replaced: only the agent named `keep`.
    let fields = json!({"subscription_id": "ops-renamed", "event_types": [SUSPENDED],
        "filters": ["agent_name=keep"]});
    let updated = op(cp, "UpdateSubscription", fields).await["subscription"].clone();
    assert_eq!(updated["filters"], json!(["agent_name=keep"]));
    suspend(cp, "a-three").await;
    suspend(cp, "keep").await;
    hooks
        .wait_for("keep's suspension", |s| suspension_of(s, "keep"))
        .await;
    witnessed(witness, "a-three").await;
    let list = deliveries(cp, json!({"subscription_id": id})).await;
    assert_eq!(
        list.len(),
        3,
        "a-three did not pass the new filter: {list:#?}"
    );
    assert!(!hooks.seen().iter().any(|s| suspension_of(s, "a-three")));

    // Disabled, it receives nothing; enabled again, the next event arrives.
    let fields = json!({"subscription_id": id, "enabled": false, "filters": ["agent_name~=keep*"]});
    let off = op(cp, "UpdateSubscription", fields).await["subscription"].clone();
    assert_eq!(
        (&off["enabled"], &off["event_types"]),
        (&json!(false), &json!([SUSPENDED]))
    );
    suspend(cp, "keep-off").await;
    witnessed(witness, "keep-off").await;
    assert_eq!(
        deliveries(cp, json!({"subscription_id": id})).await.len(),
        3
    );
    let on = op(
        cp,
        "UpdateSubscription",
        json!({"subscription_id": id, "enabled": true}),
    )
    .await;
    assert_eq!(on["subscription"]["enabled"], true);
    suspend(cp, "keep-on").await;
    hooks
        .wait_for("keep-on's suspension", |s| suspension_of(s, "keep-on"))
        .await;
    assert!(!hooks.seen().iter().any(|s| suspension_of(s, "keep-off")));
}

/// Unknown subscription, unknown event type, bad filter, taken name: refused, and a
/// refused update changes none of the fields it carried.
async fn update_subscription_refusals_change_nothing(cp: &ControlPlane, id: &str) {
    let before = subscription(cp, id).await;
    refused(
        cp,
        "UpdateSubscription",
        json!({"subscription_id": "nope", "enabled": false}),
    )
    .await
    .expect_error("not_found", 404)
    .mentions("nope");
    let bad_type = json!({"subscription_id": id, "name": "renamed-again",
        "event_types": ["agent.exploded"]});
    refused(cp, "UpdateSubscription", bad_type)
        .await
        .expect_error("invalid_argument", 400)
        .mentions("event_types[0]: unknown event type \"agent.exploded\"");
    let bad_filter = json!({"subscription_id": id, "enabled": false, "filters": ["agent_name"]});
    refused(cp, "UpdateSubscription", bad_filter)
        .await
        .expect_error("invalid_argument", 400)
        .mentions("filters[0]");
    let none = json!({"subscription_id": id, "event_types": []});
    refused(cp, "UpdateSubscription", none)
        .await
        .expect_error("invalid_argument", 400)
        .mentions("at least one event type");
    let taken = json!({"subscription_id": id, "name": "witness"});
    refused(cp, "UpdateSubscription", taken)
        .await
        .expect_error("already_exists", 409)
        .mentions("witness");
    assert_eq!(subscription(cp, id).await, before, "nothing changed");
}

/// Its pending delivery is canceled, it is gone, its destination stays, and later events
/// reach it no more.
async fn delete_subscription_stops_deliveries(
    cp: &ControlPlane,
    hooks: &Receiver,
    witness: &Receiver,
    id: &str,
    destination_id: &str,
) {
    hooks.plan(&[Answer::Status(503)]);
    let pending = test_event(cp, id).await;
    wait_attempted(cp, &pending).await;
    refused(cp, "DeleteSubscription", json!({"subscription_id": ""}))
        .await
        .expect_error("invalid_argument", 400)
        .mentions("missing field `subscription_id`");
    refused(cp, "DeleteSubscription", json!({"subscription_id": "nope"}))
        .await
        .expect_error("not_found", 404);
    assert_eq!(
        subscription(cp, id).await["name"],
        "ops-renamed",
        "still there"
    );

    let deleted = op(cp, "DeleteSubscription", json!({"subscription_id": id})).await;
    assert_eq!(deleted, json!({}));
    let d = delivery(cp, &pending).await["delivery"].clone();
    assert_eq!(d["status"], "canceled", "{d:#}");
    assert!(d["next_attempt_at"].is_null(), "{d:#}");
    refused(cp, "GetSubscription", json!({"subscription_id": id}))
        .await
        .expect_error("not_found", 404);
    refused(cp, "DeleteSubscription", json!({"subscription_id": id}))
        .await
        .expect_error("not_found", 404);
    let subs = op(cp, "ListSubscriptions", json!({})).await["subscriptions"].clone();
    assert_eq!(subs.as_array().unwrap().len(), 1, "{subs:#}");
    assert_eq!(subs[0]["name"], "witness");
    assert_eq!(destination(cp, destination_id).await["name"], "ops");

    // A later event it would have matched reaches only the witness.
    let received = hooks.seen().len();
    let by_destination = json!({"destination_id": destination_id});
    let stored = deliveries(cp, by_destination.clone()).await.len();
    suspend(cp, "keep-2").await;
    witnessed(witness, "keep-2").await;
    assert_eq!(deliveries(cp, by_destination).await.len(), stored);
    assert_eq!(hooks.seen().len(), received);
}

/// Waits until the delivery's first attempt is recorded and it waits for its retry.
pub(crate) async fn wait_attempted(cp: &ControlPlane, id: &str) -> Value {
    for _ in 0..200 {
        let d = delivery(cp, id).await["delivery"].clone();
        if d["attempts"] == 1 && d["status"] == "pending" {
            return d;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    panic!("{:#}", delivery(cp, id).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn destinations_are_updated_rotated_and_deleted() {
    let cp = ControlPlane::start_with(Backend::Postgres, ENV).await;
    let since = chrono::Utc::now().to_rfc3339();
    let (first, second) = (Receiver::start().await, Receiver::start().await);
    let fields = json!({"name": "hook", "delivery_endpoint": first.url()});
    let created = op(&cp, "CreateDestination", fields).await;
    let secret = text(&created["signing_secret"]).to_string();
    let id = text(&created["destination"]["destination_id"]).to_string();
    let fields = json!({"name": "ops", "event_types": [TEST], "destination_id": "hook"});
    subscribe(&cp, fields).await;

    update_destination_moves_the_next_delivery(&cp, &first, &second, &id, &secret).await;
    update_destination_refusals_change_nothing(&cp, &id).await;
    update_destination_disables_and_enables(&cp, &second, &id).await;
    rotate_destination_secret_signs_the_next_delivery(&cp, &second, &id, &secret).await;
    delete_destination_only_when_unused(&cp, &id, &since).await;
}

/// One test event, acknowledged; the request that carried it.
async fn acknowledged_test(cp: &ControlPlane, r: &Receiver) -> Seen {
    let id = test_event(cp, "ops").await;
    let d = settled(cp, &id, "succeeded").await;
    let webhook_id = text(&d["attempts"][0]["webhook_id"]).to_string();
    let seen = r
        .wait_for("the test event", |s| s.header("webhook-id") == webhook_id)
        .await;
    let mut found = seen
        .into_iter()
        .filter(|s| s.header("webhook-id") == webhook_id);
    found.next().unwrap()
}

async fn update_destination_moves_the_next_delivery(
    cp: &ControlPlane,
    first: &Receiver,
    second: &Receiver,
    id: &str,
    secret: &str,
) {
    let before = destination(cp, id).await;
    let fields = json!({"destination_id": "hook", "name": "hook-2",
        "delivery_endpoint": second.url()});
    let updated = op(cp, "UpdateDestination", fields).await["destination"].clone();
    assert_eq!(updated["destination_id"], id);
    assert_eq!(updated["name"], "hook-2");
    assert_eq!(updated["delivery_endpoint"], second.url());
    assert_eq!(updated["key_id"], before["key_id"], "the secret stays");
    assert_eq!(destination(cp, id).await, updated);
    let seen = acknowledged_test(cp, second).await;
    assert!(first.seen().is_empty(), "the old endpoint got nothing");
    let checked = verify(&[secret], &[seen]).await;
    assert_eq!(checked[0]["verified"], json!([true]), "{checked:#?}");
}

async fn update_destination_refusals_change_nothing(cp: &ControlPlane, id: &str) {
    let before = destination(cp, id).await;
    refused(
        cp,
        "UpdateDestination",
        json!({"destination_id": "nope", "enabled": false}),
    )
    .await
    .expect_error("not_found", 404)
    .mentions("nope");
    for (endpoint, why) in [
        ("ftp://hooks.example.com/x", "delivery_endpoint"),
        ("https://169.254.169.254/latest/meta-data", "metadata"),
    ] {
        let fields = json!({"destination_id": id, "name": "renamed", "enabled": false,
            "delivery_endpoint": endpoint});
        refused(cp, "UpdateDestination", fields)
            .await
            .expect_error("invalid_argument", 400)
            .mentions(why);
    }
    let fields = json!({"destination_id": id, "settings": {"webhook_url": "https://x.example"}});
    refused(cp, "UpdateDestination", fields)
        .await
        .expect_error("invalid_argument", 400)
        .mentions("the https provider takes none");
    refused(cp, "UpdateDestination", json!({"destination_id": ""}))
        .await
        .expect_error("invalid_argument", 400)
        .mentions("missing field `destination_id`");
    assert_eq!(destination(cp, id).await, before, "nothing changed");
}

/// A `410 Gone` disables it; `enabled: false` stops deliveries; `enabled: true` clears the
/// reason and the next event arrives.
async fn update_destination_disables_and_enables(cp: &ControlPlane, r: &Receiver, id: &str) {
    r.plan(&[Answer::Status(410)]);
    let gone = test_event(cp, "ops").await;
    settled(cp, &gone, "failed").await;
    let disabled = destination(cp, id).await;
    assert_eq!(disabled["enabled"], false, "{disabled:#}");
    assert!(text(&disabled["disabled_reason"]).contains("410"));
    let fields = json!({"destination_id": id, "enabled": true});
    let enabled = op(cp, "UpdateDestination", fields).await["destination"].clone();
    assert_eq!(enabled["enabled"], true);
    let reason = enabled.get("disabled_reason");
    assert!(
        reason.is_none_or(|r| r == ""),
        "enabling clears the reason: {enabled:#}"
    );
    let received = r.seen().len();
    acknowledged_test(cp, r).await;
    assert_eq!(r.seen().len(), received + 1);

    let fields = json!({"destination_id": id, "enabled": false});
    let off = op(cp, "UpdateDestination", fields).await["destination"].clone();
    assert_eq!(off["enabled"], false);
    let stopped = test_event(cp, "ops").await;
    let d = settled(cp, &stopped, "failed").await;
    assert!(d["attempts"][0]["status_code"].is_null(), "{d:#}");
    assert!(
        text(&d["attempts"][0]["error"]).contains("disabled"),
        "{d:#}"
    );
    assert_eq!(r.seen().len(), received + 1, "nothing sent while disabled");
    op(
        cp,
        "UpdateDestination",
        json!({"destination_id": id, "enabled": true}),
    )
    .await;
}

/// The reply carries the new secret once; the next delivery is signed with it first and with
/// the old one during the grace period; once that ends the old secret verifies nothing.
async fn rotate_destination_secret_signs_the_next_delivery(
    cp: &ControlPlane,
    r: &Receiver,
    id: &str,
    old: &str,
) {
    let before = destination(cp, id).await;
    refused(
        cp,
        "RotateDestinationSecret",
        json!({"destination_id": "nope"}),
    )
    .await
    .expect_error("not_found", 404)
    .mentions("nope");
    refused(cp, "RotateDestinationSecret", json!({}))
        .await
        .expect_error("invalid_argument", 400)
        .mentions("missing field `destination_id`");
    assert_eq!(destination(cp, id).await, before, "nothing changed");

    let rotated = op(
        cp,
        "RotateDestinationSecret",
        json!({"destination_id": "hook-2"}),
    )
    .await;
    assert_eq!(rotated["destination_id"], id);
    let new = text(&rotated["signing_secret"]).to_string();
    assert!(new.starts_with("whsec_") && new != old, "{rotated}");
    assert_ne!(rotated["key_id"], before["key_id"]);
    assert_eq!(destination(cp, id).await["key_id"], rotated["key_id"]);
    assert!(!destination(cp, id).await.to_string().contains(&new));

    let during = acknowledged_test(cp, r).await;
    let checked = verify(&[&new, old], std::slice::from_ref(&during)).await;
    assert_eq!(checked[0]["verified"], json!([true, true]), "{checked:#?}");
    let signatures = checked[0]["signatures"].as_array().unwrap().clone();
    assert_eq!(signatures.len(), 2, "{checked:#?}");
    let mut first_only = during.clone();
    first_only
        .headers
        .insert("webhook-signature".into(), text(&signatures[0]).into());
    let checked = verify(&[&new, old], &[first_only]).await;
    assert_eq!(
        checked[0]["verified"],
        json!([true, false]),
        "the new one first"
    );

    // The grace period over: one signature, and the old secret verifies nothing.
    cp.db_strings(
        "UPDATE webhook_destinations SET previous_until = 1 WHERE id = $1 RETURNING id",
        id,
    )
    .await;
    let after = acknowledged_test(cp, r).await;
    let checked = verify(&[&new, old], &[after]).await;
    assert_eq!(checked[0]["verified"], json!([true, false]), "{checked:#?}");
    assert_eq!(checked[0]["signatures"].as_array().unwrap().len(), 1);
}

/// Refused while a subscription uses it; once deleted, its deliveries cannot be replayed.
async fn delete_destination_only_when_unused(cp: &ControlPlane, id: &str, since: &str) {
    refused(cp, "DeleteDestination", json!({"destination_id": id}))
        .await
        .expect_error("failed_precondition", 400)
        .mentions("used by 1 subscription");
    refused(cp, "DeleteDestination", json!({"destination_id": "nope"}))
        .await
        .expect_error("not_found", 404);
    assert_eq!(destination(cp, id).await["name"], "hook-2", "still there");

    op(cp, "DeleteSubscription", json!({"subscription_id": "ops"})).await;
    let deleted = op(cp, "DeleteDestination", json!({"destination_id": "hook-2"})).await;
    assert_eq!(deleted, json!({}));
    let left = op(cp, "ListDestinations", json!({})).await;
    assert_eq!(left["destinations"], json!([]));
    refused(cp, "DeleteDestination", json!({"destination_id": id}))
        .await
        .expect_error("not_found", 404);

    // Its failed deliveries (the 410 and the one sent while disabled) are not replayed.
    let failed = deliveries(cp, json!({"statuses": ["failed"]})).await;
    assert_eq!(failed.len(), 2, "{failed:#?}");
    let one = json!({"delivery_id": failed[0]["delivery_id"]});
    refused(cp, "ReplayDelivery", one)
        .await
        .expect_error("failed_precondition", 400)
        .mentions("destination was deleted");
    let bulk = op(cp, "ReplayFailedDeliveries", json!({"since": since})).await;
    assert_eq!(
        (&bulk["matched"], &bulk["replayed"], &bulk["failed"]),
        (&json!(2), &json!(0), &json!(2)),
        "{bulk}"
    );
}

/// One attempt only: a delivery the receiver refuses is `dlq` at once.
const ONE_ATTEMPT: &[(&str, &str)] = &[
    ("PORTCULLIS_ALLOW_PRIVATE_WEBHOOK_TARGETS", "true"),
    ("PORTCULLIS_WEBHOOK_RETRY_SCHEDULE", "0s"),
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bulk_replay_skips_expired_bodies_and_stops_at_500() {
    let cp = ControlPlane::start_with(Backend::Postgres, ONE_ATTEMPT).await;
    let r = Receiver::start().await;
    let since = chrono::Utc::now().to_rfc3339();
    for name in ["ops", "bulk"] {
        let fields = json!({"name": name, "event_types": [TEST], "delivery_endpoint": r.url()});
        subscribe(&cp, fields).await;
    }
    r.set_down(true);
    let dead = dead_letters(&cp, "ops", 3).await;
    let bulk = dead_letters(&cp, "bulk", 1).await;
    r.set_down(false);
    expired_bodies_are_skipped(&cp, &since, &dead[0]).await;
    one_run_replays_at_most_500(&cp, &since, &bulk[0]).await;
}

/// `n` test events of the subscription, each ended in `dlq`.
async fn dead_letters(cp: &ControlPlane, subscription: &str, n: usize) -> Vec<String> {
    let mut ids = Vec::new();
    for _ in 0..n {
        ids.push(test_event(cp, subscription).await);
    }
    for id in &ids {
        settled(cp, id, "dlq").await;
    }
    ids
}

async fn replay_failed(cp: &ControlPlane, since: &str, subscription: &str) -> Value {
    let fields = json!({"since": since, "subscription_id": subscription});
    op(cp, "ReplayFailedDeliveries", fields).await
}

/// `matched`, `replayed`, `skipped_body_expired`, `failed`.
fn counts(reply: &Value) -> [u64; 4] {
    ["matched", "replayed", "skipped_body_expired", "failed"]
        .map(|k| reply[k].as_u64().unwrap_or_else(|| panic!("{k}: {reply}")))
}

/// Of three dead letters, one has lost its body: two are replayed, one is skipped and said
/// so, and it stays unrecovered (a re-run skips it again).
async fn expired_bodies_are_skipped(cp: &ControlPlane, since: &str, expired: &str) {
    // As the retention purge leaves a delivery whose body's time is up.
    cp.db_strings(
        "UPDATE webhook_deliveries SET body = NULL, body_expires_at = 1 WHERE id = $1 \
         RETURNING id",
        expired,
    )
    .await;
    let d = delivery(cp, expired).await;
    assert!(d.get("body").is_none_or(Value::is_null), "{d:#}");
    refused(cp, "ReplayDelivery", json!({"delivery_id": expired}))
        .await
        .expect_error("failed_precondition", 400)
        .mentions("retention");

    let first = replay_failed(cp, since, "ops").await;
    assert_eq!(counts(&first), [3, 2, 1, 0], "{first}");
    let replays = first["replay_delivery_ids"].as_array().unwrap();
    assert_eq!(replays.len(), 2, "{first}");
    for id in replays {
        settled(cp, text(id), "succeeded").await;
    }
    let left = delivery(cp, expired).await["delivery"].clone();
    assert_eq!(left["status"], "dlq", "{left:#}");
    assert!(left.get("replayed_by").is_none_or(|r| r == ""), "{left:#}");
    let again = replay_failed(cp, since, "ops").await;
    assert_eq!(counts(&again), [1, 0, 1, 0], "{again}");
    assert_eq!(again["replay_delivery_ids"], json!([]));
}

/// 601 dead letters (one real, 600 copied in the store): one run replays exactly 500 and
/// matched as many as a run may take; the next run replays the other 101, and a third finds
/// nothing left.
async fn one_run_replays_at_most_500(cp: &ControlPlane, since: &str, source: &str) {
    let copies = cp
        .db_strings(
            "INSERT INTO webhook_deliveries (id, workspace_id, subscription_id, destination_id, \
             event_id, event_type, status, attempts, last_status_code, last_error, body, \
             body_expires_at, created_at, updated_at) \
             SELECT gen_random_uuid()::text, workspace_id, subscription_id, destination_id, \
             gen_random_uuid()::text, event_type, status, attempts, last_status_code, \
             last_error, body, body_expires_at, created_at + n, updated_at \
             FROM webhook_deliveries CROSS JOIN generate_series(1, 600) AS n WHERE id = $1 \
             RETURNING id",
            source,
        )
        .await;
    assert_eq!(copies.len(), 600);
    let too_many = json!({"since": since, "subscription_id": "bulk", "max_deliveries": 501});
    refused(cp, "ReplayFailedDeliveries", too_many)
        .await
        .expect_error("invalid_argument", 400)
        .mentions("at most 500");

    let first = replay_failed(cp, since, "bulk").await;
    assert_eq!(counts(&first), [500, 500, 0, 0], "the cap of one run");
    let ids: BTreeSet<&str> = first["replay_delivery_ids"]
        .as_array()
        .unwrap()
        .iter()
        .map(text)
        .collect();
    assert_eq!(ids.len(), 500);
    let rest = replay_failed(cp, since, "bulk").await;
    assert_eq!(counts(&rest), [101, 101, 0, 0], "the rest on the next run");
    let second: BTreeSet<&str> = rest["replay_delivery_ids"]
        .as_array()
        .unwrap()
        .iter()
        .map(text)
        .collect();
    assert!(ids.is_disjoint(&second));
    let done = replay_failed(cp, since, "bulk").await;
    assert_eq!(counts(&done), [0, 0, 0, 0], "{done}");
}

/// A body is expired once `body_expires_at` has passed, whether or not the hourly purge has
/// dropped it yet: replay refuses it and bulk replay counts it `skipped_body_expired`
/// (docs/api.md, `ReplayDelivery` and `ReplayFailedDeliveries`; SPEC, webhook delivery
/// contract 5).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_past_its_expiry_is_not_replayed_before_the_purge() {
    let cp = ControlPlane::start_with(Backend::Sqlite, ONE_ATTEMPT).await;
    let r = Receiver::start().await;
    let since = chrono::Utc::now().to_rfc3339();
    let fields = json!({"name": "ops", "event_types": [TEST], "delivery_endpoint": r.url()});
    subscribe(&cp, fields).await;
    r.set_down(true);
    let id = dead_letters(&cp, "ops", 1).await.remove(0);
    r.set_down(false);
    cp.db_strings(
        "UPDATE webhook_deliveries SET body_expires_at = 1 WHERE id = $1 RETURNING id",
        &id,
    )
    .await;
    let d = delivery(&cp, &id).await;
    let expires: chrono::DateTime<chrono::Utc> =
        text(&d["delivery"]["body_expires_at"]).parse().unwrap();
    assert!(expires < chrono::Utc::now(), "{d:#}");
    refused(&cp, "ReplayDelivery", json!({"delivery_id": id}))
        .await
        .expect_error("failed_precondition", 400)
        .mentions("retention");
    let bulk = replay_failed(&cp, &since, "ops").await;
    assert_eq!(counts(&bulk), [1, 0, 1, 0], "{bulk}");
}
