//! `/oauth2/authorize` and the OpenID provider's return to `/oauth2/signin/callback`. Until
//! the client and its redirect URI are known, a problem is shown to the person as a page;
//! after that it goes back to the client as an OAuth error (RFC 6749 §4.1.2.1), with `state`
//! and `iss` (RFC 9207). Nothing about the gateway's agents is shown before sign-in: the person
//! signs in at the OpenID provider its interactive agents share (where they use several, the
//! person first picks the provider, never an agent), and only then are the agents that admit
//! them found. The consent page ([`super::consent`]) comes next, unless the person consented
//! to this client using that one agent before.

use std::collections::HashMap;
use std::sync::Arc;

use axum::extract::{Query, RawQuery, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use portcullis_shared::keys;
use serde::{Deserialize, Serialize};

use super::{
    admits, consent, record, resource, takes_sign_ins, Code, Request, CODE_SECS, SIGNIN_SECS,
};
use crate::error::{invalid, ApiError, ApiResult};
use crate::pages::{escape, failure, page};
use crate::signin::{self, random_token, Issuer, Person};
use crate::store::agents::{self, AgentRow};
use crate::store::{gateways, interactive, now_ms, Conn};
use crate::App;

/// A sign-in under way at the OpenID provider. `request.agent_id` is empty until the person
/// is known: `agents` are the ones signing people in at this provider that they may use.
#[derive(Serialize, Deserialize)]
struct SignIn {
    request: Request,
    #[serde(default)]
    agents: Vec<String>,
    /// The client's name, for the consent page.
    #[serde(default)]
    client_name: String,
    issuer: Issuer,
    endpoints: signin::Endpoints,
    verifier: String,
    nonce: String,
}

/// The way back to the MCP client.
pub(super) struct Back<'a> {
    redirect_uri: &'a str,
    state: Option<&'a str>,
    issuer: &'a str,
}

impl<'a> Back<'a> {
    /// The way back for a request carried through sign-in.
    pub(super) fn of(app: &'a App, r: &'a Request) -> Self {
        Back {
            redirect_uri: &r.redirect_uri,
            state: r.state.as_deref(),
            issuer: &app.base_url,
        }
    }

    pub(super) fn to(&self, params: &[(&str, &str)]) -> Response {
        let Ok(mut url) = url::Url::parse(self.redirect_uri) else {
            return failure(&invalid("the client's redirect URI is not a URL"));
        };
        {
            let mut q = url.query_pairs_mut();
            for (k, v) in params {
                q.append_pair(k, v);
            }
            if let Some(state) = self.state {
                q.append_pair("state", state);
            }
            q.append_pair("iss", self.issuer);
        }
        Redirect::to(url.as_str()).into_response()
    }

    pub(super) fn error(&self, error: &str, description: &str) -> Response {
        self.to(&[("error", error), ("error_description", description)])
    }
}

pub(super) type Params = HashMap<String, String>;

pub(super) fn param<'a>(q: &'a Params, key: &str) -> Option<&'a str> {
    q.get(key).map(String::as_str).filter(|v| !v.is_empty())
}

pub async fn authorize(State(app): State<Arc<App>>, RawQuery(raw): RawQuery) -> Response {
    let raw = raw.unwrap_or_default();
    let q: Params = url::form_urlencoded::parse(raw.as_bytes())
        .into_owned()
        .collect();
    begin(&app, &q, &raw).await.unwrap_or_else(|e| failure(&e))
}

