//! Webhooks end to end: a gateway's tool calls and denials become signed deliveries that the
//! `standardwebhooks` Python library verifies, before and during a rotation's grace; retries
//! keep `webhook-id`, replays get a new one and keep `Service-Event-Id`; bulk replay is safe to
//! re-run and skips canceled deliveries; a slow receiver times out; `410 Gone` disables the
//! destination; filters select by agent name; the queue survives a restart; and endpoints
//! that are private, loopback, link-local or metadata are refused without the flag, even
//! behind a DNS name.

use std::time::Duration;

use portcullis_tests::controlplane::EVENTING;
use portcullis_tests::everything::Everything;
use portcullis_tests::receiver::{verify, Answer, Receiver};
use portcullis_tests::{Backend, ControlPlane};
use serde_json::{json, Value};

use crate::mcp::Mcp;

/// Private targets allowed (the receiver is on loopback), and retries a second apart.
const ENV: &[(&str, &str)] = &[
    ("PORTCULLIS_ALLOW_PRIVATE_WEBHOOK_TARGETS", "true"),
    ("PORTCULLIS_WEBHOOK_RETRY_SCHEDULE", "0s,1s,1s"),
];

pub(crate) async fn subscribe(cp: &ControlPlane, fields: Value) -> Value {
    cp.ok(EVENTING, "CreateSubscription", cp.body(fields)).await
}

/// Queues an `eventing.test` event for the subscription; the delivery's id.
pub(crate) async fn test_event(cp: &ControlPlane, subscription: &str) -> String {
    let t = cp
        .ok(
            EVENTING,
            "TestSubscription",
            cp.body(json!({"subscription_id": subscription})),
        )
        .await;
    text(&t["delivery_id"]).to_string()
}

pub(crate) async fn delivery(cp: &ControlPlane, id: &str) -> Value {
    cp.ok(
        EVENTING,
        "GetDelivery",
        cp.body(json!({"delivery_id": id, "include_body": true})),
    )
    .await
}

