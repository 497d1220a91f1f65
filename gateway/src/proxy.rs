//! Every request, answered by the gateway itself (DESIGN §5): route → gateway →
//! authenticate → act-as → authorize `gateway:access` → the route's handler. The gateway never
//! proxies a connection as it is, so it runs on pingora's HTTP server directly, without its
//! proxy layer (whose per-request session holds a cache, modules and upstream state).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

use async_trait::async_trait;
use bytes::Bytes;
use pingora::apps::{HttpPersistentSettings, HttpServerApp, ReusedHttpStream};
use pingora::server::ShutdownWatch;
use portcullis_shared::api::gateways::GatewayState;
use portcullis_shared::policy::{Action, RequestContext};

use crate::audit;
use crate::authn::AgentEntry;
use crate::authz::LazyContext;
use crate::error::GatewayError;
use crate::llm::api::InboundApi;
use crate::request::{self, Origin, RequestCtx};
use crate::route::{route, Route};
use crate::session::Session;
use crate::{actas, authn, authz, llm, respond, Gateway};

pub struct Phases {
    pub gw: Arc<Gateway>,
}

#[async_trait]
impl HttpServerApp for Phases {
    /// One request of a connection: read, answered, and the connection handed back for the
    /// next request when it can be reused.
    async fn process_new_http(
        self: &Arc<Self>,
        mut session: Session,
        shutdown: &ShutdownWatch,
    ) -> Option<ReusedHttpStream> {
        // A header that does not arrive in time (a slow or idle client) closes the connection.
        let kept = session.take_connection_user_context().is_some();
        let deadline = crate::session::HEADER_READ
            + if kept {
                crate::session::IDLE_KEEPALIVE
            } else {
                std::time::Duration::ZERO
            };
        match tokio::time::timeout(deadline, session.read_request()).await {
            Err(_) => return None,
            Ok(Ok(true)) => {}
            Ok(Ok(false)) => return None,
            Ok(Err(e)) => {
                if matches!(e.etype, pingora::ErrorType::InvalidHTTPHeader) {
                    tracing::debug!(error = %e, "Unreadable request header.");
                    let _ = session.respond_error(400).await;
                }
                session.shutdown().await;
                return None;
            }
        }
        if *shutdown.borrow() {
            // Going away: this connection takes no further request.
            session.set_keepalive(None);
        } else {
            // Kept for the next request at most this long idle (unless the client closes it).
            session.set_keepalive(Some(crate::session::IDLE_KEEPALIVE.as_secs()));
        }
        if let Err(e) = self.answer(&mut session).await {
            tracing::debug!(error = %e, "Could not write the response.");
            session.shutdown().await;
            return None;
        }
        let mut settings = HttpPersistentSettings::for_session(&session);
        // Marks the connection as kept, for the next request's header deadline.
        settings.set_user_context(Box::new(()));
        session
            .finish()
            .await
            .ok()
            .flatten()
            .map(|stream| ReusedHttpStream::from_reusable_stream(stream, settings))
    }
}

/// A refusal answered before its request's body was read leaves the rest of that body on the
/// connection. pingora closes such a connection; a body this small is read off after the
/// answer instead, so that the client's next request reuses the connection. A larger or
/// chunked body, or one that does not arrive in time, still closes it.
fn keep_after_refusal(session: &mut Session) {
    let declared = session
        .req_header()
        .headers
        .get(http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<usize>().ok());
    if declared.is_some_and(|len| len <= DRAINED_BODY_MAX) {
        session.set_close_on_response_before_downstream_finish(false);
        session.set_total_drain_timeout(Some(DRAIN_TIMEOUT));
    }
}

/// The largest unread request body read off after an early answer to keep its connection.
const DRAINED_BODY_MAX: usize = 64 * 1024;
/// How long the rest of such a body may take to arrive.
const DRAIN_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

impl Phases {
    async fn answer(&self, session: &mut Session) -> pingora::Result<()> {
        let started = Instant::now();
        let _in_flight = InFlight::enter(&self.gw.in_flight);
        let request_id = crate::request::random_uuid();
        let method = session.req_header().method.as_str().to_string();
        let path = session.req_header().uri.path().to_string();
        let route = route(&method, &path);
        let result = dispatch(&self.gw, session, route.clone(), &request_id).await;
        if let Err(err) = result {
            if session.response_written().is_none() {
                keep_after_refusal(session);
                // The one place a failure becomes a response, in the shape of the route's API.
                let activity = activity_id(session).ok().flatten();
                let mut echo: Vec<_> = activity
                    .iter()
                    .map(|a| ("x-svc-activity-id", a.as_str()))
                    .collect();
                let challenge = match (&route, &err) {
                    (Route::Mcp { gateway_id }, GatewayError::Unauthenticated(_)) => {
                        let presented = session.req_header().headers.contains_key("authorization");
                        Some(crate::interactive::challenge(
                            session, gateway_id, presented,
                        ))
                    }
                    _ => None,
                };
                if let Some(c) = &challenge {
                    echo.push(("www-authenticate", c.as_str()));
                }
                respond::error(session, route.shape(), &err, &request_id, &echo).await?;
            } else {
                tracing::warn!(request_id, error = %err, "Request failed after its response began.");
            }
        }
        let status = session.response_written().map_or(0, |r| r.status.as_u16());
        self.gw
            .metrics
            .record(route.kind(), status, started.elapsed());
        Ok(())
    }
}

