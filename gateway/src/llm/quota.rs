//! Quotas on the model path: before a member is called, its worst-case cost is reserved
//! against every enabled quota that applies; after the call the reservation is settled to the
//! metered cost (or, if the upstream reported no usage, kept at the worst case: never zero).

use portcullis_shared::audit::catalog::{QuotaExceeded, QuotaThreshold};
use portcullis_shared::audit::{results, AuditEvent};
use portcullis_shared::prices::{Price, Usage};

use super::api::Limits;
use crate::error::GatewayError;
use crate::llm::table::{ModelEntry, Target};
use crate::request::RequestCtx;
use crate::spend::{self, usd, CallScope, Crossing, Held, Refusal};
use crate::Gateway;

/// Output tokens reserved for a call that sets no `max_tokens`/`max_completion_tokens`.
pub const DEFAULT_OUTPUT_TOKENS: u64 = 16_384;

/// Prompt tokens reserved for each image part: the most a current model bills for one image
/// (gpt-4o-mini at high detail, 2048×768: 2,833 + 8 tiles × 5,667 tokens), whether the image
/// is linked or inline.
pub const IMAGE_TOKENS: u64 = 50_000;

/// Prompt tokens reserved for each file part (a PDF inline or by id): its pages can cost more
/// tokens than its bytes, so the largest context window of a current OpenAI model.
pub const FILE_TOKENS: u64 = 1_048_576;

/// Why a member cannot be called under the quotas.
pub enum Blocked {
    /// This member only (a model quota, or an unpriced model): try the next one.
    Member(GatewayError),
    /// Every member (a workspace, agent, user, pool or gateway quota).
    All(GatewayError),
}

/// The worst case of a call: every request byte a prompt token (text never has fewer bytes
/// than tokens), plus an allowance for each image and file part (which can cost more tokens
/// than their bytes), plus the request's output limit for each of its choices.
pub fn worst_case(price: &Price, body_len: usize, limits: &Limits) -> u64 {
    let output = limits.max_output.unwrap_or(DEFAULT_OUTPUT_TOKENS);
    let attachments = limits
        .images
        .saturating_mul(IMAGE_TOKENS)
        .saturating_add(limits.files.saturating_mul(FILE_TOKENS));
    price.cost_micros(&Usage {
        prompt_tokens: (body_len as u64).saturating_add(attachments),
        completion_tokens: output.saturating_mul(limits.choices.max(1)),
        ..Usage::default()
    })
}

/// Reserves for one member; `None` when no quota applies.
pub async fn reserve<'g>(
    gw: &'g Gateway,
    rc: &RequestCtx<'_>,
    target: &Target,
    model: &ModelEntry,
    body_len: usize,
    limits: &Limits,
) -> Result<Option<Held<'g>>, Blocked> {
    let act_as = &rc.context.typed().act_as;
    let scope = CallScope {
        agent_id: &rc.agent.id,
        gateway_id: &rc.gateway.id,
        // Every admitted identity: an asserted (`none`) one only reaches here when the
        // workspace admits `none`.
        user: act_as.present.then_some(act_as.sub.as_str()),
        pool_id: match target {
            Target::Pool(p) => Some(p.id.as_str()),
            Target::Model(_) => None,
        },
        model_id: &model.id,
    };
    let applied = spend::applicable(rc.quotas, &scope, chrono::Utc::now().timestamp());
    if applied.is_empty() {
        return Ok(None);
    }
    let Some((_, price)) = &model.price else {
        return Err(Blocked::Member(GatewayError::Unpriced(format!(
            "model '{}' ({}) has no known price, and a spend quota applies to this call: \
             set provider_config.pricing on the connection",
            model.name, model.upstream_model
        ))));
    };
    let worst = worst_case(price, body_len, limits);
    let held = if gw.config.spend_store.is_some() {
        let Some(store) = gw.redis_spend.get() else {
            return Err(Blocked::All(GatewayError::QuotaUnavailable(
                "spend quotas apply to this call but the shared spend store is not connected; \
                 quotas fail closed"
                    .into(),
            )));
        };
        store
            .reserve(
                rc.workspace_id,
                applied,
                worst,
                rc.request_id,
                gw.background.clone(),
            )
            .await
            .map(Held::Redis)
    } else {
        gw.spend.reserve(applied, worst).map(Held::Memory)
    };
    match held {
        Ok(h) => Ok(Some(h)),
        Err(Refusal::NotSeeded) => Err(Blocked::All(GatewayError::QuotaUnavailable(
            "spend quotas apply to this call but the gateway has not loaded its spend counters \
             from the control plane yet; retry shortly"
                .into(),
        ))),
        Err(Refusal::StoreDown(why)) => Err(Blocked::All(GatewayError::QuotaUnavailable(format!(
            "{why}; quotas fail closed"
        )))),
        Err(Refusal::Exceeded {
            quota,
            spent,
            resets_at,
            model_only,
        }) => {
            let err = GatewayError::QuotaExceeded {
                message: format!(
                    "the {} has {} spent; this call could cost up to {}; it resets at {resets_at}",
                    quota.describe(),
                    usd(spent),
                    usd(worst)
                ),
                quota_id: quota.id.clone(),
                resets_at,
            };
            Err(if model_only {
                Blocked::Member(err)
            } else {
                Blocked::All(err)
            })
        }
    }
}

