//! How reports print durations.

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
    #[test]
    fn durations_read_in_the_largest_unit_below_them() {
        let f = super::fmt_ns;
        assert_eq!([f(850.0), f(12_500.0), f(3_355_443.0), f(1_250_000_000.0), f(0.0)], ["850 ns", "12.500 us", "3.355 ms", "1.250 s", "0 ns"]);
    }
}
