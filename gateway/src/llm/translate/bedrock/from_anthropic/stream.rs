//! ConverseStream's events (decoded from AWS event-stream frames) as Anthropic's, event by
//! event. A text or reasoning block opens with its first delta (Converse sends no start for
//! them); a tool use opens with `contentBlockStart`. `metadata`, the last event, carries the
//! usage. An exception event, or a stream cut short, ends the stream with an error.

use portcullis_shared::prices::Usage;
use serde_json::Value;

use super::{message_id, stop_reason};
use crate::llm::translate::Context;
use crate::llm::wire::anthropic as a;
use crate::llm::wire::bedrock as b;
use crate::llm::wire::eventstream::Event;

pub struct TranslateStream {
    request: String,
    model: String,
    started: bool,
    /// Converse's block index → the open block's index on the caller's side.
    open: Option<(u32, u32)>,
    next_index: u32,
    stop: Option<&'static str>,
    usage: Option<Usage>,
    done: bool,
}

impl TranslateStream {
    pub fn new(ctx: &Context<'_>) -> Self {
        Self {
            request: ctx.id.to_string(),
            model: ctx.upstream_model.to_string(),
            started: false,
            open: None,
            next_index: 0,
            stop: None,
            usage: None,
            done: false,
        }
    }

    pub fn usage(&self) -> Option<Usage> {
        self.usage
    }

    /// Takes one upstream event and appends the events it makes to `out`.
    pub fn push(&mut self, event: &Event, out: &mut Vec<a::StreamEvent>) {
        if self.done {
            return;
        }
        let Ok(p) = serde_json::from_slice::<b::StreamPayload>(&event.payload) else {
            return self.fail(out, "the upstream sent an event the gateway could not read");
        };
        if event.exception {
            let message = p.message.unwrap_or_default();
            return self.fail(out, &format!("{}: {message}", event.kind));
        }
        if !self.started {
            self.start(out);
        }
        let index = p.content_block_index.unwrap_or(0);
        match event.kind.as_str() {
            "contentBlockStart" => {
                if let Some(tool) = p.start.and_then(|s| s.tool_use) {
                    let block = a::Block::ToolUse {
                        id: tool.tool_use_id,
                        name: tool.name,
                        input: Value::Object(Default::default()),
                    };
                    self.open_block(index, block, out);
                }
            }
            "contentBlockDelta" => {
                if let Some(delta) = p.delta {
                    self.delta(index, delta, out);
                }
            }
            "contentBlockStop" => self.close(out),
            "messageStop" => {
                self.close(out);
                self.stop = Some(stop_reason(p.stop_reason.as_deref().unwrap_or("end_turn")));
            }
            "metadata" => {
                self.usage = p.usage.map(|u| u.metered());
                self.end(out);
            }
            _ => {}
        }
    }

    fn start(&mut self, out: &mut Vec<a::StreamEvent>) {
        self.started = true;
        let message = a::MessageReply {
            id: message_id(&self.request),
            kind: "message".into(),
            role: "assistant".into(),
            model: self.model.clone(),
            usage: Some(a::WireUsage::default()),
            ..Default::default()
        };
        out.push(a::StreamEvent::MessageStart { message });
    }

    fn delta(&mut self, index: u32, d: b::BlockDelta, out: &mut Vec<a::StreamEvent>) {
        let thinking = || a::Block::Thinking {
            thinking: String::new(),
            signature: String::new(),
        };
        let delta = if let Some(text) = d.text {
            self.open_block(index, a::Block::text(String::new()), out);
            a::BlockDelta::TextDelta { text }
        } else if let Some(tool) = d.tool_use {
            a::BlockDelta::InputJsonDelta {
                partial_json: tool.input,
            }
        } else if let Some(r) = d.reasoning_content {
            if let Some(data) = r.redacted_content {
                // Redacted reasoning arrives whole: a block of its own.
                self.open_block(index, a::Block::RedactedThinking { data }, out);
                return;
            }
            self.open_block(index, thinking(), out);
            match (r.text, r.signature) {
                (Some(thinking), _) => a::BlockDelta::ThinkingDelta { thinking },
                (None, Some(signature)) => a::BlockDelta::SignatureDelta { signature },
                (None, None) => return,
            }
        } else {
            return;
        };
        if let Some((_, at)) = self.open.filter(|(i, _)| *i == index) {
            out.push(a::StreamEvent::ContentBlockDelta { index: at, delta });
        }
    }

    /// Opens a block for Converse's `index`, unless it is open already.
    fn open_block(&mut self, index: u32, block: a::Block, out: &mut Vec<a::StreamEvent>) {
        if self.open.is_some_and(|(i, _)| i == index) {
            return;
        }
        self.close(out);
        let at = self.next_index;
        self.next_index += 1;
        self.open = Some((index, at));
        out.push(a::StreamEvent::ContentBlockStart {
            index: at,
            content_block: block,
        });
    }

    fn close(&mut self, out: &mut Vec<a::StreamEvent>) {
        if let Some((_, at)) = self.open.take() {
            out.push(a::StreamEvent::ContentBlockStop { index: at });
        }
    }

    fn end(&mut self, out: &mut Vec<a::StreamEvent>) {
        self.close(out);
        self.done = true;
        let stop = self.stop.unwrap_or("end_turn");
        out.extend(a::closing(stop, self.usage.as_ref()));
    }

    fn fail(&mut self, out: &mut Vec<a::StreamEvent>, message: &str) {
        self.done = true;
        out.push(a::StreamEvent::error("api_error", message));
    }

    /// The upstream ended. Complete once `metadata` came; after `messageStop` without it, the
    /// message is whole but its usage unknown; before, the stream was cut short.
    pub fn finish(&mut self, out: &mut Vec<a::StreamEvent>) {
        if self.done {
            return;
        }
        if self.stop.is_some() {
            self.end(out);
        } else {
            self.fail(
                out,
                "the upstream stream ended before the message was complete",
            );
        }
    }
}
