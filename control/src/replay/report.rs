//! What `rocefab replay` reports ([`Report`], text or `--json`), in emulated time: frames and
//! bytes sent, rate, the timing error at the sender and at the receivers, the frames per traffic
//! class at the first switch ([`Classifier`]), the VLAN tags stripped, the ICRCs that were bad in
//! the capture, the padded and the skipped frames, and the warnings.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::net::IpAddr;
use std::path::{Path, PathBuf};

use rocefab_contracts::time::Dilation;
use serde::Serialize;

use super::classify::VlanTag;
use super::mapping::{switch_of, MapEntry};
use super::pacer::{SendLog, TimingError};
use super::prepare::{Outgoing, Prepared, SkipCount};
use super::schedule::{Pace, Schedule};
use crate::plan::Plan;
use crate::text::plural;
use crate::units::fmt_ns;

/// The timing part of the report, in emulated ns.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TimingReport {
    pub gaps: u64,
    pub mean_scheduled_gap_ns: f64,
    pub mean_abs_error_ns: f64,
    /// Of the mean scheduled gap; `None` at top speed (nothing to be late against).
    pub mean_abs_error_pct: Option<f64>,
    pub max_abs_error_ns: u64,
}

impl TimingReport {
    /// Wall-clock timing errors as the report gives them, in emulated time at `dilation`;
    /// `None` with fewer than two frames (no gap).
    pub(crate) fn emulated(t: &TimingError, dilation: Dilation) -> Option<TimingReport> {
        let emu = |wall_ns: f64| wall_ns / dilation.factor();
        Some(TimingReport {
            gaps: t.gaps,
            mean_scheduled_gap_ns: emu(t.mean_scheduled_gap_ns()?),
            mean_abs_error_ns: emu(t.mean_abs_error_ns()?),
            mean_abs_error_pct: t.mean_abs_error_pct(),
            max_abs_error_ns: dilation.to_emulated_ns(t.max_abs_error_ns),
        })
    }
}

/// How the first switch classifies frames: what the per-class counts are made with.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Classifier {
    /// The rail switch the `--from` NIC is cabled to.
    pub switch: String,
    /// DSCP → traffic class (queue and PFC priority), 64 entries.
    #[serde(skip)]
    pub dscp_to_tc: Vec<u8>,
    /// Bit p: priority p is lossless (PFC).
    pub lossless_priorities: u8,
}

impl Classifier {
    /// The traffic class of `dscp` (0 outside the map).
    pub fn tc(&self, dscp: u8) -> u8 {
        self.dscp_to_tc.get(usize::from(dscp)).copied().unwrap_or(0)
    }
    pub fn is_lossless(&self, tc: u8) -> bool {
        tc < 8 && self.lossless_priorities & (1 << tc) != 0
    }
}

/// The first switch's classifier for frames from `from` (`host:nic`).
pub fn classifier(plan: &Plan, from: &str) -> Classifier {
    let (host, nic) = from.split_once(':').unwrap_or((from, ""));
    let sw = switch_of(plan, host, nic).and_then(|(s, _)| plan.switch(&s).cloned());
    match sw {
        Some(s) => Classifier {
            switch: s.name.clone(),
            dscp_to_tc: s.config.dscp_to_tc.clone(),
            lossless_priorities: s.config.qos.lossless_priorities,
        },
        None => Classifier { switch: "?".into(), dscp_to_tc: vec![0; 64], lossless_priorities: 0 },
    }
}

/// Frames of one traffic class (queue and PFC priority) at the first switch.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ClassCount {
    pub tc: u8,
    pub lossless: bool,
    /// Frames of the schedule (every loop) in this class.
    pub frames: u64,
    /// The DSCPs of those frames.
    pub dscps: Vec<u8>,
    /// The DSCPs the fabric maps to this class.
    pub fabric_dscps: Vec<u8>,
    /// Frames the first switch enqueued in this class during the replay, on every port but the
    /// one to the `--from` NIC (its `rocefab_queue_enqueued_packets_total`; all traffic of the
    /// switch, so frames it sends itself count too). `None` in a dry run.
    pub enqueued_at_switch: Option<u64>,
}

