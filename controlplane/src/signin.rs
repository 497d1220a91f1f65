//! Signing a person in at the agent's OpenID provider: the agent's act-as provider
//! (`actas_provider_id`) or inline issuer (`actas_oidc_url`) names it; its endpoints come from
//! discovery; this service's client there is registered dynamically once per workspace and
//! issuer (RFC 7591) and kept, its secret sealed. Authorization code with PKCE S256, `state`
//! and `nonce`; the ID token's signature (the provider's JWKS), issuer, audience (our client),
//! expiry and nonce are checked. An email counts only when the ID token says
//! `email_verified: true`, or the act-as provider is marked `trust_unverified_email` (an issuer
//! that only issues verified emails) and the token does not say it is unverified.
//!
//! Two doors sign people in here and share its callback (`/oauth2/signin/callback`):
//! interactive access, before an MCP client is authorized, and provision links, before a
//! person stores a credential.

use oauth2::basic::{
    BasicErrorResponse, BasicRevocationErrorResponse, BasicTokenIntrospectionResponse,
    BasicTokenType,
};
use oauth2::{
    AuthUrl, AuthorizationCode, ClientId, ClientSecret, CsrfToken, EndpointNotSet, EndpointSet,
    ExtraTokenFields, PkceCodeChallenge, PkceCodeVerifier, RedirectUrl, Scope,
    StandardRevocableToken, StandardTokenResponse, TokenUrl,
};
use rand::distributions::{Alphanumeric, DistString};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::{precondition, ApiResult};
use crate::oauth::discovery;
use crate::oauth::tokens::describe;
use crate::store::agents::AgentRow;
use crate::store::{actas_providers, interactive, Conn};
use crate::App;

/// A fresh secret value: 43 base62 characters (256 bits).
pub(crate) fn random_token() -> String {
    Alphanumeric.sample_string(&mut rand::rngs::OsRng, 43)
}

/// The ID token beside the access token of a token response.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct IdTokenFields {
    #[serde(default)]
    id_token: Option<String>,
}

impl ExtraTokenFields for IdTokenFields {}

type Client = oauth2::Client<
    BasicErrorResponse,
    StandardTokenResponse<IdTokenFields, BasicTokenType>,
    BasicTokenIntrospectionResponse,
    StandardRevocableToken,
    BasicRevocationErrorResponse,
    EndpointSet,
    EndpointNotSet,
    EndpointNotSet,
    EndpointNotSet,
    EndpointSet,
>;

/// An OpenID provider, ready for a sign-in.
pub struct Provider {
    email_claim: String,
    trust_unverified_email: bool,
    client_id: String,
    client: Client,
    pub endpoints: Endpoints,
}

/// Where the provider sends people back.
pub fn redirect_uri(app: &App) -> String {
    format!("{}/oauth2/signin/callback", app.base_url)
}

/// Where the agent's people sign in: the issuer, the claim carrying their email, and the
/// act-as provider naming it (whose sign-in client, if set, is used). Agents with equal
/// issuers share one sign-in.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Issuer {
    pub url: String,
    pub email_claim: String,
    /// Whether an email counts without `email_verified: true` (the act-as provider's setting).
    #[serde(default)]
    pub trust_unverified_email: bool,
    pub provider_id: Option<String>,
    /// What a person choosing where to sign in is shown: the act-as provider's name, or the
    /// issuer's URL.
    #[serde(default)]
    pub label: String,
}

impl Issuer {
    /// How a sign-in choice names this issuer: the act-as provider's id, or the issuer's URL.
    pub fn key(&self) -> &str {
        self.provider_id.as_deref().unwrap_or(&self.url)
    }
}

/// The issuer that signs the agent's people in.
pub async fn issuer_of(conn: &mut Conn, agent: &AgentRow) -> ApiResult<Issuer> {
    if let Some(id) = &agent.actas_provider_id {
        let p = actas_providers::get(conn, &agent.workspace_id, id)
            .await?
            .ok_or_else(|| precondition("the agent's act-as provider no longer exists"))?;
        let url = p.issuer.filter(|i| !i.is_empty()).ok_or_else(|| {
            precondition(format!(
                "act-as provider '{}' has no issuer, so it cannot sign people in",
                p.name
            ))
        })?;
        return Ok(Issuer {
            url,
            email_claim: p.email_claim,
            trust_unverified_email: p.trust_unverified_email != 0,
            provider_id: Some(p.id),
            label: p.name,
        });
    }
    if let Some(url) = &agent.actas_oidc_url {
        let url = url
            .trim_end_matches('/')
            .trim_end_matches("/.well-known/openid-configuration")
            .to_string();
        return Ok(Issuer {
            label: url.clone(),
            url,
            email_claim: "email".into(),
            trust_unverified_email: false,
            provider_id: None,
        });
    }
    Err(precondition(format!(
        "agent '{}' has no OpenID provider to sign people in: set its actas_provider_id or \
         actas_oidc_url",
        agent.name
    )))
}