/// `quota.threshold`: a settled call took a quota past 80 % or 100 % of its limit.
pub fn threshold_event(rc: &RequestCtx<'_>, c: &Crossing) -> AuditEvent<QuotaThreshold> {
    let q = &c.applied.quota;
    let resource = crate::audit::resource("quota", &q.id, &q.name);
    let payload = QuotaThreshold {
        quota_id: q.id.clone(),
        percent: c.percent,
        spent_micros: c.spent,
        limit_micros: q.limit_micros,
        window: q.window.as_str().to_string(),
        caller: c.applied.caller.clone(),
        resets_at: c.applied.resets_at(),
    };
    crate::audit::event(rc, results::ALLOWED, resource, payload)
}

/// `quota.exceeded`: a call (or a pool member) was refused because a quota had no room.
pub fn refused(gw: &Gateway, rc: &RequestCtx<'_>, err: &GatewayError) {
    let GatewayError::QuotaExceeded {
        message,
        quota_id,
        resets_at,
    } = err
    else {
        return;
    };
    let resource = crate::audit::resource("quota", quota_id, "");
    let payload = QuotaExceeded {
        quota_id: quota_id.clone(),
        reason: message.clone(),
        reason_code: "quota_exceeded".into(),
        resets_at: resets_at.clone(),
    };
    gw.audit
        .emit(crate::audit::event(rc, results::DENIED, resource, payload));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::api::{Inbound, InboundApi};
    use serde_json::{json, Value};

    /// gpt-4o-mini: 0.15 and 0.60 USD per million tokens.
    const PRICE: Price = Price {
        input: 150_000,
        output: 600_000,
        cached_input: 75_000,
        cache_write: 187_500,
    };

    fn worst(api: InboundApi, body: Value) -> u64 {
        let raw = bytes::Bytes::from(body.to_string());
        let len = raw.len();
        let inbound = Inbound::parse(api, raw, &http::HeaderMap::new()).unwrap();
        worst_case(&PRICE, len, &inbound.limits)
    }

    fn cost(prompt: u64, completion: u64) -> u64 {
        PRICE.cost_micros(&Usage {
            prompt_tokens: prompt,
            completion_tokens: completion,
            ..Usage::default()
        })
    }

    #[test]
    fn the_larger_output_limit_counts_for_every_choice() {
        let text = json!({"model": "m", "messages": [{"role": "user", "content": "hi"}]});
        let len = text.to_string().len() as u64;
        assert_eq!(
            worst(InboundApi::OpenAiChat, text.clone()),
            cost(len, DEFAULT_OUTPUT_TOKENS)
        );
        let mut both = text.clone();
        both["max_completion_tokens"] = json!(16);
        both["max_tokens"] = json!(100_000);
        both["n"] = json!(3);
        let len = both.to_string().len() as u64;
        assert_eq!(
            worst(InboundApi::OpenAiChat, both),
            cost(len, 300_000),
            "a server that honours only max_tokens may write 100,000 tokens per choice"
        );
        let mut zero = text;
        zero["max_tokens"] = json!(0);
        let len = zero.to_string().len() as u64;
        assert_eq!(
            worst(InboundApi::OpenAiChat, zero),
            cost(len, DEFAULT_OUTPUT_TOKENS)
        );
    }

    #[test]
    fn images_and_files_are_reserved_beyond_their_bytes() {
        let body = json!({"model": "m", "max_tokens": 10, "messages": [{"role": "user", "content": [
            {"type": "text", "text": "compare"},
            {"type": "image_url", "image_url": {"url": "https://example.com/a.png"}},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}},
            {"type": "file", "file": {"file_id": "file-abc"}}
        ]}]});
        let len = body.to_string().len() as u64;
        assert_eq!(
            worst(InboundApi::OpenAiChat, body),
            cost(len + 2 * IMAGE_TOKENS + FILE_TOKENS, 10)
        );
        // Anthropic: images and documents, in tool results too.
        let body = json!({"model": "m", "max_tokens": 10, "messages": [{"role": "user", "content": [
            {"type": "image", "source": {"type": "url", "url": "https://example.com/a.png"}},
            {"type": "tool_result", "tool_use_id": "t", "content": [
                {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}},
                {"type": "document", "source": {"type": "url", "url": "https://example.com/a.pdf"}}
            ]}
        ]}]});
        let len = body.to_string().len() as u64;
        assert_eq!(
            worst(InboundApi::AnthropicMessages, body),
            cost(len + 2 * IMAGE_TOKENS + FILE_TOKENS, 10)
        );
    }
}
