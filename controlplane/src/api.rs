//! The Connect unary JSON API: `POST /<service>/<Operation>`. A request is routed to its
//! operation, authenticated, its body parsed (unknown fields and wrong types refused, with the
//! field named), its `workspace_id` checked against the key, its permission checked, and then
//! handled. Every failure leaves through [`crate::error`].

mod actas;
pub(crate) mod agents;
mod audit;
pub(crate) mod auth;
pub mod core;
mod eventing;
pub(crate) mod exchange;
mod gateways;
mod grants;
pub mod guards;
mod keys;
mod models;
pub mod peruser;
mod pools;
mod quotas;
mod reach;
mod rules;
mod sync;
mod tools;
pub mod views;
mod workspace;

pub use workspace::{new_deployment, new_platform_key};

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Instant;

use axum::body::{Body, Bytes};
use axum::extract::{Path, State};
use axum::http::{header, HeaderMap, HeaderValue};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::Router;
use portcullis_shared::api::workspace::Permission;
use portcullis_shared::api::{service, WorkspaceScoped};
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;

pub use auth::Principal;
pub use core::{Call, Door};

use crate::error::{connect_response, invalid, ApiError, ApiResult};
use crate::store::Store;
use crate::App;

/// Largest request body accepted.
pub const MAX_BODY_BYTES: usize = 2 * 1024 * 1024;

/// What one request carries into its handler.
#[derive(Clone)]
pub struct Ctx {
    pub app: Arc<App>,
    pub principal: Arc<Principal>,
    pub request_id: Arc<str>,
}

impl Ctx {
    pub fn store(&self) -> &Store {
        &self.app.store
    }

    /// Records an event about a change this operation made (after it committed), as the
    /// platform key that made it; a failure to record is logged and does not fail the call.
    pub async fn record_change<P: portcullis_shared::audit::AuditPayload>(
        &self,
        resource: portcullis_shared::audit::ResourceRef,
        payload: P,
    ) {
        let Principal::Platform(p) = &*self.principal else {
            return;
        };
        let caller = crate::audit::Caller::PlatformKey {
            id: &p.key_id,
            name: &p.key_name,
        };
        let e = crate::audit::mgmt_event(&p.workspace_id, caller, "", "ok", &self.request_id);
        let mut e = e.typed(payload);
        e.resource = portcullis_shared::audit::ResourceRef {
            workspace_id: p.workspace_id.clone(),
            ..resource
        };
        e.request.http_route.clear();
        e.data_handling = Default::default();
        let event_type = P::EVENT_TYPE;
        if let Err(err) = crate::audit::store(&self.app.store, &self.app.audit, vec![e]).await {
            tracing::error!(request_id = %self.request_id, error = %err, event_type, "Could not record the change's audit event.");
        }
    }

    pub fn workspace_id(&self) -> &str {
        self.principal.workspace_id()
    }

    /// Fails unless the caller's key holds the permission.
    pub fn require(&self, permission: Permission) -> ApiResult<()> {
        self.principal.require(permission)
    }
}

/// Who may call an operation.
#[derive(Debug, Clone, Copy)]
pub enum Access {
    /// A platform key holding this permission.
    Platform(Permission),
    /// A gateway deployment token.
    Deployment,
    /// An agent API key.
    Agent,
}

type Reply = Pin<Box<dyn Future<Output = ApiResult<Value>> + Send>>;

pub struct Operation {
    access: Access,
    call: Box<dyn Fn(Ctx, Bytes) -> Reply + Send + Sync>,
}

