//! `/oauth2/authorize` and the OpenID provider's return to `/oauth2/signin/callback`. Until
//! the client and its redirect URI are known, a problem is shown to the person as a page;
//! after that it goes back to the client as an OAuth error (RFC 6749 §4.1.2.1), with `state`
//! and `iss` (RFC 9207).

use std::collections::HashMap;
use std::sync::Arc;

use axum::extract::{Query, RawQuery, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect, Response};
use portcullis_shared::keys;
use serde::{Deserialize, Serialize};

use super::signin;
use super::{
    admits, gateway_of, random_token, record, takes_sign_ins, Code, Request, CODE_SECS, SIGNIN_SECS,
};
use crate::error::{invalid, ApiResult};
use crate::provision::{escape, failure, page};
use crate::store::agents::{self, AgentRow};
use crate::store::{gateways, interactive, now_ms, Conn};
use crate::App;

/// A sign-in under way at the OpenID provider.
#[derive(Serialize, Deserialize)]
struct SignIn {
    request: Request,
    issuer: signin::Issuer,
    endpoints: signin::Endpoints,
    verifier: String,
    nonce: String,
}

/// The way back to the MCP client.
struct Back<'a> {
    redirect_uri: &'a str,
    state: Option<&'a str>,
    issuer: &'a str,
}

impl Back<'_> {
    fn to(&self, params: &[(&str, &str)]) -> Response {
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

    fn error(&self, error: &str, description: &str) -> Response {
        self.to(&[("error", error), ("error_description", description)])
    }
}

type Params = HashMap<String, String>;

fn param<'a>(q: &'a Params, key: &str) -> Option<&'a str> {
    q.get(key).map(String::as_str).filter(|v| !v.is_empty())
}

pub async fn authorize(State(app): State<Arc<App>>, RawQuery(raw): RawQuery) -> Response {
    let raw = raw.unwrap_or_default();
    let q: Params = url::form_urlencoded::parse(raw.as_bytes())
        .into_owned()
        .collect();
    begin(&app, &q, &raw).await.unwrap_or_else(|e| failure(&e))
}

