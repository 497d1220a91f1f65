//! Compiling the workspace's tool connections (how each is reached: Streamable HTTP with its
//! headers, a stdio child with its environment, or a catalog adapter) and what each gateway
//! offers of them.

use std::collections::HashMap;
use std::sync::Arc;

use http::{HeaderName, HeaderValue};
use portcullis_shared::api::{AuthMethod, CredentialType};
use portcullis_shared::snapshot::{SnapGateway, SnapTool, Snapshot};

use super::table::{GatewayTools, ToolEntry, ToolTransport, ToolsByName};

/// The workspace's tool connections, by name and by id.
pub struct Tools<'a> {
    pub by_name: ToolsByName,
    by_id: HashMap<&'a str, Arc<ToolEntry>>,
}

/// Every tool connection of `snap`; each one's error in `errors`.
pub fn tools<'a>(snap: &'a Snapshot, errors: &mut Vec<String>) -> Tools<'a> {
    let mut by_name = HashMap::new();
    let mut by_id = HashMap::new();
    for t in &snap.tools {
        match tool_entry(t) {
            Ok(entry) => {
                let entry = Arc::new(entry);
                by_id.insert(t.connection_id.as_str(), Arc::clone(&entry));
                by_name.insert(t.name.clone(), entry);
            }
            Err(e) => errors.push(format!("tool {}: {e}", t.name)),
        }
    }
    Tools { by_name, by_id }
}

impl Tools<'_> {
    /// What gateway `g` offers: connections attached whole and single operations.
    pub fn gateway(&self, g: &SnapGateway, errors: &mut Vec<String>) -> GatewayTools {
        let mut connections: Vec<Arc<ToolEntry>> = Vec::new();
        for id in g
            .tool_sources
            .iter()
            .chain(g.tools.iter().map(|t| &t.connection_id))
        {
            match self.by_id.get(id.as_str()) {
                Some(t) if !connections.iter().any(|c| c.id == t.id) => {
                    connections.push(Arc::clone(t))
                }
                Some(_) => {}
                None => errors.push(format!(
                    "gateway {}: tool connection {id} is not in the snapshot",
                    g.name
                )),
            }
        }
        connections.sort_by(|a, b| a.name.cmp(&b.name));
        GatewayTools {
            sources: g.tool_sources.iter().cloned().collect(),
            members: g
                .tools
                .iter()
                .map(|t| (t.connection_id.clone(), t.tool.clone()))
                .collect(),
            connections,
        }
    }
}

fn tool_entry(t: &SnapTool) -> Result<ToolEntry, String> {
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
            let adapter = super::upstream::rest::RestAdapter::compile(installed, secrets)?;
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
        secret_values: crate::error::scrub_list(secrets.values()),
        classified: t
            .field_classifications
            .iter()
            .map(|(field, class)| (field.clone(), class.clone()))
            .collect(),
    })
}
