//! The Rust SDK's agent client against a real gateway: calls succeed with their activity id
//! stamped and findable in the audit trail, and each refusal the gateway can give arrives as
//! the spec's error class with its fields.

use portcullis_client::agent::{wait_for_audit, AgentClient};
use portcullis_client::audit::WaitOptions;
use portcullis_client::{AdminClient, ClientError, GatewayErrorKind};
use portcullis_tests::controlplane::{AGENTS, MGMT};
use portcullis_tests::fake_mcp::FakeMcp;
use serde_json::{json, Value};

use crate::world::{model, world, World};

const TOOL_KEY: &str = "sdk-tool-upstream-key";

fn chat(model: &str) -> Value {
    json!({"model": model, "messages": [{"role": "user", "content": "hi"}]})
}

fn kind(result: Result<impl std::fmt::Debug, ClientError>) -> (GatewayErrorKind, ClientError) {
    let err = result.expect_err("the gateway should refuse");
    let kind = err
        .gateway()
        .unwrap_or_else(|| panic!("not a gateway error: {err}"))
        .kind
        .clone();
    (kind, err)
}

/// A second model on the gateway the agent is not allowed, one whose upstream is down, and a
/// tool connection (the fake MCP server) with `fail` allowed and `structured` not.
async fn furnish(w: &World, fake: &FakeMcp) {
    let cp = &w.cp;
    for (name, base) in [
        ("other", w.fake.base_url()),
        ("down", "http://127.0.0.1:9/v1".to_string()),
    ] {
        let id = model(cp, name, &base).await;
        cp.ok(
            MGMT,
            "AddGatewayModel",
            cp.body(json!({"gateway_id": w.gateway_id, "connection_id": id})),
        )
        .await;
    }
    let id = cp
        .ok(
            MGMT,
            "CreateMCPServerConnection",
            cp.body(json!({"name": "fake", "protocol": "streamable-http",
                "secret_values": {"Authorization": format!("Bearer {TOOL_KEY}")},
                "protocol_config": {"url": fake.url()}})),
        )
        .await["connection_id"]
        .clone();
    cp.ok(
        MGMT,
        "AddGatewayToolSource",
        cp.body(json!({"gateway_id": w.gateway_id, "connection_id": id})),
    )
    .await;
    cp.ok(
        AGENTS,
        "UpdateAgent",
        cp.body(
            json!({"agent_id": "bot", "allowed_direct_model_names": ["gpt", "down"],
            "allowed_tools": ["fake/fail", "fake/whoami"]}),
        ),
    )
    .await;
    w.gw.caught_up(cp).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agent_client_calls_and_every_refusal_class() {
    let w = world().await;
    let fake = FakeMcp::start(TOOL_KEY, false).await;
    furnish(&w, &fake).await;
    let url = w.gw.gateway_url(&w.gateway_id);
    let client = AgentClient::for_gateway(&url, &w.key, &w.gateway_id).unwrap();

    // A call succeeds, stamped with a minted activity id the audit trail finds it by.
    a_call_is_found_in_the_audit_trail_by_its_activity_id(&w, &client).await;

    // Tools: listed (discovery may take a moment), a result, and the tool's own error.
    tools_are_listed_called_and_refused_by_class(&w, &client).await;

    // Models: not offered, not allowed, upstream down, bad key.
    model_refusals_arrive_as_their_class(&client, &url).await;

    act_as_and_quota(&w, &client).await;
}

async fn a_call_is_found_in_the_audit_trail_by_its_activity_id(w: &World, client: &AgentClient) {
    let done = client.chat_completions(&chat("gpt")).await.unwrap();
    assert!(done.body["choices"].is_array(), "{}", done.body);
    assert_eq!(
        uuid::Uuid::parse_str(&done.activity_id)
            .unwrap()
            .get_version_num(),
        4
    );
    let admin = AdminClient::new(&w.cp.url, &w.cp.key).unwrap();
    let event = wait_for_audit(
        &admin,
        &done.activity_id,
        "model.call",
        WaitOptions::default(),
    )
    .await
    .unwrap();
    assert_eq!(event.correlation.activity_id, done.activity_id);
}

async fn tools_are_listed_called_and_refused_by_class(w: &World, client: &AgentClient) {
    let mut names = Vec::new();
    for _ in 0..100 {
        client.forget_tools();
        names = client
            .list_tools()
            .await
            .unwrap()
            .into_iter()
            .map(|t| t.name)
            .collect();
        if names.len() == 2 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert_eq!(names, ["fake/whoami", "fake/fail"]);
    let fixed = client.with_activity_id("sdk-activity-1");
    let who = fixed.call_tool("fake/whoami", json!({})).await.unwrap();
    assert_eq!(who.activity_id, "sdk-activity-1");
    assert!(!who.content.is_empty());
    match kind(client.call_tool("fake/fail", json!({})).await) {
        (GatewayErrorKind::ToolExecution { tool, content, .. }, err) => {
            assert_eq!(tool, "fake/fail");
            assert_eq!(content[0]["text"], "the tool failed on purpose");
            assert!(err.to_string().starts_with("tool execution error"), "{err}");
        }
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        kind(client.call_tool("fake/nope", json!({})).await).0,
        GatewayErrorKind::ToolNotFound { tool } if tool == "fake/nope"
    ));
    match kind(client.call_tool("fake/structured", json!({})).await) {
        (
            GatewayErrorKind::Denied {
                reason_code,
                determining_policy,
                ..
            },
            err,
        ) => {
            assert_eq!(reason_code, "no_permit");
            assert!(determining_policy.is_some());
            let g = err.gateway().unwrap();
            assert_eq!(g.gateway_id.as_deref(), Some(w.gateway_id.as_str()));
            assert!(g.request_id.is_some() && g.activity_id.is_some());
        }
        other => panic!("{other:?}"),
    }
}

async fn model_refusals_arrive_as_their_class(client: &AgentClient, url: &str) {
    assert!(matches!(
        kind(client.chat_completions(&chat("nope")).await).0,
        GatewayErrorKind::ModelNotFound { model } if model == "nope"
    ));
    match kind(
        client
            .messages(&json!({"model": "other", "max_tokens": 8,
        "messages": [{"role": "user", "content": "hi"}]}))
            .await,
    ) {
        (GatewayErrorKind::Denied { .. }, err) => assert_eq!(err.status_code(), Some(403)),
        other => panic!("Anthropic-shaped denial: {other:?}"),
    }
    assert_eq!(
        kind(client.chat_completions(&chat("down")).await).0,
        GatewayErrorKind::Unavailable
    );
    let stranger = AgentClient::new(url, "svc_not-a-real-key").unwrap();
    assert!(matches!(
        kind(stranger.chat_completions(&chat("gpt")).await).0,
        GatewayErrorKind::AuthorizationDenied { .. }
    ));
    assert!(matches!(
        kind(stranger.list_tools().await).0,
        GatewayErrorKind::AuthorizationDenied { .. }
    ));
}

async fn act_as_and_quota(w: &World, client: &AgentClient) {
    let cp = &w.cp;
    cp.ok(
        AGENTS,
        "UpdateAgent",
        cp.body(json!({"agent_id": "bot", "actas_method": "hmac",
            "actas_hmac_secret": "0123456789abcdef-sdk-secret", "actas_required": true,
            "actas_allowed_subjects": ["u1"]})),
    )
    .await;
    w.gw.caught_up(cp).await;
    assert!(matches!(
        kind(client.chat_completions(&chat("gpt")).await).0,
        GatewayErrorKind::ActAsRequired { reason_code } if reason_code == "actas_required"
    ));
    cp.ok(
        AGENTS,
        "UpdateAgent",
        cp.body(
            json!({"agent_id": "bot", "actas_required": false, "actas_method": "",
            "actas_allowed_subjects": []}),
        ),
    )
    .await;
    let quota = cp
        .ok(
            MGMT,
            "CreateLLMQuota",
            cp.body(json!({"subject_type": "workspace", "limit_micros": 0})),
        )
        .await["quota"]["quota_id"]
        .as_str()
        .unwrap()
        .to_string();
    w.gw.caught_up(cp).await;
    for _ in 0..100 {
        if let Err(err) = client.chat_completions(&chat("gpt")).await {
            let g = err.gateway().unwrap();
            match &g.kind {
                GatewayErrorKind::RateLimited {
                    retry_after_secs,
                    quota_id,
                    resets_at,
                } => {
                    assert_eq!(quota_id.as_deref(), Some(quota.as_str()));
                    assert!(retry_after_secs.is_some() && resets_at.is_some());
                    assert_eq!(g.status_code, 429);
                    return;
                }
                GatewayErrorKind::NotReady => {}
                other => panic!("{other:?}"),
            }
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    panic!("the zero quota never refused a call");
}

/// A gateway with no configuration yet answers 503 `not_ready` (`/ready` too): the class says
/// retry shortly, and an agent runtime does not start on it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gateway_without_configuration_is_not_ready() {
    let gw = portcullis_tests::GatewayProcess::start_unconfigured().await;
    let client = AgentClient::new(
        &gw.gateway_url("00000000-0000-4000-8000-000000000000"),
        "svc_k",
    )
    .unwrap();
    let (kind_now, err) = kind(client.chat_completions(&chat("gpt")).await);
    assert_eq!(kind_now, GatewayErrorKind::NotReady, "{err}");
    assert_eq!(err.status_code(), Some(503));
    let runtime = portcullis_client::AgentRuntime::new(
        "http://127.0.0.1:9",
        &gw.gateway_url("00000000-0000-4000-8000-000000000000"),
        "svc_k",
    )
    .unwrap();
    let (kind_now, err) = kind(runtime.start().await);
    assert_eq!(
        kind_now,
        GatewayErrorKind::NotReady,
        "a runtime does not start on it: {err}"
    );
}

/// The agent runtime's lifecycle classes come from using it out of order; a started runtime
/// calls the gateway; a gateway that lost its control plane for longer
/// than its bound refuses as policy stale (and `/ready` says so), then serves again once the
/// control plane is back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runtime_lifecycle_and_a_stale_policy() {
    use portcullis_client::AgentRuntime;
    let mut w = world().await;
    let gw = portcullis_tests::GatewayProcess::start_with(
        &w.cp,
        &[("PORTCULLIS_MAX_POLICY_AGE_SECS", "1")],
    )
    .await;
    let url = gw.gateway_url(&w.gateway_id);
    assert!(matches!(
        AgentRuntime::new("not a url", &url, &w.key),
        Err(ClientError::Configuration(_))
    ));
    assert!(matches!(
        AgentRuntime::new(&w.cp.url, &format!("{url}/mcp"), &w.key),
        Err(ClientError::GatewayConfiguration { .. })
    ));
    let rt = AgentRuntime::new(&w.cp.url, &url, &w.key)
        .unwrap()
        .with_policy_sync_interval(std::time::Duration::from_millis(300));
    assert!(matches!(
        rt.client().await,
        Err(ClientError::NotInitialized)
    ));
    assert!(matches!(
        rt.check_model("gpt").await,
        Err(ClientError::NotInitialized)
    ));
    rt.start().await.unwrap();
    assert!(matches!(rt.start().await, Err(ClientError::AlreadyStarted)));
    let client = rt.client().await.unwrap();
    client.chat_completions(&chat("gpt")).await.unwrap();
    // The runtime's policy snapshot: what the gateway lets this agent use.
    rt.check_model("gpt").await.unwrap();
    for (refused, asked) in [
        (rt.check_model("other").await, "other"),
        (rt.check_tool("x/y").await, "x/y"),
    ] {
        match refused {
            Err(ClientError::Denied { resource, reason }) => {
                assert_eq!(resource, asked, "{reason}")
            }
            other => panic!("{other:?}"),
        }
    }

    w.cp.stop().await;
    tokio::time::sleep(std::time::Duration::from_millis(2500)).await;
    let (kind_now, err) = kind(client.chat_completions(&chat("gpt")).await);
    assert_eq!(kind_now, GatewayErrorKind::PolicyStale, "{err}");
    assert_eq!(err.status_code(), Some(503));
    // Not refreshed for three intervals: no snapshot to answer from.
    assert!(
        matches!(
            rt.check_model("gpt").await,
            Err(ClientError::NoBundleLoaded)
        ),
        "a stale snapshot is not used"
    );
    let late = AgentRuntime::new(&w.cp.url, &url, &w.key).unwrap();
    assert_eq!(kind(late.start().await).0, GatewayErrorKind::PolicyStale);
    // The gateway without the bound keeps serving its snapshot.
    let lenient = AgentClient::new(&w.gw.gateway_url(&w.gateway_id), &w.key).unwrap();
    lenient.chat_completions(&chat("gpt")).await.unwrap();

    rt.shutdown().await.unwrap();
    assert!(matches!(rt.client().await, Err(ClientError::Shutdown)));
    assert!(matches!(rt.shutdown().await, Err(ClientError::Shutdown)));
    assert!(matches!(rt.start().await, Err(ClientError::Shutdown)));

    assert!(matches!(
        rt.check_model("gpt").await,
        Err(ClientError::Shutdown)
    ));

    w.cp.restart().await;
    gw.wait_ready().await;
    client.chat_completions(&chat("gpt")).await.unwrap();
}
