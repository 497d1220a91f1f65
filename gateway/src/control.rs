//! The gateway's client of the control plane's sync service (`svc.sync.v1.SyncService`): one
//! typed call per operation, one error type, and one backoff policy for the loops that retry
//! them. Every call carries the deployment token and follows no redirect; the control plane
//! is at the operator's URL (often a private address), outside the upstream egress policy.

use std::time::Duration;

use bytes::Bytes;
use portcullis_shared::api::tools::{ReportToolsRequest, ReportToolsResponse};
use portcullis_shared::snapshot::{
    GetCredentialRequest, GetCredentialResponse, GetSnapshotRequest, GetSnapshotResponse,
    GetSpendRequest, GetSpendResponse,
};
use serde::de::DeserializeOwned;
use serde::Serialize;

thread_local! {
    /// Each thread's client: connections are pooled per runtime, and the gateway runs one
    /// runtime per thread.
    static CLIENT: std::cell::OnceCell<reqwest::Client> = const { std::cell::OnceCell::new() };
}

/// How long a call may take, unless it says otherwise.
const CALL_TIMEOUT: Duration = Duration::from_secs(10);

/// Why a call to the control plane failed.
#[derive(Debug, thiserror::Error)]
pub enum SyncError {
    /// No answer: the control plane is down, unreachable, or too slow.
    #[error("the control plane is unreachable: {0}")]
    Unreachable(String),
    /// An answer other than success, with the control plane's message when it sent one.
    #[error("the control plane answered {status}{}", .message.as_deref().map(|m| format!(": {m}")).unwrap_or_default())]
    Refused {
        status: reqwest::StatusCode,
        message: Option<String>,
    },
    /// A success whose body is not what the operation returns.
    #[error("the control plane's answer was not understood: {0}")]
    Unreadable(String),
}

impl SyncError {
    /// Whether the control plane refused the request itself (the same request is refused the
    /// same way again), rather than failing to answer it.
    pub fn is_bad_request(&self) -> bool {
        matches!(self, SyncError::Refused { status, .. } if *status == reqwest::StatusCode::BAD_REQUEST)
    }
}

/// A `GetSnapshot` reply, with its body as received (kept as the last-known-good snapshot)
/// and how long reading it took.
pub struct SnapshotReply {
    pub reply: GetSnapshotResponse,
    pub body: Bytes,
    pub parse_time: Duration,
}

/// The control plane at one URL, as one deployment.
#[derive(Clone)]
pub struct ControlPlane {
    base: String,
    token: String,
}

impl ControlPlane {
    pub fn new(url: &str, token: &str) -> Self {
        Self {
            base: url.trim_end_matches('/').to_string(),
            token: token.to_string(),
        }
    }

    /// `GetSnapshot`, waiting up to `request.wait_seconds` for a newer revision.
    pub async fn get_snapshot(
        &self,
        request: &GetSnapshotRequest,
    ) -> Result<SnapshotReply, SyncError> {
        let wait = u64::from(request.wait_seconds.unwrap_or_default());
        let body = self
            .send("GetSnapshot", request, Duration::from_secs(wait + 15))
            .await?
            .bytes()
            .await
            .map_err(|e| SyncError::Unreachable(e.to_string()))?;
        let started = std::time::Instant::now();
        let reply =
            serde_json::from_slice(&body).map_err(|e| SyncError::Unreadable(e.to_string()))?;
        Ok(SnapshotReply {
            reply,
            body,
            parse_time: started.elapsed(),
        })
    }

    /// `GetSpend`: the workspace's recorded charges.
    pub async fn get_spend(&self) -> Result<GetSpendResponse, SyncError> {
        self.call("GetSpend", &GetSpendRequest::default(), CALL_TIMEOUT)
            .await
    }

    /// `GetCredential`: a person's credential for a connection, or where to provide it.
    pub async fn get_credential(
        &self,
        request: &GetCredentialRequest,
    ) -> Result<GetCredentialResponse, SyncError> {
        self.call("GetCredential", request, CALL_TIMEOUT).await
    }

    /// `ReportTools`: the operations a connection was found to offer.
    pub async fn report_tools(
        &self,
        request: &ReportToolsRequest,
    ) -> Result<ReportToolsResponse, SyncError> {
        self.call("ReportTools", request, Duration::from_secs(30))
            .await
    }

