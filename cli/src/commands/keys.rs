//! `portcullis key …`: agent API keys. Create, ensure and rotate print the token once.

use portcullis_shared::api::agents::*;
use portcullis_shared::api::service::AGENTS;

use crate::args::KeyCmd;
use crate::ctx::{Ctx, Reply};
use crate::output::{self, Lines};

pub async fn run(ctx: &Ctx, cmd: KeyCmd) -> anyhow::Result<()> {
    let workspace_id = ctx.ws().await?;
    let reply: Reply<IssuedAgentKey> = match cmd {
        KeyCmd::Create {
            agent,
            name,
            gateway,
            bound,
        } => {
            let req = CreateAgentKeyRequest {
                workspace_id,
                agent_id: agent,
                name,
                gateway_id: ctx.gateway_opt(gateway).await?,
                bound_subject: bound.subject(),
            };
            ctx.send(AGENTS, "CreateAgentKey", &req).await?
        }
        KeyCmd::Ensure {
            agent,
            name,
            gateway,
            bound,
        } => {
            let req = CreateAgentKeyRequest {
                workspace_id,
                agent_id: agent,
                name,
                gateway_id: ctx.gateway_opt(gateway).await?,
                bound_subject: bound.subject(),
            };
            ctx.send(AGENTS, "EnsureAgentKey", &req).await?
        }
        KeyCmd::Rotate {
            agent,
            name,
            gateway,
        } => {
            let req = RotateAgentKeyRequest {
                workspace_id,
                agent_id: agent,
                key_name: name,
                gateway_id: ctx.gateway_opt(gateway).await?,
            };
            ctx.send(AGENTS, "RotateAgentKey", &req).await?
        }
        KeyCmd::Revoke { agent, name } => {
            let message = format!("Revoked key {name} of agent {agent}.");
            let req = RevokeAgentKeyRequest {
                workspace_id,
                agent_id: agent,
                key_name: name,
            };
            return ctx
                .send_done(AGENTS, "RevokeAgentKey", &req, &message)
                .await;
        }
        KeyCmd::Exchange { .. } => {
            anyhow::bail!("portcullis key exchange runs with the agent's key, before any platform key is read")
        }
        KeyCmd::List { agent } => {
            let req = ListAgentKeysRequest {
                workspace_id,
                agent_id: agent,
            };
            let reply: Reply<ListAgentKeysResponse> =
                ctx.send(AGENTS, "ListAgentKeys", &req).await?;
            ctx.print(&reply, |r| table(&r.keys));
            return Ok(());
        }
    };
    ctx.print(&reply, issued);
    Ok(())
}

/// `portcullis key exchange`: prints the token once, with where it may be used.
pub async fn exchange(
    global: &crate::args::Global,
    agent_key: &str,
    gateway: Option<&str>,
) -> anyhow::Result<()> {
    let t = portcullis_client::exchange_agent_key(&global.control_url, agent_key, gateway).await?;
    if global.json {
        output::json(&serde_json::to_value(&t)?);
        return Ok(());
    }
    output::secret("access token", &t.access_token);
    let e = t.endpoints.as_ref();
    Lines::new()
        .add("gateway_id", &t.gateway_id)
        .add("expires_at", &t.expires_at)
        .opt("url", e.map(|e| &e.url))
        .opt("openai_base_url", e.map(|e| &e.openai_base_url))
        .opt("mcp_url", e.map(|e| &e.mcp_url))
        .print();
    Ok(())
}

fn issued(k: &IssuedAgentKey) {
    output::secret("API key", &k.token);
    let e = k.endpoints.as_ref();
    Lines::new()
        .add("key", &k.key.name)
        .add("key_id", &k.key.key_id)
        .add("agent_id", &k.key.agent_id)
        .opt(
            "action",
            k.created.map(|c| if c { "created" } else { "rotated" }),
        )
        .add("gateway_id", k.gateway_id.as_deref().unwrap_or("-"))
        .opt("url", e.map(|e| &e.url))
        .opt("openai base url", e.map(|e| &e.openai_base_url))
        .opt("anthropic base url", e.map(|e| &e.anthropic_base_url))
        .opt("mcp url", e.map(|e| &e.mcp_url))
        .print();
}

fn table(keys: &[AgentKey]) {
    let rows = keys
        .iter()
        .map(|k| {
            vec![
                k.name.clone(),
                k.key_id.clone(),
                format!("{}…", k.prefix),
                k.gateway_id.clone().unwrap_or_else(|| "-".into()),
                k.created_at.clone(),
                k.rotated_at.clone().unwrap_or_else(|| "-".into()),
            ]
        })
        .collect();
    output::table(
        &["name", "id", "prefix", "gateway", "created", "rotated"],
        rows,
    );
}
