//! Upstream OAuth through the REST door (`POST /v1/tools/{id}/oauth/connect` and
//! `…/oauth/disconnect`, docs/api.md *Tool connections*), against the real `oidc-provider`
//! and an MCP server that accepts only its tokens. A shared tool: connect answers a one-use
//! consent link, the consent makes the tool `connected`, disconnect revokes the grant at the
//! provider and leaves it `disconnected` (and does nothing the second time). A per-user tool:
//! the administrator's own grant needs `act_as_sub`, and disconnect revokes it too. Bad input
//! gets the Connect error shape with the operation's code, and changes nothing. Models have
//! no REST door (docs/api.md gives REST paths for tools only; SPEC: "REST paths for models …
//! not shown"): their connect and disconnect are exercised over Connect in `oauth.rs`.

use portcullis_tests::controlplane::MGMT;
use portcullis_tests::oauth_upstream::OAuthUpstream;
use portcullis_tests::oidc::OidcIssuer;
use portcullis_tests::{Backend, ControlPlane, Reply};
use serde_json::{json, Value};

use crate::oauth::{events, oauth_state, oauth_tool};

/// `POST /v1/tools/{id}/oauth/{action}` with `body`, with the admin key unless `key` says
/// otherwise (`Some("")`: no key at all).
async fn rest(cp: &ControlPlane, id: &str, action: &str, body: Value, key: Option<&str>) -> Reply {
    let url = format!("{}/v1/tools/{id}/oauth/{action}", cp.url);
    let mut request = reqwest::Client::new().post(url).json(&body);
    match key.unwrap_or(&cp.key) {
        "" => {}
        key => request = request.bearer_auth(key),
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    assert!(
        response.headers().contains_key("x-request-id"),
        "every reply carries X-Request-Id"
    );
    let text = response.text().await.unwrap();
    let body = serde_json::from_str(&text).unwrap_or(Value::Null);
    Reply { status, body, text }
}

/// The admin's call with `workspace_id` and `fields`, answered 200; the reply's body.
async fn rest_ok(cp: &ControlPlane, id: &str, action: &str, fields: Value) -> Value {
    let reply = rest(cp, id, action, cp.body(fields), None).await;
    assert_eq!(reply.status, 200, "{action}: {}", reply.text);
    reply.body
}

/// A REST error: the Connect error JSON, `{"code", "message"}`, with this code and status.
#[track_caller]
fn rest_error<'a>(reply: &'a Reply, code: &str, status: u16) -> &'a Reply {
    assert!(
        reply.body["message"]
            .as_str()
            .is_some_and(|m| !m.is_empty()),
        "{}",
        reply.text
    );
    reply.expect_error(code, status)
}

/// Connect over REST: the one-use link, good for about ten minutes.
async fn connect_link(cp: &ControlPlane, id: &str, fields: Value) -> String {
    let begun = rest_ok(cp, id, "connect", fields).await;
    let url = begun["consent_url"].as_str().unwrap().to_string();
    assert!(
        url.starts_with(&cp.url) && url.contains("/connect/"),
        "{begun}"
    );
    let expires: chrono::DateTime<chrono::Utc> =
        begun["expires_at"].as_str().unwrap().parse().unwrap();
    let left = expires - chrono::Utc::now();
    assert!(
        left > chrono::Duration::minutes(9) && left <= chrono::Duration::minutes(10),
        "{begun}"
    );
    url
}

