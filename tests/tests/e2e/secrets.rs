//! No secret (upstream key, agent key, platform key, HMAC secret, OAuth client secret)
//! appears in any reply, log line, error message, or in clear in the store. OAuth tokens are
//! checked the same way where they are issued (`oauth.rs`).

use portcullis_tests::controlplane::{AGENTS, MGMT, RULES, SYNC};
use portcullis_tests::{on_both_backends, ControlPlane};
use serde_json::{json, Value};

on_both_backends!(secrets_never_leak);

async fn secrets_never_leak(cp: &ControlPlane) {
    let upstream = "sk-upstream-7c1f0b9e5d";
    let hmac = "hmac-secret-4a8e2c6b1f";
    let mut replies: Vec<Value> = Vec::new();

    model_connections_with_an_upstream_key(cp, upstream, &mut replies).await;
    let (agent_token, rotated_token) = an_hmac_agent_and_its_keys(cp, hmac, &mut replies).await;
    let (platform_token, deployment_token) =
        a_platform_key_and_a_deployment(cp, &mut replies).await;

    // Webhook signing secrets and a provider's secret URL: shown once, sealed at rest.
    let slack_url = "https://hooks.slack.com/services/T0/B0/slack-secret-9d2e";
    let (whsec, slack_whsec) =
        a_subscription_and_a_slack_destination(cp, slack_url, &mut replies).await;
    // OAuth client secrets, on a model and a tool: shown as `client_secret_set` only.
    let client_secret = "oauth-client-secret-5e8a1c";
    oauth_connections_with_a_client_secret(cp, client_secret, &mut replies).await;

    let secrets = [
        client_secret,
        upstream,
        hmac,
        &whsec,
        &slack_whsec,
        slack_url,
        &agent_token,
        &rotated_token,
        &platform_token,
        &deployment_token,
        &cp.key,
    ];
    no_secret_is_in_a_reply_the_logs_or_the_store(cp, &replies, &secrets).await;
}

async fn model_connections_with_an_upstream_key(
    cp: &ControlPlane,
    upstream: &str,
    replies: &mut Vec<Value>,
) {
    let mut record = |v: Value| replies.push(v);
    let m = cp.ok(MGMT, "CreateLLMModelConnection", cp.body(json!({"name": "gpt", "provider": "openai", "provider_config": {"model": "gpt-4o"}, "secret_values": {"Authorization": format!("Bearer {upstream}")}}))).await;
    record(m.clone());
    let mid = m["connection_id"].as_str().unwrap().to_string();
    record(cp.ok(MGMT, "UpdateLLMModelConnection", cp.body(json!({"connection_id": mid, "secret_values": {"Authorization": format!("Bearer {upstream}")}, "secret_values_provided": true}))).await);
    record(
        cp.ok(
            MGMT,
            "GetLLMModelConnection",
            cp.body(json!({"connection_id": mid})),
        )
        .await,
    );
    record(
        cp.ok(MGMT, "ListLLMModelConnections", cp.body(json!({})))
            .await,
    );
    let bad = cp.call(MGMT, "UpdateLLMModelConnection", cp.body(json!({"connection_id": mid, "secret_values": {"bad header": upstream}, "secret_values_provided": true}))).await;
    record(bad.body.clone());
    let bad = cp.call(MGMT, "CreateLLMModelConnection", cp.body(json!({"name": "x", "provider": "openai", "auth_method": "none", "provider_config": {"model": "x"}, "secret_values": {"Authorization": upstream}}))).await;
    record(bad.body.clone());
}

/// Agent `bot` with an HMAC secret, a key and its rotation: the first and the rotated token.
async fn an_hmac_agent_and_its_keys(
    cp: &ControlPlane,
    hmac: &str,
    replies: &mut Vec<Value>,
) -> (String, String) {
    let mut record = |v: Value| replies.push(v);
    let agent = cp.ok(AGENTS, "RegisterAgent", cp.body(json!({"name": "bot", "actas_method": "hmac", "actas_hmac_secret": hmac, "allowed_gateway_ids": [cp.default_gateway_id]}))).await;
    record(agent.clone());
    let key = cp
        .ok(
            AGENTS,
            "CreateAgentKey",
            cp.body(json!({"agent_id": "bot", "name": "k"})),
        )
        .await;
    let agent_token = key["token"].as_str().unwrap().to_string();
    let rotated = cp
        .ok(
            AGENTS,
            "RotateAgentKey",
            cp.body(json!({"agent_id": "bot", "key_name": "k"})),
        )
        .await;
    let rotated_token = rotated["token"].as_str().unwrap().to_string();
    record(
        cp.ok(AGENTS, "GetAgent", cp.body(json!({"agent_id": "bot"})))
            .await,
    );
    record(cp.ok(AGENTS, "ListAgents", cp.body(json!({}))).await);
    record(
        cp.ok(AGENTS, "ListAgentKeys", cp.body(json!({"agent_id": "bot"})))
            .await,
    );
    record(
        cp.call_as(&rotated_token, MGMT, "ListGateways", cp.body(json!({})))
            .await
            .body,
    );
    (agent_token, rotated_token)
}

