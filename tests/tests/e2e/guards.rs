//! Guards as workspace resources (DESIGN §16) on the real control plane: each kind created and
//! checked with the gateway's own compiler, bad configs refused with the reason, scopes
//! resolved from names to ids and held to their stage, updates re-checked whole, `TestGuard`
//! on samples, who may do what, and the snapshot gateways get.

use portcullis_client::AdminClient;
use portcullis_shared::api::guards::{
    CreateGuardRequest, GuardAction, GuardKind, GuardScope, GuardStage, UpdateGuardRequest,
};
use portcullis_tests::controlplane::{AGENTS, MGMT, RULES, SYNC};
use portcullis_tests::{on_both_backends, Backend, ControlPlane, Reply};
use serde_json::{json, Value};

use crate::agents::register;
use crate::models::create_model;
use crate::tools::create_tool;

on_both_backends!(
    guards_are_checked_before_they_are_stored,
    scopes_resolve_names_to_ids_and_follow_the_stage,
    updates_are_checked_whole,
    test_guard_runs_the_stored_guard_on_a_sample,
    viewers_read_and_test_but_only_rules_deploy_changes,
    the_snapshot_carries_enabled_guards_with_ids
);

async fn create(cp: &ControlPlane, fields: Value) -> Value {
    cp.ok(RULES, "CreateGuard", cp.body(fields)).await["guard"].clone()
}

fn id(v: &Value, field: &str) -> String {
    v[field].as_str().unwrap().to_string()
}

/// A model `gpt`, a pool `fast` and a tool connection `docs`; their ids.
async fn resources(cp: &ControlPlane) -> (String, String, String) {
    let m = create_model(
        cp,
        json!({"name": "gpt", "provider": "openai", "provider_config": {"model": "gpt-4o"}}),
    )
    .await;
    let p = cp
        .ok(
            MGMT,
            "CreateLLMPool",
            cp.body(json!({"name": "fast", "members": [{"connection_id": m["connection_id"]}]})),
        )
        .await;
    let t = create_tool(
        cp,
        json!({"name": "docs", "protocol": "streamable-http",
            "protocol_config": {"url": "http://127.0.0.1:9/mcp"}}),
    )
    .await;
    (
        id(&m, "connection_id"),
        id(&p["pool"], "pool_id"),
        id(&t, "connection_id"),
    )
}

async fn guards_are_checked_before_they_are_stored(cp: &ControlPlane) {
    each_kind_is_stored_with_its_config(cp).await;
    bad_configs_are_refused_with_the_reason(cp).await;
    nothing_refused_was_stored(cp).await;
    a_guard_is_read_and_deleted_by_name_or_id(cp).await;
}

async fn each_kind_is_stored_with_its_config(cp: &ControlPlane) {
    let g = create(
        cp,
        json!({"name": "tickets", "stage": "llm_output", "kind": "regex", "action": "redact",
            "config": {"patterns": [r"TICKET-\d{4}"]}}),
    )
    .await;
    assert_eq!(g["stage"], "llm_output");
    assert_eq!(g["kind"], "regex");
    assert_eq!(g["action"], "redact");
    assert_eq!(g["enabled"], true, "enabled unless told otherwise");
    assert_eq!(g["config"], json!({"patterns": [r"TICKET-\d{4}"]}));
    assert!(g.get("scope").is_none(), "no scope: everywhere: {g}");
    assert!(uuid::Uuid::parse_str(g["guard_id"].as_str().unwrap()).is_ok());
    let g = create(
        cp,
        json!({"name": "codename", "stage": "llm_input", "kind": "keywords", "action": "block",
            "config": {"keywords": ["falcon"], "case_sensitive": true}}),
    )
    .await;
    assert_eq!(g["config"]["case_sensitive"], true);
    let g = create(
        cp,
        json!({"name": "pii", "stage": "tool_result", "kind": "pii", "action": "redact",
            "config": {"types": ["email", "iban"]}}),
    )
    .await;
    assert_eq!(g["config"]["types"], json!(["email", "iban"]));
    let g = create(
        cp,
        json!({"name": "keys", "stage": "tool_arguments", "kind": "secrets", "action": "block",
            "enabled": false}),
    )
    .await;
    assert_eq!(
        (&g["config"], &g["enabled"]),
        (&json!({}), &json!(false)),
        "a config left out is empty"
    );
}

