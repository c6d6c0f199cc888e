//! The CLI's shared parsers and formatters of text: one place for what several commands read
//! from an option or print in a line.
use std::time::Duration;

use anyhow::bail;

/// Why a wall-clock duration option is refused (clap prints the message after the option).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DurationError {
    /// Not a duration, as [`rocefab_units::parse_duration`] says.
    #[error("{0}")]
    NotADuration(String),
    #[error("{given:?}: must be above 0 and at most 7 days")]
    OutOfRange { given: String },
}

/// A wall-clock duration option (`--duration 90s`, `--timeout 10m`; a bare number is seconds,
/// as `timeout(1)` reads it): above 0, at most 7 days.
pub fn parse_wall_duration(s: &str) -> Result<Duration, DurationError> {
    let d = rocefab_units::parse_duration(s, rocefab_units::Bare::Seconds).map_err(DurationError::NotADuration)?;
    if d.is_zero() || d > Duration::from_secs(7 * 86400) {
        return Err(DurationError::OutOfRange { given: s.into() });
    }
    Ok(d)
}

/// An emulated duration option (`--fail-at 50ms`, `--for 1s`): a unit is required; ns.
pub fn parse_emulated_ns(s: &str) -> Result<u64, String> {
    rocefab_units::parse_duration(s, rocefab_units::Bare::Refuse).map(|d| d.as_nanos() as u64)
}

/// `1 frame`, `2 frames`.
pub fn plural(n: u64, what: &str) -> String {
    if n == 1 {
        format!("1 {what}")
    } else {
        format!("{n} {what}s")
    }
}

/// A duration with a unit that keeps 4 significant digits: `2.551 s`, `1.069 ms`, `645.3 µs`.
pub fn duration(ns: u64) -> String {
    let ns = ns as f64;
    if ns >= 1e9 {
        format!("{:.3} s", ns / 1e9)
    } else if ns >= 1e6 {
        format!("{:.3} ms", ns / 1e6)
    } else {
        format!("{:.1} µs", ns / 1e3)
    }
}

/// `[FABRIC] NODE` as every command that names a node takes it (as `rocefab fail switch` and
/// `rocefab routes` do): one word is the node of the only running fabric, two are the fabric and
/// the node. `option` is the older `--fabric NAME`, refused beside a positional fabric.
pub fn fabric_and_node<'a>(
    words: &'a [String],
    option: Option<&'a str>,
    what: &str,
) -> anyhow::Result<(Option<&'a str>, &'a str)> {
    match (words, option) {
        ([node], f) => Ok((f, node.as_str())),
        ([fabric, node], None) => Ok((Some(fabric.as_str()), node.as_str())),
        ([fabric, _], Some(f)) => {
            bail!("the fabric is named twice ({fabric:?} and --fabric {f:?}): give it once, first: [FABRIC] {what}")
        }
        _ => bail!("expected [FABRIC] {what}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wall_durations_take_bare_seconds_and_stop_at_a_week() {
        assert_eq!(parse_wall_duration("500ms").unwrap(), Duration::from_millis(500));
        assert_eq!(parse_wall_duration("2m").unwrap(), Duration::from_secs(120));
        assert_eq!(parse_wall_duration("3").unwrap(), Duration::from_secs(3));
        assert_eq!(parse_wall_duration("168h"), Ok(Duration::from_secs(7 * 86400)));
        assert_eq!(
            parse_wall_duration("169h").unwrap_err().to_string(),
            "\"169h\": must be above 0 and at most 7 days"
        );
        assert!(parse_wall_duration("0s").is_err() && parse_wall_duration("x").is_err());
        assert!(matches!(parse_wall_duration("8d"), Err(DurationError::NotADuration(_))));
    }

    #[test]
    fn emulated_durations_need_a_unit() {
        assert_eq!(parse_emulated_ns("50ms"), Ok(50_000_000));
        assert_eq!(parse_emulated_ns("1.5us"), Ok(1_500));
        assert!(parse_emulated_ns("50").unwrap_err().contains("needs a unit"));
    }

    #[test]
    fn plurals_and_durations_read_as_written() {
        assert_eq!(
            (plural(1, "frame"), plural(0, "frame"), plural(2, "frame")),
            ("1 frame".into(), "0 frames".into(), "2 frames".into())
        );
        assert_eq!(
            (duration(2_551_000_000), duration(1_069_000), duration(645_300)),
            ("2.551 s".into(), "1.069 ms".into(), "645.3 µs".into())
        );
    }
}
