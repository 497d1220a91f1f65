//! Identity and workspaces, platform keys, and gateway deployments.

use portcullis_shared::api::actas::ActAsStrength;
use portcullis_shared::api::workspace::*;
use portcullis_shared::api::Empty;
use portcullis_shared::keys::{self, KeyKind};

use super::{unary, views, Access, Ctx, Operation};
use crate::error::{exists, invalid, not_found, precondition, ApiResult};
use crate::store::{now_ms, workspaces};
use crate::validate;

pub fn operations() -> Vec<(&'static str, Operation)> {
    let view = Access::Platform(Permission::GatewayView);
    let admin = Access::Platform(Permission::WorkspaceAdmin);
    vec![
        ("GetIdentity", unary(view, identity)),
        ("ListWorkspaces", unary(view, list_workspaces)),
        ("UpdateWorkspace", unary(admin, update_workspace)),
        ("CreatePlatformKey", unary(admin, create_platform_key)),
        ("ListPlatformKeys", unary(admin, list_platform_keys)),
        ("RevokePlatformKey", unary(admin, revoke_platform_key)),
        ("CreateDeployment", unary(admin, create_deployment)),
        ("ListDeployments", unary(view, list_deployments)),
        ("RevokeDeployment", unary(admin, revoke_deployment)),
    ]
}

async fn identity(ctx: Ctx, _req: OptionalWorkspaceRequest) -> ApiResult<IdentityResponse> {
    let p = ctx.principal.as_platform()?;
    let mut conn = ctx.store().read().await?;
    let ws = workspaces::get_workspace(&mut conn, &p.workspace_id)
        .await?
        .ok_or_else(|| not_found("workspace", &p.workspace_id))?;
    Ok(IdentityResponse {
        identity: Identity {
            key_id: p.key_id.clone(),
            key_name: p.key_name.clone(),
            role: p.role,
            permissions: p.permissions.clone(),
            workspace_id: ws.id,
            workspace_name: ws.name,
        },
    })
}

/// A platform key sees exactly its own workspace.
async fn list_workspaces(
    ctx: Ctx,
    _req: OptionalWorkspaceRequest,
) -> ApiResult<ListWorkspacesResponse> {
    let mut conn = ctx.store().read().await?;
    let ws = workspaces::get_workspace(&mut conn, ctx.workspace_id())
        .await?
        .ok_or_else(|| not_found("workspace", ctx.workspace_id()))?;
    Ok(ListWorkspacesResponse {
        workspaces: vec![workspace_view(ws)?],
    })
}

fn workspace_view(ws: workspaces::WorkspaceRow) -> ApiResult<Workspace> {
    let (filter_window_bytes, filter_window_tokens) = ws.filter_window();
    Ok(Workspace {
        actas_min_method: ActAsStrength::parse(&ws.actas_min_method)
            .ok_or_else(|| views::corrupt("workspace actas_min_method"))?,
        filter_window_bytes,
        filter_window_tokens,
        workspace_id: ws.id,
        name: ws.name,
        plan: ws.plan,
        revision: u64::try_from(ws.revision).unwrap_or_default(),
        created_at: views::ts(ws.created_at),
    })
}

const PLANS: [&str; 2] = ["free", "pro"];

/// Sets the workspace's plan. Downgrading to `free` keeps existing quotas (and enforces them);
/// it only stops new ones from being created.
async fn update_workspace(ctx: Ctx, req: UpdateWorkspaceRequest) -> ApiResult<WorkspaceResponse> {
    let ws_id = ctx.workspace_id().to_string();
    let mut tx = ctx.store().write(&ws_id).await?;
    if let Some(plan) = req.plan.as_deref() {
        if !PLANS.contains(&plan) {
            return Err(invalid(format!(
                "plan '{plan}' is not one of {}",
                PLANS.join(", ")
            )));
        }
        workspaces::set_plan(tx.conn(), &ws_id, plan).await?;
    }
    if let Some(method) = req.actas_min_method {
        workspaces::set_actas_min_method(tx.conn(), &ws_id, method.as_str()).await?;
    }
    let ws = workspaces::get_workspace(tx.conn(), &ws_id)
        .await?
        .ok_or_else(|| not_found("workspace", &ws_id))?;
    let ws = match (req.filter_window_bytes, req.filter_window_tokens) {
        (None, None) => ws,
        (bytes, tokens) => {
            let (stored_bytes, stored_tokens) = ws.filter_window();
            let (bytes, tokens) = super::models::checks::filter_window(
                bytes.unwrap_or(stored_bytes),
                tokens.unwrap_or(stored_tokens),
            )?;
            workspaces::set_filter_window(tx.conn(), &ws_id, bytes, tokens).await?;
            workspaces::WorkspaceRow {
                filter_window_bytes: bytes,
                filter_window_tokens: tokens,
                ..ws
            }
        }
    };
    tx.commit().await?;
    Ok(WorkspaceResponse {
        workspace: workspace_view(ws)?,
    })
}