/// Counts a request as in flight until dropped.
struct InFlight<'a>(&'a AtomicUsize);

impl<'a> InFlight<'a> {
    fn enter(counter: &'a AtomicUsize) -> Self {
        counter.fetch_add(1, Ordering::AcqRel);
        Self(counter)
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

fn activity_id(session: &Session) -> Result<Option<String>, GatewayError> {
    let Some(value) = session.req_header().headers.get("x-svc-activity-id") else {
        return Ok(None);
    };
    let text = value
        .to_str()
        .ok()
        .filter(|t| !t.is_empty() && t.len() <= 128);
    text.map(|t| Some(t.to_string())).ok_or_else(|| {
        GatewayError::BadRequest("X-Svc-Activity-Id must be 1–128 visible characters".into())
    })
}

/// Reads the audit origin of a gateway request from its headers.
fn origin(session: &Session, route: &Route<'_>) -> Result<Origin, GatewayError> {
    let (surface, http_route) = match route {
        Route::ChatCompletions { .. } => ("llm", "/gateways/{gateway_id}/v1/chat/completions"),
        Route::Messages { .. } => ("llm", "/gateways/{gateway_id}/v1/messages"),
        Route::Models { .. } => ("llm", "/gateways/{gateway_id}/v1/models"),
        Route::Mcp { .. } => ("mcp", "/gateways/{gateway_id}/mcp"),
        _ => ("llm", "/gateways/{gateway_id}/*"),
    };
    let headers = &session.req_header().headers;
    let text = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    Ok(Origin {
        surface,
        http_route,
        user_agent_class: request::user_agent_class(text("user-agent")),
        trace_id: request::trace_id(text("traceparent")),
        activity_id: activity_id(session)?,
        idempotency_key: text("idempotency-key")
            .filter(|k| !k.is_empty() && k.len() <= 256)
            .map(str::to_string),
    })
}

async fn plain(
    session: &mut Session,
    status: u16,
    text: &str,
    content_type: &str,
    request_id: &str,
) -> Result<(), GatewayError> {
    respond::bytes(
        session,
        status,
        content_type,
        Bytes::from(text.to_string()),
        request_id,
        &[],
    )
    .await
    .map_err(|e| GatewayError::Internal(e.to_string()))
}

async fn dispatch(
    gw: &Arc<Gateway>,
    session: &mut Session,
    route: Route<'_>,
    request_id: &str,
) -> Result<(), GatewayError> {
    let gateway_id = match route {
        // Not ready (no snapshot, or a stale one) is an error like any other: 503 with its code.
        Route::Ready => {
            gw.current().ok_or(GatewayError::NotReady)?;
            gw.check_policy_age()?;
            return plain(session, 200, "ready", "text/plain", request_id).await;
        }
        Route::Health => return plain(session, 200, "ok", "text/plain", request_id).await,
        Route::Metrics => {
            let peer = session
                .client_addr()
                .and_then(|a| a.as_inet())
                .map(|a| a.ip());
            let authorization = session
                .req_header()
                .headers
                .get(http::header::AUTHORIZATION)
                .and_then(|v| v.to_str().ok());
            let token = gw.config.metrics_token.as_deref();
            if !portcullis_shared::metrics_access::allowed(peer, authorization, token) {
                return Err(GatewayError::Forbidden(
                    portcullis_shared::metrics_access::REFUSED.into(),
                ));
            }
            let mut text = gw.metrics.render(gw.current().map(|s| s.revision));
            gw.audit.render_metrics(&mut text);
            text.push_str("# TYPE portcullis_gateway_request_body_bytes_held gauge\n");
            text.push_str(&format!(
                "portcullis_gateway_request_body_bytes_held {}\n",
                gw.body_budget.held_bytes()
            ));
            return plain(session, 200, &text, "text/plain; version=0.0.4", request_id).await;
        }
        Route::NotFound => {
            return Err(GatewayError::NotFound(
                "no such route; gateway routes live under /gateways/{gateway_id}/".into(),
            ))
        }
        Route::ResourceMetadata { gateway_id } => {
            let snap = gw.current().ok_or(GatewayError::NotReady)?;
            return crate::interactive::metadata(session, &snap, gateway_id, request_id).await;
        }
        Route::ChatCompletions { gateway_id }
        | Route::Messages { gateway_id }
        | Route::Models { gateway_id }
        | Route::Mcp { gateway_id }
        | Route::UnknownGatewayPath { gateway_id } => gateway_id,
    };
    let snap = gw.current().ok_or(GatewayError::NotReady)?;
    gw.check_policy_age()?;
    let gateway = snap
        .gateways
        .get(gateway_id)
        .ok_or_else(|| GatewayError::NotFound(format!("gateway {gateway_id} does not exist")))?;
    let origin = origin(session, &route)?;
    // Refusals before the agent is known and allowed are audited as `access.denied` too.
    let refuse = |agent: Option<&AgentEntry>, err: GatewayError| {
        if matches!(
            err,
            GatewayError::Unauthenticated(_) | GatewayError::Forbidden(_) | GatewayError::Denied(_)
        ) {
            // Unidentified callers are recorded at a bounded rate (see `Audit::admit_anonymous`).
            let admitted = match agent {
                Some(_) => Some(0),
                None => gw.audit.admit_anonymous(),
            };
            if let Some(suppressed) = admitted {
                let pre = audit::PreAuth {
                    workspace_id: &snap.workspace_id,
                    gateway: &gateway.identity,
                    agent,
                    request_id,
                    origin: &origin,
                };
                let mut event = audit::refused_event(&pre, &err);
                if suppressed > 0 {
                    event.payload["unrecorded_before"] = serde_json::json!(suppressed);
                }
                gw.audit.emit(event);
            }
        }
        err
    };
    let identity = &gateway.identity;
    if identity.state == GatewayState::Disabled {
        return Err(refuse(
            None,
            GatewayError::Forbidden(format!("gateway '{}' is disabled", identity.name)),
        ));
    }
    let headers = &session.req_header().headers;
    // Anthropic's SDKs send the key as `x-api-key`.
    let api_key = matches!(route, Route::Messages { .. })
        .then(|| headers.get("x-api-key").map(|v| v.as_bytes()))
        .flatten();
    let caller = authn::presented(headers.get("authorization").map(|v| v.as_bytes()), api_key)
        .and_then(|token| authn::authenticate(&snap.authn, token, &identity.id))
        .map_err(|e| refuse(None, e))?;
    let agent = caller.agent;
    // An interactive token's resource is the gateway's MCP endpoint (RFC 8707), nothing else.
    let interactive = caller.bound.as_ref().is_some_and(|b| b.is_interactive());
    if interactive && !matches!(route, Route::Mcp { .. }) {
        return Err(refuse(
            Some(agent),
            GatewayError::Unauthenticated(
                "this token was issued for the gateway's MCP endpoint only".into(),
            ),
        ));
    }
    let act_as_header = headers.get(actas::HEADER);
    let act_as = actas::verify(
        gw,
        snap.actas_min,
        &agent.act_as,
        &identity.id,
        act_as_header.map(|v| v.as_bytes()),
        caller.bound,
    )
    .await
    .map_err(|e| refuse(Some(agent), e))?;
    let act_as_raw = act_as_header
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let is_mcp = matches!(route, Route::Mcp { .. });
    // A decision depends only on the agent, action, resource and context; the context is the
    // act-as identity plus what is fixed per gateway and surface (each surface has its own
    // slots), so decisions are memoized per slot, and per identity when there is one. Tool
    // decisions are memoized only without an identity.
    let memoize = !act_as.present;
    let context = LazyContext::new(RequestContext {
        act_as,
        gateway_id: identity.id.clone(),
        surface: origin.surface,
    });
    let slot = if is_mcp {
        identity.mcp_slot
    } else {
        identity.slot
    };
    let rc = RequestCtx {
        request_id,
        workspace_id: &snap.workspace_id,
        revision: snap.revision,
        agent,
        gateway: identity,
        rules: gateway.rules(&snap, agent),
        guards: &gateway.guards,
        quotas: &snap.quotas,
        context,
        memoize,
        origin,
        act_as_raw,
    };
    if let Err(d) = authz::check_memo(
        &rc.rules,
        Action::GatewayAccess,
        &identity.uid,
        &rc.context,
        slot,
    ) {
        let resource = audit::resource("gateway", &identity.id, &identity.name);
        gw.audit
            .emit(audit::denial_event(&rc, resource, "gateway:access", &d));
        return Err(GatewayError::Denied(d));
    }
    match route {
        Route::ChatCompletions { .. } => {
            llm::serve(gw, session, &rc, &gateway.models, InboundApi::OpenAiChat).await
        }
        Route::Messages { .. } => {
            llm::serve(
                gw,
                session,
                &rc,
                &gateway.models,
                InboundApi::AnthropicMessages,
            )
            .await
        }
        Route::Models { .. } => llm::models(session, &rc, &gateway.models).await,
        Route::Mcp { .. } => crate::mcp::handle(gw, session, &rc, gateway.tools(&snap)).await,
        _ => Err(GatewayError::NotFound(format!(
            "gateway '{}' has no route {} {}",
            identity.name,
            session.req_header().method,
            session.req_header().uri.path()
        ))),
    }
}
