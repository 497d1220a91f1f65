//! `Snapshot → compile() → Compiled`: everything a request needs, built once per revision off
//! the request path: key lookup, each rule bundle's policies validated against the schema
//! (shared across snapshots while its text stays the same), Cedar entities (shared with the
//! current snapshot where unchanged, [`super::entities`]), routing tables, upstream URLs and
//! credential headers. A snapshot with any error is refused whole.

use std::collections::HashMap;
use std::sync::Arc;

use http::{HeaderName, HeaderValue};
use portcullis_shared::api::rules::BundleScope;
use portcullis_shared::api::{AuthMethod, CredentialType};
use portcullis_shared::policy::{self, Kind};
use portcullis_shared::snapshot::{SnapActAsProvider, Snapshot};

use super::*;

pub fn compile(snap: &Snapshot, runtime: &Runtime) -> Result<Compiled, Vec<String>> {
    compile_from(snap, runtime, None)
}

/// Compiles a snapshot that follows `current`, sharing what has not changed with it.
pub fn compile_from(
    snap: &Snapshot,
    runtime: &Runtime,
    current: Option<&Compiled>,
) -> Result<Compiled, Vec<String>> {
    // The entities first: building and closing a store from nothing holds several maps over
    // every entity for a moment, and that moment is cheaper before the tables below exist.
    // Their errors are listed after the others.
    let mut entity_errors = Vec::new();
    let entities = super::entities::store(snap, current, &mut entity_errors);
    let mut errors = Vec::new();

    let mut models: HashMap<&str, Arc<ModelEntry>> = HashMap::new();
    for m in &snap.models {
        match super::model::model_entry(m, runtime) {
            Ok(entry) => {
                models.insert(&m.connection_id, Arc::new(entry));
            }
            Err(e) => errors.push(format!("model {}: {e}", m.name)),
        }
    }

    let mut pools: HashMap<&str, Arc<PoolEntry>> = HashMap::new();
    for p in &snap.pools {
        let mut members = Vec::new();
        for m in &p.members {
            match models.get(m.connection_id.as_str()) {
                Some(model) => members.push(PoolMember {
                    model: model.clone(),
                    weight: m.weight,
                    priority: m.priority,
                }),
                None => errors.push(format!(
                    "pool {}: member {} is not in the snapshot",
                    p.name, m.connection_id
                )),
            }
        }
        pools.insert(
            &p.pool_id,
            Arc::new(PoolEntry {
                id: p.pool_id.clone(),
                name: p.name.clone(),
                strategy: p.strategy,
                members,
                uid: policy::uid(Kind::Pool, &p.name),
                cursor: runtime.cursor(&p.pool_id),
            }),
        );
    }

    // Every bundle is parsed with its qualified ids, validated and split into grants and a
    // policy set (once while its text stays the same); a request is evaluated against the
    // workspace's bundles, the agent's and the gateway's, so no set is copied into another.
    let mut workspace: Vec<Arc<Rules>> = Vec::new();
    let mut by_agent: HashMap<&str, Vec<Arc<Rules>>> = HashMap::new();
    let mut by_gateway: HashMap<&str, Vec<Arc<Rules>>> = HashMap::new();
    let checked = runtime.checked_bundles(
        snap.bundles
            .iter()
            .map(|b| (b.id_prefix.as_str(), b.policies.as_str())),
    );
    for (b, set) in snap.bundles.iter().zip(checked) {
        let set = match set {
            Ok(set) => set,
            Err(e) => {
                errors.push(format!("rule bundle {}: {e}", b.bundle_id));
                continue;
            }
        };
        match (b.scope, b.scope_id.as_deref()) {
            (BundleScope::Workspace, _) => workspace.push(set),
            (BundleScope::Agent, Some(id)) => by_agent.entry(id).or_default().push(set),
            (BundleScope::Gateway, Some(id)) => by_gateway.entry(id).or_default().push(set),
            (scope, None) => errors.push(format!(
                "rule bundle {}: scope {} without scope id",
                b.bundle_id,
                scope.as_str()
            )),
        }
    }
    // Each bundle was validated on its own; together their ids must not collide.
    if let Some(id) = duplicate_id(
        workspace
            .iter()
            .chain(by_agent.values().flatten())
            .chain(by_gateway.values().flatten()),
    ) {
        errors.push(policy::PolicyError::DuplicateId(id).to_string());
    }

    let mut tools: HashMap<String, Arc<ToolEntry>> = HashMap::new();
    let mut tools_by_id: HashMap<&str, Arc<ToolEntry>> = HashMap::new();
    for t in &snap.tools {
        match tool_entry(t) {
            Ok(entry) => {
                let entry = Arc::new(entry);
                tools_by_id.insert(&t.connection_id, entry.clone());
                tools.insert(t.name.clone(), entry);
            }
            Err(e) => errors.push(format!("tool {}: {e}", t.name)),
        }
    }

    let mut guards = crate::guard::scope::Compiler::new(&snap.guards, &mut errors);
    let mut gateways = HashMap::new();
    let mut slots = 0;
    let mut next_slot = || {
        slots += 1;
        slots - 1
    };
    for g in &snap.gateways {
        let gateway_slot = next_slot();
        let mcp_slot = next_slot();
        let mut targets = HashMap::new();
        let mut target_names = Vec::new();
        for id in &g.pool_ids {
            match pools.get(id.as_str()) {
                Some(p) => {
                    target_names.push(p.name.clone());
                    targets.insert(p.name.clone(), (Target::Pool(p.clone()), next_slot()));
                }
                None => errors.push(format!(
                    "gateway {}: pool {id} is not in the snapshot",
                    g.name
                )),
            }
        }
        for id in &g.model_ids {
            match models.get(id.as_str()) {
                Some(m) => {
                    target_names.push(m.name.clone());
                    targets.insert(m.name.clone(), (Target::Model(m.clone()), next_slot()));
                }
                None => errors.push(format!(
                    "gateway {}: model {id} is not in the snapshot",
                    g.name
                )),
            }
        }
        target_names.sort();
        let policies = by_gateway.remove(g.gateway_id.as_str()).unwrap_or_default();
        let tool_sources: std::collections::HashSet<String> =
            g.tool_sources.iter().cloned().collect();
        let tool_members: std::collections::HashSet<(String, String)> = g
            .tools
            .iter()
            .map(|t| (t.connection_id.clone(), t.tool.clone()))
            .collect();
        let mut tool_connections: Vec<Arc<ToolEntry>> = Vec::new();
        for id in g
            .tool_sources
            .iter()
            .chain(g.tools.iter().map(|t| &t.connection_id))
        {
            match tools_by_id.get(id.as_str()) {
                Some(t) if !tool_connections.iter().any(|c| c.id == t.id) => {
                    tool_connections.push(t.clone())
                }
                Some(_) => {}
                None => errors.push(format!(
                    "gateway {}: tool connection {id} is not in the snapshot",
                    g.name
                )),
            }
        }
        tool_connections.sort_by(|a, b| a.name.cmp(&b.name));
        let guards = gateway_guards(&mut guards, g, &targets, &tool_connections, &mut errors);
        gateways.insert(
            g.gateway_id.clone(),
            GatewayEntry {
                id: g.gateway_id.clone(),
                name: g.name.clone(),
                state: g.state,
                uid: policy::uid(Kind::Gateway, &g.gateway_id),
                slot: gateway_slot,
                mcp_slot,
                tool_sources,
                tool_members,
                tool_connections,
                targets,
                target_names,
                policies,
                guards,
            },
        );
    }

    // Sized up front: with thousands of agents, growth by doubling leaves much unused.
    let keys_len = snap.agents.iter().map(|a| a.key_hashes.len()).sum();
    let mut keys = HashMap::with_capacity(keys_len);
    let mut agent_ids = HashMap::with_capacity(snap.agents.len());
    let mut agents = Vec::with_capacity(snap.agents.len());
    let providers: HashMap<&str, &SnapActAsProvider> = snap
        .actas_providers
        .iter()
        .map(|p| (p.provider_id.as_str(), p))
        .collect();
    for a in &snap.agents {
        let act_as = super::actas::resolve(a, &providers, runtime);
        let policies = by_agent.remove(a.agent_id.as_str()).unwrap_or_default();
        agent_ids.insert(a.agent_id.clone(), agents.len());
        for hash in &a.key_hashes {
            if keys.insert(hash.clone(), agents.len()).is_some() {
                errors.push(format!("agent {}: a key hash appears twice", a.name));
            }
        }
        agents.push(AgentEntry {
            id: a.agent_id.clone(),
            name: a.name.clone(),
            parent_id: a.parent_id.clone(),
            status: a.status,
            uid: policy::uid(Kind::Agent, &a.agent_id),
            policies,
            actas_method: a.actas_method,
            actas_required: a.actas_required,
            actas_hmac_secret: act_as.hmac_secret,
            actas_oidc: act_as.oidc,
            oidc_memory: Default::default(),
            bound_keys: act_as.bound_keys,
            memo: std::sync::OnceLock::new(),
            tool_memo: std::sync::RwLock::default(),
            identity_memo: Default::default(),
        });
    }

    errors.extend(entity_errors);
    if !errors.is_empty() {
        return Err(errors);
    }
    let quotas = snap
        .quotas
        .iter()
        .filter(|q| q.enabled)
        .map(|q| {
            Arc::new(crate::spend::QuotaEntry {
                id: q.quota_id.clone(),
                name: q.name.clone(),
                subject: q.subject_type,
                subject_id: q.subject_id.clone(),
                subject_key: q.subject_key.clone(),
                pool_id: q.pool_id.clone(),
                per_caller: q.per_caller,
                window: q.window,
                limit_micros: q.limit_micros,
            })
        })
        .collect();
    Ok(Compiled {
        revision: snap.revision,
        workspace_id: snap.workspace_id.clone(),
        quotas,
        gateways,
        tools,
        keys,
        agent_ids,
        token_keys: token_keys(&snap.token_keys, &mut errors),
        verified_tokens: Default::default(),
        agents,
        workspace_policies: workspace,
        entities,
        slots,
        actas_min: snap.actas_min_method,
        filter_window: super::model::filter_window(
            snap.filter_window_bytes,
            snap.filter_window_tokens,
        ),
        authorization_server: snap.interactive.authorization_server.clone(),
        revoked_grants: snap.interactive.revoked_grants.iter().cloned().collect(),
    })
}

