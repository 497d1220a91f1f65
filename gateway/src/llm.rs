//! Step four for model calls: resolve `model` to a pool or direct model attached to this
//! gateway, authorize `llm:invoke` on it, then try its members in the pool's order, failing
//! over before any byte reaches the caller. OpenAI-shaped upstreams get the request with only
//! `model` and the credential rewritten.

mod members;
mod quota;
mod record;
mod stream;
mod upstream;

use bytes::Bytes;
use pingora::proxy::Session;
use portcullis_shared::policy::Action;
use portcullis_shared::prices;
use serde_json::{json, Map, Value};

use crate::error::GatewayError;
use crate::request::RequestCtx;
use crate::snapshot::Credential;
use crate::{audit, authz, respond, Gateway};

use record::{CallRecord, Served};
use upstream::{Attempt, Failure};

/// Reads the whole request body, refusing more than `limit` bytes. An oversized body is still
/// read (up to four times the limit) and discarded, so the caller receives the error rather
/// than a reset connection.
pub async fn read_body(session: &mut Session, limit: usize) -> Result<Vec<u8>, GatewayError> {
    let mut body = Vec::new();
    let mut seen = 0usize;
    while let Some(chunk) = session
        .read_request_body()
        .await
        .map_err(|e| GatewayError::BadRequest(format!("could not read the request body: {e}")))?
    {
        seen += chunk.len();
        if seen <= limit {
            body.extend_from_slice(&chunk);
        } else if seen > limit.saturating_mul(4) {
            break;
        }
    }
    if seen > limit {
        return Err(GatewayError::TooLarge(limit));
    }
    Ok(body)
}

/// `POST …/v1/chat/completions`.
pub async fn chat(
    gw: &Gateway,
    session: &mut Session,
    rc: &RequestCtx<'_>,
) -> Result<(), GatewayError> {
    let raw = read_body(session, gw.config.max_body_bytes).await?;
    let mut request: Map<String, Value> = serde_json::from_slice(&raw).map_err(|e| {
        GatewayError::BadRequest(format!("the request body is not a JSON object: {e}"))
    })?;
    let name = match request.get("model") {
        Some(Value::String(s)) if !s.is_empty() => s.clone(),
        _ => {
            return Err(GatewayError::BadRequest(
                "`model` is required: the name of a model or pool on this gateway".into(),
            ))
        }
    };
    let (target, slot) = rc
        .gateway
        .targets
        .get(&name)
        .ok_or_else(|| GatewayError::ModelNotFound(name.clone()))?;
    let (kind, target_id, target_name) = target.describe();
    let resource = audit::resource(kind, target_id, target_name);
    if let Err(d) = authz::check_memo(
        rc.snap,
        rc.agent,
        rc.gateway,
        Action::LlmInvoke,
        target.uid(),
        &rc.context,
        rc.slot(*slot),
    ) {
        gw.audit
            .emit(audit::denial_event(rc, resource, "llm:invoke", &d));
        return Err(GatewayError::Denied(d));
    }

    let streaming = request.get("stream") == Some(&Value::Bool(true));
    let wants_usage = streaming
        && request
            .get("stream_options")
            .and_then(|o| o.get("include_usage"))
            == Some(&Value::Bool(true));
    if streaming {
        // Always ask for usage so spend is never zero; the caller sees it only if it asked.
        let options = request.entry("stream_options").or_insert_with(|| json!({}));
        if let Value::Object(o) = options {
            o.insert("include_usage".into(), Value::Bool(true));
        } else {
            return Err(GatewayError::BadRequest(
                "`stream_options` must be an object".into(),
            ));
        }
    }

    let mut record = CallRecord::new(gw, rc, resource, &name, streaming);
    let result = call_members(
        gw,
        session,
        rc,
        &name,
        target,
        request,
        streaming,
        wants_usage,
        &mut record.served,
    )
    .await;
    let status = session.response_written().map_or_else(
        || result.as_ref().err().map_or(0, GatewayError::status),
        |r| r.status.as_u16(),
    );
    record.finish(status, result.as_ref().err());
    result
}

