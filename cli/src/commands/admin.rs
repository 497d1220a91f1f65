//! `portcullis deployment …`, `platform-key …`, `identity`, `workspaces`.

use serde_json::json;

use super::models::done;
use crate::args::{DeploymentCmd, PlatformKeyCmd};
use crate::ctx::Ctx;
use crate::output;

pub async fn deployment(ctx: &Ctx, cmd: DeploymentCmd) -> anyhow::Result<()> {
    match cmd {
        DeploymentCmd::Create { name, public_url } => {
            let reply = ctx
                .mgmt(
                    "CreateDeployment",
                    json!({"name": name, "public_url": public_url}),
                )
                .await?;
            output::secret(ctx.json, &reply, "deployment token", "/token");
            if !ctx.json {
                output::show(
                    false,
                    &reply,
                    &[
                        ("deployment_id", "/deployment/deployment_id"),
                        ("public url", "/deployment/public_url"),
                    ],
                );
            }
        }
        DeploymentCmd::List => {
            let reply = ctx.mgmt("ListDeployments", json!({})).await?;
            output::list(
                ctx.json,
                &reply,
                "deployments",
                &["/name", "/deployment_id", "/public_url", "/last_seen_at"],
            );
        }
        DeploymentCmd::Revoke { deployment_id } => {
            let reply = ctx
                .mgmt("RevokeDeployment", json!({"deployment_id": deployment_id}))
                .await?;
            done(ctx, &reply, &format!("Revoked deployment {deployment_id}."));
        }
    }
    Ok(())
}

pub async fn platform_key(ctx: &Ctx, cmd: PlatformKeyCmd) -> anyhow::Result<()> {
    match cmd {
        PlatformKeyCmd::Create {
            name,
            role,
            permissions,
        } => {
            let mut body = json!({"name": name, "role": role});
            if !permissions.is_empty() {
                body["permissions"] = json!(permissions);
            }
            let reply = ctx.mgmt("CreatePlatformKey", body).await?;
            output::secret(ctx.json, &reply, "platform key", "/token");
            if !ctx.json {
                output::show(
                    false,
                    &reply,
                    &[
                        ("key_id", "/platform_key/key_id"),
                        ("role", "/platform_key/role"),
                        ("permissions", "/platform_key/permissions"),
                    ],
                );
            }
        }
        PlatformKeyCmd::List => {
            let reply = ctx.mgmt("ListPlatformKeys", json!({})).await?;
            output::list(
                ctx.json,
                &reply,
                "platform_keys",
                &["/name", "/key_id", "/role", "/prefix"],
            );
        }
        PlatformKeyCmd::Revoke { key_id } => {
            let reply = ctx
                .mgmt("RevokePlatformKey", json!({"key_id": key_id}))
                .await?;
            done(ctx, &reply, &format!("Revoked platform key {key_id}."));
        }
    }
    Ok(())
}

pub async fn identity(ctx: &Ctx) -> anyhow::Result<()> {
    let reply = ctx.mgmt("GetIdentity", json!({})).await?;
    output::show(
        ctx.json,
        &reply,
        &[
            ("key", "/identity/key_name"),
            ("key_id", "/identity/key_id"),
            ("role", "/identity/role"),
            ("workspace", "/identity/workspace_name"),
            ("workspace_id", "/identity/workspace_id"),
            ("permissions", "/identity/permissions"),
        ],
    );
    Ok(())
}

pub async fn workspaces(ctx: &Ctx) -> anyhow::Result<()> {
    let reply = ctx.mgmt("ListWorkspaces", json!({})).await?;
    output::list(
        ctx.json,
        &reply,
        "workspaces",
        &["/name", "/workspace_id", "/plan"],
    );
    Ok(())
}
