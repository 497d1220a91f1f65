//! The connection a command runs with: the admin client, the workspace, the output mode, and
//! name-to-id resolution through the list operations.

use std::path::PathBuf;

use anyhow::{anyhow, bail, Context as _};
use portcullis_client::AdminClient;
use portcullis_shared::api::service::{AGENTS, MGMT};
use serde_json::Value;

use crate::args::Global;

pub struct Ctx {
    pub client: AdminClient,
    pub workspace: String,
    pub json: bool,
}

fn platform_key(global: &Global) -> anyhow::Result<String> {
    if let Some(key) = &global.key {
        return Ok(key.clone());
    }
    let file = global
        .key_file
        .clone()
        .unwrap_or_else(|| PathBuf::from(".portcullis/admin.key"));
    if global.key_file.is_none() && !file.exists() {
        bail!("no platform key: set PORTCULLIS_KEY (or --key / --key-file), or run where .portcullis/admin.key is");
    }
    let text =
        std::fs::read_to_string(&file).with_context(|| format!("reading {}", file.display()))?;
    Ok(text.trim().to_string())
}

/// What a name can refer to.
#[derive(Debug, Clone, Copy)]
pub enum Kind {
    Model,
    Pool,
    Gateway,
    Tool,
}

impl Ctx {
    pub async fn connect(global: &Global) -> anyhow::Result<Self> {
        let client = AdminClient::new(&global.control_url, &platform_key(global)?)?;
        let workspace = match &global.workspace {
            Some(w) => w.clone(),
            None => {
                let identity = client
                    .call_value(MGMT, "GetIdentity", &serde_json::json!({}))
                    .await?;
                identity["identity"]["workspace_id"]
                    .as_str()
                    .ok_or_else(|| anyhow!("GetIdentity returned no workspace_id"))?
                    .to_string()
            }
        };
        Ok(Self {
            client,
            workspace,
            json: global.json,
        })
    }

    /// Calls an operation with `workspace_id` added to the body.
    pub async fn call(
        &self,
        service: &str,
        operation: &str,
        mut body: Value,
    ) -> anyhow::Result<Value> {
        if let Value::Object(map) = &mut body {
            map.insert("workspace_id".into(), Value::String(self.workspace.clone()));
        }
        Ok(self.client.call_value(service, operation, &body).await?)
    }

    pub async fn mgmt(&self, operation: &str, body: Value) -> anyhow::Result<Value> {
        self.call(MGMT, operation, body).await
    }

    pub async fn agents(&self, operation: &str, body: Value) -> anyhow::Result<Value> {
        self.call(AGENTS, operation, body).await
    }

    /// Resolves a name to an id with the kind's list operation; a UUID passes through.
    pub async fn resolve(&self, kind: Kind, name_or_id: &str) -> anyhow::Result<String> {
        if uuid_like(name_or_id) {
            return Ok(name_or_id.to_string());
        }
        let (op, list, id) = match kind {
            Kind::Model => ("ListLLMModelConnections", "models", "connection_id"),
            Kind::Pool => ("ListLLMPools", "pools", "pool_id"),
            Kind::Gateway => ("ListGateways", "gateways", "gateway_id"),
            Kind::Tool => ("ListMCPServerConnections", "tools", "connection_id"),
        };
        let reply = self.mgmt(op, serde_json::json!({})).await?;
        reply[list]
            .as_array()
            .into_iter()
            .flatten()
            .find(|item| item["name"] == name_or_id)
            .and_then(|item| item[id].as_str())
            .map(str::to_string)
            .ok_or_else(|| {
                anyhow!(
                    "no {} named '{name_or_id}' in this workspace",
                    format!("{kind:?}").to_lowercase()
                )
            })
    }
}

pub fn uuid_like(s: &str) -> bool {
    s.len() == 36
        && s.chars().all(|c| c.is_ascii_hexdigit() || c == '-')
        && s.matches('-').count() == 4
}
