//! The consent page (DESIGN §24), between sign-in and the code: it names the client (marked
//! unverified: every client here registered itself or is named by its own URL), where the
//! person is sent back, the gateway, and the agent (a choice when several admit them). Approve
//! and Deny post to `/oauth2/consent` with a one-time token that names the pending consent and
//! is bound to a cookie of the browser the page was shown in (HttpOnly, SameSite=Lax, scoped to
//! `/oauth2/`, Secure on an HTTPS control plane), so no other site can post it. The page cannot
//! be framed and runs no script. Approving remembers the consent for the person, client and
//! agent; denying sends the client `access_denied`.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::Response;
use portcullis_shared::keys;
use serde::{Deserialize, Serialize};

use super::authorize::{admitting, issue_code, param, Back, Params};
use super::{Request, SIGNIN_SECS};
use crate::error::{invalid, ApiResult};
use crate::pages::{escape, failure, page};
use crate::signin::{random_token, Person};
use crate::store::agents::AgentRow;
use crate::store::{gateways, interactive, now_ms};
use crate::App;

/// The cookie binding a consent form to the browser it was shown in.
const COOKIE: &str = "portcullis_consent";

/// A consent asked for: the request (its agent still open), the agents the person may choose,
/// who they are, and the SHA-256 of their browser's cookie.
#[derive(Serialize, Deserialize)]
struct Pending {
    request: Request,
    agents: Vec<String>,
    subject: String,
    email: String,
    browser: String,
}

/// Shows the consent page for a signed-in person whom `agents` (one or more) admit.
pub(super) async fn ask(
    app: &App,
    headers: &HeaderMap,
    request: Request,
    client: &str,
    agents: &[AgentRow],
    person: &Person,
) -> ApiResult<Response> {
    let mut conn = app.store.read().await?;
    let client = if client.is_empty() {
        &request.client_id
    } else {
        client
    };
    let gateway = gateways::by_id(&mut conn, &request.gateway_id)
        .await?
        .map(|g| g.name)
        .unwrap_or_default();
    drop(conn);
    let browser = cookie(headers).map_or_else(random_token, str::to_string);
    let csrf = random_token();
    let view = View {
        client,
        gateway: &gateway,
        person: if person.email.is_empty() {
            &person.subject
        } else {
            &person.email
        },
        redirect_uri: &request.redirect_uri,
        agents,
        action: &format!("{}/oauth2/consent", app.base_url),
        csrf: &csrf,
    };
    let response = view.render();
    let pending = Pending {
        request,
        agents: agents.iter().map(|a| a.id.clone()).collect(),
        subject: person.subject.clone(),
        email: person.email.clone(),
        browser: keys::hash(&browser),
    };
    let data = serde_json::to_string(&pending).unwrap_or_default();
    let ws = &pending.request.workspace_id;
    let mut tx = app.store.write_unscoped().await?;
    let expires_at = now_ms() + SIGNIN_SECS * 1000;
    let (cipher, key) = (app.store.cipher(), keys::hash(&csrf));
    interactive::put_pending(tx.conn(), cipher, "consent", &key, ws, &data, expires_at).await?;
    tx.commit().await?;
    let secure = app.base_url.starts_with("https://");
    Ok(with_cookie(response, &browser, secure))
}

/// `POST /oauth2/consent`: the person's answer.
pub async fn decide(State(app): State<Arc<App>>, headers: HeaderMap, body: Bytes) -> Response {
    let form: Params = url::form_urlencoded::parse(&body).into_owned().collect();
    settle(&app, &headers, &form)
        .await
        .unwrap_or_else(|e| failure(&e))
}