/// Waits until the delivery reaches `status`.
pub(crate) async fn settled(cp: &ControlPlane, id: &str, status: &str) -> Value {
    for _ in 0..1200 {
        let d = delivery(cp, id).await;
        if d["delivery"]["status"] == status {
            return d;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!(
        "delivery {id} never became {status}: {:#}\n{}",
        delivery(cp, id).await,
        cp.logs()
    );
}

pub(crate) async fn deliveries(cp: &ControlPlane, filter: Value) -> Vec<Value> {
    let mut body = cp.body(filter);
    body["page_size"] = json!(500);
    cp.ok(EVENTING, "ListDeliveries", body).await["deliveries"]
        .as_array()
        .unwrap()
        .clone()
}

pub(crate) fn text(v: &Value) -> &str {
    v.as_str().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gateway_events_arrive_signed_retried_rotated_and_replayed() {
    let m = Mcp::start_with(ENV).await;
    let (command, args) = Everything::stdio_command();
    m.attach(
        json!({"name": "local", "protocol": "stdio", "auth_method": "none",
        "protocol_config": {"command": command, "args": args}}),
    )
    .await;
    m.allow(&["local/echo"]).await;
    let receiver = Receiver::start().await;
    let secret = a_filtered_subscription_and_a_sibling_that_matches_no_one(&m, &receiver).await;

    // The call's delivery fails twice, then is acknowledged: one webhook-id throughout.
    let (event_id, webhook_id) = a_failing_delivery_keeps_its_webhook_id(&m, &receiver).await;
    // A denied call is an access.denied event.
    m.sdk(&["local/get-sum", r#"{"a": 1, "b": 2}"#]).await;
    let seen = receiver
        .wait_for("the denial", |s| s.json()["type"] == "access.denied")
        .await;
    let denied = seen
        .iter()
        .find(|s| s.json()["type"] == "access.denied")
        .unwrap();
    assert_eq!(denied.json()["data"]["tool_name"], "local/get-sum");
    assert_eq!(denied.json()["data"]["result"], "denied");

    // Every delivery verifies with the library; the filter kept "nobody" empty.
    let first =
        every_delivery_verifies_and_the_filter_holds(&m, &receiver, &secret, &event_id).await;

    // Rotation: for the grace period both secrets verify, the current one's signature first.
    a_replay_after_rotation_is_signed_with_both_secrets(
        &m,
        &receiver,
        &secret,
        &event_id,
        &first,
        &webhook_id,
    )
    .await;
}

/// Subscription `siem` (tool calls and denials by agents named like `b?t`) and `nobody` on
/// its destination: `siem`'s signing secret.
async fn a_filtered_subscription_and_a_sibling_that_matches_no_one(
    m: &Mcp,
    receiver: &Receiver,
) -> String {
    let created = subscribe(
        &m.cp,
        json!({"name": "siem", "event_types": ["mcp.tool_call.completed", "access.denied"],
            "filters": ["agent_name~=b?t"], "delivery_endpoint": receiver.url()}),
    )
    .await;
    let secret = text(&created["signing_secret"]).to_string();
    assert!(secret.starts_with("whsec_"));
    let destination = &created["destination"];
    assert!(text(&destination["key_id"]).starts_with("key_"));
    // A second subscription on the same destination whose filter matches no agent.
    subscribe(
        &m.cp,
        json!({"name": "nobody", "event_types": ["mcp.tool_call.completed"],
            "filters": ["agent_name=someone-else"], "destination_id": destination["destination_id"]}),
    )
    .await;
    let listed =
        m.cp.ok(EVENTING, "ListDestinations", m.cp.body(json!({})))
            .await;
    assert!(!listed.to_string().contains(&secret), "never listed again");
    secret
}

/// A tool call whose delivery the receiver fails twice: the event's id and the webhook-id.
async fn a_failing_delivery_keeps_its_webhook_id(m: &Mcp, receiver: &Receiver) -> (String, String) {
    receiver.plan(&[Answer::Status(500), Answer::RetryAfter(503, 1)]);
    let out = m.sdk(&["local/echo", r#"{"message": "hi"}"#]).await;
    assert_eq!(out["calls"][0]["content"][0]["text"], "Echo: hi");
    receiver
        .wait_for("an acknowledged tool call", |_| {
            receiver.of_type("mcp.tool_call.completed").len() >= 3
        })
        .await;
    let call_attempts = receiver.of_type("mcp.tool_call.completed");
    assert_eq!(call_attempts.len(), 3, "two failures, then success");
    let ids: Vec<&str> = call_attempts
        .iter()
        .map(|s| s.header("webhook-id"))
        .collect();
    assert!(
        ids.iter().all(|i| *i == ids[0]),
        "retries keep webhook-id: {ids:?}"
    );
    let event_id = call_attempts[0].header("service-event-id").to_string();
    let body = call_attempts[0].json();
    assert_eq!(body["data"]["agent_name"], "bot");
    assert_eq!(body["data"]["tool_name"], "local/echo");
    assert_eq!(body["data"]["connection_name"], "local");
    assert_eq!(body["data"]["event_id"], event_id.as_str());
    (event_id, ids[0].to_string())
}

/// The tool call's delivery, after its three attempts.
async fn every_delivery_verifies_and_the_filter_holds(
    m: &Mcp,
    receiver: &Receiver,
    secret: &str,
    event_id: &str,
) -> Value {
    let checked = verify(&[secret], &receiver.seen()).await;
    assert!(
        checked.iter().all(|c| c["verified"][0] == true),
        "{checked:#?}"
    );
    let nobody = deliveries(&m.cp, json!({"subscription_id": "nobody"})).await;
    assert!(nobody.is_empty(), "{nobody:#?}");
    let list = deliveries(&m.cp, json!({"event_type": "mcp.tool_call.completed"})).await;
    let first = list.iter().find(|d| d["event_id"] == event_id).unwrap();
    let detail = settled(&m.cp, text(&first["delivery_id"]), "succeeded").await;
    assert_eq!(detail["delivery"]["attempts"], 3);
    assert_eq!(detail["attempts"][0]["status_code"], 500);
    assert_eq!(detail["attempts"][2]["status_code"], 200);
    assert_eq!(detail["body"]["data"]["event_id"], event_id);
    first.clone()
}

async fn a_replay_after_rotation_is_signed_with_both_secrets(
    m: &Mcp,
    receiver: &Receiver,
    secret: &str,
    event_id: &str,
    first: &Value,
    webhook_id: &str,
) {
    let rotated =
        m.cp.ok(
            EVENTING,
            "RotateSubscriptionSecret",
            m.cp.body(json!({"subscription_id": "siem"})),
        )
        .await;
    let new_secret = text(&rotated["signing_secret"]).to_string();
    assert_ne!(new_secret, secret);
    let replay =
        m.cp.ok(
            EVENTING,
            "ReplayDelivery",
            m.cp.body(json!({"delivery_id": first["delivery_id"]})),
        )
        .await;
    let replay_id = text(&replay["delivery"]["delivery_id"]).to_string();
    assert_eq!(replay["delivery"]["replay_of"], first["delivery_id"]);
    settled(&m.cp, &replay_id, "succeeded").await;
    let again: Vec<_> = receiver
        .seen()
        .into_iter()
        .filter(|s| s.header("service-event-id") == event_id)
        .collect();
    assert_eq!(again.len(), 4);
    let replayed = &again[3];
    assert_ne!(
        replayed.header("webhook-id"),
        webhook_id,
        "a replay has a new webhook-id"
    );
    let checked = verify(&[&new_secret, secret], std::slice::from_ref(replayed)).await;
    assert_eq!(checked[0]["verified"], json!([true, true]));
    let only_new = verify(&[&new_secret], std::slice::from_ref(replayed)).await;
    let signatures = only_new[0]["signatures"].as_array().unwrap();
    assert_eq!(signatures.len(), 2);
    // The first signature alone verifies with the new secret.
    let mut first_only = replayed.clone();
    first_only
        .headers
        .insert("webhook-signature".into(), text(&signatures[0]).into());
    assert_eq!(
        verify(&[&new_secret, secret], &[first_only]).await[0]["verified"],
        json!([true, false])
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failures_end_in_dlq_and_bulk_replay_recovers_them_once() {
    let cp = ControlPlane::start_with(Backend::Sqlite, ENV).await;
    let receiver = Receiver::start().await;
    subscribe(
        &cp,
        json!({"name": "ops", "event_types": ["eventing.test"], "delivery_endpoint": receiver.url()}),
    )
    .await;
    let since = chrono::Utc::now().to_rfc3339();
    receiver.set_down(true);
    let mut dead = Vec::new();
    for _ in 0..3 {
        dead.push(test_event(&cp, "ops").await);
    }
    // One more waits an hour on the receiver's Retry-After, and is canceled.
    for id in &dead {
        let d = settled(&cp, id, "dlq").await;
        assert_eq!(d["delivery"]["attempts"], 3);
        assert_eq!(d["attempts"][2]["status_code"], 503);
    }
    a_delivery_told_to_wait_an_hour_is_canceled_once(&cp, &receiver, &since).await;
    bulk_replay_recovers_the_dead_letters_once(&cp, &receiver, &since).await;
}

async fn a_delivery_told_to_wait_an_hour_is_canceled_once(
    cp: &ControlPlane,
    receiver: &Receiver,
    since: &str,
) {
    receiver.set_down(false);
    receiver.plan(&[Answer::RetryAfter(429, 3600)]);
    let waiting = test_event(cp, "ops").await;
    for _ in 0..200 {
        if delivery(cp, &waiting).await["delivery"]["attempts"] == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let d = delivery(cp, &waiting).await;
    assert_eq!(d["delivery"]["status"], "pending");
    let next: chrono::DateTime<chrono::Utc> =
        text(&d["delivery"]["next_attempt_at"]).parse().unwrap();
    assert!(
        next > chrono::Utc::now() + chrono::Duration::minutes(50),
        "Retry-After honoured"
    );
    let canceled = cp
        .ok(
            EVENTING,
            "CancelDeliveryRetry",
            cp.body(json!({"delivery_id": waiting})),
        )
        .await;
    assert_eq!(canceled["delivery"]["status"], "canceled");
    cp.call(
        EVENTING,
        "CancelDeliveryRetry",
        cp.body(json!({"delivery_id": waiting})),
    )
    .await
    .expect_error("failed_precondition", 400);
    cp.call(
        EVENTING,
        "ReplayFailedDeliveries",
        cp.body(json!({"since": since, "statuses": ["canceled"]})),
    )
    .await
    .expect_error("invalid_argument", 400)
    .mentions("canceled");
}

async fn bulk_replay_recovers_the_dead_letters_once(
    cp: &ControlPlane,
    receiver: &Receiver,
    since: &str,
) {
    let run = || async {
        cp.ok(
            EVENTING,
            "ReplayFailedDeliveries",
            cp.body(json!({"since": since, "subscription_id": "ops"})),
        )
        .await
    };
    let first = run().await;
    assert_eq!(
        (first["matched"].as_u64(), first["replayed"].as_u64()),
        (Some(3), Some(3))
    );
    assert_eq!(first["skipped_body_expired"], 0);
    for id in first["replay_delivery_ids"].as_array().unwrap() {
        settled(cp, text(id), "succeeded").await;
    }
    let second = run().await;
    assert_eq!(second["matched"], 0, "a re-run matches nothing: {second}");
    let ok = receiver
        .seen()
        .iter()
        .filter(|s| s.json()["type"] == "eventing.test")
        .count();
    assert_eq!(
        ok,
        3 * 3 + 1 + 3,
        "3×3 failed attempts, 1 waiting, 3 replays"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replaying_a_retrying_delivery_sends_it_now_and_ends_the_retries() {
    let slow_retries = ("PORTCULLIS_WEBHOOK_RETRY_SCHEDULE", "0s,1h,1h");
    let cp = ControlPlane::start_with(Backend::Sqlite, &[ENV[0], slow_retries]).await;
    let receiver = Receiver::start().await;
    subscribe(
        &cp,
        json!({"name": "fixing", "event_types": ["eventing.test"], "delivery_endpoint": receiver.url()}),
    )
    .await;
    receiver.plan(&[Answer::Status(503)]);
    let id = test_event(&cp, "fixing").await;
    receiver.wait_for("the first attempt", |_| true).await;
    let mut original = delivery(&cp, &id).await;
    for _ in 0..100 {
        if original["delivery"]["attempts"] == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
        original = delivery(&cp, &id).await;
    }
    assert_eq!(original["delivery"]["status"], "pending", "{original:#}");
    assert!(
        original["delivery"]["next_attempt_at"].is_string(),
        "retrying in an hour"
    );

    // The receiver is fixed: the person replays now rather than wait an hour.
    let replay = cp
        .ok(
            EVENTING,
            "ReplayDelivery",
            cp.body(json!({"delivery_id": id})),
        )
        .await;
    let replay_id = text(&replay["delivery"]["delivery_id"]).to_string();
    assert_eq!(replay["delivery"]["replay_of"], id.as_str());
    settled(&cp, &replay_id, "succeeded").await;
    let ended = delivery(&cp, &id).await;
    assert_eq!(ended["delivery"]["status"], "canceled", "{ended:#}");
    assert!(ended["delivery"]["next_attempt_at"].is_null(), "{ended:#}");
    assert_eq!(ended["delivery"]["replayed_by"], replay_id.as_str());
    let seen = receiver.seen();
    assert_eq!(seen.len(), 2, "one failed attempt, one replay");
    assert_eq!(
        seen[0].header("service-event-id"),
        seen[1].header("service-event-id")
    );
    assert_ne!(seen[0].header("webhook-id"), seen[1].header("webhook-id"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_receivers_time_out_and_gone_destinations_are_disabled() {
    let cp = ControlPlane::start_with(Backend::Sqlite, ENV).await;
    let receiver = Receiver::start().await;
    let created = subscribe(
        &cp,
        json!({"name": "slow", "event_types": ["eventing.test"], "delivery_endpoint": receiver.url()}),
    )
    .await;
    receiver.plan(&[Answer::Slow(Duration::from_secs(12)), Answer::Status(410)]);
    let id = test_event(&cp, "slow").await;
    let d = settled(&cp, &id, "failed").await;
    let attempts = d["attempts"].as_array().unwrap();
    assert_eq!(attempts.len(), 2, "{d:#}");
    assert!(attempts[0]["status_code"].is_null());
    assert!(text(&attempts[0]["error"]).contains("timed out"), "{d:#}");
    assert!(attempts[0]["duration_ms"].as_u64().unwrap() >= 9_900);
    assert_eq!(attempts[1]["status_code"], 410);
    let dest = cp
        .ok(EVENTING, "ListDestinations", cp.body(json!({})))
        .await["destinations"][0]
        .clone();
    assert_eq!(
        dest["destination_id"],
        created["destination"]["destination_id"]
    );
    assert_eq!(dest["enabled"], false);
    assert!(text(&dest["disabled_reason"]).contains("410"));
    cp.call(
        EVENTING,
        "ReplayDelivery",
        cp.body(json!({"delivery_id": id})),
    )
    .await
    .expect_error("failed_precondition", 400)
    .mentions("disabled");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_queue_survives_a_restart_on_sqlite() {
    the_queue_survives_a_restart(Backend::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_queue_survives_a_restart_on_postgres() {
    the_queue_survives_a_restart(Backend::Postgres).await;
}

/// Events matched while the receiver is down are all delivered once it is back, across a
/// restart (SIGKILL) of the control plane in between.
async fn the_queue_survives_a_restart(backend: Backend) {
    let receiver = Receiver::start().await;
    let schedule = (
        "PORTCULLIS_WEBHOOK_RETRY_SCHEDULE",
        "0s,2s,2s,2s,2s,2s,2s,2s,2s,2s",
    );
    let mut cp = ControlPlane::start_with(backend, &[ENV[0], schedule]).await;
    subscribe(
        &cp,
        json!({"name": "ops", "event_types": ["eventing.test"], "delivery_endpoint": receiver.url()}),
    )
    .await;
    receiver.set_down(true);
    let mut ids = Vec::new();
    for _ in 0..5 {
        ids.push(test_event(&cp, "ops").await);
    }
    receiver
        .wait_for("a first attempt of each", |_| receiver.seen().len() >= 5)
        .await;
    cp.restart().await;
    receiver.set_down(false);
    for id in &ids {
        settled(&cp, id, "succeeded").await;
    }
    let delivered: std::collections::BTreeSet<String> = receiver
        .seen()
        .iter()
        .filter(|s| s.json()["type"] == "eventing.test")
        .map(|s| s.header("service-event-id").to_string())
        .collect();
    assert_eq!(delivered.len(), 5, "every event arrived");
}

/// Without either flag: the test deployments allow private targets, so this one says not.
mod endpoints_must_be_public_https_without_the_flag {
    use portcullis_tests::{Backend, ControlPlane};

    const STRICT: &[(&str, &str)] = &[("PORTCULLIS_ALLOW_PRIVATE_TARGETS", "false")];

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn sqlite() {
        let cp = ControlPlane::start_with(Backend::Sqlite, STRICT).await;
        super::endpoints_must_be_public_https_without_the_flag(&cp).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn postgres() {
        let cp = ControlPlane::start_with(Backend::Postgres, STRICT).await;
        super::endpoints_must_be_public_https_without_the_flag(&cp).await;
    }
}

async fn endpoints_must_be_public_https_without_the_flag(cp: &ControlPlane) {
    let refused = |endpoint: &str| {
        let body = cp.body(json!({"name": "x", "event_types": ["eventing.test"],
            "delivery_endpoint": endpoint}));
        async move { cp.call(EVENTING, "CreateSubscription", body).await }
    };
    for (endpoint, why) in [
        ("http://hooks.example.com/x", "https"),
        ("https://127.0.0.1/x", "private"),
        ("https://localhost/x", "private"),
        ("https://10.0.0.8/x", "private"),
        ("https://[::ffff:127.0.0.1]/x", "private"),
        ("https://169.254.169.254/latest/meta-data", "metadata"),
        ("https://[fe80::1]/x", "link-local"),
    ] {
        refused(endpoint)
            .await
            .expect_error("invalid_argument", 400)
            .mentions("delivery_endpoint")
            .mentions(why);
    }
    // Both a new endpoint and an existing destination: refused, and nothing is created.
    let r = cp
        .call(
            EVENTING,
            "CreateSubscription",
            cp.body(json!({"name": "both", "event_types": ["eventing.test"],
                "delivery_endpoint": "https://hooks.example.com/x", "destination_id": "d"})),
        )
        .await;
    r.expect_error("invalid_argument", 400).mentions("not both");
    let subs = cp
        .ok(EVENTING, "ListSubscriptions", cp.body(json!({})))
        .await;
    assert_eq!(subs["subscriptions"], json!([]));

    // A name that resolves to a loopback or private address is refused when connecting.
    let host = loopback_name().await;
    let created = subscribe(
        cp,
        json!({"name": "rebind", "event_types": ["eventing.test"],
            "delivery_endpoint": format!("https://{host}:9/hook")}),
    )
    .await;
    assert!(created["signing_secret"].is_string());
    let id = test_event(cp, "rebind").await;
    for _ in 0..200 {
        let d = delivery(cp, &id).await;
        if let Some(error) = d["attempts"][0]["error"].as_str() {
            assert!(error.contains("private"), "{d:#}");
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("no attempt was recorded:\n{}", cp.logs());
}

/// A host name (not `localhost`) this machine resolves to a loopback or private address.
async fn loopback_name() -> String {
    let hostname = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .unwrap_or_default()
        .trim()
        .to_string();
    let hosts = std::fs::read_to_string("/etc/hosts").unwrap_or_default();
    let candidates = std::iter::once(hostname).chain(
        hosts
            .lines()
            .filter(|l| l.starts_with("127.") || l.starts_with("::1"))
            .flat_map(|l| {
                l.split_whitespace()
                    .skip(1)
                    .map(str::to_string)
                    .collect::<Vec<_>>()
            }),
    );
    for name in candidates {
        if name.is_empty() || name.eq_ignore_ascii_case("localhost") || name.starts_with('#') {
            continue;
        }
        let private = match tokio::net::lookup_host((name.as_str(), 0)).await {
            Ok(mut addrs) => addrs.any(|a| {
                a.ip().is_loopback() || matches!(a.ip(), std::net::IpAddr::V4(v) if v.is_private())
            }),
            Err(_) => false,
        };
        if private {
            return name;
        }
    }
    panic!("no host name on this machine resolves to a loopback or private address");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn control_plane_events_reach_https_and_slack_destinations() {
    let cp = ControlPlane::start_with(Backend::Sqlite, ENV).await;
    let receiver = Receiver::start().await;
    let slack = Receiver::start().await;
    let secret =
        an_https_and_a_slack_subscription_hiding_their_secrets(&cp, &receiver, &slack).await;
    // Agents cannot call the webhooks API.
    let agent_key = crate::world::register_with_key(&cp, json!({"name": "bot"})).await;
    cp.call_as(
        &agent_key,
        EVENTING,
        "ListSubscriptions",
        cp.body(json!({})),
    )
    .await
    .expect_error("unauthenticated", 401);

    a_cascading_suspension_and_a_deployment(&cp).await;
    suspensions_and_the_deployment_arrive_signed(&receiver, &secret).await;
    let posts = slack
        .wait_for("two Slack posts", |_| slack.seen().len() >= 2)
        .await;
    let texts: Vec<String> = posts.iter().map(|p| p.json()["text"].to_string()).collect();
    assert!(
        texts
            .iter()
            .all(|t| t.starts_with("\"Portcullis: agent.suspended")),
        "{texts:?}"
    );
}

/// Subscription `changes` to `receiver` and `chat` to the `slack` stand-in, whose URL is never
/// shown: `changes`'s signing secret.
async fn an_https_and_a_slack_subscription_hiding_their_secrets(
    cp: &ControlPlane,
    receiver: &Receiver,
    slack: &Receiver,
) -> String {
    let created = subscribe(
        cp,
        json!({"name": "changes", "event_types": ["agent.suspended",
            "authorization.rule_bundle.deployed"], "delivery_endpoint": receiver.url()}),
    )
    .await;
    let secret = text(&created["signing_secret"]).to_string();
    let slack_sub = subscribe(
        cp,
        json!({"name": "chat", "event_types": ["agent.suspended"], "provider": "slack",
            "settings": {"webhook_url": slack.url()}}),
    )
    .await;
    let shown = slack_sub["destination"].to_string();
    assert!(
        !shown.contains(&slack.url()),
        "the Slack URL is a secret: {shown}"
    );
    let providers = cp.ok(EVENTING, "ListProviders", cp.body(json!({}))).await;
    assert_eq!(providers["providers"][1]["settings"][0]["secret"], true);
    secret
}

/// Suspends `parent` and its `child`, and deploys bundle `base`.
async fn a_cascading_suspension_and_a_deployment(cp: &ControlPlane) {
    cp.ok(
        portcullis_tests::controlplane::AGENTS,
        "RegisterAgent",
        cp.body(json!({"name": "parent"})),
    )
    .await;
    let parent = cp
        .ok(
            portcullis_tests::controlplane::AGENTS,
            "GetAgent",
            cp.body(json!({"agent_id": "parent"})),
        )
        .await["agent"]["agent_id"]
        .clone();
    cp.ok(
        portcullis_tests::controlplane::AGENTS,
        "RegisterAgent",
        cp.body(json!({"name": "child", "parent_id": parent})),
    )
    .await;
    cp.ok(
        portcullis_tests::controlplane::AGENTS,
        "SuspendAgent",
        cp.body(json!({"agent_id": "parent", "cascade": true, "reason": "leaked key"})),
    )
    .await;
    cp.ok(
        portcullis_tests::controlplane::RULES,
        "DeployRuleBundle",
        cp.body(json!({"name": "base", "policies": "@id(\"all\")\npermit (principal, action == Svc::Action::\"mcp:call\", resource);"})),
    )
    .await;
}

async fn suspensions_and_the_deployment_arrive_signed(receiver: &Receiver, secret: &str) {
    receiver
        .wait_for("both suspensions and the deployment", |_| {
            receiver.of_type("agent.suspended").len() == 2
                && receiver.of_type("authorization.rule_bundle.deployed").len() == 1
        })
        .await;
    let mut suspended: Vec<String> = receiver
        .of_type("agent.suspended")
        .iter()
        .map(|s| {
            let data = &s.json()["data"];
            format!(
                "{} {} {}",
                data["agent_name"], data["cascade"], data["reason"]
            )
        })
        .collect();
    suspended.sort();
    assert_eq!(
        suspended,
        [
            r#""child" true "leaked key""#,
            r#""parent" false "leaked key""#
        ]
    );
    let deployed = &receiver.of_type("authorization.rule_bundle.deployed")[0];
    assert_eq!(deployed.json()["data"]["bundle_name"], "base");
    let checked = verify(&[secret], &receiver.seen()).await;
    assert!(checked.iter().all(|c| c["verified"][0] == true));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replicas_on_one_postgres_send_each_attempt_once() {
    let a = ControlPlane::start_with(Backend::Postgres, ENV).await;
    let b = a.replica().await;
    let receiver = Receiver::start().await;
    subscribe(
        &a,
        json!({"name": "ops", "event_types": ["eventing.test"], "delivery_endpoint": receiver.url()}),
    )
    .await;
    // Every third attempt fails once, so retries are claimed too.
    receiver.plan(
        &[
            Answer::Status(500),
            Answer::Status(200),
            Answer::Status(200),
        ]
        .repeat(10),
    );
    let mut ids = Vec::new();
    for i in 0..60 {
        let cp = if i % 2 == 0 { &a } else { &b };
        ids.push(test_event(cp, "ops").await);
    }
    for id in &ids {
        settled(&a, id, "succeeded").await;
    }
    let seen = receiver.seen();
    let attempts: usize = {
        let mut total = 0;
        for id in &ids {
            total += delivery(&a, id).await["attempts"].as_array().unwrap().len();
        }
        total
    };
    assert_eq!(
        seen.len(),
        attempts,
        "each recorded attempt was sent once, and only those"
    );
    let distinct: std::collections::BTreeSet<&str> =
        seen.iter().map(|s| s.header("webhook-id")).collect();
    assert_eq!(distinct.len(), 60, "every delivery arrived");
    assert_eq!(attempts, 70, "ten retried once");
}
