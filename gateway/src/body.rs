//! Reading a request body whole, size-capped, for the routes that decide on it (model calls
//! and MCP).

use crate::error::GatewayError;
use crate::server::Session;

/// Reads the whole request body, refusing more than `limit` bytes. An oversized body is still
/// read (up to four times the limit) and discarded, so the caller receives the error rather
/// than a reset connection.
pub async fn read(session: &mut Session, limit: usize) -> Result<bytes::Bytes, GatewayError> {
    let mut body = Vec::new();
    let mut seen = 0usize;
    while let Some(chunk) = session
        .read_request_body()
        .await
        .map_err(|e| GatewayError::BadRequest(format!("could not read the request body: {e}")))?
    {
        seen += chunk.len();
        if seen <= limit {
            body.extend_from_slice(&chunk);
        } else if seen > limit.saturating_mul(4) {
            break;
        }
    }
    if seen > limit {
        return Err(GatewayError::TooLarge(limit));
    }
    Ok(bytes::Bytes::from(body))
}
