//! Progress of `rocefab up`: one bar per phase (namespaces, links, addresses, switch daemons,
//! NIC agents) on a terminal, and on any stderr one line per finished phase with its count and
//! wall time (`cargo xtask bench --scale` keeps `up`'s lines in its report).
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_phase_line_names_phase_count_and_time() {
        let l = line("switch daemons", 52, "ready", Duration::from_millis(8149));
        assert_eq!(l, "up: switch daemons 52 ready in 8.1 s");
        let d = line_of("down", "namespaces", 116, "deleted", Duration::from_millis(40));
        assert_eq!(d, "down: namespaces 116 deleted in 0.0 s");
    }
}
