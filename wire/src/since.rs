//! Times as a person gives them, turned into the RFC 3339 the API takes: a time as is, or a
//! duration back from now (`30s`, `15m`, `24h`, `7d`), the form the command line and the MCP
//! tools accept for `since`.

use chrono::{DateTime, SecondsFormat, TimeDelta, Utc};

/// `text` as an RFC 3339 time: unchanged when it is one, otherwise now minus the duration it
/// names (`<whole number><s|m|h|d>`).
pub fn since(text: &str) -> Result<String, String> {
    since_at(text, Utc::now())
}

/// [`since`], counting back from `now`.
pub fn since_at(text: &str, now: DateTime<Utc>) -> Result<String, String> {
    if DateTime::parse_from_rfc3339(text).is_ok() {
        return Ok(text.to_string());
    }
    let not_a_time = || {
        format!(
            "{text:?} is neither an RFC 3339 time (2025-01-31T09:00:00Z) nor a duration back \
             from now (30s, 15m, 24h, 7d)"
        )
    };
    let digits = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(digits);
    let unit_seconds: i64 = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86_400,
        _ => return Err(not_a_time()),
    };
    let n: i64 = number.parse().map_err(|_| not_a_time())?;
    n.checked_mul(unit_seconds)
        .and_then(TimeDelta::try_seconds)
        .and_then(|back| now.checked_sub_signed(back))
        .map(|at| at.to_rfc3339_opts(SecondsFormat::Millis, true))
        .ok_or_else(|| format!("{text:?} reaches back too far"))
}

#[cfg(test)]
mod tests {
    use chrono::TimeZone as _;

    use super::*;

    fn now() -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2025, 3, 10, 12, 0, 0).unwrap()
    }

    #[test]
    fn durations_count_back_from_now() {
        assert_eq!(since_at("24h", now()).unwrap(), "2025-03-09T12:00:00.000Z");
        assert_eq!(since_at("30m", now()).unwrap(), "2025-03-10T11:30:00.000Z");
        assert_eq!(since_at("7d", now()).unwrap(), "2025-03-03T12:00:00.000Z");
        assert_eq!(since_at("45s", now()).unwrap(), "2025-03-10T11:59:15.000Z");
        assert_eq!(since_at("0m", now()).unwrap(), "2025-03-10T12:00:00.000Z");
    }

    #[test]
    fn rfc3339_times_pass_unchanged() {
        for t in ["2025-03-01T00:00:00Z", "2025-03-01T00:00:00.250+02:00"] {
            assert_eq!(since_at(t, now()).unwrap(), t);
        }
    }

    #[test]
    fn anything_else_is_refused_without_panicking() {
        for bad in [
            "",
            "h",
            "24",
            "24w",
            "-1h",
            "+1h",
            "1.5h",
            "24 h",
            "1h30m",
            "5é",
            "2025-03-01",
            "yesterday",
        ] {
            let err = since_at(bad, now()).unwrap_err();
            assert!(err.contains("neither"), "{bad:?}: {err}");
        }
        for far in [
            "9223372036854775807s",
            "99999999999999d",
            "999999999999999999999h",
        ] {
            assert!(since_at(far, now()).is_err(), "{far:?}");
        }
    }
}
