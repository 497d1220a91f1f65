//! Agents: fields, validation, permissions and the status lifecycle.

use portcullis_tests::controlplane::{AGENTS, MGMT, RULES};
use portcullis_tests::{on_both_backends, ControlPlane};
use serde_json::{json, Value};

pub async fn register(cp: &ControlPlane, fields: Value) -> Value {
    cp.ok(AGENTS, "RegisterAgent", cp.body(fields)).await["agent"].clone()
}

fn aid(a: &Value) -> String {
    a["agent_id"].as_str().unwrap().to_string()
}

async fn status(cp: &ControlPlane, id: &str) -> String {
    cp.ok(AGENTS, "GetAgent", cp.body(json!({"agent_id": id})))
        .await["agent"]["status"]
        .as_str()
        .unwrap()
        .to_string()
}

on_both_backends!(
    register_every_field,
    token_ttl_range_and_reset,
    list_limit_offset_and_status,
    update_replaces_lists_and_keeps_omitted,
    validation_of_references_and_act_as,
    interactive_access_needs_an_exact_person,
    suspend_cascades_and_reactivate,
    revoke_is_permanent,
    delete_only_when_revoked,
    rules_deploy_permission,
);

async fn register_every_field(cp: &ControlPlane) {
    let parent = register(cp, json!({"name": "parent"})).await;
    let a = register(
        cp,
        json!({"name": "bot", "parent_id": aid(&parent), "metadata": {"team": "x", "n": 1}, "token_ttl": "15m",
               "allowed_pool_names": ["fast"], "allowed_direct_model_names": ["gpt"], "allowed_tools": ["everything/echo"],
               "allowed_gateway_ids": [cp.default_gateway_id], "actas_allowed_groups": ["eng"], "actas_allowed_emails": ["a@x.com"],
               "actas_allowed_subjects": ["u1"], "actas_method": "hmac", "actas_required": true, "actas_hmac_secret": "0123456789abcdef-secret",
               "actas_config_name": "corp", "interactive_access": true}),
    )
    .await;
    assert_eq!(a["status"], "provisioned", "registered, no key yet");
    assert_eq!(a["parent_id"], aid(&parent).as_str());
    assert_eq!(a["metadata"], json!({"team": "x", "n": 1}));
    assert_eq!(a["token_ttl"], "15m");
    assert_eq!(a["allowed_pool_names"], json!(["fast"]));
    assert_eq!(a["allowed_direct_model_names"], json!(["gpt"]));
    assert_eq!(a["allowed_tools"], json!(["everything/echo"]));
    assert_eq!(a["allowed_gateway_ids"], json!([cp.default_gateway_id]));
    assert_eq!(
        (
            a["actas_method"].as_str(),
            a["actas_required"].as_bool(),
            a["interactive_access"].as_bool()
        ),
        (Some("hmac"), Some(true), Some(true))
    );
    assert_eq!(a["actas_hmac_secret_set"], true);
    assert!(
        !a.to_string().contains("0123456789abcdef-secret"),
        "the HMAC secret is never returned"
    );
    let by_name = cp
        .ok(AGENTS, "GetAgent", cp.body(json!({"agent_id": "bot"})))
        .await;
    assert_eq!(
        by_name["agent"]["agent_id"], a["agent_id"],
        "agents are found by name too"
    );
    cp.call(AGENTS, "RegisterAgent", cp.body(json!({"name": "bot"})))
        .await
        .expect_error("already_exists", 409);
}

async fn token_ttl_range_and_reset(cp: &ControlPlane) {
    assert_eq!(
        register(cp, json!({"name": "d"})).await["token_ttl"],
        "10m",
        "default 10m"
    );
    for (ttl, reason) in [
        ("30s", "1m to 24h"),
        ("25h", "1m to 24h"),
        ("soon", "not a duration"),
    ] {
        cp.call(
            AGENTS,
            "RegisterAgent",
            cp.body(json!({"name": "x", "token_ttl": ttl})),
        )
        .await
        .expect_error("invalid_argument", 400)
        .mentions(reason);
    }
    let a = register(cp, json!({"name": "t", "token_ttl": "24h"})).await;
    assert_eq!(a["token_ttl"], "24h");
    let a = cp
        .ok(
            AGENTS,
            "UpdateAgent",
            cp.body(json!({"agent_id": aid(&a), "token_ttl": "1m"})),
        )
        .await;
    assert_eq!(a["agent"]["token_ttl"], "1m");
    let a = cp
        .ok(
            AGENTS,
            "UpdateAgent",
            cp.body(json!({"agent_id": "t", "token_ttl": ""})),
        )
        .await;
    assert_eq!(
        a["agent"]["token_ttl"], "10m",
        "an empty token_ttl resets to the default"
    );
}

