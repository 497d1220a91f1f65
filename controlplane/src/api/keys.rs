//! Agent API keys: create, ensure, rotate, revoke, list. A token is shown once, with the
//! gateway it was issued for and that gateway's endpoints.

use portcullis_shared::api::agents::*;
use portcullis_shared::api::workspace::Permission;
use portcullis_shared::api::Empty;
use portcullis_shared::keys::{self, KeyKind};

use super::agents::{load, select_gateway};
use super::{unary, views, Access, Ctx, Operation};
use crate::error::{exists, invalid, precondition, ApiError, ApiResult};
use crate::store::{agents, now_ms, WriteTx};
use crate::validate;

pub fn operations() -> Vec<(&'static str, Operation)> {
    let manage = Access::Platform(Permission::AgentKeysManage);
    vec![
        ("CreateAgentKey", unary(manage, create)),
        ("EnsureAgentKey", unary(manage, ensure)),
        ("RotateAgentKey", unary(manage, rotate)),
        ("RevokeAgentKey", unary(manage, revoke)),
        (
            "ListAgentKeys",
            unary(Access::Platform(Permission::AgentsView), list),
        ),
    ]
}

fn key_view(row: &agents::KeyRow) -> AgentKey {
    AgentKey {
        key_id: row.id.clone(),
        agent_id: row.agent_id.clone(),
        name: row.name.clone(),
        prefix: row.prefix.clone(),
        gateway_id: row.gateway_id.clone(),
        created_at: views::ts(row.created_at),
        rotated_at: row.rotated_at.map(views::ts),
        bound_subject: row
            .bound_subject
            .as_deref()
            .and_then(|s| serde_json::from_str(s).ok()),
    }
}

/// The end user a key is to be bound to, checked and as stored (JSON). Only agents whose
/// act-as method is `bound` take their identity from the key.
fn bound_subject(
    agent: &agents::AgentRow,
    given: Option<&BoundSubject>,
) -> ApiResult<Option<String>> {
    let Some(b) = given else {
        return Ok(None);
    };
    if agent.actas_method.as_deref() != Some(ActAsMethod::Bound.as_str()) {
        return Err(invalid(format!(
            "bound_subject needs an agent whose actas_method is bound; '{}' has {}",
            agent.name,
            agent.actas_method.as_deref().unwrap_or("none set")
        )));
    }
    if b.sub.is_empty() || b.sub.len() > 256 {
        return Err(invalid("bound_subject.sub must be 1 to 256 characters"));
    }
    if b.email.len() > 320 {
        return Err(invalid("bound_subject.email is longer than 320 characters"));
    }
    if b.sub.chars().chain(b.email.chars()).any(char::is_control) {
        return Err(invalid(
            "bound_subject.sub and bound_subject.email must not contain control characters",
        ));
    }
    let subject = BoundSubject {
        sub: b.sub.clone(),
        email: b.email.clone(),
        groups: validate::string_list("bound_subject.groups", &b.groups, 256)?,
    };
    serde_json::to_string(&subject)
        .map(Some)
        .map_err(|e| ApiError::Internal(e.to_string()))
}

/// Issues a new token for a new or existing key row (`existing` rotates it).
async fn issue(
    tx: &mut WriteTx,
    ws: &str,
    agent: &agents::AgentRow,
    name: &str,
    gateway_id: Option<&str>,
    existing: Option<agents::KeyRow>,
    bound: Option<String>,
) -> ApiResult<IssuedAgentKey> {
    if agent.status == AgentStatus::Revoked.as_str() {
        return Err(precondition(format!(
            "agent '{}' is revoked; it can hold no keys",
            agent.name
        )));
    }
    let gateway_id = select_gateway(tx.conn(), ws, &agent.id, gateway_id, true).await?;
    let token = keys::generate(KeyKind::Agent);
    let now = now_ms();
    let row = match existing {
        Some(mut row) => {
            row.key_hash = keys::hash(&token);
            row.prefix = keys::display_prefix(&token);
            row.gateway_id = gateway_id.clone();
            row.rotated_at = Some(now);
            if bound.is_some() {
                row.bound_subject = bound;
            }
            agents::rotate_key(tx.conn(), &row).await?;
            row
        }
        None => {
            let row = agents::KeyRow {
                id: uuid::Uuid::new_v4().to_string(),
                workspace_id: ws.to_string(),
                agent_id: agent.id.clone(),
                name: name.to_string(),
                key_hash: keys::hash(&token),
                prefix: keys::display_prefix(&token),
                gateway_id: gateway_id.clone(),
                created_at: now,
                rotated_at: None,
                bound_subject: bound,
            };
            agents::insert_key(tx.conn(), &row).await?;
            agents::activate(tx.conn(), &agent.id, now).await?;
            row
        }
    };
    let endpoints = match &gateway_id {
        Some(g) => views::endpoints(tx.conn(), ws, g).await?,
        None => None,
    };
    Ok(IssuedAgentKey {
        key: key_view(&row),
        token,
        gateway_id,
        endpoints,
        created: None,
    })
}

