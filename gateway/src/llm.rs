//! Step four for model calls, as a typed pipeline: the inbound API reads the request
//! ([`api`]); `model` resolves to a pool or direct model attached to this gateway and
//! `llm:invoke` is authorized on it; the member loop ([`call`]) orders the members, plans each
//! call ([`plan`]: translation and headers), reserves its quota worst case ([`quota`]), sends it
//! with the member's credential ([`credential`], [`upstream`]), relays the answer whole or
//! streamed through the translator into the caller's shape ([`relay`]) and settles. Every call
//! is recorded ([`record`]).

pub mod api;
mod call;
pub mod compile;
mod credential;
pub(crate) mod framing;
mod guard;
mod members;
mod plan;
mod quota;
mod record;
mod relay;
pub mod table;
pub mod translate;
mod upstream;
pub mod wire;

use portcullis_shared::policy::Action;
use serde_json::json;

use crate::error::GatewayError;
use crate::request::RequestCtx;
use crate::session::Session;
use crate::{audit, authz, respond, Gateway};

use api::{Inbound, InboundApi};
use record::CallRecord;
use table::GatewayModels;

/// `POST …/v1/chat/completions` or `POST …/v1/messages`. Every call is recorded as
/// `model.call`, failures included (a policy denial as `access.denied`, where it is decided).
pub async fn serve(
    gw: &Gateway,
    session: &mut Session,
    rc: &RequestCtx<'_>,
    models: &GatewayModels,
    api: InboundApi,
) -> Result<(), GatewayError> {
    let mut record = CallRecord::new(gw, rc, api);
    let result = serve_call(gw, session, (rc, models), api, &mut record).await;
    let status = session.response_written().map_or_else(
        || result.as_ref().err().map_or(0, GatewayError::status),
        |r| r.status.as_u16(),
    );
    record.finish(status, result.as_ref().err());
    result
}

async fn serve_call<'g>(
    gw: &'g Gateway,
    session: &mut Session,
    (rc, models): (&RequestCtx<'_>, &GatewayModels),
    api: InboundApi,
    record: &mut CallRecord<'g, '_, '_>,
) -> Result<(), GatewayError> {
    // The body's share of the in-flight budget is held until the answer is written.
    let (raw, _held) =
        crate::body::read(session, gw.config.max_body_bytes, &gw.body_budget).await?;
    let mut inbound = Inbound::parse(api, raw, &session.req_header().headers)?;
    record.named(&inbound.model, inbound.stream);
    let (target, slot) = models
        .targets
        .get(&inbound.model)
        .ok_or_else(|| GatewayError::ModelNotFound(inbound.model.clone()))?;
    let (kind, target_id, target_name) = target.describe();
    let resource = audit::resource(kind, target_id, target_name);
    record.resolved(resource.clone());
    if let Err(d) = authz::check_memo(
        &rc.rules,
        Action::LlmInvoke,
        target.uid(),
        &rc.context,
        *slot,
    ) {
        gw.audit
            .emit(audit::denial_event(rc, resource, "llm:invoke", &d));
        return Err(GatewayError::Denied(d));
    }
    if let Some(detector) = rc.guards.input.get(target_id) {
        guard_input(
            gw,
            rc,
            &mut inbound,
            detector,
            &resource,
            &mut record.served,
        )?;
    }
    call::call_members(gw, session, rc, &inbound, target, &mut record.served).await
}

/// The `llm_input` guards on what the caller sent: a `block` match refuses the call before
/// any upstream sees it; redactions change the body every member is sent.
fn guard_input(
    gw: &Gateway,
    rc: &RequestCtx<'_>,
    inbound: &mut Inbound,
    detector: &std::sync::Arc<crate::guard::detect::Detector>,
    resource: &portcullis_shared::audit::ResourceRef,
    served: &mut record::Served<'_>,
) -> Result<(), GatewayError> {
    use portcullis_shared::api::guards::GuardStage;
    let mut tally = crate::guard::Tally::new(GuardStage::LlmInput, detector.clone());
    let result = guard::input(inbound.api.shape(), &mut inbound.body, &mut tally);
    audit::guards::record_stage(gw, rc, &mut served.guards, &tally, resource);
    if result.map_err(GatewayError::Filtered)? {
        inbound.raw = bytes::Bytes::from(serde_json::to_vec(&inbound.body).unwrap_or_default());
    }
    Ok(())
}

/// `GET …/v1/models`: the pools and direct models of this gateway this agent may invoke, in
/// OpenAI's list shape, or Anthropic's when the caller sends `anthropic-version`.
pub async fn models(
    session: &mut Session,
    rc: &RequestCtx<'_>,
    models: &GatewayModels,
) -> Result<(), GatewayError> {
    let mut names = Vec::new();
    for name in &models.target_names {
        let Some((target, slot)) = models.targets.get(name) else {
            continue;
        };
        let allowed = authz::check_memo(
            &rc.rules,
            Action::LlmInvoke,
            target.uid(),
            &rc.context,
            *slot,
        )
        .is_ok();
        if allowed {
            names.push(name);
        }
    }
    let anthropic = session
        .req_header()
        .headers
        .contains_key("anthropic-version");
    let body = if anthropic {
        let data: Vec<_> = names
            .iter()
            .map(|n| json!({"type": "model", "id": n, "display_name": n, "created_at": "1970-01-01T00:00:00Z"}))
            .collect();
        json!({"data": data, "has_more": false, "first_id": names.first(), "last_id": names.last()})
    } else {
        let data: Vec<_> = names
            .iter()
            .map(|n| json!({"id": n, "object": "model", "created": 0, "owned_by": "portcullis"}))
            .collect();
        json!({"object": "list", "data": data})
    };
    respond::json(session, 200, &body, rc.request_id, &rc.echo_headers(""))
        .await
        .map_err(|e| GatewayError::Internal(e.to_string()))
}