/// Frames whose VLAN tag was stripped, per tag and the class they took instead.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct VlanCount {
    pub vid: u16,
    pub pcp: u8,
    pub tags: u8,
    /// The frames' DSCP and the traffic class (priority) it gives them on the fabric.
    pub dscp: u8,
    pub tc: u8,
    pub frames: u64,
}

/// Frames per traffic class (every class with frames, and every lossless class).
pub fn classes(frames: &[Outgoing], loops: u32, c: &Classifier) -> Vec<ClassCount> {
    let mut v: Vec<ClassCount> = Vec::new();
    for tc in 0..8u8 {
        let mine: Vec<&Outgoing> = frames.iter().filter(|f| c.tc(f.dscp) == tc).collect();
        if mine.is_empty() && !c.is_lossless(tc) {
            continue;
        }
        let mut dscps: Vec<u8> = mine.iter().map(|f| f.dscp).collect();
        dscps.sort_unstable();
        dscps.dedup();
        let fabric_dscps = (0..64u8).filter(|&d| c.tc(d) == tc).collect();
        v.push(ClassCount {
            tc,
            lossless: c.is_lossless(tc),
            frames: mine.len() as u64 * u64::from(loops),
            dscps,
            fabric_dscps,
            enqueued_at_switch: None,
        });
    }
    v
}

/// Per queue (0..=7), the sum of `rocefab_queue_enqueued_packets_total` over every port but
/// `except` in a Prometheus text scrape.
pub fn enqueued_per_queue(text: &str, except: &str) -> [u64; 8] {
    let mut q = [0u64; 8];
    for s in rocefab_contracts::promtext::samples(text) {
        if s.name != "rocefab_queue_enqueued_packets_total" || s.label("port").as_deref() == Some(except) {
            continue;
        }
        if let Some(i) = s.label("queue").and_then(|v| v.parse::<usize>().ok()).filter(|&i| i < 8) {
            q[i] += s.value as u64;
        }
    }
    q
}

/// Frames whose VLAN tag was stripped, by (tag, DSCP).
pub fn vlan_counts(frames: &[Outgoing], loops: u32, c: &Classifier) -> Vec<VlanCount> {
    let mut m: BTreeMap<(VlanTag, u8), u64> = BTreeMap::new();
    for f in frames {
        if let Some(t) = f.vlan {
            *m.entry((t, f.dscp)).or_default() += u64::from(loops);
        }
    }
    m.into_iter()
        .map(|((t, dscp), frames)| VlanCount { vid: t.vid, pcp: t.pcp, tags: t.tags, dscp, tc: c.tc(dscp), frames })
        .collect()
}

/// The timing at the destination NICs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ReceiverReport {
    /// The NICs captured (`host2:gpu1`).
    pub ports: Vec<String>,
    /// Frames sent that were expected there, and those that arrived (matched by opcode, QP, PSN).
    pub frames_expected: u64,
    pub frames_received: u64,
    /// Arrival gaps against the schedule's gaps, emulated; `None` with fewer than two arrivals
    /// at one destination.
    pub timing: Option<TimingReport>,
}

