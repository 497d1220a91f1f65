//! The admin client: Connect unary JSON calls to the control plane with a platform key.

mod guards;
mod webhooks;

use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;

use crate::defaults::REQUEST_TIMEOUT;
use crate::error::ClientError;

#[derive(Clone)]
pub struct AdminClient {
    pub(crate) http: reqwest::Client,
    pub(crate) base_url: String,
    pub(crate) key: String,
}

impl std::fmt::Debug for AdminClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AdminClient")
            .field("base_url", &self.base_url)
            .finish_non_exhaustive()
    }
}

impl AdminClient {
    /// A client for the control plane at `base_url`, authenticated by a platform key.
    pub fn new(base_url: &str, platform_key: &str) -> Result<Self, ClientError> {
        let parsed = url::Url::parse(base_url).map_err(|e| {
            ClientError::Configuration(format!("control plane URL {base_url:?}: {e}"))
        })?;
        if !matches!(parsed.scheme(), "http" | "https") {
            return Err(ClientError::Configuration(format!(
                "control plane URL {base_url:?} must be http or https"
            )));
        }
        if platform_key.trim().is_empty() {
            return Err(ClientError::Configuration(
                "the platform key is empty".into(),
            ));
        }
        let http = reqwest::Client::builder()
            .timeout(REQUEST_TIMEOUT)
            .build()
            .map_err(|e| ClientError::Configuration(e.to_string()))?;
        Ok(Self {
            http,
            base_url: base_url.trim_end_matches('/').to_string(),
            key: platform_key.trim().to_string(),
        })
    }

    pub fn base_url(&self) -> &str {
        &self.base_url
    }

    /// `ExchangeAgentKey` on an agent's behalf (the platform key needs `agentkeys.manage`):
    /// a short-lived token for `agent_key` that `gateway_id`'s gateway accepts in its place.
    pub async fn exchange_agent_key(
        &self,
        agent_key: &str,
        gateway_id: Option<&str>,
    ) -> Result<portcullis_wire::api::agents::ExchangedToken, ClientError> {
        self.exchange(Some(agent_key), gateway_id).await
    }

    /// `ExchangeAgentKey` with this client's own key (`agent_key: None`, an agent key
    /// exchanging itself) or, with a platform key, the named one.
    pub(crate) async fn exchange(
        &self,
        agent_key: Option<&str>,
        gateway_id: Option<&str>,
    ) -> Result<portcullis_wire::api::agents::ExchangedToken, ClientError> {
        let request = portcullis_wire::api::agents::ExchangeAgentKeyRequest {
            workspace_id: None,
            gateway_id: gateway_id.map(str::to_string),
            agent_key: agent_key.map(str::to_string),
        };
        self.call(
            portcullis_wire::api::service::AGENTS,
            "ExchangeAgentKey",
            &request,
        )
        .await
    }

    /// Calls `<service>/<operation>` with a typed request and reply.
    pub async fn call<Req: Serialize + ?Sized, Resp: DeserializeOwned>(
        &self,
        service: &str,
        operation: &str,
        request: &Req,
    ) -> Result<Resp, ClientError> {
        let path = format!("{service}/{operation}");
        let value = self.call_value(service, operation, request).await?;
        serde_json::from_value(value).map_err(|e| ClientError::Decode {
            path,
            message: e.to_string(),
        })
    }

    /// Calls `<service>/<operation>` and returns the reply as JSON.
    pub async fn call_value<Req: Serialize + ?Sized>(
        &self,
        service: &str,
        operation: &str,
        request: &Req,
    ) -> Result<Value, ClientError> {
        let path = format!("{service}/{operation}");
        let url = format!("{}/{path}", self.base_url);
        let response = self
            .http
            .post(&url)
            .bearer_auth(&self.key)
            .json(request)
            .send()
            .await
            .map_err(|source| ClientError::Transport {
                url: self.base_url.clone(),
                source,
            })?;
        let status = response.status();
        let body = response
            .text()
            .await
            .map_err(|source| ClientError::Transport {
                url: self.base_url.clone(),
                source,
            })?;
        if !status.is_success() {
            return Err(ClientError::Admin {
                path,
                status_code: status.as_u16(),
                error: serde_json::from_str(&body).ok(),
                body,
            });
        }
        serde_json::from_str(&body).map_err(|e| ClientError::Decode {
            path,
            message: e.to_string(),
        })
    }
}
