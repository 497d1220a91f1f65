//! Serving through control-plane outages, last-known-good starts, refused bundles, pool
//! failover and graceful shutdown.

use std::time::Duration;

use portcullis_tests::controlplane::{AGENTS, MGMT, RULES};
use portcullis_tests::fake_llm::RunningFake;
use portcullis_tests::FakeLlm;
use serde_json::json;

use crate::world::{model, world, World};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn control_plane_outage_does_not_interrupt_serving() {
    let mut w = world().await;
    assert_eq!(w.chat("gpt").await.status, 200);
    w.cp.stop().await;
    for _ in 0..5 {
        assert_eq!(
            w.chat("gpt").await.status,
            200,
            "the last snapshot keeps serving"
        );
    }
    // The gateway writes its last-known-good snapshot just after it starts serving it; under
    // load a restart can come first, and then there is nothing to start from.
    let lkg = w.gw.data_dir.path().join("snapshot.lkg");
    for _ in 0..200 {
        if lkg.exists() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert!(
        lkg.exists(),
        "the gateway never wrote its last-known-good snapshot"
    );
    w.gw.restart().await;
    w.gw.wait_ready().await;
    let r = w.chat("gpt").await;
    assert_eq!(
        r.status, 200,
        "a restarted gateway serves from last-known-good: {}",
        r.text
    );
    let lkg = std::fs::read_to_string(w.gw.data_dir.path().join("snapshot.lkg")).unwrap();
    assert!(
        !lkg.contains(crate::world::UPSTREAM_SECRET),
        "the last-known-good file is sealed"
    );
    w.cp.restart().await;
    let cp = &w.cp;
    cp.ok(AGENTS, "SuspendAgent", cp.body(json!({"agent_id": "bot"})))
        .await;
    w.until(Duration::from_secs(15), |r| r.status == 403).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_invalid_bundle_never_reaches_the_gateway() {
    let w = world().await;
    let cp = &w.cp;
    let invalid = "forbid (principal, action, resource) when { context.no_such_field };";
    cp.call(
        RULES,
        "DeployRuleBundle",
        cp.body(json!({"policies": invalid})),
    )
    .await
    .expect_error("invalid_argument", 400);
    // A later valid change proves the gateway synced past the refused one.
    cp.ok(
        AGENTS,
        "UpdateAgent",
        cp.body(json!({"agent_id": "bot", "metadata": {"synced": true}})),
    )
    .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(w.chat("gpt").await.status, 200);
    assert!(
        !w.gw.logs().contains("Snapshot refused"),
        "nothing invalid was ever sent"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pools_fail_over_and_distribute() {
    let w = world().await;
    let failing = FakeLlm::openai().status(500).start().await;
    let good = FakeLlm::openai()
        .reply("from the good member")
        .start()
        .await;
    let refused = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        drop(l);
        format!("http://{addr}/v1")
    };
    let ids = a_priority_pool_fast(&w, &failing.base_url(), &refused, &good.base_url()).await;
    the_pool_fails_over_to_the_good_member(&w, &failing).await;

    // After repeated failures the failing member is cooled down and skipped.
    for _ in 0..3 {
        assert_eq!(w.chat("fast").await.status, 200);
    }
    let tried = failing.requests().len();
    assert_eq!(w.chat("fast").await.headers["x-portcullis-model"], "m-good");
    assert_eq!(
        failing.requests().len(),
        tried,
        "a cooled-down member is not tried first"
    );

    // Round robin spreads calls over healthy members.
    round_robin_spreads_calls_over_healthy_members(&w, &ids[2]).await;
}

/// Pool `fast`, in this order: a member answering 500, one refusing connections and a good
/// one, on the gateway and allowed to `bot`: the members' ids.
async fn a_priority_pool_fast(w: &World, failing: &str, refused: &str, good: &str) -> [String; 3] {
    let cp = &w.cp;
    let ids = [
        model(cp, "m-500", failing).await,
        model(cp, "m-refused", refused).await,
        model(cp, "m-good", good).await,
    ];
    let members: Vec<_> = ids
        .iter()
        .enumerate()
        .map(|(i, id)| json!({"connection_id": id, "priority": i}))
        .collect();
    let pool = cp
        .ok(
            MGMT,
            "CreateLLMPool",
            cp.body(json!({"name": "fast", "strategy": "priority", "members": members})),
        )
        .await;
    cp.ok(
        MGMT,
        "AddGatewayPool",
        cp.body(json!({"gateway_id": w.gateway_id, "pool_id": pool["pool"]["pool_id"]})),
    )
    .await;
    cp.ok(
        AGENTS,
        "UpdateAgent",
        cp.body(json!({"agent_id": "bot", "allowed_pool_names": ["fast"]})),
    )
    .await;
    ids
}

async fn the_pool_fails_over_to_the_good_member(w: &World, failing: &RunningFake) {
    let mut r = w.chat("fast").await;
    for _ in 0..50 {
        if r.status == 200 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
        r = w.chat("fast").await;
    }
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.headers["x-portcullis-model"], "m-good");
    assert_eq!(
        r.body["choices"][0]["message"]["content"],
        "from the good member"
    );
    assert!(
        !failing.requests().is_empty(),
        "the 500 member was tried first"
    );
}

async fn round_robin_spreads_calls_over_healthy_members(w: &World, good_id: &str) {
    let cp = &w.cp;
    let second = FakeLlm::openai().reply("from the second").start().await;
    let id2 = model(cp, "m-second", &second.base_url()).await;
    let rr = cp.ok(MGMT, "CreateLLMPool", cp.body(json!({"name": "spread", "members": [{"connection_id": good_id}, {"connection_id": id2}]}))).await;
    cp.ok(
        MGMT,
        "AddGatewayPool",
        cp.body(json!({"gateway_id": w.gateway_id, "pool_id": rr["pool"]["pool_id"]})),
    )
    .await;
    cp.ok(
        AGENTS,
        "UpdateAgent",
        cp.body(json!({"agent_id": "bot", "allowed_pool_names": ["fast", "spread"]})),
    )
    .await;
    let mut served = std::collections::BTreeSet::new();
    for _ in 0..100 {
        let r = w.chat("spread").await;
        if r.status == 200 {
            served.insert(
                r.headers["x-portcullis-model"]
                    .to_str()
                    .unwrap()
                    .to_string(),
            );
        }
        if served.len() == 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(
        served.into_iter().collect::<Vec<_>>(),
        ["m-good", "m-second"]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_finishes_in_flight_streams() {
    let w = world().await;
    let cp = &w.cp;
    let slow = FakeLlm::openai()
        .reply("one two three four five six")
        .chunk_delay_ms(150)
        .start()
        .await;
    let id = model(cp, "slow", &slow.base_url()).await;
    cp.ok(
        MGMT,
        "AddGatewayModel",
        cp.body(json!({"gateway_id": w.gateway_id, "connection_id": id})),
    )
    .await;
    cp.ok(
        AGENTS,
        "UpdateAgent",
        cp.body(json!({"agent_id": "bot", "allowed_direct_model_names": ["gpt", "slow"]})),
    )
    .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let url = format!("{}/v1/chat/completions", w.gw.gateway_url(&w.gateway_id));
    let key = w.key.clone();
    let call = tokio::spawn(async move {
        reqwest::Client::new()
            .post(url)
            .bearer_auth(key)
            .json(&json!({"model": "slow", "stream": true, "messages": [{"role": "user", "content": "hi"}]}))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap()
    });
    tokio::time::sleep(Duration::from_millis(400)).await;
    let pid = w.gw.pid().unwrap().to_string();
    let status = tokio::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .await
        .unwrap();
    assert!(status.success());
    let text = call.await.unwrap();
    assert!(
        text.contains("six") && text.trim_end().ends_with("data: [DONE]"),
        "the in-flight stream finished: {text}"
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        reqwest::get(format!("{}/ready", w.gw.url)).await.is_err(),
        "the gateway exited after draining"
    );
}
