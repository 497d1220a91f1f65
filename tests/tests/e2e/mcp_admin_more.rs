//! The rest of the MCP admin server's `svc_*` tools, driven by the official MCP Python SDK,
//! each with its effect checked through the Connect API: gateways, their members and quotas,
//! model quotas and tool connections by name; agents' lifecycle and keys; shared OAuth consent
//! links and disconnects (webhook deliveries are `mcp_admin_webhooks`). Destructive tools
//! refuse what does not exist with `not_found` (or `failed_precondition`), and change nothing.

use portcullis_tests::controlplane::{AGENTS, MGMT};
use portcullis_tests::{on_both_backends, ControlPlane};
use serde_json::{json, Value};

use crate::mcp_admin::{ok, refused, session};

on_both_backends!(
    gateways_members_and_quotas_by_name,
    agents_lifecycle_and_keys,
    shared_oauth_consent_and_disconnect
);

pub(crate) fn text(v: &Value) -> String {
    v.as_str()
        .unwrap_or_else(|| panic!("not a string: {v}"))
        .to_string()
}

/// The message of the refused call at `i`.
fn message(out: &Value, i: usize) -> String {
    text(&out["calls"][i]["structuredContent"]["error"]["message"])
}

/// The `name` of each entry of a list, sorted.
fn names(list: &Value) -> Vec<String> {
    let mut names: Vec<String> = list
        .as_array()
        .unwrap_or_else(|| panic!("not a list: {list}"))
        .iter()
        .map(|e| text(&e["name"]))
        .collect();
    names.sort();
    names
}

/// Whether a gateway's members include one of this kind and name.
fn has_member(gateway: &Value, kind: &str, name: &str) -> bool {
    gateway["members"]
        .as_array()
        .unwrap()
        .iter()
        .any(|m| m["kind"] == kind && m["name"] == name)
}

async fn gateways_members_and_quotas_by_name(cp: &ControlPlane) {
    let out = gateways_members_and_quotas_session(cp).await;
    let edge = text(&ok(&out, 0)["gateway"]["gateway_id"]);
    let model_id = text(&ok(&out, 2)["model"]["connection_id"]);
    let tool_id = text(&ok(&out, 4)["connection_id"]);
    both_members_are_stored(cp, &out, &edge, &model_id).await;

    // Reads are the Connect API's replies.
    tool_and_gateway_reads_are_the_connect_replies(cp, &out, &tool_id).await;

    unknown_gateways_and_connections_are_not_found(&out);

    let (gq, mq) = quotas_are_set_by_name(&out, &edge, &model_id);
    quotas_change_and_go(cp, &gq, &mq).await;
    removals(cp, &model_id).await;
}

/// Gateways `edge` and `spare`, model `gpt` and tool connection `things` on `edge`, reads,
/// two attachments to what does not exist, and a quota on `edge` and on `gpt`.
async fn gateways_members_and_quotas_session(cp: &ControlPlane) -> Value {
    session(
        cp,
        &cp.key,
        &[
            ("svc_gateway_add", json!({"name": "edge"})),
            ("svc_gateway_add", json!({"name": "spare"})),
            (
                "svc_model_add",
                json!({"name": "gpt", "provider": "openai",
                       "provider_config": {"model": "gpt-4o-mini", "base_url": "http://127.0.0.1:9/v1"}}),
            ),
            (
                "svc_gateway_model_add",
                json!({"gateway": "edge", "model": "gpt"}),
            ),
            (
                "svc_tool_add",
                json!({"name": "things", "url": "http://127.0.0.1:9/mcp"}),
            ),
            (
                "svc_gateway_tool_source_add",
                json!({"gateway": "edge", "connection": "things"}),
            ),
            ("svc_tool_get", json!({"name": "things"})),
            ("svc_tool_list", json!({})),
            ("svc_gateway_list", json!({})),
            (
                "svc_gateway_model_add",
                json!({"gateway": "nowhere", "model": "gpt"}),
            ),
            (
                "svc_gateway_tool_source_add",
                json!({"gateway": "edge", "connection": "nothing"}),
            ),
            (
                "svc_gateway_quota_set",
                json!({"gateway": "edge", "limit_usd": 5}),
            ),
            (
                "svc_model_quota_set",
                json!({"subject": "model", "model": "gpt", "limit_usd": 1, "window": "daily"}),
            ),
        ],
    )
    .await
}

