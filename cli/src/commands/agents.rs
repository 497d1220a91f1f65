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

use crate::args::{AgentClears, AgentCmd, AgentFields, GrantCmd};
use crate::ctx::{Ctx, Kind, Reply};
use crate::output::{self, Lines};
use crate::parse::list_change;

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

/// The shared fields from the flags, gateways resolved to ids; `clear` empties lists.
async fn fields(ctx: &Ctx, f: &mut AgentFields, clear: AgentClears) -> anyhow::Result<Fields> {
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
        pools: list_change(std::mem::take(&mut f.pools), clear.clear_pools),
        models: list_change(std::mem::take(&mut f.models), clear.clear_models),
        tools: list_change(std::mem::take(&mut f.tools), clear.clear_tools),
        gateway_ids: list_change(gateway_ids, clear.clear_gateways),
        groups: list_change(
            std::mem::take(&mut f.actas_groups),
            clear.clear_actas_groups,
        ),
        emails: list_change(
            std::mem::take(&mut f.actas_emails),
            clear.clear_actas_emails,
        ),
        subjects: list_change(
            std::mem::take(&mut f.actas_subjects),
            clear.clear_actas_subjects,
        ),
    })
}

pub async fn run(ctx: &Ctx, cmd: AgentCmd) -> anyhow::Result<()> {
    let workspace_id = ctx.ws().await?;
    match cmd {
        AgentCmd::Register {
            name,
            parent,
            fields,
            actas_required,
            interactive_access,
        } => {
            register(
                ctx,
                workspace_id,
                name,
                parent,
                fields,
                actas_required,
                interactive_access,
            )
            .await?
        }
        AgentCmd::Update {
            agent,
            fields,
            actas_required,
            interactive_access,
            clear,
        } => {
            update(
                ctx,
                workspace_id,
                agent,
                fields,
                actas_required,
                interactive_access,
                clear,
            )
            .await?
        }
        AgentCmd::Get { agent, gateway } => get(ctx, workspace_id, agent, gateway).await?,
        AgentCmd::List {
            status,
            limit,
            offset,
        } => list(ctx, workspace_id, status, limit, offset).await?,
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
        AgentCmd::Reactivate { agent } => reactivate(ctx, workspace_id, agent).await?,
        AgentCmd::Delete {
            agent,
            reason,
            cascade,
        } => delete(ctx, workspace_id, agent, reason, cascade).await?,
    }
    Ok(())
}

/// `agent register`.
async fn register(
    ctx: &Ctx,
    workspace_id: String,
    name: String,
    parent: Option<String>,
    mut f: AgentFields,
    actas_required: bool,
    interactive_access: bool,
) -> anyhow::Result<()> {
    let c = fields(ctx, &mut f, AgentClears::default()).await?;
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
    Ok(())
}

/// `agent update`: what is not given stays; a list flag replaces the list, `clear` empties it.
async fn update(
    ctx: &Ctx,
    workspace_id: String,
    agent: String,
    mut f: AgentFields,
    actas_required: Option<bool>,
    interactive_access: Option<bool>,
    clear: AgentClears,
) -> anyhow::Result<()> {
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
    Ok(())
}

/// `agent get`: the agent, with the endpoints of its gateway (or of `gateway`).
async fn get(
    ctx: &Ctx,
    workspace_id: String,
    agent: String,
    gateway: Option<String>,
) -> anyhow::Result<()> {
    let req = GetAgentRequest {
        workspace_id,
        agent_id: agent,
        gateway_id: ctx.gateway_opt(gateway).await?,
    };
    let reply: Reply<GetAgentResponse> = ctx.send(AGENTS, "GetAgent", &req).await?;
    ctx.print(&reply, |r| {
        show(&r.agent, r.gateway_id.as_deref(), r.endpoints.as_ref())
    });
    Ok(())
}

/// `agent list`: one page of agents.
async fn list(
    ctx: &Ctx,
    workspace_id: String,
    status: Option<AgentStatus>,
    limit: Option<u32>,
    offset: Option<u32>,
) -> anyhow::Result<()> {
    let req = ListAgentsRequest {
        workspace_id,
        status,
        limit,
        offset,
    };
    let reply: Reply<ListAgentsResponse> = ctx.send(AGENTS, "ListAgents", &req).await?;
    ctx.print(&reply, table);
    Ok(())
}

/// `agent reactivate`: a suspended agent becomes active again.
async fn reactivate(ctx: &Ctx, workspace_id: String, agent: String) -> anyhow::Result<()> {
    let req = ReactivateAgentRequest {
        workspace_id,
        agent_id: agent,
    };
    let reply: Reply<AgentLifecycleResponse> = ctx.send(AGENTS, "ReactivateAgent", &req).await?;
    ctx.print(&reply, |r| show(&r.agent, None, None));
    Ok(())
}

/// `agent delete`: prints every agent deleted.
async fn delete(
    ctx: &Ctx,
    workspace_id: String,
    agent: String,
    reason: Option<String>,
    cascade: bool,
) -> anyhow::Result<()> {
    let req = AgentLifecycleRequest {
        workspace_id,
        agent_id: agent,
        reason,
        cascade,
    };
    let reply: Reply<DeleteAgentResponse> = ctx.send(AGENTS, "DeleteAgent", &req).await?;
    ctx.print(&reply, deleted);
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

/// What `agent delete` deleted: the agent and, with `--cascade`, its descendants.
fn deleted(r: &DeleteAgentResponse) {
    output::line(&format!("Deleted {} agent(s):", r.deleted_agent_ids.len()));
    for id in &r.deleted_agent_ids {
        output::line(&format!("  {id}"));
    }
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
