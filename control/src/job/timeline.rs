//! `rocefab run … --timeline out.svg|out.json`: the DCQCN timeline of book ch. 11, Figure 11-7
//! (ECN marking, CNPs, the senders' rate cut and recovery, and PFC pausing hop by hop), drawn
//! from samples taken while the job runs.
//!
//! Three parts:
//! - [`Sampler`]: a thread that polls every switch daemon's and every host's `GET /sample`
//!   ([`rocefab_contracts::sample`], [`rocefab_contracts::host_sample`]) at a fixed wall-clock interval and
//!   stamps each answer with its own monotonic clock. It stops when the job ends and never runs
//!   longer than its limit (the job timeout); it keeps at most [`MAX_ROUNDS`] rounds, halving
//!   its rate (dropping every other round) when it reaches them.
//! - [`Timeline::build`]: pure; the derived series in emulated time for a time dilation D
//!   (docs/src/emulated-time.md: t_emulated = t_wall / D, rate_emulated = rate_wall × D, bytes
//!   and counts do not scale). The bottleneck is the egress queue with the highest peak depth,
//!   or the port `--timeline-port switch:port` names.
//! - [`render_svg`]: five stacked panels sharing the emulated time axis, drawn with plotters'
//!   SVG backend (text as SVG `<text>`, no system fonts): (a) the bottleneck's depth as the
//!   buffer counts it (whole cells, the unit WRED and xOFF/xON act on) with the WRED min/max
//!   and xOFF/xON lines, (b) ECN marks per sample interval, (c) CNPs per sender,
//!   (d) each sender's DCQCN rate, (e) PFC pause lanes.
//!
//! The `.json` output is a [`TimelineFile`]: the derived [`Timeline`] and the raw [`Samples`].
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::Context;
use rocefab_contracts::config::SwitchConfig;
use rocefab_contracts::host_sample::HostSample;
use rocefab_contracts::job::Job;
use rocefab_contracts::sample::{SwitchSample, Thresholds};
use serde::{Deserialize, Serialize};

use crate::fabric::daemon_http::scrape;
use crate::fabric::rundir::{self, State};

/// Default sampling interval, wall clock.
pub const DEFAULT_INTERVAL: Duration = Duration::from_millis(10);
/// Most sampling rounds kept; at this count every other round is dropped and the interval doubles.
pub const MAX_ROUNDS: usize = 2048;
/// How long one `GET /sample` may take.
const SCRAPE_TIMEOUT: Duration = Duration::from_millis(250);
/// Distinct scrape errors kept in [`Samples::errors`].
const MAX_ERRORS: usize = 32;

/// Errors building or drawing a timeline.
#[derive(Debug, thiserror::Error)]
pub enum TimelineError {
    #[error("--timeline-port {0:?}: expected switch:port, e.g. rail1:eth1")]
    BadPort(String),
    #[error("--timeline-port {given}: no such switch port (known: {known})")]
    UnknownPort { given: String, known: String },
    #[error("drawing the timeline: {0}")]
    Draw(String),
}

/// Checks a `--timeline` path: its extension chooses the output.
pub fn parse_output(s: &str) -> Result<PathBuf, String> {
    let p = PathBuf::from(s);
    match p.extension().and_then(|e| e.to_str()).map(str::to_ascii_lowercase).as_deref() {
        Some("svg" | "json") => Ok(p),
        _ => Err(format!(
            "--timeline {s}: the extension chooses the output; use .svg (the plot) or .json (samples and series)"
        )),
    }
}

/// An answer stamped with the sampler's clock (ns since the sampler started; the midpoint of
/// the request).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Stamped<T> {
    pub t_ns: u64,
    pub sample: T,
}

/// One polling round: every switch's and every host's answer, `null` where none came.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Round {
    /// When the round started, ns since the sampler started (wall clock).
    pub t_ns: u64,
    /// In the order of [`Samples::switches`].
    pub switches: Vec<Option<Stamped<SwitchSample>>>,
    /// In the order of [`Samples::hosts`].
    pub hosts: Vec<Option<Stamped<HostSample>>>,
}

/// Everything the sampler collected. Times are wall clock; values as the daemons sent them.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Samples {
    /// Sampling interval at the end (doubled each time [`MAX_ROUNDS`] was reached), ns.
    pub interval_ns: u64,
    pub switches: Vec<String>,
    pub hosts: Vec<String>,
    pub rounds: Vec<Round>,
    /// Requests sent, and those that got no usable answer (a host that has just finished its
    /// job and exited does not answer: a few failures at the end are expected).
    #[serde(default)]
    pub requests: u64,
    #[serde(default)]
    pub failed: u64,
    /// Scrape failures (distinct, the first [`MAX_ERRORS`]).
    pub errors: Vec<String>,
    /// Wall-clock Unix time of the sampler's start (its t = 0), ns.
    #[serde(default)]
    pub start_unix_ns: u64,
}

impl Samples {
    /// Time dilation D the switches report (the first answer; 1 without any).
    pub fn time_dilation(&self) -> f64 {
        self.rounds
            .iter()
            .flat_map(|r| r.switches.iter().flatten())
            .map(|s| s.sample.time_dilation)
            .find(|d| d.is_finite() && *d > 0.0)
            .unwrap_or(1.0)
    }
}

/// A daemon to poll: its name and its `/sample` URL.
#[derive(Clone, Debug)]
pub struct Source {
    pub name: String,
    pub url: String,
}

/// The sampling thread; [`Sampler::finish`] stops it and returns what it collected.
pub struct Sampler {
    stop: Option<mpsc::Sender<()>>,
    thread: Option<std::thread::JoinHandle<Samples>>,
}

impl Sampler {
    /// Starts polling `switches` and `hosts` every `interval` for at most `limit`.
    pub fn start(
        switches: Vec<Source>,
        hosts: Vec<Source>,
        interval: Duration,
        limit: Duration,
    ) -> std::io::Result<Sampler> {
        Sampler::start_with(switches, hosts, interval, limit, SCRAPE_TIMEOUT)
    }

    /// [`Sampler::start`] with `timeout` for each request.
    fn start_with(
        switches: Vec<Source>,
        hosts: Vec<Source>,
        interval: Duration,
        limit: Duration,
        timeout: Duration,
    ) -> std::io::Result<Sampler> {
        let (tx, rx) = mpsc::channel();
        let thread = std::thread::Builder::new()
            .name("rocefab-timeline".into())
            .spawn(move || sample_loop(&switches, &hosts, interval, limit, timeout, &rx))?;
        Ok(Sampler { stop: Some(tx), thread: Some(thread) })
    }

    /// Stops the thread (it ends its current round) and returns the samples.
    pub fn finish(mut self) -> Samples {
        drop(self.stop.take());
        self.thread.take().and_then(|t| t.join().ok()).unwrap_or_default()
    }
}

impl Drop for Sampler {
    fn drop(&mut self) {
        // Disconnecting the channel ends the loop; the thread is not waited for.
        drop(self.stop.take());
    }
}

fn ns(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// GETs `url` and parses the JSON answer, stamped with the midpoint of the request.
fn poll<T: serde::de::DeserializeOwned>(clock: Instant, url: &str, timeout: Duration) -> Result<Stamped<T>, String> {
    let sent = clock.elapsed();
    let body = scrape(url, timeout).map_err(|e| format!("{e:#}"))?;
    let got = clock.elapsed();
    let sample = serde_json::from_str(&body).map_err(|e| format!("{url}: {e}"))?;
    Ok(Stamped { t_ns: ns((sent + got) / 2), sample })
}

fn sample_loop(
    switches: &[Source],
    hosts: &[Source],
    interval: Duration,
    limit: Duration,
    timeout: Duration,
    stop: &mpsc::Receiver<()>,
) -> Samples {
    let clock = Instant::now();
    let mut interval = interval.max(Duration::from_millis(1));
    let mut out = Samples {
        start_unix_ns: rundir::unix_now_ns(),
        interval_ns: ns(interval),
        switches: switches.iter().map(|s| s.name.clone()).collect(),
        hosts: hosts.iter().map(|s| s.name.clone()).collect(),
        ..Default::default()
    };
    let mut next = Duration::ZERO;
    // Bounded: every pass waits for the next due time or ends, and time runs out at `limit`.
    loop {
        let now = clock.elapsed();
        if now >= limit {
            break;
        }
        match stop.recv_timeout(next.saturating_sub(now)) {
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            _ => break,
        }
        let t_ns = ns(clock.elapsed());
        let mut round = Round { t_ns, ..Default::default() };
        for s in switches {
            round
                .switches
                .push(poll(clock, &s.url, timeout).map_err(|e| record(&mut out, format!("{}: {e}", s.name))).ok());
        }
        for h in hosts {
            round
                .hosts
                .push(poll(clock, &h.url, timeout).map_err(|e| record(&mut out, format!("{}: {e}", h.name))).ok());
        }
        out.requests += (switches.len() + hosts.len()) as u64;
        out.rounds.push(round);
        if out.rounds.len() >= MAX_ROUNDS {
            thin(&mut out.rounds);
            interval *= 2;
            out.interval_ns = ns(interval);
        }
        next = (next + interval).max(clock.elapsed());
    }
    out
}

/// Counts a failed request and keeps its error unless it is known already or [`MAX_ERRORS`]
/// are kept.
fn record(out: &mut Samples, e: String) {
    out.failed += 1;
    if out.errors.len() < MAX_ERRORS && !out.errors.contains(&e) {
        out.errors.push(e);
    }
}

/// Keeps every other round (the first, the third, …).
fn thin(rounds: &mut Vec<Round>) {
    let mut i = 0;
    rounds.retain(|_| {
        i += 1;
        i % 2 == 1
    });
}

/// A point of a series: emulated time (µs) and a value.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Point {
    pub t_us: f64,
    pub v: f64,
}

/// A named series.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Series {
    pub name: String,
    pub points: Vec<Point>,
}