/// What `rocefab replay` reports (`--json` prints it as is).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Report {
    pub fabric: String,
    pub file: PathBuf,
    pub from: String,
    pub sender: IpAddr,
    pub mapping: Vec<MapEntry>,
    pub dry_run: bool,
    pub pacing: String,
    pub loops: u32,
    pub frames_in_capture: usize,
    /// Frames of one loop that are injected.
    pub frames_to_inject: usize,
    /// The fabric's time dilation D: every time below is emulated (wall clock / D) and every
    /// rate per emulated second, except `wall_duration_s`.
    pub time_dilation: f64,
    pub scheduled_duration_s: f64,
    pub sent: u64,
    pub send_errors: u64,
    pub first_send_error: Option<String>,
    pub bytes: u64,
    /// From the first send to the end of the last.
    pub duration_s: f64,
    /// `duration_s` on the wall clock (× D).
    pub wall_duration_s: f64,
    /// Frames after the first per second of `duration_s` (so `--pps N` reports N).
    pub rate_pps: f64,
    /// Bits of the frames after the first per µs of `duration_s`.
    pub rate_mbps: f64,
    /// Measured at the sender: send timestamps against the schedule.
    pub timing: Option<TimingReport>,
    /// Measured at the destination NICs (kernel receive times): arrival gaps against the
    /// schedule. `None` in a dry run or when the destinations could not be captured (a warning
    /// says why).
    pub receiver: Option<ReceiverReport>,
    /// The first switch's classification of the frames.
    pub classifier: Classifier,
    /// Frames per traffic class at the first switch.
    pub traffic_classes: Vec<ClassCount>,
    /// Frames whose VLAN tag was stripped (the fabric is untagged), by tag.
    pub vlan_stripped: Vec<VlanCount>,
    /// The capture's gaps that the fabric cannot reproduce at its time dilation.
    pub gap_warning: Option<crate::replay::rx::GapWarning>,
    /// Everything worth a `warning:` line.
    pub warnings: Vec<String>,
    pub icrc_bad_in_capture: usize,
    pub padded: usize,
    pub stopped_at_max_duration: bool,
    pub skipped: Vec<SkipCount>,
}

/// What is replayed where: the fabric, the capture file and the sending GPU (`--from`).
#[derive(Debug, Clone, Copy)]
pub struct Origin<'a> {
    pub fabric: &'a str,
    pub file: &'a Path,
    pub from: &'a str,
}

impl Report {
    /// The report of a prepared capture, before (`log` = `None`: dry run) or after sending:
    /// `s` is the emulated schedule, `log` what [`pace`](super::pacer::pace) did with `s.dilated(dilation)` on the
    /// wall clock.
    pub fn new(
        o: Origin,
        p: &Prepared,
        pace: Pace,
        s: &Schedule,
        dilation: Dilation,
        cls: &Classifier,
        log: Option<&SendLog>,
    ) -> Report {
        let wall = log.map_or(0.0, |l| l.duration.as_secs_f64());
        let d = dilation.to_emulated_secs(wall);
        // Rates between the first and the last send: the frames (and bits) after the first.
        let rate = |v: f64| if d > 0.0 { v / d } else { 0.0 };
        let (sent, bytes, first_len) = log.map_or((0, 0, 0), |l| (l.sent, l.bytes, l.first_len));
        let timing = log.and_then(|l| TimingReport::emulated(&l.timing, dilation));
        let mut r = Report {
            fabric: o.fabric.into(),
            file: o.file.into(),
            from: o.from.into(),
            sender: p.sender,
            mapping: p.mapping.clone(),
            dry_run: log.is_none(),
            pacing: pace.describe(),
            loops: s.loops,
            frames_in_capture: p.total,
            frames_to_inject: p.frames.len(),
            time_dilation: dilation.factor(),
            scheduled_duration_s: s.duration_ns() as f64 / 1e9,
            sent: log.map_or(0, |l| l.sent),
            send_errors: log.map_or(0, |l| l.errors),
            first_send_error: log.and_then(|l| l.first_error.clone()),
            bytes: log.map_or(0, |l| l.bytes),
            duration_s: d,
            wall_duration_s: wall,
            rate_pps: rate(sent.saturating_sub(1) as f64),
            rate_mbps: rate(bytes.saturating_sub(first_len) as f64 * 8.0 / 1e6),
            timing,
            receiver: None,
            classifier: cls.clone(),
            traffic_classes: classes(&p.frames, s.loops, cls),
            vlan_stripped: vlan_counts(&p.frames, s.loops, cls),
            gap_warning: None,
            warnings: Vec::new(),
            icrc_bad_in_capture: p.frames.iter().filter(|f| f.icrc_bad_in_capture).count(),
            padded: p.frames.iter().filter(|f| f.padded).count(),
            stopped_at_max_duration: log.is_some_and(|l| l.stopped_at_deadline),
            skipped: p.skipped.clone(),
        };
        r.warnings = r.class_warnings();
        r
    }

