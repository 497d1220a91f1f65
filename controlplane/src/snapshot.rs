//! Builds a workspace's gateway snapshot from the store, at one revision, in one read
//! transaction.

use std::collections::HashMap;

use portcullis_shared::api::actas::{ActAsStrength, ProviderMethod};
use portcullis_shared::api::agents::{ActAsMethod, AgentStatus};
use portcullis_shared::api::gateways::{GatewayState, MemberKind};
use portcullis_shared::api::pools::PoolStrategy;
use portcullis_shared::api::{AuthMethod, CredentialType};
use portcullis_shared::snapshot::*;

use crate::error::corrupt;
use crate::error::ApiResult;
use crate::rules;
use crate::store::credentials::{self, Owner};
use crate::store::ts;
use crate::store::{agents, bundles, gateways, models, now_ms, pools, tools, workspaces, Conn};

#[derive(Default)]
struct Members {
    models: Vec<String>,
    pools: Vec<String>,
    sources: Vec<String>,
    tools: Vec<SnapGatewayTool>,
}

pub struct Deployment<'a> {
    pub deployment_id: &'a str,
    pub workspace_id: &'a str,
    pub public_url: &'a str,
    /// The control plane's public URL: the authorization server of the gateways' `/mcp`.
    pub authorization_server: &'a str,
}

/// The snapshot: the workspace at its revision, then each section in turn.
pub async fn build(
    conn: &mut Conn,
    cipher: &portcullis_shared::seal::Cipher,
    d: &Deployment<'_>,
) -> ApiResult<Snapshot> {
    let ws = d.workspace_id;
    let workspace = workspaces::get_workspace(conn, ws)
        .await?
        .ok_or_else(|| corrupt("workspace"))?;
    let revision = u64::try_from(workspace.revision).map_err(|_| corrupt("workspace revision"))?;
    let snap_gateways = snap_gateways(conn, ws).await?;
    let snap_models = snap_models(conn, cipher, ws).await?;
    let snap_pools = snap_pools(conn, ws).await?;
    let snap_agents = snap_agents(conn, cipher, ws).await?;
    let snap_bundles = snap_bundles(conn, ws).await?;
    let snap_tools = tool_connections(conn, cipher, ws).await?;
    let snap_quotas = snap_quotas(conn, ws).await?;

    Ok(Snapshot {
        workspace_id: ws.to_string(),
        revision,
        deployment_id: d.deployment_id.to_string(),
        public_url: d.public_url.to_string(),
        generated_at: ts(now_ms()),
        gateways: snap_gateways,
        models: snap_models,
        pools: snap_pools,
        agents: snap_agents,
        bundles: snap_bundles,
        tools: snap_tools,
        quotas: snap_quotas,
        token_keys: crate::store::token_keys::published(conn, ws).await?,
        actas_min_method: ActAsStrength::parse(&workspace.actas_min_method)
            .ok_or_else(|| corrupt("workspace actas_min_method"))?,
        actas_providers: actas_providers(conn, cipher, ws).await?,
        filter_window_bytes: workspace.filter_window().0,
        filter_window_tokens: workspace.filter_window().1,
        guards: crate::store::guards::enabled(conn, ws)
            .await?
            .into_iter()
            .map(crate::guard_rows::snapshot_entry)
            .collect::<ApiResult<_>>()?,
        interactive: snap_interactive(conn, ws, d).await?,
    })
}