async fn both_members_are_stored(cp: &ControlPlane, out: &Value, edge: &str, model_id: &str) {
    assert!(has_member(&ok(out, 3)["gateway"], "model", "gpt"), "{out}");
    let attached = ok(out, 5)["gateway"].clone();
    assert!(has_member(&attached, "model", "gpt"), "{attached}");
    assert!(has_member(&attached, "tool_source", "things"), "{attached}");
    let got = cp
        .ok(MGMT, "GetGateway", cp.body(json!({"gateway_id": edge})))
        .await;
    assert_eq!(
        got["gateway"]["members"], attached["members"],
        "both members are stored"
    );
    let model = cp
        .ok(
            MGMT,
            "GetLLMModelConnection",
            cp.body(json!({"connection_id": model_id})),
        )
        .await;
    assert_eq!(names(&model["model"]["gateways"]), ["edge"], "{model}");
}

async fn tool_and_gateway_reads_are_the_connect_replies(
    cp: &ControlPlane,
    out: &Value,
    tool_id: &str,
) {
    let tool = cp
        .ok(
            MGMT,
            "GetMCPServerConnection",
            cp.body(json!({"connection_id": tool_id})),
        )
        .await;
    assert_eq!(ok(out, 6), tool);
    assert_eq!(names(&tool["tool"]["gateways"]), ["edge"], "{tool}");
    let tools = cp
        .ok(MGMT, "ListMCPServerConnections", cp.body(json!({})))
        .await;
    assert_eq!(ok(out, 7), tools);
    assert_eq!(names(&tools["tools"]), ["things"]);
    let gateways = cp.ok(MGMT, "ListGateways", cp.body(json!({}))).await;
    assert_eq!(ok(out, 8), gateways);
    let listed = names(&gateways["gateways"]);
    assert!(
        listed.contains(&"edge".to_string()) && listed.contains(&"spare".to_string()),
        "{listed:?}"
    );
}

fn unknown_gateways_and_connections_are_not_found(out: &Value) {
    assert_eq!(refused(out, 9), "not_found");
    assert!(
        message(out, 9).contains("no gateway named 'nowhere'"),
        "{}",
        message(out, 9)
    );
    assert_eq!(refused(out, 10), "not_found");
    assert!(
        message(out, 10).contains("no tool connection named 'nothing'"),
        "{}",
        message(out, 10)
    );
}

/// The gateway quota and the model quota set by name: their ids.
fn quotas_are_set_by_name(out: &Value, edge: &str, model_id: &str) -> (String, String) {
    let gateway_quota = ok(out, 11)["quota"].clone();
    assert_eq!(gateway_quota["subject_id"], edge);
    assert_eq!(gateway_quota["limit_micros"], 5_000_000);
    assert_eq!(gateway_quota["window"], "monthly");
    let model_quota = ok(out, 12)["quota"].clone();
    assert_eq!(model_quota["subject_id"], model_id);
    assert_eq!(model_quota["window"], "daily");
    (
        text(&gateway_quota["quota_id"]),
        text(&model_quota["quota_id"]),
    )
}

