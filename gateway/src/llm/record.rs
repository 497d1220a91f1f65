//! The `model.call` event of a model call: what was called, what served it, its usage, cost
//! and quota charges. Emitted when the call ends, or when its request is dropped first.

use std::time::Instant;

use portcullis_shared::audit::catalog::{ModelCall, UsageRecord};
use portcullis_shared::audit::{AuditEvent, ResourceRef};
use portcullis_shared::prices;
use portcullis_shared::snapshot::Charge;

use super::api::InboundApi;
use super::translate::Translation;
use crate::error::GatewayError;
use crate::request::RequestCtx;
use crate::spend::Held;
use crate::{audit, Gateway};

/// What the members loop learned, for the `model.call` event.
#[derive(Default)]
pub struct Served<'g> {
    pub model: Option<std::sync::Arc<crate::llm::table::ModelEntry>>,
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
        let requested = portcullis_shared::audit::bound::clip(requested);
        self.requested = requested.to_string();
        self.resource.name = requested.into_owned();
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
            let resource = std::mem::take(&mut self.resource);
            let call = Call {
                requested: &self.requested,
                api: self.api,
                streaming: self.streaming,
                status,
                latency: self.started.elapsed(),
            };
            self.gw.audit.emit(model_call_event(
                self.rc,
                resource,
                &call,
                &mut self.served,
                error,
            ));
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

/// The `model.call` event of a call that ended (the event names what served it and what it
/// cost; never its prompt or answer).
fn model_call_event(
    rc: &RequestCtx<'_>,
    resource: ResourceRef,
    call: &Call<'_>,
    served: &mut Served<'_>,
    error: Option<&GatewayError>,
) -> AuditEvent<ModelCall> {
    use portcullis_shared::audit::results;
    let ok = error.is_none() && (200..400).contains(&call.status);
    let model = served.model.as_deref();
    let price = model.and_then(|m| m.price.as_ref());
    let (cost_micros, price_source) = match (price, served.usage) {
        (Some((source, price)), Some(usage)) => {
            (Some(price.cost_micros(&usage)), Some(price_label(source)))
        }
        (None, Some(_)) => (None, Some("unpriced".to_string())),
        _ => (None, None),
    };
    let (guards, delivered) = std::mem::take(&mut served.guards).into_fields();
    let payload = ModelCall {
        model: call.requested.to_string(),
        api: call.api.as_str().to_string(),
        gateway_id: rc.gateway.id.clone(),
        stream: call.streaming,
        status: call.status,
        latency_ms: audit::millis(call.latency),
        attempts: served.attempts,
        upstream_status: (served.upstream_status != 0).then_some(served.upstream_status),
        served_by: model.map(|m| m.name.clone()),
        provider: model.map(|m| m.provider.id.to_string()),
        upstream_model: model.map(|m| m.upstream_model.clone()),
        translated: served.translation.map(Translation::translates),
        usage: served.usage.as_ref().map(usage_record),
        cost_micros,
        price_source,
        charges: std::mem::take(&mut served.charges),
        guards,
        delivered,
        error: error.map(ToString::to_string),
        reason_code: error.map(|err| err.openai_type_and_code().1.to_string()),
    };
    let result = if ok { results::ALLOWED } else { results::ERROR };
    let mut e = audit::event(rc, result, resource, payload);
    // Prompts and completions are never recorded.
    e.data_handling.omitted = vec!["request.messages".into(), "response.choices".into()];
    e
}

/// Where a call's price came from: `override` or `table <version>: <key>`.
fn price_label(source: &prices::PriceSource) -> String {
    match source {
        prices::PriceSource::Override => "override".to_string(),
        prices::PriceSource::Table(key) => format!("table {}: {key}", prices::TABLE_VERSION),
    }
}

/// Usage as recorded, whatever the provider: prompt tokens include those read from and
/// written to the provider's cache.
fn usage_record(u: &prices::Usage) -> UsageRecord {
    UsageRecord {
        prompt_tokens: u.prompt_tokens,
        completion_tokens: u.completion_tokens,
        total_tokens: u.prompt_tokens.saturating_add(u.completion_tokens),
        cached_tokens: u.cached_tokens,
        cache_write_tokens: u.cache_write_tokens,
    }
}

#[cfg(test)]
mod tests {
    use portcullis_shared::api::guards::{GuardAction, GuardKind, GuardStage};
    use portcullis_shared::audit::catalog::GuardRecord;
    use serde_json::json;

    use super::*;

    fn call() -> ModelCall {
        ModelCall {
            model: "chat".into(),
            api: "openai.chat_completions".into(),
            gateway_id: "g1".into(),
            stream: false,
            status: 200,
            latency_ms: 1.5,
            attempts: 1,
            ..ModelCall::default()
        }
    }

    #[test]
    fn a_call_nothing_served_records_only_what_was_asked() {
        let payload = serde_json::to_value(call()).unwrap();
        assert_eq!(
            payload,
            json!({"model": "chat", "api": "openai.chat_completions", "gateway_id": "g1",
                   "stream": false, "status": 200, "latency_ms": 1.5, "attempts": 1})
        );
    }

    #[test]
    fn a_served_call_records_its_usage_price_charges_and_guards() {
        let usage = prices::Usage {
            prompt_tokens: 10,
            completion_tokens: 5,
            cached_tokens: 4,
            cache_write_tokens: 0,
        };
        let table = prices::PriceSource::Table("gpt-4o-mini");
        let log = crate::guard::Log {
            records: vec![GuardRecord {
                guard_id: "gd1".into(),
                guard: "no-secrets".into(),
                stage: GuardStage::LlmOutput,
                kind: GuardKind::Secrets,
                action: GuardAction::Redact,
                matches: 2,
            }],
            delivered: Some("redacted"),
        };
        let (guards, delivered) = log.into_fields();
        let served = ModelCall {
            upstream_status: Some(200),
            served_by: Some("m1".into()),
            provider: Some("openai".into()),
            upstream_model: Some("gpt-4o-mini".into()),
            translated: Some(true),
            usage: Some(usage_record(&usage)),
            cost_micros: Some(7),
            price_source: Some(price_label(&table)),
            charges: vec![Charge {
                quota_id: "q1".into(),
                day: 20_000,
                caller: String::new(),
                micros: 7,
            }],
            guards,
            delivered,
            error: Some("upstream failed".into()),
            reason_code: Some("upstream_error".into()),
            ..call()
        };
        let payload = serde_json::to_value(served).unwrap();
        assert_eq!(
            payload,
            json!({"model": "chat", "api": "openai.chat_completions", "gateway_id": "g1",
                   "stream": false, "status": 200, "latency_ms": 1.5, "attempts": 1,
                   "upstream_status": 200, "served_by": "m1", "provider": "openai",
                   "upstream_model": "gpt-4o-mini", "translated": true,
                   "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15,
                             "cached_tokens": 4},
                   "cost_micros": 7,
                   "price_source": format!("table {}: gpt-4o-mini", prices::TABLE_VERSION),
                   "charges": [{"quota_id": "q1", "day": 20_000, "micros": 7}],
                   "guards": [{"guard_id": "gd1", "guard": "no-secrets", "stage": "llm_output",
                               "kind": "secrets", "action": "redact", "matches": 2}],
                   "delivered": "redacted",
                   "error": "upstream failed", "reason_code": "upstream_error"})
        );
        assert_eq!(price_label(&prices::PriceSource::Override), "override");
    }
}
