//! OpenAI caller, Bedrock upstream (through Anthropic's shape): the golden fixtures.

use crate::llm::api::InboundApi;
use crate::llm::translate::golden::{self, CONTEXT_BEDROCK};
use crate::llm::translate::Translation;

#[test]
fn golden_fixtures() {
    let checked = golden::run(
        "bedrock/from_openai",
        InboundApi::OpenAiChat,
        Translation::BedrockFromOpenAi,
        &CONTEXT_BEDROCK,
    );
    assert!(checked >= 4, "{checked} cases");
}
