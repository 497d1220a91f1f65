//! The gateway's MCP endpoint with real upstreams: server-everything from npm over Streamable
//! HTTP and over stdio, called by the official MCP Python SDK; and a fake API-key upstream that
//! records what the gateway injected.

use std::time::Duration;

use portcullis_tests::controlplane::{AGENTS, MGMT};
use portcullis_tests::everything::Everything;
use portcullis_tests::fake_mcp::FakeMcp;
use portcullis_tests::{python, Backend, ControlPlane, GatewayProcess};
use serde_json::{json, Value};

pub struct Mcp {
    pub cp: ControlPlane,
    pub gw: GatewayProcess,
    pub key: String,
}

impl Mcp {
    pub async fn start() -> Self {
        Self::start_with(&[]).await
    }

    /// With extra control-plane configuration.
    pub async fn start_with(env: &[(&str, &str)]) -> Self {
        let cp = ControlPlane::start_with(Backend::Sqlite, env).await;
        let key = crate::world::register_with_key(
            &cp,
            json!({"name": "bot", "allowed_gateway_ids": [cp.default_gateway_id]}),
        )
        .await;
        let gw = GatewayProcess::start(&cp).await;
        Self { cp, gw, key }
    }

    fn url(&self) -> String {
        format!("{}/mcp", self.gw.gateway_url(&self.cp.default_gateway_id))
    }

