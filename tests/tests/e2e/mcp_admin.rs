//! The MCP admin server at `{base_url}/mcp`, driven by the official MCP Python SDK: it lists
//! the `svc_*` tools with their annotations, every family changes the workspace the way the
//! Connect API does (and reads give the Connect API's replies), a viewer key cannot manage,
//! and every change is audited as `mgmt.operation` with surface `mcp`.

use portcullis_tests::controlplane::{AGENTS, MGMT};
use portcullis_tests::{on_both_backends, python, ControlPlane};
use serde_json::{json, Value};

use crate::tools::{deployment_token, report};
use crate::world::platform_key;

const AUDIT: &str = "svc.audit.v1.AuditService";

on_both_backends!(families_through_the_python_sdk);

/// Runs the calls in one MCP session with the admin server as `key`.
pub(crate) async fn session(cp: &ControlPlane, key: &str, calls: &[(&str, Value)]) -> Value {
    python::mcp_session(&format!("{}/mcp", cp.url), key, calls).await
}

/// The structured result of the call at `i`, asserting it succeeded.
pub(crate) fn ok(out: &Value, i: usize) -> Value {
    let call = &out["calls"][i];
    assert_eq!(call["isError"], false, "call {i}: {call}");
    call["structuredContent"].clone()
}

/// The Connect code of a tool call the operation refused.
pub(crate) fn refused(out: &Value, i: usize) -> String {
    let call = &out["calls"][i];
    assert_eq!(call["isError"], true, "call {i} should fail: {call}");
    call["structuredContent"]["error"]["code"]
        .as_str()
        .unwrap()
        .to_string()
}

async fn families_through_the_python_sdk(cp: &ControlPlane) {
    let out = families_session(cp).await;
    assert_eq!(out["server"], "portcullis-admin");
    the_tools_are_listed_with_their_annotations(&out);
    let (tool_id, gateway_id) =
        model_tool_and_gateway_reads_are_the_connect_replies(cp, &out).await;

    catalog_agents_quotas(cp, &tool_id, &gateway_id).await;
    viewer_cannot_manage(cp).await;
    changes_are_audited_with_their_surface(cp).await;
}

/// Adds gateway `edge`, model `gpt` and tool connection `things` on it, updates and reads
/// them, and reads a model that does not exist.
async fn families_session(cp: &ControlPlane) -> Value {
    session(
        cp,
        &cp.key,
        &[
            ("svc_gateway_add", json!({"name": "edge"})),
            (
                "svc_model_add",
                json!({"name": "gpt", "provider": "openai", "api_key": "sk-admin-mcp-secret",
                       "provider_config": {"model": "gpt-4o-mini", "base_url": "http://127.0.0.1:9/v1"},
                       "gateways": ["edge"]}),
            ),
            ("svc_model_update", json!({"name": "gpt", "attributes": {"tier": "gold"}})),
            ("svc_model_get", json!({"name": "gpt"})),
            (
                "svc_tool_add",
                json!({"name": "things", "url": "http://127.0.0.1:9/mcp", "gateways": ["edge"],
                       "authorization": "Bearer tool-secret-xyz"}),
            ),
            // Another origin: the stored secret does not follow; it is sent again (L4).
            (
                "svc_tool_update",
                json!({"name": "things", "url": "http://127.0.0.1:10/mcp",
                       "authorization": "Bearer tool-secret-xyz"}),
            ),
            ("svc_model_get", json!({"name": "nope"})),
            ("svc_gateway_get", json!({"gateway": "edge"})),
        ],
    )
    .await
}

