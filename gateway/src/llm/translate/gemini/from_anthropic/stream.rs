//! Gemini's streamed chunks as Anthropic's events, chunk by chunk: one content block per run
//! of text or thought, one per function call (Gemini sends each call whole: its arguments go
//! out as one `input_json_delta`), thought signatures as signature deltas. The stream has no
//! end marker: it is complete when it ends after a finish reason, cut short otherwise.

use portcullis_shared::prices::Usage;
use serde_json::Value;

use super::{marked, reply_id, stop_reason, tool_use_id};
use crate::llm::translate::Context;
use crate::llm::wire::anthropic as a;
use crate::llm::wire::gemini as g;

/// The block open on the caller's side.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Open {
    Text,
    Thinking,
}

pub struct TranslateStream {
    /// The gateway's request id, for ids the upstream does not give.
    request: String,
    model: String,
    id: Option<String>,
    open: Option<(Open, u32)>,
    next_index: u32,
    calls: usize,
    finish: Option<String>,
    usage: Option<Usage>,
    done: bool,
}

impl TranslateStream {
    pub fn new(ctx: &Context<'_>) -> Self {
        Self {
            request: ctx.id.to_string(),
            model: ctx.upstream_model.to_string(),
            id: None,
            open: None,
            next_index: 0,
            calls: 0,
            finish: None,
            usage: None,
            done: false,
        }
    }

    pub fn usage(&self) -> Option<Usage> {
        self.usage
    }

    /// Takes one upstream chunk (its `data`) and appends the events it makes to `out`.
    pub fn push(&mut self, data: &str, out: &mut Vec<a::StreamEvent>) {
        if self.done {
            return;
        }
        let Ok(chunk) = serde_json::from_str::<g::GenerateResponse>(data) else {
            return self.fail(out, "the upstream sent an event the gateway could not read");
        };
        if let Some(error) = &chunk.error {
            return self.fail(out, &error.message);
        }
        if self.id.is_none() {
            self.start(&chunk, out);
        }
        if let Some(u) = chunk.usage_metadata {
            self.usage = Some(u.metered());
        }
        let blocked = chunk
            .prompt_feedback
            .as_ref()
            .and_then(|f| f.block_reason.as_ref())
            .is_some();
        let Some(candidate) = chunk.candidates.into_iter().next() else {
            if blocked {
                self.finish = Some("SAFETY".into());
            }
            return;
        };
        for part in candidate.content.unwrap_or_default().parts {
            self.part(part, out);
        }
        if let Some(reason) = candidate.finish_reason {
            self.finish = Some(reason);
        }
    }

    fn start(&mut self, chunk: &g::GenerateResponse, out: &mut Vec<a::StreamEvent>) {
        let id = reply_id(chunk, &self.request);
        if let Some(model) = &chunk.model_version {
            self.model = model.clone();
        }
        let message = a::MessageReply {
            id: format!("msg_{id}"),
            kind: "message".into(),
            role: "assistant".into(),
            model: self.model.clone(),
            usage: Some(a::WireUsage::default()),
            ..Default::default()
        };
        self.id = Some(id);
        out.push(a::StreamEvent::MessageStart { message });
    }

    fn part(&mut self, part: g::Part, out: &mut Vec<a::StreamEvent>) {
        let signature = part.thought_signature.as_deref().map(marked);
        if part.thought {
            let index = self.open_block(Open::Thinking, out);
            if let Some(thinking) = part.text.filter(|t| !t.is_empty()) {
                out.push(delta(index, a::BlockDelta::ThinkingDelta { thinking }));
            }
            if let Some(signature) = signature {
                out.push(delta(index, a::BlockDelta::SignatureDelta { signature }));
            }
            return;
        }
        if let Some(signature) = signature {
            // The signature of the part that follows, in a thinking block of its own.
            self.close(out);
            let index = self.open_block(Open::Thinking, out);
            out.push(delta(index, a::BlockDelta::SignatureDelta { signature }));
            self.close(out);
        }
        if let Some(call) = part.function_call {
            self.call(call, part.thought_signature.as_deref(), out);
        } else if let Some(text) = part.text.filter(|t| !t.is_empty()) {
            let index = self.open_block(Open::Text, out);
            out.push(delta(index, a::BlockDelta::TextDelta { text }));
        }
    }

    fn call(
        &mut self,
        call: g::FunctionCall,
        signature: Option<&str>,
        out: &mut Vec<a::StreamEvent>,
    ) {
        self.close(out);
        let index = self.next_index;
        self.next_index += 1;
        let reply = self.id.clone().unwrap_or_default();
        let id = tool_use_id(call.id, &reply, self.calls, signature);
        self.calls += 1;
        out.push(a::StreamEvent::ContentBlockStart {
            index,
            content_block: a::Block::ToolUse {
                id,
                name: call.name,
                input: Value::Object(Default::default()),
            },
        });
        let args = if call.args.is_null() {
            "{}".to_string()
        } else {
            call.args.to_string()
        };
        out.push(delta(
            index,
            a::BlockDelta::InputJsonDelta { partial_json: args },
        ));
        out.push(a::StreamEvent::ContentBlockStop { index });
    }

    fn open_block(&mut self, kind: Open, out: &mut Vec<a::StreamEvent>) -> u32 {
        if let Some((open, index)) = self.open {
            if open == kind {
                return index;
            }
        }
        self.close(out);
        let index = self.next_index;
        self.next_index += 1;
        self.open = Some((kind, index));
        let block = match kind {
            Open::Text => a::Block::text(String::new()),
            Open::Thinking => a::Block::Thinking {
                thinking: String::new(),
                signature: String::new(),
            },
        };
        out.push(a::StreamEvent::ContentBlockStart {
            index,
            content_block: block,
        });
        index
    }

    fn close(&mut self, out: &mut Vec<a::StreamEvent>) {
        if let Some((_, index)) = self.open.take() {
            out.push(a::StreamEvent::ContentBlockStop { index });
        }
    }

    fn fail(&mut self, out: &mut Vec<a::StreamEvent>, message: &str) {
        self.done = true;
        out.push(a::StreamEvent::error("api_error", message));
    }

    /// The upstream ended: complete when it finished its candidate, cut short otherwise.
    pub fn finish(&mut self, out: &mut Vec<a::StreamEvent>) {
        if self.done {
            return;
        }
        let Some(reason) = self.finish.take() else {
            return self.fail(
                out,
                "the upstream stream ended before the message was complete",
            );
        };
        self.close(out);
        self.done = true;
        let stop = stop_reason(&reason, self.calls > 0);
        out.extend(a::closing(stop, self.usage.as_ref()));
    }
}

fn delta(index: u32, delta: a::BlockDelta) -> a::StreamEvent {
    a::StreamEvent::ContentBlockDelta { index, delta }
}
