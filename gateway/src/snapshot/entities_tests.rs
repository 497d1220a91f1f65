//! A store updated from the current one equals a store built from nothing, through every kind
//! of change a revision brings; small changes take the update.

use portcullis_shared::api::tools::ToolStatus;
use portcullis_shared::snapshot::{SnapAgent, SnapCatalogEntry, SnapTool, Snapshot};

use super::changes;
use crate::snapshot::{compile_from, Compiled, Runtime};

/// A change a revision brings, named for the failure message.
type Step = (&'static str, Box<dyn Fn(&mut Snapshot)>);

fn agent(id: &str, parent: Option<&str>) -> SnapAgent {
    let mut a = crate::snapshot::tests::snapshot("").agents.remove(0);
    a.agent_id = id.into();
    a.name = format!("name-{id}");
    a.parent_id = parent.map(Into::into);
    a.key_hashes = vec![format!("hash-{id}")];
    a
}

fn tool(name: &str, catalog: &[&str]) -> SnapTool {
    let catalog: Vec<_> = catalog
        .iter()
        .map(|c| serde_json::json!({"name": c, "status": "active"}))
        .collect();
    serde_json::from_value(serde_json::json!({
        "connection_id": format!("c-{name}"), "name": name, "protocol": "streamable-http",
        "http": {"url": "http://tools.invalid/mcp", "headers": []},
        "auth_method": "none", "credential_type": "none", "secret_values": {},
        "write_tools": [], "catalog": catalog, "fingerprint": "f",
    }))
    .unwrap()
}

/// Agents in chains up to three deep (a1 under a0, a2 under a1, …), two tool connections.
fn workspace(agents: usize) -> Snapshot {
    let mut snap = crate::snapshot::tests::snapshot("");
    snap.agents = (0..agents)
        .map(|i| {
            let parent = (i % 3 != 0).then(|| format!("a{}", i - 1));
            agent(&format!("a{i}"), parent.as_deref())
        })
        .collect();
    snap.tools = vec![tool("fs", &["read", "write"]), tool("web", &["fetch"])];
    snap
}

fn built(snap: &Snapshot, current: Option<&Compiled>) -> Compiled {
    compile_from(snap, &Runtime::default(), current).unwrap_or_else(|e| panic!("{e:?}"))
}

/// Applies each change in turn, checking after each that the store updated from the last one
/// holds what a build from nothing holds (attributes, tags and every ancestor).
fn walk(mut snap: Snapshot, steps: Vec<Step>) {
    let mut current = built(&snap, None);
    for (what, change) in steps {
        change(&mut snap);
        let updated = built(&snap, Some(&current));
        let fresh = built(&snap, None);
        assert!(
            updated.authz.entities.deep_eq(&fresh.authz.entities),
            "after: {what}"
        );
        current = updated;
    }
}

fn find<'a>(snap: &'a mut Snapshot, id: &str) -> &'a mut SnapAgent {
    snap.agents.iter_mut().find(|a| a.agent_id == id).unwrap()
}

#[test]
fn an_updated_store_equals_a_store_built_from_nothing() {
    walk(
        workspace(12),
        vec![
            ("nothing", Box::new(|_| {})),
            (
                "an agent added",
                Box::new(|s| s.agents.push(agent("new", Some("a4")))),
            ),
            (
                "an agent renamed",
                Box::new(|s| find(s, "a5").name = "renamed".into()),
            ),
            (
                "a middle agent moved",
                Box::new(|s| find(s, "a4").parent_id = Some("a8".into())),
            ),
            (
                "a chain's root given a parent",
                Box::new(|s| find(s, "a6").parent_id = Some("a0".into())),
            ),
            (
                "a leaf removed",
                Box::new(|s| s.agents.retain(|a| a.agent_id != "new")),
            ),
            (
                "a parent removed, its child kept",
                Box::new(|s| s.agents.retain(|a| a.agent_id != "a7")),
            ),
            (
                "a missing parent added",
                Box::new(|s| s.agents.push(agent("a7", Some("a3")))),
            ),
            (
                "a tool blocked and made write",
                Box::new(|s| {
                    s.tools[0].catalog[0].status = ToolStatus::Blocked;
                    s.tools[0].write_tools.push("write".into());
                }),
            ),
            (
                "a tool discovered",
                Box::new(|s| {
                    s.tools[1].catalog.push(SnapCatalogEntry {
                        name: "post".into(),
                        status: ToolStatus::Active,
                        message: None,
                    })
                }),
            ),
            (
                "a tool connection removed",
                Box::new(|s| {
                    s.tools.remove(0);
                }),
            ),
            (
                "a model tagged",
                Box::new(|s| {
                    s.models[0].attributes.insert("tier".into(), "gold".into());
                }),
            ),
            (
                "a gateway renamed, a pool removed",
                Box::new(|s| {
                    s.gateways[0].name = "main".into();
                    s.pools.clear();
                    s.gateways[0].pool_ids.clear();
                }),
            ),
            ("every agent removed", Box::new(|s| s.agents.clear())),
        ],
    );
}

