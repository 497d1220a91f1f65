//! The further tests a candidate must pass to count: the Luhn checksum of card numbers, the
//! IBAN checksum, SSN ranges, and the entropy of random runs (UUIDs excepted).

/// A further test a candidate must pass to count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Check {
    None,
    Luhn,
    Iban,
    Ssn,
    Entropy,
}

pub(super) fn passes(check: Check, span: &str) -> bool {
    match check {
        Check::None => true,
        Check::Luhn => luhn(span),
        Check::Iban => iban(span),
        Check::Ssn => ssn(span),
        Check::Entropy => high_entropy(span),
    }
}

/// The Luhn checksum of the digits (13 to 19 of them).
fn luhn(span: &str) -> bool {
    let digits: Vec<u32> = span.chars().filter_map(|c| c.to_digit(10)).collect();
    if !(13..=19).contains(&digits.len()) {
        return false;
    }
    let sum: u32 = digits
        .iter()
        .rev()
        .enumerate()
        .map(|(i, &d)| {
            if i % 2 == 1 {
                let d = d * 2;
                if d > 9 {
                    d - 9
                } else {
                    d
                }
            } else {
                d
            }
        })
        .sum();
    sum.is_multiple_of(10)
}

/// ISO 13616: the country and check digits moved to the end, letters as numbers, mod 97 = 1.
fn iban(span: &str) -> bool {
    let compact: String = span.chars().filter(|c| !c.is_whitespace()).collect();
    if !(15..=34).contains(&compact.len()) {
        return false;
    }
    let (head, tail) = compact.split_at(4);
    let mut rem: u32 = 0;
    for c in tail.chars().chain(head.chars()) {
        let v = match c.to_digit(36) {
            Some(v) => v,
            None => return false,
        };
        let step = if v >= 10 { 100 } else { 10 };
        rem = (rem * step + v) % 97;
    }
    rem == 1
}

/// A US SSN as the SSA assigns them: no area 000, 666 or 900–999, no group 00, no serial 0000.
fn ssn(span: &str) -> bool {
    let parts: Vec<&str> = span.split('-').collect();
    let [area, group, serial] = parts.as_slice() else {
        return false;
    };
    let n = |s: &str| s.parse::<u32>().unwrap_or(0);
    let area = n(area);
    area != 0 && area != 666 && area < 900 && n(group) != 0 && n(serial) != 0
}

/// Random-looking: letters and digits mixed, not a UUID, and at least 3.5 bits of entropy per
/// character (English words and padded ids stay well below).
fn high_entropy(span: &str) -> bool {
    let bytes = span.as_bytes();
    let has_digit = bytes.iter().any(u8::is_ascii_digit);
    let has_alpha = bytes.iter().any(u8::is_ascii_alphabetic);
    if !has_digit || !has_alpha || looks_like_uuid(span) {
        return false;
    }
    let mut counts = [0u32; 256];
    for &b in bytes {
        counts[usize::from(b)] += 1;
    }
    let len = bytes.len() as f64;
    let entropy: f64 = counts
        .iter()
        .filter(|&&c| c > 0)
        .map(|&c| {
            let p = f64::from(c) / len;
            -p * p.log2()
        })
        .sum();
    entropy >= 3.5
}

fn looks_like_uuid(span: &str) -> bool {
    span.len() == 36 && uuid_shape(span)
}

fn uuid_shape(span: &str) -> bool {
    span.char_indices().all(|(i, c)| match i {
        8 | 13 | 18 | 23 => c == '-',
        _ => c.is_ascii_hexdigit(),
    })
}
