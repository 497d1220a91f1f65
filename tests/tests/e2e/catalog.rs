//! Catalog adapters end to end: the catalog lists the shipped services; GitHub issues is
//! installed against a stand-in that answers its recorded exchanges, called through the
//! gateway with the official MCP Python SDK, one operation blocked, upgraded to a newer version
//! dropped into the deployment's catalog directory (filter, credential and block kept), and
//! uninstalled with its credential.

use std::time::Duration;

use portcullis_tests::controlplane::MGMT;
use portcullis_tests::recorded_service::{fixtures, RecordedService};
use portcullis_tests::{python, Backend, ControlPlane, GatewayProcess};
use serde_json::{json, Value};

const TOKEN: &str = "ghp_catalogTest0123456789";

fn fixture(slug: &str, op: &str) -> Value {
    let text = std::fs::read_to_string(fixtures(slug).join(format!("{op}.json"))).unwrap();
    serde_json::from_str(&text).unwrap()
}

async fn sdk(gw: &GatewayProcess, cp: &ControlPlane, key: &str, calls: &[(&str, Value)]) -> Value {
    let url = format!("{}/mcp", gw.gateway_url(&cp.default_gateway_id));
    python::mcp_session(&url, key, calls).await
}

fn names(out: &Value) -> Vec<String> {
    out["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_string())
        .collect()
}

/// Waits until the gateways' discovery recorded `count` operations of the connection.
async fn discovered(cp: &ControlPlane, id: &str, count: usize) -> Value {
    for _ in 0..200 {
        let listed = cp
            .ok(
                MGMT,
                "ListConnectionTools",
                cp.body(json!({"connection_id": id, "include_blocked": true, "with_schema": true})),
            )
            .await;
        if listed["tools"].as_array().unwrap().len() == count {
            return listed;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the catalog of {id} never reached {count} operations");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn install_call_block_upgrade_uninstall() {
    let dir = tempfile::tempdir().unwrap();
    let catalog_dir = dir.path().to_str().unwrap().to_string();
    let cp = ControlPlane::start_with(Backend::Sqlite, &[("PORTCULLIS_CATALOG_DIR", &catalog_dir)])
        .await;
    let service = RecordedService::start("github-issues", &format!("Bearer {TOKEN}")).await;

    the_catalog_lists_its_services(&cp).await;
    refusals(&cp).await;

    let id = github_issues_installs_as_a_filtered_rest_tool(&cp, &service).await;
    cp.ok(
        MGMT,
        "AddGatewayToolSource",
        cp.body(json!({"gateway_id": cp.default_gateway_id, "connection_id": id})),
    )
    .await;
    let key = crate::world::register_with_key(
        &cp,
        json!({"name": "bot", "allowed_gateway_ids": [cp.default_gateway_id],
            "allowed_tools": ["gh/list_issues", "gh/get_issue", "gh/create_issue", "gh/add_comment", "gh/list_comments"]}),
    )
    .await;
    let gw = GatewayProcess::start(&cp).await;
    let catalog = discovered(&cp, &id, 3).await;
    assert!(catalog["tools"][0]["input_schema"]["properties"].is_object());

    // Called through the gateway with the official MCP SDK.
    the_sdk_calls_the_filtered_operations(&cp, &gw, &key).await;
    the_service_gets_only_arguments_in_the_schema(&service);

    // Block one operation: gone from the list, refused on call.
    a_blocked_operation_is_hidden_and_refused(&cp, &gw, &key, &id).await;

    upgrade_keeps_filter_credential_and_block(&cp, &gw, &key, &id, dir.path(), &service).await;

    uninstall_forgets_the_connection_and_its_credential(&cp, &id).await;
}

async fn the_catalog_lists_its_services(cp: &ControlPlane) {
    let services = cp.ok(MGMT, "ListCatalogServices", cp.body(json!({}))).await;
    let github = services["services"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["slug"] == "github-issues")
        .unwrap()
        .clone();
    assert_eq!(
        (
            github["version"].as_u64(),
            github["auth_header_name"].as_str(),
            github["supports_per_user"].as_bool()
        ),
        (Some(2), Some("Authorization"), Some(true))
    );
    assert_eq!(services["services"].as_array().unwrap().len(), 3);
}

/// Installs `github-issues` as `gh` on the recorded service, three operations kept: its id.
async fn github_issues_installs_as_a_filtered_rest_tool(
    cp: &ControlPlane,
    service: &RecordedService,
) -> String {
    let installed = cp
        .ok(
            MGMT,
            "InstallCatalogConnection",
            cp.body(json!({"slug": "github-issues", "name": "gh", "secret_values": {"Authorization": TOKEN},
                "tool_filter": ["list_issues", "get_issue", "create_issue"], "base_url": service.base_url("")})),
        )
        .await;
    let id = installed["connection_id"].as_str().unwrap().to_string();
    let tool = &installed["tool"];
    assert_eq!(
        (
            tool["protocol"].as_str(),
            tool["protocol_config"]["version"].as_u64()
        ),
        (Some("rest"), Some(2))
    );
    assert_eq!(tool["write_tools"], json!(["create_issue"]));
    assert!(!installed.to_string().contains(TOKEN));
    id
}

async fn the_sdk_calls_the_filtered_operations(cp: &ControlPlane, gw: &GatewayProcess, key: &str) {
    let list = fixture("github-issues", "list_issues");
    let out = sdk(
        gw,
        cp,
        key,
        &[
            ("gh/list_issues", list["arguments"].clone()),
            ("gh/get_issue", json!({"owner": "octocat"})),
            (
                "gh/create_issue",
                fixture("github-issues", "create_issue")["arguments"].clone(),
            ),
        ],
    )
    .await;
    let mut listed = names(&out);
    listed.sort();
    assert_eq!(
        listed,
        ["gh/create_issue", "gh/get_issue", "gh/list_issues"],
        "add_comment is filtered out: {out}"
    );
    assert_eq!(out["calls"][0]["structuredContent"], list["structured"]);
    assert_eq!(out["calls"][0]["isError"], false);
    let bad = &out["calls"][1];
    assert_eq!(bad["isError"], true, "{bad}");
    assert!(
        bad["content"][0]["text"].as_str().unwrap().contains("repo"),
        "{bad}"
    );
    assert_eq!(out["calls"][2]["structuredContent"]["number"], 1347);
}

fn the_service_gets_only_arguments_in_the_schema(service: &RecordedService) {
    let sent = service.received();
    let first = &sent[0];
    assert_eq!(
        (
            first.method.as_str(),
            first.path.as_str(),
            first.query.as_deref()
        ),
        (
            "GET",
            "/repos/octocat/Hello-World/issues",
            Some("state=open&per_page=30")
        )
    );
    assert_eq!(
        first.headers["authorization"],
        format!("Bearer {TOKEN}").as_str()
    );
    assert_eq!(first.headers["x-github-api-version"], "2022-11-28");
    assert_eq!(
        sent.len(),
        2,
        "arguments outside the schema never reach the service"
    );
    assert_eq!(
        sent[1].body,
        fixture("github-issues", "create_issue")["request"]["body"]
    );
}

async fn a_blocked_operation_is_hidden_and_refused(
    cp: &ControlPlane,
    gw: &GatewayProcess,
    key: &str,
    id: &str,
) {
    cp.ok(
        MGMT,
        "BlockTool",
        cp.body(
            json!({"connection_id": id, "tool": "create_issue", "message": "read-only this week"}),
        ),
    )
    .await;
    gw.caught_up(cp).await;
    let out = sdk(
        gw,
        cp,
        key,
        &[(
            "gh/create_issue",
            json!({"owner": "o", "repo": "r", "title": "t"}),
        )],
    )
    .await;
    assert!(
        !names(&out).contains(&"gh/create_issue".to_string()),
        "{out}"
    );
    assert!(
        out["calls"][0]["error"]["message"]
            .as_str()
            .unwrap()
            .contains("blocked"),
        "{out}"
    );
}

async fn uninstall_forgets_the_connection_and_its_credential(cp: &ControlPlane, id: &str) {
    cp.ok(
        MGMT,
        "UninstallCatalogConnection",
        cp.body(json!({"connection_id": id})),
    )
    .await;
    let left = cp
        .db_strings("SELECT owner_id FROM credentials WHERE owner_id = $1", id)
        .await;
    assert!(left.is_empty(), "the credential is gone: {left:?}");
    cp.call(
        MGMT,
        "GetMCPServerConnection",
        cp.body(json!({"connection_id": id})),
    )
    .await
    .expect_error("not_found", 404);
}

async fn upgrade_keeps_filter_credential_and_block(
    cp: &ControlPlane,
    gw: &GatewayProcess,
    key: &str,
    id: &str,
    catalog_dir: &std::path::Path,
    service: &RecordedService,
) {
    let v2: Value = serde_json::from_str(include_str!(
        "../../../catalog/adapters/github-issues/v2.json"
    ))
    .unwrap();
    let mut v3 = v2.clone();
    v3["version"] = 3.into();
    v3["description"] = "GitHub issues, v3".into();
    std::fs::create_dir_all(catalog_dir.join("github-issues")).unwrap();
    std::fs::write(catalog_dir.join("github-issues/v3.json"), v3.to_string()).unwrap();
    let up = cp
        .ok(
            MGMT,
            "UpgradeCatalogConnection",
            cp.body(json!({"connection_id": id})),
        )
        .await;
    assert_eq!(
        (up["from_version"].as_u64(), up["to_version"].as_u64()),
        (Some(2), Some(3))
    );
    let t = &up["tool"];
    assert_eq!(t["name"], "gh");
    assert_eq!(
        t["protocol_config"]["tool_filter"],
        json!(["list_issues", "get_issue", "create_issue"])
    );
    assert_eq!(t["has_credential"], true);
    cp.call(
        MGMT,
        "UpgradeCatalogConnection",
        cp.body(json!({"connection_id": id})),
    )
    .await
    .expect_error("failed_precondition", 400)
    .mentions("newest");
    let listed = cp
        .ok(
            MGMT,
            "ListConnectionTools",
            cp.body(json!({"connection_id": id, "include_blocked": true})),
        )
        .await;
    let blocked: Vec<&str> = listed["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["status"] == "blocked")
        .map(|e| e["name"].as_str().unwrap())
        .collect();
    assert_eq!(blocked, ["create_issue"], "the block survives the upgrade");
    gw.caught_up(cp).await;
    let before = service.received().len();
    let out = sdk(
        gw,
        cp,
        key,
        &[(
            "gh/get_issue",
            fixture("github-issues", "get_issue")["arguments"].clone(),
        )],
    )
    .await;
    assert_eq!(
        out["calls"][0]["structuredContent"],
        fixture("github-issues", "get_issue")["structured"],
        "{out}"
    );
    let sent = service.received();
    assert_eq!(sent.len(), before + 1);
    assert_eq!(
        sent[before].headers["authorization"],
        format!("Bearer {TOKEN}").as_str(),
        "the stored credential is kept"
    );
}

/// Bad installs and changes are refused, naming what is wrong.
async fn refusals(cp: &ControlPlane) {
    let install = |body: Value| cp.call(MGMT, "InstallCatalogConnection", cp.body(body));
    install(json!({"slug": "nope", "name": "x"}))
        .await
        .expect_error("not_found", 404);
    install(json!({"slug": "slack", "name": "x", "credential_type": "per-user"}))
        .await
        .expect_error("invalid_argument", 400)
        .mentions("per-user");
    install(json!({"slug": "github-issues", "name": "x", "secret_values": {"X-Token": "t"}}))
        .await
        .expect_error("invalid_argument", 400)
        .mentions("Authorization");
    install(json!({"slug": "github-issues", "name": "x", "secret_values": {"Authorization": "t"}, "tool_filter": ["delete_repo"]}))
        .await
        .expect_error("invalid_argument", 400)
        .mentions("delete_repo");
    cp.call(
        MGMT,
        "CreateMCPServerConnection",
        cp.body(json!({"name": "y", "protocol": "rest"})),
    )
    .await
    .expect_error("invalid_argument", 400)
    .mentions("catalog");
    let notion = cp
        .ok(MGMT, "InstallCatalogConnection", cp.body(json!({"slug": "notion", "name": "wiki", "secret_values": {"Authorization": "secret_x"}})))
        .await;
    let nid = notion["connection_id"].as_str().unwrap();
    cp.call(
        MGMT,
        "UpdateMCPServerConnection",
        cp.body(json!({"connection_id": nid, "protocol_config": {"url": "http://x"}})),
    )
    .await
    .expect_error("failed_precondition", 400)
    .mentions("UpgradeCatalogConnection");
    let renamed = cp
        .ok(MGMT, "UpdateMCPServerConnection", cp.body(json!({"connection_id": nid, "name": "notes", "secret_values": {"Authorization": "secret_y"}})))
        .await;
    assert_eq!(renamed["tool"]["name"], "notes");
    assert_eq!(renamed["tool"]["protocol_config"]["slug"], "notion");
    let plain = cp
        .ok(MGMT, "CreateMCPServerConnection", cp.body(json!({"name": "plain", "protocol": "streamable-http", "protocol_config": {"url": "http://127.0.0.1:9/mcp"}})))
        .await;
    cp.call(
        MGMT,
        "UpgradeCatalogConnection",
        cp.body(json!({"connection_id": plain["connection_id"]})),
    )
    .await
    .expect_error("failed_precondition", 400)
    .mentions("catalog");
    cp.ok(
        MGMT,
        "UninstallCatalogConnection",
        cp.body(json!({"connection_id": nid})),
    )
    .await;
    cp.ok(
        MGMT,
        "DeleteMCPServerConnection",
        cp.body(json!({"connection_id": plain["connection_id"]})),
    )
    .await;
}
