//! Compiling who may call: each agent with its rules and act-as sources, the keys that name
//! it, and the keys exchanged tokens are signed with.

use std::collections::HashMap;
use std::sync::Arc;

use portcullis_shared::policy::{self, ActAs, Kind};
use portcullis_shared::snapshot::{SnapAgent, SnapTokenKey, Snapshot};

use super::{AgentEntry, Table};
use crate::actas::compile::Sources;
use crate::authz::{AgentRules, Rules};

/// The agents and keys of `snap`; each agent takes its bundles out of `by_agent`.
pub fn table(
    snap: &Snapshot,
    act_as: &Sources<'_>,
    by_agent: &mut HashMap<&str, Vec<Arc<Rules>>>,
    errors: &mut Vec<String>,
) -> Table {
    // Sized up front: with thousands of agents, growth by doubling leaves much unused.
    let keys_len = snap.agents.iter().map(|a| a.key_hashes.len()).sum();
    let mut keys = HashMap::with_capacity(keys_len);
    let mut agent_ids = HashMap::with_capacity(snap.agents.len());
    let mut agents = Vec::with_capacity(snap.agents.len());
    for a in &snap.agents {
        let policies = by_agent.remove(a.agent_id.as_str()).unwrap_or_default();
        agent_ids.insert(a.agent_id.clone(), agents.len());
        for hash in &a.key_hashes {
            if keys.insert(hash.clone(), agents.len()).is_some() {
                errors.push(format!("agent {}: a key hash appears twice", a.name));
            }
        }
        agents.push(agent(a, act_as, policies));
    }
    Table {
        workspace_id: snap.workspace_id.clone(),
        keys,
        agent_ids,
        token_keys: token_keys(&snap.token_keys),
        verified_tokens: Default::default(),
        agents,
        revoked_grants: snap.interactive.revoked_grants.iter().cloned().collect(),
    }
}

fn agent(a: &SnapAgent, act_as: &Sources<'_>, policies: Vec<Arc<Rules>>) -> AgentEntry {
    AgentEntry {
        id: a.agent_id.clone(),
        name: a.name.clone(),
        parent_id: a.parent_id.clone(),
        status: a.status,
        rules: AgentRules::new(
            policy::uid(Kind::Agent, &a.agent_id),
            a.name.clone(),
            policies,
        ),
        act_as: act_as.agent(a),
        bound_keys: a
            .bound_keys
            .iter()
            .map(|k| (k.key_hash.clone(), ActAs::bound(k.subject.clone())))
            .collect(),
    }
}

/// The Ed25519 public keys of exchanged agent tokens, by `kid`. A key that cannot be read is
/// left out (tokens signed with it are refused); it does not refuse the snapshot.
fn token_keys(list: &[SnapTokenKey]) -> HashMap<String, jsonwebtoken::DecodingKey> {
    let mut out = HashMap::with_capacity(list.len());
    for k in list {
        match jsonwebtoken::DecodingKey::from_ed_components(&k.x) {
            Ok(key) => {
                out.insert(k.kid.clone(), key);
            }
            Err(e) => {
                tracing::warn!(kid = %k.kid, error = %e, "An agent token key cannot be read; tokens signed with it are refused.")
            }
        }
    }
    out
}
