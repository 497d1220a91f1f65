//! Golden tests of the translators on fixtures made from the providers' documented examples:
//! `gateway/tests/fixtures/llm/<upstream>/from_<caller>/<case>.json` holds requests and whole
//! responses, each `{"in", "out"}` (responses also the metered `usage`); `<case>.in.sse` is an
//! upstream stream transcript and `<case>.out.sse` what the caller must receive, ending with
//! `: usage {…}` (or `: usage none`). A Bedrock stream's transcript is `<case>.in.jsonl`, one
//! event a line (`{"event": type, "payload": …}`, or `{"exception": type, …}`), written as AWS
//! event-stream frames before it is fed. Streams are fed whole, byte by byte and in uneven
//! chunks, and must come out the same. A `.json` fixture's `context` overrides the direction's
//! (`vertex`, `upstream_model`, `provider`). `PORTCULLIS_BLESS=1` rewrites the `.out.sse` files.

use std::path::{Path, PathBuf};

use bytes::Bytes;
use http::HeaderMap;
use portcullis_shared::prices::Usage;
use serde_json::{json, Value};

use super::{Context, Translation};
use crate::llm::api::{Inbound, InboundApi};
use crate::llm::framing::Framing;

pub const CONTEXT_OPENAI: Context<'static> = Context {
    upstream_model: "gpt-4o-mini",
    provider: "openai",
    created: 1_700_000_000,
    id: "req-golden",
    vertex: false,
};

pub const CONTEXT_ANTHROPIC: Context<'static> = Context {
    upstream_model: "claude-sonnet-4-5-20250929",
    provider: "anthropic",
    ..CONTEXT_OPENAI
};

pub const CONTEXT_GEMINI: Context<'static> = Context {
    upstream_model: "gemini-2.5-flash",
    provider: "google",
    ..CONTEXT_OPENAI
};

pub const CONTEXT_BEDROCK: Context<'static> = Context {
    upstream_model: "us.anthropic.claude-sonnet-4-5-20250929-v1:0",
    provider: "bedrock",
    ..CONTEXT_OPENAI
};

fn dir(direction: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/llm")
        .join(direction)
}

fn usage_json(u: &Usage) -> Value {
    json!({"prompt_tokens": u.prompt_tokens, "completion_tokens": u.completion_tokens,
        "cached_tokens": u.cached_tokens, "cache_write_tokens": u.cache_write_tokens})
}

/// Runs every case of a direction; returns how many were checked.
pub fn run(direction: &str, api: InboundApi, translation: Translation, ctx: &Context<'_>) -> usize {
    let mut checked = 0;
    let mut entries: Vec<_> = std::fs::read_dir(dir(direction))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for path in entries {
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        if name.ends_with(".json") {
            checked += json_cases(&path, api, translation, ctx);
        } else if let Some(case) = name
            .strip_suffix(".in.sse")
            .or_else(|| name.strip_suffix(".in.jsonl"))
        {
            stream_case(
                &path.with_file_name(format!("{case}.out.sse")),
                &path,
                api,
                translation,
                ctx,
            );
            checked += 1;
        }
    }
    assert!(checked > 0, "no fixtures in {direction}");
    checked
}

fn json_cases(path: &Path, api: InboundApi, translation: Translation, ctx: &Context<'_>) -> usize {
    let fixture: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let file = overrides(ctx, &fixture["context"]);
    let mut checked = 0;
    for (key, case) in fixture.as_object().unwrap() {
        let label = format!("{} {key}", path.display());
        let ctx = &overrides(&file, &case["context"]);
        if key.ends_with("request") {
            let inbound = inbound(api, &case["in"]);
            let out = translation
                .request(&inbound, ctx)
                .unwrap_or_else(|e| panic!("{label}: {e}"));
            let got: Value = serde_json::from_slice(&out.contiguous()).unwrap();
            assert_eq!(got, case["out"], "{label}:\n{}", pretty(&got));
            checked += 1;
        } else if key.ends_with("response") {
            let body = Bytes::from(case["in"].to_string());
            let (out, usage) = translation
                .response(body, ctx)
                .unwrap_or_else(|e| panic!("{label}: {e}"));
            let got: Value = serde_json::from_slice(&out).unwrap();
            assert_eq!(got, case["out"], "{label}:\n{}", pretty(&got));
            let usage = usage.as_ref().map_or(Value::Null, usage_json);
            assert_eq!(usage, case["usage"], "{label}: usage");
            checked += 1;
        }
    }
    checked
}

/// A context with a fixture's `context` fields applied.
fn overrides<'a>(ctx: &Context<'a>, over: &'a Value) -> Context<'a> {
    Context {
        vertex: over["vertex"].as_bool().unwrap_or(ctx.vertex),
        upstream_model: over["upstream_model"]
            .as_str()
            .unwrap_or(ctx.upstream_model),
        provider: over["provider"].as_str().unwrap_or(ctx.provider),
        ..*ctx
    }
}