/// Wraps a typed handler: parse the body, check its workspace, call, serialize the reply.
pub fn unary<Req, Resp, F, Fut>(access: Access, handler: F) -> Operation
where
    Req: DeserializeOwned + WorkspaceScoped + Send + 'static,
    Resp: Serialize + 'static,
    F: Fn(Ctx, Req) -> Fut + Send + Sync + Copy + 'static,
    Fut: Future<Output = ApiResult<Resp>> + Send + 'static,
{
    Operation {
        access,
        call: Box::new(move |ctx, body| {
            Box::pin(async move {
                // Bodies of the sync service are the gateway's own, written without empty
                // strings for absent fields; only bodies people and clients send are scanned.
                let empty_is_absent = matches!(access, Access::Platform(_) | Access::Agent);
                let req: Req = parse_body(&body, empty_is_absent.then_some(Req::EMPTY_IS_A_VALUE))?;
                check_workspace(&ctx, req.workspace_id())?;
                let reply = handler(ctx, req).await?;
                serde_json::to_value(reply).map_err(|e| ApiError::Internal(e.to_string()))
            })
        }),
    }
}

/// Bodies past this are cut off without reading further (the connection is closed).
const DRAIN_LIMIT: usize = 64 * 1024 * 1024;

/// Reads the body, refusing more than [`MAX_BODY_BYTES`]. An oversized body is still read (up
/// to [`DRAIN_LIMIT`]) and discarded, so the client finishes sending and receives the error
/// rather than a reset connection.
async fn read_body(body: Body) -> ApiResult<Bytes> {
    use http_body_util::BodyExt;
    let mut body = body;
    let mut buf = Vec::new();
    let mut seen = 0usize;
    while let Some(frame) = body.frame().await {
        let frame =
            frame.map_err(|e| invalid(format!("the request body could not be read: {e}")))?;
        let Ok(data) = frame.into_data() else {
            continue;
        };
        seen += data.len();
        if seen <= MAX_BODY_BYTES {
            buf.extend_from_slice(&data);
        } else if seen > DRAIN_LIMIT {
            break;
        }
    }
    if seen > MAX_BODY_BYTES {
        return Err(invalid(format!(
            "the request body is larger than {MAX_BODY_BYTES} bytes"
        )));
    }
    Ok(Bytes::from(buf))
}

/// Parses a request body into its type, naming the field that is wrong. With `keep_empty`,
/// an empty string in a top-level field not listed there counts as not sent (proto3 JSON's
/// rule: an empty string and a missing field are the same).
fn parse_body<T: DeserializeOwned>(body: &[u8], keep_empty: Option<&[&str]>) -> ApiResult<T> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Err(invalid("the request body is empty; send a JSON object"));
    }
    let has_empty = body.windows(2).any(|w| w == b"\"\"");
    let result = match keep_empty {
        Some(keep) if has_empty => {
            let mut value: Value = serde_json::from_slice(body).map_err(|e| {
                invalid(format!(
                    "invalid request body: {}",
                    crate::error::strip_position(&e.to_string())
                ))
            })?;
            if let Value::Object(fields) = &mut value {
                fields.retain(|k, v| v.as_str() != Some("") || keep.contains(&k.as_str()));
            }
            serde_path_to_error::deserialize(value)
        }
        _ => {
            // The plain parse is the fast path (a gateway's audit batch is its largest body);
            // only a body it refuses is parsed again to name the field that is wrong.
            let mut de = serde_json::Deserializer::from_slice(body);
            if let Ok(parsed) = <T as serde::Deserialize>::deserialize(&mut de) {
                de.end().map_err(|_| {
                    invalid("invalid request body: trailing data after the JSON object")
                })?;
                return Ok(parsed);
            }
            serde_path_to_error::deserialize(&mut serde_json::Deserializer::from_slice(body))
        }
    };
    result.map_err(|e| {
        invalid(format!(
            "invalid request body: {}",
            crate::error::field_error(e)
        ))
    })
}

fn check_workspace(ctx: &Ctx, requested: Option<&str>) -> ApiResult<()> {
    match requested {
        Some(id) if id != ctx.workspace_id() => Err(ApiError::PermissionDenied(format!(
            "this key is not valid for workspace '{id}'"
        ))),
        _ => Ok(()),
    }
}

/// Every operation, by `<service>/<Operation>`.
pub struct Registry {
    operations: HashMap<String, Operation>,
    /// Method name → path, for doors that name operations by method (the MCP admin tools).
    paths: HashMap<String, String>,
}

