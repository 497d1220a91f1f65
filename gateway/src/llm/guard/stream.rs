//! Guarding a streamed answer after translation, event by event in the caller's shape. The
//! text of each choice (OpenAI) or content block (Anthropic) runs through its own window
//! ([`StreamGuard`]): an event carries only what the window released, and events with nothing
//! left to say are dropped. A block ends its text: what it still held is checked and released
//! first. Tool-call arguments are held whole and released, guarded, when their call ends. A
//! `block` match ends the stream before any of the matched text is sent.

use std::sync::Arc;

use bytes::Bytes;
use serde_json::{json, Value};

use crate::error::Shape;
use crate::guard::detect::Detector;
use crate::guard::window::StreamGuard;
use crate::guard::{Filtered, Tally};

/// A tool call's arguments held whole: ((choice or block, call), the text so far).
type HeldArgs = ((u64, u64), String);

/// Text and arguments in flight, by choice (OpenAI) or block (Anthropic) index.
pub struct StreamFilter {
    shape: Shape,
    detector: Arc<Detector>,
    window: usize,
    /// Per index: the window, and the field its text goes in (`content`, `text`, `thinking`).
    texts: Vec<(u64, &'static str, StreamGuard)>,
    /// Tool-call arguments held whole: (choice, tool call) or (block, 0) → text so far.
    args: Vec<HeldArgs>,
    /// The last OpenAI chunk, to shape the chunks a flush sends.
    template: Option<Value>,
    /// Whether any guarded text has gone to the caller.
    pub sent: bool,
}

impl StreamFilter {
    pub fn new(shape: Shape, detector: Arc<Detector>, window: usize) -> Self {
        Self {
            shape,
            detector,
            window,
            texts: Vec::new(),
            args: Vec::new(),
            template: None,
            sent: false,
        }
    }

    /// One event of the caller's stream in; what may be sent now appended to `out`.
    pub fn push(
        &mut self,
        event: Bytes,
        out: &mut Vec<Bytes>,
        tally: &mut Tally,
    ) -> Result<(), Filtered> {
        let data = crate::sse::data(&event);
        let trimmed = data.trim();
        if trimmed.is_empty() {
            out.push(event);
            return Ok(());
        }
        if trimmed == "[DONE]" {
            self.flush_all(out, tally)?;
            out.push(event);
            return Ok(());
        }
        let Ok(value) = serde_json::from_str::<Value>(trimmed) else {
            // Not an event of the caller's API: guarded whole, as text.
            return match tally.text(trimmed)? {
                Some(redacted) => {
                    out.push(Bytes::from(format!("data: {redacted}\n\n")));
                    Ok(())
                }
                None => {
                    out.push(event);
                    Ok(())
                }
            };
        };
        match self.shape {
            Shape::Anthropic => self.anthropic(value, event, out, tally),
            _ => self.openai(value, event, out, tally),
        }
    }

    /// The stream ended: whatever is still held, checked and sent.
    pub fn finish(&mut self, out: &mut Vec<Bytes>, tally: &mut Tally) -> Result<(), Filtered> {
        self.flush_all(out, tally)
    }

    /// The matches of every window, for the call's tally.
    pub fn count(&self, tally: &mut Tally) {
        for (_, _, g) in &self.texts {
            tally.add(g.hits());
        }
    }

    fn window(&mut self, index: u64, field: &'static str) -> &mut StreamGuard {
        let at = match self.texts.iter().position(|(i, _, _)| *i == index) {
            Some(at) => at,
            None => {
                let guard = StreamGuard::new(self.detector.clone(), self.window);
                self.texts.push((index, field, guard));
                self.texts.len() - 1
            }
        };
        &mut self.texts[at].2
    }

    fn released(
        &mut self,
        index: u64,
        field: &'static str,
        text: &str,
        tally: &mut Tally,
    ) -> Result<String, Filtered> {
        let out = self
            .window(index, field)
            .push(text)
            .map_err(|b| tally.stop(&b.0))?;
        self.sent |= !out.is_empty();
        Ok(out)
    }

