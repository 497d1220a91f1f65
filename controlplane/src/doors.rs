//! The whole HTTP surface on one router, above the doors it mounts: the service's own
//! endpoints (`/healthz`, `/ready`, `/metrics`), the Connect API and its REST variant
//! ([`crate::api`]), the MCP admin server ([`crate::mcp_admin`]), the provision pages
//! ([`crate::provision`]), the upstream OAuth consent's return ([`crate::oauth::flow`]) and
//! interactive access ([`crate::interactive`]). Any other route is answered with a Connect
//! error.

use std::sync::Arc;

use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use portcullis_shared::{Code, ConnectError};

use crate::error::connect_response;
use crate::App;

pub fn router(app: Arc<App>) -> Router {
    Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .route("/ready", get(ready))
        .route("/metrics", get(metrics))
        .merge(crate::api::routes())
        .merge(crate::mcp_admin::routes())
        .merge(crate::provision::routes())
        .merge(crate::oauth::flow::routes())
        .merge(crate::interactive::routes())
        .fallback(fallback)
        .with_state(app)
}

async fn ready(State(app): State<Arc<App>>) -> Response {
    if app.store.ping().await {
        (StatusCode::OK, "ready").into_response()
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, "database unavailable").into_response()
    }
}

async fn metrics(State(app): State<Arc<App>>, headers: axum::http::HeaderMap) -> Response {
    let authorization = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok());
    let token = app.config.metrics_token.as_deref();
    if !portcullis_shared::metrics_access::allowed(crate::peer::current(), authorization, token) {
        let err = ConnectError::new(
            Code::PermissionDenied,
            portcullis_shared::metrics_access::REFUSED,
        );
        return connect_response(&err, "");
    }
    (
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        app.metrics.render(),
    )
        .into_response()
}

async fn fallback() -> Response {
    let err = ConnectError::new(
        Code::Unimplemented,
        "no such route; operations are POST /<service>/<Operation>",
    );
    connect_response(&err, "")
}
