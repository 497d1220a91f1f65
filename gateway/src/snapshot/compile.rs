//! `Snapshot → compile() → Compiled`: everything a request needs, built once per revision off
//! the request path. Each step compiles its own table — models and pools ([`crate::llm`]),
//! tool connections ([`crate::mcp`]), rule bundles ([`crate::authz`], shared across
//! snapshots while their text stays the same), agents and keys ([`crate::authn`]), guards,
//! quotas — and this composes them with the Cedar entities (shared with the current snapshot
//! where unchanged, [`super::entities`]) and each gateway's decision slots. A snapshot with
//! any error is refused whole.

use std::collections::HashMap;

use portcullis_shared::policy::{self, Kind};
use portcullis_shared::snapshot::{SnapGateway, Snapshot};

use super::{Compiled, GatewayEntry, Runtime};
use crate::actas::compile::Sources;
use crate::authz::compile::Bundles;
use crate::guard::scope::Compiler as GuardCompiler;
use crate::llm::compile::Models;
use crate::mcp::compile::Tools;
use crate::request::GatewayIdentity;

pub fn compile(snap: &Snapshot, runtime: &Runtime) -> Result<Compiled, Vec<String>> {
    compile_from(snap, runtime, None)
}

/// Compiles a snapshot that follows `current`, sharing what has not changed with it.
pub fn compile_from(
    snap: &Snapshot,
    runtime: &Runtime,
    current: Option<&Compiled>,
) -> Result<Compiled, Vec<String>> {
    // The entities first: building and closing a store from nothing holds several maps over
    // every entity for a moment, and that moment is cheaper before the tables below exist.
    // Their errors are listed after the others.
    let mut entity_errors = Vec::new();
    let entities = super::entities::store(snap, current, &mut entity_errors);
    let mut errors = Vec::new();
    let models = crate::llm::compile::models(snap, &runtime.models, &mut errors);
    let mut bundles = crate::authz::compile::bundles(snap, &runtime.bundles, &mut errors);
    let tools = crate::mcp::compile::tools(snap, &mut errors);
    let tables = Tables {
        models: &models,
        tools: &tools,
    };
    let (gateways, slots) = gateways(snap, tables, &mut bundles, &mut errors);
    let act_as = Sources::new(snap, &runtime.issuers);
    let authn = crate::authn::compile::table(snap, &act_as, &mut bundles.by_agent, &mut errors);
    errors.extend(entity_errors);
    if !errors.is_empty() {
        return Err(errors);
    }
    Ok(Compiled {
        revision: snap.revision,
        workspace_id: snap.workspace_id.clone(),
        authn,
        authz: crate::authz::Table {
            workspace_policies: bundles.workspace,
            entities,
            slots,
        },
        actas_min: snap.actas_min_method,
        quotas: crate::spend::compile(snap),
        gateways,
        tools: tools.by_name,
        authorization_server: snap.interactive.authorization_server.clone(),
    })
}

/// The workspace-wide tables each gateway takes its part of.
#[derive(Clone, Copy)]
struct Tables<'t, 's> {
    models: &'t Models<'s>,
    tools: &'t Tools<'s>,
}

/// Every gateway with its part of each step's table, and how many decision slots they take:
/// two per gateway (its `gateway:access` on each surface) and one per model target.
fn gateways(
    snap: &Snapshot,
    tables: Tables<'_, '_>,
    bundles: &mut Bundles<'_>,
    errors: &mut Vec<String>,
) -> (HashMap<String, GatewayEntry>, usize) {
    let mut guards = GuardCompiler::new(&snap.guards, errors);
    let mut out = HashMap::new();
    let mut slots = 0;
    let mut next_slot = || {
        slots += 1;
        slots - 1
    };
    for g in &snap.gateways {
        let identity = identity(g, next_slot(), next_slot());
        let models = tables.models.gateway(g, &mut next_slot, errors);
        let tools = tables.tools.gateway(g, errors);
        let tool_ids: Vec<&str> = tools.connections.iter().map(|t| t.id.as_str()).collect();
        let guards = guards.gateway(&g.gateway_id, &models.places(), &tool_ids, errors);
        let entry = GatewayEntry {
            identity,
            policies: bundles
                .by_gateway
                .remove(g.gateway_id.as_str())
                .unwrap_or_default(),
            models,
            tools,
            guards,
        };
        out.insert(g.gateway_id.clone(), entry);
    }
    (out, slots)
}

fn identity(g: &SnapGateway, slot: usize, mcp_slot: usize) -> GatewayIdentity {
    GatewayIdentity {
        id: g.gateway_id.clone(),
        name: g.name.clone(),
        state: g.state,
        uid: policy::uid(Kind::Gateway, &g.gateway_id),
        slot,
        mcp_slot,
    }
}
