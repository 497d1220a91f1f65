//! `portcullis gateway …`: gateways, their members and access grants.

use portcullis_shared::api::gateways::*;
use portcullis_shared::api::service::MGMT;

use crate::args::GatewayCmd;
use crate::ctx::{Ctx, Kind, Reply};
use crate::output::{self, Lines};

pub async fn run(ctx: &Ctx, cmd: GatewayCmd) -> anyhow::Result<()> {
    let workspace_id = ctx.ws().await?;
    let reply: Reply<GatewayResponse> = match cmd {
        GatewayCmd::Create { name, description } => {
            let req = CreateGatewayRequest {
                workspace_id,
                name,
                description,
            };
            ctx.send(MGMT, "CreateGateway", &req).await?
        }
        GatewayCmd::Update {
            gateway,
            name,
            description,
        } => update(ctx, workspace_id, &gateway, name, description).await?,
        GatewayCmd::Get { gateway } => {
            let req = id_request(ctx, workspace_id, &gateway).await?;
            ctx.send(MGMT, "GetGateway", &req).await?
        }
        GatewayCmd::List => return list(ctx, workspace_id).await,
        GatewayCmd::Remove { gateway } => {
            let req = id_request(ctx, workspace_id, &gateway).await?;
            let message = format!("Removed gateway {gateway}.");
            return ctx.send_done(MGMT, "DeleteGateway", &req, &message).await;
        }
        GatewayCmd::State { gateway, state } => {
            let req = SetGatewayStateRequest {
                workspace_id,
                gateway_id: ctx.resolve(Kind::Gateway, &gateway).await?,
                state,
            };
            ctx.send(MGMT, "SetGatewayState", &req).await?
        }
        GatewayCmd::Default { gateway } => {
            let req = id_request(ctx, workspace_id, &gateway).await?;
            ctx.send(MGMT, "SetDefaultGateway", &req).await?
        }
        GatewayCmd::ModelAdd { gateway, model } => {
            add_model(ctx, workspace_id, &gateway, &model).await?
        }
        GatewayCmd::PoolAdd { gateway, pool } => {
            add_pool(ctx, workspace_id, &gateway, &pool).await?
        }
        GatewayCmd::ToolAdd {
            gateway,
            tool,
            operation,
        } => add_tool(ctx, workspace_id, &gateway, &tool, operation).await?,
        GatewayCmd::ToolSourceAdd { gateway, tool } => {
            add_tool_source(ctx, workspace_id, &gateway, &tool).await?
        }
        GatewayCmd::MemberRemove {
            gateway,
            model,
            pool,
            tool,
            operation,
        } => remove_member(ctx, workspace_id, &gateway, model, pool, tool, operation).await?,
        GatewayCmd::Access {
            gateway,
            agent,
            grant,
            revoke: _,
        } => set_access(ctx, workspace_id, &gateway, Some(agent), grant).await?,
        GatewayCmd::Quota(q) => return super::quotas::run_gateway(ctx, q).await,
        GatewayCmd::AllAgents {
            gateway,
            grant,
            revoke: _,
        } => set_access(ctx, workspace_id, &gateway, None, grant).await?,
    };
    ctx.print(&reply, |r| show(&r.gateway));
    Ok(())
}

/// A request naming one gateway, by its name or id.
async fn id_request(
    ctx: &Ctx,
    workspace_id: String,
    gateway: &str,
) -> anyhow::Result<GatewayIdRequest> {
    Ok(GatewayIdRequest {
        workspace_id,
        gateway_id: ctx.resolve(Kind::Gateway, gateway).await?,
    })
}

/// `gateway update`: a new name or description.
async fn update(
    ctx: &Ctx,
    workspace_id: String,
    gateway: &str,
    name: Option<String>,
    description: Option<String>,
) -> anyhow::Result<Reply<GatewayResponse>> {
    let req = UpdateGatewayRequest {
        workspace_id,
        gateway_id: ctx.resolve(Kind::Gateway, gateway).await?,
        name,
        description,
    };
    ctx.send(MGMT, "UpdateGateway", &req).await
}

/// `gateway list`.
async fn list(ctx: &Ctx, workspace_id: String) -> anyhow::Result<()> {
    let req = ListGatewaysRequest { workspace_id };
    let reply: Reply<ListGatewaysResponse> = ctx.send(MGMT, "ListGateways", &req).await?;
    ctx.print(&reply, |r| table(&r.gateways));
    Ok(())
}

/// `gateway model-add`.
async fn add_model(
    ctx: &Ctx,
    workspace_id: String,
    gateway: &str,
    model: &str,
) -> anyhow::Result<Reply<GatewayResponse>> {
    let req = AddGatewayModelRequest {
        workspace_id,
        gateway_id: ctx.resolve(Kind::Gateway, gateway).await?,
        connection_id: ctx.resolve(Kind::Model, model).await?,
    };
    ctx.send(MGMT, "AddGatewayModel", &req).await
}

