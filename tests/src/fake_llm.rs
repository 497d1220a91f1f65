//! A fake LLM provider that speaks the real wire formats and records what it received: OpenAI
//! chat completions on `/v1/chat/completions` (and `/chat/completions`), Anthropic Messages on
//! `/v1/messages`, bodies and SSE events as in the providers' API references. It checks what
//! the real APIs check: Anthropic's `x-api-key`, `anthropic-version` and `max_tokens`, and in
//! both shapes that every tool result answers a tool call of the turn before.
//!
//! `FakeLlm::openai().start()` answers every call; `.status(500)` makes it fail; `.reply("text")`
//! sets the content; `.tool_call("name", args)` answers a request that offers tools with a call
//! to the first tool (a request carrying the tool's result gets a text answer). It also answers
//! MCP on `/mcp` (stateless, from memory), for load tests.
//!
//! It also stands in for the clouds: Gemini on `/v1beta/models/…` and Vertex on
//! `/v1/projects/…` (Gemini and Claude), Bedrock Converse on `/model/…`, Google's token
//! endpoint on `/token` and AWS STS on `/`. Each checks credentials the way the provider does
//! once they are registered (`.google_api_key`, `.bedrock_api_key`, `.aws_keys`, `.aws_role`,
//! [`RunningFake::service_account`]) and accepts any non-empty credential until then.

mod anthropic;
mod bedrock;
mod cloud;
mod gemini;
mod openai;
mod sigv4;

pub use gemini::SIGNATURE as GEMINI_SIGNATURE;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::response::Response;
use axum::routing::post;
use axum::Router;
use serde_json::Value;

#[derive(Debug, Clone)]
pub struct Recorded {
    pub path: String,
    pub headers: HeaderMap,
    pub body: Value,
    /// The body's bytes as received, where a signature covers them (Bedrock).
    pub raw: axum::body::Bytes,
}

#[derive(Clone)]
struct Behaviour {
    status: u16,
    reply: String,
    /// Answers requests that offer tools with two calls of this tool, with these arguments.
    tool_call: Option<(String, Value)>,
    /// The `x-api-key` the Anthropic endpoint accepts; any non-empty key when unset.
    anthropic_key: Option<String>,
    /// The `x-goog-api-key` the Gemini API paths accept; any non-empty key when unset.
    google_api_key: Option<String>,
    /// The bearer API key Bedrock accepts besides SigV4.
    bedrock_api_key: Option<String>,
    /// Access keys Bedrock and STS accept: id → secret.
    aws_keys: BTreeMap<String, String>,
    /// Roles STS lets the registered keys assume, with the external id each requires.
    aws_roles: BTreeMap<String, Option<String>>,
    /// How long the tokens the Google token endpoint issues last.
    token_lifetime_secs: u64,
    record: bool,
    chunk_delay_ms: u64,
    reply_delay_ms: u64,
}

#[derive(Clone)]
struct Shared {
    behaviour: Behaviour,
    recorded: Arc<Mutex<Vec<Recorded>>>,
    cloud: Arc<Mutex<cloud::CloudState>>,
}

impl Shared {
    fn record(&self, path: &str, headers: &HeaderMap, body: &Value) {
        self.record_raw(path, headers, body, axum::body::Bytes::new());
    }

    /// A model call as received: recorded (its JSON and its bytes), after the behaviour's
    /// delay; the body as JSON (`null` when it is not).
    async fn receive(
        &self,
        uri: &axum::http::Uri,
        headers: &HeaderMap,
        bytes: &axum::body::Bytes,
    ) -> Value {
        let body = serde_json::from_slice(bytes).unwrap_or(Value::Null);
        self.record_raw(uri.path(), headers, &body, bytes.clone());
        self.delay().await;
        body
    }

    fn record_raw(&self, path: &str, headers: &HeaderMap, body: &Value, raw: axum::body::Bytes) {
        if self.behaviour.record {
            self.recorded
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(Recorded {
                    path: path.to_string(),
                    headers: headers.clone(),
                    body: body.clone(),
                    raw,
                });
        }
    }

    async fn delay(&self) {
        let ms = self.behaviour.reply_delay_ms;
        if ms > 0 {
            tokio::time::sleep(std::time::Duration::from_millis(ms)).await;
        }
    }
}

pub struct FakeLlm {
    behaviour: Behaviour,
}

pub struct RunningFake {
    pub addr: SocketAddr,
    recorded: Arc<Mutex<Vec<Recorded>>>,
    cloud: Arc<Mutex<cloud::CloudState>>,
    _task: tokio::task::JoinHandle<()>,
}