async fn list_limit_offset_and_status(cp: &ControlPlane) {
    for i in 0..105 {
        register(cp, json!({"name": format!("a{i:03}")})).await;
    }
    let page = cp.ok(AGENTS, "ListAgents", cp.body(json!({}))).await;
    assert_eq!(
        page["agents"].as_array().unwrap().len(),
        100,
        "limit defaults to 100"
    );
    assert_eq!(page["total"], 105);
    let page = cp
        .ok(
            AGENTS,
            "ListAgents",
            cp.body(json!({"limit": 10, "offset": 100})),
        )
        .await;
    let names: Vec<&str> = page["agents"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["a100", "a101", "a102", "a103", "a104"]);
    cp.ok(AGENTS, "SuspendAgent", cp.body(json!({"agent_id": "a007"})))
        .await;
    let page = cp
        .ok(
            AGENTS,
            "ListAgents",
            cp.body(json!({"status": "suspended"})),
        )
        .await;
    assert_eq!(page["agents"][0]["name"], "a007");
    assert_eq!(page["total"], 1);
    cp.call(AGENTS, "ListAgents", cp.body(json!({"limit": 0})))
        .await
        .expect_error("invalid_argument", 400)
        .mentions("limit");
    cp.call(AGENTS, "ListAgents", cp.body(json!({"status": "sleeping"})))
        .await
        .expect_error("invalid_argument", 400)
        .mentions("status");
}

async fn update_replaces_lists_and_keeps_omitted(cp: &ControlPlane) {
    let a = register(cp, json!({"name": "bot", "metadata": {"k": "v"}, "allowed_pool_names": ["a", "b"], "allowed_tools": ["c/t"]})).await;
    let u = cp
        .ok(
            AGENTS,
            "UpdateAgent",
            cp.body(json!({"agent_id": aid(&a), "allowed_pool_names": ["c"]})),
        )
        .await["agent"]
        .clone();
    assert_eq!(
        u["allowed_pool_names"],
        json!(["c"]),
        "a list replaces the stored list"
    );
    assert_eq!(
        u["allowed_tools"],
        json!(["c/t"]),
        "omitted lists keep their value"
    );
    assert_eq!(u["metadata"], json!({"k": "v"}));
    let u = cp
        .ok(
            AGENTS,
            "UpdateAgent",
            cp.body(json!({"agent_id": aid(&a), "metadata": {"z": 1}, "allowed_tools": []})),
        )
        .await["agent"]
        .clone();
    assert_eq!(
        (u["metadata"].clone(), u["allowed_tools"].clone()),
        (json!({"z": 1}), json!([]))
    );
    cp.call(
        AGENTS,
        "UpdateAgent",
        cp.body(json!({"agent_id": aid(&a), "name": "x"})),
    )
    .await
    .expect_error("invalid_argument", 400)
    .mentions("unknown field `name`");
    cp.call(AGENTS, "UpdateAgent", cp.body(json!({"agent_id": "ghost"})))
        .await
        .expect_error("not_found", 404);
}

