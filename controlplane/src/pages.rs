//! The small self-contained HTML pages people open in a browser (provision links, the
//! upstream OAuth consent's return, interactive sign-in and consent): the page frame, the
//! escaping of what goes into it, how a failure reads on one, and why a provision link cannot
//! be used. Nothing here knows which door shows the page.

use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};

/// Why a provision link cannot be used, as the person reads it.
pub(crate) enum Refusal {
    Unknown,
    Used,
    Expired,
    /// A key posted without the form its person was shown after signing in.
    NotSignedIn,
}

impl Refusal {
    pub(crate) fn page(self) -> Response {
        let (status, text) = match self {
            Refusal::Unknown => (StatusCode::NOT_FOUND, "This link is not one this service gave out."),
            Refusal::Used => (StatusCode::GONE, "This link was already used. If your agent still asks for a credential, use the new link it gives you."),
            Refusal::Expired => (StatusCode::GONE, "This link has expired (links last ten minutes). Ask your agent again for a new one."),
            Refusal::NotSignedIn => (StatusCode::FORBIDDEN, "Nothing was stored: open the link and sign in first."),
        };
        page(status, "Link not usable", &format!("<p>{text}</p>"))
    }
}

/// A failure as a page: its Connect status and message (an internal fault logged, its details
/// not shown).
pub(crate) fn failure(e: &crate::error::ApiError) -> Response {
    if e.is_internal() {
        tracing::error!(error = %e, "Provision page failed.");
    }
    let status = StatusCode::from_u16(e.to_connect("").code.http_status())
        .unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    // The Connect message: an internal fault reads as one, without its details.
    let message = e.to_connect("").message;
    page(
        status,
        "Not available",
        &format!("<p>{}</p>", escape(&message)),
    )
}

/// A small self-contained page: never cached, never framed, never sending the link on.
pub(crate) fn page(status: StatusCode, title: &str, body: &str) -> Response {
    let html = format!(
        "<!doctype html><html><head><meta charset=\"utf-8\"><title>{title} · Portcullis</title>\
         <meta name=\"viewport\" content=\"width=device-width\"></head>\
         <body style=\"font-family:sans-serif;max-width:36em;margin:3em auto\"><h1>{title}</h1>{body}</body></html>"
    );
    (
        status,
        [
            (header::CONTENT_TYPE, "text/html; charset=utf-8"),
            (header::CACHE_CONTROL, "no-store"),
            (header::REFERRER_POLICY, "no-referrer"),
            (header::CONTENT_SECURITY_POLICY, "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'"),
        ],
        html,
    )
        .into_response()
}

/// Escapes text for HTML: element content and double-quoted attribute values.
pub(crate) fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}
