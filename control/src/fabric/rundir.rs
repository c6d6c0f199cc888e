//! The run directory of a fabric, `/run/rocefab/<fabric>/` (base overridable with
//! `ROCEFAB_RUN_DIR`): `state.json` listing every namespace, veth and daemon `up` created (written
//! before each resource is created, so `down` can undo a half-finished `up` or a crash), the
//! switch configs (`<switch>.json`) and daemon logs (`<switch>.log`), the host NIC agents'
//! configs (`<host>.nicd.json`) and logs (`<host>.nicd.log`).
use std::path::{Path, PathBuf};

use rocefab_contracts::time::Dilation;
use serde::{Deserialize, Serialize};

/// Errors reading or writing run-directory state.
#[derive(Debug, thiserror::Error)]
pub enum StateError {
    #[error("{path}: {err}")]
    Io { path: String, err: std::io::Error },
    #[error("{path}: corrupt state file: {err}")]
    Json { path: String, err: serde_json::Error },
    #[error("fabric {fabric} was brought up by a rocefab that did not record its emulated clock; run `rocefab down {fabric}` and bring it up again")]
    NoClock { fabric: String },
}

/// A veth pair (both ends in fabric namespaces).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct LinkState {
    /// `node:ifname`.
    pub a: String,
    pub b: String,
    pub a_netns: String,
    pub b_netns: String,
    pub line_rate_bps: u64,
    pub class: String,
}

/// A daemon `up` started: a switch daemon (`rocefab-switchd`) or a host's NIC agent
/// (`rocefab-nicd`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct DaemonState {
    /// [`KIND_SWITCH`] or [`KIND_HOST`]; state files written before host agents existed have
    /// no `kind` and hold switch daemons only.
    #[serde(default = "kind_switch")]
    pub kind: String,
    /// Node name: the switch, or the host of a NIC agent (the key predates host agents).
    pub switch: String,
    pub netns: String,
    /// Set right after the process is spawned.
    pub pid: Option<u32>,
    pub config: PathBuf,
    pub log: PathBuf,
    /// `http://127.0.0.1:<port>/metrics`; the daemon serves `/lldp` on the same address.
    pub metrics_url: String,
}

/// [`DaemonState::kind`] of a switch daemon.
pub const KIND_SWITCH: &str = "switch";
/// [`DaemonState::kind`] of a host's NIC agent.
pub const KIND_HOST: &str = "host";

fn kind_switch() -> String {
    KIND_SWITCH.into()
}

impl DaemonState {
    /// Node name (switch or host).
    pub fn node(&self) -> &str {
        &self.switch
    }
    pub fn is_host(&self) -> bool {
        self.kind == KIND_HOST
    }
    /// `http://<listen>/<path>` on the daemon's HTTP address.
    pub fn url(&self, path: &str) -> String {
        let base = self.metrics_url.strip_suffix("/metrics").unwrap_or(&self.metrics_url);
        format!("{base}/{}", path.trim_start_matches('/'))
    }
}

/// `state.json`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq, Default)]
#[serde(deny_unknown_fields)]
pub struct State {
    pub fabric: String,
    pub topology: PathBuf,
    /// `creating`, `up`.
    pub phase: String,
    pub namespaces: Vec<String>,
    pub links: Vec<LinkState>,
    pub daemons: Vec<DaemonState>,
    /// The fabric's emulated clock, fixed when `up` began (absent in state files written
    /// before captures and replays converted to emulated time).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clock: Option<EmulatedClock>,
    /// Links cut by `rocefab fail link` and not restored, by index into `links`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub failed_links: Vec<usize>,
    /// Switches stopped by `rocefab fail switch` and not restored.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub failed_switches: Vec<String>,
    /// The failed links that fail silently (`rocefab fail link --silent`: carrier up, every
    /// frame dropped); also in `failed_links`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub silent_links: Vec<usize>,
    /// `rocefab up --switch-workers N`: every switch in one `rocefab-switchd` process whose data
    /// planes share N worker threads (each switch's daemon state then has that process's pid).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub switch_workers: Option<u16>,
}

/// A fabric's emulated clock (docs/src/emulated-time.md): at time dilation D, the wall-clock
/// instant W is the emulated instant `zero + (W − zero) / D`, where `zero` is when `rocefab up`
/// began. Every capture of one fabric is on this one time line, whichever node it came from,
/// and its Unix timestamps stay readable dates (at D = 1 they are the wall clock's).
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct EmulatedClock {
    /// D of the topology's `time_dilation`.
    pub time_dilation: f64,
    /// Unix time (ns, wall clock) at which emulated and wall time agree.
    pub zero_unix_ns: u64,
}

