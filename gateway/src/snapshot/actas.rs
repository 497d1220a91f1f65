//! An agent's act-as sources, resolved from the snapshot: its HMAC secret (its own or its
//! provider's), how its OIDC tokens are verified, and the end users its keys are bound to.

use std::collections::HashMap;
use std::sync::Arc;

use portcullis_shared::api::actas::ProviderMethod;
use portcullis_shared::api::agents::ActAsMethod;
use portcullis_shared::policy::ActAs;
use portcullis_shared::snapshot::{SnapActAsProvider, SnapAgent};

use super::Runtime;
use crate::actas::oidc::{Audience, OidcConfig};

pub struct AgentActAs {
    pub hmac_secret: Option<String>,
    pub oidc: Option<Arc<OidcConfig>>,
    pub bound_keys: HashMap<String, ActAs>,
}

pub fn resolve(
    a: &SnapAgent,
    providers: &HashMap<&str, &SnapActAsProvider>,
    runtime: &Runtime,
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
            from_provider(p, runtime).map(Arc::new)
        }
        (Some(ActAsMethod::Oidc), None, _) if a.actas_provider_id.is_some() => None,
        (Some(ActAsMethod::Oidc), _, Some(url)) => Some(Arc::new(OidcConfig {
            keys: runtime.issuers.source(url, true),
            issuer: None,
            audience: Audience::AgentOrGateway,
            email_claim: "email".into(),
            groups_claim: "groups".into(),
            trust_unverified_email: false,
        })),
        _ => None,
    };
    let bound_keys = a
        .bound_keys
        .iter()
        .map(|k| (k.key_hash.clone(), ActAs::bound(k.subject.clone())))
        .collect();
    AgentActAs {
        hmac_secret,
        oidc,
        bound_keys,
    }
}

/// An `oidc` provider's verifier; `None` (calls refused) when it lacks an issuer or audience.
fn from_provider(p: &SnapActAsProvider, runtime: &Runtime) -> Option<OidcConfig> {
    let (Some(issuer), Some(audience)) = (p.issuer.clone(), p.audience.clone()) else {
        tracing::warn!(provider = %p.name, "An oidc act-as provider without issuer or audience; its agents' act-as calls are refused.");
        return None;
    };
    let keys = match &p.jwks_url {
        Some(url) => runtime.issuers.source(url, false),
        None => runtime.issuers.source(&issuer, true),
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