/// Checks the client's request, settles the agent and sends the person to sign in.
async fn begin(app: &App, q: &Params, raw: &str) -> ApiResult<Response> {
    let client_id = param(q, "client_id").ok_or_else(|| invalid("client_id is missing"))?;
    let client = super::client_document::client(app, client_id)
        .await?
        .ok_or_else(|| invalid(format!("client {client_id:?} is not registered here")))?;
    let mut conn = app.store.read().await?;
    let registered: Vec<String> = serde_json::from_str(&client.redirect_uris).unwrap_or_default();
    let redirect_uri = match (param(q, "redirect_uri"), registered.as_slice()) {
        (Some(u), _) if registered.iter().any(|r| r == u) => u.to_string(),
        (Some(_), _) => return Err(invalid("redirect_uri is not one the client registered")),
        (None, [only]) => only.clone(),
        (None, _) => {
            return Err(invalid(
                "redirect_uri is required: the client registered several",
            ))
        }
    };
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
    let challenge = param(q, "code_challenge").filter(|c| {
        (43..=128).contains(&c.len())
            && c.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-._~".contains(&b))
    });
    let Some(challenge) = challenge.filter(|_| param(q, "code_challenge_method") == Some("S256"))
    else {
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
    let gateway = match gateway_of(resource) {
        Some(id) => gateways::by_id(&mut conn, id).await?,
        None => None,
    };
    let Some(gateway) = gateway.filter(|g| g.state == "active") else {
        return Ok(back.error(
            "invalid_target",
            &format!("{resource} is not the MCP URL of an active gateway"),
        ));
    };
    let candidates = candidates(&mut conn, &gateway).await?;
    let agent = match (param(q, "agent"), candidates.as_slice()) {
        (Some(id), _) => candidates.iter().find(|a| a.id == id),
        (None, [only]) => Some(only),
        (None, []) => None,
        (None, several) => return Ok(choice(&app.base_url, &gateway.name, several, raw)),
    };
    let Some(agent) = agent else {
        return Ok(back.error(
            "access_denied",
            &format!(
                "no agent on gateway '{}' admits interactive sign-in",
                gateway.name
            ),
        ));
    };
    let issuer = signin::issuer_of(&mut conn, agent).await?;
    drop(conn);
    let provider = signin::provider(app, &gateway.workspace_id, &issuer).await?;
    let state = random_token();
    let nonce = random_token();
    let (url, verifier) = signin::authorization_url(&provider, &state, &nonce);
    let pending = SignIn {
        request: Request {
            workspace_id: gateway.workspace_id.clone(),
            gateway_id: gateway.id.clone(),
            agent_id: agent.id.clone(),
            client_id: client.client_id,
            redirect_uri: redirect_uri.clone(),
            code_challenge: challenge.to_string(),
            state: back.state.map(str::to_string),
            resource: resource.to_string(),
        },
        issuer,
        endpoints: provider.endpoints.clone(),
        verifier,
        nonce,
    };
    let data = serde_json::to_string(&pending).unwrap_or_default();
    let mut tx = app.store.write_unscoped().await?;
    let expires_at = now_ms() + SIGNIN_SECS * 1000;
    let (ws, key) = (&gateway.workspace_id, keys::hash(&state));
    interactive::put_pending(
        tx.conn(),
        app.store.cipher(),
        "signin",
        &key,
        ws,
        &data,
        expires_at,
    )
    .await?;
    tx.commit().await?;
    Ok(Redirect::to(&url).into_response())
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

/// A page where the person picks the agent to use.
fn choice(base_url: &str, gateway: &str, agents: &[AgentRow], raw: &str) -> Response {
    let items: String = agents
        .iter()
        .map(|a| {
            let href = format!(
                "{base_url}/oauth2/authorize?{raw}&agent={}",
                url::form_urlencoded::byte_serialize(a.id.as_bytes()).collect::<String>()
            );
            format!(
                "<li><a href=\"{}\">{}</a></li>",
                escape(&href),
                escape(&a.name)
            )
        })
        .collect();
    page(
        StatusCode::OK,
        "Choose an agent",
        &format!(
            "<p>Several agents on gateway <b>{}</b> can be used from your MCP client. Which one \
             do you want to use?</p><ul>{items}</ul>",
            escape(gateway)
        ),
    )
}

pub async fn signed_in(State(app): State<Arc<App>>, Query(q): Query<Params>) -> Response {
    finish(&app, &q).await.unwrap_or_else(|e| failure(&e))
}

/// The person is back from the OpenID provider: admit them, issue the grant and the code.
async fn finish(app: &App, q: &Params) -> ApiResult<Response> {
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
    let back = Back {
        redirect_uri: &r.redirect_uri,
        state: r.state.as_deref(),
        issuer: &app.base_url,
    };
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
    let person = match signin::person(
        app,
        &provider,
        code.to_string(),
        signin.verifier.clone(),
        &signin.nonce,
    )
    .await
    {
        Ok(p) => p,
        Err(e) => return Ok(back.error("access_denied", &e.to_string())),
    };
    let mut conn = app.store.read().await?;
    let agent = agents::get(&mut conn, &r.workspace_id, &r.agent_id).await?;
    drop(conn);
    if !agent.is_some_and(|a| admits(&a, &person.subject, &person.email)) {
        record(app, r, &person.subject, &person.email, None).await;
        let who = if person.email.is_empty() {
            &person.subject
        } else {
            &person.email
        };
        return Ok(back.error(
            "access_denied",
            &format!("{who} is not allowed to use this agent from an MCP client"),
        ));
    }
    let code = Code {
        request: signin.request.clone(),
        subject: person.subject,
        email: person.email,
    };
    let value = random_token();
    let data = serde_json::to_string(&code).unwrap_or_default();
    let mut tx = app.store.write_unscoped().await?;
    let expires_at = now_ms() + CODE_SECS * 1000;
    let key = keys::hash(&value);
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
    tx.commit().await?;
    Ok(back.to(&[("code", &value)]))
}
