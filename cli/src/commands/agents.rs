//! `portcullis agent …`: registration, updates, reads and the status lifecycle.

use anyhow::Context as _;
use portcullis_shared::api::agents::*;
use portcullis_shared::api::interactive::{
    ListInteractiveGrantsRequest, ListInteractiveGrantsResponse, RevokeInteractiveGrantRequest,
    RevokeInteractiveGrantResponse,
};
use portcullis_shared::api::service::AGENTS;
use portcullis_shared::api::Endpoints;
use serde_json::{Map, Value};

use crate::args::{AgentCmd, AgentFields, GrantCmd};
use crate::ctx::{Ctx, Kind, Reply};
use crate::output::{self, Lines};

/// Which lists `agent update` sends empty.
#[derive(Debug, Default)]
struct Clear {
    pools: bool,
    models: bool,
    tools: bool,
    gateways: bool,
    groups: bool,
    emails: bool,
    subjects: bool,
}

/// The fields register and update share, as the requests carry them.
#[derive(Debug, Default)]
struct Fields {
    metadata: Option<Map<String, Value>>,
    pools: Option<Vec<String>>,
    models: Option<Vec<String>>,
    tools: Option<Vec<String>>,
    gateway_ids: Option<Vec<String>>,
    groups: Option<Vec<String>>,
    emails: Option<Vec<String>>,
    subjects: Option<Vec<String>>,
}

/// A list flag: `Some` when values were given (replacing the list) or it is cleared.
fn list(values: Vec<String>, clear: bool) -> Option<Vec<String>> {
    (clear || !values.is_empty()).then_some(values)
}

async fn fields(ctx: &Ctx, f: &mut AgentFields, clear: Clear) -> anyhow::Result<Fields> {
    let metadata = match &f.metadata {
        Some(text) => match serde_json::from_str(text).context("--metadata is not valid JSON")? {
            Value::Object(map) => Some(map),
            _ => anyhow::bail!("--metadata must be a JSON object"),
        },
        None => None,
    };
    let mut gateway_ids = Vec::with_capacity(f.gateways.len());
    for g in &f.gateways {
        gateway_ids.push(ctx.resolve(Kind::Gateway, g).await?);
    }
    Ok(Fields {
        metadata,
        pools: list(std::mem::take(&mut f.pools), clear.pools),
        models: list(std::mem::take(&mut f.models), clear.models),
        tools: list(std::mem::take(&mut f.tools), clear.tools),
        gateway_ids: list(gateway_ids, clear.gateways),
        groups: list(std::mem::take(&mut f.actas_groups), clear.groups),
        emails: list(std::mem::take(&mut f.actas_emails), clear.emails),
        subjects: list(std::mem::take(&mut f.actas_subjects), clear.subjects),
    })
}