fn the_tools_are_listed_with_their_annotations(out: &Value) {
    let tools: Vec<&Value> = out["tools"].as_array().unwrap().iter().collect();
    let tool = |name: &str| {
        *tools
            .iter()
            .find(|t| t["name"] == name)
            .unwrap_or_else(|| panic!("{name} not listed"))
    };
    assert_eq!(tool("svc_model_list")["annotations"]["readOnlyHint"], true);
    assert_eq!(
        tool("svc_model_remove")["annotations"]["destructiveHint"],
        true
    );
    assert_eq!(
        tool("svc_tool_block")["annotations"]["destructiveHint"],
        true
    );
    assert_eq!(
        tool("svc_gateway_quota_set")["required"],
        json!(["gateway", "limit_usd"])
    );
    for spec_named in [
        "svc_model_oauth_connect",
        "svc_tools_for_connection",
        "svc_tool_deprecate",
        "svc_gateway_tool_source_add",
        "svc_agents_rotate_key",
        "svc_model_quota_set",
        "svc_webhooks_delivery_replay_failed",
    ] {
        tool(spec_named);
    }
}

/// The session's model, tool and gateway, checked against the Connect API: the tool
/// connection's and the gateway's ids.
async fn model_tool_and_gateway_reads_are_the_connect_replies(
    cp: &ControlPlane,
    out: &Value,
) -> (String, String) {
    let gateway_id = ok(out, 0)["gateway"]["gateway_id"]
        .as_str()
        .unwrap()
        .to_string();
    let model = ok(out, 1)["model"].clone();
    let model_id = model["connection_id"].as_str().unwrap().to_string();
    assert_eq!(model["gateways"][0]["name"], "edge", "{model}");
    assert_eq!(model["secret_keys"], json!(["Authorization"]));
    // The read equals the Connect API's read of the same model.
    let connect = cp
        .ok(
            MGMT,
            "GetLLMModelConnection",
            cp.body(json!({"connection_id": model_id})),
        )
        .await;
    assert_eq!(ok(out, 3), connect);
    assert_eq!(connect["model"]["attributes"]["tier"], "gold");
    let tool_id = ok(out, 4)["connection_id"].as_str().unwrap().to_string();
    assert_eq!(
        ok(out, 5)["tool"]["protocol_config"]["url"],
        "http://127.0.0.1:10/mcp"
    );
    assert_eq!(refused(out, 6), "not_found");
    let gw = ok(out, 7)["gateway"].clone();
    assert_eq!(gw["gateway_id"], gateway_id.as_str());
    assert!(!out.to_string().contains("sk-admin-mcp-secret"));
    assert!(!out.to_string().contains("tool-secret-xyz"));
    (tool_id, gateway_id)
}

async fn catalog_agents_quotas(cp: &ControlPlane, tool_id: &str, gateway_id: &str) {
    let deployment = deployment_token(cp).await;
    report(cp, &deployment, tool_id, &["echo", "add"]).await;
    // A gateway without the model, for the member-remove refusal below.
    cp.ok(MGMT, "CreateGateway", cp.body(json!({"name": "other"})))
        .await;
    let other_quota = cp
        .ok(
            MGMT,
            "CreateLLMQuota",
            cp.body(json!({"subject_type": "workspace", "limit_micros": 1})),
        )
        .await["quota"]["quota_id"]
        .clone();
    let out = catalog_agents_quotas_session(cp, gateway_id, &other_quota).await;
    catalog_statuses_and_the_agents_lifecycle_follow_the_calls(&out);
    quotas_are_set_by_gateway_and_model_and_checked(&out, gateway_id);
    assert!(ok(&out, 13)["deliveries"].is_array());
    assert_eq!(
        refused(&out, 14),
        "not_found",
        "gpt is not on gateway other"
    );
    ok(&out, 16);
    tool_reach_and_grants_are_the_connect_replies(cp, &out, gateway_id).await;
}

