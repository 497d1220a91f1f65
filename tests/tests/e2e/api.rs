//! The API framework: routing, authentication, roles, body parsing, and that bad input
//! changes nothing.

use portcullis_tests::controlplane::{AGENTS, MGMT};
use portcullis_tests::{on_both_backends, Backend, ControlPlane};
use serde_json::{json, Value};

use crate::world::platform_key;

async fn model_count(cp: &ControlPlane) -> usize {
    cp.ok(MGMT, "ListLLMModelConnections", cp.body(json!({})))
        .await["models"]
        .as_array()
        .unwrap()
        .len()
}

on_both_backends!(
    bad_input_is_refused_and_changes_nothing,
    empty_strings_are_absent,
    authentication,
    roles_map_to_permissions,
    health_ready_metrics,
    state_survives_restart
);

/// In Connect's proto3 JSON an empty string and a missing field are the same.
async fn empty_strings_are_absent(cp: &ControlPlane) {
    let me = cp
        .ok(MGMT, "GetIdentity", json!({"workspace_id": ""}))
        .await;
    assert_eq!(
        me["identity"]["workspace_id"],
        cp.workspace_id.as_str(),
        "{me}"
    );
    cp.ok(
        AGENTS,
        "RegisterAgent",
        cp.body(json!({"name": "bot", "parent_id": "", "token_ttl": ""})),
    )
    .await;
    let a = cp
        .ok(
            AGENTS,
            "GetAgent",
            cp.body(json!({"agent_id": "bot", "gateway_id": ""})),
        )
        .await;
    assert_eq!(a["agent"]["token_ttl"], "10m", "{a}");
    let m = cp
        .ok(
            MGMT,
            "CreateLLMModelConnection",
            cp.body(
                json!({"name": "m", "provider": "openai", "provider_config": {"model": "x"},
                "auth_method": "", "credential_type": ""}),
            ),
        )
        .await;
    assert_eq!(m["model"]["auth_method"], "api-key", "{m}");
    // Where the spec gives an empty string a meaning of its own, it keeps it.
    cp.ok(
        AGENTS,
        "UpdateAgent",
        cp.body(json!({"agent_id": "bot", "token_ttl": "1h"})),
    )
    .await;
    let a = cp
        .ok(
            AGENTS,
            "UpdateAgent",
            cp.body(json!({"agent_id": "bot", "token_ttl": ""})),
        )
        .await;
    assert_eq!(a["agent"]["token_ttl"], "10m", "an empty token_ttl resets");
    // A required field sent empty is missing, and says so.
    cp.call(
        MGMT,
        "GetLLMModelConnection",
        cp.body(json!({"connection_id": ""})),
    )
    .await
    .expect_error("invalid_argument", 400)
    .mentions("connection_id");
}

async fn bad_input_is_refused_and_changes_nothing(cp: &ControlPlane) {
    malformed_bodies_are_invalid_arguments(cp).await;
    let other_ws = cp.body(json!({"workspace_id": uuid::Uuid::new_v4().to_string(), "name": "m", "provider": "openai", "provider_config": {"model": "x"}}));
    cp.call(MGMT, "CreateLLMModelConnection", other_ws)
        .await
        .expect_error("permission_denied", 403);
    assert_eq!(
        model_count(cp).await,
        0,
        "no refused request created anything"
    );

    // Connect's code for a procedure the server does not have is `unimplemented` (HTTP 404),
    // distinct from `not_found` for a missing resource.
    unknown_operations_are_unimplemented_and_missing_resources_not_found(cp).await;
}

async fn malformed_bodies_are_invalid_arguments(cp: &ControlPlane) {
    let op = "svc.mgmt.v1.ManagementService/CreateLLMModelConnection";
    let good =
        cp.body(json!({"name": "m", "provider": "openai", "provider_config": {"model": "x"}}));
    let cases: Vec<(Vec<u8>, &str, &str)> = vec![
        (
            serde_json::to_vec(
                &json!({"name": "m", "provider": "openai", "provider_config": {"model": "x"}}),
            )
            .unwrap(),
            "application/json",
            "missing field `workspace_id`",
        ),
        (
            serde_json::to_vec(&{
                let mut b = good.clone();
                b["colour"] = json!("red");
                b
            })
            .unwrap(),
            "application/json",
            "unknown field `colour`",
        ),
        (
            serde_json::to_vec(&{
                let mut b = good.clone();
                b["filter_window_bytes"] = json!("lots");
                b
            })
            .unwrap(),
            "application/json",
            "field filter_window_bytes",
        ),
        (
            serde_json::to_vec(&{
                let mut b = good.clone();
                b["attributes"] = json!({"k": 1});
                b
            })
            .unwrap(),
            "application/json",
            "field attributes.k",
        ),
        (
            b"{not json".to_vec(),
            "application/json",
            "invalid request body",
        ),
        (b"[]".to_vec(), "application/json", "invalid request body"),
        (Vec::new(), "application/json", "empty"),
        (
            serde_json::to_vec(&good).unwrap(),
            "text/plain",
            "Content-Type",
        ),
        (
            vec![b' '; 3 * 1024 * 1024],
            "application/json",
            "larger than",
        ),
    ];
    for (body, content_type, needle) in cases {
        let reply = cp.call_raw(op, content_type, body).await;
        reply.expect_error("invalid_argument", 400).mentions(needle);
        assert!(reply.status < 500);
    }
}