/// The egress queue the timeline follows.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Bottleneck {
    pub switch: String,
    pub port: String,
    pub peer: String,
    pub tc: u8,
    /// Highest depth seen during the run (samples and the daemon's watermark), bytes in whole
    /// buffer cells (`thresholds.cell_bytes`): the depth WRED and the thresholds act on.
    pub peak_depth_bytes: u64,
    /// How busy the bottleneck's link was while every sender still had data to send.
    #[serde(default)]
    pub utilisation: Option<Utilisation>,
    /// Time-weighted average depth over the job's completion time (or, without one, from the
    /// first to the last sample of its switch), bytes in whole buffer cells, exact (the switch
    /// integrates depth × time at every enqueue and dequeue).
    #[serde(default)]
    pub average_depth_bytes: Option<f64>,
}

/// The bottleneck link's use during the congested phase: from the first sample after the port
/// started transmitting to the last sample before the first sender QP completed (after that the
/// remaining senders share the link with fewer competitors, which measures DCQCN's recovery, not
/// the incast). Wire bits are the frames dequeued on the port, all queues, plus the 24 bytes of
/// preamble/SFD, inter-frame gap and FCS the shaper charges per frame.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Utilisation {
    /// Window start, emulated µs.
    pub from_us: f64,
    /// Window end, emulated µs.
    pub to_us: f64,
    /// The port's line rate, emulated bit/s.
    pub line_rate_bps: u64,
    /// Wire bits sent in the window over (window × line rate).
    pub fraction: f64,
}

/// One PFC pause lane: a switch egress priority or a host NIC's data priority that was paused
/// at least once.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PauseLane {
    /// `switch:port prio p` or `host:nic`.
    pub name: String,
    /// Who sent the pauses: the port's peer, or the switch port whose peer is the host NIC
    /// (empty when no switch names it).
    pub peer: String,
    /// Paused intervals `[start, end]`, emulated µs (resolution: one sample interval).
    pub intervals: Vec<[f64; 2]>,
    /// Total paused time during the run, emulated µs.
    pub paused_us: f64,
    /// PFC frames received during the run.
    pub pfc_frames: u64,
}

/// The derived series, all against emulated time in µs since the sampler started (≈ the job's
/// start).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Timeline {
    pub fabric: String,
    pub collective: String,
    /// Time dilation D used for the conversion.
    pub time_dilation: f64,
    /// Sample interval, emulated µs.
    pub interval_us: f64,
    /// Last sample, emulated µs.
    pub end_us: f64,
    pub bottleneck: Option<Bottleneck>,
    /// The bottleneck switch's thresholds (bytes).
    pub thresholds: Option<Thresholds>,
    /// (a) Bottleneck depth, bytes.
    pub depth: Vec<Point>,
    /// (b) ECN CE marks of all switches in each sample interval (at its end).
    pub ecn_marks: Vec<Point>,
    /// WRED drops of all switches in each sample interval.
    pub wred_drops: Vec<Point>,
    /// Packets the switches trimmed instead of dropping (`qos.trim`) in each sample interval.
    #[serde(default)]
    pub trims: Vec<Point>,
    /// Frames the switches' admission dropped (not trimmed) in each sample interval.
    #[serde(default)]
    pub admission_drops: Vec<Point>,
    /// (c) CNPs each sender QP received in each sample interval.
    pub cnps: Vec<Series>,
    /// (d) Each sender QP's DCQCN rate, emulated bit/s.
    pub rates: Vec<Series>,
    /// Each sender QP's DCQCN α.
    pub alpha: Vec<Series>,
    /// (e) PFC pause lanes.
    pub pause_lanes: Vec<PauseLane>,
    /// Every switch egress queue that held anything during the run (first to last sample of
    /// each switch): time-weighted average and peak depth.
    #[serde(default)]
    pub queues: Vec<rocefab_contracts::sample::QueueUse>,
    /// Every switch ingress port priority that sent PFC during the run: pause onsets and PFC
    /// frames.
    #[serde(default)]
    pub pfc: Vec<rocefab_contracts::sample::PfcUse>,
    /// The fabric's events (`rocefab fail`, `restore`) during the run, drawn as vertical lines.
    #[serde(default)]
    pub events: Vec<TimelineEvent>,
}

/// An event of the fabric's log on the timeline.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TimelineEvent {
    /// Emulated µs since the first sample's clock start.
    pub t_us: f64,
    /// `link down`, `switch up`, `pfc storm start`, ...
    pub event: String,
    pub target: String,
}

/// The `.json` output.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TimelineFile {
    pub timeline: Timeline,
    pub samples: Samples,
}

/// A `--timeline-port` choice.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PortChoice {
    pub switch: String,
    pub port: String,
}

impl std::str::FromStr for PortChoice {
    type Err = TimelineError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.split_once(':') {
            Some((sw, p)) if !sw.is_empty() && !p.is_empty() => Ok(PortChoice { switch: sw.into(), port: p.into() }),
            _ => Err(TimelineError::BadPort(s.into())),
        }
    }
}

/// How the depth panel names its unit: the buffer's cells, as the thresholds count.
fn cells_note(cell_bytes: u32) -> String {
    match cell_bytes {
        0 => String::new(),
        c => format!(" in {c}-byte cells"),
    }
}

/// Wall ns → emulated µs.
fn us(t_ns: u64, d: f64) -> f64 {
    t_ns as f64 / 1e3 / d
}

/// Per (switch, port, tc): the highest depth during the run: the sampled depths, and the
/// window watermark when one peak window spans the samples, else the daemon's watermark when
/// it rose between the first and the last sample (a rise happened in the run).
/// Depths are the buffer's (whole cells, [`PortSample::depth_cell_bytes`]): what the WRED and
/// xOFF/xON thresholds are compared with, so the plot and its lines share one unit.
fn peak_depths(s: &Samples) -> Vec<(usize, usize, usize, u64)> {
    let mut out = Vec::new();
    for (si, _) in s.switches.iter().enumerate() {
        let seq: Vec<&SwitchSample> =
            s.rounds.iter().filter_map(|r| r.switches.get(si)?.as_ref()).map(|x| &x.sample).collect();
        let (Some(first), Some(last)) = (seq.first(), seq.last()) else { continue };
        for (pi, port) in last.ports.iter().enumerate() {
            for tc in 0..port.depth_bytes.len() {
                let mut peak =
                    seq.iter().filter_map(|x| x.ports.get(pi)).map(|p| p.depth_cell_bytes[tc]).max().unwrap_or(0);
                let before = first.ports.get(pi).map_or(0, |p| p.peak_depth_cell_bytes[tc]);
                if last.peak_window != 0 && last.peak_window == first.peak_window {
                    // One peak window spans the samples (`rocefab run` opens one per job).
                    peak = peak.max(port.window_peak_cell_bytes[tc]);
                } else if port.peak_depth_cell_bytes[tc] > before {
                    peak = peak.max(port.peak_depth_cell_bytes[tc]);
                }
                out.push((si, pi, tc, peak));
            }
        }
    }
    out
}

/// The bottleneck: the queue with the highest peak (the first such in switch, port, tc order),
/// restricted to `choice`'s port if given; `None` when no queue held a byte and no port was
/// chosen.
fn bottleneck(s: &Samples, choice: Option<&PortChoice>) -> Result<Option<(usize, usize, usize, u64)>, TimelineError> {
    let peaks = peak_depths(s);
    let port_name = |si: usize, pi: usize| -> Option<&str> {
        s.rounds
            .iter()
            .rev()
            .find_map(|r| r.switches.get(si)?.as_ref())
            .and_then(|x| x.sample.ports.get(pi))
            .map(|p| p.name.as_str())
    };
    let Some(c) = choice else {
        let best =
            peaks.iter().copied().filter(|x| x.3 > 0).fold(None, |b: Option<(usize, usize, usize, u64)>, x| match b {
                Some(b) if b.3 >= x.3 => Some(b),
                _ => Some(x),
            });
        return Ok(best);
    };
    let on_port: Vec<_> = peaks
        .iter()
        .copied()
        .filter(|&(si, pi, _, _)| s.switches[si] == c.switch && port_name(si, pi) == Some(c.port.as_str()))
        .collect();
    if on_port.is_empty() {
        let mut known: Vec<String> = Vec::new();
        for &(si, pi, _, _) in &peaks {
            let k = format!("{}:{}", s.switches[si], port_name(si, pi).unwrap_or("?"));
            if !known.contains(&k) {
                known.push(k);
            }
        }
        return Err(TimelineError::UnknownPort { given: format!("{}:{}", c.switch, c.port), known: known.join(", ") });
    }
    // The deepest queue of the port; with none deeper than 0, its first WRED queue (or queue 0).
    let wred = s
        .rounds
        .iter()
        .find_map(|r| r.switches.get(on_port[0].0)?.as_ref())
        .map_or(0, |x| x.sample.thresholds.wred_queues);
    let default_tc = (0..8).find(|tc| wred & (1 << tc) != 0).unwrap_or(0);
    let best = on_port.iter().copied().fold(None, |b: Option<(usize, usize, usize, u64)>, x| match b {
        Some(b) if b.3 >= x.3 => Some(b),
        _ => Some(x),
    });
    Ok(best.filter(|b| b.3 > 0).or_else(|| on_port.iter().copied().find(|x| x.2 == default_tc)))
}

/// Bytes on the wire per frame beyond the frame itself (preamble + SFD 8, IFG 12, FCS 4), as the
/// switch's shaper charges them.
const WIRE_OVERHEAD_BYTES: u64 = 24;

