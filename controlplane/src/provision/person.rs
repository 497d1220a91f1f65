//! A provision link is its person's alone (DESIGN §24): before a link an agent's call made does
//! anything, the person who opened it signs in at the OpenID provider of that agent's people
//! (the one interactive access uses), and they must be the link's subject. Someone else who
//! got hold of the link — forwarded, pasted in a shared chat, read over a shoulder — cannot
//! store their key or their OAuth grant in the person's name: they are shown who the link is
//! not for, it is audited, and the link stays usable for its person.
//!
//! After the sign-in, an API-key link shows its form with a one-time form token (the form
//! posts it back; nothing else stores a key) and an OAuth link goes on to the provider.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect, Response};
use portcullis_shared::audit::catalog::CredentialProvisionRefused;
use portcullis_shared::audit::{results, ResourceRef};
use portcullis_shared::keys;
use serde::{Deserialize, Serialize};

use super::{open, Purpose};
use crate::error::ApiResult;
use crate::pages::{escape, page, Refusal};
use crate::signin::{self, random_token, Endpoints, Issuer, Person};
use crate::store::provision::ProvisionRow;
use crate::store::{agents, interactive, now_ms};
use crate::App;

/// The pending sign-in of a provision link, keyed by its `state`.
const SIGNING_IN: &str = "provision_signin";
/// The form a signed-in person was shown, keyed by its form token.
const FORM: &str = "provision_form";
/// A sign-in must come back within ten minutes (and before the link expires).
const SIGNIN_MS: i64 = 600_000;

/// A provision link's sign-in under way.
#[derive(Serialize, Deserialize)]
struct SignIn {
    /// The link's own token: the page after the sign-in posts to `/provision/{token}`.
    token: String,
    issuer: Issuer,
    endpoints: Endpoints,
    verifier: String,
    nonce: String,
}

/// Sends the person to sign in before the link `token` does anything.
pub(super) async fn sign_in(app: &App, token: &str, row: &ProvisionRow) -> ApiResult<Response> {
    if row.agent_id.is_empty() {
        return Ok(page(
            StatusCode::GONE,
            "Link not usable",
            "<p>This link was made before links were bound to their person. Ask your agent \
             again for a new one.</p>",
        ));
    }
    let mut conn = app.store.read().await?;
    let Some(agent) = agents::get(&mut conn, &row.workspace_id, &row.agent_id).await? else {
        return Ok(page(
            StatusCode::GONE,
            "Link not usable",
            "<p>The agent that asked for this link no longer exists.</p>",
        ));
    };
    let issuer = signin::issuer_of(&mut conn, &agent).await?;
    drop(conn);
    let provider = signin::provider(app, &row.workspace_id, &issuer).await?;
    let state = random_token();
    let nonce = random_token();
    let (url, verifier) = signin::authorization_url(&provider, &state, &nonce);
    let pending = SignIn {
        token: token.to_string(),
        issuer,
        endpoints: provider.endpoints.clone(),
        verifier,
        nonce,
    };
    let data = serde_json::to_string(&pending).unwrap_or_default();
    let expires_at = row.expires_at.min(now_ms() + SIGNIN_MS);
    let mut tx = app.store.write_unscoped().await?;
    let (cipher, key) = (app.store.cipher(), keys::hash(&state));
    let ws = &row.workspace_id;
    interactive::put_pending(tx.conn(), cipher, SIGNING_IN, &key, ws, &data, expires_at).await?;
    tx.commit().await?;
    Ok(Redirect::to(&url).into_response())
}

/// The person is back from the OpenID provider with `state`; `None` when `state` is not a
/// provision link's sign-in.
pub async fn signed_in(
    app: &App,
    state: &str,
    code: Option<&str>,
    error: Option<&str>,
) -> ApiResult<Option<Response>> {
    let mut tx = app.store.write_unscoped().await?;
    let cipher = app.store.cipher();
    let key = keys::hash(state);
    let taken = interactive::take_pending(tx.conn(), cipher, SIGNING_IN, &key).await?;
    tx.commit().await?;
    let Some((data, expires_at)) = taken else {
        return Ok(None);
    };
    let signin: SignIn =
        serde_json::from_str(&data).map_err(|_| crate::error::corrupt("pending sign-in"))?;
    let failed = |why: &str| {
        let body = format!(
            "<p>The sign-in did not complete: {}. Open the link again to retry.</p>",
            escape(why)
        );
        page(StatusCode::FORBIDDEN, "Not signed in", &body)
    };
    if expires_at < now_ms() {
        return Ok(Some(failed("it took longer than ten minutes")));
    }
    if let Some(error) = error {
        return Ok(Some(failed(error)));
    }
    let Some(code) = code else {
        return Ok(Some(failed("the provider's answer has no code")));
    };
    let (row, purpose) = match open(app, &signin.token).await? {
        Ok(found) => found,
        Err(refusal) => return Ok(Some(refusal.page())),
    };
    let ws = &row.workspace_id;
    let provider = signin::provider_at(app, ws, &signin.issuer, signin.endpoints).await?;
    let code = code.to_string();
    let person = match signin::person(app, &provider, code, signin.verifier, &signin.nonce).await {
        Ok(p) => p,
        Err(e) => return Ok(Some(failed(&e.to_string()))),
    };
    if !is_the_person(&row.subject, &person) {
        refused(app, &row, &person).await;
        return Ok(Some(not_yours(&person)));
    }
    Ok(Some(match purpose {
        Purpose::Key(c) => form(app, &signin.token, &row, &c.name, c.owner).await?,
        Purpose::Consent => match crate::oauth::flow::start(app, &row).await? {
            Ok(redirect) | Err(redirect) => redirect,
        },
    }))
}

