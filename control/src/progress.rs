//! Progress of `rocefab up`: one bar per phase (namespaces, links, addresses, switch daemons,
//! NIC agents) on a terminal, and on any stderr one line per finished phase with its count and
//! wall time, which `cargo xtask bench --scale` reads back.
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// One phase of a bring-up.
pub struct Phase {
    name: &'static str,
    bar: ProgressBar,
    started: Instant,
}

impl Phase {
    /// Starts phase `name` of `total` steps; the bar draws only when stderr is a terminal.
    pub fn start(name: &'static str, total: usize) -> Phase {
        let bar = ProgressBar::with_draw_target(Some(total as u64), ProgressDrawTarget::stderr());
        let style = ProgressStyle::with_template("{prefix:>16} [{bar:30}] {pos}/{len} {elapsed}")
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> ");
        bar.set_style(style);
        bar.set_prefix(name);
        Phase { name, bar, started: Instant::now() }
    }

    /// One more step done (callable from any thread).
    pub fn step(&self) {
        self.bar.inc(1);
    }

    /// Every step done at once (a phase that is one batch).
    pub fn all_done(&self) {
        self.bar.set_position(self.bar.length().unwrap_or(0));
    }

    /// Ends the phase: the bar goes, one line stays (`up: switch daemons 52 ready in 8.1 s`).
    pub fn finish(self, what: &str) -> Duration {
        let took = self.started.elapsed();
        self.bar.finish_and_clear();
        eprintln!("{}", line(self.name, self.bar.length().unwrap_or(0), what, took));
        took
    }
}

/// The line a finished phase of `up` leaves on stderr.
pub fn line(name: &str, n: u64, what: &str, took: Duration) -> String {
    line_of("up", name, n, what, took)
}

/// The line a finished phase of `command` (`up`, `down`) leaves on stderr.
pub fn line_of(command: &str, name: &str, n: u64, what: &str, took: Duration) -> String {
    format!("{command}: {name} {n} {what} in {:.1} s", took.as_secs_f64())
}

/// Reads a phase line back: (phase, count, seconds).
pub fn parse_line(l: &str) -> Option<(String, u64, f64)> {
    let rest = l.strip_prefix("up: ")?;
    let (head, secs) = rest.rsplit_once(" in ")?;
    let secs: f64 = secs.strip_suffix(" s")?.parse().ok()?;
    let mut words: Vec<&str> = head.split(' ').collect();
    let n_at = words.iter().position(|w| w.parse::<u64>().is_ok())?;
    let n = words[n_at].parse().ok()?;
    words.truncate(n_at);
    Some((words.join(" "), n, secs))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_phase_line_reads_back() {
        let l = line("switch daemons", 52, "ready", Duration::from_millis(8149));
        assert_eq!(l, "up: switch daemons 52 ready in 8.1 s");
        assert_eq!(parse_line(&l), Some(("switch daemons".to_string(), 52, 8.1)));
        assert_eq!(parse_line("fabric x is up"), None);
        assert_eq!(parse_line("up: links x in 1 s"), None);
    }
}