impl Registry {
    pub fn new() -> Self {
        let mut operations = HashMap::new();
        let mut add = |svc: &str, list: Vec<(&str, Operation)>| {
            for (name, op) in list {
                operations.insert(format!("{svc}/{name}"), op);
            }
        };
        add(service::MGMT, models::operations());
        add(service::MGMT, pools::operations());
        add(service::MGMT, quotas::operations());
        add(service::MGMT, gateways::operations());
        add(service::MGMT, tools::operations());
        add(service::MGMT, tools::catalog::operations());
        add(service::MGMT, tools::adapters::operations());
        add(service::MGMT, workspace::operations());
        add(service::AGENTS, agents::operations());
        add(service::AGENTS, actas::operations());
        add(service::AGENTS, keys::operations());
        add(service::AGENTS, exchange::operations());
        add(service::AGENTS, reach::operations());
        add(service::AGENTS, grants::operations());
        add(service::RULES, rules::operations());
        add(service::RULES, guards::operations());
        add(service::SYNC, sync::operations());
        add(service::SYNC, audit::sync_operations());
        add(service::SYNC, quotas::sync_operations());
        add(service::SYNC, peruser::sync_operations());
        add(service::MGMT, peruser::operations());
        add(service::AUDIT, audit::operations());
        add(service::EVENTING, eventing::operations());
        let paths = operations
            .keys()
            .map(|p| {
                (
                    p.rsplit('/').next().unwrap_or_default().to_string(),
                    p.clone(),
                )
            })
            .collect();
        Self { operations, paths }
    }

    /// The operation at `path`, or `unimplemented`.
    fn get(&self, path: &str) -> ApiResult<&Operation> {
        self.operations.get(path).ok_or_else(|| {
            ApiError::Unimplemented(format!(
                "unknown operation {path}: this server does not implement it"
            ))
        })
    }

    /// The path of the operation with this method name (`GetGateway` →
    /// `svc.mgmt.v1.ManagementService/GetGateway`).
    pub fn path_of(&self, method: &str) -> Option<&str> {
        self.paths.get(method).map(String::as_str)
    }

    /// Operation paths, sorted.
    pub fn paths(&self) -> Vec<&str> {
        let mut paths: Vec<&str> = self.operations.keys().map(String::as_str).collect();
        paths.sort_unstable();
        paths
    }
}

impl Default for Registry {
    fn default() -> Self {
        Self::new()
    }
}

/// The Connect API's routes (`POST /<service>/<Operation>`, the audit event stream) and its
/// REST variant's, which the router of every door mounts.
pub fn routes() -> Router<Arc<App>> {
    Router::new()
        .route(
            "/svc.audit.v1.AuditService/StreamEvents",
            post(audit::stream::stream_events),
        )
        .route("/{service}/{operation}", post(dispatch))
        .merge(tools::rest::routes())
}

async fn dispatch(
    State(app): State<Arc<App>>,
    Path((svc, operation)): Path<(String, String)>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    invoke(
        &app,
        &format!("{svc}/{operation}"),
        &headers,
        Input::Connect(body),
        Door::Connect,
    )
    .await
}