/// Updates both quotas, lists them, removes the model quota; the gateway variant refuses a
/// model quota.
async fn quotas_change_and_go(cp: &ControlPlane, gq: &str, mq: &str) {
    let out = session(
        cp,
        &cp.key,
        &[
            (
                "svc_gateway_quota_update",
                json!({"quota_id": gq, "limit_usd": 7.5, "name": "edge cap", "enabled": false}),
            ),
            (
                "svc_model_quota_update",
                json!({"quota_id": mq, "limit_usd": 2.25, "window": "monthly", "name": "gpt"}),
            ),
            (
                "svc_gateway_quota_update",
                json!({"quota_id": mq, "limit_usd": 9}),
            ),
            ("svc_model_quota_list", json!({})),
            ("svc_model_quota_remove", json!({"quota_id": mq})),
            ("svc_model_quota_remove", json!({"quota_id": mq})),
        ],
    )
    .await;
    let updated = ok(&out, 0)["quota"].clone();
    assert_eq!(updated["limit_micros"], 7_500_000);
    assert_eq!(updated["name"], "edge cap");
    assert_eq!(updated["enabled"], false);
    assert_eq!(updated["window"], "monthly", "the window is kept");
    let changed = ok(&out, 1)["quota"].clone();
    assert_eq!(changed["limit_micros"], 2_250_000);
    assert_eq!(changed["window"], "monthly");
    assert_eq!(changed["name"], "gpt");
    assert_eq!(refused(&out, 2), "invalid_argument");
    assert!(
        message(&out, 2).contains("not a gateway quota"),
        "{}",
        message(&out, 2)
    );
    let listed = ok(&out, 3)["quotas"].clone();
    let ids: Vec<String> = listed
        .as_array()
        .unwrap()
        .iter()
        .map(|q| text(&q["quota_id"]))
        .collect();
    assert_eq!(ids.len(), 2, "{listed}");
    assert!(ids.contains(&gq.to_string()) && ids.contains(&mq.to_string()));
    let listed_model = listed
        .as_array()
        .unwrap()
        .iter()
        .find(|q| q["quota_id"] == mq)
        .unwrap();
    assert_eq!(
        listed_model["limit_micros"], 2_250_000,
        "the refused update changed nothing"
    );
    assert_eq!(ok(&out, 4), json!({}));
    assert_eq!(refused(&out, 5), "not_found", "already removed");
    let stored = cp.ok(MGMT, "ListLLMQuotas", cp.body(json!({}))).await;
    assert_eq!(
        stored["quotas"],
        json!([updated]),
        "only the gateway quota is left"
    );
}

/// Removes the tool connection and the gateway `edge`: the model stays, off every gateway,
/// and the gateway's quota goes with it.
async fn removals(cp: &ControlPlane, model_id: &str) {
    let out = session(
        cp,
        &cp.key,
        &[
            ("svc_tool_remove", json!({"name": "things"})),
            ("svc_tool_remove", json!({"name": "things"})),
            ("svc_gateway_remove", json!({"gateway": "edge"})),
            ("svc_gateway_remove", json!({"gateway": "edge"})),
            ("svc_gateway_list", json!({})),
        ],
    )
    .await;
    assert_eq!(ok(&out, 0), json!({}));
    assert_eq!(refused(&out, 1), "not_found");
    assert_eq!(ok(&out, 2), json!({}));
    assert_eq!(
        refused(&out, 3),
        "not_found",
        "removing a gateway that does not exist"
    );
    assert!(
        message(&out, 3).contains("no gateway named 'edge'"),
        "{}",
        message(&out, 3)
    );
    let tools = cp
        .ok(MGMT, "ListMCPServerConnections", cp.body(json!({})))
        .await;
    assert_eq!(tools["tools"], json!([]));
    let gateways = cp.ok(MGMT, "ListGateways", cp.body(json!({}))).await;
    assert_eq!(ok(&out, 4), gateways);
    let listed = names(&gateways["gateways"]);
    assert!(!listed.contains(&"edge".to_string()), "{listed:?}");
    assert!(listed.contains(&"spare".to_string()), "{listed:?}");
    let model = cp
        .ok(
            MGMT,
            "GetLLMModelConnection",
            cp.body(json!({"connection_id": model_id})),
        )
        .await;
    assert_eq!(model["model"]["gateways"], json!([]), "the model stays");
    let quotas = cp.ok(MGMT, "ListLLMQuotas", cp.body(json!({}))).await;
    assert_eq!(
        quotas["quotas"],
        json!([]),
        "the gateway's quota went with it"
    );
}

/// `ExchangeAgentKey` with an agent key as the bearer, on the default gateway.
async fn exchange(cp: &ControlPlane, token: &str) -> portcullis_tests::controlplane::Reply {
    let body = json!({"gateway_id": cp.default_gateway_id});
    cp.call_as(token, AGENTS, "ExchangeAgentKey", body).await
}

/// A new key of the agent; its token.
async fn agent_key(cp: &ControlPlane, agent: &str, name: &str) -> String {
    let body = json!({"agent_id": agent, "name": name});
    text(&cp.ok(AGENTS, "CreateAgentKey", cp.body(body)).await["token"])
}

