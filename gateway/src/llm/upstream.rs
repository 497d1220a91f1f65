//! One call to one upstream member, and what its failure means: retry on the next member
//! (no response, timeout, 5xx, 429) or answer the caller now (any other 4xx). Error bodies
//! are passed on in the caller's shape with the upstream credential scrubbed out.

use std::time::Duration;

use bytes::Bytes;
use http::{HeaderName, HeaderValue};
use pingora::proxy::Session;
use serde_json::{json, Value};

use crate::error::GatewayError;
use crate::request::RequestCtx;
use crate::snapshot::ModelEntry;
use crate::{respond, Gateway};

/// Error bodies read from an upstream are cut at this size.
const MAX_ERROR_BODY: usize = 64 * 1024;

pub enum Attempt {
    Success(reqwest::Response),
    Retry(Failure),
    Final(Failure),
}

pub enum Failure {
    /// The gateway could not use the member at all.
    Refused(GatewayError),
    /// No usable response arrived.
    Transport(GatewayError),
    /// The upstream answered with an error status.
    Response {
        model: String,
        status: u16,
        body: Bytes,
        content_type: String,
        retry_after: Option<String>,
        scrub: Vec<String>,
    },
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::Refused(e) => write!(f, "{e}"),
            Failure::Transport(error) => write!(f, "{error}"),
            Failure::Response { status, .. } => write!(f, "upstream answered {status}"),
        }
    }
}

pub fn is_event_stream(response: &reqwest::Response) -> bool {
    response
        .headers()
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/event-stream"))
}

pub async fn attempt(
    gw: &Gateway,
    model: &ModelEntry,
    url: reqwest::Url,
    credential: &[(HeaderName, HeaderValue)],
    body: Bytes,
    streaming: bool,
) -> Attempt {
    let mut request = gw
        .http()
        .post(url)
        .header(http::header::CONTENT_TYPE, "application/json")
        .header(
            http::header::ACCEPT,
            if streaming {
                "text/event-stream"
            } else {
                "application/json"
            },
        );
    for (name, value) in credential {
        request = request.header(name, value);
    }
    let sent = tokio::time::timeout(gw.config.upstream_timeout(), request.body(body).send()).await;
    let transport = |error| Attempt::Retry(Failure::Transport(error));
    let response = match sent {
        Err(_) => {
            return transport(GatewayError::UpstreamTimeout(format!(
                "model '{}' sent no response within {} s",
                model.name, gw.config.upstream_timeout_secs
            )))
        }
        Ok(Err(e)) => {
            let kind = if e.is_connect() {
                "could not connect"
            } else {
                "request failed"
            };
            return transport(GatewayError::Upstream(format!(
                "model '{}': {kind}",
                model.name
            )));
        }
        Ok(Ok(r)) => r,
    };
    let status = response.status().as_u16();
    if response.status().is_success() {
        return Attempt::Success(response);
    }
    let content_type = header_text(&response, http::header::CONTENT_TYPE)
        .unwrap_or_else(|| "application/json".into());
    let retry_after = header_text(&response, http::header::RETRY_AFTER);
    let body = read_capped(response, MAX_ERROR_BODY).await;
    let failure = Failure::Response {
        model: model.name.clone(),
        status,
        body,
        content_type,
        retry_after,
        scrub: model.secret_values.clone(),
    };
    if status == 429 || status >= 500 {
        Attempt::Retry(failure)
    } else {
        Attempt::Final(failure)
    }
}

fn header_text(response: &reqwest::Response, name: http::header::HeaderName) -> Option<String> {
    response
        .headers()
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
}

async fn read_capped(mut response: reqwest::Response, cap: usize) -> Bytes {
    let mut out = Vec::new();
    while let Ok(Some(chunk)) = response.chunk().await {
        let room = cap.saturating_sub(out.len());
        out.extend_from_slice(&chunk[..chunk.len().min(room)]);
        if out.len() >= cap {
            break;
        }
    }
    Bytes::from(out)
}

