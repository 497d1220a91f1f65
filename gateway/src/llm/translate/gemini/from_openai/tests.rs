//! OpenAI caller, Gemini upstream (through Anthropic's shape): the golden fixtures.

use crate::llm::api::InboundApi;
use crate::llm::translate::golden::{self, CONTEXT_GEMINI};
use crate::llm::translate::Translation;

#[test]
fn golden_fixtures() {
    let checked = golden::run(
        "gemini/from_openai",
        InboundApi::OpenAiChat,
        Translation::GeminiFromOpenAi,
        &CONTEXT_GEMINI,
    );
    assert!(checked >= 5, "{checked} cases");
}
