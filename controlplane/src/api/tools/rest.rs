//! The REST variant of the tool operations (`/v1/tools…`), with the same semantics: each path
//! assembles the operation's JSON body (path id, `workspace_id` from the query for reads and
//! deletes) and runs it through the same handler. A body is read only once the caller is
//! authenticated, so an anonymous caller cannot make this service read 2 MiB.

use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::extract::{Path, Query, State};
use axum::http::HeaderMap;
use axum::response::Response;
use axum::routing::{get, post};
use axum::Router;
use portcullis_shared::api::service::MGMT;
use serde_json::{Map, Value};

use crate::api::{invoke, Door, Input};
use crate::error::{invalid, ApiResult};
use crate::App;

#[derive(Debug, serde::Deserialize)]
pub struct WorkspaceQuery {
    #[serde(default)]
    workspace_id: Option<String>,
}

pub fn routes() -> Router<Arc<App>> {
    Router::new()
        .route("/v1/tools", post(create).get(list))
        .route("/v1/tools/{id}", get(read).patch(update).delete(remove))
        .route("/v1/tools/{id}/catalog/sync", post(sync))
        .route("/v1/tools/{id}/oauth/connect", post(connect))
        .route("/v1/tools/{id}/oauth/disconnect", post(disconnect))
}

async fn body_object(body: Body) -> ApiResult<Map<String, Value>> {
    let bytes = axum::body::to_bytes(body, super::super::MAX_BODY_BYTES)
        .await
        .map_err(|_| invalid("the request body is too large or unreadable"))?;
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Ok(Map::new());
    }
    match serde_json::from_slice(&bytes) {
        Ok(Value::Object(map)) => Ok(map),
        _ => Err(invalid("the request body must be a JSON object")),
    }
}

fn with_id(mut map: Map<String, Value>, id: &str) -> ApiResult<Bytes> {
    match map.get("connection_id") {
        Some(Value::String(given)) if given != id => {
            return Err(invalid(
                "connection_id in the body differs from the one in the path",
            ))
        }
        _ => {}
    }
    map.insert("connection_id".into(), Value::String(id.to_string()));
    Ok(Bytes::from(Value::Object(map).to_string()))
}

fn from_query(q: WorkspaceQuery, id: Option<&str>) -> ApiResult<Bytes> {
    let mut map = Map::new();
    let ws = q
        .workspace_id
        .ok_or_else(|| invalid("the workspace_id query parameter is required"))?;
    map.insert("workspace_id".into(), Value::String(ws));
    match id {
        Some(id) => with_id(map, id),
        None => Ok(Bytes::from(Value::Object(map).to_string())),
    }
}

/// Runs the operation; `body` (which may read the request) runs after authentication.
async fn run(
    app: &Arc<App>,
    op: &str,
    headers: &HeaderMap,
    body: impl std::future::Future<Output = ApiResult<Bytes>> + Send + 'static,
) -> Response {
    invoke(
        app,
        &format!("{MGMT}/{op}"),
        headers,
        Input::Built(Box::pin(body)),
        Door::Rest,
    )
    .await
}

async fn create(State(app): State<Arc<App>>, headers: HeaderMap, body: Body) -> Response {
    let body = async move {
        body_object(body)
            .await
            .map(|m| Bytes::from(Value::Object(m).to_string()))
    };
    run(&app, "CreateMCPServerConnection", &headers, body).await
}

async fn list(
    State(app): State<Arc<App>>,
    headers: HeaderMap,
    Query(q): Query<WorkspaceQuery>,
) -> Response {
    run(
        &app,
        "ListMCPServerConnections",
        &headers,
        std::future::ready(from_query(q, None)),
    )
    .await
}

async fn read(
    State(app): State<Arc<App>>,
    headers: HeaderMap,
    Path(id): Path<String>,
    Query(q): Query<WorkspaceQuery>,
) -> Response {
    run(
        &app,
        "GetMCPServerConnection",
        &headers,
        std::future::ready(from_query(q, Some(&id))),
    )
    .await
}

async fn remove(
    State(app): State<Arc<App>>,
    headers: HeaderMap,
    Path(id): Path<String>,
    Query(q): Query<WorkspaceQuery>,
) -> Response {
    run(
        &app,
        "DeleteMCPServerConnection",
        &headers,
        std::future::ready(from_query(q, Some(&id))),
    )
    .await
}

async fn update(
    State(app): State<Arc<App>>,
    headers: HeaderMap,
    Path(id): Path<String>,
    body: Body,
) -> Response {
    let body = async move { with_id(body_object(body).await?, &id) };
    run(&app, "UpdateMCPServerConnection", &headers, body).await
}

async fn sync(
    State(app): State<Arc<App>>,
    headers: HeaderMap,
    Path(id): Path<String>,
    body: Body,
) -> Response {
    let body = async move { with_id(body_object(body).await?, &id) };
    run(&app, "SyncMCPServerConnectionTools", &headers, body).await
}

async fn connect(
    State(app): State<Arc<App>>,
    headers: HeaderMap,
    Path(id): Path<String>,
    body: Body,
) -> Response {
    let body = async move { with_id(body_object(body).await?, &id) };
    run(&app, "BeginMCPServerOAuthConnect", &headers, body).await
}

async fn disconnect(
    State(app): State<Arc<App>>,
    headers: HeaderMap,
    Path(id): Path<String>,
    body: Body,
) -> Response {
    let body = async move { with_id(body_object(body).await?, &id) };
    run(&app, "DisconnectMCPServerOAuth", &headers, body).await
}