impl FakeLlm {
    /// A provider speaking both APIs (the name is historical: OpenAI's was first).
    pub fn openai() -> Self {
        Self {
            behaviour: Behaviour {
                status: 200,
                reply: "Hello from the fake upstream.".into(),
                tool_call: None,
                anthropic_key: None,
                google_api_key: None,
                bedrock_api_key: None,
                aws_keys: BTreeMap::new(),
                aws_roles: BTreeMap::new(),
                token_lifetime_secs: 3600,
                record: true,
                chunk_delay_ms: 0,
                reply_delay_ms: 0,
            },
        }
    }

    /// The same fake; reads better where it stands for Anthropic.
    pub fn anthropic() -> Self {
        Self::openai()
    }

    /// Answers every request with this status and an error body in the API's shape.
    pub fn status(mut self, status: u16) -> Self {
        self.behaviour.status = status;
        self
    }

    pub fn reply(mut self, text: &str) -> Self {
        self.behaviour.reply = text.to_string();
        self
    }

    /// Answers a request offering tools with two calls of its first tool.
    pub fn tool_call(mut self, arguments: Value) -> Self {
        self.behaviour.tool_call = Some((String::new(), arguments));
        self
    }

    /// The only `x-api-key` the Anthropic endpoint accepts (401 otherwise).
    pub fn anthropic_key(mut self, key: &str) -> Self {
        self.behaviour.anthropic_key = Some(key.to_string());
        self
    }

    /// The only `x-goog-api-key` the Gemini API paths accept.
    pub fn google_api_key(mut self, key: &str) -> Self {
        self.behaviour.google_api_key = Some(key.to_string());
        self
    }

    /// A Bedrock API key, accepted as `Authorization: Bearer`.
    pub fn bedrock_api_key(mut self, key: &str) -> Self {
        self.behaviour.bedrock_api_key = Some(key.to_string());
        self
    }

    /// AWS access keys whose SigV4 signatures Bedrock and STS accept.
    pub fn aws_keys(mut self, id: &str, secret: &str) -> Self {
        self.behaviour
            .aws_keys
            .insert(id.to_string(), secret.to_string());
        self
    }

    /// A role STS lets registered keys assume, with the external id it requires.
    pub fn aws_role(mut self, arn: &str, external_id: Option<&str>) -> Self {
        self.behaviour
            .aws_roles
            .insert(arn.to_string(), external_id.map(str::to_string));
        self
    }

    /// How long issued Google tokens last (an hour unless set).
    pub fn token_lifetime_secs(mut self, secs: u64) -> Self {
        self.behaviour.token_lifetime_secs = secs;
        self
    }

    /// Keeps no record (for load tests).
    pub fn no_record(mut self) -> Self {
        self.behaviour.record = false;
        self
    }

    /// Waits between streamed chunks.
    pub fn chunk_delay_ms(mut self, ms: u64) -> Self {
        self.behaviour.chunk_delay_ms = ms;
        self
    }

    /// Waits this long before answering (whole replies and the start of streams).
    pub fn reply_delay_ms(mut self, ms: u64) -> Self {
        self.behaviour.reply_delay_ms = ms;
        self
    }

    fn router(self) -> (Router, Shared) {
        let mut state = cloud::CloudState::default();
        for (id, secret) in &self.behaviour.aws_keys {
            state.aws_keys.insert(id.clone(), (secret.clone(), None));
        }
        let shared = Shared {
            behaviour: self.behaviour,
            recorded: Arc::new(Mutex::new(Vec::new())),
            cloud: Arc::new(Mutex::new(state)),
        };
        let router = Router::new()
            .route("/v1/chat/completions", post(openai::chat))
            .route("/chat/completions", post(openai::chat))
            .route("/v1/messages", post(anthropic::messages))
            .route("/v1beta/models/{*call}", post(google))
            .route("/v1/projects/{*call}", post(google))
            .route("/model/{*call}", post(bedrock))
            .route("/token", post(google_token))
            .route("/", post(sts))
            // Providers take prompts far larger than axum's default 2 MB.
            .layer(axum::extract::DefaultBodyLimit::max(32 * 1024 * 1024))
            .with_state(shared.clone())
            .merge(crate::fake_mcp::stateless_router())
            .merge(crate::receiver::counting_router());
        (router, shared)
    }

    pub async fn start_on(self, addr: &str) -> RunningFake {
        let (router, shared) = self.router();
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .expect("bind fake");
        let addr = listener.local_addr().expect("addr");
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, router).await;
        });
        RunningFake {
            addr,
            recorded: shared.recorded,
            cloud: shared.cloud,
            _task: task,
        }
    }

    pub async fn start(self) -> RunningFake {
        self.start_on("127.0.0.1:0").await
    }
}

