//! Step three: may this agent do this, here? Cedar evaluates the workspace's bundles, the
//! agent's own and the gateway's scoped admin bundles, each shared across agents and snapshots
//! (their unconditional permits as [`Rules`] grants), and the answers combine as one set's
//! would: default deny; a forbid wins; attachment alone authorizes nothing. The step owns its
//! table ([`Table`], each agent's [`AgentRules`]) and the parsed bundles kept across
//! revisions ([`BundleCache`]).

mod bundles;
pub mod compile;
mod context;
mod rules;

pub use bundles::BundleCache;
pub use context::LazyContext;
pub use rules::Rules;
use rules::Verdict;

use cedar_policy::{Entities, EntityUid, Request};
use portcullis_shared::policy::{action_uid, Action};

use std::collections::HashMap;
use std::sync::{Arc, OnceLock, RwLock};

use portcullis_shared::policy::ActAs;

use crate::error::Denial;

/// An authorization outcome.
pub type Decision = Result<(), Denial>;

/// Decisions by act-as identity, each with one cell per slot.
pub type IdentityMemo = RwLock<HashMap<ActAs, Arc<[OnceLock<Decision>]>>>;

/// The workspace's rules at one revision.
pub struct Table {
    /// The workspace-scoped bundles, evaluated for every agent beside its own.
    pub workspace_policies: Vec<Arc<Rules>>,
    /// Every agent, gateway, model and pool, for Cedar.
    pub entities: Entities,
    /// How many decision slots each agent's memo has (see [`AgentRules::memo`]).
    pub slots: usize,
}

/// One agent's rules and its decisions remembered at this revision.
pub struct AgentRules {
    pub uid: EntityUid,
    pub name: String,
    /// The agent's own bundle and its agent-scoped admin bundles, each shared with the
    /// bundle cache (the workspace's bundles are [`Table::workspace_policies`]).
    pub policies: Vec<Arc<Rules>>,
    /// Decisions for requests without an act-as identity, by slot. They depend only on the
    /// agent, action, resource and gateway, so each is evaluated once per snapshot.
    pub memo: OnceLock<Box<[OnceLock<Decision>]>>,
    /// Tool decisions without an act-as identity: (gateway slot, action, `connection/tool`).
    pub tool_memo: RwLock<HashMap<(usize, u8, String), Decision>>,
    /// Decisions for requests with an act-as identity, by identity and slot: the same person
    /// through the same agent gets the same answer for the whole snapshot.
    pub identity_memo: IdentityMemo,
}

impl AgentRules {
    pub fn new(uid: EntityUid, name: String, policies: Vec<Arc<Rules>>) -> Self {
        Self {
            uid,
            name,
            policies,
            memo: OnceLock::new(),
            tool_memo: RwLock::default(),
            identity_memo: IdentityMemo::default(),
        }
    }
}

/// The rules that decide one agent's requests through one gateway.
#[derive(Clone, Copy)]
pub struct Scope<'a> {
    pub table: &'a Table,
    pub agent: &'a AgentRules,
    /// Admin bundles scoped to the gateway.
    pub gateway: &'a [Arc<Rules>],
    /// The gateway's MCP slot, which keys the agent's tool decisions.
    pub mcp_slot: usize,
}

/// At most this many identities are remembered per agent and snapshot (then it restarts).
const IDENTITY_CAP: usize = 4096;

/// Allows, or explains the denial, from (or into) the agent's memo for this snapshot: by
/// slot alone without an act-as identity, by identity and slot with one.
pub fn check_memo(
    scope: &Scope<'_>,
    action: Action,
    resource: &EntityUid,
    context: &LazyContext,
    slot: usize,
) -> Decision {
    let decide = || check(scope, action, resource, context);
    let in_cell = |cell: Option<&OnceLock<Decision>>| match cell {
        Some(cell) => cell.get_or_init(decide).clone(),
        None => decide(),
    };
    let act_as = &context.typed().act_as;
    if act_as.present {
        return in_cell(identity_cells(scope, act_as).get(slot));
    }
    let slots = scope.table.slots;
    let memo = scope
        .agent
        .memo
        .get_or_init(|| (0..slots).map(|_| OnceLock::new()).collect());
    in_cell(memo.get(slot))
}

/// The agent's decision cells for this person, created on first sight.
fn identity_cells(scope: &Scope<'_>, act_as: &ActAs) -> Arc<[OnceLock<Decision>]> {
    let agent = scope.agent;
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
        .or_insert_with(|| (0..scope.table.slots).map(|_| OnceLock::new()).collect())
        .clone()
}

/// Allows, or explains the denial.
pub fn check(
    scope: &Scope<'_>,
    action: Action,
    resource: &EntityUid,
    context: &LazyContext,
) -> Result<(), Denial> {
    let context = context.get().map_err(|e| Denial {
        reason: format!("the request context could not be built: {e}"),
        reason_code: "evaluation_error",
        determining_policy: "default-deny".into(),
    })?;
    let agent = scope.agent;
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
    let bundles = scope
        .table
        .workspace_policies
        .iter()
        .chain(&agent.policies)
        .chain(scope.gateway)
        .map(|rules| &**rules);
    match rules::decide(bundles, &request, &scope.table.entities) {
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
    scope: &Scope<'_>,
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
    let key = (scope.mcp_slot, code, tool.to_string());
    let agent = scope.agent;
    if memoize {
        let memo = agent.tool_memo.read().unwrap_or_else(|e| e.into_inner());
        if let Some(decision) = memo.get(&key) {
            return decision.clone();
        }
    }
    let uid = portcullis_shared::policy::uid(portcullis_shared::policy::Kind::Tool, tool);
    let decision = check(scope, action, &uid, context);
    if memoize {
        agent
            .tool_memo
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .insert(key, decision.clone());
    }
    decision
}
