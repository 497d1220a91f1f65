//! Rule bundles: the managed policies compiled from agents and gateways, and the admin
//! bundles deployed by scope. Managed bundles are derived from the stored fields whenever they
//! are needed, so they always match them.

pub mod compile;
#[cfg(test)]
mod tests;

use std::collections::HashMap;

use portcullis_shared::api::rules::{BundleScope, RuleBundle};
use portcullis_shared::policy;

use crate::error::{ApiError, ApiResult};
use crate::store::{agents, bundles, gateways, tools, Conn};

/// Bundle ids of managed bundles start with this; they cannot be deployed or deleted.
pub const MANAGED_PREFIX: &str = "managed-";

fn list(text: &str) -> ApiResult<Vec<String>> {
    serde_json::from_str(text).map_err(|_| crate::error::corrupt("agent list"))
}

/// Policy ids of an admin bundle start with this.
pub fn admin_prefix(bundle_id: &str) -> String {
    format!("bundle/{bundle_id}")
}

/// Parses and validates a bundle's text, returning its qualified policy ids.
pub fn check(prefix: &str, text: &str) -> Result<Vec<String>, policy::PolicyError> {
    Ok(policy::check_bundle(prefix, text)?.ids())
}

struct Managed<'a> {
    bundle_id: String,
    scope: BundleScope,
    scope_id: Option<String>,
    prefix: &'a str,
    text: String,
    updated_at: i64,
}

fn managed(workspace_id: &str, m: Managed<'_>) -> ApiResult<RuleBundle> {
    let Managed {
        bundle_id,
        scope,
        scope_id,
        prefix,
        text,
        updated_at,
    } = m;
    let policy_ids = check(prefix, &text).map_err(|e| {
        ApiError::Internal(format!("managed bundle {bundle_id} does not compile: {e}"))
    })?;
    Ok(RuleBundle {
        bundle_id,
        workspace_id: workspace_id.to_string(),
        // A managed bundle is named by its policy-id prefix.
        name: prefix.to_string(),
        scope,
        scope_id,
        managed: true,
        policies: text,
        policy_ids,
        created_at: crate::store::ts(updated_at),
    })
}

/// Every managed bundle of a workspace: one per agent with any rule, and one for the
/// all-agents gateway grants.
pub async fn managed_bundles(conn: &mut Conn, workspace_id: &str) -> ApiResult<Vec<RuleBundle>> {
    let mut grants: HashMap<String, Vec<String>> = HashMap::new();
    for (gateway_id, agent_id) in gateways::all_grants(conn, workspace_id).await? {
        grants.entry(agent_id).or_default().push(gateway_id);
    }
    let mut out = Vec::new();
    for agent in agents::all(conn, workspace_id).await? {
        let inputs = compile::AgentRules {
            agent_id: &agent.id,
            gateway_ids: grants.get(&agent.id).map(Vec::as_slice).unwrap_or_default(),
            pools: &list(&agent.allowed_pool_names)?,
            models: &list(&agent.allowed_direct_model_names)?,
            tools: &list(&agent.allowed_tools)?,
            groups: &list(&agent.actas_allowed_groups)?,
            emails: &list(&agent.actas_allowed_emails)?,
            subjects: &list(&agent.actas_allowed_subjects)?,
        };
        let text = compile::agent_policies(&inputs);
        if text.is_empty() {
            continue;
        }
        out.push(managed(
            workspace_id,
            Managed {
                bundle_id: format!("{MANAGED_PREFIX}agent-{}", agent.id),
                scope: BundleScope::Agent,
                scope_id: Some(agent.id.clone()),
                prefix: &compile::agent_prefix(&agent.id),
                text,
                updated_at: agent.updated_at,
            },
        )?);
    }
    let open: Vec<gateways::GatewayRow> = gateways::list(conn, workspace_id)
        .await?
        .into_iter()
        .filter(|g| g.all_agents != 0)
        .collect();
    let blocked = tools::blocked(conn, workspace_id).await?;
    let blocked_at = blocked.iter().map(|b| b.2).max().unwrap_or_default();
    let blocked: Vec<(String, String)> = blocked.into_iter().map(|(c, t, _)| (c, t)).collect();
    let text = compile::blocked_tool_policies(&blocked);
    if !text.is_empty() {
        out.push(managed(
            workspace_id,
            Managed {
                bundle_id: format!("{MANAGED_PREFIX}blocked-tools"),
                scope: BundleScope::Workspace,
                scope_id: None,
                prefix: compile::BLOCKED_PREFIX,
                text,
                updated_at: blocked_at,
            },
        )?);
    }
    let updated_at = open.iter().map(|g| g.updated_at).max().unwrap_or_default();
    let open: Vec<String> = open.into_iter().map(|g| g.id).collect();
    let text = compile::all_agents_policies(&open);
    if !text.is_empty() {
        out.push(managed(
            workspace_id,
            Managed {
                bundle_id: format!("{MANAGED_PREFIX}gateways"),
                scope: BundleScope::Workspace,
                scope_id: None,
                prefix: compile::GATEWAY_PREFIX,
                text,
                updated_at,
            },
        )?);
    }
    Ok(out)
}

pub fn admin_view(row: bundles::BundleRow) -> ApiResult<RuleBundle> {
    Ok(RuleBundle {
        bundle_id: row.id,
        workspace_id: row.workspace_id,
        name: row.name,
        scope: BundleScope::parse(&row.scope)
            .ok_or_else(|| crate::error::corrupt("bundle scope"))?,
        scope_id: (!row.scope_id.is_empty()).then_some(row.scope_id),
        managed: false,
        policies: row.policies,
        policy_ids: serde_json::from_str(&row.policy_ids)
            .map_err(|_| crate::error::corrupt("policy ids"))?,
        created_at: crate::store::ts(row.created_at),
    })
}