/// `gateway pool-add`.
async fn add_pool(
    ctx: &Ctx,
    workspace_id: String,
    gateway: &str,
    pool: &str,
) -> anyhow::Result<Reply<GatewayResponse>> {
    let req = AddGatewayPoolRequest {
        workspace_id,
        gateway_id: ctx.resolve(Kind::Gateway, gateway).await?,
        pool_id: ctx.resolve(Kind::Pool, pool).await?,
    };
    ctx.send(MGMT, "AddGatewayPool", &req).await
}

/// `gateway tool-add`: one operation of a tool connection.
async fn add_tool(
    ctx: &Ctx,
    workspace_id: String,
    gateway: &str,
    tool: &str,
    operation: String,
) -> anyhow::Result<Reply<GatewayResponse>> {
    let req = AddGatewayToolRequest {
        workspace_id,
        gateway_id: ctx.resolve(Kind::Gateway, gateway).await?,
        connection_id: ctx.resolve(Kind::Tool, tool).await?,
        tool: operation,
    };
    ctx.send(MGMT, "AddGatewayTool", &req).await
}

/// `gateway tool-source-add`: the whole tool connection.
async fn add_tool_source(
    ctx: &Ctx,
    workspace_id: String,
    gateway: &str,
    tool: &str,
) -> anyhow::Result<Reply<GatewayResponse>> {
    let req = AddGatewayToolSourceRequest {
        workspace_id,
        gateway_id: ctx.resolve(Kind::Gateway, gateway).await?,
        connection_id: ctx.resolve(Kind::Tool, tool).await?,
    };
    ctx.send(MGMT, "AddGatewayToolSource", &req).await
}

/// `gateway member-remove`: detaches the model, the pool, or the tool connection (with
/// `--operation`, that one operation of it).
async fn remove_member(
    ctx: &Ctx,
    workspace_id: String,
    gateway: &str,
    model: Option<String>,
    pool: Option<String>,
    tool: Option<String>,
    operation: Option<String>,
) -> anyhow::Result<Reply<GatewayResponse>> {
    let mut req = RemoveGatewayMemberRequest {
        workspace_id,
        gateway_id: ctx.resolve(Kind::Gateway, gateway).await?,
        ..RemoveGatewayMemberRequest::default()
    };
    if let Some(m) = model {
        req.connection_id = Some(ctx.resolve(Kind::Model, &m).await?);
    }
    if let Some(p) = pool {
        req.pool_id = Some(ctx.resolve(Kind::Pool, &p).await?);
    }
    if let Some(t) = tool {
        req.connection_id = Some(ctx.resolve(Kind::Tool, &t).await?);
        req.tool = operation;
    }
    ctx.send(MGMT, "RemoveGatewayMember", &req).await
}

/// `gateway access` (one agent) and `gateway all-agents` (no agent: every agent of the
/// workspace): grants or withdraws access.
async fn set_access(
    ctx: &Ctx,
    workspace_id: String,
    gateway: &str,
    agent: Option<String>,
    granted: bool,
) -> anyhow::Result<Reply<GatewayResponse>> {
    let gateway_id = ctx.resolve(Kind::Gateway, gateway).await?;
    match agent {
        Some(agent_id) => {
            let req = SetGatewayAgentAccessRequest {
                workspace_id,
                gateway_id,
                agent_id,
                granted,
            };
            ctx.send(MGMT, "SetGatewayAgentAccess", &req).await
        }
        None => {
            let req = SetGatewayAllAgentsAccessRequest {
                workspace_id,
                gateway_id,
                granted,
            };
            ctx.send(MGMT, "SetGatewayAllAgentsAccess", &req).await
        }
    }
}

fn member_text(members: &[GatewayMember]) -> String {
    let list: Vec<String> = members
        .iter()
        .map(|m| match (m.kind, &m.tool) {
            (MemberKind::Tool, Some(tool)) => format!("tool {}/{tool}", m.name),
            (MemberKind::ToolSource, _) => format!("tools {}/*", m.name),
            (kind, _) => format!("{} {}", kind.as_str(), m.name),
        })
        .collect();
    output::join(&list)
}

fn show(g: &Gateway) {
    let e = g.endpoints.as_ref();
    Lines::new()
        .add("name", &g.name)
        .add("gateway_id", &g.gateway_id)
        .add("description", &g.description)
        .add("state", g.state.as_str())
        .add("default", output::yes(g.is_default))
        .add("members", member_text(&g.members))
        .add("all agents", output::yes(g.all_agents))
        .add("agents", output::join(&g.agent_ids))
        .add(
            "url",
            e.map_or("- (no deployment with a public URL yet)", |e| &e.url),
        )
        .opt("openai base url", e.map(|e| &e.openai_base_url))
        .opt("anthropic base url", e.map(|e| &e.anthropic_base_url))
        .opt("mcp url", e.map(|e| &e.mcp_url))
        .print();
}

fn table(gateways: &[Gateway]) {
    let rows = gateways
        .iter()
        .map(|g| {
            vec![
                g.name.clone(),
                g.gateway_id.clone(),
                g.state.as_str().to_string(),
                output::yes(g.is_default).to_string(),
                g.members.len().to_string(),
                g.endpoints.as_ref().map_or("-", |e| &e.url).to_string(),
            ]
        })
        .collect();
    output::table(&["name", "id", "state", "default", "members", "url"], rows);
}
