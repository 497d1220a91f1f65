//! Every stream translator (`portcullis_gateway::llm::translate`), behind the framing the
//! relay uses (server-sent events, or AWS event-stream frames for Bedrock): never a panic; the
//! caller's events are each whole (ending in a blank line), and those of a translating route
//! carry JSON; and however the upstream's bytes are cut, the caller gets the same bytes and the
//! same usage.
#![no_main]

use libfuzzer_sys::fuzz_target;
use portcullis_gateway::fuzzing::translate_stream;
use portcullis_gateway::llm::api::InboundApi;
use portcullis_gateway::llm::translate::{Context, Dialect, Translation};

const CONTEXT: Context<'static> = Context {
    upstream_model: "m",
    provider: "p",
    created: 1_700_000_000,
    id: "req-fuzz",
    vertex: false,
};

const ROUTES: [(InboundApi, Dialect); 10] = [
    (InboundApi::OpenAiChat, Dialect::OpenAiChat),
    (InboundApi::OpenAiChat, Dialect::AnthropicMessages),
    (InboundApi::OpenAiChat, Dialect::Gemini),
    (InboundApi::OpenAiChat, Dialect::Bedrock),
    (InboundApi::OpenAiChat, Dialect::Custom),
    (InboundApi::AnthropicMessages, Dialect::OpenAiChat),
    (InboundApi::AnthropicMessages, Dialect::AnthropicMessages),
    (InboundApi::AnthropicMessages, Dialect::Gemini),
    (InboundApi::AnthropicMessages, Dialect::Bedrock),
    (InboundApi::AnthropicMessages, Dialect::Custom),
];

/// A translated event's `data:` lines hold JSON (or OpenAI's `[DONE]`).
fn check_event(event: &[u8]) {
    let text = std::str::from_utf8(event).unwrap_or_else(|e| panic!("not UTF-8: {e}"));
    assert!(text.ends_with("\n\n"), "not a whole event: {text:?}");
    let data = portcullis_shared::sse::data(text.as_bytes());
    if !data.is_empty() && data != "[DONE]" {
        assert!(
            serde_json::from_str::<serde_json::Value>(&data).is_ok(),
            "not JSON: {text:?}"
        );
    }
}

fuzz_target!(|input: &[u8]| {
    let Some((&selector, input)) = input.split_first() else {
        return;
    };
    let (api, dialect) = ROUTES[usize::from(selector) % ROUTES.len()];
    let cut = usize::from(selector / 16) + 1;
    let translation = Translation::of(api, dialect);
    let Ok(whole) = translate_stream(input, 0, api, translation, &CONTEXT) else {
        panic!("the fixed request does not parse");
    };
    let Ok(chunked) = translate_stream(input, cut, api, translation, &CONTEXT) else {
        panic!("the fixed request does not parse");
    };
    if translation.translates() {
        whole.events.iter().for_each(|e| check_event(e));
    }
    assert_eq!(whole.corrupt, chunked.corrupt);
    assert_eq!(
        String::from_utf8_lossy(&whole.events.concat()),
        String::from_utf8_lossy(&chunked.events.concat()),
        "{translation:?}, cut into {cut}-byte chunks"
    );
    assert_eq!(whole.usage, chunked.usage);
});