fn platform_key_view(row: workspaces::PlatformKeyRow) -> ApiResult<PlatformKey> {
    let role = Role::parse(&row.role).ok_or_else(|| views::corrupt("platform key role"))?;
    let permissions = row
        .permission_names()?
        .iter()
        .filter_map(|p| Permission::parse(p))
        .collect();
    Ok(PlatformKey {
        key_id: row.id,
        workspace_id: row.workspace_id,
        name: row.name,
        role,
        permissions,
        prefix: row.prefix,
        created_at: views::ts(row.created_at),
    })
}

/// Creates a key row for a new token; shared with bootstrap.
pub fn new_platform_key(
    workspace_id: &str,
    name: &str,
    role: Role,
    permissions: &[Permission],
) -> (workspaces::PlatformKeyRow, String) {
    let token = keys::generate(KeyKind::Platform);
    let names: Vec<&str> = permissions.iter().map(|p| p.as_str()).collect();
    let row = workspaces::PlatformKeyRow {
        id: uuid::Uuid::new_v4().to_string(),
        workspace_id: workspace_id.to_string(),
        name: name.to_string(),
        role: role.as_str().to_string(),
        permissions: serde_json::to_string(&names).unwrap_or_else(|_| "[]".into()),
        key_hash: keys::hash(&token),
        prefix: keys::display_prefix(&token),
        created_at: now_ms(),
    };
    (row, token)
}

async fn create_platform_key(
    ctx: Ctx,
    req: CreatePlatformKeyRequest,
) -> ApiResult<CreatePlatformKeyResponse> {
    let name = validate::name("name", &req.name)?;
    let role_permissions = req.role.permissions();
    let permissions = match req.permissions {
        None => role_permissions,
        Some(list) if list.is_empty() => {
            return Err(invalid(
                "permissions, when given, must name at least one permission",
            ))
        }
        Some(list) => {
            if let Some(extra) = list.iter().find(|p| !role_permissions.contains(p)) {
                return Err(invalid(format!(
                    "permissions: role {} does not include {}",
                    req.role.as_str(),
                    extra.as_str()
                )));
            }
            let mut list = list;
            list.sort();
            list.dedup();
            list
        }
    };
    let ws = ctx.workspace_id().to_string();
    let mut tx = ctx.store().write(&ws).await?;
    let taken = workspaces::list_platform_keys(tx.conn(), &ws)
        .await?
        .iter()
        .any(|k| k.name == name);
    if taken {
        return Err(exists(format!(
            "a platform key named '{name}' already exists"
        )));
    }
    let (row, token) = new_platform_key(&ws, &name, req.role, &permissions);
    workspaces::insert_platform_key(tx.conn(), &row).await?;
    tx.commit().await?;
    tracing::info!(key_id = %row.id, role = %row.role, "Platform key created.");
    Ok(CreatePlatformKeyResponse {
        platform_key: platform_key_view(row)?,
        token,
    })
}

async fn list_platform_keys(
    ctx: Ctx,
    _req: ListPlatformKeysRequest,
) -> ApiResult<ListPlatformKeysResponse> {
    let mut conn = ctx.store().read().await?;
    let rows = workspaces::list_platform_keys(&mut conn, ctx.workspace_id()).await?;
    let platform_keys = rows
        .into_iter()
        .map(platform_key_view)
        .collect::<ApiResult<_>>()?;
    Ok(ListPlatformKeysResponse { platform_keys })
}