/// This service's client at the issuer: the act-as provider's sign-in client when it has
/// one, else the one registered there dynamically before (or `None`).
async fn known_client(
    app: &App,
    ws: &str,
    found: &Issuer,
) -> ApiResult<Option<(String, Option<String>)>> {
    let mut conn = app.store.read().await?;
    let cipher = app.store.cipher();
    if let Some(id) = &found.provider_id {
        if let Some(p) = actas_providers::get(&mut conn, ws, id).await? {
            if let Some(client) = actas_providers::signin_client(cipher, &p)? {
                return Ok(Some(client));
            }
        }
    }
    Ok(interactive::signin_client(&mut conn, cipher, ws, &found.url).await?)
}

/// The provider's endpoints, as discovered when a sign-in begins and kept with it until the
/// person comes back.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Endpoints {
    /// The `iss` its ID tokens carry (the metadata's own `issuer`).
    pub issuer: String,
    authorization: String,
    token: String,
    jwks_uri: String,
}

/// The provider of `found` with this service's client there (registered on first use when
/// none is configured).
pub async fn provider(app: &App, ws: &str, found: &Issuer) -> ApiResult<Provider> {
    let issuer = found.url.as_str();
    let meta = discovery::server_metadata(&app.oauth, issuer)
        .await
        .map_err(|why| {
            precondition(format!(
                "the OpenID provider {issuer} could not be discovered: {why}"
            ))
        })?;
    let missing = |what: &str| precondition(format!("{issuer} publishes no {what}"));
    let endpoints = Endpoints {
        authorization: meta
            .authorization_endpoint
            .ok_or_else(|| missing("authorization_endpoint"))?,
        token: meta
            .token_endpoint
            .ok_or_else(|| missing("token_endpoint"))?,
        jwks_uri: meta.jwks_uri.ok_or_else(|| missing("jwks_uri"))?,
        issuer: meta.issuer,
    };
    // The discovered token endpoint is fetched by this service (its JWKS through get_json).
    app.oauth
        .check_url(&endpoints.token)
        .map_err(|why| precondition(format!("{issuer}'s token endpoint: {why}")))?;
    let client = match known_client(app, ws, found).await? {
        Some(c) => c,
        None => register(app, ws, issuer, meta.registration_endpoint).await?,
    };
    build(app, found, endpoints, client)
}

/// The provider a sign-in under way began with: its endpoints as discovered then, and the
/// client used then (known since).
pub async fn provider_at(
    app: &App,
    ws: &str,
    found: &Issuer,
    endpoints: Endpoints,
) -> ApiResult<Provider> {
    let client = known_client(app, ws, found).await?.ok_or_else(|| {
        precondition("this service's client at the OpenID provider was removed meanwhile")
    })?;
    build(app, found, endpoints, client)
}

/// Registers this service with the provider (RFC 7591) for sign-in and keeps the client.
async fn register(
    app: &App,
    ws: &str,
    issuer: &str,
    endpoint: Option<String>,
) -> ApiResult<(String, Option<String>)> {
    let endpoint = endpoint.ok_or_else(|| {
        precondition(format!(
            "{issuer} offers no dynamic client registration: register a client there \
             (redirect URI {}) and set it as the act-as provider's signin_client_id and \
             signin_client_secret",
            redirect_uri(app)
        ))
    })?;
    let (id, secret) = discovery::register(&app.oauth, &endpoint, &redirect_uri(app)).await?;
    let mut tx = app.store.write_unscoped().await?;
    let cipher = app.store.cipher();
    interactive::put_signin_client(tx.conn(), cipher, ws, issuer, &id, secret.as_deref()).await?;
    tx.commit().await?;
    tracing::info!(
        issuer,
        "Registered as a client of an OpenID provider for sign-in."
    );
    Ok((id, secret))
}

fn build(
    app: &App,
    found: &Issuer,
    endpoints: Endpoints,
    (client_id, secret): (String, Option<String>),
) -> ApiResult<Provider> {
    let not_url = |what: &str| precondition(format!("{}'s {what} is not a URL", found.url));
    let authorization = AuthUrl::new(endpoints.authorization.clone())
        .map_err(|_| not_url("authorization endpoint"))?;
    let token = TokenUrl::new(endpoints.token.clone()).map_err(|_| not_url("token endpoint"))?;
    let redirect = RedirectUrl::new(redirect_uri(app)).map_err(|_| not_url("redirect URI"))?;
    let mut client = oauth2::Client::new(ClientId::new(client_id.clone()))
        .set_auth_uri(authorization)
        .set_token_uri(token)
        .set_redirect_uri(redirect);
    if let Some(secret) = secret {
        client = client.set_client_secret(ClientSecret::new(secret));
    }
    Ok(Provider {
        email_claim: found.email_claim.clone(),
        trust_unverified_email: found.trust_unverified_email,
        client_id,
        client,
        endpoints,
    })
}

