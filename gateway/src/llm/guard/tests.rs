//! The model guard stage on replies in each caller shape: whole, streamed event by event, and
//! what the caller sent.

use std::sync::Arc;

use bytes::Bytes;
use portcullis_shared::api::guards::GuardStage;
use serde_json::{json, Value};

use super::stream::StreamFilter;
use crate::error::Shape;
use crate::guard::detect::{Action, Detector, Finds, GuardSpec, Pii};
use crate::guard::Tally;

const CARD: &str = "4111 1111 1111 1111";

fn detector(action: Action) -> Arc<Detector> {
    Arc::new(
        Detector::compile(vec![
            GuardSpec {
                id: "g1".into(),
                name: "pii".into(),
                action,
                finds: Finds::Pii(vec![Pii::CardNumber, Pii::Email]),
            },
            GuardSpec {
                id: "g2".into(),
                name: "words".into(),
                action,
                finds: Finds::Keywords {
                    words: vec!["falcon".into()],
                    case_sensitive: false,
                },
            },
        ])
        .unwrap()
        .unwrap(),
    )
}

fn tally(d: &Arc<Detector>, stage: GuardStage) -> Tally {
    Tally::new(stage, d.clone())
}

fn openai_chunk(delta: Value, finish: Option<&str>) -> Bytes {
    let chunk = json!({"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "m",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]});
    Bytes::from(format!("data: {chunk}\n\n"))
}

fn anthropic_event(value: Value) -> Bytes {
    let name = value["type"].as_str().unwrap().to_string();
    Bytes::from(format!("event: {name}\ndata: {value}\n\n"))
}

/// Runs events through a filter; the events sent, and whether a guard stopped the stream.
fn run(
    shape: Shape,
    d: &Arc<Detector>,
    window: usize,
    events: Vec<Bytes>,
) -> (Vec<Value>, bool, Tally) {
    let mut filter = StreamFilter::new(shape, d.clone(), window);
    let mut t = tally(d, GuardStage::LlmOutput);
    let mut out = Vec::new();
    let mut stopped = false;
    for e in events {
        if filter.push(e, &mut out, &mut t).is_err() {
            stopped = true;
            break;
        }
    }
    if !stopped {
        stopped = filter.finish(&mut out, &mut t).is_err();
    }
    filter.count(&mut t);
    let sent = out
        .iter()
        .filter_map(|e| {
            let data = crate::sse::data(e);
            serde_json::from_str(data.trim()).ok()
        })
        .collect();
    (sent, stopped, t)
}

fn openai_text(sent: &[Value]) -> String {
    sent.iter()
        .filter_map(|c| {
            c.pointer("/choices/0/delta/content")
                .and_then(Value::as_str)
        })
        .collect()
}

fn pieces(text: &str, size: usize) -> Vec<String> {
    text.as_bytes()
        .chunks(size)
        .map(|c| String::from_utf8(c.to_vec()).unwrap())
        .collect()
}

fn openai_stream(text: &str, size: usize) -> Vec<Bytes> {
    let mut events = vec![openai_chunk(
        json!({"role": "assistant", "content": ""}),
        None,
    )];
    events.extend(
        pieces(text, size)
            .into_iter()
            .map(|p| openai_chunk(json!({"content": p}), None)),
    );
    events.push(openai_chunk(json!({}), Some("stop")));
    events.push(Bytes::from_static(b"data: [DONE]\n\n"));
    events
}

#[test]
fn a_streamed_card_number_is_redacted_across_chunks() {
    let d = detector(Action::Redact);
    let text = format!("Your card {CARD} is on file, about Falcon.");
    let (sent, stopped, t) = run(Shape::OpenAi, &d, 0, openai_stream(&text, 3));
    assert!(!stopped);
    assert_eq!(
        openai_text(&sent),
        "Your card [REDACTED:card_number] is on file, about [REDACTED:keyword]."
    );
    assert_eq!(sent.last().unwrap()["choices"][0]["finish_reason"], "stop");
    assert_eq!(t.record().len(), 2);
}

#[test]
fn a_block_ends_the_stream_before_any_byte_of_the_match() {
    let d = detector(Action::Block);
    let text = format!("{}Your card {CARD} is on file.", "clean text. ".repeat(100));
    let (sent, stopped, t) = run(Shape::OpenAi, &d, 0, openai_stream(&text, 5));
    assert!(stopped);
    assert!(t.blocked);
    let got = openai_text(&sent);
    assert!(text.starts_with(&got));
    assert!(!got.contains("4111"), "{got}");
    assert!(
        got.len() > 500,
        "clean text before the window went out: {}",
        got.len()
    );
}

#[test]
fn a_clean_stream_is_released_chunk_by_chunk_behind_the_window() {
    let d = detector(Action::Block);
    let text = "All clear here. ".repeat(200);
    let (sent, stopped, _) = run(Shape::OpenAi, &d, 0, openai_stream(&text, 16));
    assert!(!stopped);
    assert_eq!(openai_text(&sent), text);
    let hold = d.longest + 4;
    let text_chunks = sent
        .iter()
        .filter(|c| {
            c.pointer("/choices/0/delta/content")
                .is_some_and(|t| t != "")
        })
        .count();
    // Every input chunk after the first `hold` bytes is released as one chunk of its own.
    assert!(text_chunks >= 200 - hold / 16 - 1, "{text_chunks} chunks");
}

#[test]
fn openai_tool_arguments_are_guarded_whole_and_stay_json() {
    let d = detector(Action::Redact);
    let args = r#"{"to": "ana@example.com", "note": "ok"}"#;
    let mut events = vec![openai_chunk(
        json!({"role": "assistant", "tool_calls": [{"index": 0, "id": "call_1", "type": "function",
            "function": {"name": "send", "arguments": ""}}]}),
        None,
    )];
    for p in pieces(args, 4) {
        events.push(openai_chunk(
            json!({"tool_calls": [{"index": 0, "function": {"arguments": p}}]}),
            None,
        ));
    }
    events.push(openai_chunk(json!({}), Some("tool_calls")));
    let (sent, stopped, _) = run(Shape::OpenAi, &d, 0, events);
    assert!(!stopped);
    let joined: String = sent
        .iter()
        .filter_map(|c| c.pointer("/choices/0/delta/tool_calls/0/function/arguments"))
        .filter_map(Value::as_str)
        .collect();
    let parsed: Value = serde_json::from_str(&joined).unwrap();
    assert_eq!(parsed, json!({"to": "[REDACTED:email]", "note": "ok"}));
    let calls: Vec<&Value> = sent
        .iter()
        .filter_map(|c| c.pointer("/choices/0/delta/tool_calls/0"))
        .collect();
    assert_eq!(calls.len(), 1, "the call goes whole, once: {sent:?}");
    assert_eq!(calls[0]["id"], "call_1");
    assert_eq!(calls[0]["function"]["name"], "send");
}

#[test]
fn anthropic_text_blocks_and_tool_input_are_guarded() {
    let d = detector(Action::Redact);
    let mut events = vec![
        anthropic_event(json!({"type": "message_start", "message": {"id": "m", "content": []}})),
        anthropic_event(
            json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
        ),
    ];
    for p in pieces(&format!("Pay with {CARD} today"), 4) {
        events.push(anthropic_event(
            json!({"type": "content_block_delta", "index": 0,
            "delta": {"type": "text_delta", "text": p}}),
        ));
    }
    events.push(anthropic_event(
        json!({"type": "content_block_stop", "index": 0}),
    ));
    events.push(anthropic_event(
        json!({"type": "content_block_start", "index": 1,
        "content_block": {"type": "tool_use", "id": "t", "name": "mail", "input": {}}}),
    ));
    for p in pieces(r#"{"to": "bo@example.org"}"#, 5) {
        events.push(anthropic_event(
            json!({"type": "content_block_delta", "index": 1,
            "delta": {"type": "input_json_delta", "partial_json": p}}),
        ));
    }
    events.push(anthropic_event(
        json!({"type": "content_block_stop", "index": 1}),
    ));
    events.push(anthropic_event(json!({"type": "message_stop"})));
    let (sent, stopped, _) = run(Shape::Anthropic, &d, 0, events);
    assert!(!stopped);
    let text: String = sent
        .iter()
        .filter_map(|e| e.pointer("/delta/text").and_then(Value::as_str))
        .collect();
    assert_eq!(text, "Pay with [REDACTED:card_number] today");
    let input: String = sent
        .iter()
        .filter_map(|e| e.pointer("/delta/partial_json").and_then(Value::as_str))
        .collect();
    assert_eq!(
        serde_json::from_str::<Value>(&input).unwrap(),
        json!({"to": "[REDACTED:email]"})
    );
    // The text is released before its block stops, and the stop events are kept in order.
    let types: Vec<&str> = sent.iter().filter_map(|e| e["type"].as_str()).collect();
    assert_eq!(types.last(), Some(&"message_stop"));
    let first_stop = types
        .iter()
        .position(|t| *t == "content_block_stop")
        .unwrap();
    assert!(sent[..first_stop]
        .iter()
        .any(|e| e.pointer("/delta/text").is_some()));
}

#[test]
fn whole_replies_are_redacted_or_refused_in_each_shape() {
    let d = detector(Action::Redact);
    let reply = json!({"choices": [{"index": 0, "message": {"role": "assistant",
        "content": format!("card {CARD}"),
        "tool_calls": [{"id": "c", "type": "function", "function": {"name": "f",
            "arguments": "{\"email\":\"x@example.com\"}"}}]}}]});
    let body = Bytes::from(reply.to_string());
    let mut t = tally(&d, GuardStage::LlmOutput);
    let got: Value = serde_json::from_slice(&super::whole(body, &mut t).unwrap()).unwrap();
    assert_eq!(
        got["choices"][0]["message"]["content"],
        "card [REDACTED:card_number]"
    );
    assert_eq!(got["choices"][0]["message"]["role"], "assistant");
    let args = got["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"]
        .as_str()
        .unwrap();
    assert_eq!(
        serde_json::from_str::<Value>(args).unwrap(),
        json!({"email": "[REDACTED:email]"})
    );

    let clean = Bytes::from(r#"{"content":[{"type":"text","text":"nothing here"}]}"#);
    let mut t = tally(&d, GuardStage::LlmOutput);
    assert_eq!(
        super::whole(clean.clone(), &mut t).unwrap(),
        clean,
        "sent as it came"
    );

    let blocked = detector(Action::Block);
    let body =
        Bytes::from(json!({"content": [{"type": "text", "text": "project FALCON"}]}).to_string());
    let mut t = tally(&blocked, GuardStage::LlmOutput);
    let err = super::whole(body, &mut t).unwrap_err();
    assert_eq!(err.code(), "output_filtered");
    assert!(!err.to_string().to_lowercase().contains("falcon"), "{err}");
}

#[test]
fn input_guards_see_messages_and_system_but_not_roles_or_images() {
    let d = detector(Action::Redact);
    let mut body = json!({"system": format!("card {CARD}"), "messages": [
        {"role": "user", "content": [{"type": "text", "text": "mail ana@example.com"},
            {"type": "image", "source": {"type": "base64", "data": "falcon"}}]}]});
    let mut t = tally(&d, GuardStage::LlmInput);
    assert!(super::input(Shape::Anthropic, &mut body, &mut t).unwrap());
    assert_eq!(body["system"], "card [REDACTED:card_number]");
    assert_eq!(
        body["messages"][0]["content"][0]["text"],
        "mail [REDACTED:email]"
    );
    assert_eq!(
        body["messages"][0]["content"][1]["source"]["data"],
        "falcon"
    );
    assert_eq!(body["messages"][0]["role"], "user");
}

#[test]
fn text_and_finish_keep_their_order_and_the_usage_chunk_survives() {
    let d = detector(Action::Redact);
    let usage = json!({"id": "c1", "object": "chat.completion.chunk", "choices": [],
        "usage": {"prompt_tokens": 3, "completion_tokens": 4, "total_tokens": 7}});
    let events = vec![
        openai_chunk(json!({"role": "assistant", "content": ""}), None),
        openai_chunk(json!({"reasoning_content": "thinking it over"}), None),
        openai_chunk(json!({"content": "0123456789"}), None),
        openai_chunk(json!({"content": "ABCDEF"}), Some("stop")),
        Bytes::from(format!("data: {usage}\n\n")),
    ];
    let (sent, stopped, _) = run(Shape::OpenAi, &d, 0, events);
    assert!(!stopped);
    assert_eq!(openai_text(&sent), "0123456789ABCDEF");
    let reasoning: String = sent
        .iter()
        .filter_map(|c| c.pointer("/choices/0/delta/reasoning_content"))
        .filter_map(Value::as_str)
        .collect();
    assert_eq!(reasoning, "thinking it over");
    let finish = sent
        .iter()
        .position(|c| c["choices"][0]["finish_reason"] == "stop")
        .unwrap();
    let last_text = sent
        .iter()
        .rposition(|c| c.pointer("/choices/0/delta/content").is_some())
        .unwrap();
    assert!(last_text < finish, "text after the finish: {sent:?}");
    assert_eq!(sent.last().unwrap()["usage"]["total_tokens"], 7, "{sent:?}");
}

#[test]
fn two_calls_in_one_chunk_go_whole_in_order() {
    let d = detector(Action::Redact);
    let call = |i: u64, id: &str| {
        json!({"index": i, "id": id, "type": "function",
            "function": {"name": "f", "arguments": "{\"x\":1}"}})
    };
    let events = vec![
        openai_chunk(json!({"tool_calls": [call(0, "a"), call(1, "b")]}), None),
        openai_chunk(json!({}), Some("tool_calls")),
    ];
    let (sent, _, _) = run(Shape::OpenAi, &d, 0, events);
    let ids: Vec<&str> = sent
        .iter()
        .filter_map(|c| c.pointer("/choices/0/delta/tool_calls/0/id"))
        .filter_map(Value::as_str)
        .collect();
    assert_eq!(ids, ["a", "b"]);
    assert_eq!(
        sent.last().unwrap()["choices"][0]["finish_reason"],
        "tool_calls"
    );
}

#[test]
fn text_outside_the_windows_is_still_guarded_and_logprobs_are_dropped() {
    let d = detector(Action::Block);
    let event = |chunk: &Value| Bytes::from(format!("data: {chunk}\n\n"));
    let mut chunk = json!({"id": "c", "object": "chat.completion.chunk", "choices": [{"index": 0,
        "delta": {"thinking_blocks": [{"type": "thinking", "thinking": "the word is Falcon",
            "signature": "c2lnbmF0dXJl"}]}, "finish_reason": null}]});
    assert!(
        run(Shape::OpenAi, &d, 0, vec![event(&chunk)]).1,
        "thinking blocks are content"
    );
    chunk["choices"][0]["delta"] = json!({"content": "hi"});
    chunk["choices"][0]["logprobs"] = json!({"content": [{"token": "Falcon", "logprob": -0.1}]});
    let (sent, stopped, _) = run(Shape::OpenAi, &d, 0, vec![event(&chunk)]);
    assert!(!stopped);
    assert!(
        sent.iter()
            .all(|c| c["choices"][0].get("logprobs").is_none()),
        "{sent:?}"
    );
    let odd = Bytes::from("data: {\"token\": {\"text\": \"falcon\"}}\n\n");
    assert!(
        run(Shape::OpenAi, &d, 0, vec![odd]).1,
        "an event of another shape is guarded whole"
    );
    let plain = Bytes::from("event: note\ndata: project falcon\n\n");
    assert!(run(Shape::Anthropic, &d, 0, vec![plain]).1);
}

#[test]
fn numbers_and_keys_in_arguments_are_guarded() {
    let d = detector(Action::Redact);
    let mut t = tally(&d, GuardStage::ToolArguments);
    let mut args = json!({"card": 4111111111111111u64, "falcon": true});
    assert!(t.json(&mut args).unwrap());
    assert_eq!(
        args,
        json!({"card": "[REDACTED:card_number]", "[REDACTED:keyword]": true})
    );
}
