//! Snapshot sync: deployment tokens, the snapshot's contents, and the long poll.

use std::time::{Duration, Instant};

use portcullis_tests::controlplane::{AGENTS, MGMT, RULES, SYNC};
use portcullis_tests::{on_both_backends, ControlPlane};
use serde_json::{json, Value};

use crate::agents::register;
use crate::models::create_model;

async fn deployment(cp: &ControlPlane) -> String {
    let d = cp
        .ok(
            MGMT,
            "CreateDeployment",
            cp.body(json!({"name": "edge", "public_url": "http://127.0.0.1:7780"})),
        )
        .await;
    d["token"].as_str().unwrap().to_string()
}

async fn snapshot(cp: &ControlPlane, token: &str, body: Value) -> Value {
    let reply = cp.call_as(token, SYNC, "GetSnapshot", body).await;
    assert_eq!(reply.status, 200, "{}", reply.text);
    reply.body
}

on_both_backends!(
    snapshot_carries_what_gateways_need,
    only_deployment_tokens_sync,
    long_poll_wakes_on_change_and_times_out,
    credentials_are_asked_for_by_deployments_only
);

async fn snapshot_carries_what_gateways_need(cp: &ControlPlane) {
    let token = deployment(cp).await;
    let m = create_model(cp, json!({"name": "gpt", "provider": "openai", "provider_config": {"model": "gpt-4o"}, "secret_values": {"Authorization": "Bearer sk-snap"}})).await;
    let p = cp.ok(MGMT, "CreateLLMPool", cp.body(json!({"name": "fast", "strategy": "priority", "members": [{"connection_id": m["connection_id"], "priority": 2}]}))).await;
    cp.ok(
        MGMT,
        "AddGatewayPool",
        cp.body(json!({"gateway_id": cp.default_gateway_id, "pool_id": p["pool"]["pool_id"]})),
    )
    .await;
    register(cp, json!({"name": "bot", "allowed_pool_names": ["fast"], "allowed_gateway_ids": [cp.default_gateway_id]})).await;
    let key = cp
        .ok(
            AGENTS,
            "CreateAgentKey",
            cp.body(json!({"agent_id": "bot", "name": "k"})),
        )
        .await;
    cp.ok(
        RULES,
        "DeployRuleBundle",
        cp.body(json!({"policies": "permit (principal, action, resource);"})),
    )
    .await;

    let snap = snapshot(cp, &token, json!({})).await;
    let s = &snap["snapshot"];
    assert_eq!(snap["revision"], s["revision"]);
    assert_eq!(s["workspace_id"], cp.workspace_id.as_str());
    assert_eq!(s["public_url"], "http://127.0.0.1:7780");
    assert_eq!(
        s["models"][0]["secret_values"],
        json!({"Authorization": "Bearer sk-snap"}),
        "the gateway gets the secret to inject"
    );
    assert_eq!(s["pools"][0]["members"][0]["priority"], 2);
    assert_eq!(s["gateways"][0]["pool_ids"], json!([p["pool"]["pool_id"]]));
    let agent = &s["agents"][0];
    assert_eq!(agent["status"], "active");
    let hash = hex::encode(<sha2::Sha256 as sha2::Digest>::digest(
        key["token"].as_str().unwrap().as_bytes(),
    ));
    assert_eq!(agent["key_hashes"], json!([hash]));
    assert!(
        !snap.to_string().contains(key["token"].as_str().unwrap()),
        "agent keys travel only as hashes"
    );
    let bundles = s["bundles"].as_array().unwrap();
    assert!(bundles.iter().any(|b| b["managed"] == true
        && b["policies"]
            .as_str()
            .unwrap()
            .contains("Svc::Pool::\"fast\"")));
    assert!(bundles.iter().any(|b| b["managed"] == false));
}

async fn only_deployment_tokens_sync(cp: &ControlPlane) {
    cp.call(SYNC, "GetSnapshot", json!({}))
        .await
        .expect_error("unauthenticated", 401)
        .mentions("deployment token");
    register(cp, json!({"name": "bot"})).await;
    let key = cp
        .ok(
            AGENTS,
            "CreateAgentKey",
            cp.body(json!({"agent_id": "bot", "name": "k"})),
        )
        .await;
    cp.call_as(
        key["token"].as_str().unwrap(),
        SYNC,
        "GetSnapshot",
        json!({}),
    )
    .await
    .expect_error("unauthenticated", 401);
    let token = deployment(cp).await;
    cp.call_as(&token, MGMT, "ListGateways", cp.body(json!({})))
        .await
        .expect_error("unauthenticated", 401)
        .mentions("platform key");
    cp.call_as(
        &token,
        SYNC,
        "GetSnapshot",
        json!({"workspace_id": uuid::Uuid::new_v4().to_string()}),
    )
    .await
    .expect_error("permission_denied", 403);
    let list = cp.ok(MGMT, "ListDeployments", cp.body(json!({}))).await;
    let id = list["deployments"][0]["deployment_id"]
        .as_str()
        .unwrap()
        .to_string();
    snapshot(cp, &token, json!({})).await;
    let list = cp.ok(MGMT, "ListDeployments", cp.body(json!({}))).await;
    assert!(
        list["deployments"][0]["last_seen_at"].is_string(),
        "the control plane records when a deployment synced"
    );
    cp.ok(
        MGMT,
        "RevokeDeployment",
        cp.body(json!({"deployment_id": id})),
    )
    .await;
    cp.call_as(&token, SYNC, "GetSnapshot", json!({}))
        .await
        .expect_error("unauthenticated", 401);
}