async fn settle(app: &App, headers: &HeaderMap, form: &Params) -> ApiResult<Response> {
    let refused = || {
        invalid(
            "this consent form is unknown, was already answered, or was not sent from the \
             browser it was shown in; start again from your MCP client",
        )
    };
    let browser = cookie(headers).ok_or_else(refused)?;
    let csrf = param(form, "csrf").ok_or_else(refused)?;
    let mut tx = app.store.write_unscoped().await?;
    let cipher = app.store.cipher();
    let taken = interactive::take_pending(tx.conn(), cipher, "consent", &keys::hash(csrf)).await?;
    tx.commit().await?;
    let (data, expires_at) = taken.ok_or_else(refused)?;
    let pending: Pending =
        serde_json::from_str(&data).map_err(|_| crate::error::corrupt("pending consent"))?;
    if !keys::hashes_equal(&keys::hash(browser), &pending.browser) {
        return Err(refused());
    }
    let back = Back::of(app, &pending.request);
    if expires_at < now_ms() {
        return Ok(back.error("access_denied", "the consent took longer than ten minutes"));
    }
    if param(form, "decision") != Some("approve") {
        tracing::info!(client_id = %pending.request.client_id, "A person declined an MCP client.");
        return Ok(back.error("access_denied", "the person declined"));
    }
    let chosen = match (param(form, "agent"), pending.agents.as_slice()) {
        (Some(id), ids) if ids.iter().any(|i| i == id) => id.to_string(),
        (None, [only]) => only.clone(),
        _ => return Ok(back.error("access_denied", "no agent was chosen")),
    };
    let person = Person {
        subject: pending.subject.clone(),
        email: pending.email.clone(),
    };
    let r = &pending.request;
    if admitting(app, r, std::slice::from_ref(&chosen), &person)
        .await?
        .is_empty()
    {
        return Ok(back.error("access_denied", "the agent no longer admits this person"));
    }
    let mut request = pending.request.clone();
    request.agent_id = chosen;
    let mut tx = app.store.write_unscoped().await?;
    let (ws, client) = (&request.workspace_id, &request.client_id);
    let now = now_ms();
    interactive::put_consent(
        tx.conn(),
        ws,
        &person.subject,
        client,
        &request.agent_id,
        now,
    )
    .await?;
    tx.commit().await?;
    tracing::info!(client_id = %request.client_id, agent_id = %request.agent_id, "A person approved an MCP client.");
    let code = issue_code(app, &request, &person).await?;
    Ok(Back::of(app, &request).to(&[("code", &code)]))
}

/// The browser's consent cookie, when it carries a well-formed value.
fn cookie(headers: &HeaderMap) -> Option<&str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(name, _)| *name == COOKIE)
        .map(|(_, value)| value)
        .filter(|v| v.len() == 43 && v.bytes().all(|b| b.is_ascii_alphanumeric()))
}

fn with_cookie(mut response: Response, value: &str, secure: bool) -> Response {
    let secure = if secure { "; Secure" } else { "" };
    let cookie = format!(
        "{COOKIE}={value}; Path=/oauth2/; Max-Age={SIGNIN_SECS}; HttpOnly; SameSite=Lax{secure}"
    );
    if let Ok(v) = HeaderValue::from_str(&cookie) {
        response.headers_mut().append(header::SET_COOKIE, v);
    }
    response
}

/// What the consent page shows.
struct View<'a> {
    client: &'a str,
    gateway: &'a str,
    person: &'a str,
    redirect_uri: &'a str,
    agents: &'a [AgentRow],
    action: &'a str,
    csrf: &'a str,
}

