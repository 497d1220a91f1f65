//! A caller's model request (`Inbound::parse`, OpenAI Chat Completions or Anthropic Messages),
//! each request translator, each whole-reply translator and each error reader: never a panic,
//! and what a translating route writes is JSON. A passed-through body names the upstream's
//! model and no other, however the caller spelled or repeated `model`.
#![no_main]

use bytes::Bytes;
use libfuzzer_sys::fuzz_target;
use portcullis_gateway::llm::api::{Inbound, InboundApi};
use portcullis_gateway::llm::translate::{Context, Dialect, Translation};

const CONTEXT: Context<'static> = Context {
    upstream_model: "m",
    provider: "p",
    created: 1_700_000_000,
    id: "req-fuzz",
    vertex: false,
};

const DIALECTS: [Dialect; 5] = [
    Dialect::OpenAiChat,
    Dialect::AnthropicMessages,
    Dialect::Gemini,
    Dialect::Bedrock,
    Dialect::Custom,
];

fn json(bytes: &[u8], what: &str) {
    assert!(
        serde_json::from_slice::<serde_json::Value>(bytes).is_ok(),
        "{what} is not JSON: {:?}",
        String::from_utf8_lossy(bytes)
    );
}

/// The `model` a passed-through body sends: the upstream's (`m`), or none at all for Anthropic
/// on Vertex.
fn passed_through_model(bytes: &[u8], vertex: bool) {
    let sent: serde_json::Value = serde_json::from_slice(bytes).unwrap_or_default();
    let model = sent.get("model");
    let upstream = serde_json::Value::from("m");
    assert!(
        model == Some(&upstream) || (vertex && model.is_none()),
        "a passed-through body sends model {model:?}: {:?}",
        String::from_utf8_lossy(bytes)
    );
}

fuzz_target!(|input: &[u8]| {
    let Some((&selector, input)) = input.split_first() else {
        return;
    };
    let api = if selector & 1 == 0 {
        InboundApi::OpenAiChat
    } else {
        InboundApi::AnthropicMessages
    };
    let ctx = Context {
        vertex: selector & 2 != 0,
        ..CONTEXT
    };
    let raw = Bytes::copy_from_slice(input);
    let inbound = Inbound::parse(api, raw.clone(), &http::HeaderMap::new());
    for dialect in DIALECTS {
        let translation = Translation::of(api, dialect);
        if let Ok(inbound) = &inbound {
            if let Ok(body) = translation.request(inbound, &ctx) {
                json(&body.contiguous(), "a translated request");
                if !translation.translates() && translation != Translation::Custom {
                    passed_through_model(&body.contiguous(), ctx.vertex);
                }
            }
        }
        if let Ok((reply, _usage)) = translation.response(raw.clone(), &ctx) {
            if translation.translates() {
                json(&reply, "a translated reply");
            }
        }
        let _ = translation.error(input);
    }
});