async fn long_poll_wakes_on_change_and_times_out(cp: &ControlPlane) {
    let token = deployment(cp).await;
    let first = snapshot(cp, &token, json!({})).await;
    let revision = first["revision"].as_u64().unwrap();

    let started = Instant::now();
    let idle = snapshot(cp, &token, json!({"revision": revision, "wait_seconds": 1})).await;
    assert!(
        started.elapsed() >= Duration::from_millis(900),
        "a current caller waits"
    );
    assert_eq!(
        (idle["revision"].as_u64(), idle["snapshot"].clone()),
        (Some(revision), Value::Null)
    );

    let waiter = {
        let (url, token) = (cp.url.clone(), token.clone());
        tokio::spawn(async move {
            let started = Instant::now();
            let reply: Value = reqwest::Client::new()
                .post(format!("{url}/svc.sync.v1.SyncService/GetSnapshot"))
                .bearer_auth(token)
                .json(&json!({"revision": revision, "wait_seconds": 20}))
                .send()
                .await
                .unwrap()
                .json()
                .await
                .unwrap();
            (reply, started.elapsed())
        })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    register(cp, json!({"name": "new-agent"})).await;
    let (reply, waited) = waiter.await.unwrap();
    assert!(reply["revision"].as_u64().unwrap() > revision);
    assert_eq!(reply["snapshot"]["agents"][0]["name"], "new-agent");
    assert!(
        waited < Duration::from_secs(5),
        "the waiter is woken by the commit, not the 20 s timeout ({waited:?})"
    );

    cp.call_as(&token, SYNC, "GetSnapshot", json!({"wait_seconds": 3600}))
        .await
        .expect_error("invalid_argument", 400);
}

/// `GetCredential` as a gateway asks it: a person without a key gets a link (never a value);
/// platform keys cannot ask, and bad requests are refused without minting anything. (A stored
/// key coming back as its headers is `peruser::per_user_tool_provisioned_then_revoked`.)
async fn credentials_are_asked_for_by_deployments_only(cp: &ControlPlane) {
    let tool = |name: &str, ctype: &str| {
        json!({"name": name, "protocol": "streamable-http", "auth_method": "api-key",
            "credential_type": ctype, "protocol_config": {"url": "http://127.0.0.1:9/mcp"}})
    };
    let per_user = cp
        .ok(
            MGMT,
            "CreateMCPServerConnection",
            cp.body(tool("pu", "per-user")),
        )
        .await["connection_id"]
        .as_str()
        .unwrap()
        .to_string();
    let shared = cp
        .ok(
            MGMT,
            "CreateMCPServerConnection",
            cp.body(tool("sh", "shared")),
        )
        .await["connection_id"]
        .as_str()
        .unwrap()
        .to_string();
    let ask = |connection: &str, subject: &str| json!({"owner": "tool", "connection_id": connection, "subject": subject, "agent_id": ""});
    cp.call(SYNC, "GetCredential", ask(&per_user, "alice"))
        .await
        .expect_error("unauthenticated", 401)
        .mentions("deployment token");

    let token = deployment(cp).await;
    let reply = cp
        .call_as(&token, SYNC, "GetCredential", ask(&per_user, "alice"))
        .await;
    assert_eq!(reply.status, 200, "{}", reply.text);
    assert_eq!(reply.body["connection_name"], "pu", "{}", reply.text);
    assert!(reply.body["secret_values"].is_null(), "{}", reply.text);
    let link = reply.body["provision_url"].as_str().unwrap();
    assert!(link.contains("/provision/"), "{link}");
    assert!(reply.body["expires_at"].is_string(), "{}", reply.text);

    cp.call_as(&token, SYNC, "GetCredential", ask(&shared, "alice"))
        .await
        .expect_error("failed_precondition", 400)
        .mentions("does not use per-user credentials");
    let unknown = uuid::Uuid::new_v4().to_string();
    cp.call_as(&token, SYNC, "GetCredential", ask(&unknown, "alice"))
        .await
        .expect_error("not_found", 404);
    cp.call_as(
        &token,
        SYNC,
        "GetCredential",
        ask(&per_user, &"a".repeat(321)),
    )
    .await
    .expect_error("invalid_argument", 400)
    .mentions("320 characters");
    let links = cp
        .db_strings(
            "SELECT subject FROM provision_tokens WHERE subject <> $1",
            "",
        )
        .await;
    assert_eq!(
        links,
        ["alice"],
        "only the one answered request minted a link"
    );
}
