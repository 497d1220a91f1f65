//! `portcullis actas-provider …`: act-as verification providers; `portcullis workspace
//! update`: the workspace's plan and act-as floor.

use portcullis_shared::api::actas::*;
use portcullis_shared::api::service::{AGENTS, MGMT};
use portcullis_shared::api::workspace::{UpdateWorkspaceRequest, WorkspaceResponse};

use crate::args::{ActAsProviderCmd, WorkspaceCmd};
use crate::ctx::{Ctx, Reply};
use crate::output::{self, Lines};

fn show(p: &ActAsProvider) {
    let text = |v: &Option<String>| v.clone().unwrap_or_else(|| "-".into());
    Lines::new()
        .add("name", &p.name)
        .add("provider_id", &p.provider_id)
        .add("method", p.method.as_str())
        .add("issuer", text(&p.issuer))
        .add("audience", text(&p.audience))
        .add("jwks_url", text(&p.jwks_url))
        .add("email_claim", &p.email_claim)
        .add("groups_claim", &p.groups_claim)
        .add("trust_unverified_email", p.trust_unverified_email)
        .add("hmac_secret", if p.hmac_secret_set { "set" } else { "-" })
        .add("signin_client_id", text(&p.signin_client_id))
        .add(
            "signin_client_secret",
            if p.signin_client_secret_set {
                "set"
            } else {
                "-"
            },
        )
        .add("agents", p.agent_count)
        .print();
}

pub async fn run(ctx: &Ctx, cmd: ActAsProviderCmd) -> anyhow::Result<()> {
    let workspace_id = ctx.ws().await?;
    let reply: Reply<ActAsProviderResponse> = match cmd {
        ActAsProviderCmd::Create {
            name,
            method,
            fields,
        } => {
            let req = CreateActAsProviderRequest {
                workspace_id,
                name,
                method,
                issuer: fields.issuer,
                audience: fields.audience,
                jwks_url: fields.jwks_url,
                email_claim: fields.email_claim,
                groups_claim: fields.groups_claim,
                trust_unverified_email: fields.trust_unverified_email,
                hmac_secret: fields.hmac_secret,
                signin_client_id: fields.signin_client_id,
                signin_client_secret: fields.signin_client_secret,
            };
            ctx.send(AGENTS, "CreateActAsProvider", &req).await?
        }
        ActAsProviderCmd::Update {
            provider,
            name,
            fields,
        } => {
            let req = UpdateActAsProviderRequest {
                workspace_id,
                provider_id: provider,
                name,
                issuer: fields.issuer,
                audience: fields.audience,
                jwks_url: fields.jwks_url,
                email_claim: fields.email_claim,
                groups_claim: fields.groups_claim,
                trust_unverified_email: fields.trust_unverified_email,
                hmac_secret: fields.hmac_secret,
                signin_client_id: fields.signin_client_id,
                signin_client_secret: fields.signin_client_secret,
            };
            ctx.send(AGENTS, "UpdateActAsProvider", &req).await?
        }
        ActAsProviderCmd::Get { provider } => {
            let req = ActAsProviderRefRequest {
                workspace_id,
                provider_id: provider,
            };
            ctx.send(AGENTS, "GetActAsProvider", &req).await?
        }
        ActAsProviderCmd::List => {
            let req = ListActAsProvidersRequest { workspace_id };
            let reply: Reply<ListActAsProvidersResponse> =
                ctx.send(AGENTS, "ListActAsProviders", &req).await?;
            ctx.print(&reply, table);
            return Ok(());
        }
        ActAsProviderCmd::Delete { provider } => {
            let message = format!("Deleted act-as provider {provider}.");
            let req = ActAsProviderRefRequest {
                workspace_id,
                provider_id: provider,
            };
            return ctx
                .send_done(AGENTS, "DeleteActAsProvider", &req, &message)
                .await;
        }
    };
    ctx.print(&reply, |r| show(&r.provider));
    Ok(())
}

fn table(r: &ListActAsProvidersResponse) {
    let rows = r
        .providers
        .iter()
        .map(|p| {
            vec![
                p.name.clone(),
                p.provider_id.clone(),
                p.method.as_str().to_string(),
                p.issuer.clone().unwrap_or_default(),
                p.agent_count.to_string(),
            ]
        })
        .collect();
    output::table(&["name", "id", "method", "issuer", "agents"], rows);
}

pub async fn workspace(ctx: &Ctx, cmd: WorkspaceCmd) -> anyhow::Result<()> {
    let WorkspaceCmd::Update {
        plan,
        actas_min_method,
        filter_window_bytes,
        filter_window_tokens,
    } = cmd;
    let req = UpdateWorkspaceRequest {
        workspace_id: ctx.ws().await?,
        plan,
        actas_min_method,
        filter_window_bytes,
        filter_window_tokens,
    };
    let reply: Reply<WorkspaceResponse> = ctx.send(MGMT, "UpdateWorkspace", &req).await?;
    ctx.print(&reply, |r| {
        Lines::new()
            .add("workspace", &r.workspace.name)
            .add("plan", &r.workspace.plan)
            .add("actas_min_method", r.workspace.actas_min_method.as_str())
            .add(
                "filter_window",
                format!(
                    "{} bytes, {} tokens",
                    r.workspace.filter_window_bytes, r.workspace.filter_window_tokens
                ),
            )
            .print();
    });
    Ok(())
}
