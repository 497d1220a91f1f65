//! Tool connections: every rule of the spec's tool resource and operations, the catalog and its
//! statuses, and gateway tool memberships (the REST variant is `tools_rest`).

use portcullis_tests::controlplane::{MGMT, RULES, SYNC};
use portcullis_tests::{on_both_backends, Backend, ControlPlane};
use serde_json::{json, Value};

use crate::world::platform_key;

pub async fn create_tool(cp: &ControlPlane, fields: Value) -> Value {
    cp.ok(MGMT, "CreateMCPServerConnection", cp.body(fields))
        .await["tool"]
        .clone()
}

pub(crate) fn http(name: &str) -> Value {
    json!({"name": name, "protocol": "streamable-http", "protocol_config": {"url": "http://127.0.0.1:9/mcp"}})
}

pub(crate) fn tid(t: &Value) -> String {
    t["connection_id"].as_str().unwrap().to_string()
}

pub async fn deployment_token(cp: &ControlPlane) -> String {
    let d = cp.ok(MGMT, "CreateDeployment", cp.body(json!({"name": format!("d{}", uuid::Uuid::new_v4().simple()), "public_url": "http://gw.test"}))).await;
    d["token"].as_str().unwrap().to_string()
}

pub async fn report(cp: &ControlPlane, token: &str, connection_id: &str, tools: &[&str]) -> Value {
    let tools: Vec<Value> = tools.iter().map(|t| json!({"name": t, "description": format!("{t} does things"), "input_schema": {"type": "object"}})).collect();
    let reply = cp
        .call_as(
            token,
            SYNC,
            "ReportTools",
            json!({"connection_id": connection_id, "tools": tools}),
        )
        .await;
    assert_eq!(reply.status, 200, "{}", reply.text);
    reply.body
}

on_both_backends!(
    create_validates_protocols_headers_and_auth,
    update_follows_the_spec_rules,
    delete_detaches_and_forgets,
    sync_and_oauth_preconditions,
    catalog_statuses_and_managed_forbids,
    gateway_tool_memberships_reach_the_snapshot,
);

async fn create_validates_protocols_headers_and_auth(cp: &ControlPlane) {
    creates_keep_headers_and_default_auth(cp).await;
    refuses_invalid_creates_and_stores_nothing(cp).await;
    a_strict_control_plane_refuses_stdio(cp).await;
    let _ = Backend::Sqlite;
}