impl View<'_> {
    fn render(&self) -> Response {
        let agents = match self.agents {
            [one] => format!(
                "<p>Agent: <b>{}</b></p><input type=\"hidden\" name=\"agent\" value=\"{}\">",
                escape(&one.name),
                escape(&one.id)
            ),
            several => {
                let options: String = several
                    .iter()
                    .map(|a| {
                        format!(
                            "<li><label><input type=\"radio\" name=\"agent\" value=\"{}\" \
                             required> <b>{}</b></label></li>",
                            escape(&a.id),
                            escape(&a.name)
                        )
                    })
                    .collect();
                format!("<p>Which agent should it use?</p><ul>{options}</ul>")
            }
        };
        let body = format!(
            "<p><b>{client}</b> <em>(unverified)</em> asks to use gateway <b>{gateway}</b> as \
             you ({person}).</p><p>The client chose its own name and nobody has checked it. \
             Approve only if you just started this from an MCP client you trust.</p>\
             <p>Approving sends you back to <b>{host}</b>.</p>\
             <form method=\"post\" action=\"{action}\">{agents}\
             <input type=\"hidden\" name=\"csrf\" value=\"{csrf}\">\
             <button type=\"submit\" name=\"decision\" value=\"approve\">Approve</button> \
             <button type=\"submit\" name=\"decision\" value=\"deny\" formnovalidate>Deny\
             </button></form>",
            client = escape(self.client),
            gateway = escape(self.gateway),
            person = escape(self.person),
            host = escape(&redirect_host(self.redirect_uri)),
            action = escape(self.action),
            csrf = escape(self.csrf),
        );
        let mut response = page(StatusCode::OK, "Allow access?", &body);
        let policy = format!(
            "default-src 'none'; style-src 'unsafe-inline'; form-action 'self' {}; \
             frame-ancestors 'none'; base-uri 'none'",
            form_target(self.redirect_uri)
        );
        let headers = response.headers_mut();
        if let Ok(v) = HeaderValue::from_str(policy.trim()) {
            headers.insert(header::CONTENT_SECURITY_POLICY, v);
        }
        headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
        response
    }
}

/// Where approving sends the person, as they should read it: the redirect URI's host (and
/// port), or the app of a private scheme.
fn redirect_host(redirect_uri: &str) -> String {
    match url::Url::parse(redirect_uri) {
        Ok(u) if matches!(u.scheme(), "http" | "https") => match (u.host_str(), u.port()) {
            (Some(h), Some(p)) => format!("{h}:{p}"),
            (Some(h), None) => h.to_string(),
            (None, _) => redirect_uri.to_string(),
        },
        Ok(u) => format!("the app that handles {}: links", u.scheme()),
        Err(_) => redirect_uri.to_string(),
    }
}

/// The CSP source of the redirect URI: browsers hold a form's redirect to `form-action` too.
fn form_target(redirect_uri: &str) -> String {
    let Ok(url) = url::Url::parse(redirect_uri) else {
        return String::new();
    };
    match (url.scheme(), url.host()) {
        ("http" | "https", Some(url::Host::Domain(_) | url::Host::Ipv4(_))) => {
            url.origin().ascii_serialization()
        }
        (scheme, _) => format!("{scheme}:"),
    }
}

#[cfg(test)]
mod tests {
    use axum::http::{header, HeaderMap, HeaderValue};

    use super::{cookie, form_target, redirect_host};

    #[test]
    fn the_redirect_is_shown_by_host_and_allowed_as_a_form_target() {
        assert_eq!(redirect_host("https://app.example/cb?x=1"), "app.example");
        assert_eq!(redirect_host("http://127.0.0.1:9/callback"), "127.0.0.1:9");
        assert_eq!(
            redirect_host("com.example.app:/oauth"),
            "the app that handles com.example.app: links"
        );
        assert_eq!(form_target("https://app.example/cb"), "https://app.example");
        assert_eq!(form_target("http://127.0.0.1:9/cb"), "http://127.0.0.1:9");
        assert_eq!(form_target("http://[::1]:9/cb"), "http:");
        assert_eq!(form_target("com.example.app:/oauth"), "com.example.app:");
    }

    #[test]
    fn only_a_well_formed_consent_cookie_counts() {
        let good = "a".repeat(43);
        let mut h = HeaderMap::new();
        let line = format!("other=1; portcullis_consent={good}");
        h.insert(header::COOKIE, HeaderValue::from_str(&line).unwrap());
        assert_eq!(cookie(&h), Some(good.as_str()));
        let mut h = HeaderMap::new();
        h.insert(
            header::COOKIE,
            HeaderValue::from_static("portcullis_consent=short"),
        );
        assert_eq!(cookie(&h), None);
        assert_eq!(cookie(&HeaderMap::new()), None);
    }
}