async fn bad_configs_are_refused_with_the_reason(cp: &ControlPlane) {
    let refused = |name: &str, stage: &str, kind: &str, config: Value| {
        cp.call(
            RULES,
            "CreateGuard",
            cp.body(
                json!({"name": name, "stage": stage, "kind": kind, "action": "block",
                "config": config}),
            ),
        )
    };
    refused(
        "unbounded",
        "llm_output",
        "regex",
        json!({"patterns": [r"\d+"]}),
    )
    .await
    .expect_error("invalid_argument", 400)
    .mentions("config")
    .mentions("any length");
    refused(
        "broken",
        "llm_output",
        "regex",
        json!({"patterns": ["(unclosed"]}),
    )
    .await
    .expect_error("invalid_argument", 400)
    .mentions("does not compile");
    refused(
        "passport",
        "llm_output",
        "pii",
        json!({"types": ["passport"]}),
    )
    .await
    .expect_error("invalid_argument", 400)
    .mentions("config.types");
    refused("typo", "llm_output", "regex", json!({"pattern": ["x{2}"]}))
        .await
        .expect_error("invalid_argument", 400)
        .mentions("config.pattern ");
    refused("shapeless", "llm_output", "keywords", json!({}))
        .await
        .expect_error("invalid_argument", 400)
        .mentions("config.keywords");
    refused("where", "everywhere", "secrets", json!({}))
        .await
        .expect_error("invalid_argument", 400)
        .mentions("stage");
    cp.call(
        RULES,
        "CreateGuard",
        cp.body(json!({"name": "half", "kind": "secrets", "action": "block"})),
    )
    .await
    .expect_error("invalid_argument", 400)
    .mentions("stage is required");
    cp.call(
        RULES,
        "CreateGuard",
        cp.body(json!({"name": "half", "stage": "llm_output", "kind": "secrets"})),
    )
    .await
    .expect_error("invalid_argument", 400)
    .mentions("action is required");
    refused("tickets", "llm_output", "secrets", json!({}))
        .await
        .expect_error("already_exists", 409)
        .mentions("tickets");
    let uuid = uuid::Uuid::new_v4().to_string();
    refused(&uuid, "llm_output", "secrets", json!({}))
        .await
        .expect_error("invalid_argument", 400)
        .mentions("name");
}

async fn nothing_refused_was_stored(cp: &ControlPlane) {
    let names: Vec<String> = cp.ok(RULES, "ListGuards", cp.body(json!({}))).await["guards"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| id(g, "name"))
        .collect();
    assert_eq!(
        names,
        ["codename", "keys", "pii", "tickets"],
        "nothing refused was stored"
    );
    let tool_stage = cp
        .ok(
            RULES,
            "ListGuards",
            cp.body(json!({"stage": "tool_result"})),
        )
        .await;
    assert_eq!(tool_stage["guards"].as_array().unwrap().len(), 1);
    assert_eq!(tool_stage["guards"][0]["name"], "pii");
}

async fn a_guard_is_read_and_deleted_by_name_or_id(cp: &ControlPlane) {
    let got = cp
        .ok(RULES, "GetGuard", cp.body(json!({"guard_id": "codename"})))
        .await;
    let by_id = cp
        .ok(
            RULES,
            "GetGuard",
            cp.body(json!({"guard_id": got["guard"]["guard_id"]})),
        )
        .await;
    assert_eq!(got, by_id, "a guard is named by id or name");
    cp.ok(
        RULES,
        "DeleteGuard",
        cp.body(json!({"guard_id": "codename"})),
    )
    .await;
    cp.call(RULES, "GetGuard", cp.body(json!({"guard_id": "codename"})))
        .await
        .expect_error("not_found", 404)
        .mentions("codename");
    cp.call(
        RULES,
        "DeleteGuard",
        cp.body(json!({"guard_id": "codename"})),
    )
    .await
    .expect_error("not_found", 404);
}

