//! Audit over real processes: the envelope of model, tool, list and denial events; the
//! control plane's own management events; queries, pages and filters; nothing secret stored.
//! Delivery (streaming, zero loss, retention, the spool) is in `audit_delivery.rs`.

use base64::Engine as _;
use std::time::Duration;

use portcullis_client::audit::WaitOptions;
use portcullis_client::AdminClient;
use portcullis_shared::audit::{AuditEventV1, PayloadFilter, QueryEventsRequest};
use portcullis_tests::controlplane::{AGENTS, MGMT};
use portcullis_tests::fake_mcp::FakeMcp;
use portcullis_tests::{Backend, ControlPlane, FakeLlm, GatewayProcess};
use serde_json::{json, Value};

use crate::world::{agent_id, http, model, platform_key, register_with_key, Http, UPSTREAM_SECRET};

pub const PROMPT: &str = "prompt-text-that-must-not-be-stored-8841";
const COMPLETION: &str = "completion-text-that-must-not-be-stored-2217";
const TOOL_SECRET: &str = "tool-upstream-secret-5590";
const TOOL_ARG: &str = "tool-argument-that-must-not-be-stored-3318";

pub fn admin(cp: &ControlPlane) -> AdminClient {
    AdminClient::new(&cp.url, &cp.key).unwrap()
}

pub fn by_activity(cp: &ControlPlane, activity: &str, types: &[&str]) -> QueryEventsRequest {
    QueryEventsRequest {
        workspace_id: Some(cp.workspace_id.clone()),
        activity_id: Some(activity.to_string()),
        event_types: types.iter().map(|t| t.to_string()).collect(),
        ..Default::default()
    }
}

pub async fn wait(cp: &ControlPlane, filter: &QueryEventsRequest) -> AuditEventV1 {
    let options = WaitOptions {
        timeout: Duration::from_secs(15),
        ..WaitOptions::default()
    };
    admin(cp)
        .wait_for_event(filter, options)
        .await
        .unwrap_or_else(|e| panic!("no event for {filter:?}: {e}"))
}

/// Every event that passes `filter`, walking the pages.
pub async fn all(
    cp: &ControlPlane,
    filter: &QueryEventsRequest,
    page_size: u32,
) -> Vec<AuditEventV1> {
    let client = admin(cp);
    let mut request = filter.clone();
    request.page_size = Some(page_size);
    let mut out = Vec::new();
    loop {
        let page = client.query_events(&request).await.unwrap();
        assert!(page.events.len() <= page_size as usize);
        out.extend(page.events);
        match page.next_page_token {
            Some(t) => request.page_token = Some(t),
            None => return out,
        }
    }
}

pub struct Setup {
    pub cp: ControlPlane,
    pub gw: GatewayProcess,
    pub key: String,
    _fake: portcullis_tests::fake_llm::RunningFake,
    _tool: Option<FakeMcp>,
}

impl Setup {
    /// `gpt` allowed to `bot`; `other` attached but not allowed; optionally a tool connection
    /// `fake` whose `whoami` `bot` may call.
    pub async fn start(backend: Backend, with_tool: bool) -> Self {
        Self::start_with(backend, with_tool, &[]).await
    }

    pub async fn start_with(
        backend: Backend,
        with_tool: bool,
        gateway_env: &[(&str, &str)],
    ) -> Self {
        let cp = ControlPlane::start(backend).await;
        let fake = FakeLlm::openai().reply(COMPLETION).start().await;
        let gateway_id = cp.default_gateway_id.clone();
        for name in ["gpt", "other"] {
            let id = model(&cp, name, &fake.base_url()).await;
            cp.ok(
                MGMT,
                "AddGatewayModel",
                cp.body(json!({"gateway_id": gateway_id, "connection_id": id})),
            )
            .await;
        }
        let mut agent = json!({"name": "bot", "allowed_gateway_ids": [gateway_id], "allowed_direct_model_names": ["gpt"]});
        let tool = if with_tool {
            let fake_tool = FakeMcp::start(TOOL_SECRET, false).await;
            let id = cp
                .ok(
                    MGMT,
                    "CreateMCPServerConnection",
                    cp.body(json!({"name": "fake", "protocol": "streamable-http",
                    "secret_values": {"Authorization": format!("Bearer {TOOL_SECRET}")},
                    "protocol_config": {"url": fake_tool.url()}})),
                )
                .await["connection_id"]
                .as_str()
                .unwrap()
                .to_string();
            cp.ok(
                MGMT,
                "AddGatewayToolSource",
                cp.body(json!({"gateway_id": gateway_id, "connection_id": id})),
            )
            .await;
            agent["allowed_tools"] = json!(["fake/whoami"]);
            Some((fake_tool, id))
        } else {
            None
        };
        let key = register_with_key(&cp, agent).await;
        let gw = GatewayProcess::start_with(&cp, gateway_env).await;
        let tool = match tool {
            Some((fake_tool, id)) => {
                wait_for_catalog(&cp, &id).await;
                Some(fake_tool)
            }
            None => None,
        };
        Self {
            cp,
            gw,
            key,
            _fake: fake,
            _tool: tool,
        }
    }

