//! Beside the request path: the compiled snapshot every request reads, how it is built from
//! what the control plane sends ([`compile`]), kept fresh ([`sync`]) and kept on disk for
//! starts while the control plane is down ([`lkg`]). The snapshot composes the tables each
//! step owns and compiles; it holds none of its own.

pub mod compile;
mod entities;
pub mod lkg;
pub mod sync;
#[cfg(test)]
mod tests;

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use portcullis_shared::api::actas::ActAsStrength;

use crate::authn::AgentEntry;
use crate::authz::{self, Rules};
use crate::guard::scope::GatewayGuards;
use crate::llm::table::{GatewayModels, ModelEntry, ModelRuntime, Target};
use crate::mcp::table::{GatewayTools, Tools, ToolsByName};
use crate::request::GatewayIdentity;
use crate::spend::QuotaEntry;

pub use compile::{compile, compile_from};

/// One revision of the workspace, ready to serve: each step's table.
pub struct Compiled {
    pub revision: u64,
    pub workspace_id: String,
    /// Agents, keys and exchanged tokens.
    pub authn: crate::authn::Table,
    /// The workspace's rules and entities.
    pub authz: authz::Table,
    /// The weakest act-as identity the workspace admits.
    pub actas_min: ActAsStrength,
    /// The enabled quotas (disabled ones are stored, not enforced).
    pub quotas: Vec<Arc<QuotaEntry>>,
    pub gateways: HashMap<String, GatewayEntry>,
    /// Tool connections by name (the prefix of `connection/tool`).
    pub tools: ToolsByName,
    /// Where people sign in for interactive access: the control plane's public URL.
    pub authorization_server: String,
}

impl Compiled {
    /// Every model some gateway can call, directly or in a pool (a model may come more than
    /// once).
    pub fn models(&self) -> Vec<&Arc<ModelEntry>> {
        let mut out = Vec::new();
        for (target, _) in self
            .gateways
            .values()
            .flat_map(|g| g.models.targets.values())
        {
            match target {
                Target::Model(m) => out.push(m),
                Target::Pool(p) => out.extend(p.members.iter().map(|m| &m.model)),
            }
        }
        out
    }

    /// The tool connections that changed or went away since `before`, and the models whose
    /// shared OAuth grant changed: the connections whose cached credentials are stale.
    pub fn credentials_changed_since<'a>(&self, before: &'a Compiled) -> Vec<&'a str> {
        let now: HashSet<(&str, &str)> = self
            .tools
            .values()
            .map(|t| (t.id.as_str(), t.fingerprint.as_str()))
            .collect();
        let mut changed: Vec<&str> = before
            .tools
            .values()
            .filter(|t| !now.contains(&(t.id.as_str(), t.fingerprint.as_str())))
            .map(|t| t.id.as_str())
            .collect();
        let is = self.model_grants();
        changed.extend(
            before
                .model_grants()
                .into_iter()
                .filter(|(id, grant)| grant.is_some() && is.get(id) != Some(grant))
                .map(|(id, _)| id),
        );
        changed
    }

    /// Each model's shared OAuth grant, by model id.
    fn model_grants(&self) -> HashMap<&str, Option<i64>> {
        self.models()
            .into_iter()
            .map(|m| (m.id.as_str(), m.oauth_grant))
            .collect()
    }
}

/// One gateway at one revision: who it is and each step's part of it.
pub struct GatewayEntry {
    pub identity: GatewayIdentity,
    /// What `model` may name here.
    pub models: GatewayModels,
    /// What of the workspace's tools is offered here.
    pub tools: GatewayTools,
    /// Admin bundles scoped to this gateway.
    pub policies: Vec<Arc<Rules>>,
    /// The guards that apply to this gateway's models and tools.
    pub guards: GatewayGuards,
}

impl GatewayEntry {
    /// The rules that decide `agent`'s requests through this gateway.
    pub fn rules<'a>(&'a self, snap: &'a Compiled, agent: &'a AgentEntry) -> authz::Scope<'a> {
        authz::Scope {
            table: &snap.authz,
            agent: &agent.rules,
            gateway: &self.policies,
            mcp_slot: self.identity.mcp_slot,
        }
    }

    /// The tool tables of a request through this gateway.
    pub fn tools<'a>(&'a self, snap: &'a Compiled) -> Tools<'a> {
        Tools {
            by_name: &snap.tools,
            gateway: &self.tools,
        }
    }
}

/// What outlives snapshot swaps, by step: model health, cursors and cloud credentials; rule
/// bundles already parsed, by their text; act-as issuers' keys by URL.
#[derive(Default)]
pub struct Runtime {
    pub models: ModelRuntime,
    pub bundles: authz::BundleCache,
    pub issuers: crate::actas::oidc::Issuers,
}
