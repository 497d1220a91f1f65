//! Upstream OAuth (DESIGN §14): this service is the OAuth client of the providers behind
//! OAuth connections. It finds a provider's endpoints (RFC 9728 from the MCP server, then
//! RFC 8414 or OpenID discovery), registers itself when no client id is configured
//! (RFC 7591), runs the authorization code flow with PKCE S256, `state` and the RFC 8707
//! `resource` of the MCP server, stores the grant sealed, refreshes it ahead of expiry (one
//! refresh at a time per grant) and revokes it on disconnect. The `oauth2` crate builds the
//! requests; discovery and registration are plain JSON.

pub(crate) mod discovery;
pub mod documents;
pub mod flow;
pub mod tokens;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use oauth2::basic::BasicClient;
use oauth2::{AuthUrl, ClientId, ClientSecret, EndpointNotSet, EndpointSet, RedirectUrl, TokenUrl};
use portcullis_shared::api::tools::HttpConfig;
use portcullis_shared::api::{AuthMethod, CredentialType};
use portcullis_shared::audit::catalog::OauthDisconnected;
use portcullis_shared::egress;
use serde_json::{Map, Value};

use crate::error::{corrupt, not_found, precondition, ApiError, ApiResult};
use crate::store::credentials::{self, Owner};
use crate::store::{models, oauth_flows, tools, Conn};
use crate::App;

pub use discovery::Endpoints;

/// The OAuth client's shared state: an HTTP client under the egress policy (no redirects
/// followed, so a provider cannot send our credentials elsewhere; addresses checked), one
/// lock per grant being refreshed, the client metadata documents fetched lately, and the
/// budget of client registrations per client address (as authorization server).
pub struct OAuth {
    http: reqwest::Client,
    allow_private: bool,
    refreshing: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
    pub documents: documents::Documents,
    pub registrations: crate::peer::Budget,
}

impl OAuth {
    /// `allow_private`: whether providers and servers may be at loopback or private addresses.
    pub fn new(allow_private: bool) -> Self {
        let agent = concat!("Portcullis/", env!("CARGO_PKG_VERSION"));
        Self {
            http: egress::client(allow_private, Duration::from_secs(15), agent),
            allow_private,
            refreshing: Mutex::default(),
            documents: documents::Documents::default(),
            registrations: crate::peer::Budget::new(
                documents::REGISTER_BURST,
                documents::REGISTER_REFILL,
            ),
        }
    }

    /// The client for upstream providers and servers: the egress policy, 15 s deadline.
    pub fn http(&self) -> &reqwest::Client {
        &self.http
    }

    /// Whether providers and servers may be at loopback or private addresses.
    pub fn allows_private(&self) -> bool {
        self.allow_private
    }

    /// Checks a URL about to be fetched against the egress policy (an IP-literal host is
    /// not seen by the resolver).
    pub fn check_url(&self, url: &str) -> Result<url::Url, String> {
        let parsed = url::Url::parse(url).map_err(|_| format!("{url:?} is not a URL"))?;
        egress::check_url(&parsed, self.allow_private).map_err(|e| e.to_string())?;
        Ok(parsed)
    }

    /// The lock held while one grant is refreshed.
    fn refresh_lock(&self, key: &str) -> Arc<tokio::sync::Mutex<()>> {
        let mut map = self.refreshing.lock().unwrap_or_else(|e| e.into_inner());
        map.retain(|_, lock| Arc::strong_count(lock) > 1);
        map.entry(key.to_string()).or_default().clone()
    }
}

/// An OAuth connection as the flow needs it.
pub struct Connection {
    pub owner: Owner,
    pub id: String,
    pub name: String,
    pub workspace_id: String,
    pub per_user: bool,
    settings: Map<String, Value>,
    client_secret: Option<String>,
    /// A tool's MCP server URL: where RFC 9728 metadata is looked for, and the default
    /// `resource`.
    server_url: Option<String>,
}

/// A tool or model connection that uses OAuth.
pub async fn connection(
    app: &App,
    conn: &mut Conn,
    ws: &str,
    owner: Owner,
    id: &str,
) -> ApiResult<Connection> {
    let (kind, client_owner) = match owner {
        Owner::Model => ("model", Owner::ModelOAuthClient),
        _ => ("tool", Owner::ToolOAuthClient),
    };
    let (name, method, ctype, auth_config, server_url) = match owner {
        Owner::Model => {
            let row = models::get(conn, ws, id)
                .await?
                .ok_or_else(|| not_found("model connection", id))?;
            (
                row.name,
                row.auth_method,
                row.credential_type,
                row.auth_config,
                None,
            )
        }
        _ => {
            let row = tools::get(conn, ws, id)
                .await?
                .ok_or_else(|| not_found("tool connection", id))?;
            let url = serde_json::from_str::<HttpConfig>(&row.protocol_config)
                .ok()
                .map(|h| h.url)
                .filter(|u| !u.is_empty());
            (
                row.name,
                row.auth_method,
                row.credential_type,
                row.auth_config,
                url,
            )
        }
    };
    if method != AuthMethod::OAuth.as_str() {
        return Err(precondition(format!(
            "{kind} '{name}' uses auth_method={method}; OAuth consent needs auth_method=oauth"
        )));
    }
    let settings: Map<String, Value> =
        serde_json::from_str(&auth_config).map_err(|_| corrupt("auth_config"))?;
    let client_secret = credentials::open_shared(conn, app.store.cipher(), client_owner, id)
        .await?
        .and_then(|mut v| v.remove("client_secret"));
    Ok(Connection {
        owner,
        per_user: ctype == CredentialType::PerUser.as_str(),
        id: id.to_string(),
        name,
        workspace_id: ws.to_string(),
        settings,
        client_secret,
        server_url,
    })
}

