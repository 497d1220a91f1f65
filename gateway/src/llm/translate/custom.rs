//! `custom` upstreams: the caller's request goes to `{base_url}{path}` untouched (no
//! translation, no `model` rewrite), and the reply comes back untouched. Usage is metered when
//! the reply carries it in OpenAI's or Anthropic's shape.

use bytes::Bytes;
use portcullis_shared::prices::Usage;

use super::anthropic::from_anthropic;
use super::openai::from_openai;

/// The usage of a whole reply, in either shape.
pub fn translate_response(body: &[u8]) -> Option<Usage> {
    let usage: serde_json::Value = super::pass::usage_of(body)?;
    if usage.get("prompt_tokens").is_some() {
        from_openai::translate_response(body)
    } else {
        from_anthropic::translate_response(body)
    }
}

/// Passes every event on, metering whichever shape carries usage.
pub struct TranslateStream {
    openai: from_openai::TranslateStream,
    anthropic: from_anthropic::TranslateStream,
}

impl Default for TranslateStream {
    fn default() -> Self {
        Self {
            openai: from_openai::TranslateStream::new(true),
            anthropic: from_anthropic::TranslateStream::default(),
        }
    }
}

impl TranslateStream {
    pub fn usage(&self) -> Option<Usage> {
        self.openai.usage().or_else(|| self.anthropic.usage())
    }

    pub fn push(&mut self, raw: Bytes, out: &mut Vec<Bytes>) {
        // Both meters see the event; only the caller's copy is kept.
        let mut metered = Vec::with_capacity(2);
        self.openai.push(raw.clone(), &mut metered);
        self.anthropic.push(raw.clone(), &mut metered);
        out.push(raw);
    }
}
