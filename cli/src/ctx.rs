//! The connection a command runs with: the admin client, the workspace (learned from
//! `GetIdentity` when not given), the output mode, and name-to-id resolution.

use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Context as _};
use portcullis_client::AdminClient;
use portcullis_shared::api::agents::{GetAgentRequest, GetAgentResponse};
use portcullis_shared::api::gateways::{ListGatewaysRequest, ListGatewaysResponse};
use portcullis_shared::api::models::{
    ListLLMModelConnectionsRequest, ListLLMModelConnectionsResponse,
};
use portcullis_shared::api::pools::{ListLLMPoolsRequest, ListLLMPoolsResponse};
use portcullis_shared::api::service::{AGENTS, MGMT};
use portcullis_shared::api::tools::{
    ListMCPServerConnectionsRequest, ListMCPServerConnectionsResponse,
};
use portcullis_shared::api::workspace::IdentityResponse;
use portcullis_shared::api::Empty;
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;
use tokio::sync::OnceCell;

use crate::args::Global;
use crate::output;

/// The key file `portcullis up` writes, read when no key is given.
const DEFAULT_KEY_FILE: &str = ".portcullis/admin.key";

/// A reply: the JSON as received (what `--json` prints) and its typed form.
pub struct Reply<T> {
    pub raw: Value,
    pub body: T,
}

pub struct Ctx {
    pub client: AdminClient,
    pub json: bool,
    workspace: OnceCell<String>,
}