/// Checks the client's request, settles where the person signs in and sends them there.
async fn begin(app: &App, q: &Params, raw: &str) -> ApiResult<Response> {
    let client_id = param(q, "client_id").ok_or_else(|| invalid("client_id is missing"))?;
    let client = super::client_document::client(app, client_id)
        .await?
        .ok_or_else(|| invalid(format!("client {client_id:?} is not registered here")))?;
    let mut conn = app.store.read().await?;
    let redirect_uri = redirect_uri(q, &client.redirect_uris)?;
    let back = Back {
        redirect_uri: &redirect_uri,
        state: param(q, "state"),
        issuer: &app.base_url,
    };
    if param(q, "response_type") != Some("code") {
        return Ok(back.error(
            "unsupported_response_type",
            "only response_type=code is supported",
        ));
    }
    let Some(challenge) = pkce_challenge(q) else {
        return Ok(back.error(
            "invalid_request",
            "PKCE is required: send a code_challenge with code_challenge_method=S256",
        ));
    };
    let Some(resource) = param(q, "resource") else {
        return Ok(back.error(
            "invalid_target",
            "resource is required: the gateway's MCP URL, {gateway_url}/mcp",
        ));
    };
    let Some(gateway) = target(&mut conn, resource).await? else {
        return Ok(back.error(
            "invalid_target",
            &format!(
                "{resource} is not the MCP URL of an active gateway at one of its public URLs"
            ),
        ));
    };
    let mut groups = sign_in_groups(&mut conn, &gateway, param(q, "agent")).await?;
    let chosen = match param(q, "signin") {
        Some(key) => groups.into_iter().find(|(i, _)| i.key() == key),
        None if groups.len() > 1 => {
            groups.sort_by(|a, b| a.0.label.cmp(&b.0.label));
            return Ok(where_to_sign_in(&app.base_url, &groups, raw));
        }
        None => groups.into_iter().next(),
    };
    let Some((issuer, agents)) = chosen else {
        return Ok(back.error(
            "access_denied",
            &format!(
                "no agent on gateway '{}' admits interactive sign-in",
                gateway.name
            ),
        ));
    };
    drop(conn);
    let request = Request {
        workspace_id: gateway.workspace_id,
        gateway_id: gateway.id,
        agent_id: String::new(),
        client_id: client.client_id,
        redirect_uri: redirect_uri.clone(),
        code_challenge: challenge.to_string(),
        state: back.state.map(str::to_string),
        resource: resource.to_string(),
    };
    let agents = agents.into_iter().map(|a| a.id).collect();
    send_to_provider(app, request, agents, client.client_name, issuer).await
}

/// The redirect URI of the request: one the client registered, which may be left out when it
/// registered only one.
fn redirect_uri(q: &Params, registered: &str) -> ApiResult<String> {
    let registered: Vec<String> = serde_json::from_str(registered).unwrap_or_default();
    match (param(q, "redirect_uri"), registered.as_slice()) {
        (Some(u), _) if registered.iter().any(|r| r == u) => Ok(u.to_string()),
        (Some(_), _) => Err(invalid("redirect_uri is not one the client registered")),
        (None, [only]) => Ok(only.clone()),
        (None, _) => Err(invalid(
            "redirect_uri is required: the client registered several",
        )),
    }
}

/// The PKCE code challenge, when it is one (RFC 7636: 43 to 128 unreserved characters) sent
/// with the `S256` method.
fn pkce_challenge(q: &Params) -> Option<&str> {
    let challenge = param(q, "code_challenge").filter(|c| {
        (43..=128).contains(&c.len())
            && c.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-._~".contains(&b))
    });
    challenge.filter(|_| param(q, "code_challenge_method") == Some("S256"))
}

/// Keeps the sign-in under way and sends the person to `issuer`, the OpenID provider at which
/// `agents` (of the request's gateway) sign their people in.
async fn send_to_provider(
    app: &App,
    request: Request,
    agents: Vec<String>,
    client_name: String,
    issuer: Issuer,
) -> ApiResult<Response> {
    let ws = request.workspace_id.clone();
    let provider = signin::provider(app, &ws, &issuer).await?;
    let state = random_token();
    let nonce = random_token();
    let (url, verifier) = signin::authorization_url(&provider, &state, &nonce);
    let pending = SignIn {
        request,
        agents,
        client_name,
        issuer,
        endpoints: provider.endpoints.clone(),
        verifier,
        nonce,
    };
    let data = serde_json::to_string(&pending).unwrap_or_default();
    let mut tx = app.store.write_unscoped().await?;
    let expires_at = now_ms() + SIGNIN_SECS * 1000;
    let key = keys::hash(&state);
    interactive::put_pending(
        tx.conn(),
        app.store.cipher(),
        "signin",
        &key,
        &ws,
        &data,
        expires_at,
    )
    .await?;
    tx.commit().await?;
    Ok(Redirect::to(&url).into_response())
}

/// The active gateway `resource` is a public MCP URL of (DESIGN §24), if any.
async fn target(conn: &mut Conn, resource: &str) -> ApiResult<Option<gateways::GatewayRow>> {
    let Some(id) = resource::gateway_of(resource) else {
        return Ok(None);
    };
    let gateway = gateways::by_id(conn, id).await?;
    let Some(gateway) = gateway.filter(|g| g.state == "active") else {
        return Ok(None);
    };
    let known = resource::public_urls(conn, &gateway.workspace_id, &gateway.id).await?;
    Ok(resource::is_public_url(resource, &known).then_some(gateway))
}

