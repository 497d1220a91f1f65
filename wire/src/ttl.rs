//! Agent token lifetimes: `15m`, `1h30m`, `90s`; between one minute and 24 hours.

pub const DEFAULT_SECS: u64 = 600;
pub const MIN_SECS: u64 = 60;
pub const MAX_SECS: u64 = 24 * 3600;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TtlError {
    #[error("'{0}' is not a duration; use a number with a unit, such as 15m, 1h or 1h30m")]
    Malformed(String),
    #[error("'{0}' is outside the allowed range of 1m to 24h")]
    OutOfRange(String),
}

/// Parses a duration written as one or more `<number><unit>` parts (units `h`, `m`, `s`).
pub fn parse(text: &str) -> Result<u64, TtlError> {
    let malformed = || TtlError::Malformed(text.to_string());
    let mut total: u64 = 0;
    let mut digits = String::new();
    for ch in text.trim().chars() {
        if ch.is_ascii_digit() {
            digits.push(ch);
            continue;
        }
        let unit = match ch {
            'h' => 3600,
            'm' => 60,
            's' => 1,
            _ => return Err(malformed()),
        };
        let n: u64 = digits.parse().map_err(|_| malformed())?;
        digits.clear();
        total = n
            .checked_mul(unit)
            .and_then(|v| total.checked_add(v))
            .ok_or_else(malformed)?;
    }
    if !digits.is_empty() || total == 0 && text.trim().is_empty() {
        return Err(malformed());
    }
    if !(MIN_SECS..=MAX_SECS).contains(&total) {
        return Err(TtlError::OutOfRange(text.to_string()));
    }
    Ok(total)
}

/// Formats seconds back in the shortest form: `10m`, `1h30m`, `90s` stays `1m30s`.
pub fn format(secs: u64) -> String {
    let (h, m, s) = (secs / 3600, secs % 3600 / 60, secs % 60);
    let mut out = String::new();
    if h > 0 {
        out.push_str(&format!("{h}h"));
    }
    if m > 0 {
        out.push_str(&format!("{m}m"));
    }
    if s > 0 || out.is_empty() {
        out.push_str(&format!("{s}s"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_units_and_combinations() {
        assert_eq!(parse("15m"), Ok(900));
        assert_eq!(parse("1h30m"), Ok(5400));
        assert_eq!(parse("24h"), Ok(86400));
        assert_eq!(parse("90s"), Ok(90));
    }

    #[test]
    fn rejects_out_of_range_and_garbage() {
        assert!(matches!(parse("59s"), Err(TtlError::OutOfRange(_))));
        assert!(matches!(parse("25h"), Err(TtlError::OutOfRange(_))));
        assert!(matches!(parse("10"), Err(TtlError::Malformed(_))));
        assert!(matches!(parse("ten minutes"), Err(TtlError::Malformed(_))));
        assert!(matches!(parse(""), Err(TtlError::Malformed(_))));
    }

    #[test]
    fn formats_round_trip() {
        for text in ["10m", "1h30m", "24h", "1m30s"] {
            assert_eq!(format(parse(text).unwrap()), text);
        }
    }
}