async fn scopes_resolve_names_to_ids_and_follow_the_stage(cp: &ControlPlane) {
    let (model_id, pool_id, tool_id) = resources(cp).await;
    let g = create(
        cp,
        json!({"name": "scoped", "stage": "llm_output", "kind": "secrets", "action": "block",
            "scope": {"gateways": ["default"], "models": ["gpt", pool_id, "fast"]}}),
    )
    .await;
    assert_eq!(
        g["scope"],
        json!({"gateways": [cp.default_gateway_id], "models": [model_id, pool_id]}),
        "names become ids, each once"
    );
    let g = create(
        cp,
        json!({"name": "tool-scoped", "stage": "tool_result", "kind": "secrets",
            "action": "redact", "scope": {"tools": ["docs"]}}),
    )
    .await;
    assert_eq!(g["scope"], json!({"tools": [tool_id]}));
    let g = create(
        cp,
        json!({"name": "empty-scope", "stage": "tool_result", "kind": "secrets",
            "action": "redact", "scope": {}}),
    )
    .await;
    assert!(g.get("scope").is_none(), "scope {{}} is everywhere: {g}");

    let attempt = |stage: &str, scope: Value| {
        cp.call(
            RULES,
            "CreateGuard",
            cp.body(
                json!({"name": "x", "stage": stage, "kind": "secrets", "action": "block",
                "scope": scope}),
            ),
        )
    };
    attempt("llm_output", json!({"tools": ["docs"]}))
        .await
        .expect_error("invalid_argument", 400)
        .mentions("scope.tools");
    attempt("tool_arguments", json!({"models": ["gpt"]}))
        .await
        .expect_error("invalid_argument", 400)
        .mentions("scope.models");
    attempt("llm_output", json!({"gateways": ["nowhere"]}))
        .await
        .expect_error("not_found", 404)
        .mentions("scope.gateways[0]")
        .mentions("nowhere");
    attempt("llm_input", json!({"models": ["gpt", "docs"]}))
        .await
        .expect_error("not_found", 404)
        .mentions("scope.models[1]")
        .mentions("docs");
    attempt("tool_result", json!({"tools": ["gpt"]}))
        .await
        .expect_error("not_found", 404)
        .mentions("'gpt'");
    attempt("llm_output", json!({"agents": ["bot"]}))
        .await
        .expect_error("invalid_argument", 400)
        .mentions("agents");
}

async fn updates_are_checked_whole(cp: &ControlPlane) {
    let (model_id, _, tool_id) = resources(cp).await;
    let g = create(
        cp,
        json!({"name": "t", "stage": "llm_output", "kind": "regex", "action": "redact",
            "config": {"patterns": ["x{3}"]}, "scope": {"models": ["gpt"]}}),
    )
    .await;
    refused_updates_change_nothing(cp, &g).await;
    a_whole_update_changes_all_but_the_id_and_creation(cp, &g, &tool_id).await;
    an_empty_scope_is_everywhere_and_names_stay_unique(cp, &model_id).await;
}

/// `UpdateGuard` of guard `t` with these fields.
async fn update_guard_t(cp: &ControlPlane, fields: Value) -> Reply {
    let mut body = json!({"guard_id": "t"});
    body.as_object_mut()
        .unwrap()
        .extend(fields.as_object().unwrap().clone());
    cp.call(RULES, "UpdateGuard", cp.body(body)).await
}

async fn refused_updates_change_nothing(cp: &ControlPlane, g: &Value) {
    update_guard_t(cp, json!({"kind": "keywords"}))
        .await
        .expect_error("invalid_argument", 400)
        .mentions("config.patterns")
        .mentions("send a config");
    update_guard_t(cp, json!({"config": {"patterns": [".*"]}}))
        .await
        .expect_error("invalid_argument", 400)
        .mentions("any length");
    update_guard_t(cp, json!({"stage": "tool_result"}))
        .await
        .expect_error("invalid_argument", 400)
        .mentions("scope.models")
        .mentions("send a scope for the new stage");
    update_guard_t(
        cp,
        json!({"stage": "tool_result", "scope": {"models": ["gpt"]}}),
    )
    .await
    .expect_error("invalid_argument", 400)
    .mentions("scope.models");
    let unchanged = cp
        .ok(RULES, "GetGuard", cp.body(json!({"guard_id": "t"})))
        .await["guard"]
        .clone();
    assert_eq!(&unchanged, g, "refused updates change nothing");
}