/// The agents on this gateway that admit interactive sign-in: usable, interactive access on,
/// and allowed on the gateway.
async fn candidates(conn: &mut Conn, gateway: &gateways::GatewayRow) -> ApiResult<Vec<AgentRow>> {
    let granted = gateways::granted_agents(conn, &gateway.id).await?;
    Ok(agents::all(conn, &gateway.workspace_id)
        .await?
        .into_iter()
        .filter(takes_sign_ins)
        .filter(|a| gateway.all_agents != 0 || granted.contains(&a.id))
        .collect())
}

/// The gateway's agents that admit interactive sign-in (only the one `agent` names, when
/// sent), grouped by where their people sign in.
async fn sign_in_groups(
    conn: &mut Conn,
    gateway: &gateways::GatewayRow,
    agent: Option<&str>,
) -> ApiResult<Vec<(Issuer, Vec<AgentRow>)>> {
    let mut candidates = candidates(conn, gateway).await?;
    if let Some(id) = agent {
        candidates.retain(|a| a.id == id);
    }
    by_issuer(conn, candidates).await
}

/// The agents grouped by where their people sign in. An agent without an OpenID provider is
/// left out; when every one lacks it, that is the answer.
async fn by_issuer(
    conn: &mut Conn,
    agents: Vec<AgentRow>,
) -> ApiResult<Vec<(Issuer, Vec<AgentRow>)>> {
    let mut groups: Vec<(Issuer, Vec<AgentRow>)> = Vec::new();
    let mut unusable: Option<ApiError> = None;
    for agent in agents {
        let issuer = match signin::issuer_of(conn, &agent).await {
            Ok(i) => i,
            Err(e) => {
                unusable.get_or_insert(e);
                continue;
            }
        };
        match groups.iter_mut().find(|(i, _)| *i == issuer) {
            Some((_, members)) => members.push(agent),
            None => groups.push((issuer, vec![agent])),
        }
    }
    match unusable {
        Some(e) if groups.is_empty() => Err(e),
        _ => Ok(groups),
    }
}

/// A page where the person picks the OpenID provider to sign in at: the gateway's agents use
/// several. It names providers only, never agents.
fn where_to_sign_in(base_url: &str, groups: &[(Issuer, Vec<AgentRow>)], raw: &str) -> Response {
    let items: String = groups
        .iter()
        .map(|(issuer, _)| {
            let key: String =
                url::form_urlencoded::byte_serialize(issuer.key().as_bytes()).collect();
            let href = format!("{base_url}/oauth2/authorize?{raw}&signin={key}");
            format!(
                "<li><a href=\"{}\">{}</a></li>",
                escape(&href),
                escape(&issuer.label)
            )
        })
        .collect();
    page(
        StatusCode::OK,
        "Choose where to sign in",
        &format!("<p>Where do you sign in?</p><ul>{items}</ul>"),
    )
}

pub async fn signed_in(
    State(app): State<Arc<App>>,
    headers: HeaderMap,
    Query(q): Query<Params>,
) -> Response {
    // The same callback serves the sign-in before a provision link is used.
    if let Some(state) = param(&q, "state") {
        let (code, error) = (param(&q, "code"), param(&q, "error"));
        match crate::provision::signed_in(&app, state, code, error).await {
            Ok(Some(page)) => return page,
            Ok(None) => {}
            Err(e) => return failure(&e),
        }
    }
    finish(&app, &headers, &q)
        .await
        .unwrap_or_else(|e| failure(&e))
}

