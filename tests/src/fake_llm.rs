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

mod anthropic;
mod openai;

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::http::HeaderMap;
use axum::routing::post;
use axum::Router;
use serde_json::Value;

#[derive(Debug, Clone)]
pub struct Recorded {
    pub path: String,
    pub headers: HeaderMap,
    pub body: Value,
}

#[derive(Clone)]
struct Behaviour {
    status: u16,
    reply: String,
    /// Answers requests that offer tools with two calls of this tool, with these arguments.
    tool_call: Option<(String, Value)>,
    /// The `x-api-key` the Anthropic endpoint accepts; any non-empty key when unset.
    anthropic_key: Option<String>,
    record: bool,
    chunk_delay_ms: u64,
    reply_delay_ms: u64,
}

#[derive(Clone)]
struct Shared {
    behaviour: Behaviour,
    recorded: Arc<Mutex<Vec<Recorded>>>,
}

impl Shared {
    fn record(&self, path: &str, headers: &HeaderMap, body: &Value) {
        if self.behaviour.record {
            self.recorded
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(Recorded {
                    path: path.to_string(),
                    headers: headers.clone(),
                    body: body.clone(),
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

    pub fn router(self) -> (Router, Arc<Mutex<Vec<Recorded>>>) {
        let recorded = Arc::new(Mutex::new(Vec::new()));
        let shared = Shared {
            behaviour: self.behaviour,
            recorded: recorded.clone(),
        };
        let router = Router::new()
            .route("/v1/chat/completions", post(openai::chat))
            .route("/chat/completions", post(openai::chat))
            .route("/v1/messages", post(anthropic::messages))
            .with_state(shared)
            .merge(crate::fake_mcp::stateless_router());
        (router, recorded)
    }

    pub async fn start_on(self, addr: &str) -> RunningFake {
        let (router, recorded) = self.router();
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .expect("bind fake");
        let addr = listener.local_addr().expect("addr");
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, router).await;
        });
        RunningFake {
            addr,
            recorded,
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

    pub fn requests(&self) -> Vec<Recorded> {
        self.recorded
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

/// Streams events with the behaviour's delay between them.
fn event_stream(events: Vec<String>, delay: u64) -> axum::response::Response {
    use axum::response::IntoResponse;
    use futures_util::StreamExt;
    let stream = futures_util::stream::iter(events).then(move |e| async move {
        if delay > 0 {
            tokio::time::sleep(std::time::Duration::from_millis(delay)).await;
        }
        Ok::<_, std::convert::Infallible>(e)
    });
    axum::response::Response::builder()
        .header("content-type", "text/event-stream")
        .header("cache-control", "no-cache")
        .body(axum::body::Body::from_stream(stream))
        .unwrap_or_else(|_| axum::http::StatusCode::INTERNAL_SERVER_ERROR.into_response())
}

/// The text a reply streams, in pieces as a model would.
fn words(text: &str) -> impl Iterator<Item = &str> {
    text.split_inclusive(' ')
}