/// A policy id that appears in more than one of these sets, if any.
fn duplicate_id<'a>(bundles: impl Iterator<Item = &'a Arc<Rules>>) -> Option<String> {
    let mut seen = std::collections::HashSet::new();
    bundles
        .flat_map(|rules| rules.ids())
        .find(|id| !seen.insert(*id))
        .map(ToString::to_string)
}

/// The guards of one gateway, for each model target and tool connection it offers.
fn gateway_guards(
    compiler: &mut crate::guard::scope::Compiler<'_>,
    g: &portcullis_shared::snapshot::SnapGateway,
    targets: &HashMap<String, (Target, usize)>,
    tools: &[Arc<ToolEntry>],
    errors: &mut Vec<String>,
) -> crate::guard::scope::GatewayGuards {
    use crate::guard::scope::ModelPlace;
    let places: Vec<ModelPlace<'_>> = targets
        .values()
        .map(|(target, _)| match target {
            Target::Model(m) => ModelPlace {
                target_id: &m.id,
                member_ids: vec![&m.id],
            },
            Target::Pool(p) => ModelPlace {
                target_id: &p.id,
                member_ids: p.members.iter().map(|m| m.model.id.as_str()).collect(),
            },
        })
        .collect();
    let tool_ids: Vec<&str> = tools.iter().map(|t| t.id.as_str()).collect();
    compiler.gateway(&g.gateway_id, &places, &tool_ids, errors)
}