/// Replaces every secret value in `text`.
fn scrub(text: &str, secrets: &[String]) -> String {
    secrets.iter().fold(text.to_string(), |acc, s| {
        acc.replace(s.as_str(), "[redacted]")
    })
}

/// What became of an answer the upstream gave (it accepted the call, so the call is charged
/// whatever happens next): the usage it reported, and the failure that cut the relay short
/// (the answer broke off, or the caller went away), if any.
pub struct Relayed {
    pub usage: Option<Value>,
    pub failure: Option<GatewayError>,
}

/// Relays a whole (non-streamed) successful response; an upstream that stops sending its body
/// for `timeout` has failed.
pub async fn relay_whole(
    session: &mut Session,
    response: reqwest::Response,
    model: &ModelEntry,
    request_id: &str,
    extra: &[(&'static str, &str)],
    timeout: Duration,
) -> Relayed {
    let status = response.status().as_u16();
    let content_type = header_text(&response, http::header::CONTENT_TYPE)
        .unwrap_or_else(|| "application/json".into());
    let failed = |e: GatewayError| Relayed {
        usage: None,
        failure: Some(e),
    };
    let body = match tokio::time::timeout(timeout, response.bytes()).await {
        Ok(Ok(body)) => body,
        Ok(Err(_)) => {
            return failed(GatewayError::Upstream(format!(
                "model '{}': the response body broke off",
                model.name
            )))
        }
        Err(_) => {
            return failed(GatewayError::UpstreamTimeout(format!(
                "model '{}': the response body stalled",
                model.name
            )))
        }
    };
    let usage = usage_of(&body);
    let failure = respond::bytes(session, status, &content_type, body, request_id, extra)
        .await
        .err()
        .map(|e| GatewayError::Internal(format!("writing the response: {e}")));
    Relayed { usage, failure }
}

/// The `usage` object of a JSON response, read without building the rest of it.
fn usage_of(body: &[u8]) -> Option<Value> {
    #[derive(serde::Deserialize)]
    struct UsageOnly {
        #[serde(default)]
        usage: Option<Value>,
    }
    serde_json::from_slice::<UsageOnly>(body)
        .ok()
        .and_then(|u| u.usage)
        .filter(|u| u.is_object())
}

impl Failure {
    /// Answers the caller with this failure: an upstream error response passed on (scrubbed;
    /// a rejected gateway credential becomes 502), or the gateway's own error.
    pub async fn respond(
        self,
        session: &mut Session,
        rc: &RequestCtx<'_>,
    ) -> Result<(), GatewayError> {
        match self {
            Failure::Refused(e) | Failure::Transport(e) => Err(e),
            Failure::Response {
                model,
                status,
                body,
                content_type,
                retry_after,
                scrub: secrets,
            } => {
                let text = scrub(&String::from_utf8_lossy(&body), &secrets);
                if status == 401 || status == 403 {
                    return Err(GatewayError::Upstream(format!(
                        "model '{model}' rejected the gateway's stored credential ({status}); an administrator must update it"
                    )));
                }
                let body = if serde_json::from_str::<Value>(&text).is_ok() {
                    Bytes::from(text)
                } else {
                    let err = json!({"error": {"message": format!("upstream answered {status}: {text}"), "type": "upstream_error", "code": "upstream_error", "param": null, "request_id": rc.request_id}});
                    Bytes::from(err.to_string())
                };
                let content_type = if content_type.starts_with("application/json") {
                    content_type
                } else {
                    "application/json".into()
                };
                let mut extra = rc.echo_headers(&model);
                if let Some(r) = retry_after.as_deref() {
                    extra.push(("retry-after", r));
                }
                respond::bytes(session, status, &content_type, body, rc.request_id, &extra)
                    .await
                    .map_err(|e| GatewayError::Internal(format!("writing the response: {e}")))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scrubs_every_secret() {
        let out = scrub(
            r#"{"error":"bad key sk-123456789 (Bearer sk-123456789)"}"#,
            &["sk-123456789".into()],
        );
        assert!(!out.contains("sk-123456789"));
        assert!(out.contains("[redacted]"));
    }
}