/// Parents are only ever agents of a lower number: the control plane refuses a cycle, and so
/// does the gateway (`a_cycle_is_refused_after_an_update_too`).
#[test]
fn a_long_run_of_random_changes_keeps_the_store_exact() {
    let mut state = 0x2545_f491_4f6c_dd1d_u64;
    let mut next = move |n: usize| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state % n as u64) as usize
    };
    let mut steps: Vec<Step> = Vec::new();
    for step in 0..150 {
        let (a, b, kind) = (next(40), next(40), next(4));
        let change: Box<dyn Fn(&mut Snapshot)> = match kind {
            0 => Box::new(move |s| {
                if let Some(x) = s.agents.iter_mut().find(|x| x.agent_id == format!("a{a}")) {
                    x.parent_id = (b < a).then(|| format!("a{b}"));
                }
            }),
            1 => Box::new(move |s| s.agents.retain(|x| x.agent_id != format!("a{a}"))),
            2 => Box::new(move |s| {
                if !s.agents.iter().any(|x| x.agent_id == format!("a{a}")) {
                    let parent = (b < a).then(|| format!("a{b}"));
                    s.agents.push(agent(&format!("a{a}"), parent.as_deref()));
                }
            }),
            _ => Box::new(move |s| {
                if let Some(x) = s.agents.iter_mut().find(|x| x.agent_id == format!("a{a}")) {
                    x.name = format!("step-{step}");
                }
            }),
        };
        steps.push(("a random change", change));
    }
    walk(workspace(30), steps);
}

#[test]
fn a_small_change_is_an_update_of_the_current_store() {
    let mut snap = workspace(30);
    let current = built(&snap, None);
    let same = changes(&snap, &current).expect("an update");
    assert!(same.upserts.is_empty() && same.removed.is_empty());

    snap.agents.push(agent("late", None));
    snap.agents.retain(|a| a.agent_id != "a29");
    let one = changes(&snap, &current).expect("an update");
    let upserts: Vec<String> = one.upserts.iter().map(|e| e.uid().to_string()).collect();
    let removed: Vec<String> = one.removed.iter().map(ToString::to_string).collect();
    assert_eq!(upserts, [r#"Svc::Agent::"late""#]);
    assert_eq!(removed, [r#"Svc::Agent::"a29""#]);
}

#[test]
fn many_changes_or_a_repeated_entity_are_built_from_nothing() {
    let mut snap = workspace(3000);
    let current = built(&snap, None);
    for a in &mut snap.agents {
        a.name.push('!');
    }
    assert!(changes(&snap, &current).is_none(), "3,000 replaced");
    let updated = built(&snap, Some(&current));
    assert!(updated
        .authz
        .entities
        .deep_eq(&built(&snap, None).authz.entities));

    let mut snap = workspace(3);
    let current = built(&snap, None);
    snap.agents.push(agent("a0", Some("a2")));
    assert!(changes(&snap, &current).is_none(), "a0 twice");
    assert!(
        refuses_entities(&snap, &current),
        "the build names the conflict"
    );
}

#[test]
fn a_cycle_is_refused_after_an_update_too() {
    let mut snap = workspace(3);
    let current = built(&snap, None);
    find(&mut snap, "a0").parent_id = Some("a2".into());
    assert!(refuses_entities(&snap, &current));
}

/// Whether the snapshot is refused for its entities, after `current`.
fn refuses_entities(snap: &Snapshot, current: &Compiled) -> bool {
    let errors = compile_from(snap, &Runtime::default(), Some(current))
        .err()
        .unwrap_or_default();
    errors.iter().any(|e| e.starts_with("entities:"))
}
