//! Upstream OAuth end to end against a real authorization server (`oidc-provider`, with
//! dynamic registration, PKCE, refresh, revocation and resource indicators) and an MCP server
//! that accepts only tokens it issued for it (introspection). The consent is driven over HTTP
//! as a browser would: the connect link, the provider's login and consent pages, the callback.
//!
//! Shared: discovered (RFC 9728 → OpenID metadata) and registered (RFC 7591) with no client
//! settings at all; an administrator's consent serves every agent; an expired access token is
//! refreshed once for many concurrent calls; disconnect revokes at the provider and the next
//! call fails; a refresh the provider refuses drops the grant and is audited. Per-user: `auth_required` and a `provision_url` until the person consents; then
//! their calls carry their own grant and another person is still refused; links work once; an
//! administrator's own grant (`act_as_sub`) syncs the per-user tool's catalog. Models: a
//! shared grant consented by an administrator, a per-user one from the 401's link, and
//! disconnect.

use std::time::Duration;

use portcullis_tests::act_as::hmac_header;
use portcullis_tests::controlplane::{AGENTS, MGMT};
use portcullis_tests::oauth_upstream::OAuthUpstream;
use portcullis_tests::oidc::OidcIssuer;
use portcullis_tests::{Backend, ControlPlane, GatewayProcess};
use serde_json::{json, Value};

use crate::world::{agent_id, register_with_key};

const SECRET: &str = "0123456789abcdef-oauth-hmac";

/// Creates a connection with `create` and offers it on the default gateway with `attach`;
/// its id.
async fn offered(cp: &ControlPlane, create: &str, body: Value, attach: &str) -> String {
    let created = cp.ok(MGMT, create, cp.body(body)).await;
    let id = created["connection_id"].as_str().unwrap().to_string();
    let body = json!({"gateway_id": cp.default_gateway_id, "connection_id": id});
    cp.ok(MGMT, attach, cp.body(body)).await;
    id
}

/// A tool connection `name` to the OAuth-protected server, offered on the default gateway.
pub(crate) async fn oauth_tool(
    cp: &ControlPlane,
    name: &str,
    credential_type: &str,
    url: &str,
) -> String {
    let body = json!({"name": name, "protocol": "streamable-http", "auth_method": "oauth",
        "credential_type": credential_type, "protocol_config": {"url": url}});
    offered(
        cp,
        "CreateMCPServerConnection",
        body,
        "AddGatewayToolSource",
    )
    .await
}

/// An agent with `allowed` (its allow lists), acting for `u1` and `u2` through HMAC when
/// `signin` names where those people sign in (to use their provision links); its key.
async fn agent(cp: &ControlPlane, name: &str, allowed: Value, signin: Option<&str>) -> String {
    let mut agent = json!({"name": name, "allowed_gateway_ids": [cp.default_gateway_id]});
    for (k, v) in allowed.as_object().unwrap() {
        agent[k] = v.clone();
    }
    if let Some(issuer) = signin {
        agent["actas_oidc_url"] = json!(issuer);
        agent["actas_method"] = json!("hmac");
        agent["actas_hmac_secret"] = json!(SECRET);
        agent["actas_allowed_subjects"] = json!(["u1", "u2"]);
    }
    register_with_key(cp, agent).await
}

/// One JSON-RPC call to the gateway's MCP endpoint, as `sub` when given; its HTTP status and
/// answer.
async fn rpc_status(
    cp: &ControlPlane,
    gw: &GatewayProcess,
    key: &str,
    sub: Option<&str>,
    method: &str,
    params: Value,
) -> (u16, Value) {
    let act_as = sub.map(|sub| hmac_header(sub, SECRET));
    rpc_acting(cp, gw, key, act_as.as_deref(), method, params).await
}

