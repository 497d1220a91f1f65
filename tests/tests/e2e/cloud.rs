//! Gemini, Vertex and Bedrock over real processes, from the official OpenAI and Anthropic SDKs:
//! plain, streamed and with tools (the Gemini thought signature and Bedrock's tool ids carried
//! back on the next turn), charged their real usage. Credentials as each cloud checks them:
//! a Gemini API key; a service-account key's JWT-bearer grant at the fake token endpoint (one
//! token for many concurrent calls, refreshed before it expires); SigV4 verified by the fake
//! with stored access keys, and a Bedrock API key; and the gateway's own identity — AWS keys
//! from its environment with a role assumed through STS, Google application default
//! credentials — only when the gateway runs with `--cloud-identity`.

use portcullis_tests::controlplane::{AGENTS, MGMT};
use portcullis_tests::fake_llm::RunningFake;
use portcullis_tests::{python, Backend, ControlPlane, FakeLlm, GatewayProcess};
use serde_json::{json, Value};

use crate::audit::{activity, by_activity, wait};
use crate::world::{http, register_with_key, Http};

const GOOGLE_KEY: &str = "AIzaSyFake-gemini-key-4b1d";
const AWS_ID: &str = "AKIAFAKESTOREDKEY01";
const AWS_SECRET: &str = "stored-secret-9d2e4f1a7c";
const BEDROCK_KEY: &str = "ABSKQmVkcm9ja0FQSUtleS1fake";
const GATEWAY_AWS_ID: &str = "AKIAFAKEGATEWAYOWN1";
const GATEWAY_AWS_SECRET: &str = "gateway-own-secret-31c5";
const ROLE: &str = "arn:aws:iam::123456789012:role/portcullis-bedrock";
const EXTERNAL_ID: &str = "portcullis-ext-77";
const HELLO: &str = "Hello from the fake upstream.";

/// A control plane, a fake cloud, a gateway (with `env`, which may name the fake), and agent
/// `bot` with a key; models are connected by each test.
struct Cloud {
    cp: ControlPlane,
    fake: RunningFake,
    gw: GatewayProcess,
    key: String,
    allowed: Vec<String>,
}

async fn cloud(fake: FakeLlm, env: impl FnOnce(&RunningFake) -> Vec<(String, String)>) -> Cloud {
    let cp = ControlPlane::start(Backend::Sqlite).await;
    let fake = fake.start().await;
    let gateway_id = cp.default_gateway_id.clone();
    let key = register_with_key(
        &cp,
        json!({"name": "bot", "allowed_gateway_ids": [gateway_id]}),
    )
    .await;
    let env = env(&fake);
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let gw = GatewayProcess::start_with(&cp, &env).await;
    Cloud {
        cp,
        fake,
        gw,
        key,
        allowed: Vec::new(),
    }
}

fn no_env(_: &RunningFake) -> Vec<(String, String)> {
    Vec::new()
}

impl Cloud {
    fn gateway_id(&self) -> String {
        self.cp.default_gateway_id.clone()
    }

    /// Connects model `name`, attaches it to the gateway and allows `bot` it.
    async fn connect(&mut self, name: &str, provider: &str, config: Value, auth: Value) -> String {
        let mut body = json!({"name": name, "provider": provider, "provider_config": config});
        body.as_object_mut()
            .unwrap()
            .extend(auth.as_object().unwrap().clone());
        let m = self
            .cp
            .ok(MGMT, "CreateLLMModelConnection", self.cp.body(body))
            .await;
        let id = m["connection_id"].as_str().unwrap().to_string();
        self.cp
            .ok(
                MGMT,
                "AddGatewayModel",
                self.cp
                    .body(json!({"gateway_id": self.gateway_id(), "connection_id": id})),
            )
            .await;
        self.allowed.push(name.to_string());
        self.cp
            .ok(
                AGENTS,
                "UpdateAgent",
                self.cp
                    .body(json!({"agent_id": "bot", "allowed_direct_model_names": self.allowed})),
            )
            .await;
        id
    }

