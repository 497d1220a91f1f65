//! Compiling the workspace's rule bundles: each parsed with its qualified ids, validated and
//! split into grants and a policy set (once while its text stays the same), then sorted by
//! scope. A request is evaluated against the workspace's bundles, the agent's and the
//! gateway's, so no set is copied into another.

use std::collections::HashMap;
use std::sync::Arc;

use portcullis_shared::api::rules::BundleScope;
use portcullis_shared::policy;
use portcullis_shared::snapshot::Snapshot;

use super::{BundleCache, Rules};

/// A snapshot's bundles by scope.
#[derive(Default)]
pub struct Bundles<'a> {
    pub workspace: Vec<Arc<Rules>>,
    /// By agent id.
    pub by_agent: HashMap<&'a str, Vec<Arc<Rules>>>,
    /// By gateway id.
    pub by_gateway: HashMap<&'a str, Vec<Arc<Rules>>>,
}

/// Every bundle of `snap`, checked through `cache`; each bundle's error in `errors`.
pub fn bundles<'a>(
    snap: &'a Snapshot,
    cache: &BundleCache,
    errors: &mut Vec<String>,
) -> Bundles<'a> {
    let mut out = Bundles::default();
    let checked = cache.checked_bundles(
        snap.bundles
            .iter()
            .map(|b| (b.id_prefix.as_str(), b.policies.as_str())),
    );
    for (b, set) in snap.bundles.iter().zip(checked) {
        let set = match set {
            Ok(set) => set,
            Err(e) => {
                errors.push(format!("rule bundle {}: {e}", b.bundle_id));
                continue;
            }
        };
        match (b.scope, b.scope_id.as_deref()) {
            (BundleScope::Workspace, _) => out.workspace.push(set),
            (BundleScope::Agent, Some(id)) => out.by_agent.entry(id).or_default().push(set),
            (BundleScope::Gateway, Some(id)) => out.by_gateway.entry(id).or_default().push(set),
            (scope, None) => errors.push(format!(
                "rule bundle {}: scope {} without scope id",
                b.bundle_id,
                scope.as_str()
            )),
        }
    }
    // Each bundle was validated on its own; together their ids must not collide.
    if let Some(id) = duplicate_id(
        out.workspace
            .iter()
            .chain(out.by_agent.values().flatten())
            .chain(out.by_gateway.values().flatten()),
    ) {
        errors.push(policy::PolicyError::DuplicateId(id).to_string());
    }
    out
}

/// A policy id that appears in more than one of these sets, if any.
fn duplicate_id<'a>(bundles: impl Iterator<Item = &'a Arc<Rules>>) -> Option<String> {
    let mut seen = std::collections::HashSet::new();
    bundles
        .flat_map(|rules| rules.ids())
        .find(|id| !seen.insert(*id))
        .map(ToString::to_string)
}