/// The gateways, each with its members (models, pools, whole tool connections, single tools)
/// and the agents granted it.
async fn snap_gateways(conn: &mut Conn, ws: &str) -> ApiResult<Vec<SnapGateway>> {
    let mut members: HashMap<String, Members> = HashMap::new();
    for m in gateways::all_members(conn, ws).await? {
        let entry = members.entry(m.gateway_id).or_default();
        match MemberKind::parse(&m.kind) {
            Some(MemberKind::Model) => entry.models.push(m.target_id),
            Some(MemberKind::Pool) => entry.pools.push(m.target_id),
            Some(MemberKind::ToolSource) => entry.sources.push(m.target_id),
            Some(MemberKind::Tool) => entry.tools.push(SnapGatewayTool {
                connection_id: m.target_id,
                tool: m.tool,
            }),
            None => {}
        }
    }
    let mut grants: HashMap<String, Vec<String>> = HashMap::new();
    for (gateway_id, agent_id) in gateways::all_grants(conn, ws).await? {
        grants.entry(gateway_id).or_default().push(agent_id);
    }
    let mut snap_gateways = Vec::new();
    for g in gateways::list(conn, ws).await? {
        let Members {
            models: model_ids,
            pools: pool_ids,
            sources: tool_sources,
            tools,
        } = members.remove(&g.id).unwrap_or_default();
        snap_gateways.push(SnapGateway {
            state: GatewayState::parse(&g.state).ok_or_else(|| corrupt("gateway state"))?,
            is_default: g.is_default != 0,
            all_agents: g.all_agents != 0,
            agent_ids: grants.remove(&g.id).unwrap_or_default(),
            model_ids,
            pool_ids,
            tool_sources,
            tools,
            gateway_id: g.id,
            name: g.name,
        });
    }
    Ok(snap_gateways)
}

/// The model connections, with their shared secrets opened and, for OAuth, which grant is
/// stored.
async fn snap_models(
    conn: &mut Conn,
    cipher: &portcullis_shared::seal::Cipher,
    ws: &str,
) -> ApiResult<Vec<SnapModel>> {
    let mut snap_models = Vec::new();
    for m in models::list(conn, ws).await? {
        let secrets = credentials::open_shared(conn, cipher, Owner::Model, &m.id).await?;
        let oauth_grant = match m.auth_method == AuthMethod::OAuth.as_str() {
            true => credentials::stored_since(conn, Owner::Model, &m.id, "").await?,
            false => None,
        };
        snap_models.push(SnapModel {
            oauth_grant,
            provider_config: serde_json::from_str(&m.provider_config)
                .map_err(|_| corrupt("provider_config"))?,
            auth_method: AuthMethod::parse(&m.auth_method).ok_or_else(|| corrupt("auth_method"))?,
            credential_type: CredentialType::parse(&m.credential_type)
                .ok_or_else(|| corrupt("credential_type"))?,
            secret_values: Secrets(secrets.unwrap_or_default()),
            attributes: serde_json::from_str(&m.attributes).map_err(|_| corrupt("attributes"))?,
            filter_window_bytes: u64::try_from(m.filter_window_bytes).unwrap_or_default(),
            filter_window_tokens: u64::try_from(m.filter_window_tokens).unwrap_or_default(),
            connection_id: m.id,
            name: m.name,
            provider: m.provider,
        });
    }
    Ok(snap_models)
}

/// The pools, each with its weighted, prioritized members.
async fn snap_pools(conn: &mut Conn, ws: &str) -> ApiResult<Vec<SnapPool>> {
    let mut pool_members: HashMap<String, Vec<SnapPoolMember>> = HashMap::new();
    for m in pools::all_members(conn, ws).await? {
        pool_members
            .entry(m.pool_id)
            .or_default()
            .push(SnapPoolMember {
                connection_id: m.connection_id,
                weight: u32::try_from(m.weight).unwrap_or(1),
                priority: u32::try_from(m.priority).unwrap_or_default(),
            });
    }
    let mut snap_pools = Vec::new();
    for p in pools::list(conn, ws).await? {
        snap_pools.push(SnapPool {
            strategy: PoolStrategy::parse(&p.strategy).ok_or_else(|| corrupt("pool strategy"))?,
            members: pool_members.remove(&p.id).unwrap_or_default(),
            pool_id: p.id,
            name: p.name,
        });
    }
    Ok(snap_pools)
}

