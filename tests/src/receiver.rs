//! A webhook receiver on 127.0.0.1: records every request (headers and raw body) and answers
//! from a plan — statuses, a `Retry-After`, or a slow handler — then `200` once the plan is
//! used up (or always `503` while it is "down").

use std::collections::{BTreeMap, VecDeque};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::Router;
use serde_json::{json, Value};

/// How the receiver answers one request.
#[derive(Debug, Clone, Copy)]
pub enum Answer {
    Status(u16),
    /// A status with `Retry-After: <seconds>`.
    RetryAfter(u16, u64),
    /// Answers `200` only after this long.
    Slow(Duration),
}

/// One request as received.
#[derive(Debug, Clone)]
pub struct Seen {
    pub headers: BTreeMap<String, String>,
    pub body: String,
}

impl Seen {
    pub fn header(&self, name: &str) -> &str {
        self.headers
            .get(name)
            .map(String::as_str)
            .unwrap_or_default()
    }

    pub fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or(Value::Null)
    }
}

#[derive(Default)]
struct Shared {
    seen: Mutex<Vec<Seen>>,
    plan: Mutex<VecDeque<Answer>>,
    down: Mutex<bool>,
}

pub struct Receiver {
    pub addr: SocketAddr,
    shared: Arc<Shared>,
    _task: tokio::task::JoinHandle<()>,
}

impl Receiver {
    pub async fn start() -> Self {
        let shared = Arc::new(Shared::default());
        let router = Router::new()
            .route("/hook", post(handle))
            .with_state(shared.clone());
        let (addr, task) = crate::process::serve(router).await;
        Self {
            addr,
            shared,
            _task: task,
        }
    }

    pub fn url(&self) -> String {
        format!("http://{}/hook", self.addr)
    }

    /// The next requests get these answers, in order.
    pub fn plan(&self, answers: &[Answer]) {
        self.shared
            .plan
            .lock()
            .unwrap()
            .extend(answers.iter().cloned());
    }

    /// While down, every request gets `503`.
    pub fn set_down(&self, down: bool) {
        *self.shared.down.lock().unwrap() = down;
    }

    pub fn seen(&self) -> Vec<Seen> {
        self.shared.seen.lock().unwrap().clone()
    }

    /// Waits until a request satisfies `pred` and returns every request seen so far.
    pub async fn wait_for(&self, what: &str, pred: impl Fn(&Seen) -> bool) -> Vec<Seen> {
        for _ in 0..600 {
            let seen = self.seen();
            if seen.iter().any(&pred) {
                return seen;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("the receiver never got {what}; it got {:#?}", self.seen());
    }

    /// Requests whose body is of this event type.
    pub fn of_type(&self, event_type: &str) -> Vec<Seen> {
        self.seen()
            .into_iter()
            .filter(|s| s.json()["type"] == event_type)
            .collect()
    }
}

async fn handle(State(shared): State<Arc<Shared>>, headers: HeaderMap, body: Bytes) -> Response {
    let seen = Seen {
        headers: headers
            .iter()
            .map(|(k, v)| {
                (
                    k.as_str().to_string(),
                    v.to_str().unwrap_or_default().to_string(),
                )
            })
            .collect(),
        body: String::from_utf8_lossy(&body).into_owned(),
    };
    shared.seen.lock().unwrap().push(seen);
    if *shared.down.lock().unwrap() {
        return StatusCode::SERVICE_UNAVAILABLE.into_response();
    }
    let answer = shared.plan.lock().unwrap().pop_front();
    match answer {
        None => (StatusCode::OK, "ok").into_response(),
        Some(Answer::Status(s)) => status(s).into_response(),
        Some(Answer::RetryAfter(s, secs)) => {
            (status(s), [("retry-after", secs.to_string())]).into_response()
        }
        Some(Answer::Slow(wait)) => {
            tokio::time::sleep(wait).await;
            (StatusCode::OK, "late").into_response()
        }
    }
}

fn status(code: u16) -> StatusCode {
    StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
}

/// Verifies each delivery with each secret using the `standardwebhooks` Python library:
/// per delivery, `{"verified": [bool per secret], "signatures": [...]}`.
pub async fn verify(secrets: &[&str], deliveries: &[Seen]) -> Vec<Value> {
    let spec = json!({
        "secrets": secrets,
        "deliveries": deliveries.iter().map(|d| json!({"headers": d.headers, "body": d.body})).collect::<Vec<_>>(),
    });
    let file = tempfile::NamedTempFile::new().expect("temp file");
    std::fs::write(file.path(), spec.to_string()).expect("write");
    let out = crate::python::run("verify_webhooks.py", &[file.path().to_str().unwrap()]).await;
    out.as_array().cloned().unwrap_or_default()
}

/// Acknowledged webhook deliveries, for the benchmark's receiver.
static ACKNOWLEDGED: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// A receiver that only counts: `POST /hook` answers 200, `GET /hook/count` says how many it
/// answered. The benchmark's fake upstream serves it, so the receiver costs little CPU.
pub fn counting_router() -> Router {
    use std::sync::atomic::Ordering;
    Router::new()
        .route(
            "/hook",
            post(|| async {
                ACKNOWLEDGED.fetch_add(1, Ordering::Relaxed);
                StatusCode::OK
            }),
        )
        .route(
            "/hook/count",
            axum::routing::get(|| async { ACKNOWLEDGED.load(Ordering::Relaxed).to_string() }),
        )
}
