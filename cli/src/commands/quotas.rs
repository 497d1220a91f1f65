//! `portcullis quota create|update|list|delete` and `portcullis gateway quota
//! set|update|list|remove`.

use anyhow::bail;
use portcullis_shared::api::quotas::*;
use portcullis_shared::api::service::MGMT;
use serde::Serialize;

use crate::args::{GatewayQuotaCmd, QuotaChanges, QuotaCmd};
use crate::ctx::{Ctx, Kind, Reply};
use crate::output::{self, Lines};
use crate::parse;

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
            let flags = SubjectFlags {
                agent,
                act_as,
                pool,
                model,
                gateway,
            };
            let (subject_id, subject_key, pool_id) = resolve_subject(ctx, subject, flags).await?;
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
            send_quota(ctx, "CreateLLMQuota", &req).await
        }
        QuotaCmd::Update { quota_id, changes } => {
            let req = update_request(workspace_id, quota_id, changes);
            send_quota(ctx, "UpdateLLMQuota", &req).await
        }
        QuotaCmd::List { gateway: None } => {
            let req = ListLLMQuotasRequest { workspace_id };
            send_list(ctx, "ListLLMQuotas", &req).await
        }
        QuotaCmd::List { gateway: Some(g) } => {
            list_gateway_quotas(ctx, workspace_id, Some(g)).await
        }
        QuotaCmd::Delete { quota_id } => {
            let message = format!("Deleted quota {quota_id}.");
            let req = quota_ref(workspace_id, quota_id);
            ctx.send_done(MGMT, "DeleteLLMQuota", &req, &message).await
        }
    }
}

/// The flags of `quota create` that name its subject; each subject takes its own.
struct SubjectFlags {
    agent: Option<String>,
    act_as: Option<String>,
    pool: Option<String>,
    model: Option<String>,
    gateway: Option<String>,
}

/// The subject's `(subject_id, subject_key, pool_id)` from its flags, names resolved to ids.
/// A flag for another subject is a mistake, and so is a subject without its flag.
async fn resolve_subject(
    ctx: &Ctx,
    subject: QuotaSubject,
    flags: SubjectFlags,
) -> anyhow::Result<(Option<String>, Option<String>, Option<String>)> {
    let SubjectFlags {
        agent,
        act_as,
        pool,
        model,
        gateway,
    } = flags;
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
    Ok(match subject {
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
    })
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
        enabled: parse::toggle(c.enable, c.disable),
        ..Default::default()
    }
}

/// A request naming one quota (to delete it, or remove a gateway's).
fn quota_ref(workspace_id: String, quota_id: String) -> DeleteLLMQuotaRequest {
    DeleteLLMQuotaRequest {
        workspace_id,
        quota_id,
    }
}

/// Sends a request whose reply is one quota, and prints it.
async fn send_quota<Req: Serialize>(ctx: &Ctx, operation: &str, req: &Req) -> anyhow::Result<()> {
    let reply: Reply<QuotaResponse> = ctx.send(MGMT, operation, req).await?;
    ctx.print(&reply, |r| show(&r.quota));
    Ok(())
}

/// Sends a request whose reply is a list of quotas, and prints the table.
async fn send_list<Req: Serialize>(ctx: &Ctx, operation: &str, req: &Req) -> anyhow::Result<()> {
    let reply: Reply<ListLLMQuotasResponse> = ctx.send(MGMT, operation, req).await?;
    ctx.print(&reply, table);
    Ok(())
}

/// The quotas on gateways: on the one named, or on every gateway.
async fn list_gateway_quotas(
    ctx: &Ctx,
    workspace_id: String,
    gateway: Option<String>,
) -> anyhow::Result<()> {
    let req = ListGatewayQuotasRequest {
        workspace_id,
        gateway_id: ctx.gateway_opt(gateway).await?,
    };
    send_list(ctx, "ListGatewayQuotas", &req).await
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
            send_quota(ctx, "SetGatewayQuota", &req).await
        }
        GatewayQuotaCmd::Update { quota_id, changes } => {
            let req = update_request(workspace_id, quota_id, changes);
            send_quota(ctx, "UpdateGatewayQuota", &req).await
        }
        GatewayQuotaCmd::List { gateway } => list_gateway_quotas(ctx, workspace_id, gateway).await,
        GatewayQuotaCmd::Remove { quota_id } => {
            let message = format!("Removed gateway quota {quota_id}.");
            let req = quota_ref(workspace_id, quota_id);
            ctx.send_done(MGMT, "RemoveGatewayQuota", &req, &message)
                .await
        }
    }
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