/// The person is back from the OpenID provider: find the agents that admit them, then ask
/// their consent (or, given before for this client and agent, issue the code).
async fn finish(app: &App, headers: &HeaderMap, q: &Params) -> ApiResult<Response> {
    let state = param(q, "state").ok_or_else(|| invalid("the provider's answer has no state"))?;
    let mut tx = app.store.write_unscoped().await?;
    let cipher = app.store.cipher();
    let taken = interactive::take_pending(tx.conn(), cipher, "signin", &keys::hash(state)).await?;
    tx.commit().await?;
    let Some((data, expires_at)) = taken else {
        return Err(invalid(
            "this sign-in is unknown or was already used; start again from your MCP client",
        ));
    };
    let signin: SignIn =
        serde_json::from_str(&data).map_err(|_| crate::error::corrupt("pending sign-in"))?;
    let r = &signin.request;
    let back = Back::of(app, r);
    if expires_at < now_ms() {
        return Ok(back.error("access_denied", "the sign-in took longer than ten minutes"));
    }
    if let Some(error) = param(q, "error") {
        let detail = param(q, "error_description").unwrap_or(error);
        return Ok(back.error("access_denied", &format!("the sign-in failed: {detail}")));
    }
    let Some(code) = param(q, "code") else {
        return Ok(back.error("access_denied", "the provider's answer has no code"));
    };
    let provider = signin::provider_at(
        app,
        &r.workspace_id,
        &signin.issuer,
        signin.endpoints.clone(),
    )
    .await?;
    let verifier = signin.verifier.clone();
    let person =
        match signin::person(app, &provider, code.to_string(), verifier, &signin.nonce).await {
            Ok(p) => p,
            Err(e) => return Ok(back.error("access_denied", &e.to_string())),
        };
    // A sign-in begun before agents were chosen after sign-in names its agent instead.
    let ids = match signin.agents.as_slice() {
        [] => std::slice::from_ref(&r.agent_id),
        ids => ids,
    };
    let agents = admitting(app, r, ids, &person).await?;
    let Some(first) = agents.first() else {
        return Ok(refuse(app, &signin, &person).await);
    };
    let mut request = signin.request.clone();
    request.agent_id = first.id.clone();
    if agents.len() == 1 && consented(app, &request, &person).await? {
        let code = issue_code(app, &request, &person).await?;
        return Ok(Back::of(app, &request).to(&[("code", &code)]));
    }
    let client = &signin.client_name;
    consent::ask(
        app,
        headers,
        signin.request.clone(),
        client,
        &agents,
        &person,
    )
    .await
}

/// Sends back `access_denied` for a person no agent admits, and audits it.
async fn refuse(app: &App, signin: &SignIn, person: &Person) -> Response {
    let mut r = signin.request.clone();
    if let [only] = signin.agents.as_slice() {
        r.agent_id = only.clone();
    }
    record(app, &r, &person.subject, &person.email, None).await;
    let who = if person.email.is_empty() {
        &person.subject
    } else {
        &person.email
    };
    let what = match signin.agents.len() {
        1 => "this agent",
        _ => "an agent of this gateway",
    };
    Back::of(app, &signin.request).error(
        "access_denied",
        &format!("{who} is not allowed to use {what} from an MCP client"),
    )
}

/// Of `ids`, the agents that still take sign-ins on the request's gateway and admit the
/// person.
pub(super) async fn admitting(
    app: &App,
    r: &Request,
    ids: &[String],
    person: &Person,
) -> ApiResult<Vec<AgentRow>> {
    let mut conn = app.store.read().await?;
    let gateway = gateways::by_id(&mut conn, &r.gateway_id).await?;
    let Some(gateway) = gateway.filter(|g| g.state == "active") else {
        return Ok(Vec::new());
    };
    Ok(candidates(&mut conn, &gateway)
        .await?
        .into_iter()
        .filter(|a| ids.contains(&a.id) && admits(a, &person.subject, &person.email))
        .collect())
}

/// Whether the person consented before to the request's client using its agent.
async fn consented(app: &App, r: &Request, person: &Person) -> ApiResult<bool> {
    let mut conn = app.store.read().await?;
    Ok(interactive::has_consent(&mut conn, &person.subject, &r.client_id, &r.agent_id).await?)
}

/// Issues the authorization code of a request the person consented to (a client named by its
/// metadata document is kept from now on, for the token endpoint; a registered client is
/// marked used, so it is never purged as unused).
pub(super) async fn issue_code(app: &App, r: &Request, person: &Person) -> ApiResult<String> {
    super::client_document::keep(app, &r.client_id).await?;
    let code = Code {
        request: r.clone(),
        subject: person.subject.clone(),
        email: person.email.clone(),
    };
    let value = random_token();
    let data = serde_json::to_string(&code).unwrap_or_default();
    let mut tx = app.store.write_unscoped().await?;
    let expires_at = now_ms() + CODE_SECS * 1000;
    let key = keys::hash(&value);
    let cipher = app.store.cipher();
    interactive::put_pending(
        tx.conn(),
        cipher,
        "code",
        &key,
        &r.workspace_id,
        &data,
        expires_at,
    )
    .await?;
    interactive::mark_client_used(tx.conn(), &r.client_id, now_ms()).await?;
    tx.commit().await?;
    Ok(value)
}
