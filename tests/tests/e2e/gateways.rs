//! Gateways: default marker, state, memberships, grants and endpoints.

use portcullis_tests::controlplane::{AGENTS, MGMT, RULES};
use portcullis_tests::{on_both_backends, ControlPlane};
use serde_json::{json, Value};

use crate::models::create_model;

async fn gateway(cp: &ControlPlane, name: &str) -> Value {
    cp.ok(
        MGMT,
        "CreateGateway",
        cp.body(json!({"name": name, "description": "d"})),
    )
    .await["gateway"]
        .clone()
}

fn gid(g: &Value) -> String {
    g["gateway_id"].as_str().unwrap().to_string()
}

on_both_backends!(
    bootstrap_default_and_lifecycle,
    memberships,
    delete_leaves_connections_and_pools,
    agent_grants_are_one_relation,
    endpoints_follow_deployments,
);

async fn bootstrap_default_and_lifecycle(cp: &ControlPlane) {
    let list = cp.ok(MGMT, "ListGateways", cp.body(json!({}))).await;
    let gws = list["gateways"].as_array().unwrap();
    assert_eq!(gws.len(), 1);
    assert_eq!(
        (
            gws[0]["name"].as_str(),
            gws[0]["is_default"].as_bool(),
            gws[0]["state"].as_str()
        ),
        (Some("default"), Some(true), Some("active"))
    );

    let g = gateway(cp, "team").await;
    assert_eq!(
        (g["is_default"].as_bool(), g["state"].as_str()),
        (Some(false), Some("active"))
    );
    cp.call(MGMT, "CreateGateway", cp.body(json!({"name": "team"})))
        .await
        .expect_error("already_exists", 409);
    let g2 = cp
        .ok(
            MGMT,
            "SetGatewayState",
            cp.body(json!({"gateway_id": gid(&g), "state": "disabled"})),
        )
        .await;
    assert_eq!(g2["gateway"]["state"], "disabled");
    cp.call(
        MGMT,
        "SetGatewayState",
        cp.body(json!({"gateway_id": gid(&g), "state": "paused"})),
    )
    .await
    .expect_error("invalid_argument", 400);
    let g3 = cp
        .ok(
            MGMT,
            "SetDefaultGateway",
            cp.body(json!({"gateway_id": gid(&g)})),
        )
        .await;
    assert_eq!(g3["gateway"]["is_default"], true);
    let old = cp
        .ok(
            MGMT,
            "GetGateway",
            cp.body(json!({"gateway_id": cp.default_gateway_id})),
        )
        .await;
    assert_eq!(
        old["gateway"]["is_default"], false,
        "only one gateway carries the default marker"
    );
    let g4 = cp
        .ok(
            MGMT,
            "UpdateGateway",
            cp.body(json!({"gateway_id": gid(&g), "description": "new"})),
        )
        .await;
    assert_eq!(
        (
            g4["gateway"]["name"].as_str(),
            g4["gateway"]["description"].as_str()
        ),
        (Some("team"), Some("new"))
    );
}

async fn memberships(cp: &ControlPlane) {
    let m = create_model(
        cp,
        json!({"name": "m", "provider": "openai", "provider_config": {"model": "x"}}),
    )
    .await;
    let mid = m["connection_id"].as_str().unwrap();
    let p = cp
        .ok(MGMT, "CreateLLMPool", cp.body(json!({"name": "p"})))
        .await;
    let pid = p["pool"]["pool_id"].as_str().unwrap();
    let gw = cp.default_gateway_id.as_str();
    cp.ok(
        MGMT,
        "AddGatewayModel",
        cp.body(json!({"gateway_id": gw, "connection_id": mid})),
    )
    .await;
    let g = cp
        .ok(
            MGMT,
            "AddGatewayPool",
            cp.body(json!({"gateway_id": gw, "pool_id": pid})),
        )
        .await;
    assert_eq!(
        g["gateway"]["members"],
        json!([
            {"kind": "model", "connection_id": mid, "name": "m"},
            {"kind": "pool", "pool_id": pid, "name": "p"},
        ])
    );
    cp.call(
        MGMT,
        "AddGatewayModel",
        cp.body(json!({"gateway_id": gw, "connection_id": mid})),
    )
    .await
    .expect_error("already_exists", 409);
    cp.call(
        MGMT,
        "AddGatewayPool",
        cp.body(json!({"gateway_id": gw, "pool_id": uuid::Uuid::new_v4().to_string()})),
    )
    .await
    .expect_error("not_found", 404);
    cp.call(
        MGMT,
        "RemoveGatewayMember",
        cp.body(json!({"gateway_id": gw, "connection_id": mid, "pool_id": pid})),
    )
    .await
    .expect_error("invalid_argument", 400);
    let g = cp
        .ok(
            MGMT,
            "RemoveGatewayMember",
            cp.body(json!({"gateway_id": gw, "connection_id": mid})),
        )
        .await;
    assert_eq!(g["gateway"]["members"].as_array().unwrap().len(), 1);
    cp.call(
        MGMT,
        "RemoveGatewayMember",
        cp.body(json!({"gateway_id": gw, "connection_id": mid})),
    )
    .await
    .expect_error("not_found", 404);
}