    /// Adds a tool connection, attaches it whole, and waits until discovery filled its catalog.
    pub async fn attach(&self, fields: Value) -> String {
        let cp = &self.cp;
        let id = cp
            .ok(MGMT, "CreateMCPServerConnection", cp.body(fields))
            .await["connection_id"]
            .as_str()
            .unwrap()
            .to_string();
        cp.ok(
            MGMT,
            "AddGatewayToolSource",
            cp.body(json!({"gateway_id": cp.default_gateway_id, "connection_id": id})),
        )
        .await;
        for _ in 0..200 {
            let listed = cp
                .ok(
                    MGMT,
                    "ListConnectionTools",
                    cp.body(json!({"connection_id": id, "include_blocked": true})),
                )
                .await;
            if !listed["tools"].as_array().unwrap().is_empty() {
                // The snapshot with the catalog reaches the gateway right after.
                self.gw.caught_up(cp).await;
                return id;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("the gateway never discovered the tool:\n{}", self.gw.logs());
    }

    pub async fn allow(&self, tools: &[&str]) {
        self.cp
            .ok(
                AGENTS,
                "UpdateAgent",
                self.cp
                    .body(json!({"agent_id": "bot", "allowed_tools": tools})),
            )
            .await;
        self.gw.caught_up(&self.cp).await;
    }

    async fn rpc(&self, method: &str, params: Value) -> Value {
        let body = json!({"jsonrpc": "2.0", "id": 7, "method": method, "params": params});
        let r = reqwest::Client::new()
            .post(self.url())
            .bearer_auth(&self.key)
            .json(&body)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status().as_u16(), 200);
        r.json().await.unwrap()
    }

    async fn names(&self) -> Vec<String> {
        let list = self.rpc("tools/list", json!({})).await;
        list["result"]["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["name"].as_str().unwrap().to_string())
            .collect()
    }

    pub async fn sdk(&self, calls: &[&str]) -> Value {
        let url = self.url();
        let mut args = vec![url.as_str(), self.key.as_str()];
        args.extend_from_slice(calls);
        python::run("mcp_client.py", &args).await
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn everything_over_http_and_stdio_through_the_python_sdk() {
    let m = Mcp::start().await;
    let server = Everything::http().await;
    m.attach(json!({"name": "everything", "protocol": "streamable-http", "auth_method": "none", "protocol_config": {"url": server.url}})).await;
    let (command, args) = Everything::stdio_command();
    m.attach(json!({"name": "local", "protocol": "stdio", "auth_method": "none", "protocol_config": {"command": command, "args": args, "env": {"GREETING": "hello"}}})).await;
    m.allow(&[
        "everything/echo",
        "local/echo",
        "local/get-env",
        "local/get-sum",
    ])
    .await;

    let out = m
        .sdk(&[
            "everything/echo",
            r#"{"message": "over http"}"#,
            "local/echo",
            r#"{"message": "over stdio"}"#,
            "local/get-sum",
            r#"{"a": 2, "b": 40}"#,
            "everything/get-sum",
            r#"{"a": 1, "b": 1}"#,
            "local/get-env",
            "{}",
        ])
        .await;
    assert_eq!(out["server"], "portcullis-gateway");
    let names: Vec<&str> = out["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "everything/echo",
            "local/echo",
            "local/get-env",
            "local/get-sum"
        ],
        "only what the agent may use"
    );
    let calls = out["calls"].as_array().unwrap();
    assert_eq!(calls[0]["content"][0]["text"], "Echo: over http");
    assert_eq!(calls[1]["content"][0]["text"], "Echo: over stdio");
    assert!(calls[2]["content"][0]["text"]
        .as_str()
        .unwrap()
        .contains("42"));
    let denied = &calls[3]["error"];
    assert_eq!(
        (
            denied["code"].as_i64(),
            denied["data"]["reason_code"].as_str()
        ),
        (Some(-32001), Some("no_permit"))
    );
    assert_eq!(denied["data"]["determining_policy"], "default-deny");
    assert!(denied["data"]["request_id"].is_string());

    // The command sees its own variables and a search path, none of the gateway's (its
    // deployment token above all).
    let env: Value =
        serde_json::from_str(calls[4]["content"][0]["text"].as_str().unwrap()).unwrap();
    let names: Vec<&str> = env
        .as_object()
        .unwrap()
        .keys()
        .map(|k| k.as_str())
        .collect();
    assert_eq!(env["GREETING"], "hello", "{env}");
    assert!(env["PATH"].is_string());
    for leaked in ["PORTCULLIS_TOKEN", "RUST_LOG", "HOME"] {
        assert!(
            !names.contains(&leaked),
            "{leaked} reached the tool: {names:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn statuses_rules_and_protocol_edges() {
    let m = Mcp::start().await;
    let server = Everything::http().await;
    let id = m.attach(json!({"name": "everything", "protocol": "streamable-http", "auth_method": "none", "protocol_config": {"url": server.url}})).await;
    assert!(
        m.names().await.is_empty(),
        "attachment alone authorizes nothing"
    );
    let call = m
        .rpc(
            "tools/call",
            json!({"name": "everything/echo", "arguments": {"message": "x"}}),
        )
        .await;
    assert_eq!(call["error"]["code"], -32001);

    m.allow(&["everything/echo", "everything/get-sum"]).await;
    assert_eq!(m.names().await, ["everything/echo", "everything/get-sum"]);
    a_blocked_operation_is_hidden_and_refused_even_with_a_permit(&m, &id).await;
    restored_and_deprecated_operations_are_listed_and_callable(&m, &id).await;
    protocol_edges_get_json_rpc_answers(&m).await;
}

async fn a_blocked_operation_is_hidden_and_refused_even_with_a_permit(m: &Mcp, id: &str) {
    let cp = &m.cp;
    cp.ok(
        MGMT,
        "BlockTool",
        cp.body(json!({"connection_id": id, "tool": "echo", "message": "under review"})),
    )
    .await;
    m.gw.caught_up(cp).await;
    assert_eq!(
        m.names().await,
        ["everything/get-sum"],
        "a blocked operation is hidden even with a permit"
    );
    let call = m
        .rpc(
            "tools/call",
            json!({"name": "everything/echo", "arguments": {"message": "x"}}),
        )
        .await;
    assert_eq!(call["error"]["data"]["reason_code"], "blocked", "{call}");
    assert_eq!(
        call["error"]["data"]["determining_policy"],
        "blocked/everything/echo"
    );
}

async fn restored_and_deprecated_operations_are_listed_and_callable(m: &Mcp, id: &str) {
    let cp = &m.cp;
    cp.ok(
        MGMT,
        "RestoreTool",
        cp.body(json!({"connection_id": id, "tool": "echo"})),
    )
    .await;
    cp.ok(
        MGMT,
        "DeprecateTool",
        cp.body(json!({"connection_id": id, "tool": "get-sum", "message": "use add"})),
    )
    .await;
    m.gw.caught_up(cp).await;
    let list = m.rpc("tools/list", json!({})).await;
    let tools = list["result"]["tools"].as_array().unwrap();
    assert_eq!(tools.len(), 2, "restored: visible again");
    let sum = tools
        .iter()
        .find(|t| t["name"] == "everything/get-sum")
        .unwrap();
    assert_eq!(sum["_meta"]["portcullis/deprecated"], "use add");
    let call = m
        .rpc(
            "tools/call",
            json!({"name": "everything/get-sum", "arguments": {"a": 1, "b": 2}}),
        )
        .await;
    assert!(
        call["result"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains('3'),
        "deprecated stays callable: {call}"
    );
}

async fn protocol_edges_get_json_rpc_answers(m: &Mcp) {
    for (method, params, code) in [
        ("resources/list", json!({}), -32601),
        ("tools/call", json!({"name": "nope"}), -32602),
        ("tools/call", json!({"name": "everything/missing"}), -32602),
        ("tools/list", json!({"cursor": "x"}), -32602),
    ] {
        let r = m.rpc(method, params).await;
        assert_eq!(r["error"]["code"], code, "{method}: {r}");
    }
    let ping = m.rpc("ping", json!({})).await;
    assert_eq!(ping["result"], json!({}));
    let client = reqwest::Client::new();
    let note = client
        .post(m.url())
        .bearer_auth(&m.key)
        .json(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        .send()
        .await
        .unwrap();
    assert_eq!(note.status().as_u16(), 202);
    let batch = client
        .post(m.url())
        .bearer_auth(&m.key)
        .json(&json!([{"jsonrpc": "2.0", "id": 1, "method": "ping"}]))
        .send()
        .await
        .unwrap();
    let batch: Value = batch.json().await.unwrap();
    assert_eq!(batch["error"]["code"], -32600);
    let unauth = client
        .post(m.url())
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "ping"}))
        .send()
        .await
        .unwrap();
    assert_eq!(unauth.status().as_u16(), 401);
    let unauth: Value = unauth.json().await.unwrap();
    assert_eq!(
        unauth["jsonrpc"], "2.0",
        "errors on the MCP endpoint are JSON-RPC shaped"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn injected_credentials_results_pagination_sessions_and_cache() {
    let m = Mcp::start().await;
    for sse in [false, true] {
        let name = if sse { "fake-sse" } else { "fake" };
        let secret = format!("upstream-tool-key-{name}");
        let fake = FakeMcp::start(&secret, sse).await;
        let cp = &m.cp;
        m.attach(json!({"name": name, "protocol": "streamable-http", "secret_values": {"Authorization": format!("Bearer {secret}")},
            "protocol_config": {"url": fake.url(), "headers": [{"name": "X-Team", "source": "literal", "value": "blue"}]}})).await;
        let tools: Vec<String> = ["whoami", "fail", "structured", "page2"]
            .iter()
            .map(|t| format!("{name}/{t}"))
            .collect();
        m.allow(&tools.iter().map(String::as_str).collect::<Vec<_>>())
            .await;
        let listed = m.names().await;
        assert_eq!(
            listed, tools,
            "pagination upstream is followed to the end ({name})"
        );
        let lists = fake.list_calls();
        m.names().await;
        assert_eq!(
            fake.list_calls(),
            lists,
            "a second list within 30 s is served from the cache"
        );

        let out = m
            .sdk(&[
                &tools[0], "{}", &tools[1], "{}", &tools[2], "{}", &tools[3], "{}",
            ])
            .await;
        let calls = out["calls"].as_array().unwrap();
        let seen: Value =
            serde_json::from_str(calls[0]["content"][0]["text"].as_str().unwrap()).unwrap();
        assert_eq!(
            seen["authorization"],
            format!("Bearer {secret}"),
            "the stored secret is injected"
        );
        assert_eq!(seen["x-team"], "blue");
        assert!(
            !seen.to_string().contains(&m.key),
            "the agent key never reaches the upstream"
        );
        assert_eq!(
            (
                calls[1]["isError"].as_bool(),
                calls[1]["content"][0]["text"].as_str()
            ),
            (Some(true), Some("the tool failed on purpose"))
        );
        assert_eq!(calls[2]["structuredContent"], json!({"temperature": 21}));
        assert_eq!(calls[3]["content"][0]["text"], "from page two");
        for h in fake.headers() {
            assert!(h
                .values()
                .all(|v| !v.to_str().unwrap_or_default().contains(&m.key)));
        }

        // The upstream forgets its sessions: the gateway initializes again and the call succeeds.
        let before = fake.initializes();
        fake.expire_sessions();
        let call = m
            .rpc("tools/call", json!({"name": tools[3], "arguments": {}}))
            .await;
        assert_eq!(
            call["result"]["content"][0]["text"], "from page two",
            "{call}"
        );
        assert_eq!(fake.initializes(), before + 1);
        let _ = cp;
    }
    assert!(
        !m.gw.logs().contains("upstream-tool-key"),
        "the gateway log holds an upstream secret"
    );
}

/// `ListToolReach` lists only agents that may call (SPEC: `active` or `provisioned`), and a
/// provisioned agent reaches its tools like an active one. A new agent is `provisioned` until
/// its first key; reactivation returns an agent to whichever of the two it was.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tool_reach_lists_the_agents_that_may_call_in_every_status() {
    let m = Mcp::start().await;
    let server = Everything::http().await;
    m.attach(json!({"name": "things", "protocol": "streamable-http", "auth_method": "none", "protocol_config": {"url": server.url}})).await;
    let cp = &m.cp;
    let agent = |name: &str| json!({"name": name, "allowed_gateway_ids": [cp.default_gateway_id], "allowed_tools": ["things/echo"]});
    let by_name = |name: &str| cp.body(json!({"agent_id": name}));
    for name in ["fresh", "keyed", "paused", "gone"] {
        let a = cp.ok(AGENTS, "RegisterAgent", cp.body(agent(name))).await;
        assert_eq!(
            a["agent"]["status"], "provisioned",
            "nothing issued yet: {a}"
        );
    }
    for name in ["keyed", "paused"] {
        let key = json!({"agent_id": name, "name": "k"});
        cp.ok(AGENTS, "CreateAgentKey", cp.body(key)).await;
    }
    cp.ok(AGENTS, "SuspendAgent", by_name("paused")).await;
    cp.ok(AGENTS, "RevokeAgent", by_name("gone")).await;

    let reach = cp.ok(AGENTS, "ListToolReach", cp.body(json!({}))).await;
    let listed: Vec<(String, String, Vec<String>)> = reach["agents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|a| a["name"] != "bot")
        .map(|a| {
            let tools = a["tools"].as_array().unwrap().iter();
            let tools = tools.map(|t| t["tool"].as_str().unwrap().to_string());
            (
                a["name"].as_str().unwrap().to_string(),
                a["status"].as_str().unwrap().to_string(),
                tools.collect(),
            )
        })
        .collect();
    let echo = vec!["things/echo".to_string()];
    let mut want = vec![
        ("fresh".to_string(), "provisioned".to_string(), echo.clone()),
        ("keyed".to_string(), "active".to_string(), echo.clone()),
    ];
    let mut listed = listed;
    listed.sort();
    want.sort();
    assert_eq!(
        listed, want,
        "suspended and revoked agents are not listed: {reach:#}"
    );

    // Suspending and reactivating keeps what the agent was: a keyed one comes back active,
    // one with nothing issued comes back provisioned.
    let back = cp.ok(AGENTS, "ReactivateAgent", by_name("paused")).await;
    assert_eq!(back["agent"]["status"], "active");
    cp.ok(AGENTS, "SuspendAgent", by_name("fresh")).await;
    let back = cp.ok(AGENTS, "ReactivateAgent", by_name("fresh")).await;
    assert_eq!(back["agent"]["status"], "provisioned");
}
