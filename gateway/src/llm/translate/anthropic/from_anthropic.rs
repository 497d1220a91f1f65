//! An Anthropic caller, an Anthropic upstream: the body passes through with `model`
//! rewritten; events pass through untouched while the usage of `message_start` and
//! `message_delta` is metered.

use bytes::Bytes;
use portcullis_shared::prices::Usage;

use super::super::{Body, Context, TranslateError};
use crate::llm::api::Inbound;
use crate::llm::wire::anthropic::{StreamEvent, StreamUsage, WireUsage, VERTEX_VERSION};

pub fn translate_request(inbound: &Inbound, ctx: &Context<'_>) -> Result<Body, TranslateError> {
    let edits = super::super::pass::Rewrite {
        model: (!ctx.vertex).then_some(ctx.upstream_model),
        include_usage: false,
        add: ctx.vertex.then_some(("anthropic_version", VERTEX_VERSION)),
    };
    super::super::pass::splice(&inbound.raw, edits)
}

/// The usage of a whole reply.
pub fn translate_response(body: &[u8]) -> Option<Usage> {
    super::super::pass::usage_of::<WireUsage>(body).map(|u| u.metered())
}

/// Passes every event on; meters the two that carry usage.
#[derive(Default)]
pub struct TranslateStream {
    usage: StreamUsage,
}

impl TranslateStream {
    pub fn usage(&self) -> Option<Usage> {
        self.usage.metered()
    }

    pub fn push(&mut self, raw: Bytes, out: &mut Vec<Bytes>) {
        if raw.windows(7).any(|w| w == b"\"usage\"") {
            match serde_json::from_str::<StreamEvent>(&crate::sse::data(&raw)) {
                Ok(StreamEvent::MessageStart { message }) => self.usage.start(message.usage),
                Ok(StreamEvent::MessageDelta { usage, .. }) => self.usage.delta(usage),
                _ => {}
            }
        }
        out.push(raw);
    }
}

#[cfg(test)]
mod tests {
    use crate::llm::api::InboundApi;
    use crate::llm::translate::golden::{self, CONTEXT_ANTHROPIC};
    use crate::llm::translate::Translation;

    #[test]
    fn golden_fixtures() {
        let checked = golden::run(
            "anthropic/from_anthropic",
            InboundApi::AnthropicMessages,
            Translation::AnthropicPassThrough,
            &CONTEXT_ANTHROPIC,
        );
        assert!(checked >= 2, "{checked} cases");
    }
}
