//! Quotas on the model path: before a member is called, its worst-case cost is reserved
//! against every enabled quota that applies; after the call the reservation is settled to the
//! metered cost (or, if the upstream reported no usage, kept at the worst case: never zero).

use portcullis_shared::prices::{Price, Usage};
use serde_json::{Map, Value};

use crate::error::GatewayError;
use crate::request::RequestCtx;
use crate::snapshot::{ModelEntry, Target};
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
/// than their bytes), plus the larger output limit the request sets for each of the `n`
/// choices.
pub fn worst_case(price: &Price, body_len: usize, request: &Map<String, Value>) -> u64 {
    let output = ["max_completion_tokens", "max_tokens"]
        .iter()
        .filter_map(|k| request.get(*k).and_then(Value::as_u64))
        .max()
        .filter(|n| *n > 0)
        .unwrap_or(DEFAULT_OUTPUT_TOKENS);
    let n = request.get("n").and_then(Value::as_u64).unwrap_or(1).max(1);
    price.cost_micros(&Usage {
        prompt_tokens: (body_len as u64).saturating_add(attachment_tokens(request)),
        completion_tokens: output.saturating_mul(n),
        cached_tokens: 0,
    })
}

/// The allowance for the image and file parts of the request's messages.
fn attachment_tokens(request: &Map<String, Value>) -> u64 {
    let Some(messages) = request.get("messages").and_then(Value::as_array) else {
        return 0;
    };
    messages
        .iter()
        .filter_map(|m| m.get("content").and_then(Value::as_array))
        .flatten()
        .map(|part| match part.get("type").and_then(Value::as_str) {
            Some("image_url") => IMAGE_TOKENS,
            Some("file") => FILE_TOKENS,
            _ => 0,
        })
        .fold(0, u64::saturating_add)
}

/// Reserves for one member; `None` when no quota applies.
pub async fn reserve<'g>(
    gw: &'g Gateway,
    rc: &RequestCtx<'_>,
    target: &Target,
    model: &ModelEntry,
    body_len: usize,
    request: &Map<String, Value>,
) -> Result<Option<Held<'g>>, Blocked> {
    let act_as = &rc.context.typed().act_as;
    let scope = CallScope {
        agent_id: &rc.agent.id,
        gateway_id: &rc.gateway.id,
        user: (act_as.present && act_as.verified).then_some(act_as.sub.as_str()),
        pool_id: match target {
            Target::Pool(p) => Some(p.id.as_str()),
            Target::Model(_) => None,
        },
        model_id: &model.id,
    };
    let applied = spend::applicable(&rc.snap.quotas, &scope, chrono::Utc::now().timestamp());
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
    let worst = worst_case(price, body_len, request);
    let held = if gw.config.spend_store.is_some() {
        let Some(store) = gw.shared_spend.get() else {
            return Err(Blocked::All(GatewayError::QuotaUnavailable(
                "spend quotas apply to this call but the shared spend store is not connected; \
                 quotas fail closed"
                    .into(),
            )));
        };
        store
            .reserve(
                &rc.snap.workspace_id,
                applied,
                worst,
                rc.request_id,
                gw.background.clone(),
            )
            .await
            .map(Held::Shared)
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
pub fn threshold_event(
    rc: &RequestCtx<'_>,
    c: &Crossing,
) -> portcullis_shared::audit::AuditEventV1 {
    let q = &c.applied.quota;
    let resource = crate::audit::resource("quota", &q.id, &q.name);
    let mut e = crate::audit::base(
        rc,
        portcullis_shared::audit::types::QUOTA_THRESHOLD,
        portcullis_shared::audit::results::ALLOWED,
        resource,
    );
    e.payload = serde_json::json!({
        "quota_id": q.id,
        "percent": c.percent,
        "spent_micros": c.spent,
        "limit_micros": q.limit_micros,
        "window": q.window.as_str(),
        "caller": c.applied.caller,
        "resets_at": c.applied.resets_at(),
    });
    e
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
    let mut e = crate::audit::base(
        rc,
        portcullis_shared::audit::types::QUOTA_EXCEEDED,
        portcullis_shared::audit::results::DENIED,
        resource,
    );
    e.payload = serde_json::json!({
        "quota_id": quota_id,
        "reason": message,
        "reason_code": "quota_exceeded",
        "resets_at": resets_at,
    });
    gw.audit.emit(e);
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// gpt-4o-mini: 0.15 and 0.60 USD per million tokens.
    const PRICE: Price = Price {
        input: 150_000,
        output: 600_000,
        cached_input: 75_000,
    };

    fn worst(body: Value) -> u64 {
        let len = body.to_string().len();
        worst_case(&PRICE, len, body.as_object().unwrap())
    }

    fn cost(prompt: u64, completion: u64) -> u64 {
        PRICE.cost_micros(&Usage {
            prompt_tokens: prompt,
            completion_tokens: completion,
            cached_tokens: 0,
        })
    }

    #[test]
    fn the_larger_output_limit_counts_for_every_choice() {
        let text = json!({"model": "m", "messages": [{"role": "user", "content": "hi"}]});
        let len = text.to_string().len() as u64;
        assert_eq!(worst(text.clone()), cost(len, DEFAULT_OUTPUT_TOKENS));
        let mut both = text.clone();
        both["max_completion_tokens"] = json!(16);
        both["max_tokens"] = json!(100_000);
        both["n"] = json!(3);
        let len = both.to_string().len() as u64;
        assert_eq!(
            worst(both),
            cost(len, 300_000),
            "a server that honours only max_tokens may write 100,000 tokens per choice"
        );
        let mut zero = text;
        zero["max_tokens"] = json!(0);
        let len = zero.to_string().len() as u64;
        assert_eq!(worst(zero), cost(len, DEFAULT_OUTPUT_TOKENS));
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
        assert_eq!(worst(body), cost(len + 2 * IMAGE_TOKENS + FILE_TOKENS, 10));
    }
}