/// The platform key: `--key`/`PORTCULLIS_KEY`, else `--key-file`/`PORTCULLIS_KEY_FILE`, else
/// `.portcullis/admin.key` when it exists.
fn platform_key(global: &Global) -> anyhow::Result<String> {
    if let Some(key) = &global.key {
        return Ok(key.clone());
    }
    let file = match &global.key_file {
        Some(file) => file.clone(),
        None if Path::new(DEFAULT_KEY_FILE).exists() => PathBuf::from(DEFAULT_KEY_FILE),
        None => bail!(
            "no platform key: set PORTCULLIS_KEY (or pass --key or --key-file), or run where \
             {DEFAULT_KEY_FILE} is"
        ),
    };
    let text = std::fs::read_to_string(&file)
        .with_context(|| format!("reading the platform key file {}", file.display()))?;
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
    pub fn connect(global: &Global) -> anyhow::Result<Self> {
        let client = AdminClient::new(&global.control_url, &platform_key(global)?)?;
        let workspace = OnceCell::new_with(global.workspace.clone());
        Ok(Self {
            client,
            json: global.json,
            workspace,
        })
    }

    /// The workspace every request names: `--workspace`, else the key's own.
    pub async fn ws(&self) -> anyhow::Result<String> {
        let ws = self
            .workspace
            .get_or_try_init(|| async {
                let reply: IdentityResponse =
                    self.client.call(MGMT, "GetIdentity", &Empty {}).await?;
                Ok::<_, anyhow::Error>(reply.identity.workspace_id)
            })
            .await?;
        Ok(ws.clone())
    }

    /// The workspace given with `--workspace`, if any (before any lookup).
    pub fn given_workspace(&self) -> Option<String> {
        self.workspace.get().cloned()
    }

    /// Calls an operation with a typed request; keeps the raw reply for `--json`.
    pub async fn send<Req: Serialize, Resp: DeserializeOwned>(
        &self,
        service: &str,
        operation: &str,
        request: &Req,
    ) -> anyhow::Result<Reply<Resp>> {
        let raw = self.client.call_value(service, operation, request).await?;
        let body = serde_json::from_value(raw.clone())
            .map_err(|e| anyhow!("{service}/{operation}: unexpected reply: {e}"))?;
        Ok(Reply { raw, body })
    }

    /// Prints a reply: the raw JSON with `--json`, otherwise what `summary` prints.
    pub fn print<T>(&self, reply: &Reply<T>, summary: impl FnOnce(&T)) {
        if self.json {
            output::json(&reply.raw);
        } else {
            summary(&reply.body);
        }
    }

    /// Prints a reply, or with no `--json` a one-line confirmation.
    pub fn done<T>(&self, reply: &Reply<T>, message: &str) {
        self.print(reply, |_| output::line(message));
    }

    /// Calls an operation that replies with nothing (a delete, a removal) and prints the reply,
    /// or with no `--json` the one-line confirmation `message`.
    pub async fn send_done<Req: Serialize>(
        &self,
        service: &str,
        operation: &str,
        request: &Req,
        message: &str,
    ) -> anyhow::Result<()> {
        let reply: Reply<Empty> = self.send(service, operation, request).await?;
        self.done(&reply, message);
        Ok(())
    }

    /// Calls an operation with a JSON body, `workspace_id` added.
    pub async fn call(
        &self,
        service: &str,
        operation: &str,
        mut body: Value,
    ) -> anyhow::Result<Value> {
        if let Value::Object(map) = &mut body {
            map.insert("workspace_id".into(), Value::String(self.ws().await?));
        }
        Ok(self.client.call_value(service, operation, &body).await?)
    }

    /// [`Ctx::call`] on the management service.
    pub async fn mgmt(&self, operation: &str, body: Value) -> anyhow::Result<Value> {
        self.call(MGMT, operation, body).await
    }

    /// Resolves a name to an id with the kind's list operation; a UUID passes through.
    pub async fn resolve(&self, kind: Kind, name_or_id: &str) -> anyhow::Result<String> {
        if uuid_like(name_or_id) {
            return Ok(name_or_id.to_string());
        }
        let workspace_id = self.ws().await?;
        let pairs: Vec<(String, String)> = match kind {
            Kind::Model => {
                let req = ListLLMModelConnectionsRequest { workspace_id };
                let r: Reply<ListLLMModelConnectionsResponse> =
                    self.send(MGMT, "ListLLMModelConnections", &req).await?;
                r.body
                    .models
                    .into_iter()
                    .map(|m| (m.name, m.connection_id))
                    .collect()
            }
            Kind::Pool => {
                let req = ListLLMPoolsRequest { workspace_id };
                let r: Reply<ListLLMPoolsResponse> = self.send(MGMT, "ListLLMPools", &req).await?;
                r.body
                    .pools
                    .into_iter()
                    .map(|p| (p.name, p.pool_id))
                    .collect()
            }
            Kind::Gateway => {
                let req = ListGatewaysRequest { workspace_id };
                let r: Reply<ListGatewaysResponse> = self.send(MGMT, "ListGateways", &req).await?;
                r.body
                    .gateways
                    .into_iter()
                    .map(|g| (g.name, g.gateway_id))
                    .collect()
            }
            Kind::Tool => {
                let req = ListMCPServerConnectionsRequest { workspace_id };
                let r: Reply<ListMCPServerConnectionsResponse> =
                    self.send(MGMT, "ListMCPServerConnections", &req).await?;
                r.body
                    .tools
                    .into_iter()
                    .map(|t| (t.name, t.connection_id))
                    .collect()
            }
        };
        pairs
            .into_iter()
            .find(|(name, _)| name == name_or_id)
            .map(|(_, id)| id)
            .ok_or_else(|| {
                anyhow!(
                    "no {} named '{name_or_id}' in this workspace",
                    format!("{kind:?}").to_lowercase()
                )
            })
    }

    /// An agent's id from its id or name (the agent service accepts either, but some fields,
    /// such as a rule bundle's scope_id, are compared as ids).
    pub async fn agent_id(&self, name_or_id: &str) -> anyhow::Result<String> {
        if uuid_like(name_or_id) {
            return Ok(name_or_id.to_string());
        }
        let req = GetAgentRequest {
            workspace_id: self.ws().await?,
            agent_id: name_or_id.to_string(),
            gateway_id: None,
        };
        let r: Reply<GetAgentResponse> = self.send(AGENTS, "GetAgent", &req).await?;
        Ok(r.body.agent.agent_id)
    }

    /// Resolves an optional gateway name or id.
    pub async fn gateway_opt(&self, g: Option<String>) -> anyhow::Result<Option<String>> {
        match g {
            Some(g) => Ok(Some(self.resolve(Kind::Gateway, &g).await?)),
            None => Ok(None),
        }
    }
}

/// Whether `s` has the shape of a UUID (ids pass through resolution untouched).
pub fn uuid_like(s: &str) -> bool {
    uuid::Uuid::try_parse(s).is_ok() && s.len() == 36
}

#[cfg(test)]
mod tests {
    use super::uuid_like;

    #[test]
    fn uuids_pass_names_do_not() {
        assert!(uuid_like("0b3c6a4e-1f2d-4c5b-9a8e-7d6c5b4a3f21"));
        assert!(!uuid_like("default"));
        assert!(!uuid_like("0b3c6a4e1f2d4c5b9a8e7d6c5b4a3f21"));
    }
}