    pub fn base(&self) -> String {
        self.gw.gateway_url(&self.cp.default_gateway_id)
    }

    pub async fn chat(&self, model: &str, activity: &str, stream: bool) -> Http {
        let body = json!({"model": model, "stream": stream, "messages": [{"role": "user", "content": PROMPT}]});
        http(
            reqwest::Client::new()
                .post(format!("{}/v1/chat/completions", self.base()))
                .bearer_auth(&self.key)
                .header("x-svc-activity-id", activity)
                .header(
                    "traceparent",
                    "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
                )
                .header("user-agent", "OpenAI/Python 1.99.0")
                .json(&body),
        )
        .await
    }

    pub async fn rpc(&self, method: &str, params: Value, activity: &str) -> Http {
        http(
            reqwest::Client::new()
                .post(format!("{}/mcp", self.base()))
                .bearer_auth(&self.key)
                .header("x-svc-activity-id", activity)
                .json(&json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params})),
        )
        .await
    }
}

async fn wait_for_catalog(cp: &ControlPlane, connection_id: &str) {
    for _ in 0..200 {
        let listed = cp
            .ok(
                MGMT,
                "ListConnectionTools",
                cp.body(json!({"connection_id": connection_id})),
            )
            .await;
        if !listed["tools"].as_array().unwrap().is_empty() {
            tokio::time::sleep(Duration::from_millis(200)).await;
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the tool connection was never discovered");
}

pub fn activity() -> String {
    uuid::Uuid::new_v4().to_string()
}

async fn envelopes_filters_and_secrets(backend: Backend) {
    let s = Setup::start(backend, true).await;
    let cp = &s.cp;
    let agent_id = agent_id(cp, "bot").await;

    // A model call.
    let a = a_model_call_is_recorded_whole(&s, &agent_id).await;

    // An agent acting for a person: the person is recorded beside the agent.
    a_person_acted_for_is_recorded_beside_the_agent(&s).await;

    // A connection's own pricing overrides the table.
    a_connections_own_pricing_overrides_the_table(&s).await;

    // A streamed call is metered from the usage chunk the gateway asked for.
    let streamed = activity();
    assert_eq!(s.chat("gpt", &streamed, true).await.status, 200);
    let e = wait(cp, &by_activity(cp, &streamed, &["model.call"])).await;
    assert_eq!(e.payload["stream"], true);
    assert!(
        e.payload["usage"]["completion_tokens"].as_u64().unwrap() > 0,
        "{}",
        e.payload
    );

    // A tool list (audited once: the second is a cache hit) and a tool call.
    a_tool_call_and_one_list_are_recorded(&s).await;

    // Denials: a model the agent may not invoke, and a tool it may not call.
    denials_are_recorded_with_their_reason(&s).await;

    // The control plane's own operations, with the platform key as actor.
    let mgmt = wait(
        cp,
        &QueryEventsRequest {
            workspace_id: Some(cp.workspace_id.clone()),
            event_types: vec!["mgmt.operation".into()],
            operation: Some("CreateAgentKey".into()),
            ..Default::default()
        },
    )
    .await;
    assert_eq!(mgmt.actor.kind, "ACTOR_KIND_PLATFORM_KEY");
    assert_eq!(mgmt.request.surface, "INITIATOR_SURFACE_MANAGEMENT_API");
    assert_eq!(mgmt.producer.service, "controlplane");

    // Filters: results, agents, payload fields; pages hold every event exactly once.
    filters_select_results_payload_fields_and_agents(cp, &agent_id).await;
    pages_hold_every_event_once_newest_first(cp).await;

    // Bad input is refused and names the field.
    bad_queries_are_refused_naming_the_field(cp).await;

    // Only platform keys with view permission read events; agent keys never do.
    let (narrow, viewer) = only_platform_keys_with_view_permission_read_events(&s).await;

    // Nothing secret, no prompt, completion or tool argument or result is stored.
    nothing_secret_is_stored(&s, backend, &a, &narrow, &viewer).await;
}

/// A chat completion with `gpt` and its `model.call` event, checked field by field: the
/// call's activity id.
async fn a_model_call_is_recorded_whole(s: &Setup, agent_id: &str) -> String {
    let cp = &s.cp;
    let a = activity();
    let reply = s.chat("gpt", &a, false).await;
    assert_eq!(reply.status, 200, "{}", reply.text);
    let request_id = reply.headers["x-request-id"].to_str().unwrap().to_string();
    let e = wait(cp, &by_activity(cp, &a, &["model.call"])).await;
    assert_eq!(e.result, "RESULT_ALLOWED");
    assert_eq!(
        (e.scope.workspace_id.as_str(), e.scope.agent_id.as_str()),
        (cp.workspace_id.as_str(), agent_id)
    );
    assert_eq!(
        (
            e.actor.kind.as_str(),
            e.actor.id.as_str(),
            e.actor.display.as_str()
        ),
        ("ACTOR_KIND_AGENT", agent_id, "bot")
    );
    assert_eq!(
        (e.resource.kind.as_str(), e.resource.name.as_str()),
        ("model", "gpt")
    );
    assert!(!e.resource.id.is_empty());
    assert_eq!(e.producer.service, "gateway");
    assert!(!e.producer.instance_id.is_empty() && !e.producer.version.is_empty());
    assert_eq!(e.request.surface, "INITIATOR_SURFACE_GATEWAY_LLM");
    assert_eq!(
        e.request.http_route,
        "/gateways/{gateway_id}/v1/chat/completions"
    );
    assert_eq!(e.request.user_agent_class, "openai");
    assert_eq!(e.correlation.request_id, request_id);
    assert_eq!(e.correlation.trace_id, "4bf92f3577b34da6a3ce929d0e0e4736");
    assert_eq!(
        (
            e.correlation.activity_id.as_str(),
            e.correlation.activity_trust.as_str()
        ),
        (a.as_str(), "ACTIVITY_TRUST_CALLER_ASSERTED")
    );
    the_model_call_is_metered_and_priced_from_the_table(&e);
    // Time is RFC 3339 in UTC, to the millisecond.
    assert!(e.time.ends_with('Z') && e.time.len() == 24, "{}", e.time);
    let fetched = admin(cp)
        .get_event(&cp.workspace_id, &e.event_id)
        .await
        .unwrap();
    assert_eq!(fetched, e);
    a
}

fn the_model_call_is_metered_and_priced_from_the_table(e: &AuditEventV1) {
    assert!(
        e.data_handling
            .omitted
            .contains(&"request.messages".to_string()),
        "{:?}",
        e.data_handling
    );
    assert_eq!(e.payload["served_by"], "gpt");
    assert_eq!(e.payload["status"], 200);
    assert!(
        e.payload["usage"]["prompt_tokens"].as_u64().unwrap() > 0,
        "{}",
        e.payload
    );
    assert!(e.payload["latency_ms"].as_f64().unwrap() > 0.0);
    // Priced from the shipped table (the upstream id is a dated gpt-4o-mini): $0.15 and $0.60
    // per million tokens, in micro-USD rounded up.
    let (p_in, p_out) = (
        e.payload["usage"]["prompt_tokens"].as_u64().unwrap(),
        e.payload["usage"]["completion_tokens"].as_u64().unwrap(),
    );
    assert_eq!(
        e.payload["cost_micros"],
        (p_in * 150_000 + p_out * 600_000).div_ceil(1_000_000)
    );
    assert_eq!(
        e.payload["price_source"],
        format!(
            "table {}: gpt-4o-mini",
            portcullis_shared::prices::TABLE_VERSION
        )
    );
}

async fn a_person_acted_for_is_recorded_beside_the_agent(s: &Setup) {
    let cp = &s.cp;
    let helper_key = register_with_key(
        cp,
        json!({"name": "helper", "allowed_gateway_ids": [cp.default_gateway_id],
        "allowed_direct_model_names": ["gpt"], "actas_method": "none"}),
    )
    .await;
    let person = base64::engine::general_purpose::STANDARD
        .encode(r#"{"sub":"u-42","email":"u42@example.com"}"#);
    let p = activity();
    let mut acted = Http {
        status: 0,
        headers: Default::default(),
        body: Value::Null,
        text: String::new(),
    };
    for _ in 0..100 {
        acted = http(
            reqwest::Client::new()
                .post(format!("{}/v1/chat/completions", s.base()))
                .bearer_auth(&helper_key)
                .header("x-svc-activity-id", &p)
                .header("x-svc-act-as", &person)
                .json(&json!({"model": "gpt", "messages": [{"role": "user", "content": PROMPT}]})),
        )
        .await;
        if acted.status == 200 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(acted.status, 200, "{}", acted.text);
    let e = wait(cp, &by_activity(cp, &p, &["model.call"])).await;
    assert_eq!(e.actor.display, "helper");
    let on_behalf = e.on_behalf_of.expect("the person is recorded");
    assert_eq!(
        (
            on_behalf.kind.as_str(),
            on_behalf.id.as_str(),
            on_behalf.email.as_str()
        ),
        ("ACTOR_KIND_USER", "u-42", "u42@example.com")
    );
    assert_eq!(on_behalf.display, "asserted by the agent, not verified");
}

async fn a_connections_own_pricing_overrides_the_table(s: &Setup) {
    let cp = &s.cp;
    let priced = cp
        .ok(
            MGMT,
            "CreateLLMModelConnection",
            cp.body(json!({"name": "priced", "provider": "openai_compatible",
            "provider_config": {"model": "in-house-model", "base_url": s._fake.base_url(),
                "pricing": {"input_usd_per_mtok": 1000.0, "output_usd_per_mtok": 2000.0}},
            "secret_values": {"Authorization": format!("Bearer {UPSTREAM_SECRET}")}})),
        )
        .await["connection_id"]
        .as_str()
        .unwrap()
        .to_string();
    cp.ok(
        MGMT,
        "AddGatewayModel",
        cp.body(json!({"gateway_id": cp.default_gateway_id, "connection_id": priced})),
    )
    .await;
    cp.ok(
        AGENTS,
        "UpdateAgent",
        cp.body(json!({"agent_id": "bot", "allowed_direct_model_names": ["gpt", "priced"]})),
    )
    .await;
    let o = activity();
    let mut status = 0;
    for _ in 0..100 {
        status = s.chat("priced", &o, false).await.status;
        if status == 200 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(status, 200);
    // Calls made before the gateway had the model are recorded too (failed); take the one that
    // went through.
    let mut served = by_activity(cp, &o, &["model.call"]);
    served.results = vec!["RESULT_ALLOWED".into()];
    let e = wait(cp, &served).await;
    let (p_in, p_out) = (
        e.payload["usage"]["prompt_tokens"].as_u64().unwrap(),
        e.payload["usage"]["completion_tokens"].as_u64().unwrap(),
    );
    assert_eq!(e.payload["cost_micros"], p_in * 1000 + p_out * 2000);
    assert_eq!(e.payload["price_source"], "override");
}

async fn a_tool_call_and_one_list_are_recorded(s: &Setup) {
    let cp = &s.cp;
    let t = activity();
    let listed = s.rpc("tools/list", json!({}), &t).await;
    assert_eq!(
        listed.body["result"]["tools"][0]["name"], "fake/whoami",
        "{}",
        listed.text
    );
    s.rpc("tools/list", json!({}), &t).await;
    let called = s
        .rpc(
            "tools/call",
            json!({"name": "fake/whoami", "arguments": {"note": TOOL_ARG}}),
            &t,
        )
        .await;
    assert!(
        called.text.contains(TOOL_SECRET),
        "the fake echoes what it received: {}",
        called.text
    );
    let e = wait(cp, &by_activity(cp, &t, &["tool.call"])).await;
    assert_eq!(e.result, "RESULT_ALLOWED");
    assert_eq!(
        (e.resource.kind.as_str(), e.resource.name.as_str()),
        ("tool", "fake/whoami")
    );
    assert_eq!(e.request.surface, "INITIATOR_SURFACE_GATEWAY_MCP");
    assert_eq!(e.request.rpc_method, "tools/call");
    assert_eq!(e.payload["is_error"], false);
    assert_eq!(e.correlation.activity_id, t);
    assert!(e
        .data_handling
        .omitted
        .contains(&"request.arguments".to_string()));
    // Events ship in order, so once the call's event is in, both lists' would be.
    let lists = all(cp, &by_activity(cp, &t, &["tool.list"]), 50).await;
    assert_eq!(lists.len(), 1, "a cache hit is not audited: {lists:?}");
    assert_eq!(lists[0].payload["tools"], 1);
}

async fn denials_are_recorded_with_their_reason(s: &Setup) {
    let cp = &s.cp;
    let d = activity();
    let denied = s.chat("other", &d, false).await;
    assert_eq!(denied.status, 403);
    let e = wait(cp, &by_activity(cp, &d, &["access.denied"])).await;
    assert_eq!(e.result, "RESULT_DENIED");
    assert_eq!(
        (e.resource.kind.as_str(), e.resource.name.as_str()),
        ("model", "other")
    );
    assert_eq!(e.payload["action"], "llm:invoke");
    assert_eq!(
        e.payload["determining_policy"],
        denied.body["error"]["determining_policy"]
    );
    assert!(!e.payload["determining_policy"].as_str().unwrap().is_empty());
    let bad_key = http(
        reqwest::Client::new()
            .post(format!("{}/v1/chat/completions", s.base()))
            .bearer_auth("svc_ak_not-a-real-key")
            .header("x-svc-activity-id", &d)
            .json(&json!({"model": "gpt", "messages": []})),
    )
    .await;
    assert_eq!(bad_key.status, 401);
    let e = admin(cp)
        .wait_for_event_where(
            &by_activity(cp, &d, &["access.denied"]),
            WaitOptions {
                timeout: Duration::from_secs(15),
                ..WaitOptions::default()
            },
            |e| e.actor.kind == "ACTOR_KIND_UNSPECIFIED",
        )
        .await
        .expect("the unauthenticated call is audited");
    assert_eq!(e.payload["reason_code"], "invalid_api_key");
}

async fn filters_select_results_payload_fields_and_agents(cp: &ControlPlane, agent_id: &str) {
    let ws = Some(cp.workspace_id.clone());
    let denied_only = all(
        cp,
        &QueryEventsRequest {
            workspace_id: ws.clone(),
            results: vec!["RESULT_DENIED".into()],
            ..Default::default()
        },
        50,
    )
    .await;
    assert!(denied_only.len() >= 2 && denied_only.iter().all(|e| e.result == "RESULT_DENIED"));
    let by_payload = all(
        cp,
        &QueryEventsRequest {
            workspace_id: ws.clone(),
            payload_filters: vec![PayloadFilter {
                field: "served_by".into(),
                values: vec!["gpt".into()],
            }],
            ..Default::default()
        },
        50,
    )
    .await;
    assert_eq!(
        by_payload.len(),
        3,
        "the plain, the acted-for and the streamed call"
    );
    let agent_events = all(
        cp,
        &QueryEventsRequest {
            workspace_id: ws.clone(),
            agent_ids: vec![agent_id.to_string()],
            ..Default::default()
        },
        50,
    )
    .await;
    assert!(agent_events.iter().all(|e| e.scope.agent_id == agent_id));
}

async fn pages_hold_every_event_once_newest_first(cp: &ControlPlane) {
    let ws = Some(cp.workspace_id.clone());
    let everything = all(
        cp,
        &QueryEventsRequest {
            workspace_id: ws.clone(),
            ..Default::default()
        },
        1000,
    )
    .await;
    let paged = all(
        cp,
        &QueryEventsRequest {
            workspace_id: ws.clone(),
            ..Default::default()
        },
        3,
    )
    .await;
    let ids: Vec<&str> = paged.iter().map(|e| e.event_id.as_str()).collect();
    assert_eq!(
        ids,
        everything
            .iter()
            .map(|e| e.event_id.as_str())
            .collect::<Vec<_>>()
    );
    assert!(
        paged.windows(2).all(|w| w[0].time >= w[1].time),
        "newest first"
    );
    let default_page = admin(cp)
        .query_events(&QueryEventsRequest {
            workspace_id: ws.clone(),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(default_page.events.len(), everything.len().min(50));
}

async fn bad_queries_are_refused_naming_the_field(cp: &ControlPlane) {
    let bad = cp
        .call(
            "svc.audit.v1.AuditService",
            "QueryEvents",
            cp.body(json!({"results": ["ALLOWED"]})),
        )
        .await;
    bad.expect_error("invalid_argument", 400)
        .mentions("results");
    let bad = cp
        .call(
            "svc.audit.v1.AuditService",
            "QueryEvents",
            cp.body(json!({"page_size": 5000})),
        )
        .await;
    bad.expect_error("invalid_argument", 400)
        .mentions("page_size");
    let missing = cp
        .call(
            "svc.audit.v1.AuditService",
            "GetEvent",
            cp.body(json!({"event_id": uuid::Uuid::new_v4().to_string()})),
        )
        .await;
    missing.expect_error("not_found", 404);
}

/// A narrow key without audit permission and an agent key are refused; a viewer reads: the
/// narrow key's and the viewer's tokens.
async fn only_platform_keys_with_view_permission_read_events(s: &Setup) -> (String, String) {
    let cp = &s.cp;
    let narrow = cp
        .ok(
            MGMT,
            "CreatePlatformKey",
            cp.body(json!({"name": "narrow", "role": "viewer", "permissions": ["eventing.view"]})),
        )
        .await["token"]
        .as_str()
        .unwrap()
        .to_string();
    cp.call_as(
        &narrow,
        "svc.audit.v1.AuditService",
        "QueryEvents",
        cp.body(json!({})),
    )
    .await
    .expect_error("permission_denied", 403);
    cp.call_as(
        &s.key,
        "svc.audit.v1.AuditService",
        "QueryEvents",
        cp.body(json!({})),
    )
    .await
    .expect_error_any(&["unauthenticated", "permission_denied"]);
    let viewer = platform_key(cp, "viewer", "viewer").await;
    let seen = cp
        .call_as(
            &viewer,
            "svc.audit.v1.AuditService",
            "QueryEvents",
            cp.body(json!({"page_size": 1})),
        )
        .await;
    assert_eq!(seen.status, 200, "{}", seen.text);
    (narrow, viewer)
}

/// The store (and on SQLite its files) holds none of the secrets, prompts, completions and
/// tool arguments, nor the platform keys made along the way; it does hold activity `a`.
async fn nothing_secret_is_stored(
    s: &Setup,
    backend: Backend,
    a: &str,
    narrow: &str,
    viewer: &str,
) {
    let cp = &s.cp;
    let store = cp.dump_store().await;
    assert!(store.contains(a), "the dump covers the audit table");
    for needle in [
        UPSTREAM_SECRET,
        TOOL_SECRET,
        s.key.as_str(),
        cp.key.as_str(),
        narrow,
        viewer,
        PROMPT,
        COMPLETION,
        TOOL_ARG,
        s.gw.token.as_str(),
    ] {
        assert!(!store.contains(needle), "{needle} is stored");
    }
    if backend == Backend::Sqlite {
        let raw = String::from_utf8_lossy(&cp.sqlite_bytes()).into_owned();
        for needle in [UPSTREAM_SECRET, TOOL_SECRET, PROMPT, COMPLETION, TOOL_ARG] {
            assert!(!raw.contains(needle), "{needle} is in the SQLite files");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn audit_envelopes_filters_and_secrets_on_sqlite() {
    envelopes_filters_and_secrets(Backend::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn audit_envelopes_filters_and_secrets_on_postgres() {
    envelopes_filters_and_secrets(Backend::Postgres).await;
}
