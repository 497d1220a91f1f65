//! Model calls through the gateway with the official OpenAI SDK, and the gateway's refusals.

use portcullis_tests::controlplane::{AGENTS, MGMT, RULES};
use portcullis_tests::python;
use serde_json::json;

use crate::world::{world, World, UPSTREAM_MODEL, UPSTREAM_SECRET};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openai_sdk_calls_plain_and_streaming() {
    let w = world().await;
    let base = w.openai_base();
    let plain = python::run("openai_chat.py", &[&base, &w.key, "gpt", "plain"]).await;
    assert_eq!(plain["content"], "Hello from the fake upstream.", "{plain}");
    assert_eq!(plain["served_by"], "gpt");
    assert!(plain["request_id"].is_string());

    let streamed = python::run("openai_chat.py", &[&base, &w.key, "gpt", "stream"]).await;
    assert_eq!(
        streamed["content"], "Hello from the fake upstream.",
        "{streamed}"
    );
    assert_eq!(
        streamed["usage"],
        serde_json::Value::Null,
        "the caller did not ask for usage, so it gets none"
    );
    let with_usage = python::run("openai_chat.py", &[&base, &w.key, "gpt", "stream-usage"]).await;
    assert_eq!(with_usage["usage"]["total_tokens"], 21, "{with_usage}");

    let models = python::run("openai_chat.py", &[&base, &w.key, "ignored", "models"]).await;
    assert_eq!(models["models"], json!(["gpt"]));

    let seen = w.fake.requests();
    assert_eq!(seen.len(), 3);
    for r in &seen {
        assert_eq!(
            r.headers["authorization"],
            format!("Bearer {UPSTREAM_SECRET}").as_str(),
            "the stored credential is injected"
        );
        assert_eq!(
            r.body["model"], UPSTREAM_MODEL,
            "model is rewritten to the upstream id"
        );
        for (name, value) in &r.headers {
            assert!(
                !value.to_str().unwrap_or_default().contains(&w.key),
                "the agent key reached the upstream in {name}"
            );
        }
    }
    assert_eq!(
        seen[1].body["stream_options"]["include_usage"], true,
        "the gateway always asks for usage"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refusals_in_the_openai_error_shape() {
    let w = world().await;
    let gw = w.gateway_id.clone();
    bad_callers_and_requests_are_refused(&w, &gw).await;

    // Attached but not allowed: attachment alone authorizes nothing.
    a_model_attached_but_not_allowed_is_denied_and_unlisted(&w, &gw).await;

    // A workspace forbid names itself as the determining policy.
    a_workspace_forbid_names_itself(&w).await;

    disabled_and_deleted_gateways_refuse(&w, &gw).await;
}

async fn bad_callers_and_requests_are_refused(w: &World, gw: &str) {
    let body = json!({"model": "gpt", "messages": [{"role": "user", "content": "hi"}]});

    let r = w.chat_as(None, gw, body.clone()).await;
    assert_eq!(
        (r.status, r.body["error"]["type"].as_str()),
        (401, Some("authentication_error")),
        "{}",
        r.text
    );
    assert!(r.headers.contains_key("x-request-id"));
    let r = w.chat_as(Some(&w.cp.key), gw, body.clone()).await;
    assert_eq!(r.status, 401, "platform keys are refused: {}", r.text);
    let forged = format!("svc_{}", "B".repeat(43));
    assert_eq!(w.chat_as(Some(&forged), gw, body.clone()).await.status, 401);
    let r = w
        .chat_as(
            Some(&w.key),
            &uuid::Uuid::new_v4().to_string(),
            body.clone(),
        )
        .await;
    assert_eq!(r.status, 404, "{}", r.text);
    let r = w.chat("nope").await;
    assert_eq!(
        (r.status, r.body["error"]["code"].as_str()),
        (404, Some("model_not_found"))
    );
    let r = w.chat_as(Some(&w.key), gw, json!({"messages": []})).await;
    assert_eq!(r.status, 400);
    let r = w.chat_as(Some(&w.key), gw, json!("not an object")).await;
    assert_eq!(r.status, 400);
    let huge = json!({"model": "gpt", "messages": [{"role": "user", "content": "x".repeat(17 * 1024 * 1024)}]});
    let r = w.chat_as(Some(&w.key), gw, huge).await;
    assert_eq!(
        (r.status, r.body["error"]["code"].as_str()),
        (413, Some("request_too_large")),
        "{}",
        &r.text[..r.text.len().min(300)]
    );
}

async fn a_model_attached_but_not_allowed_is_denied_and_unlisted(w: &World, gw: &str) {
    let cp = &w.cp;
    let id = crate::world::model(cp, "other", &w.fake.base_url()).await;
    cp.ok(
        MGMT,
        "AddGatewayModel",
        cp.body(json!({"gateway_id": gw, "connection_id": id})),
    )
    .await;
    w.gw.wait_ready().await;
    let mut denied = w.chat("other").await;
    for _ in 0..50 {
        if denied.status != 404 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        denied = w.chat("other").await;
    }
    assert_eq!(denied.status, 403, "{}", denied.text);
    let e = &denied.body["error"];
    assert_eq!(
        (e["reason_code"].as_str(), e["determining_policy"].as_str()),
        (Some("no_permit"), Some("default-deny"))
    );
    assert!(e["reason"].as_str().unwrap().contains("llm:invoke"));
    assert_eq!(
        e["request_id"],
        denied.headers["x-request-id"].to_str().unwrap()
    );
    let models: Vec<String> = crate::world::http(
        reqwest::Client::new()
            .get(format!("{}/v1/models", w.gw.gateway_url(gw)))
            .bearer_auth(&w.key),
    )
    .await
    .body["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(
        models,
        ["gpt"],
        "the list shows only what this agent may call"
    );
}

async fn a_workspace_forbid_names_itself(w: &World) {
    let cp = &w.cp;
    let b = cp.ok(RULES, "DeployRuleBundle", cp.body(json!({"policies": "@id(\"no-gpt\") forbid (principal, action == Svc::Action::\"llm:invoke\", resource == Svc::Model::\"gpt\");"}))).await;
    let bid = b["bundle"]["bundle_id"].as_str().unwrap().to_string();
    w.until(std::time::Duration::from_secs(2), |r| r.status == 403)
        .await;
    let r = w.chat("gpt").await;
    assert_eq!(
        r.body["error"]["determining_policy"],
        format!("bundle/{bid}/no-gpt").as_str()
    );
    assert_eq!(r.body["error"]["reason_code"], "forbidden");
    cp.ok(
        RULES,
        "DeleteRuleBundle",
        cp.body(json!({"bundle_id": bid})),
    )
    .await;
    w.until(std::time::Duration::from_secs(2), |r| r.status == 200)
        .await;
}

async fn disabled_and_deleted_gateways_refuse(w: &World, gw: &str) {
    let cp = &w.cp;
    cp.ok(
        MGMT,
        "SetGatewayState",
        cp.body(json!({"gateway_id": gw, "state": "disabled"})),
    )
    .await;
    w.until(std::time::Duration::from_secs(2), |r| {
        r.status == 403 && r.text.contains("disabled")
    })
    .await;
    cp.ok(
        MGMT,
        "SetGatewayState",
        cp.body(json!({"gateway_id": gw, "state": "active"})),
    )
    .await;
    w.until(std::time::Duration::from_secs(2), |r| r.status == 200)
        .await;
    cp.ok(MGMT, "DeleteGateway", cp.body(json!({"gateway_id": gw})))
        .await;
    w.until(std::time::Duration::from_secs(2), |r| r.status == 404)
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn revocation_and_suspension_take_effect_within_a_second() {
    let w = world().await;
    let cp = &w.cp;
    assert_eq!(w.chat("gpt").await.status, 200);
    cp.ok(AGENTS, "SuspendAgent", cp.body(json!({"agent_id": "bot"})))
        .await;
    let took = w
        .until(std::time::Duration::from_secs(1), |r| {
            r.status == 403 && r.text.contains("suspended")
        })
        .await;
    eprintln!("suspension enforced after {took:?}");
    cp.ok(
        AGENTS,
        "ReactivateAgent",
        cp.body(json!({"agent_id": "bot"})),
    )
    .await;
    w.until(std::time::Duration::from_secs(1), |r| r.status == 200)
        .await;
    cp.ok(
        AGENTS,
        "RevokeAgentKey",
        cp.body(json!({"agent_id": "bot", "key_name": "k"})),
    )
    .await;
    let took = w
        .until(std::time::Duration::from_secs(1), |r| r.status == 401)
        .await;
    eprintln!("key revocation enforced after {took:?}");
    let logs = w.gw.logs();
    assert!(
        !logs.contains(&w.key) && !logs.contains(UPSTREAM_SECRET),
        "the gateway log holds a secret"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upstream_errors_pass_through_without_the_credential() {
    let w = world().await;
    let cp = &w.cp;
    let bad = portcullis_tests::FakeLlm::openai()
        .status(400)
        .start()
        .await;
    let denied = portcullis_tests::FakeLlm::openai()
        .status(401)
        .start()
        .await;
    for (name, fake) in [("bad", &bad), ("denied", &denied)] {
        let id = crate::world::model(cp, name, &fake.base_url()).await;
        cp.ok(
            MGMT,
            "AddGatewayModel",
            cp.body(json!({"gateway_id": w.gateway_id, "connection_id": id})),
        )
        .await;
    }
    cp.ok(
        AGENTS,
        "UpdateAgent",
        cp.body(json!({"agent_id": "bot", "allowed_direct_model_names": ["gpt", "bad", "denied"]})),
    )
    .await;
    let mut r = w.chat("bad").await;
    for _ in 0..50 {
        if r.status != 404 && r.status != 403 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        r = w.chat("bad").await;
    }
    assert_eq!(r.status, 400, "an upstream 4xx is passed on: {}", r.text);
    assert!(r.body["error"]["message"]
        .as_str()
        .unwrap()
        .contains("fake upstream failure 400"));
    assert_eq!(bad.requests().len(), 1, "a 4xx is not retried");
    let r = w.chat("denied").await;
    assert_eq!(
        r.status, 502,
        "an upstream refusing the gateway's credential is the gateway's failure: {}",
        r.text
    );
    assert!(!r.text.contains(UPSTREAM_SECRET));
}