pub async fn run(ctx: &Ctx, cmd: AgentCmd) -> anyhow::Result<()> {
    let workspace_id = ctx.ws().await?;
    match cmd {
        AgentCmd::Register {
            name,
            parent,
            fields: mut f,
            actas_required,
            interactive_access,
        } => {
            let c = fields(ctx, &mut f, Clear::default()).await?;
            let req = RegisterAgentRequest {
                workspace_id,
                name,
                parent_id: parent,
                metadata: c.metadata,
                token_ttl: f.token_ttl,
                allowed_pool_names: c.pools,
                allowed_direct_model_names: c.models,
                allowed_tools: c.tools,
                allowed_gateway_ids: c.gateway_ids,
                actas_allowed_groups: c.groups,
                actas_allowed_emails: c.emails,
                actas_allowed_subjects: c.subjects,
                actas_method: f.actas_method.as_deref().and_then(ActAsMethod::parse),
                actas_required: actas_required.then_some(true),
                actas_provider_id: f.actas_provider_id,
                actas_oidc_url: f.actas_oidc_url,
                actas_hmac_secret: f.actas_hmac_secret,
                actas_config_name: f.actas_config_name,
                interactive_access: interactive_access.then_some(true),
            };
            let reply: Reply<AgentResponse> = ctx.send(AGENTS, "RegisterAgent", &req).await?;
            ctx.print(&reply, |r| show(&r.agent, None, None));
        }
        AgentCmd::Update {
            agent,
            fields: mut f,
            actas_required,
            interactive_access,
            clear_pools,
            clear_models,
            clear_tools,
            clear_gateways,
            clear_actas_groups,
            clear_actas_emails,
            clear_actas_subjects,
        } => {
            let clear = Clear {
                pools: clear_pools,
                models: clear_models,
                tools: clear_tools,
                gateways: clear_gateways,
                groups: clear_actas_groups,
                emails: clear_actas_emails,
                subjects: clear_actas_subjects,
            };
            let c = fields(ctx, &mut f, clear).await?;
            let req = UpdateAgentRequest {
                workspace_id,
                agent_id: agent,
                metadata: c.metadata,
                token_ttl: f.token_ttl,
                allowed_pool_names: c.pools,
                allowed_direct_model_names: c.models,
                allowed_tools: c.tools,
                allowed_gateway_ids: c.gateway_ids,
                actas_allowed_groups: c.groups,
                actas_allowed_emails: c.emails,
                actas_allowed_subjects: c.subjects,
                actas_method: f.actas_method,
                actas_required,
                actas_provider_id: f.actas_provider_id,
                actas_oidc_url: f.actas_oidc_url,
                actas_hmac_secret: f.actas_hmac_secret,
                actas_config_name: f.actas_config_name,
                interactive_access,
            };
            let reply: Reply<AgentResponse> = ctx.send(AGENTS, "UpdateAgent", &req).await?;
            ctx.print(&reply, |r| show(&r.agent, None, None));
        }
        AgentCmd::Get { agent, gateway } => {
            let req = GetAgentRequest {
                workspace_id,
                agent_id: agent,
                gateway_id: ctx.gateway_opt(gateway).await?,
            };
            let reply: Reply<GetAgentResponse> = ctx.send(AGENTS, "GetAgent", &req).await?;
            ctx.print(&reply, |r| {
                show(&r.agent, r.gateway_id.as_deref(), r.endpoints.as_ref())
            });
        }
        AgentCmd::List {
            status,
            limit,
            offset,
        } => {
            let req = ListAgentsRequest {
                workspace_id,
                status,
                limit,
                offset,
            };
            let reply: Reply<ListAgentsResponse> = ctx.send(AGENTS, "ListAgents", &req).await?;
            ctx.print(&reply, table);
        }
        AgentCmd::Grants(cmd) => grants(ctx, workspace_id, cmd).await?,
        AgentCmd::Reach => {
            let req = ListToolReachRequest { workspace_id };
            let reply: Reply<ListToolReachResponse> =
                ctx.send(AGENTS, "ListToolReach", &req).await?;
            ctx.print(&reply, reach_table);
        }
        AgentCmd::Suspend {
            agent,
            reason,
            cascade,
        } => lifecycle(ctx, "SuspendAgent", workspace_id, agent, reason, cascade).await?,
        AgentCmd::Revoke { agent, reason } => {
            lifecycle(ctx, "RevokeAgent", workspace_id, agent, reason, false).await?
        }
        AgentCmd::Reactivate { agent } => {
            let req = ReactivateAgentRequest {
                workspace_id,
                agent_id: agent,
            };
            let reply: Reply<AgentLifecycleResponse> =
                ctx.send(AGENTS, "ReactivateAgent", &req).await?;
            ctx.print(&reply, |r| show(&r.agent, None, None));
        }
        AgentCmd::Delete {
            agent,
            reason,
            cascade,
        } => {
            let req = AgentLifecycleRequest {
                workspace_id,
                agent_id: agent,
                reason,
                cascade,
            };
            let reply: Reply<DeleteAgentResponse> = ctx.send(AGENTS, "DeleteAgent", &req).await?;
            ctx.print(&reply, |r| {
                output::line(&format!("Deleted {} agent(s):", r.deleted_agent_ids.len()));
                for id in &r.deleted_agent_ids {
                    output::line(&format!("  {id}"));
                }
            });
        }
    }
    Ok(())
}

/// Suspend or revoke: prints the agent and every agent whose status changed.
async fn lifecycle(
    ctx: &Ctx,
    operation: &str,
    workspace_id: String,
    agent_id: String,
    reason: Option<String>,
    cascade: bool,
) -> anyhow::Result<()> {
    let req = AgentLifecycleRequest {
        workspace_id,
        agent_id,
        reason,
        cascade,
    };
    let reply: Reply<AgentLifecycleResponse> = ctx.send(AGENTS, operation, &req).await?;
    ctx.print(&reply, |r| {
        lines(&r.agent, None, None)
            .add("affected", output::join(&r.affected_agent_ids))
            .print();
    });
    Ok(())
}

fn show(a: &Agent, gateway_id: Option<&str>, endpoints: Option<&Endpoints>) {
    lines(a, gateway_id, endpoints).print();
}