/// [`Utilisation`] of port `pi` of switch `si`; `None` when the samples do not bracket a window
/// (no traffic, or a sender completed before two samples of traffic).
fn utilisation(s: &Samples, si: usize, pi: usize, d: f64) -> Option<Utilisation> {
    // Per round: (switch stamp, wire bytes sent so far, line rate), when the switch answered.
    let tx: Vec<Option<(u64, u64, u64)>> = s
        .rounds
        .iter()
        .map(|r| {
            let x = r.switches.get(si)?.as_ref()?;
            let p = x.sample.ports.get(pi)?;
            let wire = p.tx_bytes.iter().sum::<u64>() + WIRE_OVERHEAD_BYTES * p.tx_packets.iter().sum::<u64>();
            Some((x.t_ns, wire, p.line_rate_bps))
        })
        .collect();
    let base = tx.iter().flatten().next()?.1;
    let start = tx.iter().position(|x| x.is_some_and(|x| x.1 > base))?;
    // The first round in which some sender QP had all its bytes acknowledged.
    let mut first_done = s.rounds.len();
    for hi in 0..s.hosts.len() {
        for (qpn, _) in senders(s, hi) {
            let acked: Vec<(usize, u64)> = s
                .rounds
                .iter()
                .enumerate()
                .filter_map(|(ri, r)| {
                    Some((ri, r.hosts.get(hi)?.as_ref()?.sample.qps.iter().find(|q| q.qpn == qpn)?.acked_bytes))
                })
                .collect();
            let Some(&(_, total)) = acked.last() else { continue };
            if let Some(&(ri, _)) = acked.iter().find(|&&(_, a)| a == total && total > 0) {
                first_done = first_done.min(ri);
            }
        }
    }
    let end = (start + 1..first_done).rev().find(|&ri| tx[ri].is_some())?;
    let ((t0, b0, _), (t1, b1, rate)) = (tx[start]?, tx[end]?);
    let secs = (t1 - t0) as f64 / d / 1e9;
    (rate > 0 && secs > 0.0).then(|| Utilisation {
        from_us: us(t0, d),
        to_us: us(t1, d),
        line_rate_bps: rate,
        fraction: (b1 - b0) as f64 * 8.0 / (secs * rate as f64),
    })
}

/// Sender QPs of host `hi` over the run: (qpn, series name), in first-seen order.
fn senders(s: &Samples, hi: usize) -> Vec<(u32, String)> {
    let mut out: Vec<(u32, String)> = Vec::new();
    for r in &s.rounds {
        let Some(Some(h)) = r.hosts.get(hi) else { continue };
        for q in h.sample.qps.iter().filter(|q| q.sender) {
            if !out.iter().any(|(n, _)| *n == q.qpn) {
                let who = format!("{} qp {:#x}", s.hosts[hi], q.qpn);
                let name = if q.label.is_empty() { who } else { format!("{} ({who})", q.label) };
                out.push((q.qpn, name));
            }
        }
    }
    out
}

/// A lane's observations: (t_ns, paused now, paused ns total, pfc frames).
type LaneObs = Vec<(u64, bool, u64, u64)>;

/// Paused intervals (wall ns) from a lane's observations; see [`PauseLane::intervals`].
fn pause_intervals(obs: &LaneObs) -> Vec<(u64, u64)> {
    let on = |i: usize| obs[i].1 || (i > 0 && obs[i].2 > obs[i - 1].2);
    let delta = |i: usize| {
        if i == 0 {
            0
        } else {
            obs[i].2.saturating_sub(obs[i - 1].2).min(obs[i].0.saturating_sub(obs[i - 1].0))
        }
    };
    let mut out = Vec::new();
    let mut i = 0;
    while i < obs.len() {
        if !on(i) {
            i += 1;
            continue;
        }
        let start = obs[i].0 - delta(i);
        let mut j = i;
        while j + 1 < obs.len() && on(j + 1) {
            j += 1;
        }
        let end = if obs[j].1 {
            // Still paused at the run's last on-sample: it ended within the next interval.
            if j + 1 < obs.len() {
                obs[j].0 + delta(j + 1)
            } else {
                obs[j].0
            }
        } else if j > i {
            obs[j - 1].0 + delta(j)
        } else {
            obs[j].0
        };
        out.push((start, end.max(start)));
        i = j + 1;
    }
    out
}

impl Timeline {
    /// Derives the timeline from `s` for time dilation `d` (≤ 0 or not finite is taken as 1);
    /// queue averages are over `job_ns` (the job's completion time, emulated) when given
    /// ([`rocefab_contracts::sample::queue_use`]).
    pub fn build(
        s: &Samples,
        fabric: &str,
        collective: &str,
        d: f64,
        port: Option<&PortChoice>,
        job_ns: Option<u64>,
    ) -> Result<Timeline, TimelineError> {
        let d = if d.is_finite() && d > 0.0 { d } else { 1.0 };
        let end_ns = s
            .rounds
            .iter()
            .flat_map(|r| {
                r.switches
                    .iter()
                    .flatten()
                    .map(|x| x.t_ns)
                    .chain(r.hosts.iter().flatten().map(|x| x.t_ns))
                    .chain([r.t_ns])
            })
            .max()
            .unwrap_or(0);
        let mut t = Timeline {
            fabric: fabric.into(),
            collective: collective.into(),
            time_dilation: d,
            interval_us: us(s.interval_ns, d),
            end_us: us(end_ns, d),
            bottleneck: None,
            thresholds: None,
            depth: Vec::new(),
            ecn_marks: Vec::new(),
            wred_drops: Vec::new(),
            trims: Vec::new(),
            admission_drops: Vec::new(),
            cnps: Vec::new(),
            rates: Vec::new(),
            alpha: Vec::new(),
            pause_lanes: Vec::new(),
            queues: Vec::new(),
            pfc: Vec::new(),
            events: Vec::new(),
        };
        // Each switch's first and last answer: the run's queue and PFC counts.
        let ends = |last: bool| -> Vec<SwitchSample> {
            (0..s.switches.len())
                .filter_map(|si| {
                    let mut seq = s.rounds.iter().filter_map(|r| r.switches.get(si)?.as_ref());
                    let x = if last { seq.next_back() } else { seq.next() };
                    x.map(|x| x.sample.clone())
                })
                .collect()
        };
        let (first, last) = (ends(false), ends(true));
        t.queues = rocefab_contracts::sample::queue_use(&first, &last, job_ns);
        t.pfc = rocefab_contracts::sample::pfc_use(&first, &last);
        if let Some((si, pi, tc, peak)) = bottleneck(s, port)? {
            let mut seq = s.rounds.iter().filter_map(|r| r.switches.get(si)?.as_ref());
            for x in seq.clone() {
                if let Some(p) = x.sample.ports.get(pi) {
                    t.depth.push(Point { t_us: us(x.t_ns, d), v: p.depth_cell_bytes[tc] as f64 });
                }
            }
            let last = seq.next_back().map(|x| &x.sample);
            let p = last.and_then(|l| l.ports.get(pi));
            t.thresholds = last.map(|l| l.thresholds.clone());
            t.bottleneck = Some(Bottleneck {
                switch: s.switches[si].clone(),
                port: p.map_or_else(String::new, |p| p.name.clone()),
                peer: p.map_or_else(String::new, |p| p.peer.clone()),
                tc: tc as u8,
                peak_depth_bytes: peak,
                utilisation: utilisation(s, si, pi, d),
                average_depth_bytes: t
                    .queues
                    .iter()
                    .find(|q| {
                        q.switch == s.switches[si]
                            && Some(q.port.as_str()) == p.map(|p| p.name.as_str())
                            && q.tc as usize == tc
                    })
                    .map(|q| q.average_depth_bytes),
            });
        }
        t.counter_deltas(s, d);
        t.sender_series(s, d);
        t.lanes(s, d);
        Ok(t)
    }

    /// Places the events of `log` that happened while `s` was sampled (wall clock from the
    /// sampler's start to the timeline's end) on the timeline's emulated time axis.
    pub fn place_events(&mut self, s: &Samples, log: &[crate::fabric::events::Event]) {
        let end_wall = s.start_unix_ns + (self.end_us * self.time_dilation * 1e3) as u64;
        self.events = log
            .iter()
            .filter(|e| (s.start_unix_ns..=end_wall).contains(&e.wall_unix_ns))
            .map(|e| TimelineEvent {
                t_us: us(e.wall_unix_ns - s.start_unix_ns, self.time_dilation),
                event: e.event.clone(),
                target: e.target.clone(),
            })
            .collect();
    }

    /// ECN marks, WRED drops, trims and admission drops of all switches per round (switches
    /// answering in both rounds).
    fn counter_deltas(&mut self, s: &Samples, d: f64) {
        for w in s.rounds.windows(2) {
            let (mut ecn, mut wred, mut trims, mut dropped) = (0u64, 0u64, 0u64, 0u64);
            for (a, b) in w[0].switches.iter().zip(&w[1].switches) {
                let (Some(a), Some(b)) = (a, b) else { continue };
                if a.sample.xdp_unread || b.sample.xdp_unread {
                    continue;
                }
                for (pa, pb) in a.sample.ports.iter().zip(&b.sample.ports) {
                    // At enqueue the XDP program marks (per ingress port), at dequeue the daemon.
                    ecn += pb.ecn_marked.saturating_sub(pa.ecn_marked)
                        + pb.ecn_marked_dequeue.saturating_sub(pa.ecn_marked_dequeue);
                    wred += pb.wred_dropped.saturating_sub(pa.wred_dropped)
                        + pb.wred_dropped_dequeue.saturating_sub(pa.wred_dropped_dequeue);
                    for tc in 0..pb.trimmed.len() {
                        let t = pb.trimmed[tc].saturating_sub(pa.trimmed[tc]);
                        // SAI counts a trimmed frame's original as an admission drop too.
                        trims += t;
                        dropped += pb.admission_dropped[tc].saturating_sub(pa.admission_dropped[tc]).saturating_sub(t);
                    }
                }
            }
            let t_us = us(w[1].t_ns, d);
            self.ecn_marks.push(Point { t_us, v: ecn as f64 });
            self.wred_drops.push(Point { t_us, v: wred as f64 });
            self.trims.push(Point { t_us, v: trims as f64 });
            self.admission_drops.push(Point { t_us, v: dropped as f64 });
        }
    }