    /// Warnings about where the frames go: VLAN tags stripped, no lossless class used.
    fn class_warnings(&self) -> Vec<String> {
        let mut w = Vec::new();
        let vlan: u64 = self.vlan_stripped.iter().map(|v| v.frames).sum();
        if vlan > 0 {
            let tags: Vec<String> = self
                .vlan_stripped
                .iter()
                .map(|v| format!("vid {} pcp {} -> priority {} (DSCP {})", v.vid, v.pcp, v.tc, v.dscp))
                .collect();
            w.push(format!(
                "{vlan} frames had a VLAN tag, stripped: the fabric's ports are untagged and classify by DSCP, not PCP ({})",
                tags.join(", ")
            ));
        }
        let lossless: Vec<&ClassCount> = self.traffic_classes.iter().filter(|c| c.lossless).collect();
        let total: u64 = self.traffic_classes.iter().map(|c| c.frames).sum();
        if total > 0 && !lossless.is_empty() && lossless.iter().all(|c| c.frames == 0) {
            let how: Vec<String> =
                lossless.iter().map(|c| format!("priority {} = DSCP {}", c.tc, dscp_list(&c.fabric_dscps))).collect();
            w.push(format!(
                "no frame is in a lossless (PFC) class at {}: the capture's DSCPs ({}) map to lossy queues; the fabric's lossless classes are {}",
                self.classifier.switch,
                dscp_list(&self.traffic_classes.iter().flat_map(|c| c.dscps.clone()).collect::<Vec<_>>()),
                how.join(", ")
            ));
        }
        w
    }
}

/// `0-23,25,48`: sorted DSCPs with runs as ranges.
fn dscp_list(v: &[u8]) -> String {
    let mut v = v.to_vec();
    v.sort_unstable();
    v.dedup();
    if v.is_empty() {
        return "-".into();
    }
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < v.len() {
        let mut j = i;
        while j + 1 < v.len() && v[j + 1] == v[j] + 1 {
            j += 1;
        }
        out.push(if j > i { format!("{}-{}", v[i], v[j]) } else { v[i].to_string() });
        i = j + 1;
    }
    out.join(",")
}

/// The mapping, as printed before sending.
pub fn render_mapping(r: &Report) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "replaying {} ({}) from {} on fabric {}: capture endpoint -> fabric GPU",
        r.file.display(),
        plural(r.frames_in_capture as u64, "frame"),
        r.from,
        r.fabric
    );
    let width = r.mapping.iter().map(|m| m.endpoint.to_string().len()).max().unwrap_or(0);
    for m in &r.mapping {
        let _ = writeln!(o, "{}", m.line(width));
    }
    o
}

/// The report after the mapping: what was sent (or would be), timing, ICRC, skip table.
pub fn render_report(r: &Report) -> String {
    let mut o = String::new();
    if r.dry_run {
        let _ = writeln!(
            o,
            "dry run: would send {} frames ({} per loop, {}) over {} ({})",
            r.frames_to_inject as u64 * u64::from(r.loops),
            r.frames_to_inject,
            plural(u64::from(r.loops), "loop"),
            span(r.time_dilation, r.scheduled_duration_s),
            r.pacing
        );
    } else {
        render_sent(r, &mut o);
    }
    render_classes(r, &mut o);
    o
}

/// A duration of emulated time; at D = 1 emulated time is the wall clock and one duration says
/// it all.
fn span(d: f64, emulated_s: f64) -> String {
    if d == 1.0 {
        fmt_ns(emulated_s * 1e9)
    } else {
        format!(
            "{} emulated ({} wall clock at time_dilation {d})",
            fmt_ns(emulated_s * 1e9),
            fmt_ns(emulated_s * d * 1e9)
        )
    }
}

