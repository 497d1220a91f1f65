//! Anthropic caller, Gemini upstream: the golden fixtures, and what is refused.

use serde_json::json;

use super::*;
use crate::llm::api::InboundApi;
use crate::llm::translate::golden::{self, CONTEXT_GEMINI};
use crate::llm::translate::Translation;

#[test]
fn golden_fixtures() {
    let checked = golden::run(
        "gemini/from_anthropic",
        InboundApi::AnthropicMessages,
        Translation::GeminiFromAnthropic,
        &CONTEXT_GEMINI,
    );
    assert!(checked >= 9, "{checked} cases");
}

fn request(body: serde_json::Value) -> Result<g::GenerateRequest, TranslateError> {
    translate_request(serde_json::from_value(body).unwrap(), &CONTEXT_GEMINI)
}

#[test]
fn a_result_must_answer_a_call_and_server_tools_are_refused() {
    let orphan = json!({"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "nowhere", "content": "x"}]}]});
    assert!(request(orphan).unwrap_err().to_string().contains("nowhere"));
    let server = json!({"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}],
        "tools": [{"type": "web_search_20250305", "name": "web_search"}]});
    assert!(request(server)
        .unwrap_err()
        .to_string()
        .contains("web_search"));
}

#[test]
fn a_linked_image_goes_as_file_data_with_its_type() {
    let body = json!({"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": [
        {"type": "image", "source": {"type": "url", "url": "https://example.com/cat.webp?x=1"}}]}]});
    let req = request(body).unwrap();
    let data = req.contents[0].parts[0].file_data.clone().unwrap();
    assert_eq!(
        (data.mime_type.as_str(), data.file_uri.as_str()),
        ("image/webp", "https://example.com/cat.webp?x=1")
    );
}
