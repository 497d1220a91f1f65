//! `portcullis quota create|update|list|delete` and `portcullis gateway quota
//! set|update|list|remove`.

use anyhow::bail;
use portcullis_shared::api::quotas::*;
use portcullis_shared::api::service::MGMT;
use portcullis_shared::api::Empty;

use crate::args::{GatewayQuotaCmd, QuotaChanges, QuotaCmd};
use crate::ctx::{Ctx, Kind, Reply};
use crate::output::{self, Lines};

pub async fn run(ctx: &Ctx, cmd: QuotaCmd) -> anyhow::Result<()> {
    let workspace_id = ctx.ws().await?;
    match cmd {
        QuotaCmd::Create {
            subject,
            limit,
            window,
            name,
            agent,
            act_as,
            pool,
            model,
            gateway,
            per_caller,
            disabled,
        } => {
            // Each subject takes its own flag; a flag for another subject is a mistake.
            let given = [
                ("--agent", agent.is_some(), subject == QuotaSubject::Agent),
                ("--act-as", act_as.is_some(), subject == QuotaSubject::ActAs),
                ("--model", model.is_some(), subject == QuotaSubject::Model),
                (
                    "--gateway",
                    gateway.is_some(),
                    subject == QuotaSubject::Gateway,
                ),
                (
                    "--pool",
                    pool.is_some(),
                    matches!(subject, QuotaSubject::Pool | QuotaSubject::Model),
                ),
            ];
            if let Some((flag, _, _)) = given.iter().find(|(_, set, fits)| *set && !*fits) {
                bail!("{flag} does not apply to --subject {}", subject.as_str());
            }
            let need = |v: Option<String>, flag: &str| match v {
                Some(v) => Ok(v),
                None => Err(anyhow::anyhow!(
                    "--subject {} needs {flag}",
                    subject.as_str()
                )),
            };
            let (subject_id, subject_key, pool_id) = match subject {
                QuotaSubject::Workspace => (None, None, None),
                QuotaSubject::Agent => (
                    Some(ctx.agent_id(&need(agent, "--agent")?).await?),
                    None,
                    None,
                ),
                QuotaSubject::ActAs => (None, Some(need(act_as, "--act-as")?), None),
                QuotaSubject::Pool => (
                    Some(ctx.resolve(Kind::Pool, &need(pool, "--pool")?).await?),
                    None,
                    None,
                ),
                QuotaSubject::Gateway => (
                    Some(
                        ctx.resolve(Kind::Gateway, &need(gateway, "--gateway")?)
                            .await?,
                    ),
                    None,
                    None,
                ),
                QuotaSubject::Model => {
                    let model_id = ctx.resolve(Kind::Model, &need(model, "--model")?).await?;
                    let pool_id = match pool {
                        Some(p) => Some(ctx.resolve(Kind::Pool, &p).await?),
                        None => None,
                    };
                    (Some(model_id), None, pool_id)
                }
            };
            let req = CreateLLMQuotaRequest {
                workspace_id,
                subject_type: subject,
                subject_id,
                subject_key,
                pool_id,
                limit_micros: limit,
                window,
                name,
                scope: None,
                per_caller: per_caller.then_some(true),
                disabled: disabled.then_some(true),
            };
            let reply: Reply<QuotaResponse> = ctx.send(MGMT, "CreateLLMQuota", &req).await?;
            ctx.print(&reply, |r| show(&r.quota));
        }
        QuotaCmd::Update { quota_id, changes } => {
            let req = update_request(workspace_id, quota_id, changes);
            let reply: Reply<QuotaResponse> = ctx.send(MGMT, "UpdateLLMQuota", &req).await?;
            ctx.print(&reply, |r| show(&r.quota));
        }
        QuotaCmd::List { gateway } => {
            let reply: Reply<ListLLMQuotasResponse> = match gateway.as_deref() {
                None => {
                    let req = ListLLMQuotasRequest { workspace_id };
                    ctx.send(MGMT, "ListLLMQuotas", &req).await?
                }
                Some(g) => {
                    let req = ListGatewayQuotasRequest {
                        workspace_id,
                        gateway_id: Some(ctx.resolve(Kind::Gateway, g).await?),
                    };
                    ctx.send(MGMT, "ListGatewayQuotas", &req).await?
                }
            };
            ctx.print(&reply, table);
        }
        QuotaCmd::Delete { quota_id } => {
            let req = DeleteLLMQuotaRequest {
                workspace_id,
                quota_id: quota_id.clone(),
            };
            let reply: Reply<Empty> = ctx.send(MGMT, "DeleteLLMQuota", &req).await?;
            ctx.done(&reply, &format!("Deleted quota {quota_id}."));
        }
    }
    Ok(())
}