    /// CNPs per interval, DCQCN rate and α of every sender QP.
    fn sender_series(&mut self, s: &Samples, d: f64) {
        for hi in 0..s.hosts.len() {
            for (qpn, name) in senders(s, hi) {
                let seq: Vec<(u64, &rocefab_contracts::host_sample::QpSample)> = s
                    .rounds
                    .iter()
                    .filter_map(|r| r.hosts.get(hi)?.as_ref())
                    .filter_map(|h| Some((h.t_ns, h.sample.qps.iter().find(|q| q.qpn == qpn)?)))
                    .collect();
                let pts = |f: &dyn Fn(&rocefab_contracts::host_sample::QpSample) -> f64| -> Vec<Point> {
                    seq.iter().map(|(t, q)| Point { t_us: us(*t, d), v: f(q) }).collect()
                };
                // hostd reports its DCQCN rate in emulated bit/s already (its job carries D).
                self.rates.push(Series { name: name.clone(), points: pts(&|q| q.rate_bps as f64) });
                self.alpha.push(Series { name: name.clone(), points: pts(&|q| q.alpha) });
                let cnps = seq
                    .windows(2)
                    .map(|w| Point {
                        t_us: us(w[1].0, d),
                        v: w[1].1.cnps_received.saturating_sub(w[0].1.cnps_received) as f64,
                    })
                    .collect();
                self.cnps.push(Series { name, points: cnps });
            }
        }
    }

    /// A lane for every switch egress priority and host NIC that was paused at least once.
    fn lanes(&mut self, s: &Samples, d: f64) {
        let mut push = |name: String, peer: String, obs: LaneObs| {
            let iv = pause_intervals(&obs);
            if iv.is_empty() {
                return;
            }
            let (first, last) = (obs[0], obs[obs.len() - 1]);
            self.pause_lanes.push(PauseLane {
                name,
                peer,
                intervals: iv.iter().map(|&(a, b)| [us(a, d), us(b, d)]).collect(),
                // Both daemons report paused time in emulated ns already.
                paused_us: last.2.saturating_sub(first.2) as f64 / 1e3,
                pfc_frames: last.3.saturating_sub(first.3),
            });
        };
        for (si, sw) in s.switches.iter().enumerate() {
            let seq: Vec<&Stamped<SwitchSample>> =
                s.rounds.iter().filter_map(|r| r.switches.get(si)?.as_ref()).collect();
            let Some(last) = seq.last() else { continue };
            for (pi, port) in last.sample.ports.iter().enumerate() {
                for prio in 0..port.paused.len() {
                    let obs: LaneObs = seq
                        .iter()
                        .filter_map(|x| {
                            x.sample
                                .ports
                                .get(pi)
                                .map(|p| (x.t_ns, p.paused[prio], p.paused_ns[prio], p.pfc_rx_frames[prio]))
                        })
                        .collect();
                    push(format!("{sw}:{} prio {prio}", port.name), port.peer.clone(), obs);
                }
            }
        }
        // Switch port facing each host NIC (`host:nic` → `switch:port`).
        let mut facing = std::collections::HashMap::new();
        for (si, sw) in s.switches.iter().enumerate() {
            if let Some(x) = s.rounds.iter().rev().find_map(|r| r.switches.get(si)?.as_ref()) {
                for p in &x.sample.ports {
                    facing.insert(p.peer.clone(), format!("{sw}:{}", p.name));
                }
            }
        }
        for (hi, host) in s.hosts.iter().enumerate() {
            let seq: Vec<&Stamped<HostSample>> = s.rounds.iter().filter_map(|r| r.hosts.get(hi)?.as_ref()).collect();
            let Some(last) = seq.last() else { continue };
            for nic in &last.sample.nics {
                let name = format!("{host}:{}", nic.name);
                let peer = facing.get(&name).cloned().unwrap_or_default();
                let obs: LaneObs = seq
                    .iter()
                    .filter_map(|x| {
                        x.sample
                            .nics
                            .iter()
                            .find(|n| n.name == nic.name)
                            .map(|n| (x.t_ns, n.paused, n.paused_ns, n.pfc_frames_received))
                    })
                    .collect();
                push(name, peer, obs);
            }
        }
    }
}

/// The time axis unit for a run of `end_us`: (name, factor from µs).
fn time_unit(end_us: f64) -> (&'static str, f64) {
    if end_us >= 10_000.0 {
        ("ms", 1e-3)
    } else {
        ("µs", 1.0)
    }
}

fn draw_err<E: std::fmt::Debug>(e: E) -> TimelineError {
    TimelineError::Draw(format!("{e:?}"))
}

/// The timeline as an SVG document.
/// The thresholds drawn beside the bottleneck queue's depth: WRED min and max only where WRED
/// runs (on that queue, or on any queue when there is no bottleneck; a PFC-only fabric has
/// none), xOFF and xON only where a priority is lossless.
fn threshold_lines(th: &Thresholds, tc: Option<u8>) -> Vec<(&'static str, u64, plotters::style::RGBColor)> {
    use plotters::style::RGBColor;
    let wred = match tc {
        Some(tc) => th.wred_queues & (1 << (tc & 7)) != 0,
        None => th.wred_queues != 0,
    };
    let mut lines = Vec::new();
    if wred {
        lines.push(("WRED min", th.wred_min_bytes, RGBColor(230, 150, 0)));
        lines.push(("WRED max", th.wred_max_bytes, RGBColor(200, 0, 0)));
    }
    if th.lossless_priorities != 0 {
        lines.push(("xOFF", th.xoff_bytes, RGBColor(120, 0, 160)));
        lines.push(("xON", th.xon_bytes, RGBColor(0, 140, 60)));
    }
    lines
}