// `zero_unix_ns` is an integer and D is finite: the comparison is total.
impl Eq for EmulatedClock {}

impl EmulatedClock {
    /// The clock of a fabric coming up now at dilation `d`.
    pub fn starting_now(d: Dilation) -> EmulatedClock {
        EmulatedClock { time_dilation: d.factor(), zero_unix_ns: unix_now_ns() }
    }

    pub fn dilation(&self) -> Dilation {
        Dilation::new(self.time_dilation).unwrap_or_default()
    }

    /// The emulated Unix time (ns) of the wall-clock Unix time `wall_ns`.
    pub fn emulated_unix_ns(&self, wall_ns: u64) -> u64 {
        let d = self.dilation();
        if wall_ns >= self.zero_unix_ns {
            self.zero_unix_ns + d.to_emulated_ns(wall_ns - self.zero_unix_ns)
        } else {
            self.zero_unix_ns - d.to_emulated_ns(self.zero_unix_ns - wall_ns)
        }
    }

    /// One line saying how timestamps relate to the wall clock.
    pub fn describe(&self) -> String {
        let d = self.dilation();
        if d.is_real_time() {
            "emulated time = wall clock (time_dilation 1)".into()
        } else {
            let zero = rfc3339(self.zero_unix_ns);
            format!("emulated time at time_dilation {d}: {zero} + wall time since then / {d}")
        }
    }
}

/// Unix time now, ns.
pub fn unix_now_ns() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64)
}

/// RFC 3339 (UTC, ns) of a Unix time in ns: `2026-11-25T03:35:28.123456789Z`.
pub fn rfc3339(unix_ns: u64) -> String {
    time::OffsetDateTime::from_unix_timestamp_nanos(i128::from(unix_ns))
        .ok()
        .and_then(|t| t.format(&time::format_description::well_known::Rfc3339).ok())
        .unwrap_or_else(|| format!("{unix_ns} ns after the Unix epoch"))
}

/// Base directory of all run directories.
pub fn base() -> PathBuf {
    std::env::var_os("ROCEFAB_RUN_DIR").map(PathBuf::from).unwrap_or_else(|| PathBuf::from("/run/rocefab"))
}

/// Run directory of one fabric.
pub fn dir(fabric: &str) -> PathBuf {
    base().join(fabric)
}

pub fn state_path(fabric: &str) -> PathBuf {
    dir(fabric).join("state.json")
}

