//! `ExchangeAgentKey` over real processes: an agent key traded for a short-lived EdDSA token
//! that one gateway accepts in its place on every route (the official OpenAI and MCP SDKs,
//! Anthropic's `x-api-key`), refused on another gateway, when tampered with, once the agent is
//! suspended, and after it expires; only an agent key can be exchanged, by itself or by a
//! platform key on its behalf (the admin client's form).

use portcullis_tests::controlplane::{AGENTS, MGMT};
use portcullis_tests::process::bin;
use portcullis_tests::{python, GatewayProcess};
use serde_json::{json, Value};

use crate::world::{http, world, world_on, World};

const SERVICE: &str = "svc.agents.v1.AgentService";

async fn exchange(w: &World, key: &str, body: Value) -> portcullis_tests::controlplane::Reply {
    w.cp.call_as(key, SERVICE, "ExchangeAgentKey", body).await
}

async fn chat_with(w: &World, gw: &GatewayProcess, token: &str) -> crate::world::Http {
    http(
        reqwest::Client::new()
            .post(format!(
                "{}/v1/chat/completions",
                gw.gateway_url(&w.gateway_id)
            ))
            .bearer_auth(token)
            .json(&json!({"model": "gpt", "messages": [{"role": "user", "content": "hi"}]})),
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_exchanged_token_stands_in_for_the_key_on_one_gateway() {
    let w = world().await;
    let t = portcullis_client::exchange_agent_key(&w.cp.url, &w.key, None)
        .await
        .unwrap();
    assert_eq!(t.gateway_id, w.gateway_id, "the agent's one gateway");
    assert_eq!(
        (t.token_type.as_str(), t.expires_in),
        ("Bearer", 600),
        "token_ttl 10m"
    );
    assert!(t.endpoints.is_some());
    // The exchange is audited, with the agent as its actor.
    the_exchange_is_audited_without_the_key(&w, &t.access_token).await;
    w.gw.caught_up(&w.cp).await;

    the_token_works_on_every_route_and_stays_here(&w, &t.access_token).await;

    // A character in the middle of the signature: every bit of it counts (the last one of a
    // base64url signature holds padding bits, which decoding alone may reject).
    let sig_at = t.access_token.rfind('.').unwrap() + 20;
    let mut forged = t.access_token.clone().into_bytes();
    forged[sig_at] = if forged[sig_at] == b'A' { b'B' } else { b'A' };
    let forged = String::from_utf8(forged).unwrap();
    let refused = chat_with(&w, &w.gw, &forged).await;
    assert_eq!(refused.status, 401, "a tampered token: {}", refused.text);

    a_suspended_agents_token_stops_working(&w, &t.access_token).await;
}

async fn the_exchange_is_audited_without_the_key(w: &World, access_token: &str) {
    let filter = portcullis_shared::audit::QueryEventsRequest {
        workspace_id: Some(w.cp.workspace_id.clone()),
        event_types: vec!["mgmt.operation".into()],
        operation: Some("ExchangeAgentKey".into()),
        ..Default::default()
    };
    let event = crate::audit::wait(&w.cp, &filter).await;
    assert_eq!(
        (event.actor.kind.as_str(), event.result.as_str()),
        ("ACTOR_KIND_AGENT", "RESULT_ALLOWED")
    );
    assert_eq!(event.scope.agent_id, event.actor.id);
    assert!(
        !serde_json::to_string(&event).unwrap().contains(&w.key),
        "the key is not recorded"
    );
    assert!(
        !access_token.contains(&w.key),
        "the key is not in the token"
    );
}

/// The OpenAI SDK, Anthropic's `x-api-key` and the MCP SDK all accept the token, which never
/// reaches the upstream.
async fn the_token_works_on_every_route_and_stays_here(w: &World, access_token: &str) {
    let base = w.openai_base();
    let sdk = python::run("openai_chat.py", &[&base, access_token, "gpt", "plain"]).await;
    assert_eq!(sdk["content"], "Hello from the fake upstream.", "{sdk}");
    let anthropic = http(
        reqwest::Client::new()
            .post(format!("{}/v1/messages", w.gw.gateway_url(&w.gateway_id)))
            .header("x-api-key", access_token)
            .json(&json!({"model": "gpt", "max_tokens": 16, "messages": [{"role": "user", "content": "hi"}]})),
    )
    .await;
    assert_eq!(anthropic.status, 200, "{}", anthropic.text);
    let mcp_url = format!("{}/mcp", w.gw.gateway_url(&w.gateway_id));
    let mcp = python::run("mcp_client.py", &[&mcp_url, access_token]).await;
    assert!(
        mcp.get("error").is_none() && mcp["tools"].is_array(),
        "{mcp}"
    );
    for r in w.fake.requests() {
        let sent = format!("{:?}", r.headers);
        assert!(
            !sent.contains(access_token),
            "the token reached the upstream"
        );
    }
}

async fn a_suspended_agents_token_stops_working(w: &World, access_token: &str) {
    w.cp.ok(
        AGENTS,
        "SuspendAgent",
        w.cp.body(json!({"agent_id": "bot"})),
    )
    .await;
    let started = std::time::Instant::now();
    loop {
        let r = chat_with(w, &w.gw, access_token).await;
        if r.status == 403 {
            assert!(r.text.contains("suspended"), "{}", r.text);
            break;
        }
        assert!(
            started.elapsed() < std::time::Duration::from_secs(1),
            "a suspended agent's token still works: {}",
            r.text
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    exchange(w, &w.key, json!({}))
        .await
        .expect_error("failed_precondition", 400)
        .mentions("suspended");
}

/// On both stores: the signing keys live in the database (migration 0006).
mod a_token_is_for_one_gateway_and_only_agent_keys_are_exchanged {
    use portcullis_tests::Backend;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn sqlite() {
        super::one_gateway_only_agent_keys(Backend::Sqlite).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn postgres() {
        super::one_gateway_only_agent_keys(Backend::Postgres).await;
    }
}

async fn one_gateway_only_agent_keys(backend: portcullis_tests::Backend) {
    let w = world_on(backend).await;
    let cp = &w.cp;
    let other = cp
        .ok(MGMT, "CreateGateway", cp.body(json!({"name": "team"})))
        .await["gateway"]["gateway_id"]
        .as_str()
        .unwrap()
        .to_string();
    cp.ok(
        AGENTS,
        "UpdateAgent",
        cp.body(json!({"agent_id": "bot", "allowed_gateway_ids": [w.gateway_id, other], "token_ttl": "1m"})),
    )
    .await;
    exchange(&w, &w.key, json!({}))
        .await
        .expect_error("invalid_argument", 400)
        .mentions("gateway_id is required");
    let for_other = exchange(&w, &w.key, json!({"gateway_id": other})).await;
    assert_eq!(for_other.status, 200, "{}", for_other.text);
    assert_eq!(for_other.body["expires_in"], 60, "token_ttl 1m");
    w.gw.caught_up(cp).await;
    let token = for_other.body["access_token"].as_str().unwrap();
    let refused = chat_with(&w, &w.gw, token).await;
    assert_eq!(refused.status, 401, "{}", refused.text);
    assert!(refused.text.contains("another gateway"), "{}", refused.text);

    // The admin client's form: a platform key exchanging an agent's key; never its own.
    exchange(&w, &cp.key, json!({}))
        .await
        .expect_error("invalid_argument", 400)
        .mentions("agent_key is required");
    exchange(&w, &cp.key, json!({"agent_key": cp.key}))
        .await
        .expect_error("invalid_argument", 400)
        .mentions("agent API key");
    let admin = portcullis_client::AdminClient::new(&cp.url, &cp.key).unwrap();
    let on_behalf = admin
        .exchange_agent_key(&w.key, Some(&w.gateway_id))
        .await
        .unwrap();
    assert_eq!(
        chat_with(&w, &w.gw, &on_behalf.access_token).await.status,
        200
    );
    exchange(&w, &w.key, json!({"agent_key": w.key}))
        .await
        .expect_error("invalid_argument", 400);
    exchange(&w, "svc_not_a_real_key_0000000000000000000000", json!({}))
        .await
        .expect_error("unauthenticated", 401);

    // The CLI trades the key with no platform key at hand.
    let out = tokio::process::Command::new(bin("portcullis"))
        .args(["key", "exchange", "--gateway", &w.gateway_id, "--json"])
        .env("PORTCULLIS_URL", &cp.url)
        .env("PORTCULLIS_AGENT_KEY", &w.key)
        .env_remove("PORTCULLIS_KEY")
        .current_dir(tempfile::tempdir().unwrap().path())
        .output()
        .await
        .unwrap();
    let printed: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|_| {
        panic!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    assert_eq!(printed["gateway_id"], w.gateway_id.as_str());
    let token = printed["access_token"].as_str().unwrap();
    assert_eq!(chat_with(&w, &w.gw, token).await.status, 200);

    cp.ok(
        AGENTS,
        "RevokeAgentKey",
        cp.body(json!({"agent_id": "bot", "key_name": "k"})),
    )
    .await;
    exchange(&w, &w.key, json!({"gateway_id": other}))
        .await
        .expect_error("unauthenticated", 401);
}

/// Expiry waits out a one-minute `token_ttl` and the 30 s leeway.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_exchanged_token_expires_after_the_agents_token_ttl() {
    let w = world().await;
    w.cp.ok(
        AGENTS,
        "UpdateAgent",
        w.cp.body(json!({"agent_id": "bot", "token_ttl": "1m"})),
    )
    .await;
    let t = portcullis_client::exchange_agent_key(&w.cp.url, &w.key, None)
        .await
        .unwrap();
    w.gw.caught_up(&w.cp).await;
    assert_eq!(chat_with(&w, &w.gw, &t.access_token).await.status, 200);
    tokio::time::sleep(std::time::Duration::from_secs(60 + 31)).await;
    let expired = chat_with(&w, &w.gw, &t.access_token).await;
    assert_eq!(expired.status, 401, "{}", expired.text);
    assert!(expired.text.contains("expired"), "{}", expired.text);
    assert_eq!(
        chat_with(&w, &w.gw, &w.key).await.status,
        200,
        "the key still works"
    );
}