/// Opens the link as a browser would and consents at the provider as `login`.
async fn consent(issuer: &OidcIssuer, url: &str, login: &str) {
    let (status, page) = issuer.browse(url, login).await;
    assert_eq!(status, 200, "{page}");
    assert!(page.contains("is connected"), "{page}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tool_oauth_connect_and_disconnect_over_rest() {
    let issuer = OidcIssuer::start().await;
    let mcp = OAuthUpstream::start(&issuer.issuer).await;
    let cp = ControlPlane::start(Backend::Sqlite).await;
    let shared = oauth_tool(&cp, "gh", "shared", &mcp.url()).await;
    let per_user = oauth_tool(&cp, "pu", "per-user", &mcp.url()).await;
    refusals_change_nothing(&cp, &shared, &per_user).await;
    shared_tool(&cp, &issuer, &shared).await;
    per_user_tool(&cp, &issuer, &per_user).await;
}

/// Connect makes the shared grant every call uses; disconnect revokes it at the provider.
async fn shared_tool(cp: &ControlPlane, issuer: &OidcIssuer, id: &str) {
    let url = connect_link(cp, id, json!({})).await;
    let pending = oauth_state(cp, id).await;
    assert_eq!(pending["oauth_state"], "consent_pending", "{pending}");
    consent(issuer, &url, "admin").await;
    let connected = oauth_state(cp, id).await;
    assert_eq!(connected["oauth_state"], "connected", "{connected}");
    assert_eq!(connected["auth_config"]["dynamic_registration"], true);
    let (status, _) = issuer.browse(&url, "admin").await;
    assert_eq!(status, 410, "the link works once");
    assert_eq!(events(cp, "oauth.connected").await.len(), 1);

    let revocations = issuer.stat("revocations").await;
    let reply = rest_ok(cp, id, "disconnect", json!({})).await;
    assert_eq!(reply, json!({}));
    assert_eq!(issuer.stat("revocations").await, revocations + 1);
    let disconnected = oauth_state(cp, id).await;
    assert_eq!(
        disconnected["oauth_state"], "disconnected",
        "{disconnected}"
    );
    let client_id = &disconnected["auth_config"]["client_id"];
    assert_eq!(
        client_id, &connected["auth_config"]["client_id"],
        "the client settings stay"
    );
    assert_eq!(events(cp, "oauth.disconnected").await.len(), 1);

    // Disconnecting a disconnected tool does nothing.
    assert_eq!(rest_ok(cp, id, "disconnect", json!({})).await, json!({}));
    assert_eq!(issuer.stat("revocations").await, revocations + 1);
    assert_eq!(events(cp, "oauth.disconnected").await.len(), 1);
}

async fn people(cp: &ControlPlane, id: &str) -> Vec<String> {
    let body = cp.body(json!({"connection_id": id}));
    let listed = cp.ok(MGMT, "ListUserCredentials", body).await;
    let list = listed["credentials"].as_array().unwrap().iter();
    list.map(|c| c["subject"].as_str().unwrap().to_string())
        .collect()
}

/// On a per-user tool the link is for the administrator's own grant, as `act_as_sub`;
/// disconnect revokes every stored grant.
async fn per_user_tool(cp: &ControlPlane, issuer: &OidcIssuer, id: &str) {
    let url = connect_link(cp, id, json!({"act_as_sub": "admin@example.com"})).await;
    consent(issuer, &url, "admin-at-idp").await;
    assert_eq!(people(cp, id).await, ["admin@example.com"]);

    let revocations = issuer.stat("revocations").await;
    assert_eq!(rest_ok(cp, id, "disconnect", json!({})).await, json!({}));
    assert_eq!(issuer.stat("revocations").await, revocations + 1);
    assert!(people(cp, id).await.is_empty(), "the grant is deleted");
}

/// Each refused with the operation's code in the Connect error shape; nothing is connected,
/// nothing revoked, no link made.
async fn refusals_change_nothing(cp: &ControlPlane, shared: &str, per_user: &str) {
    let key_tool = cp
        .ok(
            MGMT,
            "CreateMCPServerConnection",
            cp.body(crate::tools::http("plain")),
        )
        .await;
    let plain = crate::tools::tid(&key_tool);
    for action in ["connect", "disconnect"] {
        let reply = rest(cp, &plain, action, cp.body(json!({})), None).await;
        rest_error(&reply, "failed_precondition", 400).mentions("needs auth_method=oauth");
        let unknown = uuid::Uuid::new_v4().to_string();
        let reply = rest(cp, &unknown, action, cp.body(json!({})), None).await;
        rest_error(&reply, "not_found", 404).mentions(&unknown);
        let reply = rest(cp, "not-an-id", action, cp.body(json!({})), None).await;
        rest_error(&reply, "invalid_argument", 400).mentions("connection_id");
        let other = json!({"connection_id": per_user});
        let reply = rest(cp, shared, action, cp.body(other), None).await;
        rest_error(&reply, "invalid_argument", 400).mentions("differs");
        let reply = rest(cp, shared, action, cp.body(json!({})), Some("")).await;
        rest_error(&reply, "unauthenticated", 401);
        let elsewhere = json!({"workspace_id": uuid::Uuid::new_v4().to_string()});
        let reply = rest(cp, shared, action, elsewhere, None).await;
        rest_error(&reply, "permission_denied", 403);
    }
    // A per-user tool's link is the administrator's own: whose, it must be told.
    let reply = rest(cp, per_user, "connect", cp.body(json!({})), None).await;
    rest_error(&reply, "invalid_argument", 400).mentions("act_as_sub is required");

    let state = oauth_state(cp, shared).await;
    assert_eq!(
        state["oauth_state"], "disconnected",
        "no link was made: {state}"
    );
    assert!(people(cp, per_user).await.is_empty());
    assert!(events(cp, "oauth.disconnected").await.is_empty());
}