async fn a_whole_update_changes_all_but_the_id_and_creation(
    cp: &ControlPlane,
    g: &Value,
    tool_id: &str,
) {
    let r = update_guard_t(
        cp,
        json!({"kind": "keywords", "config": {"keywords": ["falcon"]},
        "stage": "tool_result", "scope": {"tools": ["docs"]}, "action": "block",
        "enabled": false, "name": "t2"}),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text);
    let u = &r.body["guard"];
    assert_eq!(
        (
            &u["name"],
            &u["kind"],
            &u["stage"],
            &u["action"],
            &u["enabled"]
        ),
        (
            &json!("t2"),
            &json!("keywords"),
            &json!("tool_result"),
            &json!("block"),
            &json!(false)
        )
    );
    assert_eq!(u["scope"], json!({"tools": [tool_id]}));
    assert_eq!(u["guard_id"], g["guard_id"]);
    assert_eq!(u["created_at"], g["created_at"]);
}

async fn an_empty_scope_is_everywhere_and_names_stay_unique(cp: &ControlPlane, model_id: &str) {
    let r = cp
        .ok(
            RULES,
            "UpdateGuard",
            cp.body(json!({"guard_id": "t2", "scope": {}, "enabled": true})),
        )
        .await;
    assert!(r["guard"].get("scope").is_none(), "{r}");
    assert_eq!(r["guard"]["config"], json!({"keywords": ["falcon"]}));
    create(
        cp,
        json!({"name": "other", "stage": "llm_output", "kind": "secrets", "action": "block",
            "scope": {"models": [model_id]}}),
    )
    .await;
    cp.call(
        RULES,
        "UpdateGuard",
        cp.body(json!({"guard_id": "t2", "name": "other"})),
    )
    .await
    .expect_error("already_exists", 409);
    cp.call(
        RULES,
        "UpdateGuard",
        cp.body(json!({"guard_id": "missing", "enabled": true})),
    )
    .await
    .expect_error("not_found", 404);
}

async fn test_guard_runs_the_stored_guard_on_a_sample(cp: &ControlPlane) {
    a_disabled_pii_guard_can_be_tried(cp).await;
    a_keyword_guard_blocks_whole_words_only(cp).await;
    oversized_samples_and_unknown_guards_are_refused(cp).await;
}

async fn a_disabled_pii_guard_can_be_tried(cp: &ControlPlane) {
    create(
        cp,
        json!({"name": "pii", "stage": "llm_output", "kind": "pii", "action": "redact",
            "enabled": false}),
    )
    .await;
    let sample = "Write to bob@example.com or call 415-555-0134. Card 4111 1111 1111 1111.";
    let r = cp
        .ok(
            RULES,
            "TestGuard",
            cp.body(json!({"guard_id": "pii", "sample": sample})),
        )
        .await;
    assert_eq!(r["blocked"], false, "{r}");
    assert_eq!(
        r["output"],
        "Write to [REDACTED:email] or call [REDACTED:phone]. Card [REDACTED:card_number].",
        "a disabled guard can be tried before it is enabled"
    );
    let kinds: Vec<&str> = r["matches"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["email", "phone", "card_number"]);
    let first = &r["matches"][0];
    let (start, end) = (
        first["start"].as_u64().unwrap() as usize,
        first["end"].as_u64().unwrap() as usize,
    );
    assert_eq!(&sample[start..end], "bob@example.com");
    let r = cp
        .ok(
            RULES,
            "TestGuard",
            cp.body(json!({"guard_id": "pii", "sample": "Card 4111 1111 1111 1112 fails Luhn."})),
        )
        .await;
    assert_eq!(r["matches"], json!([]), "{r}");
}

async fn a_keyword_guard_blocks_whole_words_only(cp: &ControlPlane) {
    create(
        cp,
        json!({"name": "codename", "stage": "llm_output", "kind": "keywords", "action": "block",
            "config": {"keywords": ["falcon"]}}),
    )
    .await;
    let r = cp
        .ok(
            RULES,
            "TestGuard",
            cp.body(json!({"guard_id": "codename", "sample": "Project FALCON ships"})),
        )
        .await;
    assert_eq!(
        r,
        json!({"matches": [{"kind": "keyword", "start": 8, "end": 14}], "blocked": true,
            "output": ""})
    );
    let r = cp
        .ok(
            RULES,
            "TestGuard",
            cp.body(json!({"guard_id": "codename", "sample": "falconry is a hobby"})),
        )
        .await;
    assert_eq!(r["blocked"], false, "whole words only: {r}");
    assert_eq!(r["output"], "falconry is a hobby");
}

