//! Rule bundles: validation against the schema, scopes, replacement, managed bundles.

use portcullis_tests::controlplane::{AGENTS, MGMT, RULES};
use portcullis_tests::{on_both_backends, ControlPlane};
use serde_json::{json, Value};

use crate::agents::register;

const VALID: &str = r#"
@id("no-mcp-at-night")
forbid (principal, action == Svc::Action::"mcp:call", resource) when { context.surface == "mcp" };
permit (principal, action == Svc::Action::"llm:invoke", resource == Svc::Pool::"shared");
"#;

async fn admin_bundles(cp: &ControlPlane) -> Vec<Value> {
    cp.ok(RULES, "ListRuleBundles", cp.body(json!({}))).await["bundles"]
        .as_array()
        .unwrap()
        .clone()
}

on_both_backends!(
    deploy_validates_and_ids_policies,
    scopes_and_replacement,
    managed_bundles_follow_agents
);

async fn deploy_validates_and_ids_policies(cp: &ControlPlane) {
    let b = cp
        .ok(
            RULES,
            "DeployRuleBundle",
            cp.body(json!({"policies": VALID})),
        )
        .await["bundle"]
        .clone();
    let id = b["bundle_id"].as_str().unwrap();
    assert_eq!(b["scope"], "workspace");
    assert_eq!(
        b["policy_ids"],
        json!([
            format!("bundle/{id}/no-mcp-at-night"),
            format!("bundle/{id}/1")
        ])
    );

    invalid_policies_are_refused_and_never_stored(cp).await;

    cp.ok(RULES, "DeleteRuleBundle", cp.body(json!({"bundle_id": id})))
        .await;
    assert!(admin_bundles(cp).await.is_empty());
    cp.call(RULES, "DeleteRuleBundle", cp.body(json!({"bundle_id": id})))
        .await
        .expect_error("not_found", 404);
    cp.call(
        RULES,
        "DeleteRuleBundle",
        cp.body(json!({"bundle_id": "managed-gateways"})),
    )
    .await
    .expect_error("failed_precondition", 400);
}

async fn invalid_policies_are_refused_and_never_stored(cp: &ControlPlane) {
    let unknown_type = r#"permit (principal == Svc::User::"x", action, resource);"#;
    cp.call(
        RULES,
        "DeployRuleBundle",
        cp.body(json!({"policies": unknown_type})),
    )
    .await
    .expect_error("invalid_argument", 400)
    .mentions("Svc::User");
    let bad_attr = r#"permit (principal, action, resource) when { context.nope == 1 };"#;
    cp.call(
        RULES,
        "DeployRuleBundle",
        cp.body(json!({"policies": bad_attr})),
    )
    .await
    .expect_error("invalid_argument", 400)
    .mentions("validate");
    cp.call(
        RULES,
        "DeployRuleBundle",
        cp.body(json!({"policies": "permit(principal"})),
    )
    .await
    .expect_error("invalid_argument", 400)
    .mentions("parse");
    cp.call(
        RULES,
        "DeployRuleBundle",
        cp.body(json!({"policies": "  "})),
    )
    .await
    .expect_error("invalid_argument", 400);
    // A few hundred bytes nested deeply enough to overflow a stack in Cedar's parser: refused,
    // and the control plane (with its embedded checks) keeps running.
    let nested = format!(
        "permit (principal, action, resource) when {{ {}true{} }};",
        "(".repeat(200),
        ")".repeat(200)
    );
    assert!(nested.len() < 500);
    cp.call(
        RULES,
        "DeployRuleBundle",
        cp.body(json!({"policies": nested})),
    )
    .await
    .expect_error("invalid_argument", 400)
    .mentions("nest");
    assert_eq!(
        admin_bundles(cp).await.len(),
        1,
        "refused bundles are never stored"
    );
}