/// Revokes a platform key at once. The last admin key cannot be revoked.
async fn revoke_platform_key(ctx: Ctx, req: RevokePlatformKeyRequest) -> ApiResult<Empty> {
    let id = validate::id("key_id", &req.key_id)?;
    let ws = ctx.workspace_id().to_string();
    let mut tx = ctx.store().write(&ws).await?;
    let keys = workspaces::list_platform_keys(tx.conn(), &ws).await?;
    let key = keys
        .iter()
        .find(|k| k.id == id)
        .ok_or_else(|| not_found("platform key", &id))?;
    if key.role == Role::Admin.as_str() && workspaces::count_admin_keys(tx.conn(), &ws).await? <= 1
    {
        return Err(precondition(
            "this is the workspace's last admin key; create another admin key first",
        ));
    }
    workspaces::delete_platform_key(tx.conn(), &ws, &id).await?;
    tx.commit().await?;
    tracing::info!(key_id = %id, "Platform key revoked.");
    Ok(Empty {})
}

fn deployment_view(row: workspaces::DeploymentRow) -> Deployment {
    Deployment {
        deployment_id: row.id,
        workspace_id: row.workspace_id,
        name: row.name,
        public_url: row.public_url,
        prefix: row.prefix,
        created_at: views::ts(row.created_at),
        last_seen_at: row.last_seen_at.map(views::ts),
    }
}

/// Creates a deployment row for a new token; shared with `portcullis up`.
pub fn new_deployment(
    workspace_id: &str,
    name: &str,
    public_url: &str,
) -> (workspaces::DeploymentRow, String) {
    let token = keys::generate(KeyKind::Deployment);
    let row = workspaces::DeploymentRow {
        id: uuid::Uuid::new_v4().to_string(),
        workspace_id: workspace_id.to_string(),
        name: name.to_string(),
        public_url: public_url.trim_end_matches('/').to_string(),
        token_hash: keys::hash(&token),
        prefix: keys::display_prefix(&token),
        created_at: now_ms(),
        last_seen_at: None,
    };
    (row, token)
}

async fn create_deployment(
    ctx: Ctx,
    req: CreateDeploymentRequest,
) -> ApiResult<CreateDeploymentResponse> {
    let name = validate::name("name", &req.name)?;
    let url = validate::http_url("public_url", &req.public_url)?;
    if url.query().is_some() || url.fragment().is_some() {
        return Err(invalid("public_url must not carry a query or fragment"));
    }
    let ws = ctx.workspace_id().to_string();
    let mut tx = ctx.store().write(&ws).await?;
    if workspaces::list_deployments(tx.conn(), &ws)
        .await?
        .iter()
        .any(|d| d.name == name)
    {
        return Err(exists(format!(
            "a deployment named '{name}' already exists"
        )));
    }
    let (row, token) = new_deployment(&ws, &name, url.as_str());
    workspaces::insert_deployment(tx.conn(), &row).await?;
    tx.commit().await?;
    tracing::info!(deployment_id = %row.id, "Deployment created.");
    Ok(CreateDeploymentResponse {
        deployment: deployment_view(row),
        token,
    })
}

async fn list_deployments(
    ctx: Ctx,
    _req: ListDeploymentsRequest,
) -> ApiResult<ListDeploymentsResponse> {
    let mut conn = ctx.store().read().await?;
    let rows = workspaces::list_deployments(&mut conn, ctx.workspace_id()).await?;
    Ok(ListDeploymentsResponse {
        deployments: rows.into_iter().map(deployment_view).collect(),
    })
}

async fn revoke_deployment(ctx: Ctx, req: RevokeDeploymentRequest) -> ApiResult<Empty> {
    let id = validate::id("deployment_id", &req.deployment_id)?;
    let ws = ctx.workspace_id().to_string();
    let mut tx = ctx.store().write(&ws).await?;
    if !workspaces::delete_deployment(tx.conn(), &ws, &id).await? {
        return Err(not_found("deployment", &id));
    }
    tx.commit().await?;
    tracing::info!(deployment_id = %id, "Deployment revoked.");
    Ok(Empty {})
}
