//! `portcullis deployment …`, `platform-key …`, `identity` and `workspaces`.

use portcullis_shared::api::service::MGMT;
use portcullis_shared::api::workspace::*;

use crate::args::{DeploymentCmd, PlatformKeyCmd};
use crate::ctx::{Ctx, Reply};
use crate::output::{self, Lines};

pub async fn deployment(ctx: &Ctx, cmd: DeploymentCmd) -> anyhow::Result<()> {
    let workspace_id = ctx.ws().await?;
    match cmd {
        DeploymentCmd::Create { name, public_url } => {
            let req = CreateDeploymentRequest {
                workspace_id,
                name,
                public_url,
            };
            let reply: Reply<CreateDeploymentResponse> =
                ctx.send(MGMT, "CreateDeployment", &req).await?;
            ctx.print(&reply, |r| {
                output::secret("deployment token", &r.token);
                show_deployment(&r.deployment);
            });
        }
        DeploymentCmd::List => {
            let req = ListDeploymentsRequest { workspace_id };
            let reply: Reply<ListDeploymentsResponse> =
                ctx.send(MGMT, "ListDeployments", &req).await?;
            ctx.print(&reply, |r| {
                let rows = r
                    .deployments
                    .iter()
                    .map(|d| {
                        vec![
                            d.name.clone(),
                            d.deployment_id.clone(),
                            d.public_url.clone(),
                            d.last_seen_at.clone().unwrap_or_else(|| "never".into()),
                        ]
                    })
                    .collect();
                output::table(&["name", "id", "public url", "last seen"], rows);
            });
        }
        DeploymentCmd::Revoke { deployment_id } => {
            let message = format!("Revoked deployment {deployment_id}.");
            let req = RevokeDeploymentRequest {
                workspace_id,
                deployment_id,
            };
            ctx.send_done(MGMT, "RevokeDeployment", &req, &message)
                .await?;
        }
    }
    Ok(())
}

fn show_deployment(d: &Deployment) {
    Lines::new()
        .add("name", &d.name)
        .add("deployment_id", &d.deployment_id)
        .add("public url", &d.public_url)
        .add("prefix", &d.prefix)
        .print();
}

pub async fn platform_key(ctx: &Ctx, cmd: PlatformKeyCmd) -> anyhow::Result<()> {
    let workspace_id = ctx.ws().await?;
    match cmd {
        PlatformKeyCmd::Create {
            name,
            role,
            permissions,
        } => {
            let req = CreatePlatformKeyRequest {
                workspace_id,
                name,
                role,
                permissions: (!permissions.is_empty()).then_some(permissions),
            };
            let reply: Reply<CreatePlatformKeyResponse> =
                ctx.send(MGMT, "CreatePlatformKey", &req).await?;
            ctx.print(&reply, |r| {
                output::secret("platform key", &r.token);
                let k = &r.platform_key;
                Lines::new()
                    .add("name", &k.name)
                    .add("key_id", &k.key_id)
                    .add("role", k.role.as_str())
                    .add("permissions", permissions_text(&k.permissions))
                    .print();
            });
        }
        PlatformKeyCmd::List => {
            let req = ListPlatformKeysRequest { workspace_id };
            let reply: Reply<ListPlatformKeysResponse> =
                ctx.send(MGMT, "ListPlatformKeys", &req).await?;
            ctx.print(&reply, |r| {
                let rows = r
                    .platform_keys
                    .iter()
                    .map(|k| {
                        vec![
                            k.name.clone(),
                            k.key_id.clone(),
                            k.role.as_str().to_string(),
                            format!("{}…", k.prefix),
                            k.created_at.clone(),
                        ]
                    })
                    .collect();
                output::table(&["name", "id", "role", "prefix", "created"], rows);
            });
        }
        PlatformKeyCmd::Revoke { key_id } => {
            let message = format!("Revoked platform key {key_id}.");
            let req = RevokePlatformKeyRequest {
                workspace_id,
                key_id,
            };
            ctx.send_done(MGMT, "RevokePlatformKey", &req, &message)
                .await?;
        }
    }
    Ok(())
}

fn permissions_text(permissions: &[Permission]) -> String {
    output::join(&permissions.iter().map(|p| p.as_str()).collect::<Vec<_>>())
}

/// The request of the two operations that may omit the workspace: `--workspace` when given.
fn optional_workspace(ctx: &Ctx) -> OptionalWorkspaceRequest {
    OptionalWorkspaceRequest {
        workspace_id: ctx.given_workspace(),
    }
}

pub async fn identity(ctx: &Ctx) -> anyhow::Result<()> {
    let reply: Reply<IdentityResponse> = ctx
        .send(MGMT, "GetIdentity", &optional_workspace(ctx))
        .await?;
    ctx.print(&reply, |r| {
        let i = &r.identity;
        Lines::new()
            .add("key", &i.key_name)
            .add("key_id", &i.key_id)
            .add("role", i.role.as_str())
            .add("workspace", &i.workspace_name)
            .add("workspace_id", &i.workspace_id)
            .add("permissions", permissions_text(&i.permissions))
            .print();
    });
    Ok(())
}

pub async fn workspaces(ctx: &Ctx) -> anyhow::Result<()> {
    let reply: Reply<ListWorkspacesResponse> = ctx
        .send(MGMT, "ListWorkspaces", &optional_workspace(ctx))
        .await?;
    ctx.print(&reply, |r| {
        let rows = r
            .workspaces
            .iter()
            .map(|w| {
                vec![
                    w.name.clone(),
                    w.workspace_id.clone(),
                    w.plan.clone(),
                    w.actas_min_method.as_str().to_string(),
                    w.revision.to_string(),
                ]
            })
            .collect();
        output::table(
            &["name", "id", "plan", "actas_min_method", "revision"],
            rows,
        );
    });
    Ok(())
}
