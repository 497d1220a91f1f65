//! Rule bundles: `DeployRuleBundle`, `ListRuleBundles`, `DeleteRuleBundle`.

use portcullis_shared::api::rules::*;
use portcullis_shared::api::workspace::Permission;
use portcullis_shared::api::Empty;

use super::{agents as agent_api, gateways as gateway_api, unary, Access, Ctx, Operation};
use crate::error::{invalid, precondition, ApiError, ApiResult};
use crate::rules::{self, MANAGED_PREFIX};
use crate::store::{bundles, now_ms};
use crate::validate;

const MAX_POLICY_BYTES: usize = 1024 * 1024;
const MAX_POLICIES: usize = 10_000;

pub fn operations() -> Vec<(&'static str, Operation)> {
    vec![
        (
            "DeployRuleBundle",
            unary(Access::Platform(Permission::RulesDeploy), deploy),
        ),
        (
            "ListRuleBundles",
            unary(Access::Platform(Permission::GatewayView), list),
        ),
        (
            "DeleteRuleBundle",
            unary(Access::Platform(Permission::RulesDeploy), delete),
        ),
    ]
}

/// Deploys an admin bundle. It must parse and validate against the schema, or nothing is
/// stored and the caller gets Cedar's message. A bundle with the name of an existing one in the
/// same scope replaces it and keeps its id.
async fn deploy(ctx: Ctx, req: DeployRuleBundleRequest) -> ApiResult<RuleBundleResponse> {
    let scope = req.scope.unwrap_or(BundleScope::Workspace);
    if req.policies.trim().is_empty() {
        return Err(invalid("policies is required (Cedar policy text)"));
    }
    if req.policies.len() > MAX_POLICY_BYTES {
        return Err(invalid("policies is larger than 1 MiB"));
    }
    let ws = ctx.workspace_id().to_string();
    let mut tx = ctx.store().write(&ws).await?;
    let scope_id = match (scope, req.scope_id.as_deref().filter(|s| !s.is_empty())) {
        (BundleScope::Workspace, None) => String::new(),
        (BundleScope::Workspace, Some(_)) => {
            return Err(invalid(
                "scope_id applies only to the gateway and agent scopes",
            ))
        }
        (_, None) => return Err(invalid(format!("scope {} needs scope_id", scope.as_str()))),
        (BundleScope::Gateway, Some(id)) => gateway_api::load(tx.conn(), &ws, id).await?.id,
        (BundleScope::Agent, Some(id)) => agent_api::load(tx.conn(), &ws, id).await?.id,
    };
    let name = match req.name.as_deref().filter(|n| !n.is_empty()) {
        Some(n) => Some(validate::name("name", n)?),
        None => None,
    };
    let existing = match &name {
        Some(n) => bundles::by_name(tx.conn(), &ws, scope.as_str(), &scope_id, n).await?,
        None => None,
    };
    let id = existing
        .as_ref()
        .map_or_else(|| uuid::Uuid::new_v4().to_string(), |b| b.id.clone());
    let policy_ids = rules::check(&rules::admin_prefix(&id), &req.policies)
        .map_err(|e| invalid(e.to_string()))?;
    if policy_ids.is_empty() {
        return Err(invalid("policies holds no policy"));
    }
    if policy_ids.len() > MAX_POLICIES {
        return Err(invalid(format!(
            "a bundle holds at most {MAX_POLICIES} policies"
        )));
    }
    if existing.is_some() {
        bundles::delete(tx.conn(), &ws, &id).await?;
    }
    let row = bundles::BundleRow {
        id: id.clone(),
        workspace_id: ws.clone(),
        name: name.unwrap_or_else(|| id.clone()),
        scope: scope.as_str().to_string(),
        scope_id,
        policies: req.policies,
        policy_ids: serde_json::to_string(&policy_ids)
            .map_err(|e| ApiError::Internal(e.to_string()))?,
        created_at: now_ms(),
    };
    bundles::insert(tx.conn(), &row).await?;
    tx.commit().await?;
    tracing::info!(bundle_id = %id, scope = %row.scope, policies = policy_ids.len(), "Rule bundle deployed.");
    let resource = portcullis_shared::audit::ResourceRef {
        kind: "rule_bundle".into(),
        id: id.clone(),
        name: row.name.clone(),
        ..Default::default()
    };
    let payload = portcullis_shared::audit::catalog::RuleBundleDeployed {
        bundle_id: id.clone(),
        bundle_name: row.name.clone(),
        scope: row.scope.clone(),
        scope_id: row.scope_id.clone(),
        policies: policy_ids.len() as u64,
        replaced: existing.is_some(),
    };
    ctx.record_change(resource, payload).await;
    Ok(RuleBundleResponse {
        bundle: rules::admin_view(row)?,
    })
}

async fn list(ctx: Ctx, req: ListRuleBundlesRequest) -> ApiResult<ListRuleBundlesResponse> {
    let mut conn = ctx.store().read().await?;
    let ws = ctx.workspace_id();
    let mut out = Vec::new();
    for row in bundles::list(&mut conn, ws).await? {
        out.push(rules::admin_view(row)?);
    }
    if req.include_managed {
        out.extend(rules::managed_bundles(&mut conn, ws).await?);
    }
    let wanted_scope_id = req.scope_id.filter(|s| !s.is_empty());
    out.retain(|b| {
        req.scope.is_none_or(|s| s == b.scope)
            && wanted_scope_id
                .as_ref()
                .is_none_or(|id| b.scope_id.as_ref() == Some(id))
    });
    Ok(ListRuleBundlesResponse { bundles: out })
}

async fn delete(ctx: Ctx, req: DeleteRuleBundleRequest) -> ApiResult<Empty> {
    if req.bundle_id.starts_with(MANAGED_PREFIX) {
        return Err(precondition(
            "managed bundles follow the agent's and gateway's fields; change those instead",
        ));
    }
    let id = validate::id("bundle_id", &req.bundle_id)?;
    let ws = ctx.workspace_id().to_string();
    let mut tx = ctx.store().write(&ws).await?;
    if !bundles::delete(tx.conn(), &ws, &id).await? {
        return Err(ApiError::NotFound(format!(
            "rule bundle {id} not found in this workspace"
        )));
    }
    tx.commit().await?;
    tracing::info!(bundle_id = %id, "Rule bundle deleted.");
    Ok(Empty {})
}