impl RunningFake {
    /// The base URL an OpenAI-shaped model connection points at (`…/v1`).
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// The base URL an `anthropic` model connection points at (the API root).
    pub fn anthropic_base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The root Gemini, Vertex and Bedrock connections point their `base_url` at, and where
    /// `AWS_ENDPOINT_URL_STS` points.
    pub fn root_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// A new service-account key file (JSON) whose token URI is this fake's `/token`; the
    /// token endpoint accepts assertions signed with it, and from then on Vertex paths want
    /// its tokens.
    pub fn service_account(&self, email: &str) -> String {
        let (file, public) =
            cloud::service_account_key(email, &format!("{}/token", self.root_url()));
        self.cloud
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .service_accounts
            .insert(email.to_string(), public);
        file
    }

    /// The requests received on paths that end with `suffix`.
    pub fn requests_to(&self, suffix: &str) -> Vec<Recorded> {
        let mut all = self.requests();
        all.retain(|r| r.path.ends_with(suffix));
        all
    }

    pub fn requests(&self) -> Vec<Recorded> {
        self.recorded
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

/// Streams server-sent events with the behaviour's delay between them.
fn event_stream(events: Vec<String>, delay: u64) -> Response {
    let events = events.into_iter().map(String::into_bytes).collect();
    byte_stream(events, delay, "text/event-stream")
}

/// Streams pieces of a body with the behaviour's delay between them.
fn byte_stream(pieces: Vec<Vec<u8>>, delay: u64, content_type: &str) -> Response {
    use axum::response::IntoResponse;
    use futures_util::StreamExt;
    let stream = futures_util::stream::iter(pieces).then(move |e| async move {
        if delay > 0 {
            tokio::time::sleep(std::time::Duration::from_millis(delay)).await;
        }
        Ok::<_, std::convert::Infallible>(e)
    });
    Response::builder()
        .header("content-type", content_type)
        .header("cache-control", "no-cache")
        .body(axum::body::Body::from_stream(stream))
        .unwrap_or_else(|_| axum::http::StatusCode::INTERNAL_SERVER_ERROR.into_response())
}

/// The Gemini API (`/v1beta/models/{model}:{method}`) and Vertex
/// (`/v1/projects/{project}/locations/{location}/publishers/{google|anthropic}/models/
/// {model}:{method}`).
async fn google(
    State(shared): State<Shared>,
    Path(call): Path<String>,
    uri: axum::http::Uri,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Response {
    let body = shared.receive(&uri, &headers, &body).await;
    if uri.path().starts_with("/v1beta/models/") {
        return gemini::answer(&shared, &call, false, &headers, &body);
    }
    let segments: Vec<&str> = call.split('/').collect();
    match segments[..] {
        [_, "locations", _, "publishers", "google", "models", model] => {
            gemini::answer(&shared, model, true, &headers, &body)
        }
        [_, "locations", _, "publishers", "anthropic", "models", model] => {
            anthropic::vertex(&shared, model, &headers, &body)
        }
        _ => gemini::error(404, "The requested URL was not found on this server."),
    }
}

async fn bedrock(
    State(shared): State<Shared>,
    Path(call): Path<String>,
    uri: axum::http::Uri,
    headers: HeaderMap,
    bytes: axum::body::Bytes,
) -> Response {
    shared.receive(&uri, &headers, &bytes).await;
    let received = bedrock::Received {
        path: uri.path(),
        query: uri.query().unwrap_or_default(),
        headers: &headers,
        bytes: &bytes,
    };
    bedrock::answer(&shared, &call, &received)
}

async fn google_token(
    State(shared): State<Shared>,
    headers: HeaderMap,
    bytes: axum::body::Bytes,
) -> Response {
    shared.record("/token", &headers, &cloud::form_json(&bytes));
    let host = headers
        .get("host")
        .and_then(|h| h.to_str().ok())
        .unwrap_or_default();
    cloud::token(&shared, &format!("http://{host}/token"), &bytes)
}

async fn sts(
    State(shared): State<Shared>,
    uri: axum::http::Uri,
    headers: HeaderMap,
    bytes: axum::body::Bytes,
) -> Response {
    shared.record("/", &headers, &cloud::form_json(&bytes));
    cloud::sts(
        &shared,
        uri.path(),
        uri.query().unwrap_or_default(),
        &headers,
        &bytes,
    )
}

/// The text a reply streams, in pieces as a model would.
fn words(text: &str) -> impl Iterator<Item = &str> {
    text.split_inclusive(' ')
}
