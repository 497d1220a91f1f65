//! `portcullis key …`

use serde_json::json;

use super::models::done;
use crate::args::KeyCmd;
use crate::ctx::{Ctx, Kind};
use crate::output;

const ISSUED: &[(&str, &str)] = &[
    ("key", "/key/name"),
    ("key_id", "/key/key_id"),
    ("gateway_id", "/gateway_id"),
    ("url", "/endpoints/url"),
    ("openai base url", "/endpoints/openai_base_url"),
    ("anthropic base url", "/endpoints/anthropic_base_url"),
    ("mcp url", "/endpoints/mcp_url"),
];

pub async fn run(ctx: &Ctx, cmd: KeyCmd) -> anyhow::Result<()> {
    let gateway = |g: Option<String>| async move {
        match g {
            Some(g) => ctx.resolve(Kind::Gateway, &g).await.map(Some),
            None => Ok(None),
        }
    };
    let reply = match cmd {
        KeyCmd::Create {
            agent,
            name,
            gateway: g,
        } => {
            ctx.agents(
                "CreateAgentKey",
                json!({"agent_id": agent, "name": name, "gateway_id": gateway(g).await?}),
            )
            .await?
        }
        KeyCmd::Ensure {
            agent,
            name,
            gateway: g,
        } => {
            ctx.agents(
                "EnsureAgentKey",
                json!({"agent_id": agent, "name": name, "gateway_id": gateway(g).await?}),
            )
            .await?
        }
        KeyCmd::Rotate {
            agent,
            name,
            gateway: g,
        } => {
            ctx.agents(
                "RotateAgentKey",
                json!({"agent_id": agent, "key_name": name, "gateway_id": gateway(g).await?}),
            )
            .await?
        }
        KeyCmd::Revoke { agent, name } => {
            let reply = ctx
                .agents(
                    "RevokeAgentKey",
                    json!({"agent_id": agent, "key_name": name}),
                )
                .await?;
            done(ctx, &reply, &format!("Revoked key {name} of {agent}."));
            return Ok(());
        }
        KeyCmd::List { agent } => {
            let reply = ctx
                .agents("ListAgentKeys", json!({"agent_id": agent}))
                .await?;
            output::list(
                ctx.json,
                &reply,
                "keys",
                &["/name", "/key_id", "/prefix", "/gateway_id", "/created_at"],
            );
            return Ok(());
        }
    };
    output::secret(ctx.json, &reply, "API key", "/token");
    if !ctx.json {
        output::show(false, &reply, ISSUED);
    }
    Ok(())
}
