//! The `model.call` event of a model call: what was called, what served it, its usage, cost
//! and quota charges. Emitted when the call ends, or when its request is dropped first.

use std::time::Instant;

use portcullis_shared::audit::ResourceRef;
use portcullis_shared::prices;
use portcullis_shared::snapshot::Charge;
use serde_json::{json, Value};

use crate::error::GatewayError;
use crate::request::RequestCtx;
use crate::spend::Held;
use crate::{audit, Gateway};

/// What the members loop learned, for the `model.call` event.
#[derive(Default)]
pub struct Served<'g> {
    pub model: Option<std::sync::Arc<crate::snapshot::ModelEntry>>,
    pub attempts: u32,
    pub usage: Option<Value>,
    /// The quota hold of the member being called, until it is settled or released.
    pub held: Option<Held<'g>>,
    /// What the quotas that applied were charged.
    pub charges: Vec<Charge>,
}

/// Records a model call when it ends, as a `model.call` event. When the request is dropped
/// before it ends (the gateway stopping past its grace period), the call is still recorded, and
/// a hold it still has is charged at its worst case: the upstream may have done the work.
pub struct CallRecord<'g, 'r, 'c> {
    gw: &'g Gateway,
    rc: &'r RequestCtx<'c>,
    /// Taken when the event is emitted.
    resource: Option<ResourceRef>,
    requested: String,
    streaming: bool,
    started: Instant,
    pub served: Served<'g>,
}

impl<'g, 'r, 'c> CallRecord<'g, 'r, 'c> {
    pub fn new(
        gw: &'g Gateway,
        rc: &'r RequestCtx<'c>,
        resource: ResourceRef,
        requested: &str,
        streaming: bool,
    ) -> Self {
        Self {
            gw,
            rc,
            resource: Some(resource),
            requested: requested.to_string(),
            streaming,
            started: Instant::now(),
            served: Served::default(),
        }
    }

    /// The call ended with this status (0: nothing was written) and error.
    pub fn finish(mut self, status: u16, error: Option<&GatewayError>) {
        self.emit(status, error);
    }

    fn emit(&mut self, status: u16, error: Option<&GatewayError>) {
        let Some(resource) = self.resource.take() else {
            return;
        };
        if let Some(held) = self.served.held.take() {
            self.served.charges = held.charge_worst_now();
        }
        if self.gw.audit.enabled() {
            let served = std::mem::take(&mut self.served);
            self.gw.audit.emit(model_call_event(
                self.rc,
                resource,
                &self.requested,
                self.streaming,
                status,
                self.started.elapsed(),
                served,
                error,
            ));
        }
    }
}

impl Drop for CallRecord<'_, '_, '_> {
    fn drop(&mut self) {
        if self.resource.is_some() {
            let cut = GatewayError::Upstream(
                "the call was cut off: the gateway stopped before it ended".into(),
            );
            self.emit(0, Some(&cut));
        }
    }
}

#[allow(clippy::too_many_arguments)]
fn model_call_event(
    rc: &RequestCtx<'_>,
    resource: ResourceRef,
    requested: &str,
    streaming: bool,
    status: u16,
    latency: std::time::Duration,
    served: Served<'_>,
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
