//! Tool connections over the REST variant of the management API: create, get, patch, list and
//! delete, each read back through Connect, and its refusals (sync, a missing workspace, no key).

use portcullis_tests::controlplane::MGMT;
use portcullis_tests::{on_both_backends, ControlPlane};
use serde_json::{json, Value};

use crate::tools::http;

on_both_backends!(rest_variant);

async fn rest_variant(cp: &ControlPlane) {
    let http_client = reqwest::Client::new();
    let auth = format!("Bearer {}", cp.key);
    let id = rest_creates_and_gets(cp, &http_client, &auth).await;
    rest_patches_and_lists(cp, &http_client, &auth, &id).await;
    rest_refuses_sync_a_missing_workspace_and_no_key(cp, &http_client, &auth, &id).await;
    rest_deletes(cp, &http_client, &auth, &id).await;
}

/// Creates `rest-made` over REST and reads it back: its id.
async fn rest_creates_and_gets(
    cp: &ControlPlane,
    http_client: &reqwest::Client,
    auth: &str,
) -> String {
    let created: Value = http_client
        .post(format!("{}/v1/tools", cp.url))
        .header("authorization", auth)
        .json(&cp.body(http("rest-made")))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let id = created["connection_id"]
        .as_str()
        .expect("created over REST")
        .to_string();
    let got: Value = http_client
        .get(format!(
            "{}/v1/tools/{id}?workspace_id={}",
            cp.url, cp.workspace_id
        ))
        .header("authorization", auth)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(got["tool"]["name"], "rest-made");
    id
}

async fn rest_patches_and_lists(
    cp: &ControlPlane,
    http_client: &reqwest::Client,
    auth: &str,
    id: &str,
) {
    let patched = http_client
        .patch(format!("{}/v1/tools/{id}", cp.url))
        .header("authorization", auth)
        .json(&cp.body(json!({"protocol": "streamable-http", "protocol_config": {"url": "http://127.0.0.1:5/mcp"}, "write_tools": ["w"]})))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let patched: Value = serde_json::from_str(&patched).unwrap_or_else(|_| panic!("{patched}"));
    assert_eq!(patched["tool"]["write_tools"], json!(["w"]), "{patched}");
    let listed: Value = http_client
        .get(format!(
            "{}/v1/tools?workspace_id={}",
            cp.url, cp.workspace_id
        ))
        .header("authorization", auth)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(listed["tools"].as_array().unwrap().len(), 1);
}

async fn rest_refuses_sync_a_missing_workspace_and_no_key(
    cp: &ControlPlane,
    http_client: &reqwest::Client,
    auth: &str,
    id: &str,
) {
    let sync = http_client
        .post(format!("{}/v1/tools/{id}/catalog/sync", cp.url))
        .header("authorization", auth)
        .json(&cp.body(json!({})))
        .send()
        .await
        .unwrap();
    assert_eq!(
        sync.status().as_u16(),
        400,
        "shared tools reject manual sync on REST too"
    );
    let missing = http_client
        .get(format!("{}/v1/tools/{id}", cp.url))
        .header("authorization", auth)
        .send()
        .await
        .unwrap();
    assert_eq!(missing.status().as_u16(), 400, "workspace_id is required");
    let unauth = http_client
        .get(format!(
            "{}/v1/tools?workspace_id={}",
            cp.url, cp.workspace_id
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(unauth.status().as_u16(), 401);
}

async fn rest_deletes(cp: &ControlPlane, http_client: &reqwest::Client, auth: &str, id: &str) {
    let deleted = http_client
        .delete(format!(
            "{}/v1/tools/{id}?workspace_id={}",
            cp.url, cp.workspace_id
        ))
        .header("authorization", auth)
        .send()
        .await
        .unwrap();
    assert_eq!(deleted.status().as_u16(), 200);
    cp.call(
        MGMT,
        "GetMCPServerConnection",
        cp.body(json!({"connection_id": id})),
    )
    .await
    .expect_error("not_found", 404);
}
