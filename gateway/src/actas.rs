//! Who the agent acts for. The agent's act-as method decides how `X-Svc-Act-As` is read:
//! `none` (an identity the agent asserts), `hmac` (signed with a shared secret, within ±300 s),
//! `oidc` (a JWT from a trusted issuer, checked against its published keys) or `bound` (no
//! header: the identity comes from the key, and a header fails closed). The workspace's
//! `actas_min_method` then refuses identities weaker than it admits.

mod claims;
pub mod compile;
pub mod oidc;
#[cfg(test)]
mod tests;

use portcullis_shared::api::actas::ActAsStrength;
use portcullis_shared::api::agents::ActAsMethod;
use portcullis_shared::policy::ActAs;
use std::sync::Arc;

use crate::error::GatewayError;
use crate::Gateway;

/// How one agent's act-as identities are read and verified at this revision.
pub struct AgentActAs {
    /// The agent's id and name.
    pub id: String,
    pub name: String,
    pub method: Option<ActAsMethod>,
    pub required: bool,
    /// The HMAC act-as secret (the agent's own or its provider's), when the method is `hmac`.
    pub hmac_secret: Option<String>,
    /// How act-as tokens are verified, when the method is `oidc`.
    pub oidc: Option<Arc<oidc::OidcConfig>>,
    /// Act-as tokens already verified for this agent at this snapshot.
    pub oidc_memory: oidc::Memory,
}

pub const HEADER: &str = "x-svc-act-as";
/// The longest act-as header read (an ID token with many groups fits).
const MAX_HEADER: usize = 16 * 1024;

/// An act-as refusal with the reason code the caller and the audit trail see.
pub(crate) fn refused(code: &'static str, message: &str) -> GatewayError {
    GatewayError::ActAsRefused {
        code,
        message: message.to_string(),
    }
}

/// What the header says before any network step: an identity, or a JWT to check against its
/// issuer's keys.
pub(crate) enum Step<'h> {
    Done(ActAs),
    Oidc(&'h str),
}

/// Reads the header by the agent's method. `bound` is the identity the presented key (or the
/// token exchanged for it) is bound to.
pub(crate) fn identify<'h>(
    agent: &AgentActAs,
    header: Option<&'h [u8]>,
    bound: Option<ActAs>,
    now_secs: i64,
) -> Result<Step<'h>, GatewayError> {
    if let Some(person) = bound.as_ref().filter(|b| b.is_interactive()) {
        if header.is_some() {
            return Err(refused(
                "actas_interactive",
                &format!(
                    "a signed-in person uses agent '{}' here; do not send {HEADER}",
                    agent.name
                ),
            ));
        }
        return Ok(Step::Done(person.clone()));
    }
    let header = match (header, agent.method) {
        (Some(_), Some(ActAsMethod::Bound)) => {
            return Err(refused(
                "actas_bound",
                &format!(
                    "agent '{}' acts for the person its key is bound to; do not send {HEADER}",
                    agent.name
                ),
            ))
        }
        (None, Some(ActAsMethod::Bound)) if bound.is_some() => {
            return Ok(Step::Done(bound.unwrap_or_default()))
        }
        (None, _) if agent.required => {
            return Err(refused(
                "actas_required",
                &format!(
                    "agent '{}' must act for a person: send {HEADER}{}",
                    agent.name,
                    if agent.method == Some(ActAsMethod::Bound) {
                        " (this key is bound to no one)"
                    } else {
                        ""
                    }
                ),
            ))
        }
        (None, _) => return Ok(Step::Done(ActAs::default())),
        (Some(h), _) if h.len() > MAX_HEADER => {
            return Err(refused(
                "actas_malformed",
                &format!("the header is longer than {MAX_HEADER} bytes"),
            ))
        }
        (Some(h), _) => std::str::from_utf8(h)
            .map_err(|_| refused("actas_malformed", "the header is not text"))?
            .trim(),
    };
    match agent.method {
        None => Err(GatewayError::BadRequest(format!(
            "agent '{}' has no act-as method configured; do not send {HEADER}",
            agent.name
        ))),
        Some(ActAsMethod::None) => claims::plain(header).map(Step::Done),
        Some(ActAsMethod::Hmac) => {
            let secret = agent
                .hmac_secret
                .as_deref()
                .ok_or_else(|| refused("actas_unconfigured", "no HMAC secret is configured"))?;
            claims::hmac(secret, header, now_secs).map(Step::Done)
        }
        Some(ActAsMethod::Oidc) => Ok(Step::Oidc(header)),
        Some(ActAsMethod::Bound) => Err(refused("actas_bound", "bound agents take no header")),
    }
}

/// The strength an identity's method proves. A bound identity is set by an administrator on
/// the server, and an interactive one was verified by the OpenID provider at sign-in, so both
/// satisfy any floor.
fn strength(method: &str) -> ActAsStrength {
    match method {
        "hmac" => ActAsStrength::Hmac,
        "oidc" | "bound" | "interactive" => ActAsStrength::Oidc,
        _ => ActAsStrength::None,
    }
}

/// Refuses an identity weaker than the workspace admits.
fn admit(min: ActAsStrength, agent: &AgentActAs, act_as: ActAs) -> Result<ActAs, GatewayError> {
    if act_as.present && strength(&act_as.method) < min {
        return Err(refused(
            "actas_too_weak",
            &format!(
                "this workspace admits act-as identities verified by {} or stronger; agent '{}' \
                 presented one by {}",
                min.as_str(),
                agent.name,
                act_as.method
            ),
        ));
    }
    Ok(act_as)
}

/// The admitted identity for Cedar's context, or why the request is refused.
pub async fn verify(
    gw: &Gateway,
    min: ActAsStrength,
    agent: &AgentActAs,
    gateway_id: &str,
    header: Option<&[u8]>,
    bound: Option<ActAs>,
) -> Result<ActAs, GatewayError> {
    let now = chrono::Utc::now().timestamp();
    let act_as = match identify(agent, header, bound, now)? {
        Step::Done(act_as) => act_as,
        Step::Oidc(token) => oidc::verify(gw, agent, gateway_id, token, now).await?,
    };
    admit(min, agent, act_as)
}
