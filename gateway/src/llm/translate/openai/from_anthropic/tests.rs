//! Anthropic caller, OpenAI-shaped upstream: the golden fixtures, and refusals.

use serde_json::json;

use super::*;
use crate::llm::api::InboundApi;
use crate::llm::translate::golden::{self, CONTEXT_OPENAI};
use crate::llm::translate::Translation;

#[test]
fn golden_fixtures() {
    let checked = golden::run(
        "openai/from_anthropic",
        InboundApi::AnthropicMessages,
        Translation::OpenAiFromAnthropic,
        &CONTEXT_OPENAI,
    );
    assert!(checked >= 10, "{checked} cases");
}

fn request(body: serde_json::Value, provider: &str) -> Result<o::OutgoingChat, TranslateError> {
    let ctx = Context {
        provider,
        ..CONTEXT_OPENAI
    };
    translate_request(serde_json::from_value(body).unwrap(), &ctx)
}

#[test]
fn other_openai_shaped_providers_get_max_tokens() {
    let body =
        json!({"model": "m", "max_tokens": 99, "messages": [{"role": "user", "content": "hi"}]});
    let groq = request(body.clone(), "groq").unwrap();
    assert_eq!(
        (groq.max_tokens, groq.max_completion_tokens),
        (Some(99), None)
    );
    let openai = request(body, "openai").unwrap();
    assert_eq!(
        (openai.max_tokens, openai.max_completion_tokens),
        (None, Some(99))
    );
}

#[test]
fn what_an_openai_shaped_model_cannot_take_is_refused_by_name() {
    let server_tool = json!({"model": "m", "max_tokens": 9, "messages": [{"role": "user", "content": "hi"}],
        "tools": [{"type": "web_search_20250305", "name": "web_search"}]});
    assert!(request(server_tool, "openai")
        .unwrap_err()
        .to_string()
        .contains("web_search"));
    let by_file = json!({"model": "m", "max_tokens": 9, "messages": [{"role": "user", "content": [
        {"type": "image", "source": {"type": "file", "file_id": "file_01"}}]}]});
    assert!(request(by_file, "openai")
        .unwrap_err()
        .to_string()
        .contains("file id"));
    let role =
        json!({"model": "m", "max_tokens": 9, "messages": [{"role": "system", "content": "x"}]});
    assert!(request(role, "openai")
        .unwrap_err()
        .to_string()
        .contains("user or assistant"));
}

#[test]
fn a_stream_that_never_finishes_ends_with_an_error_event() {
    let cut =
        b"data: {\"id\":\"c\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hi\"}}]}\n\n";
    let (out, usage) = golden::feed(
        cut,
        0,
        InboundApi::AnthropicMessages,
        Translation::OpenAiFromAnthropic,
        &CONTEXT_OPENAI,
    );
    let text = String::from_utf8(out).unwrap();
    assert!(text.contains("event: error"), "{text}");
    assert!(!text.contains("message_stop"), "{text}");
    assert!(usage.is_none());
}

#[test]
fn comments_and_keep_alives_are_skipped() {
    let stream = concat!(
        ": OPENROUTER PROCESSING\n\n",
        "data: {\"id\":\"c\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hi\"}}]}\n\n",
        ":\n\n",
        "data: {\"id\":\"c\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n",
        "data: [DONE]\n\n"
    );
    let (out, _) = golden::feed(
        stream.as_bytes(),
        0,
        InboundApi::AnthropicMessages,
        Translation::OpenAiFromAnthropic,
        &CONTEXT_OPENAI,
    );
    let text = String::from_utf8(out).unwrap();
    assert!(!text.contains("event: error"), "{text}");
    assert!(
        text.contains("\"text\":\"Hi\"") && text.contains("message_stop"),
        "{text}"
    );
}
