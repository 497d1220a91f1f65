//! Agent keys: shown once with the gateway and its endpoints, stored as SHA-256 only.

use portcullis_tests::controlplane::{AGENTS, MGMT};
use portcullis_tests::{on_both_backends, ControlPlane};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use crate::agents::register;

fn sha256_hex(s: &str) -> String {
    hex::encode(Sha256::digest(s.as_bytes()))
}

async fn deploy(cp: &ControlPlane) {
    cp.ok(
        MGMT,
        "CreateDeployment",
        cp.body(json!({"name": "edge", "public_url": "http://127.0.0.1:7780"})),
    )
    .await;
}

on_both_backends!(
    create_shows_token_once_with_endpoints,
    gateway_choice,
    rotate_ensure_and_revoke,
    revoked_agents_hold_no_keys,
);

async fn create_shows_token_once_with_endpoints(cp: &ControlPlane) {
    deploy(cp).await;
    register(
        cp,
        json!({"name": "bot", "allowed_gateway_ids": [cp.default_gateway_id]}),
    )
    .await;
    let issued = cp
        .ok(
            AGENTS,
            "CreateAgentKey",
            cp.body(json!({"agent_id": "bot", "name": "ci"})),
        )
        .await;
    let token = issued["token"].as_str().unwrap();
    assert!(token.starts_with("svc_") && token.len() == 47, "{token}");
    assert_eq!(
        issued["gateway_id"],
        cp.default_gateway_id.as_str(),
        "the only reachable gateway is chosen"
    );
    assert_eq!(
        issued["endpoints"]["openai_base_url"],
        format!(
            "http://127.0.0.1:7780/gateways/{}/v1",
            cp.default_gateway_id
        )
    );
    let list = cp
        .ok(AGENTS, "ListAgentKeys", cp.body(json!({"agent_id": "bot"})))
        .await;
    assert_eq!(list["keys"].as_array().unwrap().len(), 1);
    assert_eq!(list["keys"][0]["name"], "ci");
    assert!(!list.to_string().contains(token), "tokens are never listed");
    let stored = cp
        .db_strings("SELECT key_hash FROM agent_keys WHERE name = $1", "ci")
        .await;
    assert_eq!(stored, [sha256_hex(token)], "only the SHA-256 is stored");
    assert!(
        !cp.dump_store().await.contains(token),
        "the token is stored nowhere in clear"
    );
    cp.call(
        AGENTS,
        "CreateAgentKey",
        cp.body(json!({"agent_id": "bot", "name": "ci"})),
    )
    .await
    .expect_error("already_exists", 409);
    // The MCP-form spelling (`agent`) is accepted too.
    cp.ok(
        AGENTS,
        "CreateAgentKey",
        cp.body(json!({"agent": "bot", "name": "second"})),
    )
    .await;
}

async fn gateway_choice(cp: &ControlPlane) {
    deploy(cp).await;
    let none = register(cp, json!({"name": "loner"})).await;
    let issued = cp
        .ok(
            AGENTS,
            "CreateAgentKey",
            cp.body(json!({"agent_id": none["agent_id"], "name": "k"})),
        )
        .await;
    assert_eq!(
        (issued["gateway_id"].clone(), issued["endpoints"].clone()),
        (Value::Null, Value::Null)
    );

    let second = cp
        .ok(MGMT, "CreateGateway", cp.body(json!({"name": "second"})))
        .await["gateway"]["gateway_id"]
        .as_str()
        .unwrap()
        .to_string();
    an_agent_on_several_gateways_names_one(cp, &second).await;
    an_agent_gets_keys_only_for_gateways_it_reaches(cp, &second).await;
    endpoints_are_returned_for_one_reachable_or_named_gateway(cp, &second).await;
}

async fn an_agent_on_several_gateways_names_one(cp: &ControlPlane, second: &str) {
    register(
        cp,
        json!({"name": "multi", "allowed_gateway_ids": [cp.default_gateway_id, second]}),
    )
    .await;
    cp.call(
        AGENTS,
        "CreateAgentKey",
        cp.body(json!({"agent_id": "multi", "name": "k"})),
    )
    .await
    .expect_error("invalid_argument", 400)
    .mentions("gateway_id is required");
    let issued = cp
        .ok(
            AGENTS,
            "CreateAgentKey",
            cp.body(json!({"agent_id": "multi", "name": "k", "gateway_id": second})),
        )
        .await;
    assert_eq!(issued["gateway_id"], second);
    assert!(issued["endpoints"]["url"]
        .as_str()
        .unwrap()
        .ends_with(second));
}