/// One JSON-RPC call with this act-as assertion, if any; its HTTP status and answer.
async fn rpc_acting(
    cp: &ControlPlane,
    gw: &GatewayProcess,
    key: &str,
    act_as: Option<&str>,
    method: &str,
    params: Value,
) -> (u16, Value) {
    let url = format!("{}/mcp", gw.gateway_url(&cp.default_gateway_id));
    let mut request = reqwest::Client::new().post(url).bearer_auth(key);
    if let Some(act_as) = act_as {
        request = request.header("x-svc-act-as", act_as);
    }
    let r = request
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}))
        .send()
        .await
        .unwrap();
    (r.status().as_u16(), r.json().await.unwrap())
}

/// [`rpc_status`], answered with HTTP 200.
async fn rpc(
    cp: &ControlPlane,
    gw: &GatewayProcess,
    key: &str,
    sub: Option<&str>,
    method: &str,
    params: Value,
) -> Value {
    let (status, body) = rpc_status(cp, gw, key, sub, method, params).await;
    assert_eq!(status, 200, "{body}");
    body
}

async fn whoami(
    cp: &ControlPlane,
    gw: &GatewayProcess,
    key: &str,
    sub: Option<&str>,
    tool: &str,
) -> Value {
    let params = json!({"name": format!("{tool}/whoami"), "arguments": {}});
    rpc(cp, gw, key, sub, "tools/call", params).await
}

