//! The one place responses are written: bodies with explicit length, the request id on every
//! response, and every [`GatewayError`] in the shape of the API that was called — OpenAI,
//! Anthropic or MCP's JSON-RPC — the way linkerd's `rescue` does it.

use bytes::Bytes;
use pingora::http::ResponseHeader;
use serde_json::{json, Value};

use crate::error::{GatewayError, RpcError, Shape};
use crate::session::Session;

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
    session.write_response_header(h).await?;
    session.write_response_body(body, true).await
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

/// Answers a failed request in the caller's shape.
pub async fn error(
    session: &mut Session,
    shape: Shape,
    err: &GatewayError,
    request_id: &str,
    extra: Headers<'_>,
) -> pingora::Result<()> {
    if matches!(err, GatewayError::Internal(_)) {
        tracing::error!(request_id, error = %err, "Request failed.");
    } else {
        tracing::debug!(request_id, status = err.status(), error = %err, "Request refused.");
    }
    let retry_after = retry_after(err);
    let mut headers: Vec<(&'static str, &str)> = extra.to_vec();
    if let Some(secs) = &retry_after {
        headers.push(("retry-after", secs.as_str()));
    }
    if matches!(err, GatewayError::QuotaExceeded { .. }) {
        // The official SDKs retry a 429 unless told not to; retrying a used-up quota before it
        // resets only burns the caller's time.
        headers.push(("x-should-retry", "false"));
    }
    // An upstream's own refusal, already in the caller's shape, is passed on as it came.
    if let GatewayError::UpstreamRefused(r) = err {
        if let Some((body_shape, body)) = &r.body {
            if *body_shape == shape {
                let status = err.status();
                return bytes(
                    session,
                    status,
                    "application/json",
                    body.clone(),
                    request_id,
                    &headers,
                )
                .await;
            }
        }
    }
    let body = match shape {
        Shape::OpenAi => openai_error(err, request_id),
        Shape::Anthropic => anthropic_error(err, request_id),
        Shape::JsonRpc => jsonrpc_refusal(err, request_id),
    };
    json(session, err.status(), &body, request_id, &headers).await
}

/// `{"error": {message, type, code, param, request_id, …}}`.
pub fn openai_error(err: &GatewayError, request_id: &str) -> Value {
    let (kind, code) = err.openai_type_and_code();
    let mut error = json!({"message": err.to_string(), "type": kind, "code": code, "param": null, "request_id": request_id});
    err.details(&mut error);
    json!({ "error": error })
}

/// `{"type": "error", "error": {type, message, …}, "request_id"}`.
pub fn anthropic_error(err: &GatewayError, request_id: &str) -> Value {
    let (_, code) = err.openai_type_and_code();
    let mut error = json!({"type": err.anthropic_type(), "message": err.to_string(), "code": code});
    err.details(&mut error);
    json!({"type": "error", "error": error, "request_id": request_id})
}

/// A refusal before the MCP request was read (authentication, routing): its HTTP status with
/// a JSON-RPC error body.
fn jsonrpc_refusal(err: &GatewayError, request_id: &str) -> Value {
    let data = err.refusal_data(request_id);
    json!({"jsonrpc": "2.0", "id": null, "error": {"code": -32001, "message": err.to_string(), "data": data}})
}

/// A JSON-RPC reply: the result, or the in-band error.
pub fn jsonrpc_reply(id: Value, outcome: Result<Value, RpcError>) -> Value {
    portcullis_shared::jsonrpc::reply(id, outcome.map_err(|e| (e.code, e.message, e.data)))
}

/// Seconds until the call may succeed: when a used-up quota resets, shortly for a gateway
/// that is still loading its snapshot or spend counters, or as the upstream said.
fn retry_after(err: &GatewayError) -> Option<String> {
    match err {
        GatewayError::QuotaExceeded { resets_at, .. } => {
            let reset = chrono::DateTime::parse_from_rfc3339(resets_at).ok()?;
            let secs = (reset.timestamp() - chrono::Utc::now().timestamp()).max(1);
            Some(secs.to_string())
        }
        GatewayError::QuotaUnavailable(_) | GatewayError::NotReady => Some("1".into()),
        GatewayError::UpstreamRefused(r) => r.retry_after.clone(),
        _ => None,
    }
}
