//! Guarding a streamed answer after translation, event by event in the caller's shape. Each
//! text field of each choice (OpenAI) or content block (Anthropic) runs through its own
//! window ([`StreamGuard`]): an event carries only what its window released, and events with
//! nothing left to say are dropped. When a choice finishes or a block stops, what its windows
//! still hold is checked and sent first, then the finish. Tool calls are held whole (id, name
//! and arguments) and sent, guarded, as one delta when they end. Anything else an event
//! carries is guarded as it passes, denying by default ([`Tally::message`]). A `block` match
//! ends the stream before any of the matched text is sent.

use std::sync::Arc;

use bytes::Bytes;
use serde_json::{json, Map, Value};

use crate::error::Shape;
use crate::guard::detect::Detector;
use crate::guard::window::StreamGuard;
use crate::guard::{Filtered, Tally};

/// The text fields that stream through windows.
const OPENAI_TEXT: [&str; 3] = ["content", "refusal", "reasoning_content"];

/// An OpenAI tool call (or legacy function call) held until it ends.
struct HeldCall {
    choice: u64,
    index: u64,
    legacy: bool,
    id: Option<Value>,
    kind: Option<Value>,
    name: String,
    arguments: String,
}

/// Text and calls in flight.
pub struct StreamFilter {
    shape: Shape,
    detector: Arc<Detector>,
    window: usize,
    /// A window per (choice or block index, field).
    texts: Vec<((u64, &'static str), StreamGuard)>,
    calls: Vec<HeldCall>,
    /// Anthropic tool inputs held whole, by block index.
    inputs: Vec<(u64, String)>,
    /// The first OpenAI chunk, to shape the chunks a flush sends.
    template: Option<Value>,
    /// Whether any guarded text or call has gone to the caller.
    pub sent: bool,
}

impl StreamFilter {
    pub fn new(shape: Shape, detector: Arc<Detector>, window: usize) -> Self {
        Self {
            shape,
            detector,
            window,
            texts: Vec::new(),
            calls: Vec::new(),
            inputs: Vec::new(),
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
            self.flush(None, out, tally)?;
            out.push(event);
            return Ok(());
        }
        let Ok(value) = serde_json::from_str::<Value>(trimmed) else {
            // Not an event of the caller's API: guarded whole, as text.
            out.push(match tally.text(trimmed)? {
                Some(redacted) => reframe(&event, &redacted),
                None => event,
            });
            return Ok(());
        };
        match self.shape {
            Shape::Anthropic => self.anthropic(value, event, out, tally),
            _ => self.openai(value, event, out, tally),
        }
    }

    /// The stream ended: whatever is still held, checked and sent.
    pub fn finish(&mut self, out: &mut Vec<Bytes>, tally: &mut Tally) -> Result<(), Filtered> {
        self.flush(None, out, tally)
    }

    /// The matches of the windows still open, for the call's tally.
    pub fn count(&self, tally: &mut Tally) {
        for (_, g) in &self.texts {
            tally.add(g.hits());
        }
    }

    /// Text of one field pushed through its window: what may be sent now.
    fn released(
        &mut self,
        key: (u64, &'static str),
        text: &str,
        tally: &mut Tally,
    ) -> Result<String, Filtered> {
        let at = match self.texts.iter().position(|(k, _)| *k == key) {
            Some(at) => at,
            None => {
                let guard = StreamGuard::new(self.detector.clone(), self.window);
                self.texts.push((key, guard));
                self.texts.len() - 1
            }
        };
        let out = self.texts[at].1.push(text).map_err(|b| tally.stop(&b.0))?;
        self.sent |= !out.is_empty();
        Ok(out)
    }

    /// Ends everything held for `index` (every index when `None`): the rest of its windows,
    /// checked, then its calls and inputs, guarded whole.
    fn flush(
        &mut self,
        index: Option<u64>,
        out: &mut Vec<Bytes>,
        tally: &mut Tally,
    ) -> Result<(), Filtered> {
        let ours = |i: u64| index.is_none_or(|x| x == i);
        let (ending, open): (Vec<_>, Vec<_>) = std::mem::take(&mut self.texts)
            .into_iter()
            .partition(|((i, _), _)| ours(*i));
        self.texts = open;
        for ((i, field), mut guard) in ending {
            let rest = guard.finish().map_err(|b| tally.stop(&b.0));
            tally.add(guard.hits());
            let rest = rest?;
            if !rest.is_empty() {
                self.sent = true;
                out.push(self.text_event(i, field, &rest));
            }
        }
        let (ending, open): (Vec<_>, Vec<_>) = std::mem::take(&mut self.calls)
            .into_iter()
            .partition(|c| ours(c.choice));
        self.calls = open;
        for call in ending {
            out.push(self.call_event(call, tally)?);
        }
        let (ending, open): (Vec<_>, Vec<_>) = std::mem::take(&mut self.inputs)
            .into_iter()
            .partition(|(i, _)| ours(*i));
        self.inputs = open;
        for (i, mut input) in ending {
            tally.arguments(&mut input)?;
            self.sent = true;
            out.push(anthropic_event(
                &json!({"type": "content_block_delta", "index": i,
                "delta": {"type": "input_json_delta", "partial_json": input}}),
            ));
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

    /// A held call, guarded whole, as one delta.
    fn call_event(&mut self, mut call: HeldCall, tally: &mut Tally) -> Result<Bytes, Filtered> {
        tally.arguments(&mut call.arguments)?;
        self.sent = true;
        let function = json!({"name": call.name, "arguments": call.arguments});
        let delta = if call.legacy {
            json!({ "function_call": function })
        } else {
            let mut c = Map::new();
            c.insert("index".into(), json!(call.index));
            if let Some(id) = call.id {
                c.insert("id".into(), id);
            }
            if let Some(kind) = call.kind {
                c.insert("type".into(), kind);
            }
            c.insert("function".into(), function);
            json!({ "tool_calls": [c] })
        };
        Ok(self.openai_chunk(json!({"index": call.choice, "delta": delta, "finish_reason": null})))
    }

    /// A chunk like the first one seen, with one choice.
    fn openai_chunk(&self, choice: Value) -> Bytes {
        let mut chunk = self
            .template
            .clone()
            .unwrap_or_else(|| json!({"object": "chat.completion.chunk"}));
        chunk["choices"] = json!([choice]);
        openai_event(&chunk)
    }

    fn openai(
        &mut self,
        mut chunk: Value,
        event: Bytes,
        out: &mut Vec<Bytes>,
        tally: &mut Tally,
    ) -> Result<(), Filtered> {
        let Some(Value::Array(choices)) = chunk.get_mut("choices").map(std::mem::take) else {
            // Not a chunk of choices: guarded whole.
            return self.pass(chunk, event, out, tally);
        };
        let usage = chunk.as_object_mut().and_then(|c| c.remove("usage"));
        // Whatever else the chunk holds beside its choices.
        tally.message(&mut chunk)?;
        if self.template.is_none() {
            self.template = Some(chunk.clone());
        }
        let mut before = Vec::new();
        let mut kept = Vec::new();
        let mut finished = Vec::new();
        for mut choice in choices {
            let index = choice.get("index").and_then(Value::as_u64).unwrap_or(0);
            let finish = choice
                .as_object_mut()
                .and_then(|c| c.remove("finish_reason"))
                .filter(|f| !f.is_null());
            if self.openai_choice(index, &mut choice, &mut before, tally)? {
                kept.push(choice);
            }
            if let Some(reason) = finish {
                finished.push((index, reason));
            }
        }
        out.extend(before);
        if !kept.is_empty() || (finished.is_empty() && usage.is_some()) {
            // The chunk itself, unless finish chunks are still to be made from it.
            let mut now = if finished.is_empty() {
                std::mem::take(&mut chunk)
            } else {
                chunk.clone()
            };
            now["choices"] = Value::Array(kept);
            if finished.is_empty() {
                if let Some(usage) = &usage {
                    now["usage"] = usage.clone();
                }
            }
            out.push(openai_event(&now));
        }
        let last = finished.len();
        for (n, (index, reason)) in finished.into_iter().enumerate() {
            self.flush(Some(index), out, tally)?;
            let mut end = chunk.clone();
            end["choices"] = json!([{"index": index, "delta": {}, "finish_reason": reason}]);
            if n + 1 == last {
                if let Some(usage) = &usage {
                    end["usage"] = usage.clone();
                }
            }
            out.push(openai_event(&end));
        }
        Ok(())
    }

    /// Guards one choice of a chunk in place (its finish taken out); calls that ended go into
    /// `before`. Whether the choice still says anything.
    fn openai_choice(
        &mut self,
        index: u64,
        choice: &mut Value,
        before: &mut Vec<Bytes>,
        tally: &mut Tally,
    ) -> Result<bool, Filtered> {
        if let Some(c) = choice.as_object_mut() {
            c.remove("logprobs");
        }
        let Some(delta) = choice.get_mut("delta").and_then(Value::as_object_mut) else {
            return Ok(false);
        };
        for field in OPENAI_TEXT {
            let Some(Value::String(text)) = delta.remove(field) else {
                continue;
            };
            let released = self.released((index, field), &text, tally)?;
            if !released.is_empty() {
                delta.insert(field.into(), Value::String(released));
            }
        }
        if let Some(Value::Array(calls)) = delta.remove("tool_calls") {
            for call in calls {
                self.hold_call(index, call, false, before, tally)?;
            }
        }
        if let Some(call) = delta.remove("function_call") {
            self.hold_call(index, call, true, before, tally)?;
        }
        for (key, item) in delta.iter_mut() {
            if key != "role" {
                tally.message(item)?;
            }
        }
        Ok(!delta.is_empty())
    }

    /// Adds a piece of a call to what is held; a call of a new index ends the one before.
    fn hold_call(
        &mut self,
        choice: u64,
        piece: Value,
        legacy: bool,
        before: &mut Vec<Bytes>,
        tally: &mut Tally,
    ) -> Result<(), Filtered> {
        let index = piece.get("index").and_then(Value::as_u64).unwrap_or(0);
        let held = self
            .calls
            .iter()
            .position(|c| c.choice == choice && c.index == index && c.legacy == legacy);
        let at = match held {
            Some(at) => at,
            None => {
                let (ended, open): (Vec<_>, Vec<_>) = std::mem::take(&mut self.calls)
                    .into_iter()
                    .partition(|c| c.choice == choice);
                self.calls = open;
                for call in ended {
                    before.push(self.call_event(call, tally)?);
                }
                self.calls.push(HeldCall {
                    choice,
                    index,
                    legacy,
                    id: None,
                    kind: None,
                    name: String::new(),
                    arguments: String::new(),
                });
                self.calls.len() - 1
            }
        };
        let call = &mut self.calls[at];
        if let Some(id) = piece.get("id").filter(|v| !v.is_null()) {
            call.id = Some(id.clone());
        }
        if let Some(kind) = piece.get("type").filter(|v| !v.is_null()) {
            call.kind = Some(kind.clone());
        }
        let function = if legacy {
            Some(&piece)
        } else {
            piece.get("function")
        };
        if let Some(f) = function {
            if let Some(name) = f.get("name").and_then(Value::as_str) {
                call.name.push_str(name);
            }
            match f.get("arguments") {
                Some(Value::String(args)) => call.arguments.push_str(args),
                Some(Value::Null) | None => {}
                Some(other) => call.arguments.push_str(&other.to_string()),
            }
        }
        Ok(())
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
            Some("content_block_delta") => self.anthropic_delta(index, value, event, out, tally),
            Some("content_block_start") => {
                if let Some(Value::String(text)) = value.pointer_mut("/content_block/text") {
                    let text = std::mem::take(text);
                    let released = self.released((index, "text"), &text, tally)?;
                    value["content_block"]["text"] = Value::String(released);
                    out.push(anthropic_event(&value));
                    return Ok(());
                }
                self.pass(value, event, out, tally)
            }
            Some("content_block_stop") => {
                self.flush(Some(index), out, tally)?;
                out.push(event);
                Ok(())
            }
            Some("message_delta" | "message_stop") => {
                self.flush(None, out, tally)?;
                self.pass(value, event, out, tally)
            }
            _ => self.pass(value, event, out, tally),
        }
    }

    fn anthropic_delta(
        &mut self,
        index: u64,
        mut value: Value,
        event: Bytes,
        out: &mut Vec<Bytes>,
        tally: &mut Tally,
    ) -> Result<(), Filtered> {
        let field = match value.pointer("/delta/type").and_then(Value::as_str) {
            Some("text_delta") => "text",
            Some("thinking_delta") => "thinking",
            Some("input_json_delta") => {
                let piece = value.pointer("/delta/partial_json").and_then(Value::as_str);
                let piece = piece.unwrap_or_default().to_string();
                match self.inputs.iter_mut().find(|(i, _)| *i == index) {
                    Some((_, held)) => held.push_str(&piece),
                    None => self.inputs.push((index, piece)),
                }
                return Ok(());
            }
            _ => return self.pass(value, event, out, tally),
        };
        let text = match value.pointer_mut(&format!("/delta/{field}")) {
            Some(Value::String(text)) => std::mem::take(text),
            _ => String::new(),
        };
        let released = self.released((index, field), &text, tally)?;
        if !released.is_empty() {
            value["delta"][field] = Value::String(released);
            out.push(anthropic_event(&value));
        }
        Ok(())
    }

    /// An event the filter has no window for, guarded whole as it passes.
    fn pass(
        &mut self,
        mut value: Value,
        event: Bytes,
        out: &mut Vec<Bytes>,
        tally: &mut Tally,
    ) -> Result<(), Filtered> {
        if !tally.message(&mut value)? {
            out.push(event);
        } else if self.shape == Shape::Anthropic {
            out.push(anthropic_event(&value));
        } else {
            out.push(openai_event(&value));
        }
        Ok(())
    }
}

/// `event` with its data replaced, its other lines (`event:`, `id:`) kept.
fn reframe(event: &[u8], data: &str) -> Bytes {
    let text = String::from_utf8_lossy(event);
    let mut out = String::new();
    for line in text
        .lines()
        .filter(|l| !l.is_empty() && !l.starts_with("data:"))
    {
        out.push_str(line);
        out.push('\n');
    }
    for line in data.split('\n') {
        out.push_str("data: ");
        out.push_str(line);
        out.push('\n');
    }
    out.push('\n');
    Bytes::from(out)
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