/// Tries the target's members in order, failing over before any byte reaches the caller.
#[allow(clippy::too_many_arguments)]
async fn call_members<'g>(
    gw: &'g Gateway,
    session: &mut Session,
    rc: &RequestCtx<'_>,
    name: &str,
    target: &crate::snapshot::Target,
    mut request: Map<String, Value>,
    streaming: bool,
    wants_usage: bool,
    served: &mut Served<'g>,
) -> Result<(), GatewayError> {
    let mut last: Option<Failure> = None;
    for model in members::order(target) {
        let Some(url) = model.chat_url.clone() else {
            last = Some(Failure::Refused(GatewayError::Unsupported(format!(
                "model '{}' uses provider {}, whose API this gateway version cannot translate to yet",
                model.name, model.provider.id
            ))));
            continue;
        };
        let headers = match &model.credential {
            Credential::None => &[][..],
            Credential::Headers(h) => h.as_slice(),
            Credential::Unavailable(why) => {
                last = Some(Failure::Refused(GatewayError::Unsupported(why.clone())));
                continue;
            }
        };
        request.insert("model".into(), Value::String(model.upstream_model.clone()));
        let body = Bytes::from(
            serde_json::to_vec(&request).map_err(|e| GatewayError::Internal(e.to_string()))?,
        );
        // Quotas: hold the worst case before calling (no quotas, nothing to do).
        let reservation = if rc.snap.quotas.is_empty() {
            None
        } else {
            match quota::reserve(gw, rc, target, &model, body.len(), &request).await {
                Ok(held) => held,
                Err(quota::Blocked::All(e)) => {
                    quota::refused(gw, rc, &e);
                    return Err(e);
                }
                Err(quota::Blocked::Member(e)) => {
                    quota::refused(gw, rc, &e);
                    last = Some(Failure::Refused(e));
                    continue;
                }
            }
        };
        served.attempts += 1;
        served.model = Some(model.clone());
        // The hold rides in `served` while the member is called, so a request dropped midway
        // (the gateway stopping past its grace period) still charges it.
        served.held = reservation;
        match upstream::attempt(gw, &model, url, headers, body, streaming).await {
            Attempt::Success(response) => {
                model.health.record_success();
                // The upstream answered: the call is charged, even if the answer breaks off or
                // the caller goes away — its metered cost, or with no usage reported its worst
                // case, never zero.
                let extra: Vec<(&'static str, &str)> = rc.echo_headers(&model.name);
                let relayed = if streaming && upstream::is_event_stream(&response) {
                    stream::relay(
                        gw,
                        session,
                        response,
                        wants_usage,
                        &model,
                        rc.request_id,
                        &extra,
                    )
                    .await
                } else {
                    let timeout = gw.config.upstream_timeout();
                    upstream::relay_whole(session, response, &model, rc.request_id, &extra, timeout)
                        .await
                };
                if let Some(held) = served.held.take() {
                    let metered = relayed.usage.as_ref().and_then(prices::Usage::from_openai);
                    let actual = match (&model.price, metered) {
                        (Some((_, price)), Some(u)) => price.cost_micros(&u),
                        _ => held.held_micros(),
                    };
                    let (charges, crossings) = held.settle(actual).await;
                    served.charges = charges;
                    for c in crossings {
                        gw.audit.emit(quota::threshold_event(rc, &c));
                    }
                }
                served.usage = relayed.usage;
                return relayed.failure.map_or(Ok(()), Err);
            }
            Attempt::Final(failure) => {
                // The upstream refused the request itself: another member would too. Nothing
                // was spent: the hold is released.
                served.held = None;
                return failure.respond(session, rc).await;
            }
            Attempt::Retry(failure) => {
                served.held = None;
                model.health.record_failure();
                tracing::warn!(request_id = rc.request_id, model = %model.name, failure = %failure, "Upstream member failed; trying the next.");
                last = Some(failure);
            }
        }
    }
    match last {
        Some(failure) => failure.respond(session, rc).await,
        None => Err(GatewayError::Upstream(format!(
            "pool '{name}' has no members to call"
        ))),
    }
}

/// `GET …/v1/models`: the pools and direct models of this gateway this agent may invoke.
pub async fn models(session: &mut Session, rc: &RequestCtx<'_>) -> Result<(), GatewayError> {
    let mut data = Vec::new();
    for name in &rc.gateway.target_names {
        let Some((target, slot)) = rc.gateway.targets.get(name) else {
            continue;
        };
        let uid = target.uid();
        let slot = rc.slot(*slot);
        if authz::check_memo(
            rc.snap,
            rc.agent,
            rc.gateway,
            Action::LlmInvoke,
            uid,
            &rc.context,
            slot,
        )
        .is_ok()
        {
            data.push(
                json!({"id": name, "object": "model", "created": 0, "owned_by": "portcullis"}),
            );
        }
    }
    let body = json!({"object": "list", "data": data});
    respond::json(session, 200, &body, rc.request_id, &rc.echo_headers(""))
        .await
        .map_err(|e| GatewayError::Internal(e.to_string()))
}
