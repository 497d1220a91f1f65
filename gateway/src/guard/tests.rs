//! Detectors on fixtures (what they must find, and near misses they must not), and the stream
//! window against guarding the whole text at once.

use std::sync::Arc;

use proptest::prelude::*;

use super::detect::*;
use super::window::{Blocked, StreamGuard};

fn detector(action: Action, finds: Finds) -> Detector {
    Detector::compile(vec![GuardSpec {
        id: "g".into(),
        name: "g".into(),
        action,
        finds,
    }])
    .unwrap()
    .unwrap()
}

fn labels(d: &Detector, text: &str) -> Vec<(&'static str, String)> {
    d.find(text)
        .into_iter()
        .map(|f| (f.label, text[f.start..f.end].to_string()))
        .collect()
}

#[test]
fn pii_finds_each_kind_and_skips_near_misses() {
    let d = detector(Action::Redact, Finds::Pii(Vec::new()));
    let found = labels(
        &d,
        "Mail ana.p@example.co.uk or call +1 415-555-0132. Card 4111 1111 1111 1111, \
         IBAN GB82 WEST 1234 5698 7654 32, SSN 123-45-6789.",
    );
    assert_eq!(
        found,
        vec![
            ("email", "ana.p@example.co.uk".into()),
            ("phone", "+1 415-555-0132".into()),
            ("card_number", "4111 1111 1111 1111".into()),
            ("iban", "GB82 WEST 1234 5698 7654 32".into()),
            ("us_ssn", "123-45-6789".into()),
        ]
    );
    for miss in [
        "order 4111111111111112 shipped",  // 16 digits, fails Luhn
        "GB82 WEST 1234 5698 7654 33",     // IBAN checksum off by one
        "ref 000-12-3456 and 666-12-3456", // SSN areas never assigned
        "version 1.2.3 at user@localhost", // no domain, no phone
    ] {
        let got = labels(&d, miss);
        assert!(
            got.iter()
                .all(|(l, _)| *l != "card_number" && *l != "iban" && *l != "us_ssn"),
            "{miss}: {got:?}"
        );
    }
    let only_email = detector(Action::Redact, Finds::Pii(vec![Pii::Email]));
    assert_eq!(labels(&only_email, "x@y.io 123-45-6789").len(), 1);
}

#[test]
fn secrets_find_known_formats_and_random_tokens_but_not_ids() {
    let d = detector(Action::Block, Finds::Secrets);
    for secret in [
        "AKIAIOSFODNN7EXAMPLE",
        "ghp_0123456789abcdefghijABCDEFGHIJ012345",
        "xoxb-1234567890-abcdefghij",
        "sk-proj-abcdefghijklmnopqrstuvwx1234",
        "sk_live_0123456789abcdefABCD",
        "AIzaSyA-0123456789abcdefghijklmnopqrstu",
        "-----BEGIN RSA PRIVATE KEY-----",
        "q8Zr2LkVb7TnX1pW4sYc9HdF3gJm6QeA",
    ] {
        let text = format!("here: {secret} done");
        let got = labels(&d, &text);
        assert_eq!(got.len(), 1, "{secret}: {got:?}");
        assert_eq!(got[0].1, secret);
    }
    for miss in [
        "ORDER-2024-000000000123456",
        "550e8400-e29b-41d4-a716-446655440000",
        "internationalization_requirements",
        "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa1",
    ] {
        assert!(labels(&d, miss).is_empty(), "{miss}");
    }
}

#[test]
fn keywords_and_patterns() {
    let d = detector(
        Action::Redact,
        Finds::Keywords {
            words: vec!["Project Falcon".into(), "c++".into()],
            case_sensitive: false,
        },
    );
    let got = labels(&d, "about project falcon, not falconry; c++ too");
    assert_eq!(got.len(), 2, "{got:?}");
    let d = detector(
        Action::Redact,
        Finds::Patterns(vec![r"TICKET-\d{4,8}".into()]),
    );
    assert_eq!(
        redact("see TICKET-12345", &d.find("see TICKET-12345")),
        "see [REDACTED:regex]"
    );
}