/// Whether the signed-in person is the one the link was made for. An OpenID act-as subject
/// was verified by the same provider, so its `sub` must match. An HMAC subject
/// (`<sub>|hmac:<agent>`) is what the agent asserted: the person's `sub` or verified email must
/// be it.
pub(crate) fn is_the_person(subject: &str, person: &Person) -> bool {
    match subject.split_once("|hmac:") {
        None => person.subject == subject,
        Some((asserted, _agent)) => {
            person.subject == asserted
                || (!person.email.is_empty() && person.email.eq_ignore_ascii_case(asserted))
        }
    }
}

/// The page for someone the link was not made for.
fn not_yours(person: &Person) -> Response {
    let who = match person.email.as_str() {
        "" => &person.subject,
        email => email,
    };
    let body = format!(
        "<p>This link was made for another person, and you signed in as <b>{}</b>. Nothing was \
         stored. If your agent asked you for a credential, use the link it gave you.</p>",
        escape(who)
    );
    page(StatusCode::FORBIDDEN, "Not your link", &body)
}

/// Records that someone other than its person opened a link.
async fn refused(app: &App, row: &ProvisionRow, person: &Person) {
    let resource = ResourceRef {
        kind: row.owner_kind.clone(),
        id: row.owner_id.clone(),
        ..Default::default()
    };
    let payload = CredentialProvisionRefused {
        connection_id: row.owner_id.clone(),
        subject: row.subject.clone(),
        agent_id: row.agent_id.clone(),
        signed_in_subject: person.subject.clone(),
        signed_in_email: person.email.clone(),
    };
    let mut event =
        crate::audit::person_event(&row.workspace_id, &person.subject, resource, payload);
    event.result = results::DENIED.into();
    if let Err(e) = crate::audit::store(&app.store, &app.audit, vec![event]).await {
        tracing::error!(error = %e, "Could not record the refused provisioning's audit event.");
    }
    tracing::warn!(connection_id = %row.owner_id, "A provision link was opened by someone other than its person.");
}

/// The API-key form, for the signed-in person only: it carries a one-time form token.
async fn form(
    app: &App,
    token: &str,
    row: &ProvisionRow,
    name: &str,
    owner: crate::store::credentials::Owner,
) -> ApiResult<Response> {
    let form_token = random_token();
    let mut tx = app.store.write_unscoped().await?;
    let (cipher, key) = (app.store.cipher(), keys::hash(&form_token));
    let (ws, link) = (&row.workspace_id, &row.token_hash);
    interactive::put_pending(tx.conn(), cipher, FORM, &key, ws, link, row.expires_at).await?;
    tx.commit().await?;
    // A per-user connection is a model's or a tool's.
    let what = owner.as_str();
    let body = format!(
        "<p>Your agent needs your own API key for the {what} <b>{}</b> to act for you \
         (<code>{}</code>). It is stored encrypted, used only for your calls, and never shown \
         again.</p>\
         <form method=\"post\" action=\"{}/provision/{token}\">\
         <input type=\"hidden\" name=\"form_token\" value=\"{form_token}\">\
         <label>API key <input type=\"password\" name=\"api_key\" autocomplete=\"off\" \
         required></label> <button type=\"submit\">Save</button></form>",
        escape(name),
        escape(&row.subject),
        escape(&app.base_url),
    );
    Ok(page(StatusCode::OK, "Provide your credential", &body))
}

/// Uses up the form token a key was posted with; whether it was shown for this link.
pub(super) async fn take_form(
    conn: &mut crate::store::Conn,
    app: &App,
    form_token: &str,
    row: &ProvisionRow,
) -> ApiResult<Result<(), Refusal>> {
    if form_token.is_empty() {
        return Ok(Err(Refusal::NotSignedIn));
    }
    let key = keys::hash(form_token);
    let taken = interactive::take_pending(conn, app.store.cipher(), FORM, &key).await?;
    Ok(match taken {
        Some((link, expires_at)) if link == row.token_hash && expires_at > now_ms() => Ok(()),
        _ => Err(Refusal::NotSignedIn),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn person(subject: &str, email: &str) -> Person {
        Person {
            subject: subject.into(),
            email: email.into(),
        }
    }

    #[test]
    fn an_openid_subject_is_matched_by_sub_only() {
        assert!(is_the_person("u-1", &person("u-1", "")));
        assert!(!is_the_person("u-1", &person("u-2", "u-1")));
        assert!(!is_the_person("u-1", &person("U-1", "")));
    }

    #[test]
    fn an_hmac_subject_is_matched_by_sub_or_verified_email() {
        let link = "ann@example.com|hmac:0b9f";
        assert!(is_the_person(link, &person("x", "Ann@Example.com")));
        assert!(is_the_person("u1|hmac:0b9f", &person("u1", "")));
        assert!(!is_the_person(link, &person("x", "bob@example.com")));
        assert!(!is_the_person(link, &person("x", "")), "no email, no match");
        assert!(!is_the_person("u1|hmac:0b9f", &person("u1|hmac:0b9f", "")));
    }
}