async fn scopes_and_replacement(cp: &ControlPlane) {
    cp.call(
        RULES,
        "DeployRuleBundle",
        cp.body(json!({"policies": VALID, "scope": "gateway"})),
    )
    .await
    .expect_error("invalid_argument", 400)
    .mentions("scope_id");
    cp.call(
        RULES,
        "DeployRuleBundle",
        cp.body(json!({"policies": VALID, "scope_id": cp.default_gateway_id})),
    )
    .await
    .expect_error("invalid_argument", 400);
    cp.call(RULES, "DeployRuleBundle", cp.body(json!({"policies": VALID, "scope": "gateway", "scope_id": uuid::Uuid::new_v4().to_string()})))
        .await
        .expect_error("not_found", 404);
    let g = cp.ok(RULES, "DeployRuleBundle", cp.body(json!({"policies": VALID, "scope": "gateway", "scope_id": cp.default_gateway_id, "name": "night"}))).await;
    register(cp, json!({"name": "bot"})).await;
    let a = cp
        .ok(
            RULES,
            "DeployRuleBundle",
            cp.body(json!({"policies": VALID, "scope": "agent", "scope_id": "bot"})),
        )
        .await;
    assert_eq!(a["bundle"]["scope"], "agent");

    let replaced = cp
        .ok(RULES, "DeployRuleBundle", cp.body(json!({"policies": "permit (principal, action, resource);", "scope": "gateway", "scope_id": cp.default_gateway_id, "name": "night"})))
        .await;
    assert_eq!(
        replaced["bundle"]["bundle_id"], g["bundle"]["bundle_id"],
        "the same name in the same scope replaces and keeps the id"
    );
    assert_eq!(admin_bundles(cp).await.len(), 2);
    let only = cp
        .ok(
            RULES,
            "ListRuleBundles",
            cp.body(json!({"scope": "gateway"})),
        )
        .await;
    assert_eq!(only["bundles"].as_array().unwrap().len(), 1);
    assert!(only["bundles"][0]["policies"]
        .as_str()
        .unwrap()
        .contains("permit (principal, action, resource)"));

    let viewer = cp
        .ok(
            MGMT,
            "CreatePlatformKey",
            cp.body(json!({"name": "v", "role": "viewer"})),
        )
        .await;
    let token = viewer["token"].as_str().unwrap();
    assert_eq!(
        cp.call_as(token, RULES, "ListRuleBundles", cp.body(json!({})))
            .await
            .status,
        200
    );
    cp.call_as(
        token,
        RULES,
        "DeployRuleBundle",
        cp.body(json!({"policies": VALID})),
    )
    .await
    .expect_error("permission_denied", 403);
}

async fn managed_bundles_follow_agents(cp: &ControlPlane) {
    let a = register(cp, json!({"name": "bot", "allowed_pool_names": ["fast"], "allowed_direct_model_names": ["gpt"]})).await;
    let id = a["agent_id"].as_str().unwrap();
    let managed = |body: Value| {
        body["bundles"]
            .as_array()
            .unwrap()
            .iter()
            .find(|b| b["managed"] == true)
            .cloned()
    };
    let list = cp
        .ok(
            RULES,
            "ListRuleBundles",
            cp.body(json!({"include_managed": true})),
        )
        .await;
    let bundle = managed(list).expect("managed bundle");
    assert_eq!(
        bundle["policy_ids"],
        json!([
            format!("agent/{id}/pool/fast"),
            format!("agent/{id}/model/gpt")
        ])
    );
    assert!(
        managed(cp.ok(RULES, "ListRuleBundles", cp.body(json!({}))).await).is_none(),
        "managed bundles only on request"
    );

    cp.ok(AGENTS, "UpdateAgent", cp.body(json!({"agent_id": id, "allowed_pool_names": [], "allowed_tools": ["everything/echo"],
        "actas_method": "hmac", "actas_hmac_secret": "0123456789abcdef", "actas_allowed_groups": ["eng"]}))).await;
    let bundle = managed(
        cp.ok(
            RULES,
            "ListRuleBundles",
            cp.body(json!({"include_managed": true})),
        )
        .await,
    )
    .unwrap();
    assert_eq!(
        bundle["policy_ids"],
        json!([
            format!("agent/{id}/model/gpt"),
            format!("agent/{id}/tool/everything/echo"),
            format!("agent/{id}/actas")
        ])
    );
    assert!(bundle["policies"]
        .as_str()
        .unwrap()
        .contains(r#"context.act_as.groups.containsAny(["eng"])"#));
}