pub fn render_svg(t: &Timeline) -> Result<String, TimelineError> {
    use plotters::prelude::*;
    use plotters::style::text_anchor::{HPos, Pos, VPos};

    const W: u32 = 1200;
    const PANEL: u32 = 240;
    const Y_AREA: u32 = 190;
    let lanes = t.pause_lanes.len().max(1);
    let lane_panel = 90 + 26 * lanes as u32;
    let h = 50 + 4 * PANEL + lane_panel;
    let (unit, k) = time_unit(t.end_us);
    let x_end = (t.end_us * k).max(1e-3);
    let x_desc = format!("emulated time ({unit})");
    let font = |size: u32| ("sans-serif", size);
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (W, h)).into_drawing_area();
        root.fill(&WHITE).map_err(draw_err)?;
        let title =
            format!("DCQCN timeline: {} on fabric {}, time dilation D = {}", t.collective, t.fabric, t.time_dilation);
        let root = root.titled(&title, font(22)).map_err(draw_err)?;
        let (a, rest) = root.split_vertically(PANEL);
        let (b, rest) = rest.split_vertically(PANEL);
        let (c, rest) = rest.split_vertically(PANEL);
        let (dd, e) = rest.split_vertically(PANEL);
        let grid = RGBColor(225, 225, 225);
        let color = |i: usize| Palette99::pick(i).to_rgba();
        // The fabric's events: a vertical line across a panel, labelled in panel (a).
        let event_color = RGBColor(90, 90, 90);
        let mark_events = |ch: &mut ChartContext<
            SVGBackend,
            Cartesian2d<plotters::coord::types::RangedCoordf64, plotters::coord::types::RangedCoordf64>,
        >,
                           y_max: f64,
                           label: bool|
         -> Result<(), TimelineError> {
            for (i, e) in t.events.iter().enumerate() {
                let x = e.t_us * k;
                ch.draw_series(LineSeries::new([(x, 0.0), (x, y_max)], event_color.stroke_width(2)))
                    .map_err(draw_err)?;
                if label {
                    // Stepped down, so the labels of close events do not overlap.
                    let y = y_max * (0.97 - 0.07 * (i % 6) as f64);
                    ch.draw_series(std::iter::once(Text::new(
                        format!("{} {}", e.event, e.target),
                        (x, y),
                        font(12).into_font().color(&event_color).pos(Pos::new(HPos::Left, VPos::Top)),
                    )))
                    .map_err(draw_err)?;
                }
            }
            Ok(())
        };

        // (a) Bottleneck depth and the thresholds.
        {
            let th = t.thresholds.clone().unwrap_or_default();
            let kb = |b: u64| b as f64 / 1e3;
            let peak = t.depth.iter().map(|p| p.v).fold(0.0, f64::max) / 1e3;
            let lines = threshold_lines(&th, t.bottleneck.as_ref().map(|b| b.tc));
            let y_max = lines.iter().map(|l| kb(l.1)).fold(peak, f64::max).max(1.0) * 1.12;
            let caption = match &t.bottleneck {
                Some(b) => format!(
                    "(a) egress queue depth{}: {}:{} queue {} (to {}), peak {:.1} KB",
                    cells_note(th.cell_bytes),
                    b.switch,
                    b.port,
                    b.tc,
                    b.peer,
                    kb(b.peak_depth_bytes)
                ),
                None => "(a) egress queue depth: no egress queue held a byte".to_string(),
            };
            let mut ch = ChartBuilder::on(&a)
                .caption(caption, font(16))
                .margin(6)
                .x_label_area_size(32)
                .y_label_area_size(Y_AREA)
                .build_cartesian_2d(0.0..x_end, 0.0..y_max)
                .map_err(draw_err)?;
            ch.configure_mesh().light_line_style(grid).x_desc(x_desc.as_str()).y_desc("KB").draw().map_err(draw_err)?;
            ch.draw_series(LineSeries::new(t.depth.iter().map(|p| (p.t_us * k, p.v / 1e3)), BLUE.stroke_width(2)))
                .map_err(draw_err)?
                .label("queue depth")
                .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], BLUE.stroke_width(2)));
            if t.thresholds.is_some() {
                for (i, (name, bytes, c)) in lines.into_iter().enumerate() {
                    let y = kb(bytes);
                    let label = format!("{name} {y:.0} KB");
                    ch.draw_series(LineSeries::new([(0.0, y), (x_end, y)], c.stroke_width(1)))
                        .map_err(draw_err)?
                        .label(label.clone())
                        .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], c.stroke_width(1)));
                    // Staggered along the line, so labels of close thresholds do not overlap.
                    ch.draw_series(std::iter::once(Text::new(
                        label,
                        (x_end * (0.005 + 0.15 * i as f64), y),
                        font(12).into_font().color(&c).pos(Pos::new(HPos::Left, VPos::Bottom)),
                    )))
                    .map_err(draw_err)?;
                }
            }
            mark_events(&mut ch, y_max, true)?;
            ch.configure_series_labels()
                .background_style(WHITE.mix(0.85))
                .border_style(BLACK)
                .draw()
                .map_err(draw_err)?;
        }

        // (b) ECN marks (and WRED drops, trims and admission drops) per sample interval.
        {
            let max = t
                .ecn_marks
                .iter()
                .chain(&t.wred_drops)
                .chain(&t.trims)
                .chain(&t.admission_drops)
                .map(|p| p.v)
                .fold(0.0, f64::max)
                .max(1.0)
                * 1.12;
            let caption = format!("(b) ECN CE marks per sample interval ({:.1} µs), all switches", t.interval_us);
            let mut ch = ChartBuilder::on(&b)
                .caption(caption, font(16))
                .margin(6)
                .x_label_area_size(32)
                .y_label_area_size(Y_AREA)
                .build_cartesian_2d(0.0..x_end, 0.0..max)
                .map_err(draw_err)?;
            ch.configure_mesh()
                .light_line_style(grid)
                .x_desc(x_desc.as_str())
                .y_desc("packets")
                .draw()
                .map_err(draw_err)?;
            let red = RGBColor(200, 0, 0);
            ch.draw_series(LineSeries::new(t.ecn_marks.iter().map(|p| (p.t_us * k, p.v)), red.stroke_width(2)))
                .map_err(draw_err)?
                .label("ECN marks")
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], red.stroke_width(2)));
            if t.wred_drops.iter().any(|p| p.v > 0.0) {
                ch.draw_series(LineSeries::new(t.wred_drops.iter().map(|p| (p.t_us * k, p.v)), BLACK.stroke_width(1)))
                    .map_err(draw_err)?
                    .label("WRED drops")
                    .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], BLACK.stroke_width(1)));
            }
            if t.trims.iter().any(|p| p.v > 0.0) {
                let blue = RGBColor(0, 90, 200);
                ch.draw_series(LineSeries::new(t.trims.iter().map(|p| (p.t_us * k, p.v)), blue.stroke_width(2)))
                    .map_err(draw_err)?
                    .label("trims")
                    .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], blue.stroke_width(2)));
            }
            if t.admission_drops.iter().any(|p| p.v > 0.0) {
                let grey = RGBColor(120, 120, 120);
                ch.draw_series(LineSeries::new(
                    t.admission_drops.iter().map(|p| (p.t_us * k, p.v)),
                    grey.stroke_width(1),
                ))
                .map_err(draw_err)?
                .label("admission drops")
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], grey.stroke_width(1)));
            }
            mark_events(&mut ch, max, false)?;
            ch.configure_series_labels()
                .background_style(WHITE.mix(0.85))
                .border_style(BLACK)
                .draw()
                .map_err(draw_err)?;
        }

        // (c) CNPs per sender and (d) DCQCN rate per sender.
        let per_sender = |area: &DrawingArea<SVGBackend, plotters::coord::Shift>,
                          caption: String,
                          y_desc: &str,
                          series: &[Series],
                          scale: f64|
         -> Result<(), TimelineError> {
            let max = series.iter().flat_map(|s| &s.points).map(|p| p.v * scale).fold(0.0, f64::max).max(1e-9) * 1.12;
            let caption = if series.is_empty() { format!("{caption}: no sender answered") } else { caption };
            let mut ch = ChartBuilder::on(area)
                .caption(caption, font(16))
                .margin(6)
                .x_label_area_size(32)
                .y_label_area_size(Y_AREA)
                .build_cartesian_2d(0.0..x_end, 0.0..max)
                .map_err(draw_err)?;
            ch.configure_mesh()
                .light_line_style(grid)
                .x_desc(x_desc.as_str())
                .y_desc(y_desc)
                .draw()
                .map_err(draw_err)?;
            for (i, s) in series.iter().enumerate() {
                let c = color(i);
                ch.draw_series(LineSeries::new(s.points.iter().map(|p| (p.t_us * k, p.v * scale)), c.stroke_width(2)))
                    .map_err(draw_err)?
                    .label(s.name.clone())
                    .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], c.stroke_width(2)));
            }
            mark_events(&mut ch, max, false)?;
            if !series.is_empty() {
                ch.configure_series_labels()
                    .background_style(WHITE.mix(0.85))
                    .border_style(BLACK)
                    .draw()
                    .map_err(draw_err)?;
            }
            Ok(())
        };
        per_sender(
            &c,
            format!("(c) CNPs received per sender per sample interval ({:.1} µs)", t.interval_us),
            "CNPs",
            &t.cnps,
            1.0,
        )?;
        per_sender(&dd, "(d) DCQCN rate Rc per sender (emulated)".into(), "Gbit/s", &t.rates, 1e-9)?;

        // (e) PFC pause lanes.
        {
            let n = lanes as i32;
            let caption = if t.pause_lanes.is_empty() {
                "(e) PFC pause: nothing was paused".to_string()
            } else {
                "(e) PFC pause (paused by the peer) per hop".to_string()
            };
            let names: Vec<String> = t.pause_lanes.iter().map(|l| l.name.clone()).collect();
            let fmt = |v: &SegmentValue<i32>| match v {
                SegmentValue::CenterOf(i) => names.get(*i as usize).cloned().unwrap_or_default(),
                _ => String::new(),
            };
            let mut ch = ChartBuilder::on(&e)
                .caption(caption, font(16))
                .margin(6)
                .x_label_area_size(32)
                .y_label_area_size(Y_AREA)
                .build_cartesian_2d(0.0..x_end, (0..n - 1).into_segmented())
                .map_err(draw_err)?;
            ch.configure_mesh()
                .light_line_style(grid)
                .x_desc(x_desc.as_str())
                .y_labels(lanes)
                .y_label_formatter(&fmt)
                .draw()
                .map_err(draw_err)?;
            for (i, l) in t.pause_lanes.iter().enumerate() {
                let c = color(i);
                let y0 = SegmentValue::Exact(i as i32);
                let y1 = SegmentValue::Exact(i as i32 + 1);
                ch.draw_series(l.intervals.iter().map(|[s, e]| {
                    // At least a pixel wide, so a short pause stays visible.
                    let e = (e * k).max(s * k + x_end / f64::from(W));
                    Rectangle::new([(s * k, y0.clone()), (e, y1.clone())], c.mix(0.8).filled())
                }))
                .map_err(draw_err)?;
            }
        }
        root.present().map_err(draw_err)?;
    }
    Ok(svg)
}

/// `--timeline` for one `rocefab run`: where the daemons answer and what to write.
pub struct RunTimeline {
    fabric: String,
    collective: String,
    outputs: Vec<PathBuf>,
    port: Option<PortChoice>,
    interval: Duration,
    switches: Vec<Source>,
    hosts: Vec<Source>,
}

/// A running [`RunTimeline`].
pub struct Recording {
    plan: RunTimeline,
    sampler: Sampler,
}

impl RunTimeline {
    /// `None` without outputs. Finds the switch daemons in the fabric's run directory (and checks
    /// `port` against their configs), takes each host's address from its job (`metrics_listen`),
    /// and asks every job for a report snapshot every `interval` (at most the default 100 ms).
    pub fn prepare(
        fabric: &str,
        collective: &str,
        outputs: &[PathBuf],
        port: Option<&str>,
        interval: Duration,
        hosts: &[String],
        jobs: &mut [Job],
    ) -> anyhow::Result<Option<RunTimeline>> {
        if outputs.is_empty() {
            return Ok(None);
        }
        let port: Option<PortChoice> = port.map(str::parse::<PortChoice>).transpose()?;
        let st = State::load(fabric)
            .with_context(|| format!("fabric {fabric:?} is not up (no {})", rundir::state_path(fabric).display()))?;
        let mut switches = Vec::new();
        let mut known = Vec::new();
        let mut found = port.is_none();
        for d in st.daemons.iter().filter(|d| !d.is_host()) {
            switches.push(Source { name: d.node().to_string(), url: d.url("/sample") });
            if let Some(c) = &port {
                let cfg = SwitchConfig::load(&d.config)
                    .with_context(|| format!("reading the config of switch {}", d.node()))?;
                for p in &cfg.ports {
                    found |= cfg.name == c.switch && p.name == c.port;
                    known.push(format!("{}:{}", cfg.name, p.name));
                }
            }
        }
        if let (Some(c), false) = (&port, found) {
            return Err(TimelineError::UnknownPort {
                given: format!("{}:{}", c.switch, c.port),
                known: known.join(", "),
            }
            .into());
        }
        let interval = interval.max(Duration::from_millis(1));
        let snapshot_ms = u64::try_from(interval.as_millis())
            .unwrap_or(u64::MAX)
            .clamp(1, rocefab_contracts::job::DEFAULT_SNAPSHOT_INTERVAL_MS);
        let mut host_sources = Vec::new();
        for (name, job) in hosts.iter().zip(jobs.iter_mut()) {
            job.snapshot_interval_ms = snapshot_ms;
            match job.metrics_listen {
                Some(a) => host_sources.push(Source { name: name.clone(), url: format!("http://{a}/sample") }),
                None => anyhow::bail!("--timeline: host {name} serves no metrics (its job has no metrics_listen)"),
            }
        }
        Ok(Some(RunTimeline {
            fabric: fabric.into(),
            collective: collective.into(),
            outputs: outputs.to_vec(),
            port,
            interval,
            switches,
            hosts: host_sources,
        }))
    }

