//! [`AgentRuntime`]: an agent's session with its gateway, for processes that run long.
//! `start` checks that the gateway is ready and trades the agent key for a short-lived token
//! (`ExchangeAgentKey`), which a background task renews before it expires, so the key itself
//! never travels with each call; `client` hands out an [`AgentClient`] on the current token;
//! `shutdown` stops the renewal. Using the runtime out of order fails with the spec's
//! lifecycle classes: not initialized (before `start`), already started, shut down.
//!
//! The runtime also keeps a snapshot of its agent's policy: the tools and models its gateway
//! lets it use (`tools/list` and `GET …/v1/models`, both filtered by the agent's rules),
//! loaded at `start` and refreshed every [`crate::defaults::POLICY_SYNC_INTERVAL`], so an
//! agent can ask before it plans a call (`check_tool`, `check_model`): denied, or no bundle
//! loaded when it has none younger than three intervals. The gateway still decides each call.

use std::collections::HashSet;
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use tokio::sync::Mutex;

use crate::agent::refusal::{classify, CallIds};
use crate::agent::{gateway_id_of, AgentClient};
use crate::error::ClientError;

enum State {
    New,
    Running {
        client: AgentClient,
        renewal: tokio::task::JoinHandle<()>,
        sync: tokio::task::JoinHandle<()>,
    },
    Stopped,
}

/// What the gateway lets this agent use, and when that was learned.
struct Policy {
    tools: HashSet<String>,
    models: HashSet<String>,
    loaded: Instant,
}

type Snapshot = Arc<RwLock<Option<Policy>>>;

/// What the runtime needs to (re)authenticate.
#[derive(Clone)]
struct Identity {
    control_plane_url: String,
    gateway_url: String,
    gateway_id: String,
    key: String,
}

pub struct AgentRuntime {
    identity: Identity,
    state: Arc<Mutex<State>>,
    policy: Snapshot,
    sync_interval: Duration,
}

impl std::fmt::Debug for AgentRuntime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AgentRuntime")
            .field("gateway_url", &self.identity.gateway_url)
            .finish_non_exhaustive()
    }
}

impl AgentRuntime {
    /// A runtime for the agent whose key is `agent_key`, on the gateway at `gateway_url`
    /// (`{base}/gateways/{gateway_id}`), exchanging the key at `control_plane_url`.
    pub fn new(
        control_plane_url: &str,
        gateway_url: &str,
        agent_key: &str,
    ) -> Result<Self, ClientError> {
        let gateway_id = gateway_id_of(gateway_url)?;
        let parsed = url::Url::parse(control_plane_url)
            .map_err(|e| ClientError::Configuration(format!("control plane URL: {e}")))?;
        if !matches!(parsed.scheme(), "http" | "https") {
            return Err(ClientError::Configuration(
                "the control plane URL must be http(s)".into(),
            ));
        }
        if agent_key.trim().is_empty() {
            return Err(ClientError::Configuration("the agent key is empty".into()));
        }
        Ok(Self {
            identity: Identity {
                control_plane_url: control_plane_url.trim_end_matches('/').to_string(),
                gateway_url: gateway_url.trim_end_matches('/').to_string(),
                gateway_id,
                key: agent_key.trim().to_string(),
            },
            state: Arc::new(Mutex::new(State::New)),
            policy: Snapshot::default(),
            sync_interval: crate::defaults::POLICY_SYNC_INTERVAL,
        })
    }

    /// How often the policy snapshot is refreshed (30 s by default; at least 100 ms).
    pub fn with_policy_sync_interval(mut self, interval: Duration) -> Self {
        self.sync_interval = interval.max(Duration::from_millis(100));
        self
    }

    /// Checks the gateway is ready, obtains the first token and starts renewing it.
    pub async fn start(&self) -> Result<(), ClientError> {
        let mut state = self.state.lock().await;
        match &*state {
            State::Running { .. } => return Err(ClientError::AlreadyStarted),
            State::Stopped => return Err(ClientError::Shutdown),
            State::New => {}
        }
        ready(&self.identity).await?;
        let (client, ttl) = self.identity.session().await?;
        refresh(&client, &self.policy).await;
        let renewal = tokio::spawn(renew(self.identity.clone(), self.state.clone(), ttl));
        let sync = tokio::spawn(sync(
            self.state.clone(),
            self.policy.clone(),
            self.sync_interval,
        ));
        *state = State::Running {
            client,
            renewal,
            sync,
        };
        Ok(())
    }

    /// Whether the policy snapshot lets this agent call the tool `connection/tool`.
    pub async fn check_tool(&self, name: &str) -> Result<(), ClientError> {
        self.check(name, "tool", |p| &p.tools).await
    }

    /// Whether the policy snapshot lets this agent call the model or pool `model`.
    pub async fn check_model(&self, model: &str) -> Result<(), ClientError> {
        self.check(model, "model", |p| &p.models).await
    }