async fn unknown_operations_are_unimplemented_and_missing_resources_not_found(cp: &ControlPlane) {
    cp.call(MGMT, "Frobnicate", cp.body(json!({})))
        .await
        .expect_error("unimplemented", 404)
        .mentions("unknown operation");
    cp.call("svc.nope.v1.Nope", "List", cp.body(json!({})))
        .await
        .expect_error("unimplemented", 404);
    cp.call(
        MGMT,
        "GetLLMModelConnection",
        cp.body(json!({"connection_id": uuid::Uuid::new_v4().to_string()})),
    )
    .await
    .expect_error("not_found", 404);
    let reply = cp.get("svc.mgmt.v1.ManagementService/ListGateways").await;
    assert!(
        (400..500).contains(&reply.status),
        "GET on an operation is a 4xx: {}",
        reply.status
    );
    let reply = cp.call(MGMT, "ListGateways", cp.body(json!({}))).await;
    assert_eq!(reply.status, 200);
}

async fn authentication(cp: &ControlPlane) {
    let body = cp.body(json!({}));
    let reply = reqwest::Client::new()
        .post(format!("{}/{MGMT}/ListGateways", cp.url))
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(reply.status().as_u16(), 401);
    assert!(reply.headers().contains_key("x-request-id"));
    let err: serde_json::Value = reply.json().await.unwrap();
    assert_eq!(err["code"], "unauthenticated");
    let forged = format!("svc_pk_{}", "A".repeat(43));
    cp.call_as(&forged, MGMT, "ListGateways", body.clone())
        .await
        .expect_error("unauthenticated", 401)
        .mentions("unknown");
    cp.call_as("not-a-key", MGMT, "ListGateways", body.clone())
        .await
        .expect_error("unauthenticated", 401);
    let agent = cp
        .ok(AGENTS, "RegisterAgent", cp.body(json!({"name": "bot"})))
        .await;
    let key = cp
        .ok(
            AGENTS,
            "CreateAgentKey",
            cp.body(json!({"agent_id": agent["agent"]["agent_id"], "name": "k"})),
        )
        .await;
    cp.call_as(
        key["token"].as_str().unwrap(),
        MGMT,
        "ListGateways",
        body.clone(),
    )
    .await
    .expect_error("unauthenticated", 401)
    .mentions("agent keys authenticate to gateways only");

    let created = cp
        .ok(
            MGMT,
            "CreatePlatformKey",
            cp.body(json!({"name": "temp", "role": "operator"})),
        )
        .await;
    let token = created["token"].as_str().unwrap();
    assert_eq!(
        cp.call_as(token, MGMT, "ListGateways", body.clone())
            .await
            .status,
        200
    );
    cp.ok(
        MGMT,
        "RevokePlatformKey",
        cp.body(json!({"key_id": created["platform_key"]["key_id"]})),
    )
    .await;
    cp.call_as(token, MGMT, "ListGateways", body.clone())
        .await
        .expect_error("unauthenticated", 401);
    let keys = cp.ok(MGMT, "ListPlatformKeys", cp.body(json!({}))).await;
    let admin_id = keys["platform_keys"][0]["key_id"].clone();
    cp.call(
        MGMT,
        "RevokePlatformKey",
        cp.body(json!({"key_id": admin_id})),
    )
    .await
    .expect_error("failed_precondition", 400)
    .mentions("last admin key");
}

async fn roles_map_to_permissions(cp: &ControlPlane) {
    let viewer = platform_key(cp, "viewer", "viewer").await;
    let operator = platform_key(cp, "operator", "operator").await;
    a_viewer_reads_but_creates_nothing(cp, &viewer).await;
    an_operator_creates_but_makes_no_keys_or_deployments(cp, &operator).await;
    // The plural spelling of a permission is accepted.
    key_permissions_are_held_to_the_role(cp).await;
    let workspaces = cp
        .call_as(&viewer, MGMT, "ListWorkspaces", json!({}))
        .await
        .body;
    assert_eq!(
        workspaces["workspaces"][0]["workspace_id"],
        cp.workspace_id.as_str()
    );
    assert_eq!(workspaces["workspaces"][0]["name"], "default");
}

/// A `CreatePlatformKey` body.
fn key_body(cp: &ControlPlane, name: &str, role: &str) -> Value {
    cp.body(json!({"name": name, "role": role}))
}

