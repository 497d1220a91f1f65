//! Spend counters shared by several gateway replicas in Redis, over real processes: two
//! replicas racing one quota never exceed it, and a replica without its store fails closed.

use std::time::Duration;

use serde_json::Value;

use crate::spend::{agent_quota, body, recorded_at_least, CALL_MICROS};
use crate::world::world;

fn redis_url() -> String {
    std::env::var("PORTCULLIS_TEST_REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".into())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replicas_sharing_redis_never_exceed_a_quota_and_fail_closed_without_it() {
    let w = world().await;
    let limit = 300;
    let q = agent_quota(&w, limit).await;
    let url = redis_url();
    let env = [("PORTCULLIS_SPEND_STORE", url.as_str())];
    let a = portcullis_tests::GatewayProcess::start_with(&w.cp, &env).await;
    let b = portcullis_tests::GatewayProcess::start_with(&w.cp, &env).await;
    let client = reqwest::Client::new();
    let urls: Vec<String> = [&a, &b]
        .iter()
        .map(|g| format!("{}/v1/chat/completions", g.gateway_url(&w.gateway_id)))
        .collect();
    // Both replicas enforce (connected to Redis, counters ready) before the race.
    for u in &urls {
        let mut status = 0;
        for _ in 0..200 {
            status = client
                .post(u)
                .bearer_auth(&w.key)
                .json(&body("gpt", false))
                .send()
                .await
                .unwrap()
                .status()
                .as_u16();
            if status == 200 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        assert_eq!(
            status,
            200,
            "replica never ready:\n{}\n{}",
            a.logs(),
            b.logs()
        );
    }
    let calls = (0..200).map(|i| {
        client
            .post(&urls[i % 2])
            .bearer_auth(&w.key)
            .json(&body("gpt", false))
            .send()
    });
    let (mut ok, mut refused) = (0u64, 0u64);
    for r in futures_util::future::join_all(calls).await {
        match r.unwrap().status().as_u16() {
            200 => ok += 1,
            429 => refused += 1,
            other => panic!("unexpected {other}"),
        }
    }
    assert!(refused > 0 && ok > 0, "{ok} allowed, {refused} refused");
    // Then one call at a time, alternating, until neither replica has room: with separate
    // counters each would allow the whole limit.
    let mut both_refused = 0;
    for i in 0..200 {
        let r = client
            .post(&urls[i % 2])
            .bearer_auth(&w.key)
            .json(&body("gpt", false))
            .send()
            .await
            .unwrap();
        match r.status().as_u16() {
            200 => {
                ok += 1;
                both_refused = 0;
            }
            429 => both_refused += 1,
            other => panic!("unexpected {other}"),
        }
        if both_refused == 2 {
            break;
        }
    }
    assert_eq!(both_refused, 2, "the limit was reached");
    // Each replica alone would allow the whole limit; together they stay within it.
    let spent = recorded_at_least(&w, &q, (ok + 2) * CALL_MICROS).await;
    assert!(
        spent <= limit,
        "spent {spent} of {limit} across two replicas: exceeded"
    );
    assert!(
        spent >= (ok + 2) * CALL_MICROS,
        "every allowed call is charged: {spent}"
    );

    // The store loses its data (a restart without persistence, a flush): the replicas seed it
    // again from the control plane's record before letting a call through, rather than
    // counting from zero.
    let mut conn = redis::Client::open(url.as_str())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let ready = format!("portcullis:{{{}}}:ready", w.cp.workspace_id);
    let mut lost: Vec<String> = redis::cmd("KEYS")
        .arg(format!("portcullis:{{{}}}:spend:{q}:*", w.cp.workspace_id))
        .query_async(&mut conn)
        .await
        .unwrap();
    assert!(!lost.is_empty(), "the counters are in Redis");
    lost.push(ready.clone());
    let _: () = redis::cmd("DEL")
        .arg(&lost)
        .query_async(&mut conn)
        .await
        .unwrap();
    let mut statuses = Vec::new();
    for i in 0..200 {
        let status = client
            .post(&urls[i % 2])
            .bearer_auth(&w.key)
            .json(&body("gpt", false))
            .send()
            .await
            .unwrap()
            .status()
            .as_u16();
        statuses.push(status);
        if status == 429 && statuses.iter().filter(|s| **s == 429).count() == 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert!(
        statuses.iter().all(|s| *s == 503 || *s == 429),
        "after the store lost its counters, calls waited for the reseed and were refused as \
         before, never let through: {statuses:?}\n{}",
        a.logs()
    );
    assert_eq!(statuses.last(), Some(&429), "{statuses:?}");
    let reseeded: bool = redis::cmd("EXISTS")
        .arg(&ready)
        .query_async(&mut conn)
        .await
        .unwrap();
    assert!(reseeded, "the store is marked seeded again");

    // A replica whose shared store is unreachable refuses quota-bound calls.
    let down = portcullis_tests::GatewayProcess::start_with(
        &w.cp,
        &[("PORTCULLIS_SPEND_STORE", "redis://127.0.0.1:1")],
    )
    .await;
    let r = client
        .post(format!(
            "{}/v1/chat/completions",
            down.gateway_url(&w.gateway_id)
        ))
        .bearer_auth(&w.key)
        .json(&body("gpt", false))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 503);
    let b: Value = r.json().await.unwrap();
    assert_eq!(b["error"]["code"], "quota_unavailable", "{b}");
}