async fn creates_keep_headers_and_default_auth(cp: &ControlPlane) {
    let t = create_tool(
        cp,
        json!({"name": "everything", "protocol": "streamable-http",
        "protocol_config": {"url": "http://127.0.0.1:3001/mcp", "headers": [
            {"name": "X-Team", "source": "literal", "value": "blue"},
            {"name": "X-Api-Key", "source": "secret", "value": "key"},
            {"name": "X-Act-As", "source": "actas"}]},
        "secret_values": {"key": "tool-secret-9f8e7d"}}),
    )
    .await;
    assert_eq!(
        (t["auth_method"].as_str(), t["credential_type"].as_str()),
        (Some("api-key"), Some("shared"))
    );
    assert_eq!(t["secret_keys"], json!(["key"]));
    assert!(!t.to_string().contains("tool-secret-9f8e7d"));
    let stdio = create_tool(cp, json!({"name": "local", "protocol": "stdio", "auth_method": "none",
        "protocol_config": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-everything"], "env": {"LOG": "1"}}})).await;
    assert_eq!(stdio["protocol_config"]["command"], "npx");
    let defaults = [
        (json!({"auth_method": "none"}), ("none", "none")),
        (json!({"auth_method": "oauth"}), ("oauth", "per-user")),
    ];
    for (i, (extra, (m, c))) in defaults.into_iter().enumerate() {
        let mut body = http(&format!("d{i}"));
        body.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        let t = create_tool(cp, body).await;
        assert_eq!(
            (t["auth_method"].as_str(), t["credential_type"].as_str()),
            (Some(m), Some(c))
        );
    }
}

async fn refuses_invalid_creates_and_stores_nothing(cp: &ControlPlane) {
    let cases = [
        (json!({"name": "r", "protocol": "rest"}), "catalog"),
        (json!({"name": "x", "protocol": "grpc"}), "unknown"),
        (
            json!({"name": "bad name", "protocol": "streamable-http", "protocol_config": {"url": "http://x"}}),
            "letters, digits",
        ),
        (
            json!({"name": "x", "protocol": "streamable-http"}),
            "url is required",
        ),
        (
            json!({"name": "x", "protocol": "stdio", "protocol_config": {"args": []}}),
            "command is required",
        ),
        (
            json!({"name": "x", "protocol": "stdio", "auth_method": "oauth", "protocol_config": {"command": "c"}}),
            "oauth requires protocol streamable-http",
        ),
        (
            json!({"name": "x", "protocol": "stdio", "protocol_config": {"command": "c", "headers": []}}),
            "only streamable-http tools carry headers",
        ),
        (
            json!({"name": "x", "protocol": "streamable-http", "auth_method": "none", "credential_type": "shared", "protocol_config": {"url": "http://x"}}),
            "none accepts only",
        ),
        (
            json!({"name": "x", "protocol": "streamable-http", "auth_method": "oauth", "protocol_config": {"url": "http://x", "headers": [{"name": "A", "source": "actas"}]}}),
            "actas header is invalid on an oauth tool",
        ),
        (
            json!({"name": "x", "protocol": "streamable-http", "protocol_config": {"url": "http://x", "headers": [{"name": "A", "source": "secret", "value": "missing"}]}}),
            "not among the connection's secret_values",
        ),
        (
            json!({"name": "x", "protocol": "streamable-http", "protocol_config": {"url": "http://x", "headers": [{"name": "A", "source": "literal"}]}}),
            "value is required",
        ),
        (
            json!({"name": "x", "protocol": "streamable-http", "protocol_config": {"url": "http://x", "extra": 1}}),
            "unknown field `extra`",
        ),
    ];
    for (body, needle) in cases {
        cp.call(MGMT, "CreateMCPServerConnection", cp.body(body.clone()))
            .await
            .expect_error_any(&["invalid_argument"])
            .mentions(needle);
    }
    cp.call(
        MGMT,
        "CreateMCPServerConnection",
        cp.body(http("everything")),
    )
    .await
    .expect_error("already_exists", 409);
    let list = cp
        .ok(MGMT, "ListMCPServerConnections", cp.body(json!({})))
        .await;
    assert_eq!(
        list["tools"].as_array().unwrap().len(),
        4,
        "refused creates store nothing"
    );
}

async fn a_strict_control_plane_refuses_stdio(cp: &ControlPlane) {
    let strict =
        ControlPlane::start_with(cp.backend, &[("PORTCULLIS_ALLOW_STDIO_TOOLS", "false")]).await;
    strict
        .call(
            MGMT,
            "CreateMCPServerConnection",
            strict.body(
                json!({"name": "local", "protocol": "stdio", "protocol_config": {"command": "c"}}),
            ),
        )
        .await
        .expect_error("failed_precondition", 400)
        .mentions("does not allow stdio");
}

async fn update_follows_the_spec_rules(cp: &ControlPlane) {
    let id = updates_overwrite_config_and_keep_auth(cp).await;
    credentials_never_follow_to_another_origin(cp, &id).await;
    omissions_and_auth_switches_clear_what_they_replace(cp, &id).await;
    refuses_invalid_updates(cp, &id).await;
}

/// Creates `t` and updates it keeping its auth: its id.
async fn updates_overwrite_config_and_keep_auth(cp: &ControlPlane) -> String {
    let t = create_tool(cp, json!({"name": "t", "protocol": "streamable-http",
        "protocol_config": {"url": "http://127.0.0.1:1/mcp", "headers": [{"name": "X-A", "source": "literal", "value": "1"}, {"name": "X-K", "source": "secret", "value": "k"}]},
        "secret_values": {"k": "secret-value-1"}, "field_classifications": {"ssn": "pii"}, "write_tools": ["delete_all"]})).await;
    let id = tid(&t);
    // Empty auth fields and name keep theirs; protocol_config, classifications and write_tools are overwritten.
    let u = cp.ok(MGMT, "UpdateMCPServerConnection", cp.body(json!({"connection_id": id, "protocol": "streamable-http", "auth_method": "", "credential_type": "", "name": "",
        "protocol_config": {"url": "http://127.0.0.1:1/v2/mcp", "headers": [{"name": "X-B", "source": "literal", "value": "2"}]}}))).await["tool"].clone();
    assert_eq!(u["name"], "t");
    assert_eq!(
        u["protocol_config"]["headers"],
        json!([{"name": "X-B", "source": "literal", "value": "2"}]),
        "the header list is replaced whole"
    );
    assert_eq!(
        (u["field_classifications"].clone(), u["write_tools"].clone()),
        (Value::Null, json!([])),
        "omitted values are overwritten"
    );
    assert_eq!(
        u["has_credential"], true,
        "the credential stays while auth and origin do not change"
    );
    id
}

async fn credentials_never_follow_to_another_origin(cp: &ControlPlane, id: &str) {
    // Credentials given for one server never follow the connection to another (L4).
    cp.call(
        MGMT,
        "UpdateMCPServerConnection",
        cp.body(json!({"connection_id": id,
        "protocol_config": {"url": "https://collector.example/mcp"}})),
    )
    .await
    .expect_error("invalid_argument", 400)
    .mentions("secret_values again");
    let moved = cp.ok(MGMT, "UpdateMCPServerConnection", cp.body(json!({"connection_id": id,
        "protocol_config": {"url": "https://collector.example/mcp"}, "secret_values": {"k2": "secret-value-2"}}))).await["tool"].clone();
    assert_eq!(
        moved["secret_keys"],
        json!(["k2"]),
        "only what was sent for the new origin"
    );
    let back = cp.ok(MGMT, "UpdateMCPServerConnection", cp.body(json!({"connection_id": id,
        "protocol_config": {"url": "http://127.0.0.1:1/mcp"}, "secret_values": {"k": "secret-value-1"}}))).await["tool"].clone();
    assert_eq!(back["has_credential"], true);
}

async fn omissions_and_auth_switches_clear_what_they_replace(cp: &ControlPlane, id: &str) {
    let u = cp
        .ok(
            MGMT,
            "UpdateMCPServerConnection",
            cp.body(json!({"connection_id": id, "protocol": "streamable-http"})),
        )
        .await["tool"]
        .clone();
    assert_eq!(
        u["protocol_config"],
        json!({"url": "", "headers": []}),
        "omitting protocol_config clears the URL and headers"
    );
    let u = cp.ok(MGMT, "UpdateMCPServerConnection", cp.body(json!({"connection_id": id, "auth_method": "none", "protocol_config": {"url": "http://127.0.0.1:2/mcp"}}))).await["tool"].clone();
    assert_eq!(
        (u["auth_method"].as_str(), u["has_credential"].as_bool()),
        (Some("none"), Some(false)),
        "switching auth clears the credential"
    );
    assert!(cp
        .db_strings("SELECT owner_id FROM credentials WHERE owner_id = $1", id)
        .await
        .is_empty());
    let u = cp.ok(MGMT, "UpdateMCPServerConnection", cp.body(json!({"connection_id": id, "auth_method": "oauth", "protocol_config": {"url": "http://127.0.0.1:2/mcp"},
        "auth_config": {"token_url": "https://idp.example.com/token", "client_id": "c", "client_secret": "client-secret-77"}}))).await["tool"].clone();
    assert_eq!(u["auth_config"]["client_secret_set"], true);
    assert!(!u.to_string().contains("client-secret-77"));
    let u = cp.ok(MGMT, "UpdateMCPServerConnection", cp.body(json!({"connection_id": id, "protocol_config": {"url": "http://127.0.0.1:2/mcp"}, "auth_config": {}}))).await["tool"].clone();
    assert_eq!(
        u["auth_config"]["client_id"], "c",
        "an empty auth_config keeps the stored one"
    );
}

async fn refuses_invalid_updates(cp: &ControlPlane, id: &str) {
    cp.call(MGMT, "UpdateMCPServerConnection", cp.body(json!({"connection_id": id, "protocol_config": {"url": "http://x", "headers": [{"name": "A", "source": "actas"}]}})))
        .await
        .expect_error("invalid_argument", 400)
        .mentions("actas header is invalid on an oauth tool");
    cp.call(
        MGMT,
        "UpdateMCPServerConnection",
        cp.body(
            json!({"connection_id": id, "protocol": "stdio", "protocol_config": {"command": "c"}}),
        ),
    )
    .await
    .expect_error("invalid_argument", 400)
    .mentions("oauth requires protocol streamable-http");
    create_tool(cp, http("other")).await;
    cp.call(
        MGMT,
        "UpdateMCPServerConnection",
        cp.body(
            json!({"connection_id": id, "name": "other", "protocol_config": {"url": "http://x"}}),
        ),
    )
    .await
    .expect_error("already_exists", 409);
}

async fn delete_detaches_and_forgets(cp: &ControlPlane) {
    let t = create_tool(cp, json!({"name": "t", "protocol": "streamable-http", "protocol_config": {"url": "http://127.0.0.1:1/mcp"}, "secret_values": {"Authorization": "Bearer tool-key-123"}})).await;
    let id = tid(&t);
    cp.ok(
        MGMT,
        "AddGatewayToolSource",
        cp.body(json!({"gateway_id": cp.default_gateway_id, "connection_id": id})),
    )
    .await;
    cp.ok(
        MGMT,
        "BlockTool",
        cp.body(json!({"connection_id": id, "tool": "x"})),
    )
    .await;
    cp.ok(
        MGMT,
        "DeleteMCPServerConnection",
        cp.body(json!({"connection_id": id})),
    )
    .await;
    let gw = cp
        .ok(
            MGMT,
            "GetGateway",
            cp.body(json!({"gateway_id": cp.default_gateway_id})),
        )
        .await;
    assert_eq!(gw["gateway"]["members"], json!([]));
    assert!(cp
        .db_strings("SELECT owner_id FROM credentials WHERE owner_id = $1", &id)
        .await
        .is_empty());
    assert!(cp
        .db_strings(
            "SELECT tool FROM tool_catalog WHERE connection_id = $1",
            &id
        )
        .await
        .is_empty());
    cp.call(
        MGMT,
        "GetMCPServerConnection",
        cp.body(json!({"connection_id": id})),
    )
    .await
    .expect_error("not_found", 404);
}

async fn sync_and_oauth_preconditions(cp: &ControlPlane) {
    let shared = create_tool(cp, http("shared")).await;
    cp.call(
        MGMT,
        "SyncMCPServerConnectionTools",
        cp.body(json!({"connection_id": tid(&shared)})),
    )
    .await
    .expect_error("failed_precondition", 400)
    .mentions("shared tools are synced by the gateways");
    let mut body = http("mine");
    body["credential_type"] = json!("per-user");
    let per_user = create_tool(cp, body).await;
    cp.call(
        MGMT,
        "SyncMCPServerConnectionTools",
        cp.body(json!({"connection_id": tid(&per_user), "act_as_sub": "admin@corp.com"})),
    )
    .await
    .expect_error("failed_precondition", 400)
    .mentions("no credential is stored for subject 'admin@corp.com'");
    for op in ["BeginMCPServerOAuthConnect", "DisconnectMCPServerOAuth"] {
        cp.call(MGMT, op, cp.body(json!({"connection_id": tid(&shared)})))
            .await
            .expect_error("failed_precondition", 400)
            .mentions("auth_method=oauth");
    }
}

async fn catalog_statuses_and_managed_forbids(cp: &ControlPlane) {
    let t = create_tool(cp, http("everything")).await;
    let id = tid(&t);
    let token = deployment_token(cp).await;
    an_operation_blocked_in_advance_stays_hidden(cp, &id, &token).await;

    // Seeing an operation again keeps its status.
    seeing_an_operation_again_keeps_its_status(cp, &id, &token).await;

    restoring_every_operation_drops_the_managed_forbid(cp, &id).await;

    viewers_cannot_block_and_keys_cannot_report(cp, &id).await;
}

async fn an_operation_blocked_in_advance_stays_hidden(cp: &ControlPlane, id: &str, token: &str) {
    cp.ok(
        MGMT,
        "BlockTool",
        cp.body(json!({"connection_id": id, "tool": "echo", "message": "leaks data"})),
    )
    .await;
    let added = report(cp, token, id, &["echo", "add", "longRunning"]).await;
    assert_eq!(
        added["added"], 2,
        "echo was already in the catalog (blocked in advance)"
    );
    let names = |v: &Value| -> Vec<String> {
        v["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["name"].as_str().unwrap().to_string())
            .collect()
    };
    let listed = cp
        .ok(
            MGMT,
            "ListConnectionTools",
            cp.body(json!({"connection_id": id})),
        )
        .await;
    assert_eq!(
        names(&listed),
        ["add", "longRunning"],
        "blocked operations are hidden unless asked for"
    );
    assert!(listed["tools"][0].get("input_schema").is_none());
    let all = cp
        .ok(
            MGMT,
            "ListConnectionTools",
            cp.body(json!({"connection_id": id, "include_blocked": true, "with_schema": true})),
        )
        .await;
    let echo = all["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "echo")
        .unwrap()
        .clone();
    assert_eq!(
        (
            echo["status"].as_str(),
            echo["message"].as_str(),
            echo["discovered"].as_bool()
        ),
        (Some("blocked"), Some("leaks data"), Some(true))
    );
    assert_eq!(echo["input_schema"], json!({"type": "object"}));
}

async fn seeing_an_operation_again_keeps_its_status(cp: &ControlPlane, id: &str, token: &str) {
    cp.ok(
        MGMT,
        "DeprecateTool",
        cp.body(json!({"connection_id": id, "tool": "add", "message": "use sum"})),
    )
    .await;
    report(cp, token, id, &["echo", "add", "longRunning"]).await;
    let all = cp
        .ok(
            MGMT,
            "ListConnectionTools",
            cp.body(json!({"connection_id": id, "include_blocked": true})),
        )
        .await;
    let statuses: Vec<(String, String)> = all["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            (
                t["name"].as_str().unwrap().into(),
                t["status"].as_str().unwrap().into(),
            )
        })
        .collect();
    assert_eq!(
        statuses,
        [
            ("add".into(), "deprecated".into()),
            ("echo".into(), "blocked".into()),
            ("longRunning".into(), "active".into())
        ]
    );
}

async fn restoring_every_operation_drops_the_managed_forbid(cp: &ControlPlane, id: &str) {
    let managed = |v: Value| {
        v["bundles"]
            .as_array()
            .unwrap()
            .iter()
            .find(|b| b["bundle_id"] == "managed-blocked-tools")
            .cloned()
    };
    let bundle = managed(
        cp.ok(
            RULES,
            "ListRuleBundles",
            cp.body(json!({"include_managed": true})),
        )
        .await,
    )
    .expect("a managed forbid while blocked");
    assert_eq!(bundle["policy_ids"], json!(["blocked/everything/echo"]));
    cp.ok(
        MGMT,
        "RestoreTool",
        cp.body(json!({"connection_id": id, "tool": "echo"})),
    )
    .await;
    cp.ok(
        MGMT,
        "RestoreTool",
        cp.body(json!({"connection_id": id, "tool": "add"})),
    )
    .await;
    assert!(
        managed(
            cp.ok(
                RULES,
                "ListRuleBundles",
                cp.body(json!({"include_managed": true}))
            )
            .await
        )
        .is_none(),
        "no blocked operations, no managed forbids"
    );
    let listed = cp
        .ok(
            MGMT,
            "ListConnectionTools",
            cp.body(json!({"connection_id": id})),
        )
        .await;
    assert!(listed["tools"]
        .as_array()
        .unwrap()
        .iter()
        .all(|t| t["status"] == "active"));
}

async fn viewers_cannot_block_and_keys_cannot_report(cp: &ControlPlane, id: &str) {
    let viewer = platform_key(cp, "v", "viewer").await;
    cp.call_as(
        &viewer,
        MGMT,
        "BlockTool",
        cp.body(json!({"connection_id": id, "tool": "echo"})),
    )
    .await
    .expect_error("permission_denied", 403);
    cp.call_as(
        &cp.key,
        SYNC,
        "ReportTools",
        json!({"connection_id": id, "tools": []}),
    )
    .await
    .expect_error("unauthenticated", 401);
}

async fn gateway_tool_memberships_reach_the_snapshot(cp: &ControlPlane) {
    let t = create_tool(cp, json!({"name": "everything", "protocol": "streamable-http", "protocol_config": {"url": "http://127.0.0.1:1/mcp"}, "secret_values": {"Authorization": "Bearer tk-1234567"}})).await;
    let id = tid(&t);
    let gw = cp.default_gateway_id.clone();
    let token = discovered_tools_and_sources_join_a_gateway_once(cp, &gw, &id).await;
    the_snapshot_carries_sources_tools_and_the_catalog(cp, &token, &id).await;
    members_are_removed_one_tool_or_the_whole_source(cp, &gw, &id).await;
}

/// Adds operation `echo` and the whole source `id` to gateway `gw`: the deployment token that
/// reported the operations.
async fn discovered_tools_and_sources_join_a_gateway_once(
    cp: &ControlPlane,
    gw: &str,
    id: &str,
) -> String {
    cp.call(
        MGMT,
        "AddGatewayTool",
        cp.body(json!({"gateway_id": gw, "connection_id": id, "tool": "echo"})),
    )
    .await
    .expect_error("not_found", 404)
    .mentions("no discovered operation");
    let token = deployment_token(cp).await;
    report(cp, &token, id, &["echo", "add"]).await;
    cp.ok(
        MGMT,
        "AddGatewayTool",
        cp.body(json!({"gateway_id": gw, "connection_id": id, "tool": "echo"})),
    )
    .await;
    cp.call(
        MGMT,
        "AddGatewayTool",
        cp.body(json!({"gateway_id": gw, "connection_id": id, "tool": "echo"})),
    )
    .await
    .expect_error("already_exists", 409);
    let g = cp
        .ok(
            MGMT,
            "AddGatewayToolSource",
            cp.body(json!({"gateway_id": gw, "connection_id": id})),
        )
        .await;
    assert_eq!(
        g["gateway"]["members"],
        json!([
            {"kind": "tool", "connection_id": id, "tool": "echo", "name": "everything"},
            {"kind": "tool_source", "connection_id": id, "name": "everything"},
        ])
    );
    token
}

async fn the_snapshot_carries_sources_tools_and_the_catalog(
    cp: &ControlPlane,
    token: &str,
    id: &str,
) {
    cp.ok(
        MGMT,
        "BlockTool",
        cp.body(json!({"connection_id": id, "tool": "add"})),
    )
    .await;
    let snap = cp.call_as(token, SYNC, "GetSnapshot", json!({})).await.body;
    let s = &snap["snapshot"];
    assert_eq!(s["gateways"][0]["tool_sources"], json!([id]));
    assert_eq!(
        s["gateways"][0]["tools"],
        json!([{"connection_id": id, "tool": "echo"}])
    );
    assert_eq!(
        s["tools"][0]["secret_values"],
        json!({"Authorization": "Bearer tk-1234567"})
    );
    assert_eq!(
        s["tools"][0]["catalog"],
        json!([
            {"name": "add", "status": "blocked", "message": null},
            {"name": "echo", "status": "active", "message": null},
        ])
    );
}

async fn members_are_removed_one_tool_or_the_whole_source(cp: &ControlPlane, gw: &str, id: &str) {
    let g = cp
        .ok(
            MGMT,
            "RemoveGatewayMember",
            cp.body(json!({"gateway_id": gw, "connection_id": id, "tool": "echo"})),
        )
        .await;
    assert_eq!(g["gateway"]["members"].as_array().unwrap().len(), 1);
    let g = cp
        .ok(
            MGMT,
            "RemoveGatewayMember",
            cp.body(json!({"gateway_id": gw, "connection_id": id})),
        )
        .await;
    assert_eq!(
        g["gateway"]["members"],
        json!([]),
        "a connection id alone removes the whole source"
    );
}
