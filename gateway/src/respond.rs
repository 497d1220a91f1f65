//! The one place responses are written: JSON bodies with explicit length, the request id on
//! every response, and every [`GatewayError`] in the OpenAI error shape.

use bytes::Bytes;
use pingora::http::ResponseHeader;
use pingora::proxy::Session;
use serde_json::{json, Value};

use crate::error::GatewayError;

/// Extra response headers.
pub type Headers<'a> = &'a [(&'static str, &'a str)];

pub fn header(
    status: u16,
    content_type: &str,
    length: Option<usize>,
    request_id: &str,
    extra: Headers<'_>,
) -> pingora::Result<Box<ResponseHeader>> {
    let mut h = ResponseHeader::build(status, Some(4 + extra.len()))?;
    h.insert_header("content-type", content_type)?;
    match length {
        Some(len) => h.insert_header("content-length", len.to_string())?,
        None => h.insert_header("transfer-encoding", "chunked")?,
    }
    h.insert_header("x-request-id", request_id)?;
    for (name, value) in extra {
        h.insert_header(*name, *value)?;
    }
    Ok(Box::new(h))
}

pub async fn bytes(
    session: &mut Session,
    status: u16,
    content_type: &str,
    body: Bytes,
    request_id: &str,
    extra: Headers<'_>,
) -> pingora::Result<()> {
    let h = header(status, content_type, Some(body.len()), request_id, extra)?;
    session.write_response_header(h, false).await?;
    session.write_response_body(Some(body), true).await
}

pub async fn json(
    session: &mut Session,
    status: u16,
    body: &Value,
    request_id: &str,
    extra: Headers<'_>,
) -> pingora::Result<()> {
    let body = Bytes::from(serde_json::to_vec(body).unwrap_or_default());
    bytes(session, status, "application/json", body, request_id, extra).await
}

/// The OpenAI error body for a gateway failure.
pub fn openai_error(err: &GatewayError, request_id: &str) -> Value {
    let (kind, code) = err.openai_type_and_code();
    let mut error = json!({"message": err.to_string(), "type": kind, "code": code, "param": null, "request_id": request_id});
    if let GatewayError::Denied(d) = err {
        error["reason"] = json!(d.reason);
        error["reason_code"] = json!(d.reason_code);
        error["determining_policy"] = json!(d.determining_policy);
    }
    if let GatewayError::QuotaExceeded {
        quota_id,
        resets_at,
        ..
    } = err
    {
        error["quota_id"] = json!(quota_id);
        error["resets_at"] = json!(resets_at);
    }
    json!({ "error": error })
}

pub async fn error(
    session: &mut Session,
    err: &GatewayError,
    request_id: &str,
) -> pingora::Result<()> {
    if matches!(err, GatewayError::Internal(_)) {
        tracing::error!(request_id, error = %err, "Request failed.");
    } else {
        tracing::debug!(request_id, status = err.status(), error = %err, "Request refused.");
    }
    let retry_after = retry_after(err);
    let mut extra = Vec::new();
    if let Some(secs) = &retry_after {
        extra.push(("retry-after", secs.as_str()));
    }
    if matches!(err, GatewayError::QuotaExceeded { .. }) {
        // The official OpenAI SDKs retry a 429 unless told not to; retrying a used-up quota
        // before it resets only burns the caller's time.
        extra.push(("x-should-retry", "false"));
    }
    json(
        session,
        err.status(),
        &openai_error(err, request_id),
        request_id,
        &extra,
    )
    .await
}

/// Seconds until the call may succeed: when a used-up quota resets, or shortly for a gateway
/// that is still loading its snapshot or spend counters.
fn retry_after(err: &GatewayError) -> Option<String> {
    match err {
        GatewayError::QuotaExceeded { resets_at, .. } => {
            let reset = chrono::DateTime::parse_from_rfc3339(resets_at).ok()?;
            let secs = (reset.timestamp() - chrono::Utc::now().timestamp()).max(1);
            Some(secs.to_string())
        }
        GatewayError::QuotaUnavailable(_) | GatewayError::NotReady => Some("1".into()),
        _ => None,
    }
}

/// A gateway failure on the MCP endpoint: its HTTP status with a JSON-RPC error body.
pub async fn mcp_error(
    session: &mut Session,
    err: &GatewayError,
    request_id: &str,
) -> pingora::Result<()> {
    tracing::debug!(request_id, status = err.status(), error = %err, "MCP request refused.");
    json(
        session,
        err.status(),
        &crate::mcp::error_body(err, request_id),
        request_id,
        &[],
    )
    .await
}