async fn oversized_samples_and_unknown_guards_are_refused(cp: &ControlPlane) {
    let big = "a".repeat(1024 * 1024 + 1);
    cp.call(
        RULES,
        "TestGuard",
        cp.body(json!({"guard_id": "codename", "sample": big})),
    )
    .await
    .expect_error("invalid_argument", 400)
    .mentions("sample");
    cp.call(
        RULES,
        "TestGuard",
        cp.body(json!({"guard_id": "nope", "sample": "x"})),
    )
    .await
    .expect_error("not_found", 404);
}

async fn viewers_read_and_test_but_only_rules_deploy_changes(cp: &ControlPlane) {
    create(
        cp,
        json!({"name": "keys", "stage": "llm_output", "kind": "secrets", "action": "block"}),
    )
    .await;
    let key = |name: &str, role: &str, permissions: Option<Value>| {
        let mut body = json!({"name": name, "role": role});
        if let Some(p) = permissions {
            body["permissions"] = p;
        }
        cp.ok(MGMT, "CreatePlatformKey", cp.body(body))
    };
    let viewer = id(&key("viewer", "viewer", None).await, "token");
    let manager = id(
        &key(
            "manager",
            "operator",
            Some(json!(["gateway.view", "gateway.manage"])),
        )
        .await,
        "token",
    );
    let new_guard = cp.body(
        json!({"name": "n", "stage": "llm_output", "kind": "secrets",
        "action": "block"}),
    );
    for who in [&viewer, &manager] {
        let r = cp
            .call_as(who, RULES, "ListGuards", cp.body(json!({})))
            .await;
        assert_eq!(r.status, 200, "{}", r.text);
        let r = cp
            .call_as(
                who,
                RULES,
                "TestGuard",
                cp.body(json!({"guard_id": "keys", "sample": "AKIAABCDEFGHIJKLMNOP"})),
            )
            .await;
        assert_eq!(r.body["blocked"], true, "{}", r.text);
        cp.call_as(who, RULES, "CreateGuard", new_guard.clone())
            .await
            .expect_error("permission_denied", 403)
            .mentions("rules.deploy");
        cp.call_as(
            who,
            RULES,
            "UpdateGuard",
            cp.body(json!({"guard_id": "keys", "enabled": false})),
        )
        .await
        .expect_error("permission_denied", 403);
        cp.call_as(
            who,
            RULES,
            "DeleteGuard",
            cp.body(json!({"guard_id": "keys"})),
        )
        .await
        .expect_error("permission_denied", 403);
    }
    register(cp, json!({"name": "bot"})).await;
    let agent_key = cp
        .ok(
            AGENTS,
            "CreateAgentKey",
            cp.body(json!({"agent_id": "bot", "name": "k"})),
        )
        .await["token"]
        .as_str()
        .unwrap()
        .to_string();
    cp.call_as(&agent_key, RULES, "CreateGuard", new_guard.clone())
        .await
        .expect_error("unauthenticated", 401);
    cp.call_as(&agent_key, RULES, "ListGuards", cp.body(json!({})))
        .await
        .expect_error("unauthenticated", 401);
}