fn update_request(
    workspace_id: String,
    quota_id: String,
    c: QuotaChanges,
) -> UpdateLLMQuotaRequest {
    UpdateLLMQuotaRequest {
        workspace_id,
        quota_id,
        name: c.name,
        limit_micros: c.limit,
        window: c.window,
        enabled: if c.enable {
            Some(true)
        } else if c.disable {
            Some(false)
        } else {
            None
        },
        ..Default::default()
    }
}

/// `portcullis gateway quota …`.
pub async fn run_gateway(ctx: &Ctx, cmd: GatewayQuotaCmd) -> anyhow::Result<()> {
    let workspace_id = ctx.ws().await?;
    match cmd {
        GatewayQuotaCmd::Set {
            gateway,
            limit,
            window,
            name,
            disabled,
        } => {
            let req = SetGatewayQuotaRequest {
                workspace_id,
                gateway_id: ctx.resolve(Kind::Gateway, &gateway).await?,
                limit_micros: limit,
                window,
                name,
                disabled: disabled.then_some(true),
            };
            let reply: Reply<QuotaResponse> = ctx.send(MGMT, "SetGatewayQuota", &req).await?;
            ctx.print(&reply, |r| show(&r.quota));
        }
        GatewayQuotaCmd::Update { quota_id, changes } => {
            let req = update_request(workspace_id, quota_id, changes);
            let reply: Reply<QuotaResponse> = ctx.send(MGMT, "UpdateGatewayQuota", &req).await?;
            ctx.print(&reply, |r| show(&r.quota));
        }
        GatewayQuotaCmd::List { gateway } => {
            let gateway_id = match gateway {
                Some(g) => Some(ctx.resolve(Kind::Gateway, &g).await?),
                None => None,
            };
            let req = ListGatewayQuotasRequest {
                workspace_id,
                gateway_id,
            };
            let reply: Reply<ListLLMQuotasResponse> =
                ctx.send(MGMT, "ListGatewayQuotas", &req).await?;
            ctx.print(&reply, table);
        }
        GatewayQuotaCmd::Remove { quota_id } => {
            let req = DeleteLLMQuotaRequest {
                workspace_id,
                quota_id: quota_id.clone(),
            };
            let reply: Reply<Empty> = ctx.send(MGMT, "RemoveGatewayQuota", &req).await?;
            ctx.done(&reply, &format!("Removed gateway quota {quota_id}."));
        }
    }
    Ok(())
}

fn table(r: &ListLLMQuotasResponse) {
    let rows = r
        .quotas
        .iter()
        .map(|q| {
            vec![
                q.quota_id.clone(),
                subject(q),
                usd(q.limit_micros),
                q.window.as_str().to_string(),
                output::yes(q.enabled).to_string(),
                q.name.clone(),
            ]
        })
        .collect();
    output::table(
        &["id", "subject", "limit", "window", "enabled", "name"],
        rows,
    );
}

fn usd(micros: u64) -> String {
    format!("${:.2}", micros as f64 / 1_000_000.0)
}

fn subject(q: &LLMQuota) -> String {
    let mut s = q.subject_type.as_str().to_string();
    if let Some(id) = q.subject_id.as_deref().or(q.subject_key.as_deref()) {
        s.push(' ');
        s.push_str(id);
    }
    if let Some(p) = &q.pool_id {
        s.push_str(&format!(" (pool {p})"));
    }
    if q.per_caller {
        s.push_str(" per caller");
    }
    s
}

fn show(q: &LLMQuota) {
    Lines::new()
        .add("quota_id", &q.quota_id)
        .add("subject", subject(q))
        .add(
            "limit",
            format!("{} ({} micro-USD)", usd(q.limit_micros), q.limit_micros),
        )
        .add("window", q.window.as_str())
        .add("enabled", output::yes(q.enabled))
        .add("name", &q.name)
        .print();
}