async fn validation_of_references_and_act_as(cp: &ControlPlane) {
    let cases = [
        (json!({"allowed_tools": ["no-slash"]}), "connection/tool"),
        (json!({"allowed_pool_names": [""]}), "allowed_pool_names[0]"),
        (
            json!({"allowed_gateway_ids": ["not-a-uuid"]}),
            "allowed_gateway_ids[0]",
        ),
        (json!({"actas_method": "kerberos"}), "actas_method"),
        (json!({"actas_method": "hmac"}), "actas_hmac_secret"),
        (
            json!({"actas_method": "hmac", "actas_hmac_secret": "short"}),
            "16 to 1024",
        ),
        (json!({"actas_method": "oidc"}), "actas_oidc_url"),
        (
            json!({"actas_method": "oidc", "actas_oidc_url": "http://idp.example.com"}),
            "https",
        ),
        (json!({"actas_required": true}), "actas_method"),
        (json!({"actas_allowed_emails": ["a@x.com"]}), "actas_method"),
        (
            json!({"parent_id": uuid::Uuid::new_v4().to_string()}),
            "not found",
        ),
    ];
    for (fields, reason) in cases {
        let mut body = cp.body(json!({"name": "x"}));
        body.as_object_mut()
            .unwrap()
            .extend(fields.as_object().unwrap().clone());
        let reply = cp.call(AGENTS, "RegisterAgent", body).await;
        assert!(
            reply.status == 400 || reply.status == 404,
            "{fields}: {}",
            reply.text
        );
        reply.mentions(reason);
    }
    cp.call(
        AGENTS,
        "RegisterAgent",
        cp.body(json!({"name": "x", "allowed_gateway_ids": [uuid::Uuid::new_v4().to_string()]})),
    )
    .await
    .expect_error("not_found", 404);
    let list = cp.ok(AGENTS, "ListAgents", cp.body(json!({}))).await;
    assert_eq!(list["total"], 0, "refused registrations store nothing");
    register(cp, json!({"name": "ok", "actas_method": "oidc", "actas_oidc_url": "https://idp.example.com/.well-known/openid-configuration"})).await;
    // A provider must exist, and verify the way the agent's method says.
    cp.call(
        AGENTS,
        "RegisterAgent",
        cp.body(json!({"name": "ok2", "actas_method": "hmac", "actas_provider_id": "corp-idp"})),
    )
    .await
    .expect_error("not_found", 404)
    .mentions("corp-idp");
    cp.ok(
        AGENTS,
        "CreateActAsProvider",
        cp.body(json!({"name": "corp-idp", "method": "hmac",
            "hmac_secret": "0123456789abcdef-corp"})),
    )
    .await;
    register(
        cp,
        json!({"name": "ok2", "actas_method": "hmac", "actas_provider_id": "corp-idp"}),
    )
    .await;
}

async fn interactive_access_needs_an_exact_person(cp: &ControlPlane) {
    let base = json!({"actas_method": "oidc", "actas_oidc_url": "https://idp.example.com"});
    for extra in [
        json!({"actas_allowed_groups": ["eng"]}),
        json!({"actas_allowed_emails": ["*@example.com"]}),
        json!({}),
    ] {
        let mut body = cp.body(json!({"name": "i", "interactive_access": true}));
        body.as_object_mut()
            .unwrap()
            .extend(base.as_object().unwrap().clone());
        body.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        cp.call(AGENTS, "RegisterAgent", body)
            .await
            .expect_error("invalid_argument", 400)
            .mentions("interactive_access");
    }
    let mut body = cp.body(
        json!({"name": "i", "interactive_access": true, "actas_allowed_subjects": ["user-1"]}),
    );
    body.as_object_mut()
        .unwrap()
        .extend(base.as_object().unwrap().clone());
    let a = cp.ok(AGENTS, "RegisterAgent", body).await;
    cp.call(
        AGENTS,
        "UpdateAgent",
        cp.body(json!({"agent_id": a["agent"]["agent_id"], "actas_allowed_subjects": []})),
    )
    .await
    .expect_error("invalid_argument", 400)
    .mentions("interactive_access");
}

async fn suspend_cascades_and_reactivate(cp: &ControlPlane) {
    let root = register(cp, json!({"name": "root"})).await;
    let child = register(cp, json!({"name": "child", "parent_id": aid(&root)})).await;
    let grandchild = register(cp, json!({"name": "grandchild", "parent_id": aid(&child)})).await;
    let other = register(cp, json!({"name": "other", "parent_id": aid(&root)})).await;

    let r = cp
        .ok(
            AGENTS,
            "SuspendAgent",
            cp.body(json!({"agent_id": aid(&child), "reason": "audit"})),
        )
        .await;
    assert_eq!(
        r["affected_agent_ids"],
        json!([aid(&child)]),
        "without cascade only the agent is suspended"
    );
    assert_eq!(r["agent"]["status_reason"], "audit");
    assert_eq!(status(cp, &aid(&grandchild)).await, "provisioned");
    cp.call(
        AGENTS,
        "SuspendAgent",
        cp.body(json!({"agent_id": aid(&child)})),
    )
    .await
    .expect_error("failed_precondition", 400);
    cp.ok(
        AGENTS,
        "ReactivateAgent",
        cp.body(json!({"agent_id": aid(&child)})),
    )
    .await;
    cp.call(
        AGENTS,
        "ReactivateAgent",
        cp.body(json!({"agent_id": aid(&child)})),
    )
    .await
    .expect_error("failed_precondition", 400);

    let r = cp
        .ok(
            AGENTS,
            "SuspendAgent",
            cp.body(json!({"agent_id": aid(&root), "cascade": true})),
        )
        .await;
    let mut affected: Vec<String> = r["affected_agent_ids"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap().to_string())
        .collect();
    affected.sort();
    let mut expected = vec![aid(&root), aid(&child), aid(&grandchild), aid(&other)];
    expected.sort();
    assert_eq!(affected, expected);
    for a in [&root, &child, &grandchild, &other] {
        assert_eq!(status(cp, &aid(a)).await, "suspended");
    }
    let r = cp
        .ok(
            AGENTS,
            "ReactivateAgent",
            cp.body(json!({"agent_id": aid(&root)})),
        )
        .await;
    assert_eq!(
        r["agent"]["status"], "provisioned",
        "back to what it was: no key was ever issued"
    );
    assert_eq!(
        status(cp, &aid(&child)).await,
        "suspended",
        "reactivation does not cascade"
    );
}