/// Where to send the person, and the PKCE verifier to keep until they come back.
pub fn authorization_url(p: &Provider, state: &str, nonce: &str) -> (String, String) {
    let (challenge, verifier) = PkceCodeChallenge::new_random_sha256();
    let state = state.to_string();
    let (url, _) = p
        .client
        .authorize_url(move || CsrfToken::new(state))
        .add_scope(Scope::new("openid".into()))
        .add_scope(Scope::new("email".into()))
        .set_pkce_challenge(challenge)
        .add_extra_param("nonce", nonce)
        .url();
    (url.to_string(), verifier.secret().clone())
}

/// The person who signed in.
#[derive(Debug, Clone)]
pub struct Person {
    pub subject: String,
    pub email: String,
}

/// Trades the provider's code for an ID token and checks it.
pub async fn person(
    app: &App,
    p: &Provider,
    code: String,
    verifier: String,
    nonce: &str,
) -> ApiResult<Person> {
    let response = p
        .client
        .exchange_code(AuthorizationCode::new(code))
        .set_pkce_verifier(PkceCodeVerifier::new(verifier))
        .request_async(app.oauth.http())
        .await
        .map_err(|e| {
            precondition(format!(
                "{} refused the sign-in: {}",
                p.endpoints.issuer,
                describe(&e)
            ))
        })?;
    let id_token = response
        .extra_fields()
        .id_token
        .as_deref()
        .ok_or_else(|| precondition(format!("{} returned no ID token", p.endpoints.issuer)))?;
    verify(app, p, id_token, nonce).await
}

async fn verify(app: &App, p: &Provider, token: &str, nonce: &str) -> ApiResult<Person> {
    let bad = |why: &str| {
        precondition(format!(
            "the ID token from {} is not valid: {why}",
            p.endpoints.issuer
        ))
    };
    let header = jsonwebtoken::decode_header(token).map_err(|_| bad("malformed"))?;
    if matches!(
        header.alg,
        jsonwebtoken::Algorithm::HS256
            | jsonwebtoken::Algorithm::HS384
            | jsonwebtoken::Algorithm::HS512
    ) {
        return Err(bad("signed with a shared secret, not the provider's key"));
    }
    let keys: jsonwebtoken::jwk::JwkSet = discovery::get_json(&app.oauth, &p.endpoints.jwks_uri)
        .await
        .map_err(|why| bad(&format!("its signing keys could not be read: {why}")))?;
    let jwk = match &header.kid {
        Some(kid) => keys.find(kid),
        None if keys.keys.len() == 1 => keys.keys.first(),
        None => None,
    }
    .ok_or_else(|| bad("signed with a key the provider does not publish"))?;
    let key = jsonwebtoken::DecodingKey::from_jwk(jwk).map_err(|_| bad("unusable signing key"))?;
    let mut validation = jsonwebtoken::Validation::new(header.alg);
    validation.leeway = 30;
    validation.set_issuer(&[&p.endpoints.issuer]);
    validation.set_audience(&[&p.client_id]);
    validation.set_required_spec_claims(&["exp", "iss", "aud", "sub"]);
    let claims = jsonwebtoken::decode::<Value>(token, &key, &validation)
        .map_err(|e| bad(&e.to_string()))?
        .claims;
    if claims["nonce"].as_str() != Some(nonce) {
        return Err(bad("its nonce is not the one this sign-in sent"));
    }
    let subject = claims["sub"].as_str().unwrap_or_default().to_string();
    if subject.is_empty() {
        return Err(bad("it names no subject"));
    }
    let email = claims[p.email_claim.as_str()]
        .as_str()
        .filter(|_| email_counts(&claims, p.trust_unverified_email))
        .unwrap_or_default()
        .to_string();
    Ok(Person { subject, email })
}

/// Whether the ID token's email counts: the provider says it verified it, or the provider is
/// trusted to issue only verified emails and does not say otherwise.
fn email_counts(claims: &Value, trust_unverified: bool) -> bool {
    match claims["email_verified"].as_bool() {
        Some(verified) => verified,
        None => trust_unverified,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::email_counts;

    #[test]
    fn an_email_counts_when_verified_or_the_provider_is_trusted() {
        let said = |v: serde_json::Value| json!({"sub": "s", "email": "a@b", "email_verified": v});
        assert!(email_counts(&said(json!(true)), false));
        assert!(!email_counts(&said(json!(false)), false));
        assert!(!email_counts(&said(json!(false)), true));
        assert!(
            !email_counts(&said(json!("true")), false),
            "a string is not a yes"
        );
        let unsaid = json!({"sub": "s", "email": "a@b"});
        assert!(!email_counts(&unsaid, false));
        assert!(email_counts(&unsaid, true));
    }
}