    /// `IngestAudit`, with the request body already serialized (spooled events).
    pub async fn ingest_audit(&self, body: Vec<u8>) -> Result<(), SyncError> {
        self.post("IngestAudit", body, CALL_TIMEOUT).await.map(drop)
    }

    async fn call<Req: Serialize, Resp: DeserializeOwned>(
        &self,
        operation: &str,
        request: &Req,
        timeout: Duration,
    ) -> Result<Resp, SyncError> {
        self.send(operation, request, timeout)
            .await?
            .json()
            .await
            .map_err(|e| SyncError::Unreadable(e.to_string()))
    }

    async fn send<Req: Serialize>(
        &self,
        operation: &str,
        request: &Req,
        timeout: Duration,
    ) -> Result<reqwest::Response, SyncError> {
        let body = serde_json::to_vec(request).map_err(|e| SyncError::Unreadable(e.to_string()))?;
        self.post(operation, body, timeout).await
    }

    async fn post(
        &self,
        operation: &str,
        body: Vec<u8>,
        timeout: Duration,
    ) -> Result<reqwest::Response, SyncError> {
        let response = client()
            .post(format!("{}/svc.sync.v1.SyncService/{operation}", self.base))
            .bearer_auth(&self.token)
            .header(http::header::CONTENT_TYPE, "application/json")
            .body(body)
            .timeout(timeout)
            .send()
            .await
            .map_err(|e| SyncError::Unreachable(e.to_string()))?;
        let status = response.status();
        if status.is_success() {
            return Ok(response);
        }
        // A Connect error carries its message; anything else is passed on as text.
        let text = response.text().await.unwrap_or_default();
        let message = serde_json::from_str::<serde_json::Value>(&text)
            .ok()
            .and_then(|v| v["message"].as_str().map(str::to_string))
            .or_else(|| Some(text).filter(|t| !t.is_empty()));
        Err(SyncError::Refused { status, message })
    }
}

fn client() -> reqwest::Client {
    CLIENT.with(|cell| {
        cell.get_or_init(|| {
            reqwest::Client::builder()
                .redirect(reqwest::redirect::Policy::none())
                .connect_timeout(Duration::from_secs(5))
                .user_agent(concat!("portcullis-gateway/", env!("CARGO_PKG_VERSION")))
                .build()
                .unwrap_or_default()
        })
        .clone()
    })
}

/// How the loops that call the control plane wait after a failure: 250 ms, doubling each
/// failure in a row, up to a ceiling.
pub struct Backoff {
    next: Duration,
    ceiling: Duration,
}

impl Backoff {
    const FIRST: Duration = Duration::from_millis(250);

    pub fn up_to(ceiling: Duration) -> Self {
        Self {
            next: Self::FIRST,
            ceiling,
        }
    }

    /// The wait before the next attempt (then the one after is longer).
    pub fn take(&mut self) -> Duration {
        let wait = self.next;
        self.next = (self.next * 2).min(self.ceiling);
        wait
    }

    /// What the next wait would be, without taking it.
    pub fn peek(&self) -> Duration {
        self.next
    }

    /// After a success: the next failure waits the least again.
    pub fn reset(&mut self) {
        self.next = Self::FIRST;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_backoff_doubles_to_its_ceiling_and_restarts_after_a_success() {
        let mut backoff = Backoff::up_to(Duration::from_secs(1));
        let waits: Vec<u128> = (0..5).map(|_| backoff.take().as_millis()).collect();
        assert_eq!(waits, [250, 500, 1000, 1000, 1000]);
        backoff.reset();
        assert_eq!(backoff.peek(), Duration::from_millis(250));
    }

    #[test]
    fn a_refusal_says_the_control_planes_message() {
        let refused = SyncError::Refused {
            status: reqwest::StatusCode::PRECONDITION_FAILED,
            message: Some("not connected yet".into()),
        };
        assert_eq!(
            refused.to_string(),
            "the control plane answered 412 Precondition Failed: not connected yet"
        );
        assert!(!refused.is_bad_request());
        let bare = SyncError::Refused {
            status: reqwest::StatusCode::BAD_REQUEST,
            message: None,
        };
        assert_eq!(
            bare.to_string(),
            "the control plane answered 400 Bad Request"
        );
        assert!(bare.is_bad_request());
    }
}
