//! `portcullis agent …`

use serde_json::{json, Value};

use super::models::done;
use crate::args::{AgentCmd, AgentFields};
use crate::ctx::{Ctx, Kind};
use crate::output;

const FIELDS: &[(&str, &str)] = &[
    ("name", "/agent/name"),
    ("agent_id", "/agent/agent_id"),
    ("status", "/agent/status"),
    ("reason", "/agent/status_reason"),
    ("parent", "/agent/parent_id"),
    ("token ttl", "/agent/token_ttl"),
    ("pools", "/agent/allowed_pool_names"),
    ("models", "/agent/allowed_direct_model_names"),
    ("tools", "/agent/allowed_tools"),
    ("gateways", "/agent/allowed_gateway_ids"),
    ("act-as method", "/agent/actas_method"),
    ("act-as groups", "/agent/actas_allowed_groups"),
    ("act-as emails", "/agent/actas_allowed_emails"),
    ("act-as subjects", "/agent/actas_allowed_subjects"),
    ("interactive", "/agent/interactive_access"),
    ("openai base url", "/endpoints/openai_base_url"),
    ("affected", "/affected_agent_ids"),
];

/// Writes the fields that were given; `clear` names lists to send empty.
async fn fields(
    ctx: &Ctx,
    body: &mut Value,
    f: AgentFields,
    clear: &[(&str, bool)],
) -> anyhow::Result<()> {
    if let Some(m) = f.metadata {
        body["metadata"] = serde_json::from_str(&m)
            .map_err(|e| anyhow::anyhow!("--metadata must be a JSON object: {e}"))?;
    }
    let mut gateway_ids = Vec::new();
    for g in &f.gateways {
        gateway_ids.push(ctx.resolve(Kind::Gateway, g).await?);
    }
    let lists = [
        ("allowed_pool_names", f.pools),
        ("allowed_direct_model_names", f.models),
        ("allowed_tools", f.tools),
        ("allowed_gateway_ids", gateway_ids),
        ("actas_allowed_groups", f.actas_groups),
        ("actas_allowed_emails", f.actas_emails),
        ("actas_allowed_subjects", f.actas_subjects),
    ];
    for (key, list) in lists {
        let cleared = clear.iter().any(|(k, on)| *k == key && *on);
        if cleared && !list.is_empty() {
            anyhow::bail!("{key}: give values or clear the list, not both");
        }
        if cleared || !list.is_empty() {
            body[key] = json!(list);
        }
    }
    let scalars = [
        ("token_ttl", f.token_ttl),
        ("actas_method", f.actas_method),
        ("actas_provider_id", f.actas_provider_id),
        ("actas_oidc_url", f.actas_oidc_url),
        ("actas_hmac_secret", f.actas_hmac_secret),
        ("actas_config_name", f.actas_config_name),
    ];
    for (key, value) in scalars {
        if let Some(v) = value {
            body[key] = json!(v);
        }
    }
    Ok(())
}

pub async fn run(ctx: &Ctx, cmd: AgentCmd) -> anyhow::Result<()> {
    let reply = match cmd {
        AgentCmd::Register {
            name,
            parent,
            fields: f,
            actas_required,
            interactive_access,
        } => {
            let mut body = json!({"name": name});
            if let Some(p) = parent {
                body["parent_id"] = json!(p);
            }
            fields(ctx, &mut body, f, &[]).await?;
            if actas_required {
                body["actas_required"] = json!(true);
            }
            if interactive_access {
                body["interactive_access"] = json!(true);
            }
            ctx.agents("RegisterAgent", body).await?
        }
        AgentCmd::Update {
            agent,
            fields: f,
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
            let mut body = json!({"agent_id": agent});
            let clear = [
                ("allowed_pool_names", clear_pools),
                ("allowed_direct_model_names", clear_models),
                ("allowed_tools", clear_tools),
                ("allowed_gateway_ids", clear_gateways),
                ("actas_allowed_groups", clear_actas_groups),
                ("actas_allowed_emails", clear_actas_emails),
                ("actas_allowed_subjects", clear_actas_subjects),
            ];
            fields(ctx, &mut body, f, &clear).await?;
            if let Some(r) = actas_required {
                body["actas_required"] = json!(r);
            }
            if let Some(i) = interactive_access {
                body["interactive_access"] = json!(i);
            }
            ctx.agents("UpdateAgent", body).await?
        }
        AgentCmd::Get { agent, gateway } => {
            let mut body = json!({"agent_id": agent});
            if let Some(g) = gateway {
                body["gateway_id"] = json!(ctx.resolve(Kind::Gateway, &g).await?);
            }
            ctx.agents("GetAgent", body).await?
        }
        AgentCmd::List {
            status,
            limit,
            offset,
        } => {
            let mut body = json!({});
            for (k, v) in [("limit", limit), ("offset", offset)] {
                if let Some(n) = v {
                    body[k] = json!(n);
                }
            }
            if let Some(s) = status {
                body["status"] = json!(s);
            }
            let reply = ctx.agents("ListAgents", body).await?;
            output::list(
                ctx.json,
                &reply,
                "agents",
                &["/name", "/agent_id", "/status"],
            );
            return Ok(());
        }
        AgentCmd::Suspend {
            agent,
            reason,
            cascade,
        } => {
            ctx.agents(
                "SuspendAgent",
                json!({"agent_id": agent, "reason": reason, "cascade": cascade}),
            )
            .await?
        }
        AgentCmd::Reactivate { agent } => {
            ctx.agents("ReactivateAgent", json!({"agent_id": agent}))
                .await?
        }
        AgentCmd::Revoke { agent, reason } => {
            ctx.agents("RevokeAgent", json!({"agent_id": agent, "reason": reason}))
                .await?
        }
        AgentCmd::Delete {
            agent,
            reason,
            cascade,
        } => {
            let reply = ctx
                .agents(
                    "DeleteAgent",
                    json!({"agent_id": agent, "reason": reason, "cascade": cascade}),
                )
                .await?;
            let count = reply["deleted_agent_ids"].as_array().map_or(0, Vec::len);
            done(ctx, &reply, &format!("Deleted {count} agent(s)."));
            return Ok(());
        }
    };
    output::show(ctx.json, &reply, FIELDS);
    Ok(())
}
