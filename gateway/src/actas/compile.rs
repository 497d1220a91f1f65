//! An agent's act-as sources, resolved from the snapshot: its HMAC secret (its own or its
//! provider's) and how its OIDC tokens are verified.

use std::collections::HashMap;
use std::sync::Arc;

use portcullis_shared::api::actas::ProviderMethod;
use portcullis_shared::api::agents::ActAsMethod;
use portcullis_shared::snapshot::{SnapActAsProvider, SnapAgent, Snapshot};

use super::oidc::{Audience, Issuers, OidcConfig};
use super::AgentActAs;

/// The workspace's act-as providers, and the issuers' key sets kept across snapshots.
pub struct Sources<'a> {
    providers: HashMap<&'a str, &'a SnapActAsProvider>,
    issuers: &'a Issuers,
}

impl<'a> Sources<'a> {
    pub fn new(snap: &'a Snapshot, issuers: &'a Issuers) -> Self {
        let providers = snap
            .actas_providers
            .iter()
            .map(|p| (p.provider_id.as_str(), p))
            .collect();
        Self { providers, issuers }
    }

    /// How the agent's act-as identities are read and verified.
    pub fn agent(&self, a: &SnapAgent) -> AgentActAs {
        resolve(a, &self.providers, self.issuers)
    }
}

fn resolve(
    a: &SnapAgent,
    providers: &HashMap<&str, &SnapActAsProvider>,
    issuers: &Issuers,
) -> AgentActAs {
    // A provider the snapshot lacks leaves this agent unable to verify anyone (its act-as
    // calls fail closed); it does not stop the rest of the snapshot from applying.
    let provider = match a.actas_provider_id.as_deref() {
        Some(id) => {
            let found = providers.get(id).copied();
            if found.is_none() {
                tracing::warn!(agent = %a.name, provider_id = id, "The agent's act-as provider is not in the snapshot; its act-as calls are refused.");
            }
            found
        }
        None => None,
    };
    let secret = |s: &Option<portcullis_shared::snapshot::Secrets>| {
        s.as_ref().and_then(|s| s.0.get("secret").cloned())
    };
    let hmac_secret = match provider {
        Some(p) if p.method == ProviderMethod::Hmac => secret(&p.hmac_secret),
        _ => secret(&a.actas_hmac_secret),
    };
    let oidc = match (a.actas_method, provider, a.actas_oidc_url.as_deref()) {
        (Some(ActAsMethod::Oidc), Some(p), _) if p.method == ProviderMethod::Oidc => {
            from_provider(p, issuers).map(Arc::new)
        }
        (Some(ActAsMethod::Oidc), None, _) if a.actas_provider_id.is_some() => None,
        (Some(ActAsMethod::Oidc), _, Some(url)) => Some(Arc::new(OidcConfig {
            keys: issuers.source(url, true),
            issuer: None,
            audience: Audience::AgentOrGateway,
            email_claim: "email".into(),
            groups_claim: "groups".into(),
            trust_unverified_email: false,
        })),
        _ => None,
    };
    AgentActAs {
        id: a.agent_id.clone(),
        name: a.name.clone(),
        method: a.actas_method,
        required: a.actas_required,
        hmac_secret,
        oidc,
        oidc_memory: Default::default(),
    }
}

/// An `oidc` provider's verifier; `None` (calls refused) when it lacks an issuer or audience.
fn from_provider(p: &SnapActAsProvider, issuers: &Issuers) -> Option<OidcConfig> {
    let (Some(issuer), Some(audience)) = (p.issuer.clone(), p.audience.clone()) else {
        tracing::warn!(provider = %p.name, "An oidc act-as provider without issuer or audience; its agents' act-as calls are refused.");
        return None;
    };
    let keys = match &p.jwks_url {
        Some(url) => issuers.source(url, false),
        None => issuers.source(&issuer, true),
    };
    Some(OidcConfig {
        keys,
        issuer: Some(issuer),
        audience: Audience::Fixed(audience),
        email_claim: p.email_claim.clone(),
        groups_claim: p.groups_claim.clone(),
        trust_unverified_email: p.trust_unverified_email,
    })
}