#[test]
fn unbounded_or_broken_patterns_are_refused() {
    for bad in [
        r"\d+",
        "a.*b",
        "(unclosed",
        &format!("x{{{}}}", MAX_PATTERN_BYTES + 1),
    ] {
        let r = Detector::compile(vec![GuardSpec {
            id: "g".into(),
            name: "g".into(),
            action: Action::Block,
            finds: Finds::Patterns(vec![bad.to_string()]),
        }]);
        assert!(r.is_err(), "{bad}");
    }
}

#[test]
fn a_block_guard_wins_over_a_redact_guard_on_the_same_text() {
    let guard = |id: &str, action| GuardSpec {
        id: id.into(),
        name: id.into(),
        action,
        finds: Finds::Pii(vec![Pii::Email]),
    };
    let d = Detector::compile(vec![guard("r", Action::Redact), guard("b", Action::Block)])
        .unwrap()
        .unwrap();
    let found = d.find("a@b.co");
    assert_eq!(d.action(&found[0]), Action::Block);
}

/// Streams `text` cut at `cuts` through a window.
fn stream(d: &Arc<Detector>, text: &str, cuts: &[usize], window: usize) -> Result<String, Blocked> {
    let mut g = StreamGuard::new(d.clone(), window);
    let mut out = String::new();
    let mut at = 0;
    for &cut in cuts {
        let cut = (0..=cut.min(text.len()))
            .rev()
            .find(|&c| text.is_char_boundary(c))
            .unwrap_or(0);
        if cut <= at {
            continue;
        }
        out.push_str(&g.push(&text[at..cut])?);
        at = cut;
    }
    out.push_str(&g.push(&text[at..])?);
    out.push_str(&g.finish()?);
    Ok(out)
}

fn planted() -> impl Strategy<Value = (String, String, Vec<usize>, usize)> {
    let filler = "[a-zA-Z .,é日-]{0,120}";
    let secret = prop_oneof![
        Just("AKIAIOSFODNN7EXAMPLE".to_string()),
        Just("someone@example.com".to_string()),
        Just("4111 1111 1111 1111".to_string()),
        "[a-z]{2}[0-9]{2}[A-Za-z0-9]{28}".prop_map(|s| format!("x{s}")),
    ];
    (
        filler,
        secret,
        filler,
        proptest::collection::vec(0usize..300, 0..12),
        0usize..64,
    )
        .prop_map(|(a, s, b, mut cuts, window)| {
            cuts.sort_unstable();
            (format!("{a} {s} {b}"), s, cuts, window)
        })
}

proptest! {
    #[test]
    fn a_block_guard_lets_no_byte_of_a_secret_out(
        (text, _secret, cuts, window) in planted()
    ) {
        let mut guards = Vec::new();
        for (id, finds) in [("s", Finds::Secrets), ("p", Finds::Pii(Vec::new()))] {
            guards.push(GuardSpec { id: id.into(), name: id.into(), action: Action::Block, finds });
        }
        let d = Arc::new(Detector::compile(guards).unwrap().unwrap());
        let whole_blocked = !d.find(&text).is_empty();
        let mut g = StreamGuard::new(d.clone(), window);
        let mut sent = String::new();
        let mut at = 0;
        let mut blocked = false;
        for cut in cuts.iter().copied().chain([text.len()]) {
            let cut = (0..=cut.min(text.len())).rev().find(|&c| text.is_char_boundary(c)).unwrap_or(0);
            if cut < at { continue; }
            match g.push(&text[at..cut]) {
                Ok(out) => sent.push_str(&out),
                Err(_) => { blocked = true; break; }
            }
            at = cut;
        }
        if !blocked {
            match g.finish() {
                Ok(out) => sent.push_str(&out),
                Err(_) => blocked = true,
            }
        }
        prop_assert_eq!(blocked, whole_blocked, "the stream and the whole text disagree");
        if blocked {
            let first = d.find(&text)[0].start;
            prop_assert!(text.starts_with(&sent), "sent text that is not the stream's");
            prop_assert!(sent.len() <= first, "text of the match was sent: {:?}", sent);
        } else {
            prop_assert_eq!(sent, text);
        }
    }

    #[test]
    fn a_redacting_stream_equals_the_whole_text_redacted(
        (text, _secret, cuts, window) in planted()
    ) {
        let d = Detector::compile(vec![
            GuardSpec { id: "s".into(), name: "s".into(), action: Action::Redact, finds: Finds::Secrets },
            GuardSpec { id: "p".into(), name: "p".into(), action: Action::Redact, finds: Finds::Pii(Vec::new()) },
        ]).unwrap().unwrap();
        let d = Arc::new(d);
        let whole = redact(&text, &d.find(&text));
        prop_assert_eq!(stream(&d, &text, &cuts, window).unwrap(), whole);
    }
}