    /// Ends the text of `index`: (its field, what it still held).
    fn end_text(
        &mut self,
        index: u64,
        tally: &mut Tally,
    ) -> Result<Option<(&'static str, String)>, Filtered> {
        let Some(at) = self.texts.iter().position(|(i, _, _)| *i == index) else {
            return Ok(None);
        };
        let (_, field, mut guard) = self.texts.remove(at);
        let rest = guard.finish().map_err(|b| tally.stop(&b.0));
        tally.add(guard.hits());
        let rest = rest?;
        self.sent |= !rest.is_empty();
        Ok((!rest.is_empty()).then_some((field, rest)))
    }

    /// Ends the held arguments of the calls `pick` selects: each guarded whole.
    fn end_args(
        &mut self,
        pick: impl Fn(&(u64, u64)) -> bool,
        tally: &mut Tally,
    ) -> Result<Vec<HeldArgs>, Filtered> {
        let mut done = Vec::new();
        let mut kept = Vec::new();
        for (key, mut args) in std::mem::take(&mut self.args) {
            if pick(&key) {
                super::arguments(&mut args, tally)?;
                done.push((key, args));
            } else {
                kept.push((key, args));
            }
        }
        self.args = kept;
        Ok(done)
    }

    fn hold_args(&mut self, key: (u64, u64), piece: &str) {
        match self.args.iter_mut().find(|(k, _)| *k == key) {
            Some((_, held)) => held.push_str(piece),
            None => self.args.push((key, piece.to_string())),
        }
    }

    fn flush_all(&mut self, out: &mut Vec<Bytes>, tally: &mut Tally) -> Result<(), Filtered> {
        let indexes: Vec<u64> = self.texts.iter().map(|(i, _, _)| *i).collect();
        for index in indexes {
            if let Some((field, rest)) = self.end_text(index, tally)? {
                out.push(self.text_event(index, field, &rest));
            }
        }
        for ((index, call), args) in self.end_args(|_| true, tally)? {
            out.push(self.args_event(index, call, &args));
        }
        Ok(())
    }

    fn text_event(&self, index: u64, field: &str, text: &str) -> Bytes {
        match self.shape {
            Shape::Anthropic => {
                anthropic_event(&json!({"type": "content_block_delta", "index": index,
                "delta": {"type": format!("{field}_delta"), field: text}}))
            }
            _ => self.openai_chunk(
                json!({"index": index, "delta": {field: text}, "finish_reason": null}),
            ),
        }
    }

    fn args_event(&self, index: u64, call: u64, args: &str) -> Bytes {
        match self.shape {
            Shape::Anthropic => {
                anthropic_event(&json!({"type": "content_block_delta", "index": index,
                "delta": {"type": "input_json_delta", "partial_json": args}}))
            }
            _ => self.openai_chunk(json!({"index": index, "delta": {"tool_calls": [
                {"index": call, "function": {"arguments": args}}]}, "finish_reason": null})),
        }
    }

    /// A chunk like the last one seen, with one choice.
    fn openai_chunk(&self, choice: Value) -> Bytes {
        let mut chunk = self
            .template
            .clone()
            .unwrap_or_else(|| json!({"object": "chat.completion.chunk"}));
        chunk["choices"] = json!([choice]);
        if let Some(fields) = chunk.as_object_mut() {
            fields.remove("usage");
        }
        openai_event(&chunk)
    }

    fn openai(
        &mut self,
        mut chunk: Value,
        event: Bytes,
        out: &mut Vec<Bytes>,
        tally: &mut Tally,
    ) -> Result<(), Filtered> {
        let Some(choices) = chunk.get_mut("choices").and_then(Value::as_array_mut) else {
            out.push(event);
            return Ok(());
        };
        let mut taken = std::mem::take(choices);
        let mut before = Vec::new();
        let mut keep = false;
        for choice in &mut taken {
            keep |= self.openai_choice(choice, &mut before, tally)?;
        }
        chunk["choices"] = Value::Array(taken);
        if self.template.is_none() {
            self.template = Some(chunk.clone());
        }
        out.extend(before);
        if keep {
            out.push(openai_event(&chunk));
        }
        Ok(())
    }

