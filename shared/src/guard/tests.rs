//! The guards' detectors: what each kind finds and misses, and that the byte scan for random
//! runs agrees with the pattern it stands for.

use proptest::prelude::*;

use super::*;

fn by_regex(text: &str, at: usize, end: usize) -> Option<(usize, usize)> {
    let regex = Regex::new(HIGH_ENTROPY).unwrap();
    let input = Input::new(text).range(at..end);
    regex.search(&input).map(|m| (m.start(), m.end()))
}

#[test]
fn the_entropy_pass_is_a_byte_scan() {
    assert!(matches!(
        Engine::build(&[HIGH_ENTROPY.to_string()]).unwrap(),
        Engine::Runs
    ));
    let text = "key: +/abcdefghijklmnopqrstuvwxyz0123456789 end";
    assert_eq!(
        entropy_candidate(text.as_bytes(), 0, text.len()),
        by_regex(text, 0, text.len())
    );
    assert_eq!(
        entropy_candidate(text.as_bytes(), 0, text.len()),
        Some((7, 43))
    );
    let long = format!("é{}-x", "ab1".repeat(200));
    for (at, found) in [(0, Some((2, 258))), (2, Some((2, 258))), (5, None)] {
        assert_eq!(entropy_candidate(long.as_bytes(), at, long.len()), found);
        assert_eq!(by_regex(&long, at, long.len()), found);
    }
}

proptest! {
    /// The byte scan finds what the pattern it stands for finds, from any start to any end,
    /// on text mixing run bytes, word boundaries and multi-byte characters.
    #[test]
    fn the_byte_scan_matches_the_pattern(
        text in "[a-c0-2+/=_\\- .é]{0,400}",
        cut in 0usize..400,
        stop in 0usize..400,
    ) {
        let at = cut.min(text.len());
        let end = stop.max(at).min(text.len());
        prop_assume!(text.is_char_boundary(at) && text.is_char_boundary(end));
        prop_assert_eq!(entropy_candidate(text.as_bytes(), at, end), by_regex(&text, at, end));
    }
}