async fn revoke_is_permanent(cp: &ControlPlane) {
    let a = register(cp, json!({"name": "bot"})).await;
    cp.ok(
        AGENTS,
        "SuspendAgent",
        cp.body(json!({"agent_id": aid(&a)})),
    )
    .await;
    let r = cp
        .ok(
            AGENTS,
            "RevokeAgent",
            cp.body(json!({"agent_id": aid(&a), "reason": "compromised"})),
        )
        .await;
    assert_eq!(
        (
            r["agent"]["status"].as_str(),
            r["agent"]["status_reason"].as_str()
        ),
        (Some("revoked"), Some("compromised"))
    );
    cp.call(
        AGENTS,
        "ReactivateAgent",
        cp.body(json!({"agent_id": aid(&a)})),
    )
    .await
    .expect_error("failed_precondition", 400);
    cp.call(
        AGENTS,
        "SuspendAgent",
        cp.body(json!({"agent_id": aid(&a)})),
    )
    .await
    .expect_error("failed_precondition", 400);
    cp.call(
        AGENTS,
        "UpdateAgent",
        cp.body(json!({"agent_id": aid(&a), "metadata": {}})),
    )
    .await
    .expect_error("failed_precondition", 400);
    let again = cp
        .ok(AGENTS, "RevokeAgent", cp.body(json!({"agent_id": aid(&a)})))
        .await;
    assert_eq!(again["affected_agent_ids"], json!([]));
    assert_eq!(status(cp, &aid(&a)).await, "revoked");
}

async fn delete_only_when_revoked(cp: &ControlPlane) {
    let root = register(cp, json!({"name": "root"})).await;
    let child = register(cp, json!({"name": "child", "parent_id": aid(&root)})).await;
    let grandchild = register(cp, json!({"name": "grandchild", "parent_id": aid(&child)})).await;
    cp.ok(
        AGENTS,
        "CreateAgentKey",
        cp.body(json!({"agent_id": aid(&grandchild), "name": "k"})),
    )
    .await;
    cp.call(
        AGENTS,
        "DeleteAgent",
        cp.body(json!({"agent_id": aid(&root)})),
    )
    .await
    .expect_error("failed_precondition", 400)
    .mentions("revoke it");
    cp.ok(
        AGENTS,
        "RevokeAgent",
        cp.body(json!({"agent_id": aid(&root)})),
    )
    .await;
    cp.call(
        AGENTS,
        "DeleteAgent",
        cp.body(json!({"agent_id": aid(&root)})),
    )
    .await
    .expect_error("failed_precondition", 400)
    .mentions("cascade");
    assert_eq!(
        status(cp, &aid(&root)).await,
        "revoked",
        "a refused delete changes nothing"
    );
    let r = cp
        .ok(
            AGENTS,
            "DeleteAgent",
            cp.body(json!({"agent_id": aid(&root), "reason": "cleanup", "cascade": true})),
        )
        .await;
    assert_eq!(r["deleted_agent_ids"].as_array().unwrap().len(), 3);
    for a in [&root, &child, &grandchild] {
        cp.call(AGENTS, "GetAgent", cp.body(json!({"agent_id": aid(a)})))
            .await
            .expect_error("not_found", 404);
    }
    assert!(
        cp.db_strings(
            "SELECT id FROM agent_keys WHERE agent_id = $1",
            &aid(&grandchild)
        )
        .await
        .is_empty(),
        "keys are deleted with the agent"
    );
}