fn lines(a: &Agent, gateway_id: Option<&str>, endpoints: Option<&Endpoints>) -> Lines {
    let metadata = (!a.metadata.is_empty()).then(|| Value::Object(a.metadata.clone()));
    let actas = a.actas_method.is_some() || a.actas_required;
    Lines::new()
        .add("name", &a.name)
        .add("agent_id", &a.agent_id)
        .add("status", a.status.as_str())
        .opt("reason", a.status_reason.as_ref())
        .opt("parent", a.parent_id.as_ref())
        .add("token ttl", &a.token_ttl)
        .add("pools", output::join(&a.allowed_pool_names))
        .add("models", output::join(&a.allowed_direct_model_names))
        .add("tools", output::join(&a.allowed_tools))
        .add("gateways", output::join(&a.allowed_gateway_ids))
        .opt("act-as method", a.actas_method.map(ActAsMethod::as_str))
        .opt(
            "act-as required",
            actas.then(|| output::yes(a.actas_required)),
        )
        .opt("act-as groups", nonempty(&a.actas_allowed_groups))
        .opt("act-as emails", nonempty(&a.actas_allowed_emails))
        .opt("act-as subjects", nonempty(&a.actas_allowed_subjects))
        .opt("act-as provider", a.actas_provider_id.as_ref())
        .opt("act-as oidc url", a.actas_oidc_url.as_ref())
        .opt(
            "act-as hmac secret",
            a.actas_hmac_secret_set.then_some("set"),
        )
        .opt("act-as config", a.actas_config_name.as_ref())
        .add("interactive", output::yes(a.interactive_access))
        .opt("metadata", metadata)
        .opt("gateway_id", gateway_id)
        .opt("url", endpoints.map(|e| &e.url))
        .opt("openai base url", endpoints.map(|e| &e.openai_base_url))
        .opt(
            "anthropic base url",
            endpoints.map(|e| &e.anthropic_base_url),
        )
        .opt("mcp url", endpoints.map(|e| &e.mcp_url))
}

fn nonempty(list: &[String]) -> Option<String> {
    (!list.is_empty()).then(|| list.join(", "))
}

fn table(r: &ListAgentsResponse) {
    let rows = r
        .agents
        .iter()
        .map(|a| {
            vec![
                a.name.clone(),
                a.agent_id.clone(),
                a.status.as_str().to_string(),
                output::join(&a.allowed_pool_names),
                output::join(&a.allowed_direct_model_names),
                a.allowed_gateway_ids.len().to_string(),
            ]
        })
        .collect();
    output::table(
        &["name", "id", "status", "pools", "models", "gateways"],
        rows,
    );
    if u64::try_from(r.agents.len()).is_ok_and(|n| n < r.total) {
        output::line(&format!(
            "({} of {} shown; use --limit and --offset)",
            r.agents.len(),
            r.total
        ));
    }
}

async fn grants(ctx: &Ctx, workspace_id: String, cmd: GrantCmd) -> anyhow::Result<()> {
    match cmd {
        GrantCmd::List { agent } => {
            let req = ListInteractiveGrantsRequest {
                workspace_id,
                all_users: true,
                agent_id: agent,
            };
            let reply: Reply<ListInteractiveGrantsResponse> =
                ctx.send(AGENTS, "ListInteractiveGrants", &req).await?;
            ctx.print(&reply, |r| {
                let rows = r
                    .grants
                    .iter()
                    .map(|g| {
                        let who = if g.email.is_empty() {
                            &g.subject
                        } else {
                            &g.email
                        };
                        vec![
                            g.grant_id.clone(),
                            g.agent_name.clone(),
                            who.clone(),
                            g.client_name.clone(),
                            g.last_used_at.clone(),
                        ]
                    })
                    .collect();
                output::table(&["grant", "agent", "person", "client", "last used"], rows);
            });
        }
        GrantCmd::Revoke { grant_id } => {
            let req = RevokeInteractiveGrantRequest {
                workspace_id,
                grant_id,
            };
            let reply: Reply<RevokeInteractiveGrantResponse> =
                ctx.send(AGENTS, "RevokeInteractiveGrant", &req).await?;
            ctx.print(&reply, |r| {
                output::line(&if r.revoked {
                    format!(
                        "Grant {} revoked ({} refresh tokens).",
                        r.grant_id, r.refresh_tokens_revoked
                    )
                } else {
                    format!("Grant {} was already revoked.", r.grant_id)
                })
            });
        }
    }
    Ok(())
}

fn reach_table(r: &ListToolReachResponse) {
    let rows = r
        .agents
        .iter()
        .map(|a| {
            let tools: Vec<String> = a.tools.iter().map(|t| t.tool.clone()).collect();
            let tools = if tools.is_empty() {
                "-".to_string()
            } else {
                tools.join(", ")
            };
            vec![a.name.clone(), a.status.as_str().to_string(), tools]
        })
        .collect();
    output::table(&["agent", "status", "tools"], rows);
}

#[cfg(test)]
mod tests {
    use super::list;

    #[test]
    fn lists_replace_or_clear_or_stay() {
        assert_eq!(list(vec![], false), None);
        assert_eq!(list(vec![], true), Some(vec![]));
        assert_eq!(list(vec!["a".into()], false), Some(vec!["a".into()]));
    }
}