    async fn synced(&self) {
        self.gw.caught_up(&self.cp).await;
    }

    fn base(&self, gw: &GatewayProcess) -> String {
        gw.gateway_url(&self.gateway_id())
    }

    async fn openai(&self, model: &str, mode: &str) -> Value {
        let base = format!("{}/v1", self.base(&self.gw));
        python::run("openai_chat.py", &[&base, &self.key, model, mode]).await
    }

    async fn anthropic(&self, model: &str, mode: &str) -> Value {
        let base = self.base(&self.gw);
        python::run("anthropic_messages.py", &[&base, &self.key, model, mode]).await
    }

    /// A chat completion through `gw`, tagged with a fresh activity id.
    async fn chat_on(&self, gw: &GatewayProcess, model: &str) -> (Http, String) {
        let id = activity();
        let reply = http(
            reqwest::Client::new()
                .post(format!("{}/v1/chat/completions", self.base(gw)))
                .bearer_auth(&self.key)
                .header("x-svc-activity-id", &id)
                .json(&json!({"model": model, "messages": [{"role": "user", "content": "hi"}]})),
        )
        .await;
        (reply, id)
    }

    async fn chat(&self, model: &str) -> (Http, String) {
        self.chat_on(&self.gw, model).await
    }

    /// What `model.call` recorded for the call tagged `id`.
    async fn recorded(&self, id: &str) -> Value {
        wait(&self.cp, &by_activity(&self.cp, id, &["model.call"]))
            .await
            .payload
    }

    /// The fake's requests never carried the agent's key.
    fn no_agent_key_upstream(&self) {
        for r in self.fake.requests() {
            for (name, value) in &r.headers {
                assert!(
                    !value.to_str().unwrap_or_default().contains(&self.key),
                    "the agent key reached the upstream in {name} of {}",
                    r.path
                );
            }
        }
    }
}

/// Both SDKs, plain, streamed and two-turn tool calls, against `model`.
async fn both_sdks(c: &Cloud, model: &str) {
    let plain = c.openai(model, "plain").await;
    assert_eq!(plain["content"], HELLO, "{model}: {plain}");
    assert_eq!(
        (
            plain["usage"]["prompt_tokens"].as_u64(),
            plain["usage"]["completion_tokens"].as_u64()
        ),
        (Some(9), Some(12)),
        "{model}: {plain}"
    );
    let streamed = c.openai(model, "stream-usage").await;
    assert_eq!(streamed["content"], HELLO, "{model}: {streamed}");
    assert_eq!(
        streamed["usage"]["completion_tokens"], 12,
        "{model}: {streamed}"
    );
    assert!(streamed["chunks"].as_u64() > Some(2), "{model}: {streamed}");
    for mode in ["tools", "tools-stream"] {
        let t = c.openai(model, mode).await;
        let calls = t["tool_calls"]
            .as_array()
            .unwrap_or_else(|| panic!("{model} {mode}: {t}"));
        assert_eq!(calls.len(), 2, "{model} {mode}: {t}");
        assert_ne!(calls[0]["id"], calls[1]["id"], "{model} {mode}: {t}");
        for call in calls {
            assert_eq!(call["name"], "get_weather");
            assert_eq!(
                call["arguments"],
                json!({"location": "Paris"}),
                "{model} {mode}: {t}"
            );
        }
        assert_eq!(
            t["final"], HELLO,
            "the results were accepted: {model} {mode}: {t}"
        );
    }
    let plain = c.anthropic(model, "plain").await;
    assert_eq!(plain["content"], HELLO, "{model}: {plain}");
    assert_eq!(
        (
            plain["usage"]["input_tokens"].as_u64(),
            plain["usage"]["output_tokens"].as_u64()
        ),
        (Some(9), Some(12)),
        "{model}: {plain}"
    );
    let streamed = c.anthropic(model, "stream").await;
    assert_eq!(streamed["content"], HELLO, "{model}: {streamed}");
    assert_eq!(
        streamed["usage"]["output_tokens"], 12,
        "{model}: {streamed}"
    );
    for mode in ["tools", "tools-stream"] {
        let t = c.anthropic(model, mode).await;
        assert_eq!(t["stop_reason"], "tool_use", "{model} {mode}: {t}");
        let uses = t["tool_uses"].as_array().unwrap();
        assert_eq!(uses.len(), 2, "{model} {mode}: {t}");
        assert_ne!(uses[0]["id"], uses[1]["id"]);
        assert_eq!(
            uses[1]["input"],
            json!({"location": "Paris"}),
            "{model} {mode}: {t}"
        );
        assert_eq!(
            t["final"], HELLO,
            "the results were accepted: {model} {mode}: {t}"
        );
    }
}

