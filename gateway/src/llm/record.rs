//! The `model.call` event of a model call: what was called, what served it, its usage, cost
//! and quota charges. Emitted when the call ends, or when its request is dropped first.

use std::time::Instant;

use portcullis_shared::audit::AuditEvent;
use portcullis_shared::audit::ResourceRef;
use portcullis_shared::prices;
use portcullis_shared::snapshot::Charge;
use serde::Serialize;

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

/// The payload of a `model.call` event, written as it is serialized (no JSON tree built per
/// call).
#[derive(Serialize)]
struct ModelCall<'a> {
    model: &'a str,
    api: &'static str,
    gateway_id: &'a str,
    stream: bool,
    status: u16,
    latency_ms: f64,
    attempts: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    upstream_status: Option<u16>,
    #[serde(skip_serializing_if = "Option::is_none")]
    served_by: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    provider: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    upstream_model: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    translated: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    usage: Option<UsageRecord>,
    /// Metered usage at the serving model's price, in integer micro-USD.
    #[serde(skip_serializing_if = "Option::is_none")]
    cost_micros: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    price_source: Option<PriceLabel<'a>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    charges: Vec<Charge>,
    #[serde(flatten)]
    guards: crate::guard::Log,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    reason_code: Option<&'static str>,
}

fn model_call_event<'a>(
    rc: &'a RequestCtx<'_>,
    resource: ResourceRef,
    call: &'a Call<'_>,
    served: &'a mut Served<'_>,
    error: Option<&GatewayError>,
) -> AuditEvent<ModelCall<'a>> {
    use portcullis_shared::audit::{results, types};
    let ok = error.is_none() && (200..400).contains(&call.status);
    let mut e = audit::base(
        rc,
        types::MODEL_CALL,
        if ok { results::ALLOWED } else { results::ERROR },
        resource,
    );
    // Prompts and completions are never recorded.
    e.data_handling.omitted = vec!["request.messages".into(), "response.choices".into()];
    let model = served.model.as_deref();
    let price = model.and_then(|m| m.price.as_ref());
    let (cost_micros, price_source) = match (price, served.usage) {
        (Some((source, price)), Some(usage)) => (
            Some(price.cost_micros(&usage)),
            Some(PriceLabel::Priced(source)),
        ),
        (None, Some(_)) => (None, Some(PriceLabel::Unpriced)),
        _ => (None, None),
    };
    let payload = ModelCall {
        model: call.requested,
        api: call.api.as_str(),
        gateway_id: &rc.gateway.id,
        stream: call.streaming,
        status: call.status,
        latency_ms: audit::millis(call.latency),
        attempts: served.attempts,
        upstream_status: (served.upstream_status != 0).then_some(served.upstream_status),
        served_by: model.map(|m| m.name.as_str()),
        provider: model.map(|m| m.provider.id),
        upstream_model: model.map(|m| m.upstream_model.as_str()),
        translated: served.translation.map(Translation::translates),
        usage: served.usage.as_ref().map(UsageRecord::of),
        cost_micros,
        price_source,
        charges: std::mem::take(&mut served.charges),
        guards: std::mem::take(&mut served.guards),
        error: error.map(ToString::to_string),
        reason_code: error.map(|err| err.openai_type_and_code().1),
    };
    e.with_payload(payload)
}

/// Where a call's price came from, written as `override`, `table <version>: <key>` or
/// `unpriced` without building the text first.
enum PriceLabel<'a> {
    Priced(&'a prices::PriceSource),
    Unpriced,
}

impl Serialize for PriceLabel<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            PriceLabel::Priced(prices::PriceSource::Override) => {
                serializer.serialize_str("override")
            }
            PriceLabel::Priced(prices::PriceSource::Table(key)) => {
                serializer.collect_str(&format_args!("table {}: {key}", prices::TABLE_VERSION))
            }
            PriceLabel::Unpriced => serializer.serialize_str("unpriced"),
        }
    }
}

/// Usage as recorded, whatever the provider: prompt tokens include those read from and
/// written to the provider's cache.
#[derive(Serialize)]
struct UsageRecord {
    prompt_tokens: u64,
    completion_tokens: u64,
    total_tokens: u64,
    #[serde(skip_serializing_if = "is_zero")]
    cached_tokens: u64,
    #[serde(skip_serializing_if = "is_zero")]
    cache_write_tokens: u64,
}

impl UsageRecord {
    fn of(u: &prices::Usage) -> Self {
        Self {
            prompt_tokens: u.prompt_tokens,
            completion_tokens: u.completion_tokens,
            total_tokens: u.prompt_tokens.saturating_add(u.completion_tokens),
            cached_tokens: u.cached_tokens,
            cache_write_tokens: u.cache_write_tokens,
        }
    }
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn call<'a>() -> ModelCall<'a> {
        ModelCall {
            model: "chat",
            api: "openai.chat_completions",
            gateway_id: "g1",
            stream: false,
            status: 200,
            latency_ms: 1.5,
            attempts: 1,
            upstream_status: None,
            served_by: None,
            provider: None,
            upstream_model: None,
            translated: None,
            usage: None,
            cost_micros: None,
            price_source: None,
            charges: Vec::new(),
            guards: crate::guard::Log::default(),
            error: None,
            reason_code: None,
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
        let mut guards = crate::guard::Log::default();
        guards.delivered = Some("redacted");
        let served = ModelCall {
            upstream_status: Some(200),
            served_by: Some("m1"),
            provider: Some("openai"),
            upstream_model: Some("gpt-4o-mini"),
            translated: Some(true),
            usage: Some(UsageRecord::of(&usage)),
            cost_micros: Some(7),
            price_source: Some(PriceLabel::Priced(&table)),
            charges: vec![Charge {
                quota_id: "q1".into(),
                day: 20_000,
                caller: String::new(),
                micros: 7,
            }],
            guards,
            error: Some("upstream failed".into()),
            reason_code: Some("upstream_error"),
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
                   "delivered": "redacted",
                   "error": "upstream failed", "reason_code": "upstream_error"})
        );
        let labels = [
            (
                PriceLabel::Priced(&prices::PriceSource::Override),
                "override",
            ),
            (PriceLabel::Unpriced, "unpriced"),
        ];
        for (label, text) in labels {
            assert_eq!(serde_json::to_value(label).unwrap(), json!(text));
        }
    }
}