/// A `CreateLLMModelConnection` body.
fn model_body(cp: &ControlPlane) -> Value {
    cp.body(json!({"name": "m", "provider": "openai", "provider_config": {"model": "x"}}))
}

async fn a_viewer_reads_but_creates_nothing(cp: &ControlPlane, viewer: &str) {
    let identity = cp
        .call_as(viewer, MGMT, "GetIdentity", json!({}))
        .await
        .body;
    assert_eq!(
        identity["identity"]["permissions"],
        json!(["gateway.view", "agents.view", "eventing.view"])
    );
    assert_eq!(
        cp.call_as(viewer, MGMT, "ListLLMModelConnections", cp.body(json!({})))
            .await
            .status,
        200
    );
    assert_eq!(
        cp.call_as(viewer, AGENTS, "ListAgents", cp.body(json!({})))
            .await
            .status,
        200
    );
    cp.call_as(viewer, MGMT, "CreateLLMModelConnection", model_body(cp))
        .await
        .expect_error("permission_denied", 403)
        .mentions("gateway.manage");
    cp.call_as(
        viewer,
        AGENTS,
        "RegisterAgent",
        cp.body(json!({"name": "a"})),
    )
    .await
    .expect_error("permission_denied", 403)
    .mentions("agents.register");
}

async fn an_operator_creates_but_makes_no_keys_or_deployments(cp: &ControlPlane, operator: &str) {
    assert_eq!(
        cp.call_as(operator, MGMT, "CreateLLMModelConnection", model_body(cp))
            .await
            .status,
        200
    );
    assert_eq!(
        cp.call_as(
            operator,
            AGENTS,
            "RegisterAgent",
            cp.body(json!({"name": "a", "allowed_pool_names": ["p"]}))
        )
        .await
        .status,
        200
    );
    cp.call_as(
        operator,
        MGMT,
        "CreatePlatformKey",
        key_body(cp, "x", "viewer"),
    )
    .await
    .expect_error("permission_denied", 403);
    cp.call_as(
        operator,
        MGMT,
        "CreateDeployment",
        cp.body(json!({"name": "d", "public_url": "https://x.example.com"})),
    )
    .await
    .expect_error("permission_denied", 403);
}

async fn key_permissions_are_held_to_the_role(cp: &ControlPlane) {
    let plural = cp
        .call(
            MGMT,
            "CreatePlatformKey",
            cp.body(json!({"name": "p", "role": "viewer", "permissions": ["gateways.view"]})),
        )
        .await;
    assert_eq!(
        plural.body["platform_key"]["permissions"],
        json!(["gateway.view"]),
        "{}",
        plural.text
    );
    cp.call(
        MGMT,
        "CreatePlatformKey",
        cp.body(json!({"name": "q", "role": "viewer", "permissions": ["rules.deploy"]})),
    )
    .await
    .expect_error("invalid_argument", 400)
    .mentions("does not include");
    cp.call(MGMT, "CreatePlatformKey", key_body(cp, "viewer", "viewer"))
        .await
        .expect_error("already_exists", 409);
}

async fn health_ready_metrics(cp: &ControlPlane) {
    assert_eq!(cp.get("healthz").await.status, 200);
    assert_eq!(cp.get("ready").await.status, 200);
    cp.call(MGMT, "ListGateways", cp.body(json!({}))).await;
    let metrics = cp.get("metrics").await;
    assert!(metrics.text.contains(r#"portcullis_cp_requests_total{operation="svc.mgmt.v1.ManagementService/ListGateways",code="ok"}"#), "{}", metrics.text);
}

async fn state_survives_restart(cp: &ControlPlane) {
    // The macro hands out a shared reference; restart needs a private control plane.
    let mut own = ControlPlane::start(cp.backend).await;
    let m = own.ok(MGMT, "CreateLLMModelConnection", own.body(json!({"name": "m", "provider": "openai", "provider_config": {"model": "x"}, "secret_values": {"Authorization": "Bearer sk-persist"}}))).await;
    let (ws, gw, key) = (
        own.workspace_id.clone(),
        own.default_gateway_id.clone(),
        own.key.clone(),
    );
    own.restart().await;
    assert_eq!(
        (
            own.workspace_id.clone(),
            own.default_gateway_id.clone(),
            own.key.clone()
        ),
        (ws, gw, key),
        "a restart bootstraps nothing new"
    );
    let got = own
        .ok(
            MGMT,
            "GetLLMModelConnection",
            own.body(json!({"connection_id": m["connection_id"]})),
        )
        .await;
    assert_eq!(
        got["model"]["has_credential"], true,
        "secrets survive a restart with the stored master key"
    );
    assert_eq!(
        own.ok(MGMT, "ListGateways", own.body(json!({}))).await["gateways"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
    let _ = Backend::Sqlite;
}
