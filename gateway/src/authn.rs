//! Step two of a gateway request: who is calling. Only agent keys (`svc_…`) are accepted, as
//! `Authorization: Bearer`, or on Anthropic's route as `x-api-key`; the key's SHA-256 is
//! looked up in the snapshot and compared in constant time.

use portcullis_shared::api::agents::AgentStatus;
use portcullis_shared::keys::{self, KeyKind};

use crate::error::GatewayError;
use crate::snapshot::{AgentEntry, Compiled};

/// The key a caller presented: the bearer token of `Authorization`, else (where the route
/// accepts it) the `x-api-key` value.
pub fn presented<'a>(
    authorization: Option<&'a [u8]>,
    api_key: Option<&'a [u8]>,
) -> Result<&'a str, GatewayError> {
    match (authorization, api_key) {
        (None, Some(key)) => std::str::from_utf8(key)
            .map(str::trim)
            .map_err(|_| GatewayError::Unauthenticated("malformed x-api-key header".into())),
        (header, _) => bearer(header),
    }
}

/// The bearer token of an `Authorization` header value.
fn bearer(header: Option<&[u8]>) -> Result<&str, GatewayError> {
    let header = header.ok_or_else(|| {
        GatewayError::Unauthenticated("missing Authorization: Bearer <agent API key>".into())
    })?;
    let text = std::str::from_utf8(header)
        .map_err(|_| GatewayError::Unauthenticated("malformed Authorization header".into()))?;
    text.strip_prefix("Bearer ")
        .or_else(|| text.strip_prefix("bearer "))
        .map(str::trim)
        .ok_or_else(|| {
            GatewayError::Unauthenticated("Authorization must use the Bearer scheme".into())
        })
}

pub fn authenticate<'a>(snap: &'a Compiled, token: &str) -> Result<&'a AgentEntry, GatewayError> {
    match KeyKind::of(token) {
        Some(KeyKind::Agent) => {}
        Some(KeyKind::Platform | KeyKind::Deployment) => {
            return Err(GatewayError::Unauthenticated(
                "platform keys and deployment tokens cannot call gateways; use an agent API key"
                    .into(),
            ))
        }
        None => {
            return Err(GatewayError::Unauthenticated(
                "the API key is malformed".into(),
            ))
        }
    }
    let hash = keys::hash(token);
    let agent = snap
        .keys
        .get_key_value(hash.as_str())
        .filter(|(stored, _)| keys::hashes_equal(stored, &hash))
        .and_then(|(_, index)| snap.agents.get(*index))
        .ok_or_else(|| GatewayError::Unauthenticated("unknown or revoked API key".into()))?;
    match agent.status {
        AgentStatus::Active | AgentStatus::Provisioned => Ok(agent),
        AgentStatus::Suspended => Err(GatewayError::Forbidden(format!(
            "agent '{}' is suspended",
            agent.name
        ))),
        AgentStatus::Revoked => Err(GatewayError::Unauthenticated(format!(
            "agent '{}' is revoked",
            agent.name
        ))),
    }
}
