//! The snapshot's Cedar entities: its models, pools, tool connections and their tools,
//! gateways and agents. A new revision usually changes a few of them (an agent added, a tool
//! catalog discovered), so the store is then the current snapshot's with those entities
//! removed or replaced: the two snapshots share every unchanged entity instead of each
//! holding a copy while the new one compiles, and only the changed ones are built, checked
//! against the schema and closed transitively. The result is the store a build from nothing
//! would give (tests compare the two through every kind of change); where that is not plain,
//! or too much changed, the store is built from nothing.

use std::collections::HashSet;

use cedar_policy::{Entities, Entity, EntityUid, Schema};
use portcullis_shared::policy::{self, Kind};
use portcullis_shared::snapshot::{SnapAgent, Snapshot};

use super::Compiled;

/// At most this many entity visits are spent replacing and removing entities in a copy of
/// the current store (each replaced or removed entity costs a pass over the store); past
/// it, a build from nothing is cheaper.
const VISIT_BUDGET: usize = 4_000_000;

/// The snapshot's store, from `current`'s where few entities differ. Errors are entities
/// that could not be built or do not fit the schema.
pub fn store(snap: &Snapshot, current: Option<&Compiled>, errors: &mut Vec<String>) -> Entities {
    let schema = match policy::schema() {
        Ok(schema) => schema,
        Err(e) => {
            errors.push(e.to_string());
            return Entities::empty();
        }
    };
    let update = current.and_then(|current| Some((changes(snap, current)?, current)));
    if let Some((changes, current)) = update {
        match changes.apply(&current.authz.entities, schema) {
            Ok(store) => return store,
            Err(e) => tracing::debug!(error = %e, "Entities rebuilt after an update failed."),
        }
    }
    let mut built = Vec::new();
    for entity in each(snap) {
        match entity {
            Ok(entity) => built.push(entity),
            Err(e) => errors.push(e),
        }
    }
    Entities::from_entities(built, Some(schema)).unwrap_or_else(|e| {
        errors.push(format!("entities: {e}"));
        Entities::empty()
    })
}

/// Every entity the snapshot names.
fn each(snap: &Snapshot) -> impl Iterator<Item = Result<Entity, String>> + '_ {
    others(snap).chain(snap.agents.iter().map(agent_entity))
}

fn agent_entity(a: &SnapAgent) -> Result<Entity, String> {
    policy::agent_entity(&a.agent_id, &a.name, a.parent_id.as_deref())
}

/// The entities other than agents: their ancestors, if any, are fixed (a tool's connection),
/// so a stored one equals a new build exactly when nothing about it changed.
fn others(snap: &Snapshot) -> impl Iterator<Item = Result<Entity, String>> + '_ {
    let models = snap
        .models
        .iter()
        .map(|m| policy::model_entity(&m.name, &m.provider, &m.attributes));
    let pools = snap.pools.iter().map(|p| policy::pool_entity(&p.name));
    let tools = snap.tools.iter().flat_map(|t| {
        let tools = t.catalog.iter().map(move |c| {
            let write = t.write_tools.contains(&c.name);
            policy::tool_entity(&t.name, &c.name, c.status.as_str(), write)
        });
        std::iter::once(policy::tool_connection_entity(&t.name)).chain(tools)
    });
    let gateways = snap
        .gateways
        .iter()
        .map(|g| policy::gateway_entity(&g.gateway_id, &g.name));
    models.chain(pools).chain(tools).chain(gateways)
}

/// What turns the current store into the snapshot's.
struct Changes {
    /// New entities and new versions of existing ones.
    upserts: Vec<Entity>,
    removed: Vec<EntityUid>,
}

impl Changes {
    fn apply(self, current: &Entities, schema: &Schema) -> Result<Entities, String> {
        let store = current.clone();
        let store = match self.removed.is_empty() {
            true => store,
            false => store
                .remove_entities(self.removed)
                .map_err(|e| e.to_string())?,
        };
        store
            .upsert_entities(self.upserts, Some(schema))
            .map_err(|e| e.to_string())
    }
}

/// The changes from `current`, or `None` where a build from nothing is due: too many
/// changes, an entity that cannot be built (the build names them all), one named twice (the
/// build tells a harmless repeat from a conflict), or a removed entity that a kept one
/// descends from (removing it would also cut the kept one's link, which the snapshot still
/// names). A stored agent holds all its ancestors, not only its parent, so an agent is kept
/// when the current snapshot's has the same name and parent.
fn changes(snap: &Snapshot, current: &Compiled) -> Option<Changes> {
    let store = &current.authz.entities;
    let budget = VISIT_BUDGET / store.len().max(1);
    let mut seen = HashSet::new();
    let mut upserts = Vec::new();
    let mut replaced = 0;
    // Records an entity of the snapshot, with its new version if it is not the stored one
    // (and whether one is stored); false when a build from nothing is due.
    let mut note = |uid: EntityUid, changed: Option<(Entity, bool)>| {
        if let Some((entity, stored)) = changed {
            replaced += usize::from(stored);
            upserts.push(entity);
        }
        seen.insert(uid) && replaced <= budget
    };
    for entity in others(snap) {
        let entity = entity.ok()?;
        let uid = entity.uid();
        let changed = match store.get(&uid) {
            Some(stored) if stored.deep_eq(&entity) => None,
            stored => Some((entity, stored.is_some())),
        };
        if !note(uid, changed) {
            return None;
        }
    }
    for a in &snap.agents {
        let uid = policy::uid(Kind::Agent, &a.agent_id);
        let agents = &current.authn;
        let kept = agents
            .agent_ids
            .get(&a.agent_id)
            .and_then(|&i| agents.agents.get(i));
        let changed = match kept {
            Some(kept) if kept.name == a.name && kept.parent_id == a.parent_id => None,
            kept => Some((agent_entity(a).ok()?, kept.is_some())),
        };
        if !note(uid, changed) {
            return None;
        }
    }
    let action = policy::action_uid(policy::Action::LlmInvoke);
    let removed: Vec<EntityUid> = store
        .iter()
        .map(Entity::uid)
        .filter(|uid| uid.type_name() != action.type_name() && !seen.contains(uid))
        .collect();
    if replaced + removed.len() > budget {
        return None;
    }
    let removed_set: HashSet<&EntityUid> = removed.iter().collect();
    let orphaned = !removed.is_empty()
        && seen.iter().any(|uid| {
            store
                .ancestors(uid)
                .is_some_and(|mut up| up.any(|a| removed_set.contains(a)))
        });
    (!orphaned).then_some(Changes { upserts, removed })
}

#[cfg(test)]
#[path = "entities_tests.rs"]
mod tests;