/// Revokes every grant of the connection at the provider, deletes them, and records it.
pub async fn disconnect(app: &App, c: &Connection) -> ApiResult<()> {
    let revoked = tokens::revoke_all(app, c).await?;
    if revoked > 0 {
        let payload = OauthDisconnected {
            grant: tokens::grant(c, ""),
            grants: revoked as u64,
        };
        tokens::record(app, c, "", payload).await;
    }
    Ok(())
}

impl Connection {
    fn setting(&self, key: &str) -> Option<&str> {
        self.settings
            .get(key)
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
    }

    /// The configured scopes (a space-separated string or an array of strings).
    fn scopes(&self) -> Option<Vec<String>> {
        match self.settings.get("scopes")? {
            Value::String(s) => Some(s.split_whitespace().map(str::to_string).collect()),
            Value::Array(a) => Some(
                a.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_string)
                    .collect(),
            ),
            _ => None,
        }
    }

    fn kind(&self) -> &'static str {
        match self.owner {
            Owner::Model => "model",
            _ => "tool",
        }
    }

    fn client_owner(&self) -> Owner {
        match self.owner {
            Owner::Model => Owner::ModelOAuthClient,
            _ => Owner::ToolOAuthClient,
        }
    }
}

/// A client of one provider, ready to send requests.
pub type Client =
    BasicClient<EndpointSet, EndpointNotSet, EndpointNotSet, EndpointNotSet, EndpointSet>;

/// What a flow needs of a provider: its client, scopes and the `resource` to ask for, and
/// how to revoke a grant (RFC 7009; sent by hand: the `oauth2` crate refuses a revocation
/// endpoint without TLS, which a provider inside the network may well be).
pub struct Provider {
    pub client: Client,
    pub scopes: Vec<String>,
    pub resource: Option<String>,
    pub revocation: Option<Revocation>,
}

pub struct Revocation {
    pub url: String,
    pub client_id: String,
    pub client_secret: Option<String>,
}

/// Where the provider sends people back.
pub fn redirect_uri(app: &App) -> String {
    format!("{}/oauth/callback", app.base_url)
}

/// The connection's provider: endpoints configured or discovered, and its client id (with
/// `register`, obtained by dynamic registration and stored when none is configured).
pub async fn provider(app: &App, c: &Connection, register: bool) -> ApiResult<Provider> {
    let found = discovery::endpoints(&app.oauth, c).await?;
    let (client_id, client_secret) = match c.setting("client_id") {
        Some(id) => (id.to_string(), c.client_secret.clone()),
        None if register => registered(app, c, &found).await?,
        None => {
            return Err(precondition(format!(
                "{} '{}' has no OAuth client id: begin the connection again",
                c.kind(),
                c.name
            )))
        }
    };
    let url_error = |what: &str| precondition(format!("the provider's {what} is not a URL"));
    let revocation = found.revocation.map(|url| Revocation {
        url,
        client_id: client_id.clone(),
        client_secret: client_secret.clone(),
    });
    let mut client = BasicClient::new(ClientId::new(client_id))
        .set_auth_uri(
            AuthUrl::new(found.authorization).map_err(|_| url_error("authorization endpoint"))?,
        )
        .set_token_uri(TokenUrl::new(found.token).map_err(|_| url_error("token endpoint"))?)
        .set_redirect_uri(
            RedirectUrl::new(redirect_uri(app)).map_err(|_| url_error("redirect URI"))?,
        );
    if let Some(secret) = client_secret {
        client = client.set_client_secret(ClientSecret::new(secret));
    }
    Ok(Provider {
        client,
        scopes: c.scopes().unwrap_or(found.scopes),
        resource: found.resource,
        revocation,
    })
}

/// Registers this service with the provider (RFC 7591) and stores the client: its id in the
/// connection's settings, its secret sealed.
async fn registered(
    app: &App,
    c: &Connection,
    found: &Endpoints,
) -> ApiResult<(String, Option<String>)> {
    let Some(endpoint) = &found.registration else {
        return Err(precondition(format!(
            "{} '{}' has no auth_config.client_id and its provider offers no dynamic client \
             registration: register a client there (redirect URI {}) and set client_id and \
             client_secret",
            c.kind(),
            c.name,
            redirect_uri(app)
        )));
    };
    let (id, secret) = discovery::register(&app.oauth, endpoint, &redirect_uri(app)).await?;
    let mut settings = c.settings.clone();
    settings.insert("client_id".into(), Value::String(id.clone()));
    settings.insert("dynamic_registration".into(), Value::Bool(true));
    let text = serde_json::to_string(&settings).map_err(|e| ApiError::Internal(e.to_string()))?;
    let mut tx = app.store.write_unscoped().await?;
    oauth_flows::set_client_settings(tx.conn(), c.owner, &c.workspace_id, &c.id, &text).await?;
    credentials::delete_all(tx.conn(), c.client_owner(), &c.id).await?;
    if let Some(secret) = &secret {
        let values = [("client_secret".to_string(), secret.clone())].into();
        credentials::put(
            tx.conn(),
            app.store.cipher(),
            &c.workspace_id,
            c.client_owner(),
            &c.id,
            "",
            &values,
        )
        .await?;
    }
    tx.commit().await?;
    tracing::info!(connection_id = %c.id, "Registered as an OAuth client of the provider.");
    Ok((id, secret))
}
