//! The `model.call` event of a model call: what was called, what served it, its usage, cost
//! and quota charges. Emitted when the call ends, or when its request is dropped first.

use std::time::Instant;

use portcullis_shared::audit::ResourceRef;
use portcullis_shared::prices;
use portcullis_shared::snapshot::Charge;
use serde_json::json;

use super::api::InboundApi;
use super::translate::Translation;
use crate::error::GatewayError;
use crate::request::RequestCtx;
use crate::spend::Held;
use crate::{audit, Gateway};

/// What the members loop learned, for the `model.call` event.
#[derive(Default)]
pub struct Served<'g> {
    pub model: Option<std::sync::Arc<crate::snapshot::ModelEntry>>,
    pub attempts: u32,
    /// The status the last upstream called answered with (0: none answered).
    pub upstream_status: u16,
    /// How the last member was called.
    pub translation: Option<Translation>,
    pub usage: Option<prices::Usage>,
    /// The quota hold of the member being called, until it is settled or released.
    pub held: Option<Held<'g>>,
    /// What the quotas that applied were charged.
    pub charges: Vec<Charge>,
    /// What the guards did.
    pub guards: crate::guard::Log,
}

/// Records a model call when it ends, as a `model.call` event. When the request is dropped
/// before it ends (the gateway stopping past its grace period), the call is still recorded, and
/// a hold it still has is charged at its worst case: the upstream may have done the work.
pub struct CallRecord<'g, 'r, 'c> {
    gw: &'g Gateway,
    rc: &'r RequestCtx<'c>,
    /// What was called, once the request named it (a model or pool; before that, nothing).
    resource: ResourceRef,
    requested: String,
    api: InboundApi,
    streaming: bool,
    started: Instant,
    /// Set once the event is emitted.
    done: bool,
    pub served: Served<'g>,
}

impl<'g, 'r, 'c> CallRecord<'g, 'r, 'c> {
    /// A record of a call to `api` that has just been authenticated; nothing else is known of
    /// it yet.
    pub fn new(gw: &'g Gateway, rc: &'r RequestCtx<'c>, api: InboundApi) -> Self {
        Self {
            gw,
            rc,
            resource: audit::resource("model", "", ""),
            requested: String::new(),
            api,
            streaming: false,
            started: Instant::now(),
            done: false,
            served: Served::default(),
        }
    }

    /// The name the request sent as `model`, before it is resolved.
    pub fn named(&mut self, requested: &str, streaming: bool) {
        self.requested = requested.to_string();
        self.resource.name = requested.to_string();
        self.streaming = streaming;
    }

    /// The pool or model the name resolved to.
    pub fn resolved(&mut self, resource: ResourceRef) {
        self.resource = resource;
    }

    /// The call ended with this status (0: nothing was written) and error. A policy denial
    /// is recorded as `access.denied` where it is decided, not again here.
    pub fn finish(mut self, status: u16, error: Option<&GatewayError>) {
        if matches!(error, Some(GatewayError::Denied(_))) {
            self.done = true;
            return;
        }
        self.emit(status, error);
    }

    fn emit(&mut self, status: u16, error: Option<&GatewayError>) {
        if std::mem::replace(&mut self.done, true) {
            return;
        }
        if let Some(held) = self.served.held.take() {
            self.served.charges = held.charge_worst_now();
        }
        if self.gw.audit.enabled() {
            let served = std::mem::take(&mut self.served);
            let resource = std::mem::take(&mut self.resource);
            let call = Call {
                requested: &self.requested,
                api: self.api,
                streaming: self.streaming,
                status,
                latency: self.started.elapsed(),
            };
            self.gw
                .audit
                .emit(model_call_event(self.rc, resource, &call, served, error));
        }
    }
}

impl Drop for CallRecord<'_, '_, '_> {
    fn drop(&mut self) {
        if !self.done {
            let cut = GatewayError::Upstream(
                "the call was cut off: the gateway stopped before it ended".into(),
            );
            self.emit(0, Some(&cut));
        }
    }
}

/// What the event says of the call itself.
struct Call<'a> {
    requested: &'a str,
    api: InboundApi,
    streaming: bool,
    status: u16,
    latency: std::time::Duration,
}

fn model_call_event(
    rc: &RequestCtx<'_>,
    resource: ResourceRef,
    call: &Call<'_>,
    served: Served<'_>,
    error: Option<&GatewayError>,
) -> portcullis_shared::audit::AuditEventV1 {
    use portcullis_shared::audit::{results, types};
    let ok = error.is_none() && (200..400).contains(&call.status);
    let mut e = audit::base(
        rc,
        types::MODEL_CALL,
        if ok { results::ALLOWED } else { results::ERROR },
        resource,
    );
    let mut payload = json!({
        "model": call.requested,
        "api": call.api.as_str(),
        "gateway_id": rc.gateway.id,
        "stream": call.streaming,
        "status": call.status,
        "latency_ms": audit::millis(call.latency),
        "attempts": served.attempts,
    });
    if served.upstream_status != 0 {
        payload["upstream_status"] = json!(served.upstream_status);
    }
    if let Some(model) = &served.model {
        payload["served_by"] = json!(model.name);
        payload["provider"] = json!(model.provider.id);
        payload["upstream_model"] = json!(model.upstream_model);
    }
    if let Some(t) = served.translation {
        payload["translated"] = json!(t.translates());
    }
    if let Some(u) = &served.usage {
        payload["usage"] = usage_json(u);
    }
    // Spend: metered usage at the serving model's price, in integer micro-USD.
    match (
        served.model.as_ref().and_then(|m| m.price.as_ref()),
        served.usage,
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
    served.guards.write(&mut payload);
    if let Some(err) = error {
        payload["error"] = json!(err.to_string());
        payload["reason_code"] = json!(err.openai_type_and_code().1);
    }
    e.payload = payload;
    // Prompts and completions are never recorded.
    e.data_handling.omitted = vec!["request.messages".into(), "response.choices".into()];
    e
}

/// Usage as recorded, whatever the provider: prompt tokens include those read from and
/// written to the provider's cache.
fn usage_json(u: &prices::Usage) -> serde_json::Value {
    let mut usage = json!({
        "prompt_tokens": u.prompt_tokens,
        "completion_tokens": u.completion_tokens,
        "total_tokens": u.prompt_tokens.saturating_add(u.completion_tokens),
    });
    if u.cached_tokens > 0 {
        usage["cached_tokens"] = json!(u.cached_tokens);
    }
    if u.cache_write_tokens > 0 {
        usage["cache_write_tokens"] = json!(u.cache_write_tokens);
    }
    usage
}
