//! The page a person opens from a `provision_url` (DESIGN §14): `GET /provision/{token}`
//! first signs them in and checks they are the link's person ([`person`]), then shows a form
//! for their API key of one per-user connection; `POST` stores it sealed for that person and
//! uses the link up. On an OAuth connection the same link (after the sign-in) and an
//! administrator's `/connect/{token}` send the browser to the provider instead
//! ([`crate::oauth::flow`]). A link works once, for ten minutes; the key is never shown back,
//! logged or audited.

mod person;

pub use person::signed_in;

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::Response;
use axum::routing::get;
use axum::Router;
use portcullis_shared::audit::catalog::{ConnectionGrant, CredentialProvisioned};
use portcullis_shared::audit::ResourceRef;
use portcullis_shared::keys;

use crate::error::ApiResult;
use crate::pages::{escape, failure, page, Refusal};
use crate::per_user::{self, PerUser};
use crate::store::credentials::{self, Owner};
use crate::store::{now_ms, provision};
use crate::App;

/// Longest key accepted.
const MAX_KEY_BYTES: usize = 16 * 1024;

pub fn routes() -> Router<Arc<App>> {
    Router::new()
        .route("/provision/{token}", get(show).post(save))
        .route("/connect/{token}", get(show))
}

/// What a link is for: a person's key, or a consent at the provider.
enum Purpose {
    Key(PerUser),
    Consent,
}

/// The link's row and what it is for, or why it cannot be used.
async fn open(
    app: &App,
    token: &str,
) -> ApiResult<Result<(provision::ProvisionRow, Purpose), Refusal>> {
    let mut conn = app.store.read().await?;
    let Some(row) = provision::get(&mut conn, &keys::hash(token)).await? else {
        return Ok(Err(Refusal::Unknown));
    };
    if row.used_at.is_some() {
        return Ok(Err(Refusal::Used));
    }
    if row.expires_at <= now_ms() {
        return Ok(Err(Refusal::Expired));
    }
    // An administrator's shared consent has no person.
    if row.subject.is_empty() {
        return Ok(Ok((row, Purpose::Consent)));
    }
    let owner = Owner::parse(&row.owner_kind).unwrap_or(Owner::Tool);
    let c = per_user::per_user(&mut conn, &row.workspace_id, owner, &row.owner_id).await?;
    let purpose = if c.oauth {
        Purpose::Consent
    } else {
        Purpose::Key(c)
    };
    Ok(Ok((row, purpose)))
}

async fn show(State(app): State<Arc<App>>, Path(token): Path<String>) -> Response {
    let shown = match open(&app, &token).await {
        Ok(Ok((row, _))) if row.needs_person() => person::sign_in(&app, &token, &row).await,
        Ok(Ok((row, Purpose::Consent))) => crate::oauth::flow::start(&app, &row)
            .await
            .map(|(Ok(redirect) | Err(redirect))| redirect),
        // Only a link made for a person asks for a key.
        Ok(Ok((_, Purpose::Key(_)))) => Ok(Refusal::Unknown.page()),
        Ok(Err(refusal)) => Ok(refusal.page()),
        Err(e) => Err(e),
    };
    shown.unwrap_or_else(|e| failure(&e))
}

async fn save(State(app): State<Arc<App>>, Path(token): Path<String>, body: Bytes) -> Response {
    let field = |name: &str| {
        url::form_urlencoded::parse(&body)
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.trim().to_string())
            .unwrap_or_default()
    };
    let (key, form_token) = (field("api_key"), field("form_token"));
    // Sent as a header value: visible ASCII only, so what is stored can always be sent.
    if key.is_empty() || key.len() > MAX_KEY_BYTES || !key.bytes().all(|b| b.is_ascii_graphic()) {
        let text =
            "<p>Enter the API key: up to 16 KiB of visible ASCII characters, without spaces.</p>";
        return page(StatusCode::BAD_REQUEST, "No usable key", text);
    }
    match store(&app, (&token, &form_token), &key).await {
        Ok(Ok(name)) => page(
            StatusCode::OK,
            "Saved",
            &format!(
                "<p>Your key for <b>{}</b> is stored. Go back to your agent and try again.</p>",
                escape(&name)
            ),
        ),
        Ok(Err(refusal)) => refusal.page(),
        Err(e) => failure(&e),
    }
}

/// Uses the link and the form its person was shown up and stores the key, in one
/// transaction; the connection's name.
async fn store(
    app: &App,
    (token, form_token): (&str, &str),
    key: &str,
) -> ApiResult<Result<String, Refusal>> {
    let (row, c) = match open(app, token).await? {
        Ok((row, Purpose::Key(c))) if row.needs_person() => (row, c),
        Ok((_, Purpose::Key(_))) => return Ok(Err(Refusal::Unknown)),
        Ok((_, Purpose::Consent)) => {
            return Err(crate::error::invalid(
                "this connection takes consent at the provider, not a key: open the link",
            ))
        }
        Err(refusal) => return Ok(Err(refusal)),
    };
    let values = c.secret(key).map_err(crate::error::invalid)?;
    let mut tx = app.store.write(&row.workspace_id).await?;
    if let Err(refusal) = person::take_form(tx.conn(), app, form_token, &row).await? {
        return Ok(Err(refusal));
    }
    if !provision::take(tx.conn(), &row.token_hash, now_ms()).await? {
        return Ok(Err(Refusal::Used));
    }
    credentials::put(
        tx.conn(),
        app.store.cipher(),
        &row.workspace_id,
        c.owner,
        &c.id,
        &row.subject,
        &values,
    )
    .await?;
    tx.commit().await?;
    let resource = ResourceRef {
        kind: c.owner.as_str().into(),
        id: c.id.clone(),
        name: c.name.clone(),
        ..Default::default()
    };
    let payload = CredentialProvisioned {
        grant: ConnectionGrant {
            connection_id: c.id.clone(),
            connection_name: c.name.clone(),
            subject: row.subject.clone(),
        },
        method: None,
    };
    let event = crate::audit::person_event(&row.workspace_id, &row.subject, resource, payload);
    if let Err(e) = crate::audit::store(&app.store, &app.audit, vec![event]).await {
        tracing::error!(error = %e, "Could not record the provisioning's audit event.");
    }
    tracing::info!(connection_id = %c.id, "A person stored their credential.");
    Ok(Ok(c.name))
}
