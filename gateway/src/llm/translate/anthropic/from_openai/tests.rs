//! OpenAI caller, Anthropic upstream: the golden fixtures, and refusals.

use serde_json::json;

use super::*;
use crate::llm::api::InboundApi;
use crate::llm::translate::golden::{self, CONTEXT_ANTHROPIC};
use crate::llm::translate::Translation;

#[test]
fn golden_fixtures() {
    let checked = golden::run(
        "anthropic/from_openai",
        InboundApi::OpenAiChat,
        Translation::AnthropicFromOpenAi,
        &CONTEXT_ANTHROPIC,
    );
    assert!(checked >= 12, "{checked} cases");
}

fn request(body: serde_json::Value) -> Result<a::MessagesRequest, TranslateError> {
    translate_request(serde_json::from_value(body).unwrap(), &CONTEXT_ANTHROPIC)
}

#[test]
fn what_anthropic_cannot_do_is_refused_by_name() {
    let base = json!({"model": "m", "messages": [{"role": "user", "content": "hi"}]});
    for (field, value, says) in [
        ("n", json!(2), "n greater than 1"),
        (
            "response_format",
            json!({"type": "json_object"}),
            "response_format",
        ),
    ] {
        let mut body = base.clone();
        body[field] = value;
        let err = request(body).unwrap_err();
        assert!(err.to_string().contains(says), "{err}");
    }
    let mut body = base.clone();
    body["response_format"] = json!({"type": "text"});
    assert!(
        request(body).is_ok(),
        "plain text output is what Anthropic gives"
    );
    let audio = json!({"model": "m", "messages": [{"role": "user", "content": [
        {"type": "input_audio", "input_audio": {"data": "AAAA", "format": "wav"}}]}]});
    assert!(request(audio).unwrap_err().to_string().contains("audio"));
    let orphan = json!({"model": "m", "messages": [{"role": "tool", "content": "x"}]});
    assert!(request(orphan)
        .unwrap_err()
        .to_string()
        .contains("tool_call_id"));
    let bad_args = json!({"model": "m", "messages": [{"role": "assistant", "tool_calls": [
        {"id": "t1", "type": "function", "function": {"name": "f", "arguments": "{oops"}}]}]});
    assert!(request(bad_args)
        .unwrap_err()
        .to_string()
        .contains("not JSON"));
}

#[test]
fn without_a_limit_the_default_is_asked_for() {
    let req =
        request(json!({"model": "m", "messages": [{"role": "user", "content": "hi"}]})).unwrap();
    assert_eq!(req.max_tokens, DEFAULT_MAX_TOKENS);
}

#[test]
fn the_usage_chunk_reaches_only_callers_who_asked() {
    let transcript = std::fs::read(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/llm/anthropic/from_openai/basic.in.sse"),
    )
    .unwrap();
    let mut quiet = TranslateStream::new(&CONTEXT_ANTHROPIC, false);
    let mut out = Vec::new();
    let mut events = crate::sse::Events::default();
    events.push(&transcript);
    while let Some((event, _)) = events.next_event().unwrap() {
        quiet.push(&crate::sse::data(&event), &mut out);
    }
    let text = String::from_utf8(out.concat()).unwrap();
    assert!(!text.contains("\"usage\""), "{text}");
    assert!(text.ends_with("data: [DONE]\n\n"));
    assert_eq!(
        quiet.usage().unwrap().completion_tokens,
        15,
        "metered all the same"
    );
}
