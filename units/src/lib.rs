//! Sizes, rates and durations as people write them, parsed the same way everywhere rocefab reads
//! one: topology files, every `rocefab` option, `cargo xtask` and the benchmark tools.
//!
//! - Sizes: SI multiples (`kB`/`KB` = 10^3, `MB` = 10^6, `GB` = 10^9, `TB` = 10^12) and IEC
//!   multiples (`KiB` = 2^10, `MiB` = 2^20, `GiB` = 2^30, `TiB` = 2^40), as IEC 80000-13 defines
//!   them; a bare number is bytes. A unit without `B` (`64M`) is refused as ambiguous, and `Mb`
//!   (megabits) is not a size.
//! - Rates: bits per second with SI multiples: `400G`, `400Gbps`, `2.5 Gbit/s`, `100Mbps`; a bare
//!   number is bit/s.
//! - Durations: `ns`, `us` (`µs`), `ms`, `s`, `m` (`min`), `h`; fractions allowed. A bare number is
//!   refused where a unit is expected (topology files), or taken as seconds where the caller says
//!   so (command-line options such as `--duration 5`, as `timeout(1)` reads them).
use std::time::Duration;

/// Splits `"3.2 MB"` into `(3.2, "MB")`.
fn number_and_unit(s: &str) -> Option<(f64, &str)> {
    let t = s.trim();
    let split = t.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let v: f64 = num.parse().ok()?;
    v.is_finite().then_some((v, unit.trim()))
}

/// Bytes in `s`: `3200000`, `3.2MB` (3,200,000), `512kB` (512,000), `512KiB` (524,288), `16MiB`.
pub fn parse_bytes(s: &str) -> Result<u64, String> {
    let (v, unit) =
        number_and_unit(s).ok_or_else(|| format!("{s:?}: expected a size such as 3200000, 3.2MB or 512KiB"))?;
    let mult: u64 = match unit {
        "" | "B" => 1,
        "kB" | "KB" => 1_000,
        "MB" => 1_000_000,
        "GB" => 1_000_000_000,
        "TB" => 1_000_000_000_000,
        "KiB" => 1 << 10,
        "MiB" => 1 << 20,
        "GiB" => 1 << 30,
        "TiB" => 1 << 40,
        "k" | "K" | "M" | "G" | "T" | "Ki" | "Mi" | "Gi" => {
            return Err(format!(
                "{s:?}: say {v}{unit}B (SI, powers of 1000) or {v}{}iB (IEC, powers of 1024)",
                unit.trim_end_matches('i').to_ascii_uppercase()
            ))
        }
        u => return Err(format!("{s:?}: unknown size unit {u:?} (use B, kB, MB, GB, KiB, MiB or GiB)")),
    };
    let bytes = v * mult as f64;
    if bytes > (1u64 << 50) as f64 {
        return Err(format!("{s:?}: too large"));
    }
    if bytes.fract() != 0.0 {
        return Err(format!("{s:?}: not a whole number of bytes"));
    }
    Ok(bytes as u64)
}

/// Bits per second in `s`: `1Gbps`, `100Mbps`, `2.5Gbps`, `400G`, `10 gbit/s`, `1000000000`.
pub fn parse_rate(s: &str) -> Result<u64, String> {
    let bad = || format!("{s:?}: expected a rate such as 400G, 1Gbps, 100Mbps or 2.5 Gbit/s");
    let (v, unit) = number_and_unit(s).ok_or_else(bad)?;
    let lower = unit.to_ascii_lowercase();
    let stem = lower.strip_suffix("bps").or_else(|| lower.strip_suffix("bit/s")).unwrap_or(&lower);
    let mult: f64 = match stem {
        "" => 1.0,
        "k" => 1e3,
        "m" => 1e6,
        "g" => 1e9,
        "t" => 1e12,
        _ => return Err(bad()),
    };
    let bps = v * mult;
    if !(1.0..1e15).contains(&bps) || bps.fract() != 0.0 {
        return Err(format!("{s:?}: out of range (1 bit/s up to 1000 Tbit/s, whole bits per second)"));
    }
    Ok(bps as u64)
}

/// What a number without a unit means to [`parse_duration`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bare {
    /// Refused: the text must name its unit (topology files).
    Refuse,
    /// Seconds (command-line options).
    Seconds,
}

/// The duration in `s`: `250ns`, `500us`, `1.5ms`, `90s`, `10m`, `1h`.
pub fn parse_duration(s: &str, bare: Bare) -> Result<Duration, String> {
    let (v, unit) =
        number_and_unit(s).ok_or_else(|| format!("{s:?}: expected a duration such as 500us, 200ms, 90s or 10m"))?;
    let ns_per_unit = match unit {
        "ns" => 1.0,
        "us" | "µs" => 1e3,
        "ms" => 1e6,
        "s" => 1e9,
        "m" | "min" => 60e9,
        "h" => 3600e9,
        "" if bare == Bare::Seconds => 1e9,
        "" => return Err(format!("{s:?}: a duration needs a unit: ns, us, ms, s, m or h")),
        u => return Err(format!("{s:?}: unknown time unit {u:?} (use ns, us, ms, s, m or h)")),
    };
    // Whole nanoseconds, rounded (1.1ms is 1,100,000 ns, not 1,099,999 from binary floating point).
    let ns = (v * ns_per_unit).round();
    if ns > 1e18 {
        return Err(format!("{s:?}: too long"));
    }
    Ok(Duration::from_nanos(ns as u64))
}

