//! Step four for model calls: resolve `model` to a pool or direct model attached to this
//! gateway, authorize `llm:invoke` on it, then try its members in the pool's order, failing
//! over before any byte reaches the caller. OpenAI-shaped upstreams get the request with only
//! `model` and the credential rewritten.

mod members;
mod quota;
mod stream;
mod upstream;

use std::time::Instant;

use bytes::Bytes;
use pingora::proxy::Session;
use portcullis_shared::policy::Action;
use portcullis_shared::prices;
use serde_json::{json, Map, Value};

use crate::error::GatewayError;
use crate::request::RequestCtx;
use crate::snapshot::Credential;
use crate::{audit, authz, respond, Gateway};

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

    let started = Instant::now();
    let mut served = Served::default();
    let result = call_members(
        gw,
        session,
        rc,
        &name,
        target,
        request,
        streaming,
        wants_usage,
        &mut served,
    )
    .await;
    if gw.audit.enabled() {
        let status = session.response_written().map_or_else(
            || result.as_ref().err().map_or(0, GatewayError::status),
            |r| r.status.as_u16(),
        );
        gw.audit.emit(model_call_event(
            rc,
            resource,
            &name,
            streaming,
            status,
            started.elapsed(),
            served,
            result.as_ref().err(),
        ));
    }
    result
}

/// What the members loop learned, for the `model.call` event.
#[derive(Default)]
struct Served {
    model: Option<std::sync::Arc<crate::snapshot::ModelEntry>>,
    attempts: u32,
    usage: Option<Value>,
    /// What the quotas that applied were charged.
    charges: Vec<portcullis_shared::snapshot::Charge>,
}

#[allow(clippy::too_many_arguments)]
fn model_call_event(
    rc: &RequestCtx<'_>,
    resource: portcullis_shared::audit::ResourceRef,
    requested: &str,
    streaming: bool,
    status: u16,
    latency: std::time::Duration,
    served: Served,
    error: Option<&GatewayError>,
) -> portcullis_shared::audit::AuditEventV1 {
    use portcullis_shared::audit::{results, types};
    let ok = error.is_none() && (200..400).contains(&status);
    let mut e = audit::base(
        rc,
        types::MODEL_CALL,
        if ok { results::ALLOWED } else { results::ERROR },
        resource,
    );
    let mut payload = json!({
        "model": requested,
        "gateway_id": rc.gateway.id,
        "stream": streaming,
        "status": status,
        "latency_ms": audit::millis(latency),
        "attempts": served.attempts,
    });
    if let Some(model) = &served.model {
        payload["served_by"] = json!(model.name);
        payload["provider"] = json!(model.provider.id);
        payload["upstream_model"] = json!(model.upstream_model);
    }
    if let Some(u) = served.usage.as_ref() {
        payload["usage"] = audit::pick(
            Some(u),
            &[
                "prompt_tokens",
                "completion_tokens",
                "total_tokens",
                "prompt_tokens_details",
                "completion_tokens_details",
            ],
        );
    }
    // Spend: metered usage at the serving model's price, in integer micro-USD.
    let metered = served.usage.as_ref().and_then(prices::Usage::from_openai);
    match (
        served.model.as_ref().and_then(|m| m.price.as_ref()),
        metered,
    ) {
        (Some((source, price)), Some(usage)) => {
            payload["cost_micros"] = json!(price.cost_micros(&usage));
            payload["price_source"] = json!(match source {
                prices::PriceSource::Override => "override".to_string(),
                prices::PriceSource::Table(key) => {
                    format!("table {}: {key}", prices::TABLE_VERSION)
                }
            });
        }
        (None, Some(_)) => payload["price_source"] = json!("unpriced"),
        _ => {}
    }
    if !served.charges.is_empty() {
        payload["charges"] = json!(served.charges);
    }
    if let Some(err) = error {
        payload["error"] = json!(err.to_string());
        payload["reason_code"] = json!(err.openai_type_and_code().1);
    }
    e.payload = payload;
    // Prompts and completions are never recorded.
    e.data_handling.omitted = vec!["request.messages".into(), "response.choices".into()];
    e
}

/// Tries the target's members in order, failing over before any byte reaches the caller.
#[allow(clippy::too_many_arguments)]
async fn call_members(
    gw: &Gateway,
    session: &mut Session,
    rc: &RequestCtx<'_>,
    name: &str,
    target: &crate::snapshot::Target,
    mut request: Map<String, Value>,
    streaming: bool,
    wants_usage: bool,
    served: &mut Served,
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
        match upstream::attempt(gw, &model, url, headers, body, streaming).await {
            Attempt::Success(response) => {
                model.health.record_success();
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
                    upstream::relay_whole(session, response, &model, rc.request_id, &extra).await
                };
                // The upstream answered: the call is charged, even if the answer broke off or
                // the caller went away — its metered cost, or with no usage reported its worst
                // case, never zero.
                if let Some(r) = reservation {
                    let metered = relayed.usage.as_ref().and_then(prices::Usage::from_openai);
                    let actual = match (&model.price, metered) {
                        (Some((_, price)), Some(u)) => price.cost_micros(&u),
                        _ => r.held_micros(),
                    };
                    let (charges, crossings) = r.settle(actual).await;
                    served.charges = charges;
                    for c in crossings {
                        gw.audit.emit(quota::threshold_event(rc, &c));
                    }
                }
                served.usage = relayed.usage;
                return relayed.failure.map_or(Ok(()), Err);
            }
            Attempt::Final(failure) => {
                // The upstream refused the request itself: another member would too.
                return failure.respond(session, rc).await;
            }
            Attempt::Retry(failure) => {
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