/// What was sent, send errors and the timing errors at the sender and the receivers.
fn render_sent(r: &Report, o: &mut String) {
    let loops = plural(u64::from(r.loops), "loop");
    let d = r.time_dilation;
    let span = |emulated_s: f64| span(d, emulated_s);
    let per = if d == 1.0 { "" } else { " (emulated)" };
    let _ = writeln!(
        o,
        "sent {} frames ({} bytes) in {}: {:.1} frames/s, {:.3} Mbit/s{per} ({}, {loops})",
        r.sent,
        r.bytes,
        span(r.duration_s),
        r.rate_pps,
        r.rate_mbps,
        r.pacing
    );
    if r.send_errors > 0 {
        let _ = writeln!(o, "send errors: {} (first: {})", r.send_errors, r.first_send_error.as_deref().unwrap_or("?"));
    }
    if r.stopped_at_max_duration {
        let _ = writeln!(o, "stopped at --max-duration");
    }
    match &r.timing {
        Some(t) => {
            let pct = t.mean_abs_error_pct.map_or("-".to_string(), |p| format!("{p:.3} %"));
            let _ = writeln!(
                    o,
                    "timing error at the sender vs the schedule{}: mean {} per gap ({pct} of the mean scheduled gap {}), max {}",
                    if d == 1.0 { "" } else { " (emulated)" },
                    fmt_ns(t.mean_abs_error_ns),
                    fmt_ns(t.mean_scheduled_gap_ns),
                    fmt_ns(t.max_abs_error_ns as f64)
                );
        }
        None => {
            let _ = writeln!(o, "timing error: - (fewer than two frames sent)");
        }
    }
    if let Some(rx) = &r.receiver {
        let t = rx.timing.as_ref().map_or("- (fewer than two frames at one destination)".to_string(), |t| {
            let pct = t.mean_abs_error_pct.map_or("-".to_string(), |p| format!("{p:.3} %"));
            format!(
                "mean {} per gap ({pct} of the mean scheduled gap {}), max {}",
                fmt_ns(t.mean_abs_error_ns),
                fmt_ns(t.mean_scheduled_gap_ns),
                fmt_ns(t.max_abs_error_ns as f64)
            )
        });
        let _ = writeln!(
            o,
            "timing error at the receiver ({}, kernel receive times) vs the schedule{}: {t}; {} of {} frames arrived",
            rx.ports.join(", "),
            if d == 1.0 { "" } else { " (emulated)" },
            rx.frames_received,
            rx.frames_expected
        );
    }
}

/// Frames per traffic class, VLAN tags stripped, ICRCs bad in the capture, padded and skipped
/// frames, and the warnings.
fn render_classes(r: &Report, o: &mut String) {
    let _ = writeln!(o, "frames by traffic class at {} (DSCP -> queue and PFC priority):", r.classifier.switch);
    for c in &r.traffic_classes {
        let measured =
            c.enqueued_at_switch.map_or(String::new(), |n| format!("; {} enqueued there during the replay", n));
        let _ = writeln!(
            o,
            "  {:>6}  queue {} {:<8}  capture DSCP {}, fabric DSCP {}{measured}",
            c.frames,
            c.tc,
            if c.lossless { "lossless" } else { "lossy" },
            dscp_list(&c.dscps),
            dscp_list(&c.fabric_dscps)
        );
    }
    for v in &r.vlan_stripped {
        let _ = writeln!(
            o,
            "  VLAN stripped: {:>6}  vid {} pcp {} -> queue {} by DSCP {}",
            v.frames, v.vid, v.pcp, v.tc, v.dscp
        );
    }
    let _ = writeln!(
        o,
        "ICRC was bad in the capture: {} (kept bad; every other ICRC recomputed after rewriting)",
        r.icrc_bad_in_capture
    );
    if r.padded > 0 {
        let _ =
            writeln!(o, "padded with zeros to the original length: {} (ICRC computed over the padded frame)", r.padded);
    }
    let skipped: u64 = r.skipped.iter().map(|s| s.frames).sum();
    let _ = writeln!(o, "skipped {skipped} of {} frames{}", r.frames_in_capture, if skipped > 0 { ":" } else { "" });
    for s in &r.skipped {
        let _ = writeln!(o, "  {:>6}  {}", s.frames, s.reason);
    }
    for w in &r.warnings {
        let _ = writeln!(o, "warning: {w}");
    }
}
