//! Pools and their members.

use portcullis_tests::controlplane::MGMT;
use portcullis_tests::{on_both_backends, ControlPlane};
use serde_json::json;

use crate::models::create_model;

async fn model(cp: &ControlPlane, name: &str) -> String {
    let m = create_model(
        cp,
        json!({"name": name, "provider": "openai", "provider_config": {"model": name}}),
    )
    .await;
    m["connection_id"].as_str().unwrap().to_string()
}

on_both_backends!(
    create_with_members_and_strategies,
    names_shared_with_models,
    update_and_member_operations,
    delete_detaches_from_gateways
);

async fn create_with_members_and_strategies(cp: &ControlPlane) {
    let (a, b) = (model(cp, "a").await, model(cp, "b").await);
    let pool = cp
        .ok(MGMT, "CreateLLMPool", cp.body(json!({"name": "p", "members": [{"connection_id": a, "weight": 3}, {"connection_id": b, "priority": 1}]})))
        .await["pool"]
        .clone();
    assert_eq!(
        pool["strategy"], "round_robin",
        "round_robin is the default"
    );
    assert_eq!(
        pool["members"],
        json!([
            {"connection_id": a, "name": "a", "weight": 3, "priority": 0},
            {"connection_id": b, "name": "b", "weight": 1, "priority": 1},
        ])
    );
    for strategy in ["weighted", "priority"] {
        let p = cp
            .ok(
                MGMT,
                "CreateLLMPool",
                cp.body(json!({"name": strategy, "strategy": strategy})),
            )
            .await;
        assert_eq!(p["pool"]["strategy"], strategy);
    }
    cp.call(
        MGMT,
        "CreateLLMPool",
        cp.body(json!({"name": "x", "strategy": "random"})),
    )
    .await
    .expect_error("invalid_argument", 400)
    .mentions("strategy");
    cp.call(
        MGMT,
        "CreateLLMPool",
        cp.body(json!({"name": "x", "members": [{"connection_id": a, "weight": 0}]})),
    )
    .await
    .expect_error("invalid_argument", 400)
    .mentions("weight");
    cp.call(
        MGMT,
        "CreateLLMPool",
        cp.body(json!({"name": "x", "members": [{"connection_id": a}, {"connection_id": a}]})),
    )
    .await
    .expect_error("invalid_argument", 400)
    .mentions("twice");
    cp.call(
        MGMT,
        "CreateLLMPool",
        cp.body(
            json!({"name": "x", "members": [{"connection_id": uuid::Uuid::new_v4().to_string()}]}),
        ),
    )
    .await
    .expect_error("not_found", 404);
    let names: Vec<String> = cp.ok(MGMT, "ListLLMPools", cp.body(json!({}))).await["pools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(
        names,
        ["p", "priority", "weighted"],
        "refused creates store nothing"
    );
}

async fn names_shared_with_models(cp: &ControlPlane) {
    model(cp, "gpt").await;
    cp.call(MGMT, "CreateLLMPool", cp.body(json!({"name": "gpt"})))
        .await
        .expect_error("already_exists", 409)
        .mentions("model connection");
    cp.ok(MGMT, "CreateLLMPool", cp.body(json!({"name": "fast"})))
        .await;
    cp.call(MGMT, "CreateLLMPool", cp.body(json!({"name": "fast"})))
        .await
        .expect_error("already_exists", 409);
    cp.call(
        MGMT,
        "CreateLLMModelConnection",
        cp.body(json!({"name": "fast", "provider": "openai", "provider_config": {"model": "x"}})),
    )
    .await
    .expect_error("already_exists", 409)
    .mentions("pool");
}

async fn update_and_member_operations(cp: &ControlPlane) {
    let (a, b, c) = (
        model(cp, "a").await,
        model(cp, "b").await,
        model(cp, "c").await,
    );
    let pool = cp
        .ok(
            MGMT,
            "CreateLLMPool",
            cp.body(json!({"name": "p", "members": [{"connection_id": a}]})),
        )
        .await;
    let pid = pool["pool"]["pool_id"].as_str().unwrap().to_string();
    let p = cp.ok(MGMT, "UpdateLLMPool", cp.body(json!({"pool_id": pid, "strategy": "priority", "members": [{"connection_id": b}, {"connection_id": c, "priority": 2}]}))).await;
    let ids: Vec<&str> = p["pool"]["members"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["connection_id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, [b.as_str(), c.as_str()], "members are replaced whole");
    assert_eq!(p["pool"]["strategy"], "priority");
    let p = cp
        .ok(
            MGMT,
            "UpdateLLMPool",
            cp.body(json!({"pool_id": pid, "name": "renamed"})),
        )
        .await;
    assert_eq!(
        p["pool"]["members"].as_array().unwrap().len(),
        2,
        "omitted members keep their value"
    );
    assert_eq!(p["pool"]["strategy"], "priority");

    let p = cp
        .ok(
            MGMT,
            "AddLLMPoolMember",
            cp.body(json!({"pool_id": pid, "connection_id": a, "weight": 5})),
        )
        .await;
    assert_eq!(
        p["pool"]["members"][2],
        json!({"connection_id": a, "name": "a", "weight": 5, "priority": 0})
    );
    cp.call(
        MGMT,
        "AddLLMPoolMember",
        cp.body(json!({"pool_id": pid, "connection_id": a})),
    )
    .await
    .expect_error("already_exists", 409);
    let p = cp
        .ok(
            MGMT,
            "RemoveLLMPoolMember",
            cp.body(json!({"pool_id": pid, "connection_id": b})),
        )
        .await;
    assert_eq!(p["pool"]["members"].as_array().unwrap().len(), 2);
    cp.call(
        MGMT,
        "RemoveLLMPoolMember",
        cp.body(json!({"pool_id": pid, "connection_id": b})),
    )
    .await
    .expect_error("not_found", 404);
    cp.call(
        MGMT,
        "GetLLMPool",
        cp.body(json!({"pool_id": "not-a-uuid"})),
    )
    .await
    .expect_error("invalid_argument", 400)
    .mentions("pool_id");
}

async fn delete_detaches_from_gateways(cp: &ControlPlane) {
    let a = model(cp, "a").await;
    let pool = cp
        .ok(
            MGMT,
            "CreateLLMPool",
            cp.body(json!({"name": "p", "members": [{"connection_id": a}]})),
        )
        .await;
    let pid = pool["pool"]["pool_id"].as_str().unwrap().to_string();
    cp.ok(
        MGMT,
        "AddGatewayPool",
        cp.body(json!({"gateway_id": cp.default_gateway_id, "pool_id": pid})),
    )
    .await;
    let got = cp
        .ok(MGMT, "GetLLMPool", cp.body(json!({"pool_id": pid})))
        .await;
    assert_eq!(
        got["pool"]["gateways"][0]["id"],
        cp.default_gateway_id.as_str()
    );
    cp.ok(MGMT, "DeleteLLMPool", cp.body(json!({"pool_id": pid})))
        .await;
    let gw = cp
        .ok(
            MGMT,
            "GetGateway",
            cp.body(json!({"gateway_id": cp.default_gateway_id})),
        )
        .await;
    assert_eq!(gw["gateway"]["members"], json!([]));
    cp.ok(
        MGMT,
        "GetLLMModelConnection",
        cp.body(json!({"connection_id": a})),
    )
    .await;
    cp.call(MGMT, "DeleteLLMPool", cp.body(json!({"pool_id": pid})))
        .await
        .expect_error("not_found", 404);
}