    /// Starts sampling (call right before the job's start); it runs at most `limit`.
    pub fn start(self, limit: Duration) -> anyhow::Result<Recording> {
        let sampler = Sampler::start(self.switches.clone(), self.hosts.clone(), self.interval, limit)
            .context("starting the timeline sampler")?;
        Ok(Recording { plan: self, sampler })
    }
}

impl Recording {
    /// Stops sampling and writes every output; returns a line per file written (and one per
    /// scrape problem). `job_ns`: the job's completion time (emulated), the window of the
    /// queue averages.
    pub fn finish(self, job_ns: Option<u64>) -> anyhow::Result<Vec<String>> {
        let samples = self.sampler.finish();
        let p = &self.plan;
        let mut t =
            Timeline::build(&samples, &p.fabric, &p.collective, samples.time_dilation(), p.port.as_ref(), job_ns)?;
        t.place_events(&samples, &crate::fabric::events::read_log(&p.fabric).unwrap_or_default());
        let mut lines = Vec::new();
        if samples.failed * 10 > samples.requests {
            lines.push(format!(
                "timeline: warning: {} of {} sample requests got no answer (first: {}); the JSON lists the errors",
                samples.failed,
                samples.requests,
                samples.errors.first().map_or("-", String::as_str)
            ));
        }
        if let Some((b, u)) = t.bottleneck.as_ref().and_then(|b| Some((b, b.utilisation.as_ref()?))) {
            lines.push(format!(
                "timeline: bottleneck {}:{} (to {}) sent {:.1} % of its {} Gbit/s from {:.0} to {:.0} µs, while every sender had data left (emulated)",
                b.switch,
                b.port,
                b.peer,
                u.fraction * 100.0,
                u.line_rate_bps as f64 / 1e9,
                u.from_us,
                u.to_us
            ));
        }
        let file = TimelineFile { timeline: t, samples };
        for out in &p.outputs {
            write_output(out, &file)?;
            lines.push(format!("timeline: wrote {} ({} samples)", out.display(), file.samples.rounds.len()));
        }
        Ok(lines)
    }
}

