//! `portcullis gateway …`

use serde_json::json;

use super::models::done;
use crate::args::GatewayCmd;
use crate::ctx::{Ctx, Kind};
use crate::output;

const FIELDS: &[(&str, &str)] = &[
    ("name", "/gateway/name"),
    ("gateway_id", "/gateway/gateway_id"),
    ("state", "/gateway/state"),
    ("default", "/gateway/is_default"),
    ("members", "/gateway/members"),
    ("agents", "/gateway/agent_ids"),
    ("all agents", "/gateway/all_agents"),
    ("url", "/gateway/endpoints/url"),
    ("openai base url", "/gateway/endpoints/openai_base_url"),
    ("mcp url", "/gateway/endpoints/mcp_url"),
];

pub async fn run(ctx: &Ctx, cmd: GatewayCmd) -> anyhow::Result<()> {
    let gw = |name: String| async move { ctx.resolve(Kind::Gateway, &name).await };
    let reply = match cmd {
        GatewayCmd::Create { name, description } => {
            ctx.mgmt(
                "CreateGateway",
                json!({"name": name, "description": description}),
            )
            .await?
        }
        GatewayCmd::Update {
            gateway,
            name,
            description,
        } => {
            let mut body = json!({"gateway_id": gw(gateway).await?});
            if let Some(n) = name {
                body["name"] = json!(n);
            }
            if let Some(d) = description {
                body["description"] = json!(d);
            }
            ctx.mgmt("UpdateGateway", body).await?
        }
        GatewayCmd::Get { gateway } => {
            ctx.mgmt("GetGateway", json!({"gateway_id": gw(gateway).await?}))
                .await?
        }
        GatewayCmd::List => {
            let reply = ctx.mgmt("ListGateways", json!({})).await?;
            output::list(
                ctx.json,
                &reply,
                "gateways",
                &["/name", "/gateway_id", "/state", "/is_default"],
            );
            return Ok(());
        }
        GatewayCmd::Remove { gateway } => {
            let reply = ctx
                .mgmt(
                    "DeleteGateway",
                    json!({"gateway_id": gw(gateway.clone()).await?}),
                )
                .await?;
            done(ctx, &reply, &format!("Removed gateway {gateway}."));
            return Ok(());
        }
        GatewayCmd::State { gateway, state } => {
            ctx.mgmt(
                "SetGatewayState",
                json!({"gateway_id": gw(gateway).await?, "state": state}),
            )
            .await?
        }
        GatewayCmd::Default { gateway } => {
            ctx.mgmt(
                "SetDefaultGateway",
                json!({"gateway_id": gw(gateway).await?}),
            )
            .await?
        }
        GatewayCmd::ModelAdd { gateway, model } => {
            let body = json!({"gateway_id": gw(gateway).await?, "connection_id": ctx.resolve(Kind::Model, &model).await?});
            ctx.mgmt("AddGatewayModel", body).await?
        }
        GatewayCmd::PoolAdd { gateway, pool } => {
            let body = json!({"gateway_id": gw(gateway).await?, "pool_id": ctx.resolve(Kind::Pool, &pool).await?});
            ctx.mgmt("AddGatewayPool", body).await?
        }
        GatewayCmd::MemberRemove {
            gateway,
            model,
            pool,
            tool,
            operation,
        } => {
            let mut body = json!({"gateway_id": gw(gateway).await?});
            if let Some(m) = model {
                body["connection_id"] = json!(ctx.resolve(Kind::Model, &m).await?);
            }
            if let Some(p) = pool {
                body["pool_id"] = json!(ctx.resolve(Kind::Pool, &p).await?);
            }
            if let Some(t) = tool {
                body["connection_id"] = json!(ctx.resolve(Kind::Tool, &t).await?);
                if let Some(op) = operation {
                    body["tool"] = json!(op);
                }
            }
            ctx.mgmt("RemoveGatewayMember", body).await?
        }
        GatewayCmd::ToolAdd {
            gateway,
            tool,
            operation,
        } => {
            let body = json!({"gateway_id": gw(gateway).await?, "connection_id": ctx.resolve(Kind::Tool, &tool).await?, "tool": operation});
            ctx.mgmt("AddGatewayTool", body).await?
        }
        GatewayCmd::ToolSourceAdd { gateway, tool } => {
            let body = json!({"gateway_id": gw(gateway).await?, "connection_id": ctx.resolve(Kind::Tool, &tool).await?});
            ctx.mgmt("AddGatewayToolSource", body).await?
        }
        GatewayCmd::Access {
            gateway,
            agent,
            grant,
            revoke: _,
        } => {
            let body =
                json!({"gateway_id": gw(gateway).await?, "agent_id": agent, "granted": grant});
            ctx.mgmt("SetGatewayAgentAccess", body).await?
        }
        GatewayCmd::AllAgents {
            gateway,
            grant,
            revoke: _,
        } => {
            ctx.mgmt(
                "SetGatewayAllAgentsAccess",
                json!({"gateway_id": gw(gateway).await?, "granted": grant}),
            )
            .await?
        }
    };
    output::show(ctx.json, &reply, FIELDS);
    Ok(())
}
