//! An OpenAI chat-completions caller, a Gemini upstream: through Anthropic's shape, which
//! carries what both sides need (thinking with its signatures, tool-use ids): the request is
//! translated to Anthropic's and on to Gemini's, the reply back the same way.

use portcullis_shared::prices::Usage;

use super::super::{anthropic, Context, TranslateError};
use crate::llm::wire::gemini as g;
use crate::llm::wire::openai as o;

pub fn translate_request(
    req: o::ChatRequest,
    ctx: &Context<'_>,
) -> Result<g::GenerateRequest, TranslateError> {
    let hub = anthropic::from_openai::translate_request(req, ctx)?;
    super::from_anthropic::translate_request(hub, ctx)
}

pub fn translate_response(
    reply: g::GenerateResponse,
    ctx: &Context<'_>,
) -> (o::ChatCompletion, Option<Usage>) {
    let (hub, usage) = super::from_anthropic::translate_response(reply, ctx);
    let (completion, _) = anthropic::from_openai::translate_response(hub, ctx);
    (completion, usage)
}

#[cfg(test)]
mod tests;
