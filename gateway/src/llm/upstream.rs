//! One call to one upstream member, and what its failure means: try the next member (no
//! response, a timeout, 5xx, 429, or the stored credential refused) or tell the caller now
//! (any other 4xx: the request itself was refused, and another member would refuse it too).
//! Error messages are scrubbed of the stored credential.

use bytes::Bytes;
use portcullis_shared::egress;

use super::credential;
use super::plan::Plan;
use super::translate::Translation;
use crate::error::{GatewayError, Refusal, Shape};
use crate::llm::table::ModelEntry;
use crate::Gateway;

/// Error bodies read from an upstream are cut at this size.
const MAX_ERROR_BODY: usize = 64 * 1024;

/// A member that failed, and the status it answered with (0: none).
pub struct Failed {
    pub error: GatewayError,
    pub status: u16,
}

pub enum Attempt {
    Success(reqwest::Response),
    /// Another member may succeed.
    Retry(Failed),
    /// Every member would fail the same way.
    Final(Failed),
}

pub fn is_event_stream(response: &reqwest::Response) -> bool {
    response
        .headers()
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| {
            v.starts_with("text/event-stream")
                || v.starts_with("application/vnd.amazon.eventstream")
        })
}

pub async fn send(gw: &Gateway, model: &ModelEntry, plan: &Plan, streaming: bool) -> Attempt {
    let accept = if streaming {
        "text/event-stream"
    } else {
        "application/json"
    };
    let mut request = gw
        .http()
        .post(plan.url.clone())
        .header(http::header::CONTENT_TYPE, "application/json")
        .header(http::header::ACCEPT, accept);
    for (name, value) in &plan.headers {
        request = request.header(name, value);
    }
    let request = match credential::authorize(gw, model, plan, request).await {
        Ok(r) => r.body(plan.body.to_request()),
        Err(error) => return Attempt::Retry(Failed { error, status: 0 }),
    };
    let failed = |error| Attempt::Retry(Failed { error, status: 0 });
    if let Err(e) = egress::check_url(&plan.url, gw.config.allow_private_targets) {
        return failed(GatewayError::Upstream(format!(
            "model '{}': {e}",
            model.name
        )));
    }
    let response = match tokio::time::timeout(gw.config.upstream_timeout(), request.send()).await {
        Err(_) => {
            return failed(GatewayError::UpstreamTimeout(format!(
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
            return failed(GatewayError::Upstream(format!(
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
    let retry_after = header_text(&response, http::header::RETRY_AFTER);
    let body = read_capped(response, MAX_ERROR_BODY).await;
    let error = refused(model, plan, status, &body, retry_after);
    let failed = Failed { error, status };
    if retryable(plan.translation, status) {
        Attempt::Retry(failed)
    } else {
        Attempt::Final(failed)
    }
}

/// Whether another member may succeed where this one answered `status`: the upstream failed
/// or was busy, or refused the gateway's credential — but not the request itself. Bedrock's
/// 403 is no access to the model (an administrator's matter), not a passing failure.
fn retryable(translation: Translation, status: u16) -> bool {
    let bedrock = matches!(
        translation,
        Translation::BedrockFromOpenAi | Translation::BedrockFromAnthropic
    );
    match status {
        403 if bedrock => false,
        401 | 403 | 408 | 424 | 429 => true,
        _ => status >= 500,
    }
}

/// What an upstream's error status means for the caller.
fn refused(
    model: &ModelEntry,
    plan: &Plan,
    status: u16,
    body: &[u8],
    retry_after: Option<String>,
) -> GatewayError {
    let text = scrub(&String::from_utf8_lossy(body), &model.secret_values);
    let (kind, message) = plan
        .translation
        .error(text.as_bytes())
        .unwrap_or_else(|| (String::new(), text.trim().to_string()));
    let message: String = message.chars().take(300).collect();
    if status == 401 || status == 403 {
        return GatewayError::Upstream(format!(
            "model '{}' rejected the gateway's stored credential ({status}); an administrator must update it",
            model.name
        ));
    }
    if status >= 500 || !(400..500).contains(&status) {
        // The provider failed, not the caller: 502, with what the provider said.
        let said = if message.is_empty() {
            String::new()
        } else {
            format!(": {message}")
        };
        return GatewayError::Upstream(format!(
            "model '{}': the provider answered {status}{said}",
            model.name
        ));
    }
    // Passed on as it came when the caller speaks the upstream's own API.
    let shape = match plan.translation {
        Translation::OpenAiPassThrough => Some(Shape::OpenAi),
        Translation::AnthropicPassThrough => Some(Shape::Anthropic),
        Translation::Custom => Some(plan.caller),
        _ => None,
    };
    let json = serde_json::from_str::<serde_json::Value>(&text).is_ok();
    GatewayError::UpstreamRefused(Box::new(Refusal {
        status,
        model: model.name.clone(),
        kind,
        message,
        retry_after,
        body: shape.filter(|_| json).map(|s| (s, Bytes::from(text))),
    }))
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