/// Lists and calls until the call answers (the first list records the operation in the
/// catalog, which the next snapshot brings); the text it answered.
async fn first_answer(
    cp: &ControlPlane,
    gw: &GatewayProcess,
    key: &str,
    sub: Option<&str>,
    tool: &str,
) -> String {
    let mut answer = Value::Null;
    for _ in 0..100 {
        rpc(cp, gw, key, sub, "tools/list", json!({})).await;
        answer = whoami(cp, gw, key, sub, tool).await;
        if answer.get("result").is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    text(&answer)
}

fn text(answer: &Value) -> String {
    answer["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("not a tool result: {answer}"))
        .to_string()
}

/// The tool connection as `GetMCPServerConnection` shows it.
pub(crate) async fn oauth_state(cp: &ControlPlane, id: &str) -> Value {
    cp.ok(
        MGMT,
        "GetMCPServerConnection",
        cp.body(json!({"connection_id": id})),
    )
    .await["tool"]
        .clone()
}

/// An administrator's consent: `operation` (a Begin…OAuthConnect) with `body`, completed at
/// the provider as `login`; the consent URL.
async fn consent(
    cp: &ControlPlane,
    issuer: &OidcIssuer,
    operation: &str,
    body: Value,
    login: &str,
) -> String {
    let begun = cp.ok(MGMT, operation, cp.body(body)).await;
    let url = begun["consent_url"].as_str().unwrap().to_string();
    assert!(url.contains("/connect/"), "{begun}");
    assert!(begun["expires_at"].as_str().is_some(), "{begun}");
    let (status, page) = issuer.browse(&url, login).await;
    assert_eq!(status, 200, "{page}");
    assert!(page.contains("is connected"), "{page}");
    url
}

/// The access tokens an upstream was sent appear nowhere else: not in the store (they are
/// sealed), either process's log, or the OAuth and call audit events.
async fn assert_unseen(cp: &ControlPlane, gw: &GatewayProcess, tokens: &[String]) {
    assert!(!tokens.is_empty(), "the upstream saw no token");
    let store = cp.dump_store().await;
    let (cp_logs, gw_logs) = (cp.logs(), gw.logs());
    let mut audit = Vec::new();
    for kind in [
        "oauth.connected",
        "credential.provisioned",
        "tool.call",
        "model.call",
    ] {
        audit.extend(events(cp, kind).await);
    }
    let audit = json!(audit).to_string();
    for t in tokens {
        assert!(!store.contains(t.as_str()), "a token is stored sealed");
        assert!(!cp_logs.contains(t.as_str()) && !gw_logs.contains(t.as_str()));
        assert!(!audit.contains(t.as_str()), "a token in an audit event");
    }
}

pub(crate) async fn events(cp: &ControlPlane, kind: &str) -> Vec<Value> {
    let found = cp
        .ok(
            "svc.audit.v1.AuditService",
            "QueryEvents",
            cp.body(json!({"event_types": [kind]})),
        )
        .await;
    found["events"].as_array().cloned().unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shared_oauth_tool_consented_refreshed_and_revoked() {
    let issuer = OidcIssuer::start().await;
    let mcp = OAuthUpstream::start(&issuer.issuer).await;
    let cp = ControlPlane::start(Backend::Sqlite).await;
    let id = oauth_tool(&cp, "gh", "shared", &mcp.url()).await;
    let got = oauth_state(&cp, &id).await;
    assert_eq!(got["oauth_state"], "disconnected", "{got}");
    let one = agent(&cp, "one", json!({"allowed_tools": ["gh/whoami"]}), None).await;
    let two = agent(&cp, "two", json!({"allowed_tools": ["gh/whoami"]}), None).await;
    let gw = GatewayProcess::start(&cp).await;

    // Not connected: nothing reaches the server.
    let refused = whoami(&cp, &gw, &one, None, "gh").await;
    assert!(refused.get("error").is_some(), "{refused}");

    // The consent: discovery and registration with no client settings given; short-lived
    // access tokens from now on, to see them refreshed.
    issuer.set_access_ttl(6).await;
    an_administrator_connects_the_shared_tool_once(&cp, &issuer, &id).await;

    // Every agent is served with the administrator's grant.
    assert_eq!(first_answer(&cp, &gw, &one, None, "gh").await, "admin");
    assert_eq!(text(&whoami(&cp, &gw, &two, None, "gh").await), "admin");

    // Expired: many concurrent calls, one refresh at the provider.
    tokio::time::sleep(Duration::from_millis(6_500)).await;
    let before = issuer.stat("refresh_grants").await;
    let calls = (0..16).map(|i| {
        let key = if i % 2 == 0 { one.clone() } else { two.clone() };
        let (cp, gw) = (&cp, &gw);
        async move { whoami(cp, gw, &key, None, "gh").await }
    });
    for answer in futures_util::future::join_all(calls).await {
        assert_eq!(text(&answer), "admin");
    }
    assert_eq!(
        issuer.stat("refresh_grants").await - before,
        1,
        "one refresh for 16 calls"
    );

    // Disconnect revokes at the provider; the settings stay; the next call fails.
    disconnect_revokes_at_the_provider_and_keeps_the_settings(&cp, &gw, &issuer, &id, &one).await;

    // Connected again; then the provider stops refreshing: the grant is dropped and audited,
    // the connection reads disconnected and calls are refused.
    a_refused_refresh_drops_the_grant(&cp, &gw, &issuer, &id, &one).await;

    // Audited; no token anywhere but where it is sent.
    assert_eq!(events(&cp, "oauth.connected").await.len(), 2);
    assert_eq!(events(&cp, "oauth.disconnected").await.len(), 1);
    assert_unseen(&cp, &gw, &mcp.tokens()).await;
}

async fn an_administrator_connects_the_shared_tool_once(
    cp: &ControlPlane,
    issuer: &OidcIssuer,
    id: &str,
) {
    let op = "BeginMCPServerOAuthConnect";
    let body = json!({"connection_id": id});
    // The first link from the command line (left unused).
    let dir = tempfile::tempdir().unwrap();
    let (code, out, err) =
        crate::cli::as_admin(cp, dir.path(), vec!["tool", "oauth-connect", "gh"]).await;
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("/connect/"), "{out}");
    let got = oauth_state(cp, id).await;
    assert_eq!(
        got["oauth_state"], "consent_pending",
        "an unused link is pending: {got}"
    );
    let consent_url = consent(cp, issuer, op, body, "admin").await;
    assert_eq!(issuer.stat("registrations").await, 1, "registered once");
    let got = oauth_state(cp, id).await;
    assert_eq!(got["oauth_state"], "connected", "{got}");
    assert_eq!(got["auth_config"]["dynamic_registration"], true, "{got}");
    assert!(got["auth_config"]["client_id"].as_str().is_some(), "{got}");
    let (status, _) = issuer.browse(&consent_url, "admin").await;
    assert_eq!(status, 410, "a connect link works once");
}

async fn disconnect_revokes_at_the_provider_and_keeps_the_settings(
    cp: &ControlPlane,
    gw: &GatewayProcess,
    issuer: &OidcIssuer,
    id: &str,
    key: &str,
) {
    let revocations = issuer.stat("revocations").await;
    cp.ok(
        MGMT,
        "DisconnectMCPServerOAuth",
        cp.body(json!({"connection_id": id})),
    )
    .await;
    assert_eq!(
        issuer.stat("revocations").await,
        revocations + 1,
        "{}",
        cp.logs()
    );
    let got = oauth_state(cp, id).await;
    assert_eq!(got["oauth_state"], "disconnected", "{got}");
    assert!(got["auth_config"]["client_id"].as_str().is_some(), "{got}");
    let after = whoami(cp, gw, key, None, "gh").await;
    assert!(after.get("error").is_some(), "{after}");
}

async fn a_refused_refresh_drops_the_grant(
    cp: &ControlPlane,
    gw: &GatewayProcess,
    issuer: &OidcIssuer,
    id: &str,
    key: &str,
) {
    let op = "BeginMCPServerOAuthConnect";
    consent(cp, issuer, op, json!({"connection_id": id}), "admin").await;
    assert_eq!(text(&whoami(cp, gw, key, None, "gh").await), "admin");
    issuer.refuse_refresh().await;
    tokio::time::sleep(Duration::from_millis(6_500)).await;
    let refused = whoami(cp, gw, key, None, "gh").await;
    assert!(refused.to_string().contains("not connected"), "{refused}");
    assert_eq!(oauth_state(cp, id).await["oauth_state"], "disconnected");
    let failed = events(cp, "oauth.refresh_failed").await;
    assert_eq!(failed.len(), 1, "{failed:?}");
    assert!(failed[0]["payload"]["reason"]
        .as_str()
        .unwrap()
        .contains("invalid_grant"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn per_user_oauth_tool_provisioned_by_each_person() {
    let issuer = OidcIssuer::start().await;
    let mcp = OAuthUpstream::start(&issuer.issuer).await;
    let cp = ControlPlane::start(Backend::Postgres).await;
    let id = oauth_tool(&cp, "pu", "per-user", &mcp.url()).await;
    let key = agent(
        &cp,
        "bot",
        json!({"allowed_tools": ["pu/whoami"]}),
        Some(&issuer.issuer),
    )
    .await;
    let gw = GatewayProcess::start(&cp).await;

    // No grant yet: advised in the list, refused with a link on call.
    let link = without_a_grant_a_person_is_given_a_link(&cp, &gw, &key).await;

    // Someone else signed in opening u1's link gets nowhere near the provider's consent.
    the_link_provisions_only_its_person(&cp, &gw, &issuer, &key, &link).await;

    // An expired link is refused.
    let expired = whoami(&cp, &gw, &key, Some("u2"), "pu").await["error"]["data"]["provision_url"]
        .as_str()
        .unwrap()
        .to_string();
    cp.db_strings(
        "UPDATE provision_tokens SET expires_at = 0 WHERE used_at IS NULL AND token_hash <> $1 \
         RETURNING token_hash",
        "",
    )
    .await;
    let (status, _) = issuer.browse(&expired, "u2").await;
    assert_eq!(status, 410, "an expired link is refused");

    // An administrator's own grant on a per-user tool names who they act as.
    let subjects = an_administrators_grant_names_who_they_act_as(&cp, &issuer, &id).await;

    // Deleting a person's grant revokes it at the provider.
    let u1 = subjects.iter().find(|s| s.starts_with("u1|")).unwrap();
    let revocations = issuer.stat("revocations").await;
    let body = json!({"connection_id": id, "subject": u1});
    cp.ok(MGMT, "DeleteUserCredential", cp.body(body)).await;
    assert_eq!(issuer.stat("revocations").await, revocations + 1);

    // With it, the administrator syncs the per-user tool's catalog.
    the_administrators_grant_syncs_the_catalog(&cp, &id).await;
    assert_eq!(events(&cp, "credential.provisioned").await.len(), 2);
    assert_unseen(&cp, &gw, &mcp.tokens()).await;
}

/// `u1` sees `pu` advised in the list and is refused its call: the provision link.
async fn without_a_grant_a_person_is_given_a_link(
    cp: &ControlPlane,
    gw: &GatewayProcess,
    key: &str,
) -> String {
    let listed = rpc(cp, gw, key, Some("u1"), "tools/list", json!({})).await;
    assert_eq!(listed["result"]["tools"], json!([]), "{listed}");
    let advice = &listed["result"]["_meta"]["auth_required"][0];
    assert_eq!(advice["connection_name"], "pu", "{listed}");
    let refusal = whoami(cp, gw, key, Some("u1"), "pu").await;
    assert_eq!(refusal["error"]["code"], -32001, "{refusal}");
    let data = &refusal["error"]["data"];
    assert_eq!(data["reason_code"], "credential_required", "{refusal}");
    data["provision_url"].as_str().unwrap().to_string()
}

async fn the_link_provisions_only_its_person(
    cp: &ControlPlane,
    gw: &GatewayProcess,
    issuer: &OidcIssuer,
    key: &str,
    link: &str,
) {
    let (status, page) = issuer.browse(link, "u2").await;
    assert_eq!(status, 403, "{page}");
    assert!(page.contains("made for another person"), "{page}");
    // The person signs in (the link is theirs), then consents at the provider (the same
    // provider here, so as the same account).
    let (status, page) = issuer.browse(link, "u1").await;
    assert_eq!(status, 200, "{page}");
    let (status, _) = issuer.browse(link, "u1").await;
    assert_eq!(status, 410, "a provision link works once");
    assert_eq!(first_answer(cp, gw, key, Some("u1"), "pu").await, "u1");
    let other = whoami(cp, gw, key, Some("u2"), "pu").await;
    assert_eq!(
        other["error"]["code"], -32001,
        "another person still needs their own: {other}"
    );
    let params = json!({"name": "pu/whoami", "arguments": {}});
    let (status, without) = rpc_status(cp, gw, key, None, "tools/call", params).await;
    assert_eq!(status, 403, "no person, no call: {without}");
}

/// Connects `admin@example.com`'s own grant: the subjects with a stored grant.
async fn an_administrators_grant_names_who_they_act_as(
    cp: &ControlPlane,
    issuer: &OidcIssuer,
    id: &str,
) -> Vec<String> {
    let reply = cp
        .call(
            MGMT,
            "BeginMCPServerOAuthConnect",
            cp.body(json!({"connection_id": id})),
        )
        .await;
    reply
        .expect_error("invalid_argument", 400)
        .mentions("act_as_sub");
    let body = json!({"connection_id": id, "act_as_sub": "admin@example.com"});
    consent(
        cp,
        issuer,
        "BeginMCPServerOAuthConnect",
        body,
        "admin-at-idp",
    )
    .await;
    let people = cp
        .ok(
            MGMT,
            "ListUserCredentials",
            cp.body(json!({"connection_id": id})),
        )
        .await;
    let subjects: Vec<String> = people["credentials"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|c| c["subject"].as_str().map(str::to_string))
        .collect();
    assert!(
        subjects.contains(&"admin@example.com".to_string()),
        "{people}"
    );
    subjects
}

async fn the_administrators_grant_syncs_the_catalog(cp: &ControlPlane, id: &str) {
    let synced = cp
        .ok(
            MGMT,
            "SyncMCPServerConnectionTools",
            cp.body(json!({"connection_id": id, "act_as_sub": "admin@example.com"})),
        )
        .await;
    assert_eq!(synced["tools"][0]["name"], "whoami", "{synced}");
    cp.call(
        MGMT,
        "SyncMCPServerConnectionTools",
        cp.body(json!({"connection_id": id, "act_as_sub": "nobody@example.com"})),
    )
    .await
    .expect_error("failed_precondition", 400)
    .mentions("no credential is stored for subject 'nobody@example.com'");
}

/// Per-user OAuth tools before anyone listed them: a person with a grant calls straight away
/// (the gateway discovers with their grant), and an administrator's own grant, attached with
/// `act_as_sub` and synced, serves the agent acting as them: listed, and called.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn per_user_oauth_tools_answer_without_a_prior_list() {
    let issuer = OidcIssuer::start().await;
    let mcp = OAuthUpstream::start(&issuer.issuer).await;
    let cp = ControlPlane::start(Backend::Sqlite).await;
    let pu = oauth_tool(&cp, "pu", "per-user", &mcp.url()).await;
    let pa = oauth_tool(&cp, "pa", "per-user", &mcp.url()).await;
    let allowed = json!({"allowed_tools": ["pu/whoami", "pa/whoami"]});
    let key = agent(&cp, "bot", allowed, Some(&issuer.issuer)).await;
    let oidc = json!({"agent_id": "bot", "actas_method": "oidc",
        "actas_allowed_subjects": ["u1", "admin@example.com"]});
    cp.ok(AGENTS, "UpdateAgent", cp.body(oidc)).await;
    let bot_id = agent_id(&cp, "bot").await;
    let gw = GatewayProcess::start(&cp).await;
    let bot = Acting {
        cp: &cp,
        gw: &gw,
        issuer: &issuer,
        key: &key,
        agent_id: &bot_id,
    };

    // A person: the link, their consent, then the call — no list in between.
    a_person_calls_straight_after_consenting(&bot, &pu).await;

    // The administrator's own grant and synced catalog; their agent lists and calls with it.
    the_administrators_synced_grant_serves_their_agent(&bot, &pa).await;

    // An HMAC identity is only as good as its agent's secret: that agent acting as the
    // administrator does not get their grant, but one attached for it by name.
    an_hmac_identity_gets_only_a_grant_attached_for_its_agent(&cp, &gw, &issuer, &pa).await;
}

/// Agent `bot` acting for people whose identity tokens `issuer` forges.
struct Acting<'a> {
    cp: &'a ControlPlane,
    gw: &'a GatewayProcess,
    issuer: &'a OidcIssuer,
    key: &'a str,
    agent_id: &'a str,
}

impl Acting<'_> {
    /// `{tool}/whoami` called acting for the holder of `token`.
    async fn call(&self, token: String, tool: &'static str) -> (u16, Value) {
        let params = json!({"name": format!("{tool}/whoami"), "arguments": {}});
        rpc_acting(
            self.cp,
            self.gw,
            self.key,
            Some(&token),
            "tools/call",
            params,
        )
        .await
    }
}

async fn a_person_calls_straight_after_consenting(bot: &Acting<'_>, pu: &str) {
    let (cp, issuer) = (bot.cp, bot.issuer);
    let u1 = issuer.forge("valid", "u1", Some(bot.agent_id)).await;
    let (_, refusal) = bot.call(u1.clone(), "pu").await;
    let link = refusal["error"]["data"]["provision_url"]
        .as_str()
        .unwrap_or_else(|| panic!("{refusal}"))
        .to_string();
    assert_eq!(issuer.browse(&link, "u1").await.0, 200);
    let (status, answer) = bot.call(u1, "pu").await;
    assert_eq!((status, text(&answer)), (200, "u1".to_string()), "{answer}");
    let catalog = cp
        .ok(
            MGMT,
            "ListConnectionTools",
            cp.body(json!({"connection_id": pu})),
        )
        .await;
    assert!(
        catalog["tools"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["name"] == "whoami" && t["status"] == "active"),
        "the call recorded the operation: {catalog}"
    );
}

async fn the_administrators_synced_grant_serves_their_agent(bot: &Acting<'_>, pa: &str) {
    let (cp, gw, issuer) = (bot.cp, bot.gw, bot.issuer);
    let body = json!({"connection_id": pa, "act_as_sub": "admin@example.com"});
    consent(
        cp,
        issuer,
        "BeginMCPServerOAuthConnect",
        body,
        "admin-at-idp",
    )
    .await;
    let body = json!({"connection_id": pa, "act_as_sub": "admin@example.com"});
    cp.ok(MGMT, "SyncMCPServerConnectionTools", cp.body(body))
        .await;
    gw.caught_up(cp).await;
    let admin = issuer
        .forge("valid", "admin@example.com", Some(bot.agent_id))
        .await;
    let (status, listed) = rpc_acting(cp, gw, bot.key, Some(&admin), "tools/list", json!({})).await;
    assert_eq!(status, 200, "{listed}");
    let names: Vec<&str> = listed["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert!(names.contains(&"pa/whoami"), "{listed}");
    let (status, answer) = bot.call(admin, "pa").await;
    assert_eq!(
        (status, text(&answer)),
        (200, "admin-at-idp".to_string()),
        "{answer}"
    );
}

async fn an_hmac_identity_gets_only_a_grant_attached_for_its_agent(
    cp: &ControlPlane,
    gw: &GatewayProcess,
    issuer: &OidcIssuer,
    pa: &str,
) {
    let hb = agent(
        cp,
        "hb",
        json!({"allowed_tools": ["pa/whoami"]}),
        Some(&issuer.issuer),
    )
    .await;
    cp.ok(
        AGENTS,
        "UpdateAgent",
        cp.body(json!({"agent_id": "hb", "actas_allowed_subjects": ["admin@example.com"]})),
    )
    .await;
    gw.caught_up(cp).await;
    let hmac_admin = hmac_header("admin@example.com", SECRET);
    let params = json!({"name": "pa/whoami", "arguments": {}});
    let (_, refused) = rpc_acting(cp, gw, &hb, Some(&hmac_admin), "tools/call", params).await;
    assert_eq!(
        refused["error"]["data"]["reason_code"], "credential_required",
        "{refused}"
    );
    let subject = format!("admin@example.com|hmac:{}", agent_id(cp, "hb").await);
    let body = json!({"connection_id": pa, "act_as_sub": subject});
    consent(
        cp,
        issuer,
        "BeginMCPServerOAuthConnect",
        body,
        "admin-at-idp",
    )
    .await;
    let (status, listed) =
        rpc_acting(cp, gw, &hb, Some(&hmac_admin), "tools/list", json!({})).await;
    assert_eq!(status, 200, "{listed}");
    assert_eq!(
        listed["result"]["tools"][0]["name"], "pa/whoami",
        "{listed}"
    );
}

/// A model connection to the OAuth-protected upstream's `/v1`, offered on the default gateway.
async fn oauth_model(
    cp: &ControlPlane,
    name: &str,
    ctype: &str,
    up: &OAuthUpstream,
    settings: &Value,
) -> String {
    let body = json!({"name": name, "provider": "openai_compatible", "auth_method": "oauth",
        "credential_type": ctype, "auth_config": settings,
        "provider_config": {"model": "oauth-model", "base_url": up.llm_base_url()}});
    offered(cp, "CreateLLMModelConnection", body, "AddGatewayModel").await
}

/// A chat completion as `u1`: HTTP status and body.
async fn chat(cp: &ControlPlane, gw: &GatewayProcess, key: &str, model: &str) -> (u16, Value) {
    let url = format!(
        "{}/v1/chat/completions",
        gw.gateway_url(&cp.default_gateway_id)
    );
    let r = reqwest::Client::new()
        .post(url)
        .bearer_auth(key)
        .header("x-svc-act-as", hmac_header("u1", SECRET))
        .json(&json!({"model": model, "messages": [{"role": "user", "content": "who am I?"}]}))
        .send()
        .await
        .unwrap();
    (r.status().as_u16(), r.json().await.unwrap())
}

fn said(answer: &(u16, Value)) -> String {
    assert_eq!(answer.0, 200, "{}", answer.1);
    answer.1["choices"][0]["message"]["content"]
        .as_str()
        .unwrap_or_else(|| panic!("{}", answer.1))
        .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oauth_models_shared_and_per_user() {
    let issuer = OidcIssuer::start().await;
    let up = OAuthUpstream::start(&issuer.issuer).await;
    let cp = ControlPlane::start(Backend::Postgres).await;
    // Endpoints from the issuer's metadata, the client registered dynamically, tokens issued
    // for the model's base URL.
    let settings =
        json!({"issuer": issuer.issuer, "resource": up.llm_base_url(), "scopes": "tools"});
    let team = oauth_model(&cp, "team", "shared", &up, &settings).await;
    let mine = oauth_model(&cp, "mine", "per-user", &up, &settings).await;
    let allowed = json!({"allowed_direct_model_names": ["team", "mine"]});
    let key = agent(&cp, "bot", allowed, Some(&issuer.issuer)).await;
    let gw = GatewayProcess::start(&cp).await;

    // Shared: refused until an administrator consents, then every call carries the grant.
    let (status, body) = chat(&cp, &gw, &key, "team").await;
    assert_ne!(status, 200, "{body}");
    assert!(body.to_string().contains("not connected"), "{body}");
    let body = json!({"connection_id": team});
    consent(&cp, &issuer, "BeginLLMOAuthConnect", body, "admin").await;
    let got = cp
        .ok(
            MGMT,
            "GetLLMModelConnection",
            cp.body(json!({"connection_id": team})),
        )
        .await;
    assert_eq!(got["model"]["oauth_state"], "connected", "{got}");
    assert_eq!(said(&chat(&cp, &gw, &key, "team").await), "admin");

    // Per-user: the person's own consent, from the link the 401 carries.
    cp.call(
        MGMT,
        "BeginLLMOAuthConnect",
        cp.body(json!({"connection_id": mine})),
    )
    .await
    .expect_error("failed_precondition", 400)
    .mentions("provision URL");
    let (status, body) = chat(&cp, &gw, &key, "mine").await;
    assert_eq!(status, 401, "{body}");
    assert_eq!(body["error"]["type"], "credential_required", "{body}");
    let link = body["error"]["provision_url"].as_str().unwrap().to_string();
    let (status, page) = issuer.browse(&link, "u1").await;
    assert_eq!(status, 200, "{page}");
    assert_eq!(said(&chat(&cp, &gw, &key, "mine").await), "u1");

    // Disconnected: revoked at the provider; the shared model is refused again.
    cp.ok(
        MGMT,
        "DisconnectLLMOAuth",
        cp.body(json!({"connection_id": team})),
    )
    .await;
    let (status, body) = chat(&cp, &gw, &key, "team").await;
    assert_ne!(status, 200, "{body}");

    // Connected again as another account: gateways drop the old token at once (the grant is
    // in the snapshot), not when their cache would have expired it (a minute).
    let body = json!({"connection_id": team});
    consent(&cp, &issuer, "BeginLLMOAuthConnect", body, "admin2").await;
    let mut answer = (0, Value::Null);
    for _ in 0..50 {
        answer = chat(&cp, &gw, &key, "team").await;
        if answer.0 == 200 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(said(&answer), "admin2");
    assert_unseen(&cp, &gw, &up.tokens()).await;
}
