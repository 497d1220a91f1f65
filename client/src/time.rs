//! Times as a person gives them, turned into the RFC 3339 the API takes: a time as is, or a
//! duration back from now (`30s`, `15m`, `24h`, `7d`).

use crate::error::ClientError;

/// `text` as an RFC 3339 time: unchanged when it is one, otherwise now minus the duration it
/// names (`<whole number><s|m|h|d>`).
pub fn since(text: &str) -> Result<String, ClientError> {
    portcullis_wire::since::since(text).map_err(ClientError::Invalid)
}
