//! Turning stored rows into the API's resource shapes (never with secret values).

use std::collections::BTreeMap;

use portcullis_shared::api::gateways::{Gateway, GatewayMember, GatewayState, MemberKind};
use portcullis_shared::api::models::ModelConnection;
use portcullis_shared::api::pools::{LLMPool, PoolMember, PoolStrategy};
use portcullis_shared::api::{AuthMethod, CredentialType, Endpoints, Ref};
use serde_json::{Map, Value};

use crate::error::ApiResult;
use crate::store::credentials::{self, Owner};
use crate::store::{gateways, models, now_ms, oauth_flows, pools, tools, workspaces, Conn};

pub use crate::error::corrupt;
pub use crate::store::ts;

fn refs(rows: Vec<(String, String)>) -> Vec<Ref> {
    rows.into_iter()
        .map(|(id, name)| Ref { id, name })
        .collect()
}

/// How a stored model or tool connection authenticates upstream: its auth method and
/// credential type.
pub fn auth_pair(
    auth_method: &str,
    credential_type: &str,
) -> ApiResult<(AuthMethod, CredentialType)> {
    Ok((
        AuthMethod::parse(auth_method).ok_or_else(|| corrupt("auth_method"))?,
        CredentialType::parse(credential_type).ok_or_else(|| corrupt("credential_type"))?,
    ))
}

/// Stored OAuth client settings as shown: never the secret, only whether one is stored.
async fn auth_config(
    conn: &mut Conn,
    stored: &str,
    client: Owner,
    id: &str,
) -> ApiResult<Map<String, Value>> {
    let mut settings: Map<String, Value> =
        serde_json::from_str(stored).map_err(|_| corrupt("auth_config"))?;
    if credentials::shared_keys(conn, client, id).await?.is_some() {
        settings.insert("client_secret_set".into(), Value::Bool(true));
    }
    Ok(settings)
}

/// A shared OAuth connection's state: connected with a grant, consent pending while a
/// connect link or an authorization request is outstanding, else disconnected.
async fn oauth_state(
    conn: &mut Conn,
    id: &str,
    auth: (AuthMethod, CredentialType),
    has_credential: bool,
) -> ApiResult<Option<String>> {
    if auth != (AuthMethod::OAuth, CredentialType::Shared) {
        return Ok(None);
    }
    let state = if has_credential {
        "connected"
    } else if oauth_flows::shared_pending(conn, id, now_ms()).await? {
        "consent_pending"
    } else {
        "disconnected"
    };
    Ok(Some(state.to_string()))
}

pub async fn model(conn: &mut Conn, row: &models::ModelRow) -> ApiResult<ModelConnection> {
    let provider_config: Map<String, Value> =
        serde_json::from_str(&row.provider_config).map_err(|_| corrupt("provider_config"))?;
    let attributes: BTreeMap<String, String> =
        serde_json::from_str(&row.attributes).map_err(|_| corrupt("attributes"))?;
    let (auth_method, credential_type) = auth_pair(&row.auth_method, &row.credential_type)?;
    let secret_keys = credentials::shared_keys(conn, Owner::Model, &row.id).await?;
    let has_credential = secret_keys.as_ref().is_some_and(|k| !k.is_empty());
    let auth_config = auth_config(conn, &row.auth_config, Owner::ModelOAuthClient, &row.id).await?;
    let oauth_state = oauth_state(
        conn,
        &row.id,
        (auth_method, credential_type),
        has_credential,
    )
    .await?;
    Ok(ModelConnection {
        connection_id: row.id.clone(),
        workspace_id: row.workspace_id.clone(),
        name: row.name.clone(),
        provider: row.provider.clone(),
        provider_config,
        auth_method,
        credential_type,
        secret_keys: if auth_method == AuthMethod::ApiKey {
            secret_keys.unwrap_or_default()
        } else {
            Vec::new()
        },
        has_credential,
        uses_gateway_identity: auth_method == AuthMethod::None
            && portcullis_shared::provider::find(&row.provider)
                .is_some_and(|p| p.uses_cloud_identity()),
        attributes,
        filter_window_bytes: u64::try_from(row.filter_window_bytes).unwrap_or_default(),
        filter_window_tokens: u64::try_from(row.filter_window_tokens).unwrap_or_default(),
        gateways: refs(gateways::gateways_of_target(conn, &row.id).await?),
        pools: refs(pools::pools_of_model(conn, &row.id).await?),
        oauth_state,
        auth_config,
        created_at: ts(row.created_at),
        updated_at: ts(row.updated_at),
    })
}

pub async fn pool(conn: &mut Conn, row: &pools::PoolRow) -> ApiResult<LLMPool> {
    let members = pools::members(conn, &row.id)
        .await?
        .into_iter()
        .map(|m| PoolMember {
            connection_id: m.connection_id,
            name: m.name,
            weight: u32::try_from(m.weight).unwrap_or(1),
            priority: u32::try_from(m.priority).unwrap_or_default(),
        })
        .collect();
    Ok(LLMPool {
        pool_id: row.id.clone(),
        workspace_id: row.workspace_id.clone(),
        name: row.name.clone(),
        strategy: PoolStrategy::parse(&row.strategy).ok_or_else(|| corrupt("pool strategy"))?,
        members,
        gateways: refs(gateways::gateways_of_target(conn, &row.id).await?),
        created_at: ts(row.created_at),
        updated_at: ts(row.updated_at),
    })
}