/// The agents, each with its key hashes (and the keys bound to a device subject) and its
/// act-as settings, the HMAC secret opened.
async fn snap_agents(
    conn: &mut Conn,
    cipher: &portcullis_shared::seal::Cipher,
    ws: &str,
) -> ApiResult<Vec<SnapAgent>> {
    let mut key_hashes: HashMap<String, Vec<String>> = HashMap::new();
    let mut bound_keys: HashMap<String, Vec<SnapBoundKey>> = HashMap::new();
    for k in agents::all_keys(conn, ws).await? {
        if let Some(subject) = &k.bound_subject {
            bound_keys
                .entry(k.agent_id.clone())
                .or_default()
                .push(SnapBoundKey {
                    key_hash: k.key_hash.clone(),
                    subject: serde_json::from_str(subject)
                        .map_err(|_| corrupt("key bound_subject"))?,
                });
        }
        key_hashes.entry(k.agent_id).or_default().push(k.key_hash);
    }
    let mut snap_agents = Vec::new();
    for a in agents::all(conn, ws).await? {
        let hmac = credentials::open_shared(conn, cipher, Owner::AgentActAs, &a.id).await?;
        snap_agents.push(SnapAgent {
            status: AgentStatus::parse(&a.status).ok_or_else(|| corrupt("agent status"))?,
            key_hashes: key_hashes.remove(&a.id).unwrap_or_default(),
            token_ttl_secs: u64::try_from(a.token_ttl_secs).unwrap_or(600),
            actas_method: a.actas_method.as_deref().and_then(ActAsMethod::parse),
            actas_required: a.actas_required != 0,
            actas_provider_id: a.actas_provider_id,
            actas_oidc_url: a.actas_oidc_url,
            actas_hmac_secret: hmac.map(Secrets),
            bound_keys: bound_keys.remove(&a.id).unwrap_or_default(),
            agent_id: a.id,
            name: a.name,
            parent_id: a.parent_id,
        });
    }
    Ok(snap_agents)
}

/// The rule bundles: the managed ones compiled from the workspace's settings, then the
/// administrators' own.
async fn snap_bundles(conn: &mut Conn, ws: &str) -> ApiResult<Vec<SnapBundle>> {
    let mut snap_bundles: Vec<SnapBundle> = rules::managed_bundles(conn, ws)
        .await?
        .into_iter()
        .map(|b| SnapBundle {
            id_prefix: b.name.clone(),
            bundle_id: b.bundle_id,
            scope: b.scope,
            scope_id: b.scope_id,
            managed: true,
            policies: b.policies,
        })
        .collect();
    for row in bundles::list(conn, ws).await? {
        let b = rules::admin_view(row)?;
        snap_bundles.push(SnapBundle {
            id_prefix: rules::admin_prefix(&b.bundle_id),
            bundle_id: b.bundle_id,
            scope: b.scope,
            scope_id: b.scope_id,
            managed: false,
            policies: b.policies,
        });
    }
    Ok(snap_bundles)
}

/// The spend quotas.
async fn snap_quotas(conn: &mut Conn, ws: &str) -> ApiResult<Vec<SnapQuota>> {
    Ok(crate::store::quotas::list(conn, ws)
        .await?
        .iter()
        .map(|row| {
            let q = row.view();
            SnapQuota {
                quota_id: q.quota_id,
                name: q.name,
                subject_type: q.subject_type,
                subject_id: q.subject_id.unwrap_or_default(),
                subject_key: q.subject_key.unwrap_or_default(),
                pool_id: q.pool_id.unwrap_or_default(),
                per_caller: q.per_caller,
                window: q.window,
                limit_micros: q.limit_micros,
                enabled: q.enabled,
            }
        })
        .collect())
}

/// Interactive access: the authorization server of the gateways' `/mcp`, and the grants
/// revoked recently enough that access tokens of theirs may still be alive.
async fn snap_interactive(
    conn: &mut Conn,
    ws: &str,
    d: &Deployment<'_>,
) -> ApiResult<SnapInteractive> {
    Ok(SnapInteractive {
        authorization_server: d.authorization_server.to_string(),
        // Access tokens live at most an hour; a grant revoked longer ago has none left.
        revoked_grants: crate::store::interactive::revoked_since(
            conn,
            ws,
            now_ms() - (crate::config::MAX_INTERACTIVE_ACCESS_SECS + 300) * 1000,
        )
        .await?,
    })
}

