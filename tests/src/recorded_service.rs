//! A stand-in for a REST service a catalog adapter calls: it answers the recorded exchanges of
//! `catalog/fixtures/<slug>/` by method and path, only with the expected credential (401
//! otherwise, as the services do), and records what it was sent.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::Router;
use serde_json::{json, Value};

/// One request the service received.
#[derive(Debug, Clone)]
pub struct Received {
    pub method: String,
    pub path: String,
    pub query: Option<String>,
    pub headers: HeaderMap,
    pub body: Value,
}

struct Shared {
    credential: String,
    answers: HashMap<(String, String), (u16, Value)>,
    received: Mutex<Vec<Received>>,
}

pub struct RecordedService {
    pub addr: std::net::SocketAddr,
    shared: Arc<Shared>,
    _task: tokio::task::JoinHandle<()>,
}

/// The fixtures folder of an adapter.
pub fn fixtures(slug: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(format!("../catalog/fixtures/{slug}"))
}

impl RecordedService {
    /// Serves `slug`'s fixtures at their recorded paths, requiring `Authorization:
    /// <credential>`.
    pub async fn start(slug: &str, credential: &str) -> Self {
        let mut answers = HashMap::new();
        for file in std::fs::read_dir(fixtures(slug))
            .expect("fixtures")
            .flatten()
        {
            let fx: Value =
                serde_json::from_str(&std::fs::read_to_string(file.path()).unwrap()).unwrap();
            let method = fx["request"]["method"].as_str().unwrap().to_string();
            let path = fx["request"]["path"].as_str().unwrap().to_string();
            let status = fx["status"].as_u64().unwrap() as u16;
            answers.insert((method, path), (status, fx["response"].clone()));
        }
        let shared = Arc::new(Shared {
            credential: credential.to_string(),
            answers,
            received: Mutex::default(),
        });
        let router = Router::new().fallback(answer).with_state(shared.clone());
        let (addr, task) = crate::process::serve(router).await;
        Self {
            addr,
            shared,
            _task: task,
        }
    }

    /// The base URL to install the adapter with: the service's address and the path its
    /// real base URL has (`/api` for Slack, `/v1` for Notion).
    pub fn base_url(&self, prefix: &str) -> String {
        format!("http://{}{prefix}", self.addr)
    }

    pub fn received(&self) -> Vec<Received> {
        self.shared.received.lock().unwrap().clone()
    }
}

async fn answer(
    State(s): State<Arc<Shared>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    s.received.lock().unwrap().push(Received {
        method: method.to_string(),
        path: uri.path().to_string(),
        query: uri.query().map(str::to_string),
        headers: headers.clone(),
        body: serde_json::from_slice(&body).unwrap_or(Value::Null),
    });
    let given = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    if given != s.credential {
        return (
            StatusCode::UNAUTHORIZED,
            axum::Json(json!({"message": "Bad credentials"})),
        )
            .into_response();
    }
    match s.answers.get(&(method.to_string(), uri.path().to_string())) {
        Some((status, body)) => (
            StatusCode::from_u16(*status).unwrap_or(StatusCode::OK),
            axum::Json(body.clone()),
        )
            .into_response(),
        None => (
            StatusCode::NOT_FOUND,
            axum::Json(json!({"message": "Not Found"})),
        )
            .into_response(),
    }
}
