//! The fabric's event log: every failure and restore, with its emulated time (the fabric's
//! clock, docs/src/emulated-time.md) and its wall-clock time, in `<run dir>/events.jsonl`, one
//! JSON object per line.
use std::io::Write;

use anyhow::Context;
use serde::{Deserialize, Serialize};

use crate::fabric::rundir::{self, State};

/// One line of the event log.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct Event {
    /// Emulated ns since `rocefab up` began (the fabric's clock).
    pub emulated_ns: u64,
    /// Wall-clock Unix time, ns.
    pub wall_unix_ns: u64,
    /// `link down`, `link up`.
    pub event: String,
    /// What it concerns (`rail1:eth5 -- spine1:eth1`).
    pub target: String,
    /// What was measured or why.
    pub detail: String,
}

/// The log's path.
pub fn log_path(fabric: &str) -> std::path::PathBuf {
    rundir::dir(fabric).join("events.jsonl")
}

/// Appends an event at the wall-clock Unix time `wall` to `fabric`'s log.
pub fn record(st: &State, wall: u64, event: &str, target: &str, detail: String) -> anyhow::Result<Event> {
    let clock = st.clock()?;
    let e = Event {
        emulated_ns: clock.emulated_unix_ns(wall).saturating_sub(clock.zero_unix_ns),
        wall_unix_ns: wall,
        event: event.into(),
        target: target.into(),
        detail,
    };
    append(&log_path(&st.fabric), &e)?;
    Ok(e)
}

/// Appends `e` to the log at `p`.
fn append(p: &std::path::Path, e: &Event) -> anyhow::Result<()> {
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(p)
        .with_context(|| format!("opening {}", p.display()))?;
    writeln!(f, "{}", serde_json::to_string(e)?).with_context(|| format!("writing {}", p.display()))
}

/// The log of `fabric`, oldest first.
pub fn read_log(fabric: &str) -> anyhow::Result<Vec<Event>> {
    read_log_at(&log_path(fabric))
}

/// The log at `p` (none yet: empty); a line that is not an event is an error naming its line.
fn read_log_at(p: &std::path::Path) -> anyhow::Result<Vec<Event>> {
    let text = match std::fs::read_to_string(p) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e).with_context(|| format!("reading {}", p.display())),
    };
    text.lines()
        .enumerate()
        .map(|(i, l)| serde_json::from_str(l).with_context(|| format!("{}:{}: not an event", p.display(), i + 1)))
        .collect()
}

/// The events of `fabric` whose wall-clock time lies in `from..=to` (Unix ns), as lines for a
/// report (`[12.5 ms emulated] link down rail1:eth3 -- spine1:eth1`); unreadable log: nothing.
pub fn events_between(fabric: &str, from: u64, to: u64) -> Vec<String> {
    read_log(fabric)
        .unwrap_or_default()
        .iter()
        .filter(|e| (from..=to).contains(&e.wall_unix_ns))
        .map(|e| format!("{} {} {}", at(e), e.event, e.target))
        .collect()
}

/// An event's time as the reports print it: `[12.5 ms emulated]`.
pub fn at(e: &Event) -> String {
    format!("[{} emulated]", crate::text::duration(e.emulated_ns))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_log_appends_reads_back_and_names_a_bad_line() {
        let dir = std::env::temp_dir().join(format!("rocefab-events-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("events.jsonl");
        let _ = std::fs::remove_file(&p);
        assert!(read_log_at(&p).unwrap().is_empty(), "no log yet: no events");
        let e = |ns, what: &str| Event {
            emulated_ns: ns,
            wall_unix_ns: 1_000 + ns,
            event: what.into(),
            target: "rail1:eth3 -- spine1:eth1".into(),
            detail: "x".into(),
        };
        append(&p, &e(5, "link down")).unwrap();
        append(&p, &e(9, "link up")).unwrap();
        assert_eq!(read_log_at(&p).unwrap(), vec![e(5, "link down"), e(9, "link up")]);
        std::fs::write(&p, format!("{}\nnot json\n", serde_json::to_string(&e(1, "link down")).unwrap())).unwrap();
        let err = read_log_at(&p).unwrap_err();
        assert!(format!("{err:#}").contains("events.jsonl:2: not an event"), "{err:#}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