/// The Ed25519 public keys of exchanged agent tokens, by `kid`.
fn token_keys(
    list: &[portcullis_shared::snapshot::SnapTokenKey],
    errors: &mut Vec<String>,
) -> HashMap<String, jsonwebtoken::DecodingKey> {
    let mut out = HashMap::with_capacity(list.len());
    for k in list {
        match jsonwebtoken::DecodingKey::from_ed_components(&k.x) {
            Ok(key) => {
                out.insert(k.kid.clone(), key);
            }
            Err(e) => errors.push(format!("token key {}: {e}", k.kid)),
        }
    }
    out
}

/// The strings to scrub from upstream replies: each secret value and, for `Bearer x` style
/// values, the token alone.
pub(super) fn scrub_list<'a>(values: impl Iterator<Item = &'a String>) -> Vec<String> {
    let mut out = Vec::new();
    for v in values {
        out.push(v.clone());
        if let Some((_, token)) = v.rsplit_once(' ') {
            out.push(token.to_string());
        }
    }
    out.retain(|v| v.len() >= 8);
    out
}

fn tool_entry(t: &portcullis_shared::snapshot::SnapTool) -> Result<ToolEntry, String> {
    use portcullis_shared::api::tools::{HeaderSource, Protocol};
    let secrets = &t.secret_values.0;
    // Each person's own key or grant, and a shared grant, are fetched when a call needs them
    // (`crate::peruser`).
    let mut unavailable = None;
    let transport = match (t.protocol, &t.http, &t.stdio) {
        (Protocol::StreamableHttp, Some(http), _) => {
            let url = if http.url.is_empty() {
                unavailable
                    .get_or_insert_with(|| format!("tool '{}' has no URL configured", t.name));
                reqwest::Url::parse("http://unconfigured.invalid/").map_err(|e| e.to_string())?
            } else {
                reqwest::Url::parse(&http.url).map_err(|e| format!("url: {e}"))?
            };
            let header = |name: &str| {
                HeaderName::from_bytes(name.as_bytes())
                    .map_err(|_| format!("{name:?} is not a header name"))
            };
            let value = |v: &str| {
                let mut v = HeaderValue::from_str(v)
                    .map_err(|_| "a header value is not valid".to_string())?;
                v.set_sensitive(true);
                Ok::<_, String>(v)
            };
            let mut headers = Vec::new();
            let mut actas_headers = Vec::new();
            let mut referenced = std::collections::HashSet::new();
            for h in &http.headers {
                match h.source {
                    HeaderSource::Literal => headers.push((
                        header(&h.name)?,
                        value(h.value.as_deref().unwrap_or_default())?,
                    )),
                    HeaderSource::Secret => {
                        let key = h.value.as_deref().unwrap_or_default();
                        referenced.insert(key.to_string());
                        let secret = secrets.get(key).ok_or_else(|| {
                            format!("header {} names a secret that is not stored", h.name)
                        })?;
                        headers.push((header(&h.name)?, value(secret)?));
                    }
                    HeaderSource::Actas => actas_headers.push(header(&h.name)?),
                }
            }
            // Secrets no header entry names are sent as headers of their own name.
            for (k, v) in secrets {
                if !referenced.contains(k) {
                    headers.push((header(k)?, value(v)?));
                }
            }
            ToolTransport::Http {
                url,
                headers,
                actas_headers,
            }
        }
        (Protocol::Stdio, _, Some(stdio)) => {
            if stdio.command.trim().is_empty() {
                unavailable
                    .get_or_insert_with(|| format!("tool '{}' has no command configured", t.name));
            }
            let mut env: Vec<(String, String)> = stdio
                .env
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            env.extend(secrets.iter().map(|(k, v)| (k.clone(), v.clone())));
            ToolTransport::Stdio {
                command: stdio.command.clone(),
                args: stdio.args.clone(),
                env,
                cwd: stdio.cwd.clone(),
            }
        }
        (Protocol::Rest, _, _) if t.rest.is_some() => {
            let installed = t.rest.clone().ok_or("no adapter")?;
            let adapter = crate::mcp::upstream::rest::RestAdapter::compile(installed, secrets)?;
            ToolTransport::Rest {
                adapter: std::sync::Arc::new(adapter),
            }
        }
        (protocol, _, _) => {
            return Err(format!(
                "protocol {} has no usable config",
                protocol.as_str()
            ))
        }
    };
    Ok(ToolEntry {
        id: t.connection_id.clone(),
        name: t.name.clone(),
        per_user: t.auth_method != AuthMethod::None && t.credential_type == CredentialType::PerUser,
        shared_oauth: (t.auth_method, t.credential_type)
            == (AuthMethod::OAuth, CredentialType::Shared),
        transport,
        catalog: t
            .catalog
            .iter()
            .map(|c| (c.name.clone(), (c.status, c.message.clone())))
            .collect(),
        fingerprint: t.fingerprint.clone(),
        unavailable,
        secret_values: scrub_list(secrets.values()),
        classified: t
            .field_classifications
            .iter()
            .map(|(field, class)| (field.clone(), class.clone()))
            .collect(),
    })
}
