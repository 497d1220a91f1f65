//! A control plane, a fake OpenAI upstream and a gateway, wired the way an admin would:
//! model `gpt` attached to the default gateway, agent `bot` allowed it, a key for `bot`.

use portcullis_tests::controlplane::{AGENTS, MGMT};
use portcullis_tests::fake_llm::RunningFake;
use portcullis_tests::{Backend, ControlPlane, FakeLlm, GatewayProcess};
use serde_json::{json, Value};

pub const UPSTREAM_SECRET: &str = "sk-upstream-3f9a7c21d0e4";
pub const UPSTREAM_MODEL: &str = "gpt-4o-mini-2024-07-18";

pub struct World {
    pub cp: ControlPlane,
    pub fake: RunningFake,
    pub gw: GatewayProcess,
    pub key: String,
    pub gateway_id: String,
}

pub async fn model(cp: &ControlPlane, name: &str, base_url: &str) -> String {
    let m = cp
        .ok(
            MGMT,
            "CreateLLMModelConnection",
            cp.body(json!({"name": name, "provider": "openai_compatible",
            "provider_config": {"model": UPSTREAM_MODEL, "base_url": base_url},
            "secret_values": {"Authorization": format!("Bearer {UPSTREAM_SECRET}")}})),
        )
        .await;
    m["connection_id"].as_str().unwrap().to_string()
}

/// Registers the agent `agent` describes and returns a new key of it, named `k`.
pub async fn register_with_key(cp: &ControlPlane, agent: Value) -> String {
    let name = agent["name"].as_str().unwrap().to_string();
    cp.ok(AGENTS, "RegisterAgent", cp.body(agent)).await;
    cp.ok(
        AGENTS,
        "CreateAgentKey",
        cp.body(json!({"agent_id": name, "name": "k"})),
    )
    .await["token"]
        .as_str()
        .unwrap()
        .to_string()
}

/// The id of the agent named `name`.
pub async fn agent_id(cp: &ControlPlane, name: &str) -> String {
    cp.ok(AGENTS, "GetAgent", cp.body(json!({"agent_id": name})))
        .await["agent"]["agent_id"]
        .as_str()
        .unwrap()
        .to_string()
}

/// A new platform key named `name` with this role: its token.
pub async fn platform_key(cp: &ControlPlane, name: &str, role: &str) -> String {
    cp.ok(
        MGMT,
        "CreatePlatformKey",
        cp.body(json!({"name": name, "role": role})),
    )
    .await["token"]
        .as_str()
        .unwrap()
        .to_string()
}

/// Attaches `gpt` at `base_url` to the default gateway and registers `bot`, allowed to call
/// it: the default gateway's id and a key of `bot`.
pub async fn bot_calling_gpt_at(cp: &ControlPlane, base_url: &str) -> (String, String) {
    let id = model(cp, "gpt", base_url).await;
    let gateway_id = cp.default_gateway_id.clone();
    cp.ok(
        MGMT,
        "AddGatewayModel",
        cp.body(json!({"gateway_id": gateway_id, "connection_id": id})),
    )
    .await;
    let key = register_with_key(
        cp,
        json!({"name": "bot", "allowed_gateway_ids": [gateway_id], "allowed_direct_model_names": ["gpt"]}),
    )
    .await;
    (gateway_id, key)
}

pub async fn world() -> World {
    world_on(Backend::Sqlite).await
}

/// The same world with the control plane on this backend.
pub async fn world_on(backend: Backend) -> World {
    world_with(backend, FakeLlm::openai()).await
}

/// The same world with this fake upstream.
pub async fn world_with(backend: Backend, fake: FakeLlm) -> World {
    let cp = ControlPlane::start(backend).await;
    let fake = fake.start().await;
    let (gateway_id, key) = bot_calling_gpt_at(&cp, &fake.base_url()).await;
    let gw = GatewayProcess::start(&cp).await;
    World {
        cp,
        fake,
        gw,
        key,
        gateway_id,
    }
}

/// An HTTP reply from the gateway.
pub struct Http {
    pub status: u16,
    pub headers: reqwest::header::HeaderMap,
    pub body: Value,
    pub text: String,
}

impl World {
    /// `{gateway}/gateways/{id}/v1`.
    pub fn openai_base(&self) -> String {
        format!("{}/v1", self.gw.gateway_url(&self.gateway_id))
    }

    pub async fn chat_as(&self, key: Option<&str>, gateway_id: &str, body: Value) -> Http {
        let mut request = reqwest::Client::new()
            .post(format!(
                "{}/v1/chat/completions",
                self.gw.gateway_url(gateway_id)
            ))
            .json(&body);
        if let Some(k) = key {
            request = request.bearer_auth(k);
        }
        http(request).await
    }

    pub async fn chat(&self, model: &str) -> Http {
        let body = json!({"model": model, "messages": [{"role": "user", "content": "hi"}]});
        self.chat_as(Some(&self.key.clone()), &self.gateway_id.clone(), body)
            .await
    }

    /// Polls until `check` holds for a chat reply, or `limit` passes; returns the time taken.
    pub async fn until(
        &self,
        limit: std::time::Duration,
        check: impl Fn(&Http) -> bool,
    ) -> std::time::Duration {
        let started = std::time::Instant::now();
        loop {
            let reply = self.chat("gpt").await;
            if check(&reply) {
                return started.elapsed();
            }
            assert!(
                started.elapsed() < limit,
                "condition not reached within {limit:?}; last reply {} {}",
                reply.status,
                reply.text
            );
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
    }
}

pub async fn http(request: reqwest::RequestBuilder) -> Http {
    let response = request.send().await.expect("gateway request");
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    let text = response.text().await.unwrap_or_default();
    let body = serde_json::from_str(&text).unwrap_or(Value::Null);
    Http {
        status,
        headers,
        body,
        text,
    }
}