#[test]
fn business_prose_with_near_misses_matches_nothing() {
    let d = Detector::compile(vec![
        GuardSpec {
            id: "s".into(),
            name: "s".into(),
            action: Action::Block,
            finds: Finds::Secrets,
        },
        GuardSpec {
            id: "p".into(),
            name: "p".into(),
            action: Action::Block,
            finds: Finds::Pii(Vec::new()),
        },
    ])
    .unwrap()
    .unwrap();
    let text = "The quarterly review lists order 4111111111111112 for the Lisbon office, ticket \
        REF-2024-000118 and release 1.2.3, tracked as 550e8400-e29b-41d4-a716-446655440000; \
        nothing else changed this week.";
    assert!(labels(&d, text).is_empty(), "{:?}", labels(&d, text));
}

fn guards(list: Vec<(&str, Action, Finds)>) -> Arc<Detector> {
    let specs = list
        .into_iter()
        .map(|(id, action, finds)| GuardSpec {
            id: id.into(),
            name: id.into(),
            action,
            finds,
        })
        .collect();
    Arc::new(Detector::compile(specs).unwrap().unwrap())
}

#[test]
fn a_run_that_is_not_random_hides_no_other_match() {
    let d = guards(vec![
        ("s", Action::Redact, Finds::Secrets),
        (
            "k",
            Action::Block,
            Finds::Keywords {
                words: vec!["customer-list".into()],
                case_sensitive: false,
            },
        ),
    ]);
    let found = d.find("see docs/internal/customer-list/export today");
    assert_eq!(found.len(), 1);
    assert_eq!(d.action(&found[0]), Action::Block);
    let d = guards(vec![("s", Action::Block, Finds::Secrets)]);
    let text = "aaaaaaaaaaaaaaaaaaaa=AKIA2E0A8F3B244C9986";
    assert_eq!(
        labels(&d, text),
        [("secret", "AKIA2E0A8F3B244C9986".to_string())]
    );
}

#[test]
fn a_block_inside_a_redaction_still_blocks() {
    let d = guards(vec![
        ("mail", Action::Redact, Finds::Pii(vec![Pii::Email])),
        (
            "word",
            Action::Block,
            Finds::Keywords {
                words: vec!["example".into()],
                case_sensitive: false,
            },
        ),
    ]);
    let found = d.find("write to ana@example.com");
    assert_eq!(d.action(&found[0]), Action::Block);
}

#[test]
fn a_stream_blocks_what_the_whole_text_blocks_after_long_runs() {
    let d = guards(vec![
        ("s", Action::Redact, Finds::Secrets),
        (
            "w",
            Action::Block,
            Finds::Patterns(vec!["SECRETWORD".into()]),
        ),
    ]);
    let text = format!("{}-{}SECRETWORD", "a".repeat(100), "a".repeat(169));
    assert!(!d.find(&text).is_empty());
    for cut in (1..text.len()).step_by(7) {
        for window in [0, 16, 300] {
            assert!(
                stream(&d, &text, &[cut], window).is_err(),
                "cut {cut}, window {window}"
            );
        }
    }
}

fn noisy() -> impl Strategy<Value = (String, Vec<usize>, usize)> {
    (
        "[a-zA-Z0-9=/+ .@-]{0,300}",
        proptest::collection::vec(0usize..300, 0..12),
        0usize..64,
    )
        .prop_map(|(text, mut cuts, window)| {
            cuts.sort_unstable();
            (text, cuts, window)
        })
}

proptest! {
    #[test]
    fn a_stream_of_noise_redacts_as_the_whole_text_does((text, cuts, window) in noisy()) {
        let d = guards(vec![
            ("s", Action::Redact, Finds::Secrets),
            ("p", Action::Redact, Finds::Pii(Vec::new())),
            ("w", Action::Redact, Finds::Keywords { words: vec!["a-b".into(), "x9".into()], case_sensitive: false }),
        ]);
        let whole = redact(&text, &d.find(&text));
        prop_assert_eq!(stream(&d, &text, &cuts, window).unwrap(), whole);
    }
}
