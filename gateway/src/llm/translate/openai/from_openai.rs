//! An OpenAI caller, an OpenAI-shaped upstream: the body passes through with `model`
//! rewritten, and a streamed call always asks for usage (`stream_options.include_usage`) so
//! spend is never zero; the usage chunk reaches the caller only if it asked for it too.

use super::super::{Body, Context, TranslateError};
use crate::llm::api::Inbound;
use crate::llm::wire::openai::WireUsage;
use bytes::Bytes;
use portcullis_shared::prices::Usage;

pub fn translate_request(inbound: &Inbound, ctx: &Context<'_>) -> Result<Body, TranslateError> {
    let edits = super::super::pass::Rewrite {
        model: Some(ctx.upstream_model),
        include_usage: inbound.stream,
        add: None,
    };
    super::super::pass::splice(&inbound.raw, edits)
}

/// The usage of a whole reply.
pub fn translate_response(body: &[u8]) -> Option<Usage> {
    super::super::pass::usage_of::<WireUsage>(body).map(|u| u.metered())
}

/// Passes events on as they are, except the usage-only chunk the caller did not ask for.
pub struct TranslateStream {
    pass_usage: bool,
    usage: Option<Usage>,
}

impl TranslateStream {
    pub fn new(pass_usage: bool) -> Self {
        Self {
            pass_usage,
            usage: None,
        }
    }

    pub fn usage(&self) -> Option<Usage> {
        self.usage
    }

    pub fn push(&mut self, raw: Bytes, out: &mut Vec<Bytes>) {
        if self.keep(&raw) {
            out.push(raw);
        }
    }

    fn keep(&mut self, event: &[u8]) -> bool {
        if !event.windows(7).any(|w| w == b"\"usage\"") {
            return true;
        }
        #[derive(serde::Deserialize)]
        struct UsageChunk {
            #[serde(default)]
            usage: Option<WireUsage>,
            #[serde(default)]
            choices: Option<Vec<serde::de::IgnoredAny>>,
        }
        let Ok(chunk) = serde_json::from_str::<UsageChunk>(&crate::sse::data(event)) else {
            return true;
        };
        let Some(usage) = chunk.usage else {
            return true;
        };
        self.usage = Some(usage.metered());
        let usage_only = chunk.choices.is_some_and(|c| c.is_empty());
        !usage_only || self.pass_usage
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CHUNK: &str = "data: {\"choices\":[{\"delta\":{\"content\":\"Hi\"}}]}\n\n";
    const USAGE: &str =
        "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":1}}\n\n";
    const DONE: &str = "data: [DONE]\n\n";

    fn run(pass_usage: bool) -> (String, Option<Usage>) {
        let mut s = TranslateStream::new(pass_usage);
        let mut out = Vec::new();
        for e in [CHUNK, USAGE, DONE] {
            s.push(Bytes::from(e), &mut out);
        }
        let text: String = out.iter().map(|e| String::from_utf8_lossy(e)).collect();
        (text, s.usage())
    }

    #[test]
    fn drops_the_usage_chunk_unless_asked() {
        let (out, usage) = run(false);
        assert_eq!(out, format!("{CHUNK}{DONE}"));
        assert_eq!(usage.unwrap().prompt_tokens, 3);
        let (out, _) = run(true);
        assert_eq!(out, format!("{CHUNK}{USAGE}{DONE}"));
    }
}