/// Blocks, deprecates and restores operations of `things`; registers, keys, suspends,
/// reactivates and updates agent `bot`; sets, lists and removes quotas; lists deliveries,
/// tool reach and interactive grants; and makes three calls that are refused.
async fn catalog_agents_quotas_session(
    cp: &ControlPlane,
    gateway_id: &str,
    other_quota: &Value,
) -> Value {
    session(
        cp,
        &cp.key,
        &[
            (
                "svc_tool_block",
                json!({"connection": "things", "tool": "echo", "message": "leaks"}),
            ),
            ("svc_tools_for_connection", json!({"name": "things"})),
            (
                "svc_tool_deprecate",
                json!({"connection": "things", "tool": "add", "message": "old"}),
            ),
            (
                "svc_tool_restore",
                json!({"connection": "things", "tool": "echo"}),
            ),
            (
                "svc_agents_register",
                json!({"name": "bot", "token_ttl": "15m"}),
            ),
            (
                "svc_agents_create_key",
                json!({"agent": "bot", "name": "k1"}),
            ),
            ("svc_agents_list_keys", json!({"agent": "bot"})),
            (
                "svc_agents_suspend",
                json!({"agent_id": "bot", "reason": "test"}),
            ),
            (
                "svc_gateway_quota_set",
                json!({"gateway": "edge", "limit_usd": 12.5, "window": "daily"}),
            ),
            ("svc_gateway_quota_remove", json!({"quota_id": other_quota})),
            (
                "svc_model_quota_set",
                json!({"subject": "model", "model": "gpt", "limit_usd": 0.25}),
            ),
            ("svc_gateway_quota_list", json!({"gateway": "edge"})),
            (
                "svc_gateway_quota_set",
                json!({"gateway": "edge", "limit_usd": "12"}),
            ),
            ("svc_webhooks_delivery_list", json!({"since": "24h"})),
            (
                "svc_gateway_member_remove",
                json!({"gateway": "other", "model": "gpt"}),
            ),
            ("svc_agents_reactivate", json!({"agent_id": "bot"})),
            (
                "svc_agents_update",
                json!({"agent_id": "bot", "allowed_gateway_ids": [gateway_id],
                       "allowed_tools": ["things/add", "things/echo", "things/gone"]}),
            ),
            ("svc_tools_list", json!({})),
            (
                "svc_agents_interactive_grants_list",
                json!({"all_users": true}),
            ),
            (
                "svc_agents_interactive_grants_revoke",
                json!({"grant_id": "6f1c2d3e-4b5a-4c6d-8e7f-9a0b1c2d3e4f"}),
            ),
        ],
    )
    .await
}

fn catalog_statuses_and_the_agents_lifecycle_follow_the_calls(out: &Value) {
    assert_eq!(ok(out, 0)["tool"]["status"], "blocked");
    let catalog = ok(out, 1);
    let listed: Vec<&str> = catalog["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        listed,
        ["add"],
        "blocked entries are left out unless asked for"
    );
    assert_eq!(ok(out, 2)["tool"]["status"], "deprecated");
    assert_eq!(ok(out, 3)["tool"]["status"], "active");
    let agent = ok(out, 4)["agent"].clone();
    assert_eq!(agent["token_ttl"], "15m");
    let key = ok(out, 5);
    assert!(key["token"].as_str().unwrap().starts_with("svc_"), "{key}");
    let keys = ok(out, 6);
    assert_eq!(keys["keys"][0]["name"], "k1");
    assert!(!keys.to_string().contains(key["token"].as_str().unwrap()));
    assert_eq!(ok(out, 7)["agent"]["status"], "suspended");
}

fn quotas_are_set_by_gateway_and_model_and_checked(out: &Value, gateway_id: &str) {
    let quota = ok(out, 8)["quota"].clone();
    assert_eq!(quota["limit_micros"], 12_500_000);
    assert_eq!(quota["subject_id"], gateway_id);
    assert_eq!(quota["window"], "daily");
    assert_eq!(
        refused(out, 9),
        "invalid_argument",
        "the gateway variant refuses another subject's quota, as on Connect"
    );
    assert!(out["calls"][9]["content"][0]["text"]
        .as_str()
        .unwrap()
        .contains("not a gateway quota"));
    let model_quota = ok(out, 10)["quota"].clone();
    assert_eq!(model_quota["limit_micros"], 250_000);
    assert_eq!(model_quota["subject_type"], "model");
    assert_eq!(ok(out, 11)["quotas"].as_array().unwrap().len(), 1);
    let bad = &out["calls"][12];
    assert_eq!(
        bad["error"]["code"], -32602,
        "schema refusal is a JSON-RPC error: {bad}"
    );
    assert!(bad["error"]["message"]
        .as_str()
        .unwrap()
        .contains("limit_usd"));
}

