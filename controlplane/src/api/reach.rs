//! `ListToolReach`: which tools each agent reaches. A tool is reached when a gateway the agent
//! may use (granted, or open to all agents, and active) offers it (attached alone, or with its
//! whole connection), it is in the catalog and not blocked, and the agent's allow list names
//! it. Only agents that may be called are listed (`active` or `provisioned`, SPEC). Admin rule
//! bundles can forbid more at call time; the gateway's `tools/list` as the agent is the last
//! word.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use portcullis_shared::api::agents::{
    AgentReach, AgentStatus, ListToolReachRequest, ListToolReachResponse, ReachedTool,
};
use portcullis_shared::api::gateways::MemberKind;
use portcullis_shared::api::workspace::Permission;

use super::{unary, views, Access, Ctx, Operation};
use crate::error::ApiResult;
use crate::store::{agents, gateways, tools};

pub fn operations() -> Vec<(&'static str, Operation)> {
    vec![(
        "ListToolReach",
        unary(Access::Platform(Permission::AgentsView), list),
    )]
}

/// (connection id, tool) → gateways offering it.
type Offers = BTreeMap<(String, String), BTreeSet<String>>;

/// (connection id, tool) → catalog status, for the discovered tools that are not blocked.
type Statuses<'a> = HashMap<(&'a str, &'a str), &'a str>;

async fn list(ctx: Ctx, _req: ListToolReachRequest) -> ApiResult<ListToolReachResponse> {
    let ws = ctx.workspace_id().to_string();
    let mut conn = ctx.store().read().await?;
    let gateway_rows = gateways::list(&mut conn, &ws).await?;
    let members = gateways::all_members(&mut conn, &ws).await?;
    let catalog = tools::workspace_catalog(&mut conn, &ws).await?;
    let connections: HashMap<String, String> = tools::list(&mut conn, &ws)
        .await?
        .into_iter()
        .map(|t| (t.id, t.name))
        .collect();
    let grants = gateways::all_grants(&mut conn, &ws).await?;
    let agent_rows = agents::all(&mut conn, &ws).await?;

    let active: HashSet<&str> = gateway_rows
        .iter()
        .filter(|g| g.state == "active")
        .map(|g| g.id.as_str())
        .collect();
    let open: Vec<&str> = gateway_rows
        .iter()
        .filter(|g| g.all_agents != 0 && active.contains(g.id.as_str()))
        .map(|g| g.id.as_str())
        .collect();
    let status: Statuses = catalog
        .iter()
        .filter(|c| c.discovered != 0 && c.status != "blocked")
        .map(|c| {
            (
                (c.connection_id.as_str(), c.tool.as_str()),
                c.status.as_str(),
            )
        })
        .collect();
    let offers = offers(&members, &active, &status);

    let mut reach = Vec::with_capacity(agent_rows.len());
    for agent in agent_rows {
        let agent_status =
            AgentStatus::parse(&agent.status).ok_or_else(|| views::corrupt("agent status"))?;
        // SPEC: only agents that may be called (`active` or `provisioned`) are listed.
        if !agent_status.is_usable() {
            continue;
        }
        let mut usable: HashSet<&str> = open.iter().copied().collect();
        usable.extend(
            grants
                .iter()
                .filter(|(g, a)| *a == agent.id && active.contains(g.as_str()))
                .map(|(g, _)| g.as_str()),
        );
        let allowed: HashSet<String> = serde_json::from_str::<Vec<String>>(&agent.allowed_tools)
            .map_err(|_| views::corrupt("agent allowed_tools"))?
            .into_iter()
            .collect();
        reach.push(AgentReach {
            tools: reached(&offers, &connections, &status, &usable, &allowed),
            agent_id: agent.id,
            name: agent.name,
            status: agent_status,
        });
    }
    Ok(ListToolReachResponse { agents: reach })
}

/// The tools the active gateways offer, alone or with their whole connection, of those in
/// `status`.
fn offers(members: &[gateways::MemberRow], active: &HashSet<&str>, status: &Statuses) -> Offers {
    let mut offers = Offers::new();
    for m in members
        .iter()
        .filter(|m| active.contains(m.gateway_id.as_str()))
    {
        let offered: Vec<&str> = if m.kind == MemberKind::ToolSource.as_str() {
            status
                .keys()
                .filter(|(c, _)| *c == m.target_id)
                .map(|(_, t)| *t)
                .collect()
        } else if m.kind == MemberKind::Tool.as_str() {
            vec![m.tool.as_str()]
        } else {
            continue;
        };
        for tool in offered {
            if status.contains_key(&(m.target_id.as_str(), tool)) {
                offers
                    .entry((m.target_id.clone(), tool.to_string()))
                    .or_default()
                    .insert(m.gateway_id.clone());
            }
        }
    }
    offers
}

/// The offered tools an agent reaches through the gateways it may use (`usable`) and its
/// allow list (`allowed`, as `connection/tool`), by name; `connections` maps ids to names.
fn reached(
    offers: &Offers,
    connections: &HashMap<String, String>,
    status: &Statuses,
    usable: &HashSet<&str>,
    allowed: &HashSet<String>,
) -> Vec<ReachedTool> {
    let mut reached = Vec::new();
    for ((connection_id, tool), on) in offers {
        let (Some(connection), Some(tool_status)) = (
            connections.get(connection_id),
            status.get(&(connection_id.as_str(), tool.as_str())),
        ) else {
            continue;
        };
        let name = format!("{connection}/{tool}");
        let gateway_ids: Vec<String> = on
            .iter()
            .filter(|g| usable.contains(g.as_str()))
            .cloned()
            .collect();
        if gateway_ids.is_empty() || !allowed.contains(&name) {
            continue;
        }
        reached.push(ReachedTool {
            tool: name,
            connection_id: connection_id.clone(),
            status: tool_status.to_string(),
            gateway_ids,
        });
    }
    reached.sort_by(|a, b| a.tool.cmp(&b.tool));
    reached
}