async fn rules_deploy_permission(cp: &ControlPlane) {
    let key = cp
        .ok(MGMT, "CreatePlatformKey", cp.body(json!({"name": "registrar", "role": "operator", "permissions": ["agents.register", "agents.view"]})))
        .await;
    let token = key["token"].as_str().unwrap();
    a_registrar_changes_agents_but_not_their_rules(cp, token).await;
    // How act-as identities are verified decides whom allow lists admit: also rules.deploy.
    act_as_verification_needs_rules_deploy_but_a_rename_does_not(cp, token).await;
    a_registrar_cannot_suspend_grant_or_read_rules(cp, token).await;
}

async fn a_registrar_changes_agents_but_not_their_rules(cp: &ControlPlane, token: &str) {
    let plain = cp
        .call_as(
            token,
            AGENTS,
            "RegisterAgent",
            cp.body(json!({"name": "plain", "metadata": {"a": 1}})),
        )
        .await;
    assert_eq!(plain.status, 200, "{}", plain.text);
    cp.call_as(
        token,
        AGENTS,
        "RegisterAgent",
        cp.body(json!({"name": "ruled", "allowed_pool_names": ["p"]})),
    )
    .await
    .expect_error("permission_denied", 403)
    .mentions("rules.deploy");
    cp.call_as(
        token,
        AGENTS,
        "UpdateAgent",
        cp.body(json!({"agent_id": "plain", "allowed_tools": ["c/t"]})),
    )
    .await
    .expect_error("permission_denied", 403)
    .mentions("rules.deploy");
    cp.call_as(
        token,
        AGENTS,
        "UpdateAgent",
        cp.body(json!({"agent_id": "plain", "metadata": {"b": 2}, "allowed_tools": []})),
    )
    .await;
    let got = cp
        .ok(AGENTS, "GetAgent", cp.body(json!({"agent_id": "plain"})))
        .await;
    assert_eq!(
        got["agent"]["metadata"],
        json!({"b": 2}),
        "an update that leaves the rules alone needs no rules.deploy"
    );
}

async fn act_as_verification_needs_rules_deploy_but_a_rename_does_not(
    cp: &ControlPlane,
    token: &str,
) {
    cp.call_as(
        token,
        AGENTS,
        "UpdateAgent",
        cp.body(json!({"agent_id": "plain", "actas_method": "none"})),
    )
    .await
    .expect_error("permission_denied", 403)
    .mentions("rules.deploy");
    cp.ok(
        AGENTS,
        "CreateActAsProvider",
        cp.body(json!({"name": "idp", "issuer": "https://idp.example", "audience": "a"})),
    )
    .await;
    cp.ok(
        AGENTS,
        "UpdateAgent",
        cp.body(json!({"agent_id": "plain", "actas_method": "oidc", "actas_provider_id": "idp"})),
    )
    .await;
    cp.call_as(
        token,
        AGENTS,
        "UpdateActAsProvider",
        cp.body(json!({"provider_id": "idp", "issuer": "https://evil.example"})),
    )
    .await
    .expect_error("permission_denied", 403)
    .mentions("rules.deploy");
    let renamed = cp
        .call_as(
            token,
            AGENTS,
            "UpdateActAsProvider",
            cp.body(json!({"provider_id": "idp", "name": "corp-idp"})),
        )
        .await;
    assert_eq!(
        renamed.status, 200,
        "a rename trusts no one new: {}",
        renamed.text
    );
}

async fn a_registrar_cannot_suspend_grant_or_read_rules(cp: &ControlPlane, token: &str) {
    cp.call_as(
        token,
        AGENTS,
        "SuspendAgent",
        cp.body(json!({"agent_id": "plain"})),
    )
    .await
    .expect_error("permission_denied", 403);
    cp.call_as(
        token,
        MGMT,
        "SetGatewayAllAgentsAccess",
        cp.body(json!({"gateway_id": cp.default_gateway_id, "granted": true})),
    )
    .await
    .expect_error("permission_denied", 403);
    let bundles = cp
        .call_as(token, RULES, "ListRuleBundles", cp.body(json!({})))
        .await;
    bundles
        .expect_error("permission_denied", 403)
        .mentions("gateway.view");
}
