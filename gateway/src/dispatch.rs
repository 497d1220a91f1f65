//! One gateway request through its steps (DESIGN §5): route → the gateway at the current
//! revision → authenticate → act-as → authorize `gateway:access` → the route's step (`llm` or
//! `mcp`) with the gateway's table. Refusals before the agent is allowed are audited here;
//! every failure is answered by the HTTP app above through `respond`.

use std::sync::Arc;

use bytes::Bytes;
use portcullis_shared::api::gateways::GatewayState;
use portcullis_shared::policy::{ActAs, Action, RequestContext};

use crate::audit;
use crate::authn::AgentEntry;
use crate::authz::LazyContext;
use crate::error::GatewayError;
use crate::llm::api::InboundApi;
use crate::request::{self, Origin, RequestCtx};
use crate::route::Route;
use crate::session::Session;
use crate::snapshot::{Compiled, GatewayEntry};
use crate::{actas, authn, authz, llm, respond, Gateway};

/// Answers one request: the service routes here, a gateway's routes through its steps.
pub async fn dispatch(
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
        Route::Metrics => return metrics(gw, session, request_id).await,
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
    let incoming = Incoming {
        gw,
        snap: &snap,
        gateway,
        request_id,
    };
    let admitted = incoming.admit(session, &route, &origin).await?;
    let rc = incoming.authorize(&route, admitted, origin)?;
    serve(gw, session, route, &snap, gateway, &rc).await
}

/// `/metrics`, for the peers and token `metrics_access` admits.
async fn metrics(
    gw: &Arc<Gateway>,
    session: &mut Session,
    request_id: &str,
) -> Result<(), GatewayError> {
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
    plain(session, 200, &text, "text/plain; version=0.0.4", request_id).await
}

/// The calling agent, the person it acts for, and the `X-Svc-Act-As` assertion as sent (for
/// tools that forward it).
struct Admitted<'a> {
    agent: &'a AgentEntry,
    act_as: ActAs,
    act_as_raw: Option<String>,
}

/// A request on one gateway at one revision, before its agent is known.
struct Incoming<'a> {
    gw: &'a Arc<Gateway>,
    snap: &'a Compiled,
    gateway: &'a GatewayEntry,
    request_id: &'a str,
}

impl<'a> Incoming<'a> {
    /// The calling agent and the person it acts for, or the refusal (audited).
    async fn admit(
        &self,
        session: &Session,
        route: &Route<'_>,
        origin: &Origin,
    ) -> Result<Admitted<'a>, GatewayError> {
        let identity = &self.gateway.identity;
        let refuse = |agent, err| self.refused(origin, agent, err);
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
            .and_then(|token| authn::authenticate(&self.snap.authn, token, &identity.id))
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
        let header = headers.get(actas::HEADER);
        let act_as = actas::verify(
            self.gw,
            self.snap.actas_min,
            &agent.act_as,
            &identity.id,
            header.map(|v| v.as_bytes()),
            caller.bound,
        )
        .await
        .map_err(|e| refuse(Some(agent), e))?;
        let act_as_raw = header.and_then(|v| v.to_str().ok()).map(str::to_string);
        Ok(Admitted {
            agent,
            act_as,
            act_as_raw,
        })
    }

    /// Refusals before the agent is known and allowed are audited as `access.denied` too;
    /// unidentified callers at a bounded rate (see `Audit::admit_anonymous`).
    fn refused(
        &self,
        origin: &Origin,
        agent: Option<&AgentEntry>,
        err: GatewayError,
    ) -> GatewayError {
        let audited = matches!(
            err,
            GatewayError::Unauthenticated(_) | GatewayError::Forbidden(_) | GatewayError::Denied(_)
        );
        let admitted = match agent {
            _ if !audited => None,
            Some(_) => Some(0),
            None => self.gw.audit.admit_anonymous(),
        };
        if let Some(suppressed) = admitted {
            let pre = audit::PreAuth {
                workspace_id: &self.snap.workspace_id,
                gateway: &self.gateway.identity,
                agent,
                request_id: self.request_id,
                origin,
            };
            self.gw
                .audit
                .emit(audit::refused_event(&pre, &err, suppressed));
        }
        err
    }

    /// The request as its steps read it, once `gateway:access` allows it.
    fn authorize(
        &self,
        route: &Route<'_>,
        admitted: Admitted<'a>,
        origin: Origin,
    ) -> Result<RequestCtx<'a>, GatewayError> {
        let identity = &self.gateway.identity;
        let Admitted {
            agent,
            act_as,
            act_as_raw,
        } = admitted;
        let is_mcp = matches!(route, Route::Mcp { .. });
        // A decision depends only on the agent, action, resource and context; the context is
        // the act-as identity plus what is fixed per gateway and surface (each surface has its
        // own slots), so decisions are memoized per slot, and per identity when there is one.
        // Tool decisions are memoized only without an identity.
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
            request_id: self.request_id,
            workspace_id: &self.snap.workspace_id,
            revision: self.snap.revision,
            agent,
            gateway: identity,
            rules: self.gateway.rules(self.snap, agent),
            guards: &self.gateway.guards,
            quotas: &self.snap.quotas,
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
            self.gw
                .audit
                .emit(audit::denial_event(&rc, resource, "gateway:access", &d));
            return Err(GatewayError::Denied(d));
        }
        Ok(rc)
    }
}

/// The route's step: the model surface or the tool surface, with the gateway's table.
async fn serve(
    gw: &Arc<Gateway>,
    session: &mut Session,
    route: Route<'_>,
    snap: &Compiled,
    gateway: &GatewayEntry,
    rc: &RequestCtx<'_>,
) -> Result<(), GatewayError> {
    let models = &gateway.models;
    match route {
        Route::ChatCompletions { .. } => {
            llm::serve(gw, session, rc, models, InboundApi::OpenAiChat).await
        }
        Route::Messages { .. } => {
            llm::serve(gw, session, rc, models, InboundApi::AnthropicMessages).await
        }
        Route::Models { .. } => llm::models(session, rc, models).await,
        Route::Mcp { .. } => crate::mcp::handle(gw, session, rc, gateway.tools(snap)).await,
        _ => Err(GatewayError::NotFound(format!(
            "gateway '{}' has no route {} {}",
            gateway.identity.name,
            session.req_header().method,
            session.req_header().uri.path()
        ))),
    }
}

pub fn activity_id(session: &Session) -> Result<Option<String>, GatewayError> {
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