async fn delete_leaves_connections_and_pools(cp: &ControlPlane) {
    let m = create_model(
        cp,
        json!({"name": "m", "provider": "openai", "provider_config": {"model": "x"}}),
    )
    .await;
    let mid = m["connection_id"].as_str().unwrap();
    let p = cp
        .ok(
            MGMT,
            "CreateLLMPool",
            cp.body(json!({"name": "p", "members": [{"connection_id": mid}]})),
        )
        .await;
    let pid = p["pool"]["pool_id"].as_str().unwrap();
    let g = gateway(cp, "doomed").await;
    cp.ok(
        MGMT,
        "AddGatewayModel",
        cp.body(json!({"gateway_id": gid(&g), "connection_id": mid})),
    )
    .await;
    cp.ok(
        MGMT,
        "AddGatewayPool",
        cp.body(json!({"gateway_id": gid(&g), "pool_id": pid})),
    )
    .await;
    let agent = cp
        .ok(
            AGENTS,
            "RegisterAgent",
            cp.body(json!({"name": "a", "allowed_gateway_ids": [gid(&g)]})),
        )
        .await;
    cp.ok(
        MGMT,
        "DeleteGateway",
        cp.body(json!({"gateway_id": gid(&g)})),
    )
    .await;
    cp.call(MGMT, "GetGateway", cp.body(json!({"gateway_id": gid(&g)})))
        .await
        .expect_error("not_found", 404);
    let m = cp
        .ok(
            MGMT,
            "GetLLMModelConnection",
            cp.body(json!({"connection_id": mid})),
        )
        .await;
    assert_eq!(m["model"]["gateways"], json!([]));
    let p = cp
        .ok(MGMT, "GetLLMPool", cp.body(json!({"pool_id": pid})))
        .await;
    assert_eq!(
        p["pool"]["members"].as_array().unwrap().len(),
        1,
        "the pool keeps its members"
    );
    let a = cp
        .ok(
            AGENTS,
            "GetAgent",
            cp.body(json!({"agent_id": agent["agent"]["agent_id"]})),
        )
        .await;
    assert_eq!(a["agent"]["allowed_gateway_ids"], json!([]));
}

async fn agent_grants_are_one_relation(cp: &ControlPlane) {
    let g = gateway(cp, "g").await;
    let agent = cp
        .ok(AGENTS, "RegisterAgent", cp.body(json!({"name": "bot"})))
        .await;
    let aid = agent["agent"]["agent_id"].as_str().unwrap().to_string();
    a_grant_shows_on_the_agent_and_its_bundle(cp, &gid(&g), &aid).await;
    a_grant_to_all_agents_is_a_managed_bundle(cp, &gid(&g)).await;
    cp.call(
        MGMT,
        "SetGatewayAgentAccess",
        cp.body(json!({"gateway_id": gid(&g), "agent_id": "nobody", "granted": true})),
    )
    .await
    .expect_error("not_found", 404);
}

