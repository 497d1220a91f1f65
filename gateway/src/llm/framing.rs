//! How an upstream's stream is cut into events: server-sent events, or AWS event-stream
//! frames (Bedrock's ConverseStream).

use super::translate::{Translation, UpstreamEvent};
use super::wire::eventstream;
use crate::sse::Events;

pub enum Framing {
    Sse(Events),
    Aws(eventstream::Decoder),
}

impl Framing {
    pub fn of(translation: Translation) -> Self {
        match translation {
            Translation::BedrockFromOpenAi | Translation::BedrockFromAnthropic => {
                Framing::Aws(eventstream::Decoder::default())
            }
            _ => Framing::Sse(Events::default()),
        }
    }

    pub fn push(&mut self, chunk: &[u8]) {
        match self {
            Framing::Sse(e) => e.push(chunk),
            Framing::Aws(d) => d.push(chunk),
        }
    }

    /// The next whole event, `None` until more bytes arrive, or why the stream is unreadable.
    pub fn next_event(&mut self) -> Result<Option<UpstreamEvent>, String> {
        match self {
            Framing::Sse(e) => e
                .next_event()
                .map(|e| e.map(|(event, _)| UpstreamEvent::Sse(event.freeze())))
                .map_err(|e| e.to_string()),
            Framing::Aws(d) => d
                .next_event()
                .map(|e| e.map(UpstreamEvent::Aws))
                .map_err(|e| e.to_string()),
        }
    }

    /// At the end of the stream: an unterminated last server-sent event (passed on), or
    /// whether a frame was cut short.
    pub fn rest(&mut self) -> Result<Option<UpstreamEvent>, String> {
        match self {
            Framing::Sse(e) => {
                let rest = e.rest();
                Ok((!rest.is_empty()).then(|| UpstreamEvent::Sse(rest.freeze())))
            }
            Framing::Aws(d) if d.has_partial_frame() => {
                Err("the upstream stream ended in the middle of a frame".into())
            }
            Framing::Aws(_) => Ok(None),
        }
    }
}