    async fn check(
        &self,
        name: &str,
        kind: &str,
        offered: impl Fn(&Policy) -> &HashSet<String>,
    ) -> Result<(), ClientError> {
        match &*self.state.lock().await {
            State::New => return Err(ClientError::NotInitialized),
            State::Stopped => return Err(ClientError::Shutdown),
            State::Running { .. } => {}
        }
        let policy = self.policy.read().unwrap_or_else(|e| e.into_inner());
        let current = policy
            .as_ref()
            .filter(|p| p.loaded.elapsed() < self.sync_interval * 3)
            .ok_or(ClientError::NoBundleLoaded)?;
        if offered(current).contains(name) {
            return Ok(());
        }
        Err(ClientError::Denied {
            resource: name.to_string(),
            reason: format!("not a {kind} this agent's gateway lets it use"),
        })
    }

    /// A client on the current token.
    pub async fn client(&self) -> Result<AgentClient, ClientError> {
        match &*self.state.lock().await {
            State::New => Err(ClientError::NotInitialized),
            State::Running { client, .. } => Ok(client.clone()),
            State::Stopped => Err(ClientError::Shutdown),
        }
    }

    /// Stops renewing the token; the runtime cannot be started again.
    pub async fn shutdown(&self) -> Result<(), ClientError> {
        let mut state = self.state.lock().await;
        match std::mem::replace(&mut *state, State::Stopped) {
            State::Running { renewal, sync, .. } => {
                renewal.abort();
                sync.abort();
                Ok(())
            }
            State::New => Ok(()),
            State::Stopped => Err(ClientError::Shutdown),
        }
    }
}

impl Identity {
    /// A client on a freshly exchanged token, and the token's lifetime.
    async fn session(&self) -> Result<(AgentClient, Duration), ClientError> {
        let token =
            crate::exchange_agent_key(&self.control_plane_url, &self.key, Some(&self.gateway_id))
                .await?;
        let client =
            AgentClient::for_gateway(&self.gateway_url, &token.access_token, &self.gateway_id)?;
        Ok((client, Duration::from_secs(token.expires_in.max(1))))
    }
}

/// `GET /ready` on the gateway's host: a gateway without configuration, or whose policy is
/// stale, answers with its refusal.
async fn ready(identity: &Identity) -> Result<(), ClientError> {
    let base = identity
        .gateway_url
        .rsplit_once("/gateways/")
        .map_or(identity.gateway_url.as_str(), |(base, _)| base);
    let url = format!("{base}/ready");
    let response = reqwest::Client::new()
        .get(&url)
        .timeout(crate::defaults::REQUEST_TIMEOUT)
        .send()
        .await
        .map_err(|source| ClientError::Transport {
            url: url.clone(),
            source,
        })?;
    if response.status().is_success() {
        return Ok(());
    }
    let status = response.status().as_u16();
    let body = response.json().await.unwrap_or(serde_json::Value::Null);
    let ids = CallIds {
        gateway_id: Some(identity.gateway_id.clone()),
        ..CallIds::default()
    };
    Err(ClientError::Gateway(Box::new(classify(status, &body, ids))))
}

/// Renews the token when four fifths of its life have passed; on failure retries every few
/// seconds while the current token lasts.
async fn renew(identity: Identity, state: Arc<Mutex<State>>, mut ttl: Duration) {
    loop {
        tokio::time::sleep(ttl.mul_f64(0.8)).await;
        match identity.session().await {
            Ok((client, next)) => {
                if let State::Running {
                    client: current, ..
                } = &mut *state.lock().await
                {
                    *current = client;
                }
                ttl = next;
            }
            Err(e) => {
                tracing::warn!(error = %e, "Could not renew the agent token; retrying.");
                ttl = Duration::from_secs(5);
            }
        }
    }
}

/// Loads what the gateway lets the agent use into `policy`; a failure keeps the last
/// snapshot (which ages out after three intervals).
async fn refresh(client: &AgentClient, policy: &Snapshot) {
    let fresh = client.clone().with_tools_cache_ttl(Duration::ZERO);
    let loaded = async {
        let tools = fresh.list_tools().await?;
        let models = fresh.list_models().await?;
        Ok::<_, ClientError>(Policy {
            tools: tools.into_iter().map(|t| t.name).collect(),
            models: models.into_iter().collect(),
            loaded: Instant::now(),
        })
    };
    match loaded.await {
        Ok(loaded) => *policy.write().unwrap_or_else(|e| e.into_inner()) = Some(loaded),
        Err(e) => tracing::warn!(error = %e, "Could not refresh the agent's policy snapshot."),
    }
}

/// Refreshes the policy snapshot every `interval` with the current client.
async fn sync(state: Arc<Mutex<State>>, policy: Snapshot, interval: Duration) {
    loop {
        tokio::time::sleep(interval).await;
        let client = match &*state.lock().await {
            State::Running { client, .. } => client.clone(),
            _ => return,
        };
        refresh(&client, &policy).await;
    }
}