/// Fabrics with a state file, sorted.
pub fn fabrics() -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(base())
        .map(|d| {
            d.filter_map(|e| e.ok())
                .filter(|e| e.path().join("state.json").exists())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

impl State {
    pub fn load(fabric: &str) -> Result<State, StateError> {
        Self::load_path(&state_path(fabric))
    }

    pub fn load_path(p: &Path) -> Result<State, StateError> {
        let path = p.display().to_string();
        let text = std::fs::read_to_string(p).map_err(|err| StateError::Io { path: path.clone(), err })?;
        serde_json::from_str(&text).map_err(|err| StateError::Json { path, err })
    }

    /// The fabric's emulated clock.
    pub fn clock(&self) -> Result<EmulatedClock, StateError> {
        self.clock.ok_or_else(|| StateError::NoClock { fabric: self.fabric.clone() })
    }

    /// Writes `state.json` atomically (temp file + rename), creating the run directory.
    pub fn save(&self) -> Result<(), StateError> {
        let d = dir(&self.fabric);
        let io = |path: &Path| {
            let path = path.display().to_string();
            move |err| StateError::Io { path, err }
        };
        std::fs::create_dir_all(&d).map_err(io(&d))?;
        let tmp = d.join("state.json.tmp");
        let text = serde_json::to_string_pretty(self).expect("state serialises");
        std::fs::write(&tmp, text).map_err(io(&tmp))?;
        let p = d.join("state.json");
        std::fs::rename(&tmp, &p).map_err(io(&p))
    }
}

/// A daemon of fabric `fabric` as the state file lists it, for tests: node `node` serving its
/// metrics on `port`.
#[cfg(test)]
pub(crate) fn test_daemon(fabric: &str, kind: &str, node: &str, port: u16) -> DaemonState {
    DaemonState {
        kind: kind.into(),
        switch: node.into(),
        netns: format!("rf-{fabric}-{node}"),
        pid: Some(1),
        config: std::path::PathBuf::from(format!("/run/rocefab/{fabric}/{node}.json")),
        log: std::path::PathBuf::from(format!("/run/rocefab/{fabric}/{node}.log")),
        metrics_url: format!("http://127.0.0.1:{port}/metrics"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn state_round_trip_and_listing() {
        let tmp = std::env::temp_dir().join(format!("rocefab-rundir-test-{}", std::process::id()));
        std::env::set_var("ROCEFAB_RUN_DIR", &tmp);
        let st = State {
            fabric: "t1".into(),
            topology: "/x/t.yaml".into(),
            phase: "creating".into(),
            namespaces: vec!["rf-t1-host1".into()],
            links: vec![LinkState {
                a: "host1:gpu0".into(),
                b: "rail1:eth1".into(),
                a_netns: "rf-t1-host1".into(),
                b_netns: "rf-t1-rail1".into(),
                line_rate_bps: 1_000_000_000,
                class: "host-rail".into(),
            }],
            silent_links: vec![0],
            switch_workers: Some(2),
            daemons: vec![],
            clock: Some(EmulatedClock { time_dilation: 8000.0, zero_unix_ns: 1_700_000_000_000_000_000 }),
            failed_links: vec![0],
            failed_switches: vec!["spine1".into()],
        };
        st.save().unwrap();
        assert_eq!(State::load("t1").unwrap(), st);
        std::fs::create_dir_all(tmp.join("notafabric")).unwrap();
        assert_eq!(fabrics(), ["t1"]);
        std::fs::write(state_path("t1"), "{").unwrap();
        let e = State::load("t1").unwrap_err().to_string();
        assert!(e.contains("corrupt state file"), "{e}");
        std::fs::remove_dir_all(&tmp).unwrap();
        std::env::remove_var("ROCEFAB_RUN_DIR");
    }

    #[test]
    fn emulated_clock_divides_wall_time_since_zero() {
        let zero = 1_764_041_728_000_000_000; // 2025-11-25T03:35:28Z
        let c = EmulatedClock { time_dilation: 1000.0, zero_unix_ns: zero };
        assert_eq!(c.emulated_unix_ns(zero), zero);
        // One wall second after zero is one emulated millisecond after it.
        assert_eq!(c.emulated_unix_ns(zero + 1_000_000_000), zero + 1_000_000);
        assert_eq!(c.emulated_unix_ns(zero + 1_500), zero + 2);
        assert_eq!(c.emulated_unix_ns(zero - 2_000_000_000), zero - 2_000_000);
        let gap = c.emulated_unix_ns(zero + 7_010_000_000) - c.emulated_unix_ns(zero + 7_000_000_000);
        assert_eq!(gap, 10_000, "a 10 ms wall gap is 10 us emulated");
        assert_eq!(
            c.describe(),
            "emulated time at time_dilation 1000: 2025-11-25T03:35:28Z + wall time since then / 1000"
        );
        let real = EmulatedClock { time_dilation: 1.0, zero_unix_ns: zero };
        assert_eq!(real.emulated_unix_ns(zero + 123_456_789), zero + 123_456_789);
        assert_eq!(real.describe(), "emulated time = wall clock (time_dilation 1)");
        assert_eq!(rfc3339(1_700_000_000_123_456_789), "2023-11-14T22:13:20.123456789Z");
    }

    #[test]
    fn a_state_file_without_a_clock_loads_and_says_what_to_do() {
        let st: State = serde_json::from_str(
            r#"{"fabric":"old","topology":"/t.yaml","phase":"up","namespaces":[],"links":[],"daemons":[]}"#,
        )
        .unwrap();
        assert_eq!(st.clock, None);
        let e = st.clock().unwrap_err().to_string();
        assert!(e.contains("fabric old") && e.contains("rocefab down old"), "{e}");
        let c = EmulatedClock::starting_now(Dilation::new(8000.0).unwrap());
        assert!(c.zero_unix_ns > 1_700_000_000_000_000_000 && c.time_dilation == 8000.0);
    }

    #[test]
    fn daemons_without_a_kind_are_switch_daemons() {
        let old = r#"{"switch":"rail1","netns":"rf-t-rail1","pid":7,"config":"/run/rocefab/t/rail1.json",
                      "log":"/run/rocefab/t/rail1.log","metrics_url":"http://127.0.0.1:9400/metrics"}"#;
        let d: DaemonState = serde_json::from_str(old).unwrap();
        assert_eq!((d.kind.as_str(), d.node(), d.is_host()), (KIND_SWITCH, "rail1", false));
        assert_eq!(d.url("/lldp"), "http://127.0.0.1:9400/lldp");
        let h = DaemonState { kind: KIND_HOST.into(), switch: "host1".into(), ..d };
        let back: DaemonState = serde_json::from_str(&serde_json::to_string(&h).unwrap()).unwrap();
        assert!(back.is_host());
    }
}