/// A duration in ns as people read it: `850 ns`, `12.500 us`, `3.355 ms`, `1.250 s`.
pub fn fmt_ns(ns: f64) -> String {
    if ns >= 1e9 {
        format!("{:.3} s", ns / 1e9)
    } else if ns >= 1e6 {
        format!("{:.3} ms", ns / 1e6)
    } else if ns >= 1e3 {
        format!("{:.3} us", ns / 1e3)
    } else {
        format!("{ns:.0} ns")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_are_si_for_kb_mb_and_iec_for_kib_mib() {
        assert_eq!(parse_bytes("3200000"), Ok(3_200_000));
        assert_eq!(parse_bytes("3.2MB"), Ok(3_200_000));
        assert_eq!(parse_bytes("512KB"), Ok(512_000));
        assert_eq!(parse_bytes("512kB"), Ok(512_000));
        assert_eq!(parse_bytes("512KiB"), Ok(524_288));
        assert_eq!(parse_bytes("16MiB"), Ok(16 << 20));
        assert_eq!(parse_bytes("1GiB"), Ok(1 << 30));
        assert_eq!(parse_bytes("2 GB"), Ok(2_000_000_000));
        assert_eq!(parse_bytes("4096 B"), Ok(4096));
    }

    #[test]
    fn ambiguous_or_wrong_sizes_are_refused_with_the_fix() {
        let e = parse_bytes("64M").unwrap_err();
        assert!(e.contains("64MB") && e.contains("64MiB"), "{e}");
        let e = parse_bytes("1G").unwrap_err();
        assert!(e.contains("1GB") && e.contains("1GiB"), "{e}");
        assert!(parse_bytes("3Mb").unwrap_err().contains("unknown size unit \"Mb\""));
        assert!(parse_bytes("1.5B").unwrap_err().contains("whole number"));
        assert!(parse_bytes("MiB").unwrap_err().contains("expected a size"));
        assert!(parse_bytes("-1KiB").is_err());
        assert!(parse_bytes("1e3").is_err(), "no exponent forms: 1e3 reads as 1 with unit e3");
    }

    #[test]
    fn rates_are_bits_per_second_with_si_multiples() {
        assert_eq!(parse_rate("1Gbps"), Ok(1_000_000_000));
        assert_eq!(parse_rate("100Mbps"), Ok(100_000_000));
        assert_eq!(parse_rate("2.5Gbps"), Ok(2_500_000_000));
        assert_eq!(parse_rate("400G"), Ok(400_000_000_000));
        assert_eq!(parse_rate("10 gbit/s"), Ok(10_000_000_000));
        assert_eq!(parse_rate("25000"), Ok(25_000));
        assert!(parse_rate("1Gbs").is_err());
        assert!(parse_rate("fast").is_err());
        assert!(parse_rate("0Mbps").unwrap_err().contains("out of range"));
        assert!(parse_rate("0.5bps").is_err());
    }

    #[test]
    fn durations_take_every_unit_and_bare_numbers_only_where_allowed() {
        let d = |s| parse_duration(s, Bare::Refuse);
        assert_eq!(d("250ns"), Ok(Duration::from_nanos(250)));
        assert_eq!(d("500us"), Ok(Duration::from_micros(500)));
        assert_eq!(d("500µs"), Ok(Duration::from_micros(500)));
        assert_eq!(d("1.5ms"), Ok(Duration::from_micros(1500)));
        assert_eq!(d("1.1ms"), Ok(Duration::from_micros(1100)));
        assert_eq!(d("0.3s"), Ok(Duration::from_millis(300)));
        assert_eq!(d("90s"), Ok(Duration::from_secs(90)));
        assert_eq!(d("10m"), Ok(Duration::from_secs(600)));
        assert_eq!(d("2min"), Ok(Duration::from_secs(120)));
        assert_eq!(d("1h"), Ok(Duration::from_secs(3600)));
        assert!(d("200").unwrap_err().contains("needs a unit"));
        assert_eq!(parse_duration("1.5", Bare::Seconds), Ok(Duration::from_millis(1500)));
        assert!(d("5 fortnights").unwrap_err().contains("unknown time unit"));
        assert!(d("x").is_err());
    }

    #[test]
    fn durations_read_in_the_largest_unit_below_them() {
        assert_eq!(
            [fmt_ns(850.0), fmt_ns(12_500.0), fmt_ns(3_355_443.0), fmt_ns(1_250_000_000.0), fmt_ns(0.0)],
            ["850 ns", "12.500 us", "3.355 ms", "1.250 s", "0 ns"]
        );
    }
}