/// Grants agent `aid` gateway `gateway_id`, sees it from both sides, and withdraws it from the
/// agent's side.
async fn a_grant_shows_on_the_agent_and_its_bundle(cp: &ControlPlane, gateway_id: &str, aid: &str) {
    let got = cp
        .ok(
            MGMT,
            "SetGatewayAgentAccess",
            cp.body(json!({"gateway_id": gateway_id, "agent_id": aid, "granted": true})),
        )
        .await;
    assert_eq!(got["gateway"]["agent_ids"], json!([aid]));
    let a = cp
        .ok(AGENTS, "GetAgent", cp.body(json!({"agent_id": aid})))
        .await;
    assert_eq!(
        a["agent"]["allowed_gateway_ids"],
        json!([gateway_id]),
        "the grant shows on the agent"
    );
    let bundles = cp
        .ok(
            RULES,
            "ListRuleBundles",
            cp.body(json!({"include_managed": true, "scope": "agent", "scope_id": aid})),
        )
        .await;
    let ids = bundles["bundles"][0]["policy_ids"].clone();
    assert_eq!(
        ids,
        json!([format!("agent/{aid}/gateway/{}", gateway_id)]),
        "the grant regenerates the agent's bundle"
    );

    cp.ok(
        AGENTS,
        "UpdateAgent",
        cp.body(json!({"agent_id": aid, "allowed_gateway_ids": []})),
    )
    .await;
    let got = cp
        .ok(
            MGMT,
            "GetGateway",
            cp.body(json!({"gateway_id": gateway_id})),
        )
        .await;
    assert_eq!(
        got["gateway"]["agent_ids"],
        json!([]),
        "clearing the agent's list withdraws the grant"
    );
}

async fn a_grant_to_all_agents_is_a_managed_bundle(cp: &ControlPlane, gateway_id: &str) {
    let got = cp
        .ok(
            MGMT,
            "SetGatewayAllAgentsAccess",
            cp.body(json!({"gateway_id": gateway_id, "granted": true})),
        )
        .await;
    assert_eq!(got["gateway"]["all_agents"], true);
    let bundles = cp
        .ok(
            RULES,
            "ListRuleBundles",
            cp.body(json!({"include_managed": true})),
        )
        .await;
    let all: Vec<&Value> = bundles["bundles"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|b| b["bundle_id"] == "managed-gateways")
        .collect();
    assert_eq!(
        all[0]["policy_ids"],
        json!([format!("gateway/{}/all-agents", gateway_id)])
    );
    cp.ok(
        MGMT,
        "SetGatewayAllAgentsAccess",
        cp.body(json!({"gateway_id": gateway_id, "granted": false})),
    )
    .await;
    let bundles = cp
        .ok(
            RULES,
            "ListRuleBundles",
            cp.body(json!({"include_managed": true})),
        )
        .await;
    assert!(bundles["bundles"]
        .as_array()
        .unwrap()
        .iter()
        .all(|b| b["bundle_id"] != "managed-gateways"));
}

async fn endpoints_follow_deployments(cp: &ControlPlane) {
    let g = cp
        .ok(
            MGMT,
            "GetGateway",
            cp.body(json!({"gateway_id": cp.default_gateway_id})),
        )
        .await;
    assert_eq!(
        g["gateway"]["endpoints"],
        Value::Null,
        "no deployment, no endpoints"
    );
    cp.call(
        MGMT,
        "CreateDeployment",
        cp.body(json!({"name": "edge", "public_url": "ftp://x"})),
    )
    .await
    .expect_error("invalid_argument", 400)
    .mentions("public_url");
    let d = cp
        .ok(
            MGMT,
            "CreateDeployment",
            cp.body(json!({"name": "edge", "public_url": "https://gw.example.com/"})),
        )
        .await;
    assert!(d["token"].as_str().unwrap().starts_with("svc_dt_"));
    let g = cp
        .ok(
            MGMT,
            "GetGateway",
            cp.body(json!({"gateway_id": cp.default_gateway_id})),
        )
        .await;
    let url = format!("https://gw.example.com/gateways/{}", cp.default_gateway_id);
    assert_eq!(
        g["gateway"]["endpoints"],
        json!({
            "url": url, "mcp_url": format!("{url}/mcp"), "openai_base_url": format!("{url}/v1"), "anthropic_base_url": url,
        })
    );
    let list = cp.ok(MGMT, "ListDeployments", cp.body(json!({}))).await;
    assert_eq!(list["deployments"].as_array().unwrap().len(), 1);
    assert!(
        !list.to_string().contains(d["token"].as_str().unwrap()),
        "tokens are never listed"
    );
}