async fn tool_reach_and_grants_are_the_connect_replies(
    cp: &ControlPlane,
    out: &Value,
    gateway_id: &str,
) {
    let reach = ok(out, 17);
    let bot = reach["agents"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["name"] == "bot")
        .unwrap();
    let reached: Vec<(&str, &str)> = bot["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| (t["tool"].as_str().unwrap(), t["status"].as_str().unwrap()))
        .collect();
    assert_eq!(
        reached,
        [("things/add", "deprecated"), ("things/echo", "active")],
        "offered on edge, in the catalog and allowed; an undiscovered name is not reached: {bot}"
    );
    assert_eq!(bot["tools"][0]["gateway_ids"], json!([gateway_id]));
    let connect_agent = cp
        .ok(AGENTS, "GetAgent", cp.body(json!({"agent_id": "bot"})))
        .await;
    assert_eq!(
        connect_agent["agent"]["status"], "active",
        "suspended, then reactivated"
    );
    let connect_reach = cp.ok(AGENTS, "ListToolReach", cp.body(json!({}))).await;
    assert_eq!(connect_reach, reach, "the MCP result is the Connect reply");
    let grants = ok(out, 18);
    let connect_grants = cp
        .ok(
            AGENTS,
            "ListInteractiveGrants",
            cp.body(json!({"all_users": true})),
        )
        .await;
    assert_eq!(
        grants, connect_grants,
        "the MCP result is the Connect reply"
    );
    assert_eq!(refused(out, 19), "not_found", "no such grant");
}

async fn viewer_cannot_manage(cp: &ControlPlane) {
    let viewer = platform_key(cp, "v", "viewer").await;
    let out = session(
        cp,
        &viewer,
        &[
            ("svc_model_list", json!({})),
            ("svc_model_remove", json!({"name": "gpt"})),
            ("svc_gateway_add", json!({"name": "sneaky"})),
        ],
    )
    .await;
    assert_eq!(ok(&out, 0)["models"].as_array().unwrap().len(), 1);
    assert_eq!(refused(&out, 1), "permission_denied");
    assert_eq!(refused(&out, 2), "permission_denied");
    let models = cp
        .ok(MGMT, "ListLLMModelConnections", cp.body(json!({})))
        .await;
    assert_eq!(
        models["models"].as_array().unwrap().len(),
        1,
        "nothing changed"
    );
}

async fn changes_are_audited_with_their_surface(cp: &ControlPlane) {
    let events = cp
        .ok(
            AUDIT,
            "QueryEvents",
            cp.body(json!({"event_types": ["mgmt.operation"], "page_size": 200})),
        )
        .await;
    let events = events["events"].as_array().unwrap();
    let by_mcp: Vec<&Value> = events
        .iter()
        .filter(|e| e["payload"]["surface"] == "mcp")
        .collect();
    let find = |tool: &str, method: &str| {
        by_mcp
            .iter()
            .find(|e| e["payload"]["tool"] == tool && e["request"]["rpc_method"] == method)
            .unwrap_or_else(|| panic!("no mcp event for {tool}/{method} in {by_mcp:?}"))
    };
    let created = find("svc_model_add", "CreateLLMModelConnection");
    assert_eq!(created["result"], "RESULT_ALLOWED");
    assert_eq!(created["request"]["http_route"], "/mcp");
    find("svc_model_add", "AddGatewayModel");
    find("svc_tool_block", "BlockTool");
    let denied = find("svc_model_remove", "DeleteLLMModelConnection");
    assert_eq!(denied["result"], "RESULT_DENIED");
    assert!(
        !by_mcp.iter().any(|e| e["request"]["rpc_method"]
            .as_str()
            .unwrap()
            .starts_with("List")),
        "reads are not audited"
    );
    let connect = events
        .iter()
        .find(|e| e["request"]["rpc_method"] == "CreateDeployment")
        .unwrap();
    assert_eq!(connect["payload"]["surface"], "connect");
}