async fn agents_lifecycle_and_keys(cp: &ControlPlane) {
    for name in ["alpha", "beta", "gamma"] {
        let body = json!({"name": name, "allowed_gateway_ids": [cp.default_gateway_id]});
        cp.ok(AGENTS, "RegisterAgent", cp.body(body)).await;
    }
    let (k1, k2, beta_key) = (
        agent_key(cp, "alpha", "k1").await,
        agent_key(cp, "alpha", "k2").await,
        agent_key(cp, "beta", "k1").await,
    );
    let all = cp.ok(AGENTS, "ListAgents", cp.body(json!({}))).await;
    let alpha = cp
        .ok(AGENTS, "GetAgent", cp.body(json!({"agent_id": "alpha"})))
        .await;
    let out = agents_lifecycle_session(cp).await;
    // Reads are the Connect API's replies.
    agent_reads_are_the_connect_replies(&out, &all, &alpha);

    // The rotated key: a new secret, returned once; the old one stops working.
    a_rotated_key_replaces_the_old_one(cp, &out, &k1).await;

    // The revoked key is gone and refused; revoking it again is refused.
    a_revoked_key_is_gone_and_refused(cp, &out, &k2).await;

    // Revoked for good: its keys stop working and it cannot be reactivated.
    a_revoked_agent_cannot_be_reactivated(cp, &out, &beta_key).await;

    // Only a revoked agent is deleted; then it is gone from every read, and deleting it
    // again is refused.
    only_a_revoked_agent_is_deleted(cp, &out, &all).await;
}

/// Lists and gets agents, rotates and revokes alpha's keys, revokes and tries to reactivate
/// beta, and deletes gamma before and after revoking it.
async fn agents_lifecycle_session(cp: &ControlPlane) -> Value {
    session(
        cp,
        &cp.key,
        &[
            ("svc_agents_list", json!({})),
            (
                "svc_agents_list",
                json!({"status": "active", "limit": 1, "offset": 1}),
            ),
            ("svc_agents_get", json!({"agent_id": "alpha"})),
            (
                "svc_agents_rotate_key",
                json!({"agent": "alpha", "key_name": "k1"}),
            ),
            (
                "svc_agents_revoke_key",
                json!({"agent": "alpha", "key_name": "k2"}),
            ),
            (
                "svc_agents_revoke_key",
                json!({"agent": "alpha", "key_name": "k2"}),
            ),
            (
                "svc_agents_revoke",
                json!({"agent_id": "beta", "reason": "leaked key"}),
            ),
            ("svc_agents_reactivate", json!({"agent_id": "beta"})),
            ("svc_agents_delete", json!({"agent_id": "gamma"})),
            ("svc_agents_revoke", json!({"agent_id": "gamma"})),
            (
                "svc_agents_delete",
                json!({"agent_id": "gamma", "reason": "retired"}),
            ),
            ("svc_agents_delete", json!({"agent_id": "gamma"})),
            ("svc_agents_list", json!({"status": "revoked"})),
            ("svc_agents_get", json!({"agent_id": "gamma"})),
        ],
    )
    .await
}

fn agent_reads_are_the_connect_replies(out: &Value, all: &Value, alpha: &Value) {
    assert_eq!(&ok(out, 0), all);
    assert_eq!(all["total"], 3);
    assert_eq!(names(&all["agents"]), ["alpha", "beta", "gamma"]);
    let page = ok(out, 1);
    assert_eq!(page["agents"].as_array().unwrap().len(), 1, "{page}");
    assert_eq!(
        page["total"], 2,
        "active ones across pages; gamma, with no key yet, is provisioned"
    );
    assert_ne!(page["agents"][0]["name"], "gamma", "{page}");
    assert_eq!(&ok(out, 2), alpha);
    assert_eq!(alpha["agent"]["name"], "alpha");
}

async fn a_rotated_key_replaces_the_old_one(cp: &ControlPlane, out: &Value, k1: &str) {
    let rotated = ok(out, 3);
    let new_k1 = text(&rotated["token"]);
    assert!(new_k1.starts_with("svc_"), "{rotated}");
    assert_ne!(new_k1, k1);
    assert_eq!(rotated["key"]["name"], "k1");
    assert!(rotated["key"]["rotated_at"].is_string(), "{rotated}");
    exchange(cp, k1).await.expect_error("unauthenticated", 401);
    let exchanged = exchange(cp, &new_k1).await;
    assert_eq!(exchanged.status, 200, "{}", exchanged.text);
    assert_eq!(exchanged.body["gateway_id"], cp.default_gateway_id.as_str());
}

