//! A fake OpenAI-shaped upstream that speaks the real wire format (bodies and SSE chunks as
//! in OpenAI's API reference examples) and records what it received.
//!
//! `FakeLlm::openai().start()` answers every chat completion; `.status(500)` makes it fail;
//! `.reply("text")` sets the content. Requests are recorded with their headers and body.
//! It also answers MCP on `/mcp` (stateless, from memory), for load tests.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::Router;
use serde_json::{json, Value};

#[derive(Debug, Clone)]
pub struct Recorded {
    pub headers: HeaderMap,
    pub body: Value,
}

#[derive(Clone)]
struct Behaviour {
    status: u16,
    reply: String,
    record: bool,
    chunk_delay_ms: u64,
    reply_delay_ms: u64,
}

#[derive(Clone)]
struct Shared {
    behaviour: Behaviour,
    recorded: Arc<Mutex<Vec<Recorded>>>,
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
    pub fn openai() -> Self {
        Self {
            behaviour: Behaviour {
                status: 200,
                reply: "Hello from the fake upstream.".into(),
                record: true,
                chunk_delay_ms: 0,
                reply_delay_ms: 0,
            },
        }
    }

    /// Answers every request with this status and an OpenAI error body.
    pub fn status(mut self, status: u16) -> Self {
        self.behaviour.status = status;
        self
    }

    pub fn reply(mut self, text: &str) -> Self {
        self.behaviour.reply = text.to_string();
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
            .route("/v1/chat/completions", post(chat))
            .route("/chat/completions", post(chat))
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
    /// The base URL a model connection points at (`…/v1`).
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    pub fn requests(&self) -> Vec<Recorded> {
        self.recorded
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

const CREATED: u64 = 1_694_268_190;

fn completion(model: &str, text: &str) -> Value {
    json!({
        "id": "chatcmpl-123", "object": "chat.completion", "created": CREATED, "model": model,
        "system_fingerprint": "fp_44709d6fcb",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "logprobs": null, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 9, "completion_tokens": 12, "total_tokens": 21}
    })
}

fn chunk(model: &str, delta: Value, finish: Value) -> String {
    let c = json!({"id": "chatcmpl-123", "object": "chat.completion.chunk", "created": CREATED, "model": model,
        "system_fingerprint": "fp_44709d6fcb", "choices": [{"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish}]});
    format!("data: {c}\n\n")
}

fn stream_events(model: &str, text: &str, include_usage: bool) -> Vec<String> {
    let mut events = vec![chunk(
        model,
        json!({"role": "assistant", "content": ""}),
        Value::Null,
    )];
    for word in text.split_inclusive(' ') {
        events.push(chunk(model, json!({"content": word}), Value::Null));
    }
    events.push(chunk(model, json!({}), json!("stop")));
    if include_usage {
        let u = json!({"id": "chatcmpl-123", "object": "chat.completion.chunk", "created": CREATED, "model": model,
            "system_fingerprint": "fp_44709d6fcb", "choices": [], "usage": {"prompt_tokens": 9, "completion_tokens": 12, "total_tokens": 21}});
        events.push(format!("data: {u}\n\n"));
    }
    events.push("data: [DONE]\n\n".to_string());
    events
}

async fn chat(
    State(shared): State<Shared>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Response {
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    if shared.behaviour.record {
        shared
            .recorded
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(Recorded {
                headers,
                body: body.clone(),
            });
    }
    let b = &shared.behaviour;
    if b.reply_delay_ms > 0 {
        tokio::time::sleep(std::time::Duration::from_millis(b.reply_delay_ms)).await;
    }
    if b.status != 200 {
        let status = StatusCode::from_u16(b.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let err = json!({"error": {"message": format!("fake upstream failure {}", b.status), "type": "server_error", "param": null, "code": null}});
        return (status, axum::Json(err)).into_response();
    }
    let model = body["model"].as_str().unwrap_or("unknown").to_string();
    if body["stream"] != true {
        return axum::Json(completion(&model, &b.reply)).into_response();
    }
    let include_usage = body["stream_options"]["include_usage"] == true;
    let events = stream_events(&model, &b.reply, include_usage);
    let delay = b.chunk_delay_ms;
    let stream = futures_util::stream::iter(events).then(move |e| async move {
        if delay > 0 {
            tokio::time::sleep(std::time::Duration::from_millis(delay)).await;
        }
        Ok::<_, std::convert::Infallible>(e)
    });
    Response::builder()
        .header("content-type", "text/event-stream")
        .header("cache-control", "no-cache")
        .body(Body::from_stream(stream))
        .unwrap_or_else(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response())
}

use futures_util::StreamExt;
