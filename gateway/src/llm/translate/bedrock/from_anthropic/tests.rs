//! Anthropic caller, Bedrock upstream: the golden fixtures, and what is refused.

use serde_json::json;

use super::*;
use crate::llm::api::InboundApi;
use crate::llm::translate::golden::{self, CONTEXT_BEDROCK};
use crate::llm::translate::Translation;

#[test]
fn golden_fixtures() {
    let checked = golden::run(
        "bedrock/from_anthropic",
        InboundApi::AnthropicMessages,
        Translation::BedrockFromAnthropic,
        &CONTEXT_BEDROCK,
    );
    assert!(checked >= 7, "{checked} cases");
}

#[test]
fn linked_images_are_refused_by_name() {
    let body = json!({"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": [
        {"type": "image", "source": {"type": "url", "url": "https://example.com/a.png"}}]}]});
    let err =
        translate_request(serde_json::from_value(body).unwrap(), &CONTEXT_BEDROCK).unwrap_err();
    assert!(err.to_string().contains("by URL"), "{err}");
}

#[test]
fn a_corrupt_frame_ends_the_stream_with_an_error() {
    let mut frames = golden::frames(
        br#"{"event": "messageStart", "payload": {"role": "assistant"}}
{"event": "contentBlockDelta", "payload": {"contentBlockIndex": 0, "delta": {"text": "Hi"}}}"#,
    );
    let last = frames.len() - 1;
    frames[last] ^= 0x55;
    let (out, usage) = golden::feed(
        &frames,
        0,
        InboundApi::AnthropicMessages,
        Translation::BedrockFromAnthropic,
        &CONTEXT_BEDROCK,
    );
    let text = String::from_utf8(out).unwrap();
    assert!(text.contains("event: error"), "{text}");
    assert!(usage.is_none());
}
