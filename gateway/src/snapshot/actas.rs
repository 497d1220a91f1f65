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

#[derive(Default)]
pub struct AgentActAs {
    pub hmac_secret: Option<String>,
    pub oidc: Option<Arc<OidcConfig>>,
    pub bound_keys: HashMap<String, ActAs>,
}

pub fn resolve(
    a: &SnapAgent,
    providers: &HashMap<&str, &SnapActAsProvider>,
    runtime: &Runtime,
) -> Result<AgentActAs, String> {
    let provider = match a.actas_provider_id.as_deref() {
        Some(id) => Some(*providers.get(id).ok_or_else(|| {
            format!(
                "agent {}: act-as provider {id} is not in the snapshot",
                a.name
            )
        })?),
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
            Some(Arc::new(from_provider(p, runtime)?))
        }
        (Some(ActAsMethod::Oidc), _, Some(url)) => Some(Arc::new(OidcConfig {
            keys: runtime.issuers.source(url, true),
            issuer: None,
            audience: Audience::AgentOrGateway,
            email_claim: "email".into(),
            groups_claim: "groups".into(),
        })),
        _ => None,
    };
    let bound_keys = a
        .bound_keys
        .iter()
        .map(|k| (k.key_hash.clone(), ActAs::bound(k.subject.clone())))
        .collect();
    Ok(AgentActAs {
        hmac_secret,
        oidc,
        bound_keys,
    })
}

fn from_provider(p: &SnapActAsProvider, runtime: &Runtime) -> Result<OidcConfig, String> {
    let issuer = p
        .issuer
        .clone()
        .ok_or_else(|| format!("act-as provider {}: no issuer", p.name))?;
    let audience = p
        .audience
        .clone()
        .ok_or_else(|| format!("act-as provider {}: no audience", p.name))?;
    let keys = match &p.jwks_url {
        Some(url) => runtime.issuers.source(url, false),
        None => runtime.issuers.source(&issuer, true),
    };
    Ok(OidcConfig {
        keys,
        issuer: Some(issuer),
        audience: Audience::Fixed(audience),
        email_claim: p.email_claim.clone(),
        groups_claim: p.groups_claim.clone(),
    })
}