async fn a_revoked_key_is_gone_and_refused(cp: &ControlPlane, out: &Value, k2: &str) {
    ok(out, 4);
    assert_eq!(refused(out, 5), "not_found");
    let keys = cp
        .ok(
            AGENTS,
            "ListAgentKeys",
            cp.body(json!({"agent_id": "alpha"})),
        )
        .await;
    assert_eq!(names(&keys["keys"]), ["k1"], "{keys}");
    exchange(cp, k2).await.expect_error("unauthenticated", 401);
}

async fn a_revoked_agent_cannot_be_reactivated(cp: &ControlPlane, out: &Value, beta_key: &str) {
    let revoked = ok(out, 6);
    assert_eq!(revoked["agent"]["status"], "revoked");
    let beta_id = text(&revoked["agent"]["agent_id"]);
    assert_eq!(revoked["affected_agent_ids"], json!([beta_id]));
    assert_eq!(refused(out, 7), "failed_precondition");
    let beta = cp
        .ok(AGENTS, "GetAgent", cp.body(json!({"agent_id": "beta"})))
        .await;
    assert_eq!(beta["agent"]["status"], "revoked");
    assert_eq!(beta["agent"]["status_reason"], "leaked key");
    exchange(cp, beta_key)
        .await
        .expect_error("failed_precondition", 400)
        .mentions("is revoked");
}

async fn only_a_revoked_agent_is_deleted(cp: &ControlPlane, out: &Value, all: &Value) {
    assert_eq!(refused(out, 8), "failed_precondition");
    assert!(
        message(out, 8).contains("revoke it before deleting"),
        "{}",
        message(out, 8)
    );
    assert_eq!(ok(out, 9)["agent"]["status"], "revoked");
    let gamma_id = text(
        &all["agents"]
            .as_array()
            .unwrap()
            .iter()
            .find(|a| a["name"] == "gamma")
            .unwrap()["agent_id"],
    );
    assert_eq!(ok(out, 10)["deleted_agent_ids"], json!([gamma_id]));
    assert_eq!(refused(out, 11), "not_found");
    let only_revoked = ok(out, 12);
    assert_eq!(names(&only_revoked["agents"]), ["beta"]);
    assert_eq!(only_revoked["total"], 1);
    assert_eq!(refused(out, 13), "not_found");
    cp.call(AGENTS, "GetAgent", cp.body(json!({"agent_id": "gamma"})))
        .await
        .expect_error("not_found", 404);
    let left = cp.ok(AGENTS, "ListAgents", cp.body(json!({}))).await;
    assert_eq!(names(&left["agents"]), ["alpha", "beta"]);
}

/// Client settings for a provider that is never contacted: the consent link is made without
/// discovery or registration.
fn oauth_settings() -> Value {
    json!({"authorization_url": "https://idp.example.com/authorize",
           "token_url": "https://idp.example.com/token", "client_id": "portcullis"})
}

/// A connection as `operation` (a Get…Connection) reads it.
async fn read(cp: &ControlPlane, operation: &str, id: &str) -> Value {
    cp.ok(MGMT, operation, cp.body(json!({"connection_id": id})))
        .await
}

async fn shared_oauth_consent_and_disconnect(cp: &ControlPlane) {
    let (tool_id, model_id) = shared_oauth_tool_and_model(cp).await;
    let links = consent_links_are_begun_for_oauth_connections_only(cp, &tool_id, &model_id).await;
    // The tool's link sends the browser to the provider's authorization endpoint.
    let browser = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let opened = browser.get(&links[0]).send().await.unwrap();
    assert_eq!(opened.status().as_u16(), 302);
    let location = opened.headers()["location"].to_str().unwrap().to_string();
    assert!(
        location.starts_with("https://idp.example.com/authorize?")
            && location.contains("client_id=portcullis"),
        "{location}"
    );

    disconnects_keep_only_the_client_settings(cp, &tool_id, &model_id).await;
    // The model's unused link was withdrawn.
    let stale = browser.get(&links[1]).send().await.unwrap();
    assert_eq!(stale.status().as_u16(), 404);
}

