//! Who is calling: a platform key (management operations) or a deployment token (sync).

use axum::http::{header, HeaderMap};
use portcullis_shared::api::workspace::{Permission, Role};
use portcullis_shared::keys::{self, KeyKind};

use super::Access;
use crate::error::{ApiError, ApiResult};
use crate::store::{agents, workspaces, Store};

#[derive(Debug, Clone)]
pub struct PlatformPrincipal {
    pub key_id: String,
    pub key_name: String,
    pub role: Role,
    pub permissions: Vec<Permission>,
    pub workspace_id: String,
}

#[derive(Debug, Clone)]
pub struct DeploymentPrincipal {
    pub deployment_id: String,
    pub workspace_id: String,
    pub public_url: String,
}

/// An agent presenting one of its API keys (only to exchange it for a token).
#[derive(Debug, Clone)]
pub struct AgentPrincipal {
    pub agent_id: String,
    pub key_id: String,
    pub workspace_id: String,
    /// JSON `{sub, email, groups}` of the end user the key is bound to.
    pub bound_subject: Option<String>,
}

#[derive(Debug, Clone)]
pub enum Principal {
    Platform(PlatformPrincipal),
    Deployment(DeploymentPrincipal),
    Agent(AgentPrincipal),
}

impl Principal {
    pub fn workspace_id(&self) -> &str {
        match self {
            Principal::Platform(p) => &p.workspace_id,
            Principal::Deployment(d) => &d.workspace_id,
            Principal::Agent(a) => &a.workspace_id,
        }
    }

    pub fn require(&self, permission: Permission) -> ApiResult<()> {
        match self {
            Principal::Platform(p) if permission.held_in(&p.permissions) => Ok(()),
            Principal::Platform(p) => Err(ApiError::PermissionDenied(format!(
                "platform key '{}' (role {}) lacks the permission {}",
                p.key_name,
                p.role.as_str(),
                permission.as_str()
            ))),
            Principal::Deployment(_) => Err(ApiError::PermissionDenied(
                "deployment tokens may only call the sync service".into(),
            )),
            Principal::Agent(_) => Err(ApiError::PermissionDenied(
                "agent keys may only be exchanged for tokens".into(),
            )),
        }
    }

    pub fn as_platform(&self) -> ApiResult<&PlatformPrincipal> {
        match self {
            Principal::Platform(p) => Ok(p),
            _ => Err(ApiError::PermissionDenied(
                "this operation needs a platform key".into(),
            )),
        }
    }

    pub fn as_deployment(&self) -> ApiResult<&DeploymentPrincipal> {
        match self {
            Principal::Deployment(d) => Ok(d),
            _ => Err(ApiError::PermissionDenied(
                "this operation needs a gateway deployment token".into(),
            )),
        }
    }

    pub fn as_agent(&self) -> ApiResult<&AgentPrincipal> {
        match self {
            Principal::Agent(a) => Ok(a),
            _ => Err(ApiError::PermissionDenied(
                "this operation needs an agent API key (svc_…)".into(),
            )),
        }
    }
}

fn bearer(headers: &HeaderMap) -> ApiResult<&str> {
    let value = headers
        .get(header::AUTHORIZATION)
        .ok_or_else(|| ApiError::Unauthenticated("missing Authorization: Bearer header".into()))?;
    let value = value
        .to_str()
        .map_err(|_| ApiError::Unauthenticated("malformed Authorization header".into()))?;
    let token = value
        .strip_prefix("Bearer ")
        .or_else(|| value.strip_prefix("bearer "))
        .ok_or_else(|| {
            ApiError::Unauthenticated("Authorization must use the Bearer scheme".into())
        })?;
    Ok(token.trim())
}

/// The agent and key an agent API key belongs to, if it is live.
pub async fn agent_key(
    conn: &mut crate::store::Conn,
    token: &str,
) -> ApiResult<Option<AgentPrincipal>> {
    if KeyKind::of(token) != Some(KeyKind::Agent) {
        return Ok(None);
    }
    let hash = keys::hash(token);
    Ok(agents::key_by_hash(conn, &hash)
        .await?
        .filter(|row| keys::hashes_equal(&row.key_hash, &hash))
        .map(|row| AgentPrincipal {
            agent_id: row.agent_id,
            key_id: row.id,
            workspace_id: row.workspace_id,
            bound_subject: row.bound_subject,
        }))
}

pub async fn authenticate(
    store: &Store,
    headers: &HeaderMap,
    access: Access,
) -> ApiResult<Principal> {
    let token = bearer(headers)?;
    let kind = KeyKind::of(token);
    let hash = keys::hash(token);
    let mut conn = store.read().await?;
    match (access, kind) {
        (Access::Platform(_) | Access::Agent, Some(KeyKind::Platform)) => {
            let row = workspaces::platform_key_by_hash(&mut conn, &hash)
                .await?
                .filter(|row| keys::hashes_equal(&row.key_hash, &hash))
                .ok_or_else(|| {
                    ApiError::Unauthenticated("unknown or revoked platform key".into())
                })?;
            let role = Role::parse(&row.role).ok_or_else(|| {
                ApiError::Internal(format!("platform key {} has an unknown role", row.id))
            })?;
            let permissions = row
                .permission_names()?
                .iter()
                .filter_map(|p| Permission::parse(p))
                .collect();
            Ok(Principal::Platform(PlatformPrincipal {
                key_id: row.id,
                key_name: row.name,
                role,
                permissions,
                workspace_id: row.workspace_id,
            }))
        }
        (Access::Deployment, Some(KeyKind::Deployment)) => {
            let row = workspaces::deployment_by_hash(&mut conn, &hash)
                .await?
                .filter(|row| keys::hashes_equal(&row.token_hash, &hash))
                .ok_or_else(|| {
                    ApiError::Unauthenticated("unknown or revoked deployment token".into())
                })?;
            Ok(Principal::Deployment(DeploymentPrincipal {
                deployment_id: row.id,
                workspace_id: row.workspace_id,
                public_url: row.public_url,
            }))
        }
        (Access::Agent, Some(KeyKind::Agent)) => agent_key(&mut conn, token)
            .await?
            .ok_or_else(|| ApiError::Unauthenticated("unknown or revoked API key".into()))
            .map(Principal::Agent),
        (Access::Agent, _) => Err(ApiError::Unauthenticated(
            "only an agent API key (svc_…), or a platform key exchanging one, can call this".into(),
        )),
        (Access::Platform(_), Some(KeyKind::Agent)) => Err(ApiError::Unauthenticated(
            "agent keys authenticate to gateways only; use a platform key (svc_pk_…)".into(),
        )),
        (Access::Platform(_), _) => Err(ApiError::Unauthenticated(
            "this operation needs a platform key (svc_pk_…)".into(),
        )),
        (Access::Deployment, _) => Err(ApiError::Unauthenticated(
            "the sync service needs a gateway deployment token (svc_dt_…)".into(),
        )),
    }
}