/// An operator key and a deployment, read back and used: their tokens.
async fn a_platform_key_and_a_deployment(
    cp: &ControlPlane,
    replies: &mut Vec<Value>,
) -> (String, String) {
    let mut record = |v: Value| replies.push(v);
    let pk = cp
        .ok(
            MGMT,
            "CreatePlatformKey",
            cp.body(json!({"name": "ops", "role": "operator"})),
        )
        .await;
    let platform_token = pk["token"].as_str().unwrap().to_string();
    record(cp.ok(MGMT, "ListPlatformKeys", cp.body(json!({}))).await);
    record(
        cp.call_as(&platform_token, MGMT, "GetIdentity", json!({}))
            .await
            .body,
    );
    let dt = cp
        .ok(
            MGMT,
            "CreateDeployment",
            cp.body(json!({"name": "edge", "public_url": "https://gw.example.com"})),
        )
        .await;
    let deployment_token = dt["token"].as_str().unwrap().to_string();
    record(cp.ok(MGMT, "ListDeployments", cp.body(json!({}))).await);
    record(
        cp.ok(
            RULES,
            "ListRuleBundles",
            cp.body(json!({"include_managed": true})),
        )
        .await,
    );
    let snapshot = cp
        .call_as(&deployment_token, SYNC, "GetSnapshot", json!({}))
        .await;
    assert_eq!(snapshot.status, 200);
    (platform_token, deployment_token)
}

/// A subscription and a Slack destination at `slack_url`: their signing secrets.
async fn a_subscription_and_a_slack_destination(
    cp: &ControlPlane,
    slack_url: &str,
    replies: &mut Vec<Value>,
) -> (String, String) {
    let created = cp
        .ok(
            portcullis_tests::controlplane::EVENTING,
            "CreateSubscription",
            cp.body(json!({"name": "siem", "event_types": ["access.denied"],
                "delivery_endpoint": "https://hooks.example.com/portcullis"})),
        )
        .await;
    let whsec = created["signing_secret"].as_str().unwrap().to_string();
    let slack = cp
        .ok(
            portcullis_tests::controlplane::EVENTING,
            "CreateDestination",
            cp.body(json!({"name": "chat", "provider": "slack",
                "settings": {"webhook_url": slack_url}})),
        )
        .await;
    let slack_whsec = slack["signing_secret"].as_str().unwrap().to_string();
    for op in ["ListDestinations", "ListSubscriptions"] {
        replies.push(
            cp.ok(
                portcullis_tests::controlplane::EVENTING,
                op,
                cp.body(json!({})),
            )
            .await,
        );
    }
    (whsec, slack_whsec)
}

async fn oauth_connections_with_a_client_secret(
    cp: &ControlPlane,
    client_secret: &str,
    replies: &mut Vec<Value>,
) {
    let oauth = json!({"authorization_url": "https://idp.example.com/authorize",
        "token_url": "https://idp.example.com/token", "client_id": "portcullis",
        "client_secret": client_secret});
    let om = cp
        .ok(
            MGMT,
            "CreateLLMModelConnection",
            cp.body(json!({"name": "om", "provider": "openai",
        "provider_config": {"model": "gpt-4o"}, "auth_method": "oauth", "credential_type": "shared",
        "auth_config": oauth})),
        )
        .await;
    assert_eq!(
        om["model"]["auth_config"]["client_secret_set"], true,
        "{om}"
    );
    replies.push(om);
    let ot = cp
        .ok(
            MGMT,
            "CreateMCPServerConnection",
            cp.body(json!({"name": "ot",
        "protocol": "streamable-http", "protocol_config": {"url": "https://mcp.example.com/mcp"},
        "auth_method": "oauth", "credential_type": "shared", "auth_config": oauth})),
        )
        .await;
    assert_eq!(ot["tool"]["auth_config"]["client_secret_set"], true, "{ot}");
    replies.push(ot);
    replies.push(
        cp.ok(MGMT, "ListMCPServerConnections", cp.body(json!({})))
            .await,
    );
    replies.push(
        cp.ok(MGMT, "ListLLMModelConnections", cp.body(json!({})))
            .await,
    );
}

async fn no_secret_is_in_a_reply_the_logs_or_the_store(
    cp: &ControlPlane,
    replies: &[Value],
    secrets: &[&str],
) {
    let all_replies = serde_json::to_string(&replies).unwrap();
    // The admin key is printed only to a terminal (DESIGN §24), and this output is a pipe:
    // nothing the process wrote may carry a secret.
    let logs = cp.logs();
    assert!(
        logs.contains("Agent key rotated"),
        "the run was logged at debug level"
    );
    let store = cp.dump_store().await;
    for secret in secrets {
        assert!(
            !all_replies.contains(secret),
            "a management reply contains a secret"
        );
        assert!(!logs.contains(secret), "the log contains a secret");
        assert!(!store.contains(secret), "the store holds a secret in clear");
    }
    if cp.backend == portcullis_tests::Backend::Sqlite {
        let bytes = String::from_utf8_lossy(&cp.sqlite_bytes()).to_string();
        for secret in secrets {
            assert!(
                !bytes.contains(secret),
                "the SQLite files hold a secret in clear"
            );
        }
    }
}
