//! Step three: may this agent do this, here? Cedar evaluates the workspace's bundles, the
//! agent's own and the gateway's scoped admin bundles, each shared across agents and snapshots
//! (their unconditional permits as [`Rules`] grants), and the answers combine as one set's
//! would: default deny; a forbid wins; attachment alone authorizes nothing.

mod rules;

pub use rules::Rules;
use rules::Verdict;

use cedar_policy::{EntityUid, Request};
use portcullis_shared::policy::{action_uid, Action};

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

use portcullis_shared::policy::ActAs;

use crate::error::Denial;

use crate::request::LazyContext;

use crate::snapshot::{AgentEntry, Compiled, Decision, GatewayEntry};

/// Decisions by act-as identity, each with one cell per slot.
pub type IdentityMemo = std::sync::RwLock<HashMap<ActAs, Arc<[OnceLock<Decision>]>>>;

/// At most this many identities are remembered per agent and snapshot (then it restarts).
const IDENTITY_CAP: usize = 4096;

/// Allows, or explains the denial, from (or into) the agent's memo for this snapshot: by
/// slot alone without an act-as identity, by identity and slot with one.
pub fn check_memo(
    snap: &Compiled,
    agent: &AgentEntry,
    gateway: &GatewayEntry,
    action: Action,
    resource: &EntityUid,
    context: &LazyContext,
    slot: usize,
) -> Decision {
    let decide = || check(snap, agent, gateway, action, resource, context);
    let in_cell = |cell: Option<&OnceLock<Decision>>| match cell {
        Some(cell) => cell.get_or_init(decide).clone(),
        None => decide(),
    };
    let act_as = &context.typed().act_as;
    if act_as.present {
        return in_cell(identity_cells(snap, agent, act_as).get(slot));
    }
    let memo = agent
        .memo
        .get_or_init(|| (0..snap.slots).map(|_| OnceLock::new()).collect());
    in_cell(memo.get(slot))
}

/// The agent's decision cells for this person, created on first sight.
fn identity_cells(
    snap: &Compiled,
    agent: &AgentEntry,
    act_as: &ActAs,
) -> Arc<[OnceLock<Decision>]> {
    if let Some(cells) = agent
        .identity_memo
        .read()
        .unwrap_or_else(|e| e.into_inner())
        .get(act_as)
    {
        return cells.clone();
    }
    let mut memo = agent
        .identity_memo
        .write()
        .unwrap_or_else(|e| e.into_inner());
    if memo.len() >= IDENTITY_CAP {
        memo.clear();
    }
    memo.entry(act_as.clone())
        .or_insert_with(|| (0..snap.slots).map(|_| OnceLock::new()).collect())
        .clone()
}

/// Allows, or explains the denial.
pub fn check(
    snap: &Compiled,
    agent: &AgentEntry,
    gateway: &GatewayEntry,
    action: Action,
    resource: &EntityUid,
    context: &LazyContext,
) -> Result<(), Denial> {
    let context = context.get().map_err(|e| Denial {
        reason: format!("the request context could not be built: {e}"),
        reason_code: "evaluation_error",
        determining_policy: "default-deny".into(),
    })?;
    let request = Request::new(
        agent.uid.clone(),
        action_uid(action),
        resource.clone(),
        context.clone(),
        None,
    )
    .map_err(|e| Denial {
        reason: format!("the request could not be evaluated: {e}"),
        reason_code: "evaluation_error",
        determining_policy: "default-deny".into(),
    })?;
    let bundles = snap
        .workspace_policies
        .iter()
        .chain(&agent.policies)
        .chain(&gateway.policies)
        .map(|rules| &**rules);
    match rules::decide(bundles, &request, &snap.entities) {
        Verdict::Permitted => Ok(()),
        Verdict::Forbidden(policy) => Err(Denial {
            reason: format!(
                "agent '{}' is forbidden to {} {resource}",
                agent.name,
                action.name()
            ),
            reason_code: "forbidden",
            determining_policy: policy,
        }),
        Verdict::NoPermit => Err(Denial {
            reason: format!(
                "no rule permits agent '{}' to {} {resource}",
                agent.name,
                action.name()
            ),
            reason_code: "no_permit",
            determining_policy: "default-deny".into(),
        }),
    }
}

/// A tool decision, memoized per agent when the request has no act-as identity.
pub fn check_tool(
    snap: &Compiled,
    agent: &AgentEntry,
    gateway: &GatewayEntry,
    action: Action,
    tool: &str,
    context: &LazyContext,
    memoize: bool,
) -> Decision {
    let code = match action {
        Action::McpCall => 1,
        Action::McpDiscover => 2,
        _ => 0,
    };
    let key = (gateway.mcp_slot, code, tool.to_string());
    if memoize {
        let memo = agent.tool_memo.read().unwrap_or_else(|e| e.into_inner());
        if let Some(decision) = memo.get(&key) {
            return decision.clone();
        }
    }
    let uid = portcullis_shared::policy::uid(portcullis_shared::policy::Kind::Tool, tool);
    let decision = check(snap, agent, gateway, action, &uid, context);
    if memoize {
        agent
            .tool_memo
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .insert(key, decision.clone());
    }
    decision
}