    /// Guards one choice of a chunk in place; flushes that must go first into `before`.
    /// Whether the choice still says anything.
    fn openai_choice(
        &mut self,
        choice: &mut Value,
        before: &mut Vec<Bytes>,
        tally: &mut Tally,
    ) -> Result<bool, Filtered> {
        let index = choice.get("index").and_then(Value::as_u64).unwrap_or(0);
        let mut says = false;
        if let Some(delta) = choice.get_mut("delta").and_then(Value::as_object_mut) {
            for field in ["content", "refusal", "reasoning_content"] {
                if let Some(Value::String(text)) = delta.get(field) {
                    if text.is_empty() {
                        continue;
                    }
                    let released = self.released(index, field_name(field), &text.clone(), tally)?;
                    if released.is_empty() {
                        delta.remove(field);
                    } else {
                        delta.insert(field.into(), Value::String(released));
                    }
                }
            }
            if let Some(Value::Array(calls)) = delta.get_mut("tool_calls") {
                for call in calls.iter_mut() {
                    let n = call.get("index").and_then(Value::as_u64).unwrap_or(0);
                    // A new call ends the one before it.
                    for ((i, c), args) in self.end_args(|&(i, c)| i == index && c != n, tally)? {
                        before.push(self.args_event(i, c, &args));
                    }
                    if let Some(Value::String(piece)) = call.pointer_mut("/function/arguments") {
                        self.hold_args((index, n), piece);
                        piece.clear();
                    }
                }
            }
            says = delta.iter().any(|(k, v)| match v {
                Value::String(s) => !s.is_empty() || k == "content",
                Value::Null => false,
                _ => true,
            });
        }
        let finished = choice.get("finish_reason").is_some_and(|f| !f.is_null());
        if finished {
            if let Some((field, rest)) = self.end_text(index, tally)? {
                before.push(self.text_event(index, field, &rest));
            }
            for ((i, c), args) in self.end_args(|&(i, _)| i == index, tally)? {
                before.push(self.args_event(i, c, &args));
            }
        }
        Ok(says || finished || choice.get("logprobs").is_some_and(|l| !l.is_null()))
    }

    fn anthropic(
        &mut self,
        mut value: Value,
        event: Bytes,
        out: &mut Vec<Bytes>,
        tally: &mut Tally,
    ) -> Result<(), Filtered> {
        let index = value.get("index").and_then(Value::as_u64).unwrap_or(0);
        match value.get("type").and_then(Value::as_str) {
            Some("content_block_delta") => {
                let Some(delta) = value.get_mut("delta") else {
                    out.push(event);
                    return Ok(());
                };
                let field = match delta.get("type").and_then(Value::as_str) {
                    Some("text_delta") => "text",
                    Some("thinking_delta") => "thinking",
                    Some("input_json_delta") => {
                        if let Some(piece) = delta.get("partial_json").and_then(Value::as_str) {
                            self.hold_args((index, 0), piece);
                        }
                        return Ok(());
                    }
                    _ => {
                        out.push(event);
                        return Ok(());
                    }
                };
                let text = delta
                    .get(field)
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string();
                let released = self.released(index, field_name(field), &text, tally)?;
                if !released.is_empty() {
                    delta[field] = Value::String(released);
                    out.push(anthropic_event(&value));
                }
                Ok(())
            }
            Some("content_block_stop") => {
                if let Some((field, rest)) = self.end_text(index, tally)? {
                    out.push(self.text_event(index, field, &rest));
                }
                for ((i, c), args) in self.end_args(|&(i, _)| i == index, tally)? {
                    out.push(self.args_event(i, c, &args));
                }
                out.push(event);
                Ok(())
            }
            Some("content_block_start") => {
                if let Some(Value::String(text)) = value.pointer("/content_block/text") {
                    if !text.is_empty() {
                        let released = self.released(index, "text", &text.clone(), tally)?;
                        value["content_block"]["text"] = Value::String(released);
                        out.push(anthropic_event(&value));
                        return Ok(());
                    }
                }
                out.push(event);
                Ok(())
            }
            Some("message_delta" | "message_stop") => {
                self.flush_all(out, tally)?;
                out.push(event);
                Ok(())
            }
            _ => {
                out.push(event);
                Ok(())
            }
        }
    }
}

/// A field name as the `'static` the windows keep.
fn field_name(field: &str) -> &'static str {
    match field {
        "refusal" => "refusal",
        "reasoning_content" => "reasoning_content",
        "thinking" => "thinking",
        "text" => "text",
        _ => "content",
    }
}

fn openai_event(chunk: &Value) -> Bytes {
    crate::llm::translate::openai_event(chunk)
}

fn anthropic_event(value: &Value) -> Bytes {
    let name = value
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or("message");
    Bytes::from(format!("event: {name}\ndata: {value}\n\n"))
}