pub fn inbound(api: InboundApi, body: &Value) -> Inbound {
    Inbound::parse(api, Bytes::from(body.to_string()), &HeaderMap::new()).unwrap()
}

fn pretty(v: &Value) -> String {
    serde_json::to_string_pretty(v).unwrap_or_default()
}

/// Feeds a transcript in `chunks`-sized pieces (0: whole); returns the caller's bytes and the
/// metered usage.
pub fn feed(
    input: &[u8],
    chunks: usize,
    api: InboundApi,
    translation: Translation,
    ctx: &Context<'_>,
) -> (Vec<u8>, Option<Usage>) {
    let body = match api {
        InboundApi::OpenAiChat => json!({"model": "m", "stream": true, "messages": [],
            "stream_options": {"include_usage": true}}),
        InboundApi::AnthropicMessages => {
            json!({"model": "m", "stream": true, "max_tokens": 1, "messages": []})
        }
    };
    let mut stream = translation.stream(&inbound(api, &body), ctx);
    let mut framing = Framing::of(translation);
    let mut out = Vec::new();
    let size = if chunks == 0 {
        input.len().max(1)
    } else {
        chunks
    };
    let mut corrupt = false;
    for piece in input.chunks(size) {
        framing.push(piece);
        loop {
            match framing.next_event() {
                Ok(Some(event)) => stream.push(event, &mut out),
                Ok(None) => break,
                Err(_) => {
                    corrupt = true;
                    break;
                }
            }
        }
        if corrupt {
            break;
        }
    }
    if !corrupt {
        if let Ok(Some(rest)) = framing.rest() {
            stream.push(rest, &mut out);
        }
    }
    stream.finish(&mut out);
    (out.concat(), stream.usage())
}

fn stream_case(
    expected: &Path,
    input: &Path,
    api: InboundApi,
    translation: Translation,
    ctx: &Context<'_>,
) {
    let raw = std::fs::read(input).unwrap();
    let raw = if input.extension().is_some_and(|e| e == "jsonl") {
        frames(&raw)
    } else {
        raw
    };
    let (whole, usage) = feed(&raw, 0, api, translation, ctx);
    for size in [1, 7, 64] {
        let (pieces, u) = feed(&raw, size, api, translation, ctx);
        assert_eq!(
            String::from_utf8_lossy(&pieces),
            String::from_utf8_lossy(&whole),
            "{}: fed in {size}-byte chunks",
            input.display()
        );
        assert_eq!(u, usage);
    }
    let usage_line = format!(
        ": usage {}\n",
        usage
            .as_ref()
            .map_or("none".to_string(), |u| usage_json(u).to_string())
    );
    let mut got = String::from_utf8(whole).unwrap();
    got.push_str(&usage_line);
    if std::env::var_os("PORTCULLIS_BLESS").is_some() {
        std::fs::write(expected, &got).unwrap();
    }
    let want = std::fs::read_to_string(expected).unwrap_or_else(|_| {
        panic!(
            "{} is missing (PORTCULLIS_BLESS=1 writes it)",
            expected.display()
        )
    });
    assert_eq!(
        events_of(&got),
        events_of(&want),
        "{}:\n{got}",
        expected.display()
    );
}

/// A Bedrock transcript (one event a line) as AWS event-stream frames.
pub fn frames(jsonl: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    for line in String::from_utf8_lossy(jsonl)
        .lines()
        .filter(|l| !l.trim().is_empty())
    {
        let event: Value = serde_json::from_str(line).unwrap();
        let payload = event["payload"].to_string();
        let (kind, exception) = match event["exception"].as_str() {
            Some(kind) => (kind, true),
            None => (event["event"].as_str().unwrap(), false),
        };
        out.extend(crate::llm::wire::eventstream::encode(
            kind,
            exception,
            payload.as_bytes(),
        ));
    }
    out
}

/// A stream as (event name, data as JSON) pairs, plus its usage line.
fn events_of(text: &str) -> Vec<(String, Value)> {
    text.split("\n\n")
        .flat_map(|block| {
            let mut name = String::new();
            let mut data = Vec::new();
            let mut usage = None;
            for line in block.lines() {
                if let Some(n) = line.strip_prefix("event: ") {
                    name = n.to_string();
                } else if let Some(d) = line.strip_prefix("data: ") {
                    data.push(d);
                } else if let Some(u) = line.strip_prefix(": usage ") {
                    usage = Some((
                        "usage".to_string(),
                        serde_json::from_str(u).unwrap_or(json!(u)),
                    ));
                }
            }
            let event = (!data.is_empty()).then(|| {
                let data = data.join("\n");
                let value = serde_json::from_str(&data).unwrap_or(Value::String(data));
                (name, value)
            });
            event.into_iter().chain(usage)
        })
        .collect()
}