/// The endpoints of a gateway, when the workspace has a deployment with a public URL.
pub async fn endpoints(
    conn: &mut Conn,
    workspace_id: &str,
    gateway_id: &str,
) -> ApiResult<Option<Endpoints>> {
    let base = workspaces::gateway_public_base(conn, workspace_id).await?;
    Ok(base.map(|b| Endpoints::for_gateway(&b, gateway_id)))
}

pub async fn gateway(conn: &mut Conn, row: &gateways::GatewayRow) -> ApiResult<Gateway> {
    let mut members = Vec::new();
    for m in gateways::members(conn, &row.id).await? {
        let kind = MemberKind::parse(&m.kind).ok_or_else(|| corrupt("gateway member kind"))?;
        let member = match kind {
            MemberKind::Pool => {
                let name = pools::get(conn, &row.workspace_id, &m.target_id)
                    .await?
                    .map(|p| p.name)
                    .unwrap_or_default();
                GatewayMember {
                    kind,
                    connection_id: None,
                    pool_id: Some(m.target_id),
                    tool: None,
                    name,
                }
            }
            MemberKind::Model => {
                let name = models::get(conn, &row.workspace_id, &m.target_id)
                    .await?
                    .map(|c| c.name)
                    .unwrap_or_default();
                GatewayMember {
                    kind,
                    connection_id: Some(m.target_id),
                    pool_id: None,
                    tool: None,
                    name,
                }
            }
            MemberKind::Tool | MemberKind::ToolSource => {
                let name = tools::get(conn, &row.workspace_id, &m.target_id)
                    .await?
                    .map(|t| t.name)
                    .unwrap_or_default();
                GatewayMember {
                    kind,
                    connection_id: Some(m.target_id),
                    pool_id: None,
                    tool: (!m.tool.is_empty()).then_some(m.tool),
                    name,
                }
            }
        };
        members.push(member);
    }
    Ok(Gateway {
        gateway_id: row.id.clone(),
        workspace_id: row.workspace_id.clone(),
        name: row.name.clone(),
        description: row.description.clone(),
        state: GatewayState::parse(&row.state).ok_or_else(|| corrupt("gateway state"))?,
        is_default: row.is_default != 0,
        members,
        agent_ids: gateways::granted_agents(conn, &row.id).await?,
        all_agents: row.all_agents != 0,
        endpoints: endpoints(conn, &row.workspace_id, &row.id).await?,
        created_at: ts(row.created_at),
        updated_at: ts(row.updated_at),
    })
}

pub async fn tool(
    conn: &mut Conn,
    row: &tools::ToolRow,
) -> ApiResult<portcullis_shared::api::tools::ToolConnection> {
    use portcullis_shared::api::tools::{Protocol, ToolConnection};
    let (auth_method, credential_type) = auth_pair(&row.auth_method, &row.credential_type)?;
    let secret_keys = credentials::shared_keys(conn, Owner::Tool, &row.id).await?;
    let has_credential = secret_keys.as_ref().is_some_and(|k| !k.is_empty());
    let auth_config = auth_config(conn, &row.auth_config, Owner::ToolOAuthClient, &row.id).await?;
    let oauth_state = oauth_state(
        conn,
        &row.id,
        (auth_method, credential_type),
        has_credential,
    )
    .await?;
    let tool_count = tools::catalog(conn, &row.id).await?.len() as u64;
    Ok(ToolConnection {
        connection_id: row.id.clone(),
        workspace_id: row.workspace_id.clone(),
        name: row.name.clone(),
        protocol: Protocol::parse(&row.protocol).ok_or_else(|| corrupt("protocol"))?,
        protocol_config: protocol_config_view(&row.protocol_config)?,
        auth_method,
        credential_type,
        auth_config,
        secret_keys: if auth_method == AuthMethod::ApiKey {
            secret_keys.unwrap_or_default()
        } else {
            Vec::new()
        },
        has_credential,
        field_classifications: serde_json::from_str(&row.field_classifications)
            .map_err(|_| corrupt("field_classifications"))?,
        write_tools: serde_json::from_str(&row.write_tools).map_err(|_| corrupt("write_tools"))?,
        gateways: refs(gateways::gateways_of_target(conn, &row.id).await?),
        tool_count,
        oauth_state,
        created_at: ts(row.created_at),
        updated_at: ts(row.updated_at),
    })
}

pub fn quota(row: &crate::store::quotas::QuotaRow) -> portcullis_shared::api::quotas::LLMQuota {
    row.view()
}

/// A tool's protocol config as shown: stored as it is, except that an installed adapter shows
/// its slug, version, base URL, filter and offered operations, not the whole definition.
fn protocol_config_view(stored: &str) -> ApiResult<Value> {
    let mut value: Value = serde_json::from_str(stored).map_err(|_| corrupt("protocol_config"))?;
    if let Ok(installed) =
        serde_json::from_value::<portcullis_shared::adapter::Installed>(value.clone())
    {
        let operations: Vec<&str> = installed.operations().map(|o| o.name.as_str()).collect();
        value = serde_json::json!({
            "slug": installed.slug,
            "version": installed.version,
            "title": installed.definition.title,
            "base_url": installed.base(),
            "tool_filter": installed.tool_filter,
            "operations": operations,
        });
    }
    Ok(value)
}