async fn an_agent_gets_keys_only_for_gateways_it_reaches(cp: &ControlPlane, second: &str) {
    cp.call(
        AGENTS,
        "CreateAgentKey",
        cp.body(json!({"agent_id": "loner", "name": "k2", "gateway_id": second})),
    )
    .await
    .expect_error("failed_precondition", 400)
    .mentions("cannot reach");
    // The all-agents grant makes a gateway reachable too.
    cp.ok(
        MGMT,
        "SetGatewayAllAgentsAccess",
        cp.body(json!({"gateway_id": second, "granted": true})),
    )
    .await;
    cp.ok(
        AGENTS,
        "CreateAgentKey",
        cp.body(json!({"agent_id": "loner", "name": "k2", "gateway_id": second})),
    )
    .await;
}

async fn endpoints_are_returned_for_one_reachable_or_named_gateway(
    cp: &ControlPlane,
    second: &str,
) {
    let got = cp
        .ok(AGENTS, "GetAgent", cp.body(json!({"agent_id": "loner"})))
        .await;
    assert_eq!(
        got["gateway_id"], second,
        "get returns endpoints for the one reachable gateway"
    );
    let got = cp
        .ok(AGENTS, "GetAgent", cp.body(json!({"agent_id": "multi"})))
        .await;
    assert_eq!(
        got["endpoints"],
        Value::Null,
        "several gateways and none named: no endpoints"
    );
    let got = cp
        .ok(
            AGENTS,
            "GetAgent",
            cp.body(json!({"agent_id": "multi", "gateway_id": cp.default_gateway_id})),
        )
        .await;
    assert!(got["endpoints"]["mcp_url"]
        .as_str()
        .unwrap()
        .ends_with("/mcp"));
}

async fn rotate_ensure_and_revoke(cp: &ControlPlane) {
    register(cp, json!({"name": "bot"})).await;
    let first = cp
        .ok(
            AGENTS,
            "EnsureAgentKey",
            cp.body(json!({"agent_id": "bot", "name": "k"})),
        )
        .await;
    assert_eq!(first["created"], true);
    let second = cp
        .ok(
            AGENTS,
            "EnsureAgentKey",
            cp.body(json!({"agent_id": "bot", "name": "k"})),
        )
        .await;
    assert_eq!(second["created"], false, "ensure rotates an existing key");
    assert_ne!(first["token"], second["token"]);
    assert_eq!(first["key"]["key_id"], second["key"]["key_id"]);
    let rotated = cp
        .ok(
            AGENTS,
            "RotateAgentKey",
            cp.body(json!({"agent_id": "bot", "key_name": "k"})),
        )
        .await;
    let token = rotated["token"].as_str().unwrap();
    assert_eq!(
        cp.db_strings("SELECT key_hash FROM agent_keys WHERE name = $1", "k")
            .await,
        [sha256_hex(token)],
        "the old secret is replaced"
    );
    assert!(rotated["key"]["rotated_at"].is_string());
    cp.call(
        AGENTS,
        "RotateAgentKey",
        cp.body(json!({"agent_id": "bot", "key_name": "nope"})),
    )
    .await
    .expect_error("not_found", 404);
    cp.ok(
        AGENTS,
        "RevokeAgentKey",
        cp.body(json!({"agent_id": "bot", "key_name": "k"})),
    )
    .await;
    let list = cp
        .ok(AGENTS, "ListAgentKeys", cp.body(json!({"agent_id": "bot"})))
        .await;
    assert_eq!(list["keys"], json!([]));
    cp.call(
        AGENTS,
        "RevokeAgentKey",
        cp.body(json!({"agent_id": "bot", "key_name": "k"})),
    )
    .await
    .expect_error("not_found", 404);
}

async fn revoked_agents_hold_no_keys(cp: &ControlPlane) {
    register(cp, json!({"name": "bot"})).await;
    cp.ok(
        AGENTS,
        "CreateAgentKey",
        cp.body(json!({"agent_id": "bot", "name": "k"})),
    )
    .await;
    cp.ok(AGENTS, "RevokeAgent", cp.body(json!({"agent_id": "bot"})))
        .await;
    for (op, body) in [
        ("CreateAgentKey", json!({"agent_id": "bot", "name": "k2"})),
        (
            "RotateAgentKey",
            json!({"agent_id": "bot", "key_name": "k"}),
        ),
    ] {
        cp.call(AGENTS, op, cp.body(body))
            .await
            .expect_error("failed_precondition", 400)
            .mentions("revoked");
    }
}
