//! Stdio tool connections (issue 38, H3): the command they run is set by admins alone.

use portcullis_tests::controlplane::MGMT;
use portcullis_tests::{on_both_backends, ControlPlane};
use serde_json::json;

use crate::tools::{create_tool, http, tid};
use crate::world::platform_key;

on_both_backends!(only_admins_set_stdio_commands);

/// A stdio command runs on every gateway host, so an operator key (gateway.manage) may not
/// create one or change what runs; it may still rename it or attach it.
async fn only_admins_set_stdio_commands(cp: &ControlPlane) {
    let operator = platform_key(cp, "ops", "operator").await;
    let identity = cp.call_as(&operator, MGMT, "GetIdentity", json!({})).await;
    assert!(!identity.text.contains("tools.stdio"), "{}", identity.text);
    an_operator_makes_no_stdio_tool(cp, &operator).await;
    an_operator_changes_no_stdio_command_but_renames_it(cp, &operator).await;
}

/// Neither created as stdio nor turned into one.
async fn an_operator_makes_no_stdio_tool(cp: &ControlPlane, operator: &str) {
    let stdio = |name: &str, command: &str| {
        cp.body(json!({"name": name, "protocol": "stdio", "protocol_config": {"command": command}}))
    };
    cp.call_as(
        operator,
        MGMT,
        "CreateMCPServerConnection",
        stdio("x", "sh"),
    )
    .await
    .expect_error("permission_denied", 403)
    .mentions("tools.stdio");
    let http_tool = cp
        .call_as(
            operator,
            MGMT,
            "CreateMCPServerConnection",
            cp.body(http("web")),
        )
        .await;
    assert_eq!(http_tool.status, 200, "{}", http_tool.text);
    let web = http_tool.body["connection_id"]
        .as_str()
        .unwrap()
        .to_string();
    cp.call_as(operator, MGMT, "UpdateMCPServerConnection",
        cp.body(json!({"connection_id": web, "protocol": "stdio", "protocol_config": {"command": "sh"}})))
        .await
        .expect_error("permission_denied", 403);
}

async fn an_operator_changes_no_stdio_command_but_renames_it(cp: &ControlPlane, operator: &str) {
    let local = tid(&create_tool(
        cp,
        json!({"name": "local", "protocol": "stdio",
        "protocol_config": {"command": "node", "args": ["server.js"]}}),
    )
    .await);
    for changed in [
        json!({"command": "sh", "args": ["server.js"]}),
        json!({"command": "node", "args": ["-e", "1"]}),
        json!({"command": "node", "args": ["server.js"], "env": {"NODE_OPTIONS": "--require /tmp/x"}}),
        json!({"command": "node", "args": ["server.js"], "cwd": "/tmp"}),
    ] {
        cp.call_as(
            operator,
            MGMT,
            "UpdateMCPServerConnection",
            cp.body(json!({"connection_id": local, "protocol_config": changed})),
        )
        .await
        .expect_error("permission_denied", 403);
    }
    let got = cp
        .ok(
            MGMT,
            "GetMCPServerConnection",
            cp.body(json!({"connection_id": local})),
        )
        .await;
    assert_eq!(
        got["tool"]["protocol_config"]["command"], "node",
        "refused updates change nothing"
    );
    assert_eq!(got["tool"]["protocol_config"]["args"], json!(["server.js"]));
    let renamed = cp
        .call_as(operator, MGMT, "UpdateMCPServerConnection",
            cp.body(json!({"connection_id": local, "name": "renamed", "protocol_config": {"command": "node", "args": ["server.js"]}})))
        .await;
    assert_eq!(renamed.status, 200, "{}", renamed.text);
    assert_eq!(renamed.body["tool"]["name"], "renamed");
}