fn tools() -> FakeLlm {
    FakeLlm::openai().tool_call(json!({"location": "Paris"}))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gemini_answers_both_sdks_with_its_api_key() {
    let mut c = cloud(tools().google_api_key(GOOGLE_KEY), no_env).await;
    let base = c.fake.root_url();
    c.connect(
        "gemini",
        "google",
        json!({"model": "gemini-2.5-flash", "base_url": base}),
        json!({"secret_values": {"x-goog-api-key": GOOGLE_KEY}}),
    )
    .await;
    c.synced().await;
    both_sdks(&c, "gemini").await;

    let (reply, id) = c.chat("gemini").await;
    assert_eq!(reply.status, 200, "{}", reply.text);
    let e = c.recorded(&id).await;
    // gemini-2.5-flash at 0.30 and 2.50 USD per million tokens: 9 in, 12 out, rounded up.
    assert_eq!(e["cost_micros"], 33, "{e}");
    assert_eq!(
        (e["provider"].as_str(), e["translated"].as_bool()),
        (Some("google"), Some(true)),
        "{e}"
    );
    let whole = c.fake.requests_to("gemini-2.5-flash:generateContent");
    let streamed = c.fake.requests_to("gemini-2.5-flash:streamGenerateContent");
    assert!(!whole.is_empty() && !streamed.is_empty());
    for r in whole.iter().chain(&streamed) {
        assert_eq!(r.headers["x-goog-api-key"], GOOGLE_KEY);
        assert!(r.body.get("model").is_none(), "the model is in the path");
    }
    c.no_agent_key_upstream();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vertex_takes_tokens_from_a_service_account_key_once_and_refreshes_them() {
    // Tokens live 65 s; the gateway replaces them 60 s before expiry, so each serves 5 s.
    let mut c = cloud(tools().token_lifetime_secs(65), no_env).await;
    let key = c
        .fake
        .service_account("portcullis@fake-project.iam.gserviceaccount.com");
    let base = c.fake.root_url();
    let at = |model: &str, location: &str| json!({"model": model, "project": "fake-project", "location": location, "base_url": base});
    let secret = json!({"secret_values": {"service_account_json": key}});
    c.connect(
        "vgemini",
        "vertex",
        at("gemini-2.5-flash", "us-central1"),
        secret.clone(),
    )
    .await;
    c.connect(
        "vclaude",
        "vertex",
        at("claude-sonnet-4-5@20250929", "us-east5"),
        secret,
    )
    .await;
    let stranger = key.replace("portcullis@", "stranger@");
    c.connect(
        "vstranger",
        "vertex",
        at("gemini-2.5-flash", "us-central1"),
        json!({"secret_values": {"service_account_json": stranger}}),
    )
    .await;
    c.synced().await;

    let burst = (0..6).map(|i| c.chat(if i % 2 == 0 { "vgemini" } else { "vclaude" }));
    for (reply, _) in futures_util::future::join_all(burst).await {
        assert_eq!(reply.status, 200, "{}", reply.text);
    }
    assert_eq!(
        c.fake.requests_to("/token").len(),
        1,
        "one token for six concurrent calls on two models of one key"
    );
    tokio::time::sleep(std::time::Duration::from_secs(6)).await;
    let (reply, _) = c.chat("vgemini").await;
    assert_eq!(reply.status, 200, "{}", reply.text);
    assert_eq!(
        c.fake.requests_to("/token").len(),
        2,
        "refreshed before expiry"
    );

    both_sdks(&c, "vclaude").await;
    let plain = c.openai("vgemini", "stream-usage").await;
    assert_eq!(plain["content"], HELLO, "{plain}");

    let raw = c.fake.requests_to("claude-sonnet-4-5@20250929:rawPredict");
    assert!(!raw.is_empty());
    for r in &raw {
        assert_eq!(
            r.body["anthropic_version"], "vertex-2023-10-16",
            "{}",
            r.body
        );
        assert!(r.body.get("model").is_none(), "{}", r.body);
    }
    assert!(!c.fake.requests_to(":streamRawPredict").is_empty());
    let (reply, id) = c.chat("vclaude").await;
    assert_eq!(reply.status, 200);
    let e = c.recorded(&id).await;
    assert_eq!(
        e["cost_micros"],
        9 * 3 + 12 * 15,
        "claude-sonnet-4 prices: {e}"
    );

    let (refused, _) = c.chat("vstranger").await;
    assert_eq!(refused.status, 502, "{}", refused.text);
    let message = refused.body["error"]["message"]
        .as_str()
        .unwrap_or_default();
    assert!(
        message.contains("vstranger") && message.contains("stranger@"),
        "{message}"
    );
    assert!(!refused.text.contains("PRIVATE KEY"), "{}", refused.text);
    c.no_agent_key_upstream();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bedrock_is_signed_with_stored_keys_or_called_with_an_api_key() {
    let fake = tools()
        .aws_keys(AWS_ID, AWS_SECRET)
        .bedrock_api_key(BEDROCK_KEY);
    let mut c = cloud(fake, no_env).await;
    let base = c.fake.root_url();
    let claude = "us.anthropic.claude-sonnet-4-5-20250929-v1:0";
    let at = |model: &str| json!({"model": model, "region": "us-west-2", "base_url": base});
    let keys = |secret: &str| json!({"secret_values": {"aws_access_key_id": AWS_ID, "aws_secret_access_key": secret}});
    c.connect("bclaude", "bedrock", at(claude), keys(AWS_SECRET))
        .await;
    c.connect(
        "nova",
        "bedrock",
        at("amazon.nova-lite-v1:0"),
        json!({"secret_values": {"Authorization": format!("Bearer {BEDROCK_KEY}")}}),
    )
    .await;
    c.connect("bwrong", "bedrock", at(claude), keys("not-the-secret"))
        .await;
    c.synced().await;

    both_sdks(&c, "bclaude").await;
    let nova = c.openai("nova", "stream-usage").await;
    assert_eq!(nova["content"], HELLO, "{nova}");
    let (reply, id) = c.chat("bclaude").await;
    assert_eq!(reply.status, 200, "{}", reply.text);
    let e = c.recorded(&id).await;
    assert_eq!(
        e["cost_micros"],
        9 * 3 + 12 * 15,
        "claude-sonnet-4 prices: {e}"
    );
    assert_eq!(e["provider"], "bedrock", "{e}");

    let (refused, _) = c.chat("bwrong").await;
    assert_eq!(refused.status, 502, "{}", refused.text);
    assert!(refused.text.contains("bwrong"), "{}", refused.text);
    assert!(!refused.text.contains("not-the-secret"));

    let signed = c
        .fake
        .requests_to("us.anthropic.claude-sonnet-4-5-20250929-v1%3A0/converse");
    assert!(
        !signed.is_empty(),
        "the model id is one encoded path segment"
    );
    let scope = format!("Credential={AWS_ID}/");
    for r in &signed {
        let auth = r.headers["authorization"].to_str().unwrap();
        assert!(
            auth.starts_with("AWS4-HMAC-SHA256 ") && auth.contains(&scope),
            "{auth}"
        );
        assert!(auth.contains("/us-west-2/bedrock/aws4_request"), "{auth}");
    }
    assert!(!c.fake.requests_to("/converse-stream").is_empty());
    tampered_requests_are_refused(&c, &signed[0]).await;
    let nova = c
        .fake
        .requests_to("amazon.nova-lite-v1%3A0/converse-stream");
    assert_eq!(nova.len(), 1, "the streamed nova call");
    let bearer = format!("Bearer {BEDROCK_KEY}");
    assert_eq!(nova[0].headers["authorization"], bearer.as_str());
    c.no_agent_key_upstream();
}

/// A request the gateway signed, sent again as it was, is accepted; with its body changed
/// after signing, the fake refuses it as Bedrock does.
async fn tampered_requests_are_refused(c: &Cloud, signed: &portcullis_tests::fake_llm::Recorded) {
    let send = |body: Vec<u8>| {
        let mut request = reqwest::Client::new()
            .post(format!("{}{}", c.fake.root_url(), signed.path))
            .body(body);
        for name in ["authorization", "x-amz-date", "content-type"] {
            request = request.header(name, signed.headers[name].clone());
        }
        request.send()
    };
    let again = send(signed.raw.to_vec()).await.unwrap();
    assert_eq!(again.status(), 200, "the signed request as sent");
    // Still valid JSON, but not the bytes that were signed.
    let mut tampered = signed.raw.to_vec();
    tampered.push(b' ');
    let refused = send(tampered).await.unwrap();
    assert_eq!(refused.status(), 403);
    assert!(
        refused.headers()["x-amzn-errortype"]
            .to_str()
            .unwrap()
            .starts_with("InvalidSignatureException"),
        "{:?}",
        refused.headers()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_gateway_uses_its_own_cloud_identity_only_when_allowed() {
    let fake = FakeLlm::openai()
        .aws_keys(GATEWAY_AWS_ID, GATEWAY_AWS_SECRET)
        .aws_role(ROLE, Some(EXTERNAL_ID));
    let mut c = cloud(fake, no_env).await;
    let base = c.fake.root_url();
    c.connect(
        "own-bedrock",
        "bedrock",
        json!({"model": "amazon.nova-pro-v1:0", "region": "eu-west-1", "base_url": base,
            "role_arn": ROLE, "external_id": EXTERNAL_ID}),
        json!({"auth_method": "none"}),
    )
    .await;
    c.connect(
        "own-vertex",
        "vertex",
        json!({"model": "gemini-2.5-flash", "project": "fake-project", "location": "global",
            "base_url": base}),
        json!({"auth_method": "none"}),
    )
    .await;
    c.synced().await;
    for model in ["own-bedrock", "own-vertex"] {
        let (refused, _) = c.chat(model).await;
        assert_eq!(refused.status, 403, "{model}: {}", refused.text);
        assert_eq!(
            refused.body["error"]["code"], "cloud_identity_unavailable",
            "{model}: {}",
            refused.text
        );
    }
    assert!(c.fake.requests().is_empty(), "nothing reached the cloud");

    let key_file = tempfile::NamedTempFile::new().unwrap();
    let own = a_gateway_with_its_own_cloud_identity(&c, &key_file, &base).await;
    concurrent_calls_share_one_role_and_one_token(&c, &own).await;
}

/// A second gateway with `--cloud-identity`: Google application default credentials (a
/// service-account key written to `key_file`) and AWS keys that assume a role through STS at
/// `base`.
async fn a_gateway_with_its_own_cloud_identity(
    c: &Cloud,
    key_file: &tempfile::NamedTempFile,
    base: &str,
) -> GatewayProcess {
    let sa = c
        .fake
        .service_account("gateway@fake-project.iam.gserviceaccount.com");
    std::fs::write(key_file.path(), sa).unwrap();
    let path = key_file.path().to_str().unwrap().to_string();
    let env = [
        ("PORTCULLIS_CLOUD_IDENTITY", "true"),
        ("GOOGLE_APPLICATION_CREDENTIALS", path.as_str()),
        ("AWS_ACCESS_KEY_ID", GATEWAY_AWS_ID),
        ("AWS_SECRET_ACCESS_KEY", GATEWAY_AWS_SECRET),
        ("AWS_REGION", "eu-west-1"),
        ("AWS_ENDPOINT_URL_STS", base),
        ("AWS_EC2_METADATA_DISABLED", "true"),
        ("AWS_CONFIG_FILE", "/nonexistent/portcullis-test"),
        (
            "AWS_SHARED_CREDENTIALS_FILE",
            "/nonexistent/portcullis-test",
        ),
    ];
    let own = GatewayProcess::start_with(&c.cp, &env).await;
    own.caught_up(&c.cp).await;
    own
}

async fn concurrent_calls_share_one_role_and_one_token(c: &Cloud, own: &GatewayProcess) {
    let calls = (0..4).map(|i| {
        c.chat_on(
            own,
            if i % 2 == 0 {
                "own-bedrock"
            } else {
                "own-vertex"
            },
        )
    });
    for (reply, _) in futures_util::future::join_all(calls).await {
        assert_eq!(reply.status, 200, "{}\n{}", reply.text, own.logs());
        assert_eq!(reply.body["choices"][0]["message"]["content"], HELLO);
    }
    let assumed = c.fake.requests_to("/");
    assert_eq!(assumed.len(), 1, "one AssumeRole for concurrent calls");
    assert_eq!(assumed[0].body["RoleArn"], ROLE);
    assert_eq!(assumed[0].body["ExternalId"], EXTERNAL_ID);
    let signed = c.fake.requests_to("/converse");
    assert_eq!(signed.len(), 2, "two Bedrock calls");
    for r in signed {
        let auth = r.headers["authorization"].to_str().unwrap();
        assert!(
            auth.contains("Credential=ASIAFAKE"),
            "signed with the role's keys: {auth}"
        );
        assert!(r.headers.contains_key("x-amz-security-token"));
    }
    assert_eq!(c.fake.requests_to("/token").len(), 1);
    assert_eq!(
        c.fake.requests_to("gemini-2.5-flash:generateContent").len(),
        2
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_throttled_bedrock_member_fails_over_to_gemini() {
    let throttled = FakeLlm::openai().status(429).start().await;
    let mut c = cloud(FakeLlm::openai(), no_env).await;
    let busy = c
        .connect(
            "busy-bedrock",
            "bedrock",
            json!({"model": "amazon.nova-lite-v1:0", "region": "us-east-1",
                "base_url": throttled.root_url()}),
            json!({"secret_values": {"Authorization": "Bearer any"}}),
        )
        .await;
    let gemini = c
        .connect(
            "gemini",
            "google",
            json!({"model": "gemini-2.5-flash", "base_url": c.fake.root_url()}),
            json!({"secret_values": {"x-goog-api-key": GOOGLE_KEY}}),
        )
        .await;
    let members =
        json!([{"connection_id": busy, "priority": 0}, {"connection_id": gemini, "priority": 1}]);
    let cp = &c.cp;
    let pool = cp
        .ok(
            MGMT,
            "CreateLLMPool",
            cp.body(json!({"name": "resilient", "strategy": "priority", "members": members})),
        )
        .await;
    cp.ok(
        MGMT,
        "AddGatewayPool",
        cp.body(json!({"gateway_id": c.gateway_id(), "pool_id": pool["pool"]["pool_id"]})),
    )
    .await;
    cp.ok(
        AGENTS,
        "UpdateAgent",
        cp.body(json!({"agent_id": "bot", "allowed_pool_names": ["resilient"]})),
    )
    .await;
    c.synced().await;
    let o = c.openai("resilient", "plain").await;
    assert_eq!(
        (o["content"].as_str(), o["served_by"].as_str()),
        (Some(HELLO), Some("gemini")),
        "{o}"
    );
    let a = c.anthropic("resilient", "plain").await;
    assert_eq!(a["served_by"], "gemini", "{a}");
    let (reply, id) = c.chat("resilient").await;
    assert_eq!(reply.status, 200, "{}", reply.text);
    let e = c.recorded(&id).await;
    assert_eq!(
        (e["attempts"].as_u64(), e["served_by"].as_str()),
        (Some(2), Some("gemini")),
        "{e}"
    );
    assert!(
        throttled.requests_to("/converse").len() >= 3,
        "the busy member was tried first"
    );
}