/// A shared OAuth tool connection `ot` and model connection `om`, not yet consented: their ids.
async fn shared_oauth_tool_and_model(cp: &ControlPlane) -> (String, String) {
    let tool_id = text(
        &cp.ok(
            MGMT,
            "CreateMCPServerConnection",
            cp.body(json!({"name": "ot", "protocol": "streamable-http",
                "protocol_config": {"url": "http://127.0.0.1:9/mcp"}, "auth_method": "oauth",
                "credential_type": "shared", "auth_config": oauth_settings()})),
        )
        .await["connection_id"],
    );
    let model_id = text(
        &cp.ok(
            MGMT,
            "CreateLLMModelConnection",
            cp.body(json!({"name": "om", "provider": "openai",
                "provider_config": {"model": "gpt-4o"}, "auth_method": "oauth",
                "credential_type": "shared", "auth_config": oauth_settings()})),
        )
        .await["connection_id"],
    );
    assert_eq!(
        read(cp, "GetMCPServerConnection", &tool_id).await["tool"]["oauth_state"],
        "disconnected"
    );
    (tool_id, model_id)
}

/// Begins consent for `ot` and `om` (and refuses it for a tool without OAuth): the tool's
/// and the model's consent links.
async fn consent_links_are_begun_for_oauth_connections_only(
    cp: &ControlPlane,
    tool_id: &str,
    model_id: &str,
) -> Vec<String> {
    let out = session(
        cp,
        &cp.key,
        &[
            (
                "svc_tool_add",
                json!({"name": "plain", "url": "http://127.0.0.1:9/mcp"}),
            ),
            ("svc_tool_oauth_connect", json!({"name": "ot"})),
            ("svc_model_oauth_connect", json!({"name": "om"})),
            ("svc_tool_oauth_connect", json!({"name": "plain"})),
        ],
    )
    .await;
    let mut links = Vec::new();
    for i in [1, 2] {
        let begun = ok(&out, i);
        let url = text(&begun["consent_url"]);
        assert!(url.contains("/connect/"), "{begun}");
        assert!(begun["expires_at"].is_string(), "{begun}");
        links.push(url);
    }
    assert_eq!(refused(&out, 3), "failed_precondition");
    assert!(
        message(&out, 3).contains("auth_method=oauth"),
        "{}",
        message(&out, 3)
    );
    let tool = read(cp, "GetMCPServerConnection", tool_id).await;
    assert_eq!(tool["tool"]["oauth_state"], "consent_pending", "{tool}");
    let model = read(cp, "GetLLMModelConnection", model_id).await;
    assert_eq!(model["model"]["oauth_state"], "consent_pending", "{model}");
    links
}

async fn disconnects_keep_only_the_client_settings(
    cp: &ControlPlane,
    tool_id: &str,
    model_id: &str,
) {
    let out = session(
        cp,
        &cp.key,
        &[
            ("svc_tool_oauth_disconnect", json!({"name": "ot"})),
            ("svc_model_oauth_disconnect", json!({"name": "om"})),
            ("svc_model_oauth_disconnect", json!({"name": "nope"})),
            ("svc_tool_get", json!({"name": "ot"})),
        ],
    )
    .await;
    assert_eq!(ok(&out, 0), json!({}));
    assert_eq!(ok(&out, 1), json!({}));
    assert_eq!(refused(&out, 2), "not_found");
    // No grant and no consent under way; the client settings stay.
    let tool = read(cp, "GetMCPServerConnection", tool_id).await;
    assert_eq!(ok(&out, 3), tool);
    assert_eq!(tool["tool"]["oauth_state"], "disconnected", "{tool}");
    assert_eq!(tool["tool"]["has_credential"], false, "{tool}");
    assert_eq!(tool["tool"]["secret_keys"], json!([]), "{tool}");
    assert_eq!(tool["tool"]["auth_config"]["client_id"], "portcullis");
    let model = read(cp, "GetLLMModelConnection", model_id).await;
    assert_eq!(model["model"]["oauth_state"], "disconnected", "{model}");
    assert_eq!(model["model"]["has_credential"], false, "{model}");
    assert_eq!(model["model"]["auth_config"]["client_id"], "portcullis");
}
