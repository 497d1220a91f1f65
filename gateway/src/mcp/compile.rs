//! Compiling the workspace's tool connections (how each is reached: Streamable HTTP with its
//! headers, a stdio child with its environment, or a catalog adapter) and what each gateway
//! offers of them.

use std::collections::HashMap;
use std::sync::Arc;

use http::{HeaderName, HeaderValue};
use portcullis_shared::api::tools::{HttpConfig, StdioConfig};
use portcullis_shared::api::{AuthMethod, CredentialType};
use portcullis_shared::snapshot::{SnapGateway, SnapTool, Snapshot};

use super::table::{GatewayTools, ToolEntry, ToolTransport, ToolsByName};

/// A connection's stored secret values, by name.
type Secrets = std::collections::BTreeMap<String, String>;

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
    use portcullis_shared::api::tools::Protocol;
    let secrets = &t.secret_values.0;
    // Each person's own key or grant, and a shared grant, are fetched when a call needs them
    // (`crate::peruser`).
    let mut unavailable = None;
    let transport = match (t.protocol, &t.http, &t.stdio) {
        (Protocol::StreamableHttp, Some(http), _) => {
            if http.url.is_empty() {
                unavailable = Some(format!("tool '{}' has no URL configured", t.name));
            }
            http_transport(http, secrets)?
        }
        (Protocol::Stdio, _, Some(stdio)) => {
            if stdio.command.trim().is_empty() {
                unavailable = Some(format!("tool '{}' has no command configured", t.name));
            }
            stdio_transport(stdio, secrets)
        }
        (Protocol::Rest, _, _) if t.rest.is_some() => {
            let installed = t.rest.clone().ok_or("no adapter")?;
            let adapter = super::upstream::rest::RestAdapter::compile(installed, secrets)?;
            ToolTransport::Rest {
                adapter: Arc::new(adapter),
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

/// Streamable HTTP: the URL (a placeholder when none is configured: calls are refused) and
/// every header sent — literal, secret, and each stored secret no header names, under its own
/// name — plus the headers that carry the caller's act-as assertion.
fn http_transport(http: &HttpConfig, secrets: &Secrets) -> Result<ToolTransport, String> {
    use portcullis_shared::api::tools::HeaderSource;
    let url = match http.url.as_str() {
        "" => reqwest::Url::parse("http://unconfigured.invalid/").map_err(|e| e.to_string())?,
        url => reqwest::Url::parse(url).map_err(|e| format!("url: {e}"))?,
    };
    let mut headers = Vec::new();
    let mut actas_headers = Vec::new();
    let mut referenced = std::collections::HashSet::new();
    for h in &http.headers {
        match h.source {
            HeaderSource::Literal => headers.push((
                header_name(&h.name)?,
                secret_value(h.value.as_deref().unwrap_or_default())?,
            )),
            HeaderSource::Secret => {
                let key = h.value.as_deref().unwrap_or_default();
                referenced.insert(key.to_string());
                let secret = secrets.get(key).ok_or_else(|| {
                    format!("header {} names a secret that is not stored", h.name)
                })?;
                headers.push((header_name(&h.name)?, secret_value(secret)?));
            }
            HeaderSource::Actas => actas_headers.push(header_name(&h.name)?),
        }
    }
    for (k, v) in secrets {
        if !referenced.contains(k) {
            headers.push((header_name(k)?, secret_value(v)?));
        }
    }
    Ok(ToolTransport::Http {
        url,
        headers,
        actas_headers,
    })
}

fn header_name(name: &str) -> Result<HeaderName, String> {
    HeaderName::from_bytes(name.as_bytes()).map_err(|_| format!("{name:?} is not a header name"))
}

/// A header value kept out of logs and debug output.
fn secret_value(v: &str) -> Result<HeaderValue, String> {
    let mut v = HeaderValue::from_str(v).map_err(|_| "a header value is not valid".to_string())?;
    v.set_sensitive(true);
    Ok(v)
}

/// A stdio child: its command and arguments, and its environment with the stored secrets.
fn stdio_transport(stdio: &StdioConfig, secrets: &Secrets) -> ToolTransport {
    let env = stdio
        .env
        .iter()
        .chain(secrets)
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    ToolTransport::Stdio {
        command: stdio.command.clone(),
        args: stdio.args.clone(),
        env,
        cwd: stdio.cwd.clone(),
    }
}
