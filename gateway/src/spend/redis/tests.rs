//! The Redis scripts against the local Redis (`PORTCULLIS_TEST_REDIS_URL`, default
//! `redis://127.0.0.1:6379`); these fail, not skip, when it is down. Each test uses a workspace
//! of its own, so they never share keys.

use std::sync::Arc;
use std::time::Duration;

use portcullis_shared::api::quotas::{QuotaSubject, QuotaWindow};

use super::*;
use crate::spend::{applicable, CallScope, QuotaEntry};

async fn store(hold_ttl_ms: u64) -> (Arc<RedisSpend>, String) {
    let url = std::env::var("PORTCULLIS_TEST_REDIS_URL")
        .unwrap_or_else(|_| "redis://127.0.0.1:6379".into());
    let mut s = RedisSpend::connect(&url)
        .await
        .expect("the local Redis runs");
    s.hold_ttl_ms = hold_ttl_ms;
    let ws = uuid::Uuid::new_v4().to_string();
    s.seed(&ws, Vec::new()).await.unwrap();
    (Arc::new(s), ws)
}

fn applied(limit: u64) -> Vec<Applied> {
    let quota = Arc::new(QuotaEntry {
        id: "q".into(),
        name: String::new(),
        subject: QuotaSubject::Agent,
        subject_id: "a".into(),
        subject_key: String::new(),
        pool_id: String::new(),
        per_caller: false,
        window: QuotaWindow::Daily,
        limit_micros: limit,
    });
    let scope = CallScope {
        agent_id: "a",
        gateway_id: "g",
        user: None,
        pool_id: None,
        model_id: "m",
    };
    applicable(&[quota], &scope, chrono::Utc::now().timestamp())
}

async fn reserve(s: &Arc<RedisSpend>, ws: &str, worst: u64) -> Result<RedisHeld, Refusal> {
    s.reserve(
        ws,
        applied(100),
        worst,
        &uuid::Uuid::new_v4().to_string(),
        tokio::runtime::Handle::current(),
    )
    .await
}

/// A field of the quota's enforced (daily) counter.
async fn field(s: &RedisSpend, ws: &str, name: &str) -> u64 {
    let [daily, _] = applied(100)[0].keys();
    let mut conn = s.conn.clone();
    let v: Option<u64> = redis::cmd("HGET")
        .arg(counter_key(ws, &daily))
        .arg(name)
        .query_async(&mut conn)
        .await
        .unwrap();
    v.unwrap_or(0)
}

#[tokio::test]
async fn holds_are_all_or_none_and_settle_once() {
    let (s, ws) = store(HOLD_TTL_MS).await;
    let first = reserve(&s, &ws, 60).await.unwrap();
    assert!(
        matches!(reserve(&s, &ws, 60).await, Err(Refusal::Exceeded { .. })),
        "60 + 60 > 100"
    );
    assert_eq!(field(&s, &ws, "reserved").await, 60);
    // Settle runs once: a repeat of the script finds the reservation gone.
    assert!(first.finish(30, "settle").await.unwrap().is_some());
    assert!(first.finish(30, "settle").await.unwrap().is_none());
    assert_eq!(
        (
            field(&s, &ws, "spent").await,
            field(&s, &ws, "reserved").await
        ),
        (30, 0),
        "charged once, nothing left held"
    );
    let (charges, _) = first.settle(30).await;
    assert_eq!(charges[0].micros, 30, "the call's event still carries it");
    assert_eq!(field(&s, &ws, "spent").await, 30);
    // A dropped hold (a failed call) is released.
    drop(reserve(&s, &ws, 70).await.unwrap());
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(field(&s, &ws, "reserved").await, 0);
    assert!(reserve(&s, &ws, 70).await.is_ok());
}

#[tokio::test]
async fn a_hold_its_replica_never_settled_lapses() {
    let (s, ws) = store(200).await;
    // The replica dies mid-call: neither settle nor release ever runs.
    std::mem::forget(reserve(&s, &ws, 60).await.unwrap());
    assert!(reserve(&s, &ws, 60).await.is_err(), "held while it counts");
    tokio::time::sleep(Duration::from_millis(300)).await;
    let second = reserve(&s, &ws, 60)
        .await
        .expect("the lapsed hold is taken back");
    assert_eq!(field(&s, &ws, "reserved").await, 60, "only the live hold");
    second.settle(10).await;
    assert_eq!(
        (
            field(&s, &ws, "spent").await,
            field(&s, &ws, "reserved").await
        ),
        (10, 0)
    );
}

#[tokio::test]
async fn a_call_that_outlives_its_hold_is_still_charged_once() {
    let (s, ws) = store(200).await;
    let long = reserve(&s, &ws, 60).await.unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let other = reserve(&s, &ws, 40).await.unwrap();
    long.settle(25).await;
    assert_eq!(
        (
            field(&s, &ws, "spent").await,
            field(&s, &ws, "reserved").await
        ),
        (25, 40),
        "the lapsed hold was taken back once; the live one stays"
    );
    other.settle(5).await;
    assert_eq!(field(&s, &ws, "reserved").await, 0);
}

#[tokio::test]
async fn a_store_that_lost_its_counters_is_not_trusted_until_seeded_again() {
    let (s, ws) = store(HOLD_TTL_MS).await;
    reserve(&s, &ws, 10).await.unwrap().settle(10).await;
    let mut conn = s.conn.clone();
    let _: () = redis::cmd("DEL")
        .arg(ready_key(&ws))
        .query_async(&mut conn)
        .await
        .unwrap();
    assert!(matches!(reserve(&s, &ws, 1).await, Err(Refusal::NotSeeded)));
    assert!(!s.seeded(), "the replica knows to seed again");
    tokio::time::timeout(Duration::from_secs(1), s.reseed.notified())
        .await
        .expect("the seeding task is woken");
    s.seed(&ws, Vec::new()).await.unwrap();
    assert!(reserve(&s, &ws, 1).await.is_ok());
    assert_eq!(field(&s, &ws, "spent").await, 10, "the counter Redis kept");
}