/// Writes `file` as `.json` or `.svg` by `path`'s extension.
pub fn write_output(path: &Path, file: &TimelineFile) -> anyhow::Result<()> {
    let svg = path.extension().and_then(|e| e.to_str()).is_some_and(|e| e.eq_ignore_ascii_case("svg"));
    let bytes = if svg { render_svg(&file.timeline)?.into_bytes() } else { serde_json::to_vec_pretty(file)? };
    std::fs::write(path, bytes).with_context(|| format!("writing {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rocefab_contracts::host_sample::{NicSample, QpSample};
    use rocefab_contracts::sample::PortSample;

    const MS: u64 = 1_000_000;

    fn thresholds() -> Thresholds {
        Thresholds {
            wred_min_bytes: 150_000,
            wred_max_bytes: 3_000_000,
            wred_queues: 1 << 3,
            xoff_bytes: 3_200_000,
            xon_bytes: 120_000,
            lossless_priorities: 1 << 3,
            cell_bytes: 256,
        }
    }

    fn port(name: &str, peer: &str) -> PortSample {
        PortSample { name: name.into(), peer: peer.into(), ..Default::default() }
    }

    fn switch(name: &str, d: f64, ports: Vec<PortSample>) -> SwitchSample {
        SwitchSample {
            switch: name.into(),
            time_dilation: d,
            thresholds: thresholds(),
            xdp_unread: false,
            clock_ns: 0,
            peak_window: 0,
            ports,
        }
    }

    fn host(qps: Vec<QpSample>, nics: Vec<NicSample>) -> HostSample {
        HostSample { job: "j".into(), elapsed_ns: 0, qps, nics }
    }

    fn qp(qpn: u32, rate: u64, alpha: f64, cnps: u64) -> QpSample {
        QpSample {
            qpn,
            label: format!("rank {qpn} to rank 0"),
            nic: "gpu0".into(),
            sender: true,
            rate_bps: rate,
            alpha,
            cnps_received: cnps,
            ..Default::default()
        }
    }

    /// Four rounds 10 ms apart: rail1's eth1 queue 3 fills to 200 KB and drains, rail1 marks ECN,
    /// host2's QP 0x100 gets CNPs and its rate falls, spine1's eth0 is paused in rounds 1–2 and
    /// host2's NIC in round 2. Rail1's eth0 queue 0 has an old watermark from before the run.
    fn samples(d: f64) -> Samples {
        let depth = [0u64, 120_000, 200_000, 40_000];
        let ecn = [5u64, 5, 25, 40];
        let cnps = [0u64, 2, 6, 7];
        let rate = [1_000_000_000u64, 800_000_000, 500_000_000, 600_000_000];
        let paused = [false, true, true, false];
        let paused_ns = [0u64, 4 * MS, 14 * MS, 16 * MS];
        let rounds = (0..4)
            .map(|i| {
                let t = i as u64 * 10 * MS;
                let mut a = port("eth0", "host1:gpu0");
                a.depth_cell_bytes[0] = 1_000;
                a.peak_depth_cell_bytes[0] = 900_000;
                let mut b = port("eth1", "host2:gpu0");
                // The buffer charges whole cells: 250-byte frames show 250/256 of it as frame
                // bytes. The timeline follows the cells, as WRED and xOFF/xON do.
                b.depth_cell_bytes[3] = depth[i];
                b.peak_depth_cell_bytes[3] = depth[..=i].iter().copied().max().unwrap();
                b.depth_bytes[3] = depth[i] / 256 * 250;
                b.peak_depth_bytes[3] = b.peak_depth_cell_bytes[3] / 256 * 250;
                b.ecn_marked = ecn[i];
                // Queue 0 trims 0, 3, 3, 10 frames in all, of 1, 5, 6, 15 it did not admit.
                b.trimmed[0] = [0u64, 3, 3, 10][i];
                b.admission_dropped[0] = [1u64, 5, 6, 15][i];
                // The depth-time integral (the daemons report it in emulated byte·ns).
                b.depth_area_byte_ns[3] = [0.0, 6e11, 1.6e12, 2.2e12][i] / d;
                let mut s = port("eth0", "rail1:eth2");
                s.pfc_tx_frames[3] = 3 * i as u64;
                s.pause_onsets[3] = i as u64;
                s.paused[3] = paused[i];
                // The daemons report paused time in emulated ns: wall ÷ D.
                s.paused_ns[3] = (paused_ns[i] as f64 / d) as u64;
                s.pfc_rx_frames[3] = i as u64;
                s.ecn_marked = 1;
                let nic = NicSample {
                    name: "gpu0".into(),
                    data_priority: 3,
                    paused: i == 2,
                    paused_ns: if i >= 2 { (3.0 * MS as f64 / d) as u64 } else { 0 },
                    pfc_frames_received: 0,
                };
                Round {
                    t_ns: t,
                    switches: vec![
                        Some(Stamped {
                            t_ns: t + MS,
                            sample: SwitchSample {
                                clock_ns: ((t + MS) as f64 / d) as u64,
                                ..switch("rail1", d, vec![a, b])
                            },
                        }),
                        Some(Stamped {
                            t_ns: t + MS,
                            sample: SwitchSample {
                                clock_ns: ((t + MS) as f64 / d) as u64,
                                ..switch("spine1", d, vec![s])
                            },
                        }),
                    ],
                    hosts: vec![Some(Stamped {
                        t_ns: t + 2 * MS,
                        sample: host(vec![qp(0x100, rate[i], 0.1 * i as f64, cnps[i])], vec![nic]),
                    })],
                }
            })
            .collect();
        Samples {
            interval_ns: 10 * MS,
            switches: vec!["rail1".into(), "spine1".into()],
            hosts: vec!["host2".into()],
            rounds,
            requests: 12,
            failed: 0,
            errors: vec![],
            start_unix_ns: 0,
        }
    }

    #[test]
    fn series_deltas_and_bottleneck_at_d_1() {
        let s = samples(1.0);
        assert_eq!(s.time_dilation(), 1.0);
        let t = Timeline::build(&s, "f", "incast", 1.0, None, None).unwrap();
        let b = t.bottleneck.as_ref().unwrap();
        assert_eq!(
            (b.switch.as_str(), b.port.as_str(), b.peer.as_str(), b.tc, b.peak_depth_bytes),
            ("rail1", "eth1", "host2:gpu0", 3, 200_000)
        );
        assert_eq!(t.thresholds, Some(thresholds()));
        assert_eq!(
            t.depth.iter().map(|p| (p.t_us, p.v)).collect::<Vec<_>>(),
            vec![(1e3, 0.0), (11e3, 120e3), (21e3, 200e3), (31e3, 40e3)]
        );
        // ECN: Σ over switches of the per-round delta, at the round's time.
        assert_eq!(
            t.ecn_marks.iter().map(|p| (p.t_us, p.v)).collect::<Vec<_>>(),
            vec![(10e3, 0.0), (20e3, 20.0), (30e3, 15.0)]
        );
        assert!(t.wred_drops.iter().all(|p| p.v == 0.0));
        // Trims beside the drops: per round, trimmed frames, and the admission drops not trimmed.
        assert_eq!(t.trims.iter().map(|p| p.v).collect::<Vec<_>>(), vec![3.0, 0.0, 7.0]);
        assert_eq!(t.admission_drops.iter().map(|p| p.v).collect::<Vec<_>>(), vec![1.0, 1.0, 2.0]);
        assert_eq!(t.cnps.len(), 1);
        assert_eq!(t.cnps[0].name, "rank 256 to rank 0 (host2 qp 0x100)");
        assert_eq!(t.cnps[0].points.iter().map(|p| p.v).collect::<Vec<_>>(), vec![2.0, 4.0, 1.0]);
        assert_eq!(t.rates[0].points[2], Point { t_us: 22e3, v: 5e8 });
        assert_eq!(t.alpha[0].points[3].v, 0.30000000000000004);
        assert_eq!((t.interval_us, t.end_us), (10e3, 32e3));
        // Average depth over the run: 2.2e12 byte·ns over 30 ms; the peak beside it.
        let avg = 2.2e12 / 30e6;
        assert!((b.average_depth_bytes.unwrap() - avg).abs() < 1e-6, "{:?}", b.average_depth_bytes);
        let q = t.queues.iter().find(|q| q.switch == "rail1" && q.port == "eth1" && q.tc == 3).unwrap();
        assert_eq!((q.peak_depth_bytes, q.peak_known), (200_000, true));
        // Pause onsets apart from PFC frames, per ingress port priority.
        assert_eq!(t.pfc.len(), 1);
        assert_eq!(
            (t.pfc[0].switch.as_str(), t.pfc[0].port.as_str(), t.pfc[0].pause_onsets, t.pfc[0].pfc_frames),
            ("spine1", "eth0", 3, 9)
        );
        // The same in emulated time at D 1000: the same average, the same counts.
        let t2 = Timeline::build(&samples(1000.0), "f", "incast", 1000.0, None, None).unwrap();
        let avg2 = t2.bottleneck.unwrap().average_depth_bytes.unwrap();
        assert!((avg2 - avg).abs() / avg < 1e-6, "{avg2} vs {avg}");
        // Over a job of 22 ms (its completion time), as the simulators average over [0, JCT]:
        // the same area over the shorter window, for the bottleneck and its queue alike.
        let t3 = Timeline::build(&samples(1.0), "f", "incast", 1.0, None, Some(22_000_000)).unwrap();
        let avg3 = 2.2e12 / 22e6;
        assert!((t3.bottleneck.unwrap().average_depth_bytes.unwrap() - avg3).abs() < 1e-6);
        let q3 = t3.queues.iter().find(|q| q.switch == "rail1" && q.port == "eth1" && q.tc == 3).unwrap();
        assert!((q3.average_depth_bytes - avg3).abs() < 1e-6);
    }

    /// Six rounds 10 ms (wall) apart at D 1000 (10 µs emulated), one bottleneck port at
    /// 1 Gbit/s emulated: LLDP only in round 0, then 1000-byte frames; host2's QP completes in
    /// round 4, host3's in round 5.
    fn utilisation_samples(frames_per_round: [u64; 6]) -> Samples {
        let d = 1000.0;
        let mut tx = 100u64;
        let mut txp = 1u64;
        let acked2 = [0u64, 10, 20, 30, 40, 40];
        let acked3 = [0u64, 10, 20, 30, 35, 50];
        let rounds = (0..6)
            .map(|i| {
                let t = i as u64 * 10 * MS;
                tx += frames_per_round[i] * 1000;
                txp += frames_per_round[i];
                let mut p = port("eth1", "host1:gpu0");
                p.line_rate_bps = 1_000_000_000;
                p.tx_bytes[3] = tx - 100;
                p.tx_bytes[0] = 100;
                p.tx_packets[3] = txp - 1;
                p.tx_packets[0] = 1;
                let q = |qpn: u32, acked: u64| QpSample { acked_bytes: acked, ..qp(qpn, 1, 0.0, 0) };
                Round {
                    t_ns: t,
                    switches: vec![Some(Stamped { t_ns: t, sample: switch("rail1", d, vec![p]) })],
                    hosts: vec![
                        Some(Stamped { t_ns: t, sample: host(vec![q(0x100, acked2[i])], vec![]) }),
                        Some(Stamped { t_ns: t, sample: host(vec![q(0x200, acked3[i])], vec![]) }),
                    ],
                }
            })
            .collect();
        Samples {
            interval_ns: 10 * MS,
            switches: vec!["rail1".into()],
            hosts: vec!["host2".into(), "host3".into()],
            rounds,
            requests: 18,
            failed: 0,
            errors: vec![],
            start_unix_ns: 0,
        }
    }

    #[test]
    fn utilisation_counts_wire_bytes_while_every_sender_has_data_left() {
        let port = PortChoice { switch: "rail1".into(), port: "eth1".into() };
        let util = |frames| {
            Timeline::build(&utilisation_samples(frames), "f", "incast", 1000.0, Some(&port), None)
                .unwrap()
                .bottleneck
                .unwrap()
                .utilisation
        };
        // Traffic shows from round 1; host2 is done in round 4, so the window ends at round 3:
        // 20 µs at 1 Gbit/s, two frames of 1000 + 24 wire bytes.
        let u = util([0, 1, 1, 1, 1, 0]).expect("a window");
        assert_eq!((u.from_us, u.to_us, u.line_rate_bps), (10.0, 30.0, 1_000_000_000));
        assert!((u.fraction - 2.0 * 1024.0 * 8.0 / 20e3).abs() < 1e-9, "{}", u.fraction);
        // An idle round inside the window lowers it.
        let u = util([0, 1, 0, 1, 1, 0]).expect("a window");
        assert!((u.fraction - 1024.0 * 8.0 / 20e3).abs() < 1e-9, "{}", u.fraction);
        // No traffic before the first completion: no window.
        assert_eq!(util([0, 0, 0, 0, 1, 1]), None);
    }

    #[test]
    fn dilation_scales_time_and_rates_not_bytes_or_counts() {
        let t1 = Timeline::build(&samples(1.0), "f", "incast", 1.0, None, None).unwrap();
        let s = samples(1000.0);
        assert_eq!(s.time_dilation(), 1000.0);
        let t = Timeline::build(&s, "f", "incast", s.time_dilation(), None, None).unwrap();
        assert_eq!(t.time_dilation, 1000.0);
        assert_eq!(t.depth[2], Point { t_us: 21.0, v: 200e3 }, "21 ms of wall time is 21 µs emulated; bytes stay");
        assert_eq!(
            t.rates[0].points[2],
            Point { t_us: 22.0, v: 5e8 },
            "hostd's rates are emulated already: not scaled again"
        );
        assert_eq!(
            t.ecn_marks.iter().map(|p| p.v).collect::<Vec<_>>(),
            t1.ecn_marks.iter().map(|p| p.v).collect::<Vec<_>>()
        );
        assert_eq!(t.cnps[0].points.iter().map(|p| p.v).collect::<Vec<_>>(), vec![2.0, 4.0, 1.0]);
        assert_eq!((t.interval_us, t.end_us), (10.0, 32.0));
        assert_eq!(t.pause_lanes[0].paused_us, 16.0);
        // Not finite or not positive: real time.
        assert_eq!(Timeline::build(&s, "f", "incast", 0.0, None, None).unwrap().time_dilation, 1.0);
    }

    #[test]
    fn pause_lanes_cover_paused_intervals_only() {
        let t = Timeline::build(&samples(1.0), "f", "incast", 1.0, None, None).unwrap();
        let names: Vec<&str> = t.pause_lanes.iter().map(|l| l.name.as_str()).collect();
        assert_eq!(names, ["spine1:eth0 prio 3", "host2:gpu0"], "lanes only where something was paused");
        let sp = &t.pause_lanes[0];
        assert_eq!(sp.peer, "rail1:eth2");
        // Samples at 1, 11, 21, 31 ms: paused from 4 ms before the 11 ms sample, still paused at
        // 21 ms, ended 2 ms later (the paused time grew by 2 ms up to the next sample).
        assert_eq!(sp.intervals, vec![[7e3, 23e3]]);
        assert_eq!((sp.paused_us, sp.pfc_frames), (16e3, 3));
        let h = &t.pause_lanes[1];
        assert_eq!(h.peer, "rail1:eth1", "the switch port whose peer is host2:gpu0");
        // Host samples at 2, 12, 22, 32 ms: paused for 3 ms before 22 ms, not after.
        assert_eq!(h.intervals, vec![[19e3, 22e3]]);
    }

    #[test]
    fn pause_intervals_of_edge_cases() {
        assert!(pause_intervals(&vec![(0, false, 0, 0), (10, false, 0, 0)]).is_empty());
        // Paused at the only sample: a point interval.
        assert_eq!(pause_intervals(&vec![(5, true, 0, 0)]), vec![(5, 5)]);
        // A short pause between samples: only the paused time grew.
        assert_eq!(pause_intervals(&vec![(0, false, 0, 0), (10, false, 3, 1), (20, false, 3, 1)]), vec![(7, 10)]);
        // Two separate pauses.
        let two = vec![
            (0, false, 0, 0),
            (10, true, 2, 1),
            (20, false, 4, 2),
            (30, false, 4, 2),
            (40, true, 1_000, 3),
            (50, false, 1_000, 3),
        ];
        assert_eq!(pause_intervals(&two), vec![(8, 12), (30, 40)]);
    }

    #[test]
    fn chosen_port_and_unknown_port() {
        let s = samples(1.0);
        let c: PortChoice = "rail1:eth0".parse().unwrap();
        let t = Timeline::build(&s, "f", "incast", 1.0, Some(&c), None).unwrap();
        let b = t.bottleneck.unwrap();
        // The watermark of queue 0 (900 KB) predates the run: the run's peak is 1 KB.
        assert_eq!((b.port.as_str(), b.tc, b.peak_depth_bytes), ("eth0", 0, 1_000));
        let c: PortChoice = "spine1:eth0".parse().unwrap();
        let b = Timeline::build(&s, "f", "incast", 1.0, Some(&c), None).unwrap().bottleneck.unwrap();
        assert_eq!(
            (b.switch.as_str(), b.tc, b.peak_depth_bytes),
            ("spine1", 3, 0),
            "an empty port shows its WRED queue"
        );
        let c: PortChoice = "rail1:eth9".parse().unwrap();
        let e = Timeline::build(&s, "f", "incast", 1.0, Some(&c), None).unwrap_err().to_string();
        assert!(e.contains("rail1:eth9") && e.contains("known: rail1:eth0, rail1:eth1, spine1:eth0"), "{e}");
        assert!("rail1".parse::<PortChoice>().unwrap_err().to_string().contains("expected switch:port"));
    }

    #[test]
    fn watermark_catches_a_peak_between_samples() {
        let mut s = samples(1.0);
        // A 2.5 MB burst between the second and third sample, seen only by the watermark.
        for r in &mut s.rounds[2..] {
            if let Some(Some(x)) = r.switches.get_mut(1) {
                x.sample.ports[0].peak_depth_cell_bytes[3] = 2_500_000;
            }
        }
        let b = Timeline::build(&s, "f", "incast", 1.0, None, None).unwrap().bottleneck.unwrap();
        assert_eq!((b.switch.as_str(), b.port.as_str(), b.peak_depth_bytes), ("spine1", "eth0", 2_500_000));
    }

    #[test]
    fn missing_answers_are_skipped() {
        let mut s = samples(1.0);
        s.rounds[1].switches[0] = None;
        s.rounds[2].hosts[0] = None;
        let t = Timeline::build(&s, "f", "incast", 1.0, None, None).unwrap();
        assert_eq!(t.depth.len(), 3);
        // Round 1 → 2 misses rail1: only spine1's (zero) delta counts there.
        assert_eq!(t.ecn_marks.iter().map(|p| p.v).collect::<Vec<_>>(), vec![0.0, 0.0, 15.0]);
        assert_eq!(t.cnps[0].points.iter().map(|p| p.v).collect::<Vec<_>>(), vec![2.0, 5.0]);
        let empty = Timeline::build(&Samples::default(), "f", "incast", 1.0, None, None).unwrap();
        assert!(empty.bottleneck.is_none() && empty.depth.is_empty() && empty.pause_lanes.is_empty());
        render_svg(&empty).unwrap();
    }

    /// What SVG text looks like for `s` (plotters escapes markup characters).
    fn escaped(s: &str) -> String {
        s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")
    }

    /// Issue 38: a PFC-only fabric (WRED off) drew the default WRED lines (150 KB / 3 MB).
    #[test]
    fn a_fabric_without_wred_draws_no_wred_lines() {
        let mut s = samples(1000.0);
        for r in &mut s.rounds {
            for x in r.switches.iter_mut().flatten() {
                x.sample.thresholds.wred_queues = 0;
            }
        }
        let t = Timeline::build(&s, "pod1", "incast", 1000.0, None, None).unwrap();
        let svg = render_svg(&t).unwrap();
        assert!(!svg.contains("WRED min") && !svg.contains("WRED max"), "WRED lines on a fabric without WRED");
        assert!(svg.contains(&escaped("xOFF 3200 KB")) && svg.contains(&escaped("xON 120 KB")));
        // WRED on another queue than the bottleneck's: not drawn either; on it: drawn.
        let th = t.thresholds.clone().unwrap();
        let names = |th: &Thresholds, tc| threshold_lines(th, tc).iter().map(|l| l.0).collect::<Vec<_>>();
        assert_eq!(names(&Thresholds { wred_queues: 1 << 0, ..th.clone() }, Some(3)), ["xOFF", "xON"]);
        assert_eq!(
            names(&Thresholds { wred_queues: 1 << 3, ..th.clone() }, Some(3)),
            ["WRED min", "WRED max", "xOFF", "xON"]
        );
        assert_eq!(names(&Thresholds { wred_queues: 0, lossless_priorities: 0, ..th }, None), Vec::<&str>::new());
    }

    #[test]
    fn svg_names_every_series_and_threshold() {
        let t = Timeline::build(&samples(1000.0), "pod1", "incast", 1000.0, None, None).unwrap();
        let svg = render_svg(&t).unwrap();
        assert!(svg.starts_with("<svg"), "{}", &svg[..100]);
        for want in [
            "DCQCN timeline: incast on fabric pod1, time dilation D = 1000",
            "rail1:eth1 queue 3",
            "queue depth in 256-byte cells",
            "WRED min 150 KB",
            "WRED max 3000 KB",
            "xOFF 3200 KB",
            "xON 120 KB",
            "ECN marks",
            "rank 256 to rank 0 (host2 qp 0x100)",
            "spine1:eth0 prio 3",
            "host2:gpu0",
            "emulated time (µs)",
            "Gbit/s",
        ] {
            assert!(svg.contains(&escaped(want)), "SVG lacks {want:?}");
        }
        assert!(svg.contains("<text"), "text is SVG text, no font needed");
        // Long runs are drawn in ms.
        let t = Timeline::build(&samples(1.0), "pod1", "incast", 1.0, None, None).unwrap();
        assert!(render_svg(&t).unwrap().contains("emulated time (ms)"));
    }

    #[test]
    fn events_of_the_run_are_placed_in_emulated_time_and_drawn() {
        let mut s = samples(1000.0);
        s.start_unix_ns = 5_000_000_000;
        let mut t = Timeline::build(&s, "pod1", "allreduce", 1000.0, None, None).unwrap();
        let wall_end = s.start_unix_ns + (t.end_us * 1000.0 * 1e3) as u64;
        let ev = |wall: u64, what: &str| crate::fabric::events::Event {
            emulated_ns: 0,
            wall_unix_ns: wall,
            event: what.into(),
            target: "rail1:eth3 -- spine1:eth1".into(),
            detail: String::new(),
        };
        let log = [
            ev(s.start_unix_ns - 1, "before"),
            ev(s.start_unix_ns + 2_000_000, "link down"),
            ev(wall_end, "link up"),
            ev(wall_end + 1, "after"),
        ];
        t.place_events(&s, &log);
        let kinds: Vec<&str> = t.events.iter().map(|e| e.event.as_str()).collect();
        assert_eq!(kinds, ["link down", "link up"], "only the run's events");
        // 2 ms of wall clock at D = 1000 are 2 µs emulated.
        assert!((t.events[0].t_us - 2.0).abs() < 1e-9, "{}", t.events[0].t_us);
        let svg = render_svg(&t).unwrap();
        assert!(svg.contains(&escaped("link down rail1:eth3 -- spine1:eth1")), "the event is labelled");
        assert!(svg.contains(&escaped("link up rail1:eth3 -- spine1:eth1")));
    }

    #[test]
    fn json_round_trip() {
        let s = samples(1000.0);
        let file =
            TimelineFile { timeline: Timeline::build(&s, "f", "alltoall", 1000.0, None, None).unwrap(), samples: s };
        let text = serde_json::to_string_pretty(&file).unwrap();
        assert_eq!(serde_json::from_str::<TimelineFile>(&text).unwrap(), file);
        for key in [
            "\"ecn_marks\"",
            "\"pause_lanes\"",
            "\"rates\"",
            "\"bottleneck\"",
            "\"rounds\"",
            "\"time_dilation\": 1000.0",
        ] {
            assert!(text.contains(key), "{key}");
        }
    }

    #[test]
    fn output_extension_is_checked() {
        assert_eq!(parse_output("out.svg"), Ok(PathBuf::from("out.svg")));
        assert_eq!(parse_output("dir/t.JSON"), Ok(PathBuf::from("dir/t.JSON")));
        let e = parse_output("out.png").unwrap_err();
        assert!(e.contains("--timeline out.png") && e.contains(".svg") && e.contains(".json"), "{e}");
        assert!(parse_output("out").is_err());
    }

    #[test]
    fn thinning_keeps_every_other_round() {
        let mut r: Vec<Round> = (0..6).map(|i| Round { t_ns: i, ..Default::default() }).collect();
        thin(&mut r);
        assert_eq!(r.iter().map(|r| r.t_ns).collect::<Vec<_>>(), vec![0, 2, 4]);
    }

    #[test]
    fn sampler_polls_until_finished() {
        use std::io::{Read, Write};
        // A one-answer-per-connection server standing in for a switch daemon; the sampler's
        // limit bounds the test if finish were never reached.
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}/sample", l.local_addr().unwrap());
        let body = serde_json::to_string(&switch("rail1", 1.0, vec![port("eth0", "x")])).unwrap();
        let (served_tx, served_rx) = mpsc::channel();
        std::thread::spawn(move || {
            for c in l.incoming().take(3) {
                let mut c = c.unwrap();
                // The whole request (it may come in pieces): closing with unread bytes would
                // reset the connection.
                let mut req = Vec::new();
                let mut buf = [0u8; 1024];
                while !req.ends_with(b"\r\n\r\n") {
                    match c.read(&mut buf) {
                        Ok(0) | Err(_) => break,
                        Ok(n) => req.extend_from_slice(&buf[..n]),
                    }
                }
                let _ = write!(c, "HTTP/1.0 200 OK\r\nContent-Length: {}\r\n\r\n{body}", body.len());
                drop(c);
                let _ = served_tx.send(());
            }
        });
        let hosts = vec![Source { name: "host1".into(), url: "http://127.0.0.1:1/sample".into() }];
        // A long request timeout: a loaded machine must not turn a slow answer into a miss.
        let switches = vec![Source { name: "rail1".into(), url }];
        let s = Sampler::start_with(
            switches,
            hosts,
            Duration::from_millis(1),
            Duration::from_secs(30),
            Duration::from_secs(10),
        )
        .unwrap();
        for _ in 0..3 {
            served_rx.recv_timeout(Duration::from_secs(10)).unwrap();
        }
        let got = s.finish();
        assert!(got.rounds.len() >= 3, "{}", got.rounds.len());
        assert!(got.rounds.iter().take(3).all(|r| r.switches[0].as_ref().is_some_and(|x| x.sample.switch == "rail1")));
        assert!(got.rounds.iter().all(|r| r.hosts[0].is_none()));
        assert!(got.errors.iter().any(|e| e.starts_with("host1: ")), "{:?}", got.errors);
        assert_eq!(got.requests, 2 * got.rounds.len() as u64);
        assert!(got.failed >= got.rounds.len() as u64, "every host request failed");
        assert_eq!(
            got.errors.len(),
            got.errors.iter().collect::<std::collections::BTreeSet<_>>().len(),
            "errors are distinct"
        );
        for w in got.rounds.windows(2) {
            assert!(w[0].t_ns <= w[1].t_ns);
        }
    }
}