/// A request body: as sent on the Connect route, or assembled by another route (REST) from
/// what it reads once the caller is authenticated (the future runs only then).
pub enum Input {
    Connect(Body),
    Built(futures_util::future::BoxFuture<'static, ApiResult<Bytes>>),
}

/// Authenticates one HTTP call, runs its operation through the core, and answers it: the
/// single place results and errors become Connect responses.
pub async fn invoke(
    app: &Arc<App>,
    path: &str,
    headers: &HeaderMap,
    input: Input,
    door: Door,
) -> Response {
    let started = Instant::now();
    let request_id = uuid::Uuid::new_v4().to_string();
    let result = match admit(app, path, headers, input).await {
        Ok((principal, body)) => {
            let call = Call {
                principal,
                path,
                body,
                door,
                request_id: &request_id,
                started,
            };
            core::execute(app, call).await
        }
        Err(err) => {
            let result = Err(err);
            core::finish(app, path, core::code_of(&result), started, &request_id);
            result
        }
    };
    match result {
        Ok(value) => {
            let mut response = axum::Json(value).into_response();
            if let Ok(v) = HeaderValue::from_str(&request_id) {
                response.headers_mut().insert("x-request-id", v);
            }
            response
        }
        Err(err) => connect_response(&err.to_connect(&request_id), &request_id),
    }
}

/// Checks the content type, authenticates the caller the way the operation needs, and reads
/// the body.
async fn admit(
    app: &Arc<App>,
    path: &str,
    headers: &HeaderMap,
    input: Input,
) -> ApiResult<(Arc<Principal>, Bytes)> {
    let access = core::access(app, path)?;
    if let Input::Connect(_) = input {
        let content_type = headers
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default();
        let media = content_type.split(';').next().unwrap_or_default().trim();
        if !media.eq_ignore_ascii_case("application/json") {
            return Err(invalid("Content-Type must be application/json"));
        }
    }
    let principal = Arc::new(auth::authenticate(&app.store, headers, access).await?);
    let body = match input {
        Input::Connect(body) => read_body(body).await?,
        Input::Built(body) => body.await?,
    };
    Ok((principal, body))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Req {
        workspace_id: String,
        count: Option<u32>,
    }

    #[test]
    fn parse_errors_name_the_field() {
        let parse = |body: &[u8]| parse_body::<Req>(body, Some(&[]));
        let err = parse(br#"{"workspace_id": "w", "count": "x"}"#).unwrap_err();
        assert!(err.to_string().contains("field count"), "{err}");
        let err = parse(br#"{"workspace_id": "w", "extra": 1}"#).unwrap_err();
        assert!(err.to_string().contains("unknown field `extra`"), "{err}");
        let err = parse(br#"{}"#).unwrap_err();
        assert!(
            err.to_string().contains("missing field `workspace_id`"),
            "{err}"
        );
        let err = parse(b"").unwrap_err();
        assert!(err.to_string().contains("empty"), "{err}");
        let err = parse(br#"{"workspace_id": "w"} {}"#).unwrap_err();
        assert!(err.to_string().contains("trailing"), "{err}");
        let err = parse(br#"{"workspace_id": "w", "count": 1} {"a": ""}"#).unwrap_err();
        assert!(err.to_string().contains("trailing"), "{err}");
    }

    #[derive(Debug, serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Optional {
        #[serde(default)]
        workspace_id: Option<String>,
        #[serde(default)]
        token_ttl: Option<String>,
        #[serde(default)]
        labels: Option<std::collections::BTreeMap<String, String>>,
    }

    #[test]
    fn empty_strings_are_absent_unless_they_are_a_value() {
        let body = br#"{"workspace_id": "", "token_ttl": "", "labels": {"a": ""}}"#;
        let got = parse_body::<Optional>(body, Some(&[])).unwrap();
        assert_eq!((got.workspace_id, got.token_ttl), (None, None));
        assert_eq!(got.labels.unwrap()["a"], "", "nested values are left alone");
        let got = parse_body::<Optional>(body, Some(&["token_ttl"])).unwrap();
        assert_eq!(
            got.token_ttl.as_deref(),
            Some(""),
            "declared as a value of its own"
        );
        let got = parse_body::<Optional>(body, None).unwrap();
        assert_eq!(
            got.workspace_id.as_deref(),
            Some(""),
            "sync bodies are taken as sent"
        );
    }

    #[test]
    fn every_operation_is_registered_once() {
        let registry = Registry::new();
        let paths = registry.paths();
        for expected in [
            "svc.mgmt.v1.ManagementService/CreateLLMModelConnection",
            "svc.agents.v1.AgentService/RegisterAgent",
            "svc.rules.v1.RuleService/DeployRuleBundle",
            "svc.rules.v1.RuleService/TestGuard",
            "svc.sync.v1.SyncService/GetSnapshot",
        ] {
            assert!(paths.contains(&expected), "{expected} missing");
        }
    }
}
