//! An OpenAI chat-completions caller, a Bedrock upstream: through Anthropic's shape, which
//! Converse mirrors closely (reasoning with signatures, tool-use ids, cache usage).

use portcullis_shared::prices::Usage;

use super::super::{anthropic, Context, TranslateError};
use crate::llm::wire::bedrock as b;
use crate::llm::wire::openai as o;

pub fn translate_request(
    req: o::ChatRequest,
    ctx: &Context<'_>,
) -> Result<b::ConverseRequest, TranslateError> {
    let hub = anthropic::from_openai::translate_request(req, ctx)?;
    super::from_anthropic::translate_request(hub, ctx)
}

pub fn translate_response(
    reply: b::ConverseResponse,
    ctx: &Context<'_>,
) -> (o::ChatCompletion, Option<Usage>) {
    let (hub, usage) = super::from_anthropic::translate_response(reply, ctx);
    let (completion, _) = anthropic::from_openai::translate_response(hub, ctx);
    (completion, usage)
}

#[cfg(test)]
mod tests;
