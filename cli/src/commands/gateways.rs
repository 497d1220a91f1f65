//! `portcullis gateway …`: gateways, their members and access grants.

use portcullis_shared::api::gateways::*;
use portcullis_shared::api::service::MGMT;
use portcullis_shared::api::Empty;

use crate::args::GatewayCmd;
use crate::ctx::{Ctx, Kind, Reply};
use crate::output::{self, Lines};

pub async fn run(ctx: &Ctx, cmd: GatewayCmd) -> anyhow::Result<()> {
    let workspace_id = ctx.ws().await?;
    let gw = |name: String| async move { ctx.resolve(Kind::Gateway, &name).await };
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
        } => {
            let req = UpdateGatewayRequest {
                workspace_id,
                gateway_id: gw(gateway).await?,
                name,
                description,
            };
            ctx.send(MGMT, "UpdateGateway", &req).await?
        }
        GatewayCmd::Get { gateway } => {
            let req = GatewayIdRequest {
                workspace_id,
                gateway_id: gw(gateway).await?,
            };
            ctx.send(MGMT, "GetGateway", &req).await?
        }
        GatewayCmd::List => {
            let req = ListGatewaysRequest { workspace_id };
            let reply: Reply<ListGatewaysResponse> = ctx.send(MGMT, "ListGateways", &req).await?;
            ctx.print(&reply, |r| table(&r.gateways));
            return Ok(());
        }
        GatewayCmd::Remove { gateway } => {
            let req = GatewayIdRequest {
                workspace_id,
                gateway_id: gw(gateway.clone()).await?,
            };
            let reply: Reply<Empty> = ctx.send(MGMT, "DeleteGateway", &req).await?;
            ctx.done(&reply, &format!("Removed gateway {gateway}."));
            return Ok(());
        }
        GatewayCmd::State { gateway, state } => {
            let req = SetGatewayStateRequest {
                workspace_id,
                gateway_id: gw(gateway).await?,
                state,
            };
            ctx.send(MGMT, "SetGatewayState", &req).await?
        }
        GatewayCmd::Default { gateway } => {
            let req = GatewayIdRequest {
                workspace_id,
                gateway_id: gw(gateway).await?,
            };
            ctx.send(MGMT, "SetDefaultGateway", &req).await?
        }
        GatewayCmd::ModelAdd { gateway, model } => {
            let req = AddGatewayModelRequest {
                workspace_id,
                gateway_id: gw(gateway).await?,
                connection_id: ctx.resolve(Kind::Model, &model).await?,
            };
            ctx.send(MGMT, "AddGatewayModel", &req).await?
        }
        GatewayCmd::PoolAdd { gateway, pool } => {
            let req = AddGatewayPoolRequest {
                workspace_id,
                gateway_id: gw(gateway).await?,
                pool_id: ctx.resolve(Kind::Pool, &pool).await?,
            };
            ctx.send(MGMT, "AddGatewayPool", &req).await?
        }
        GatewayCmd::ToolAdd {
            gateway,
            tool,
            operation,
        } => {
            let req = AddGatewayToolRequest {
                workspace_id,
                gateway_id: gw(gateway).await?,
                connection_id: ctx.resolve(Kind::Tool, &tool).await?,
                tool: operation,
            };
            ctx.send(MGMT, "AddGatewayTool", &req).await?
        }
        GatewayCmd::ToolSourceAdd { gateway, tool } => {
            let req = AddGatewayToolSourceRequest {
                workspace_id,
                gateway_id: gw(gateway).await?,
                connection_id: ctx.resolve(Kind::Tool, &tool).await?,
            };
            ctx.send(MGMT, "AddGatewayToolSource", &req).await?
        }
        GatewayCmd::MemberRemove {
            gateway,
            model,
            pool,
            tool,
            operation,
        } => {
            let mut req = RemoveGatewayMemberRequest {
                workspace_id,
                gateway_id: gw(gateway).await?,
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
            ctx.send(MGMT, "RemoveGatewayMember", &req).await?
        }
        GatewayCmd::Access {
            gateway,
            agent,
            grant,
            revoke: _,
        } => {
            let req = SetGatewayAgentAccessRequest {
                workspace_id,
                gateway_id: gw(gateway).await?,
                agent_id: agent,
                granted: grant,
            };
            ctx.send(MGMT, "SetGatewayAgentAccess", &req).await?
        }
        GatewayCmd::Quota(q) => return super::quotas::run_gateway(ctx, q).await,
        GatewayCmd::AllAgents {
            gateway,
            grant,
            revoke: _,
        } => {
            let req = SetGatewayAllAgentsAccessRequest {
                workspace_id,
                gateway_id: gw(gateway).await?,
                granted: grant,
            };
            ctx.send(MGMT, "SetGatewayAllAgentsAccess", &req).await?
        }
    };
    ctx.print(&reply, |r| show(&r.gateway));
    Ok(())
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