async fn actas_providers(
    conn: &mut Conn,
    cipher: &portcullis_shared::seal::Cipher,
    ws: &str,
) -> ApiResult<Vec<SnapActAsProvider>> {
    let mut out = Vec::new();
    for p in crate::store::actas_providers::list(conn, ws).await? {
        let secret = credentials::open_shared(conn, cipher, Owner::ActAsProvider, &p.id).await?;
        out.push(SnapActAsProvider {
            method: ProviderMethod::parse(&p.method).ok_or_else(|| corrupt("provider method"))?,
            hmac_secret: secret.map(Secrets),
            provider_id: p.id,
            name: p.name,
            issuer: p.issuer,
            audience: p.audience,
            jwks_url: p.jwks_url,
            email_claim: p.email_claim,
            groups_claim: p.groups_claim,
            trust_unverified_email: p.trust_unverified_email != 0,
        });
    }
    Ok(out)
}

async fn tool_connections(
    conn: &mut Conn,
    cipher: &portcullis_shared::seal::Cipher,
    ws: &str,
) -> ApiResult<Vec<SnapTool>> {
    use portcullis_shared::api::tools::{HttpConfig, Protocol, StdioConfig, ToolStatus};
    let mut catalog: HashMap<String, Vec<SnapCatalogEntry>> = HashMap::new();
    for c in tools::workspace_catalog(conn, ws).await? {
        let status = ToolStatus::parse(&c.status).ok_or_else(|| corrupt("tool status"))?;
        catalog
            .entry(c.connection_id)
            .or_default()
            .push(SnapCatalogEntry {
                name: c.tool,
                status,
                message: c.message,
            });
    }
    let mut out = Vec::new();
    for t in tools::list(conn, ws).await? {
        let protocol = Protocol::parse(&t.protocol).ok_or_else(|| corrupt("protocol"))?;
        let rest = match protocol {
            Protocol::Rest => Some(
                serde_json::from_str(&t.protocol_config).map_err(|_| corrupt("protocol_config"))?,
            ),
            _ => None,
        };
        let (http, stdio) = match protocol {
            Protocol::StreamableHttp => (
                Some(
                    serde_json::from_str::<HttpConfig>(&t.protocol_config)
                        .map_err(|_| corrupt("protocol_config"))?,
                ),
                None,
            ),
            Protocol::Stdio => (
                None,
                Some(
                    serde_json::from_str::<StdioConfig>(&t.protocol_config)
                        .map_err(|_| corrupt("protocol_config"))?,
                ),
            ),
            Protocol::Rest => (None, None),
        };
        // An OAuth grant is not a header: gateways ask for its current access token. Which
        // grant it is (a new consent, none after a disconnect) is part of the fingerprint, so
        // gateways drop the old token and sessions at once; refreshes keep it.
        let (secrets, grant) = match t.auth_method == AuthMethod::OAuth.as_str() {
            true => (
                None,
                credentials::stored_since(conn, Owner::Tool, &t.id, "").await?,
            ),
            false => (
                credentials::open_shared(conn, cipher, Owner::Tool, &t.id).await?,
                None,
            ),
        };
        out.push(SnapTool {
            protocol,
            http,
            stdio,
            rest,
            auth_method: AuthMethod::parse(&t.auth_method).ok_or_else(|| corrupt("auth_method"))?,
            credential_type: CredentialType::parse(&t.credential_type)
                .ok_or_else(|| corrupt("credential_type"))?,
            secret_values: Secrets(secrets.unwrap_or_default()),
            write_tools: serde_json::from_str(&t.write_tools)
                .map_err(|_| corrupt("write_tools"))?,
            // Stored before classifications were checked, another shape classifies nothing.
            field_classifications: serde_json::from_str(&t.field_classifications)
                .unwrap_or_default(),
            catalog: catalog.remove(&t.id).unwrap_or_default(),
            fingerprint: match grant {
                Some(since) => format!("{}:{}:{since}", t.id, t.updated_at),
                None => format!("{}:{}", t.id, t.updated_at),
            },
            connection_id: t.id,
            name: t.name,
        });
    }
    Ok(out)
}
