//! Not a test: `cargo test --release -p portcullis-shared --test guard_speed -- --ignored
//! --nocapture` prints how fast the bench's ten guards scan its 4 KiB answer.

use portcullis_shared::api::guards::{GuardAction, GuardKind};
use portcullis_shared::guard::{config, Detector};
use serde_json::json;

/// The bench's ten guards: (name, kind, action, config).
fn bench_guards() -> Vec<(&'static str, GuardKind, GuardAction, serde_json::Value)> {
    vec![
        (
            "tickets",
            GuardKind::Regex,
            GuardAction::Block,
            json!({"patterns": [r"TICKET-\d{6}"]}),
        ),
        (
            "projects",
            GuardKind::Regex,
            GuardAction::Redact,
            json!({"patterns": [r"\bPROJ-[A-Z]{3}-\d{4}\b"]}),
        ),
        (
            "marking",
            GuardKind::Regex,
            GuardAction::Block,
            json!({"patterns": [r"(?i)internal use only"]}),
        ),
        (
            "hosts",
            GuardKind::Regex,
            GuardAction::Redact,
            json!({"patterns": [r"\b[a-z0-9-]{1,63}\.corp\.example\.com\b"]}),
        ),
        (
            "codenames",
            GuardKind::Keywords,
            GuardAction::Block,
            json!({"keywords": ["Project Falcon", "Operation Nightjar", "Bluebird"]}),
        ),
        (
            "people",
            GuardKind::Keywords,
            GuardAction::Redact,
            json!({"keywords": (0..20).map(|i| format!("Employee{i:03}")).collect::<Vec<_>>()}),
        ),
        (
            "classified",
            GuardKind::Keywords,
            GuardAction::Block,
            json!({"keywords": ["TOP SECRET"], "case_sensitive": true}),
        ),
        ("personal", GuardKind::Pii, GuardAction::Redact, json!({})),
        (
            "payments",
            GuardKind::Pii,
            GuardAction::Block,
            json!({"types": ["card_number", "iban"]}),
        ),
        (
            "credentials",
            GuardKind::Secrets,
            GuardAction::Block,
            json!({}),
        ),
    ]
}

#[test]
#[ignore]
fn ten_guards_on_prose() {
    let guards = bench_guards();
    let only: Option<String> = std::env::var("ONLY").ok();
    let specs = guards
        .iter()
        .filter(|g| only.as_deref().is_none_or(|o| o == g.0))
        .map(|(n, k, a, c)| config::guard(n, n, *k, *a, c).unwrap())
        .collect();
    let d = Detector::compile(specs).unwrap().unwrap();
    const SENTENCE: &str = "The quarterly review lists order 4111111111111112 for the Lisbon \
        office, ticket REF-2024-000118 and release 1.2.3, tracked as \
        550e8400-e29b-41d4-a716-446655440000; nothing else changed this week. ";
    let text = SENTENCE.repeat(4096 / SENTENCE.len() + 1)[..4096].to_string();
    assert!(d.find(&text).is_empty(), "{:?}", d.find(&text));
    let n = 2000;
    let start = std::time::Instant::now();
    for _ in 0..n {
        std::hint::black_box(d.find(std::hint::black_box(&text)));
    }
    let per = start.elapsed().as_secs_f64() * 1e6 / f64::from(n);
    println!("{:.2} µs per 4 KiB, {:.2} µs per KiB", per, per / 4.0);
    let start = std::time::Instant::now();
    for _ in 0..n {
        let v: serde_json::Value =
            serde_json::from_str(&json!({"choices": [{"message": {"content": text}}]}).to_string())
                .unwrap();
        std::hint::black_box(v);
    }
    println!(
        "json round {:.2} µs",
        start.elapsed().as_secs_f64() * 1e6 / f64::from(n)
    );
}
