//! Spend counters shared by several gateway replicas in Redis, over real processes: two
//! replicas racing one quota never exceed it, and a replica without its store fails closed.

use std::time::Duration;

use portcullis_tests::GatewayProcess;
use serde_json::Value;

use crate::spend::{agent_quota, body, recorded_at_least, CALL_MICROS};
use crate::world::{world, World};

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
    let replicas = Replicas {
        w: &w,
        client: reqwest::Client::new(),
        urls: [&a, &b]
            .iter()
            .map(|g| format!("{}/v1/chat/completions", g.gateway_url(&w.gateway_id)))
            .collect(),
    };
    // Both replicas enforce (connected to Redis, counters ready) before the race.
    replicas.both_enforce(&a, &b).await;
    let (mut ok, refused) = replicas.race().await;
    assert!(refused > 0 && ok > 0, "{ok} allowed, {refused} refused");
    // Then one call at a time, alternating, until neither replica has room: with separate
    // counters each would allow the whole limit.
    ok += replicas.alternate_until_both_refuse().await;
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
    replicas
        .reseed_before_serving_after_the_store_lost_its_counters(&url, &q, &a)
        .await;

    // A replica whose shared store is unreachable refuses quota-bound calls.
    let down = portcullis_tests::GatewayProcess::start_with(
        &w.cp,
        &[("PORTCULLIS_SPEND_STORE", "redis://127.0.0.1:1")],
    )
    .await;
    let r = replicas
        .client
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

/// Two gateway replicas sharing a spend store: their chat completion URLs.
struct Replicas<'a> {
    w: &'a World,
    client: reqwest::Client,
    urls: Vec<String>,
}

impl Replicas<'_> {
    /// The status of a call to replica `i % 2`.
    async fn call(&self, i: usize) -> u16 {
        self.client
            .post(&self.urls[i % 2])
            .bearer_auth(&self.w.key)
            .json(&body("gpt", false))
            .send()
            .await
            .unwrap()
            .status()
            .as_u16()
    }

    async fn both_enforce(&self, a: &GatewayProcess, b: &GatewayProcess) {
        for u in &self.urls {
            let mut status = 0;
            for _ in 0..200 {
                status = self
                    .client
                    .post(u)
                    .bearer_auth(&self.w.key)
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
    }

    /// 200 concurrent calls, alternating: how many were allowed and refused.
    async fn race(&self) -> (u64, u64) {
        let calls = (0..200).map(|i| {
            self.client
                .post(&self.urls[i % 2])
                .bearer_auth(&self.w.key)
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
        (ok, refused)
    }

    /// Calls one at a time, alternating, until both replicas refuse in a row: how many were
    /// allowed.
    async fn alternate_until_both_refuse(&self) -> u64 {
        let mut ok = 0;
        let mut both_refused = 0;
        for i in 0..200 {
            match self.call(i).await {
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
        ok
    }

    async fn reseed_before_serving_after_the_store_lost_its_counters(
        &self,
        url: &str,
        q: &str,
        a: &GatewayProcess,
    ) {
        let workspace_id = &self.w.cp.workspace_id;
        let mut conn = redis::Client::open(url)
            .unwrap()
            .get_multiplexed_async_connection()
            .await
            .unwrap();
        let ready = format!("portcullis:{{{}}}:ready", workspace_id);
        let mut lost: Vec<String> = redis::cmd("KEYS")
            .arg(format!("portcullis:{{{}}}:spend:{q}:*", workspace_id))
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
            let status = self.call(i).await;
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
    }
}