async fn the_snapshot_carries_enabled_guards_with_ids(cp: &ControlPlane) {
    let (model_id, pool_id, tool_id) = resources(cp).await;
    let d = cp
        .ok(
            MGMT,
            "CreateDeployment",
            cp.body(json!({"name": "edge", "public_url": "http://127.0.0.1:7780"})),
        )
        .await;
    let token = id(&d, "token");
    let snapshot = || async {
        let r = cp.call_as(&token, SYNC, "GetSnapshot", json!({})).await;
        assert_eq!(r.status, 200, "{}", r.text);
        r.body
    };
    let before = snapshot().await;
    assert_eq!(before["snapshot"]["guards"], json!([]));
    let on = create(
        cp,
        json!({"name": "on", "stage": "llm_output", "kind": "regex", "action": "block",
            "config": {"patterns": ["x{3}"]},
            "scope": {"gateways": ["default"], "models": ["gpt", "fast"]}}),
    )
    .await;
    create(
        cp,
        json!({"name": "off", "stage": "llm_output", "kind": "secrets", "action": "block",
            "enabled": false}),
    )
    .await;
    let tools = create(
        cp,
        json!({"name": "tools", "stage": "tool_result", "kind": "pii", "action": "redact",
            "scope": {"tools": ["docs"]}}),
    )
    .await;
    let after = snapshot().await;
    assert!(
        after["revision"].as_u64() > before["revision"].as_u64(),
        "a guard write bumps the revision"
    );
    let guards = after["snapshot"]["guards"].as_array().unwrap();
    assert_eq!(guards.len(), 2, "only enabled guards: {guards:?}");
    assert_eq!(
        guards[0],
        json!({"guard_id": on["guard_id"], "name": "on", "stage": "llm_output", "kind": "regex",
            "action": "block", "config": {"patterns": ["x{3}"]},
            "gateway_ids": [cp.default_gateway_id], "model_ids": [model_id, pool_id],
            "tool_ids": []})
    );
    assert_eq!(guards[1]["guard_id"], tools["guard_id"]);
    assert_eq!(guards[1]["tool_ids"], json!([tool_id]));
    assert_eq!(guards[1]["gateway_ids"], json!([]));

    cp.ok(
        RULES,
        "UpdateGuard",
        cp.body(json!({"guard_id": "on", "enabled": false})),
    )
    .await;
    cp.ok(
        RULES,
        "UpdateGuard",
        cp.body(json!({"guard_id": "off", "enabled": true})),
    )
    .await;
    cp.ok(RULES, "DeleteGuard", cp.body(json!({"guard_id": "tools"})))
        .await;
    let last = snapshot().await;
    let names: Vec<&str> = last["snapshot"]["guards"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["off"]);
}

/// The SDK's guard methods, end to end.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_admin_client_manages_guards() {
    let cp = ControlPlane::start(Backend::Sqlite).await;
    let admin = AdminClient::new(&cp.url, &cp.key).unwrap();
    let ws = cp.workspace_id.as_str();
    let g = admin
        .create_guard(&CreateGuardRequest {
            workspace_id: ws.into(),
            name: "mail".into(),
            stage: Some(GuardStage::ToolResult),
            kind: Some(GuardKind::Pii),
            action: Some(GuardAction::Redact),
            config: json!({"types": ["email"]}),
            enabled: None,
            scope: Some(GuardScope {
                gateways: vec!["default".into()],
                ..Default::default()
            }),
        })
        .await
        .unwrap();
    assert!(g.enabled);
    assert_eq!(
        g.scope.as_ref().unwrap().gateways,
        std::slice::from_ref(&cp.default_gateway_id)
    );
    let g = admin
        .update_guard(&UpdateGuardRequest {
            workspace_id: ws.into(),
            guard_id: g.guard_id.clone(),
            action: Some(GuardAction::Block),
            scope: Some(GuardScope::default()),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!((g.action, g.scope.clone()), (GuardAction::Block, None));
    assert_eq!(admin.get_guard(ws, "mail").await.unwrap(), g);
    assert_eq!(
        admin
            .list_guards(ws, Some(GuardStage::ToolResult))
            .await
            .unwrap(),
        std::slice::from_ref(&g)
    );
    assert!(admin
        .list_guards(ws, Some(GuardStage::LlmOutput))
        .await
        .unwrap()
        .is_empty());
    let t = admin.test_guard(ws, "mail", "from a@b.io").await.unwrap();
    assert!(t.blocked && t.output.is_empty(), "{t:?}");
    assert_eq!((t.matches[0].start, t.matches[0].end), (5, 11));
    admin.delete_guard(ws, &g.guard_id).await.unwrap();
    let err = admin.get_guard(ws, "mail").await.unwrap_err();
    assert_eq!(err.code(), Some(portcullis_shared::Code::NotFound), "{err}");
}