async fn create(ctx: Ctx, req: CreateAgentKeyRequest) -> ApiResult<IssuedAgentKey> {
    let name = validate::name("name", &req.name)?;
    let ws = ctx.workspace_id().to_string();
    let mut tx = ctx.store().write(&ws).await?;
    let agent = load(tx.conn(), &ws, &req.agent_id).await?;
    if agents::key_by_name(tx.conn(), &agent.id, &name)
        .await?
        .is_some()
    {
        return Err(exists(format!(
            "agent '{}' already has a key named '{name}'",
            agent.name
        )));
    }
    let bound = bound_subject(&agent, req.bound_subject.as_ref())?;
    let issued = issue(
        &mut tx,
        &ws,
        &agent,
        &name,
        req.gateway_id.as_deref(),
        None,
        bound,
    )
    .await?;
    tx.commit().await?;
    tracing::info!(agent_id = %agent.id, key_id = %issued.key.key_id, "Agent key created.");
    Ok(issued)
}

/// Creates the key, or rotates it when it exists: safe to repeat.
async fn ensure(ctx: Ctx, req: CreateAgentKeyRequest) -> ApiResult<IssuedAgentKey> {
    let name = validate::name("name", &req.name)?;
    let ws = ctx.workspace_id().to_string();
    let mut tx = ctx.store().write(&ws).await?;
    let agent = load(tx.conn(), &ws, &req.agent_id).await?;
    let existing = agents::key_by_name(tx.conn(), &agent.id, &name).await?;
    let created = existing.is_none();
    let bound = bound_subject(&agent, req.bound_subject.as_ref())?;
    let mut issued = issue(
        &mut tx,
        &ws,
        &agent,
        &name,
        req.gateway_id.as_deref(),
        existing,
        bound,
    )
    .await?;
    issued.created = Some(created);
    tx.commit().await?;
    tracing::info!(agent_id = %agent.id, key_id = %issued.key.key_id, created, "Agent key ensured.");
    Ok(issued)
}

/// The agent's key of that name, or `not_found`.
async fn existing_key(
    tx: &mut WriteTx,
    agent: &agents::AgentRow,
    name: &str,
) -> ApiResult<agents::KeyRow> {
    agents::key_by_name(tx.conn(), &agent.id, name)
        .await?
        .ok_or_else(|| {
            ApiError::NotFound(format!(
                "agent '{}' has no key named '{}'",
                agent.name,
                validate::clip(name)
            ))
        })
}

/// Replaces the key's secret; the old token stops working at the next snapshot.
async fn rotate(ctx: Ctx, req: RotateAgentKeyRequest) -> ApiResult<IssuedAgentKey> {
    let ws = ctx.workspace_id().to_string();
    let mut tx = ctx.store().write(&ws).await?;
    let agent = load(tx.conn(), &ws, &req.agent_id).await?;
    let existing = existing_key(&mut tx, &agent, &req.key_name).await?;
    let name = existing.name.clone();
    let issued = issue(
        &mut tx,
        &ws,
        &agent,
        &name,
        req.gateway_id.as_deref(),
        Some(existing),
        None,
    )
    .await?;
    tx.commit().await?;
    tracing::info!(agent_id = %agent.id, key_id = %issued.key.key_id, "Agent key rotated.");
    Ok(issued)
}

async fn revoke(ctx: Ctx, req: RevokeAgentKeyRequest) -> ApiResult<Empty> {
    let ws = ctx.workspace_id().to_string();
    let mut tx = ctx.store().write(&ws).await?;
    let agent = load(tx.conn(), &ws, &req.agent_id).await?;
    let key = existing_key(&mut tx, &agent, &req.key_name).await?;
    agents::delete_key(tx.conn(), &key.id).await?;
    tx.commit().await?;
    tracing::info!(agent_id = %agent.id, key_id = %key.id, "Agent key revoked.");
    Ok(Empty {})
}

async fn list(ctx: Ctx, req: ListAgentKeysRequest) -> ApiResult<ListAgentKeysResponse> {
    let mut conn = ctx.store().read().await?;
    let agent = load(&mut conn, ctx.workspace_id(), &req.agent_id).await?;
    let keys = agents::keys(&mut conn, &agent.id)
        .await?
        .iter()
        .map(key_view)
        .collect();
    Ok(ListAgentKeysResponse { keys })
}
