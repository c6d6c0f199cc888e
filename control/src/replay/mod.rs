//! `rocefab replay [<fabric>] --from <host>:<gpu> capture.pcap[ng]`: injects the RoCEv2 frames
//! of a capture into a running fabric, from one GPU NIC, with the capture's timing.
//!
//! Steps, each a function below:
//! 1. **Read** the capture ([`rocefab_wire::pcap`]: pcap or pcapng; Ethernet, Linux cooked or
//!    raw-IP link types, whose missing Ethernet header is synthesised — the MACs are rewritten
//!    anyway).
//! 2. **Classify** every frame ([`prepare()`]): a RoCEv2 frame is Ethernet (VLAN tags allowed) /
//!    IPv4 or IPv6 / UDP destination port 4791 / BTH ..., parsed by
//!    [`rocefab_wire::roce::ParsedFrame::parse_captured`], VLAN tags walked by
//!    [`rocefab_wire::ethernet::walk_vlan_tags`]. Anything else is skipped and counted with its
//!    reason.
//! 3. **Map** the capture's IP endpoints onto fabric GPUs ([`map_endpoints`]): the sending
//!    endpoint (`--sender`, else the address `--map`ped to the `--from` GPU, else the source of
//!    the first RoCEv2 frame) becomes the `--from` GPU; every other endpoint, in order of first
//!    appearance, the next GPU in torchrun order (node rank × GPUs per host + local rank),
//!    skipping `--from` and the GPUs `--map` took.
//! 4. **Rewrite** the frames the sender sent ([`rewrite()`]): MACs of the `--from` NIC and its
//!    gateway (the rail switch port), mapped addresses, TTL / hop limit 64, IPv4 header checksum,
//!    UDP checksum 0 (IPv4; IPv6 recomputed when the capture had one; both with etherparse), and
//!    the RoCEv2 ICRC (IBTA Annex A17.3.3, [`rocefab_wire::roce::icrc`]), which covers the
//!    addresses — recomputed only when the captured ICRC was good, so a frame captured with a
//!    bad ICRC is injected with a bad one. DSCP/ECN, UDP ports and everything above UDP stay as
//!    captured. VLAN tags are stripped and reported per tag
//!    with the priority the frames take instead: the fabric's ports are untagged (the planner
//!    configures no VLANs, and this kernel has no 802.1Q devices for a host to terminate a tag)
//!    and its switches classify by DSCP (DSCP-based PFC, as SONiC's and NX-OS's RoCE
//!    configurations do), so a kept tag would carry a PCP nothing reads (the XDP program skips one
//!    tag and classifies by DSCP; a QinQ frame would not even be routed).
//! 5. **Schedule** ([`Schedule`]): the capture's timestamps relative to the first injected
//!    frame (default), divided by `--speed`, `--pps` evenly spaced, or `--topspeed` all at 0;
//!    `--loop N` repeats it with the capture's mean gap between loops. The schedule is in the
//!    fabric's emulated time (docs/src/emulated-time.md): a capture's timestamps are taken as
//!    the time of the network it models (a real fabric's, or a `rocefab capture`, which writes
//!    emulated time), and `--pps N` is N frames per emulated second. On a fabric at
//!    `time_dilation: D` every due time is multiplied by D where it meets the wall clock
//!    ([`Schedule::dilated`]), so a 10 µs gap is sent 80 ms apart at D 8000. A schedule whose
//!    wall-clock length exceeds `--max-duration` (a bound on how long the command runs, wall
//!    clock) is refused.
//! 6. **Send** ([`pace`]) from an `AF_PACKET` raw socket bound to the GPU's interface inside
//!    the host's namespace (a dedicated thread enters it with `setns`): every frame's due time
//!    is absolute from one monotonic start, the thread sleeps until ~200 µs before it and spins
//!    the rest, so errors never accumulate (with gaps of a millisecond or more the thread asks
//!    for `SCHED_FIFO`, best effort, so a loaded machine does not delay its wake-ups). Outside `rocefab run` jobs no XDP program runs on
//!    host NICs, so the frames go straight to the rail switch; during a job the host's XDP
//!    program hands RoCEv2 frames arriving at a NIC to its `rocefab-hostd`, which would see
//!    the replayed frames as traffic of its own QPs (replay is not refused then: do not).
//! 7. **Report** ([`Report`], text or `--json`), in emulated time (wall / D; the wall-clock
//!    duration and D are given too): frames and bytes sent, duration, rate, the
//!    timing error measured at the sender (send timestamps against the schedule: mean absolute
//!    inter-frame error as a share of the mean scheduled gap, and the largest) and beside it the
//!    timing error at the receiver (the destination NICs captured during the replay, kernel
//!    receive times, [`crate::replay::rx`]), the frames per traffic class at the first switch
//!    (by the fabric's DSCP map; every lossless class is listed, and a warning says when no
//!    frame is in one), the VLAN tags stripped, the frames whose ICRC was already bad in the
//!    capture, the padded frames, the skipped frames by reason, and warnings: among them the
//!    capture's gaps that the fabric cannot reproduce at its time dilation, with the D that
//!    would ([`crate::replay::rx::GapRule`]), also printed before sending.
//!
//! `--dry-run` needs no running fabric when given the topology (`--topology FILE`, or the file
//! in the fabric's place); its time dilation is the topology's.
//!
//! A frame the capture's snap length cut is refused (an error naming the file, the frame and
//! both lengths) unless `--pad` pads it with zeros to its original length; its ICRC, which was
//! not captured, is then computed over the padded frame.
//!
//! One file per concern: `args.rs` (the command line), `classify.rs`, `mapping.rs`,
//! `rewrite.rs`, `prepare.rs` (the three together over a capture), `schedule.rs`, `pacer.rs`,
//! `report.rs` (the `AF_PACKET` socket is `rocefab_plumbing::packet`, shared with the NIC agent); this file runs the command. Every
//! public item is re-exported here, at the path it had when replay was one file.

mod args;
mod classify;
mod mapping;
mod pacer;
mod prepare;
mod report;
mod rewrite;
pub mod rx;
mod schedule;

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{anyhow, bail};
use rocefab_contracts::time::Dilation;
use rocefab_wire::pcap;

pub use args::{parse_map, parse_speed_factor, ArgError, ReplayArgs};
pub use classify::VlanTag;
pub use mapping::{gpus_of, map_endpoints, Gpu, MapEntry, MapError, MapHow};
pub use pacer::{pace, pace_with, PaceClock, SendError, SendLog, TimingError, WallClock};
pub use prepare::{prepare, Options, Outgoing, PrepareError, Prepared, SkipCount};
pub use report::{
    classes, classifier, enqueued_per_queue, render_mapping, render_report, vlan_counts, ClassCount, Classifier,
    Origin, ReceiverReport, Report, TimingReport, VlanCount,
};
pub use rewrite::{rewrite, RewriteError};
pub use schedule::{Pace, Schedule};

use crate::fabric::rundir::State;
use crate::plan::{compile, Plan};
use crate::replay::rx::{GapRule, Ident};
use crate::text::plural;
use crate::topology::Topology;
use crate::units::fmt_ns;
use mapping::switch_of;

/// Splits `[FABRIC] CAPTURE`.
fn split_positional(p: &[String]) -> anyhow::Result<(Option<&str>, PathBuf)> {
    match p {
        [file] => Ok((None, PathBuf::from(file))),
        [fabric, file] => Ok((Some(fabric.as_str()), PathBuf::from(file))),
        _ => bail!("expected [FABRIC] CAPTURE, got {} arguments: {}", p.len(), p.join(" ")),
    }
}

/// A topology file given where a fabric name goes (`rocefab replay topo.yaml --dry-run ...`).
fn is_topology_file(s: &str) -> bool {
    let p = Path::new(s);
    p.extension().is_some_and(|e| e == "yaml" || e == "yml") && p.is_file()
}

/// The gap rule for frames from `from` to the GPUs `to`: switch hops (1 on one rail switch, 3
/// within a pod, 5 across pods) and the slowest host link on the way.
pub fn gap_rule(topo: &Topology, plan: &Plan, from: &str, to: &[&str], d: Dilation) -> GapRule {
    let sw = |g: &str| {
        let (h, n) = g.split_once(':').unwrap_or((g, ""));
        switch_of(plan, h, n)
    };
    let pod = |name: &str| topo.switches.iter().find(|s| s.name == name).and_then(|s| s.pod);
    let src = sw(from);
    let mut hops = 1;
    let mut rate = src.as_ref().map_or(u64::MAX, |s| s.1);
    for t in to {
        if let (Some((a, _)), Some((b, r))) = (&src, sw(t)) {
            rate = rate.min(r);
            let h = if *a == b {
                1
            } else if pod(a) == pod(&b) {
                3
            } else {
                5
            };
            hops = hops.max(h);
        }
    }
    GapRule {
        hops,
        cost_per_hop_wall_ns: crate::replay::rx::COST_PER_HOP_WALL_NS,
        line_rate_bps: if rate == u64::MAX { 0 } else { rate },
        time_dilation: d.factor(),
    }
}

/// The fabric a replay goes to: its name, its state (`None` for a dry run from a topology
/// file), its topology and time dilation.
struct Target {
    fabric: String,
    state: Option<State>,
    topo: Topology,
    dilation: Dilation,
}

/// A dry run needs the topology only: from --topology, a topology file in the fabric's place,
/// or the running fabric's state.
fn target(a: &ReplayArgs, fabric: Option<&str>) -> anyhow::Result<Target> {
    let topo_file = a.topology.clone().or_else(|| fabric.filter(|f| is_topology_file(f)).map(PathBuf::from));
    if let Some(t) = &topo_file {
        if !a.dry_run {
            bail!("--topology {}: only a dry run works from a topology file; sending needs a running fabric (rocefab up {})", t.display(), t.display());
        }
        let topo = Topology::load(t)?;
        return Ok(Target { fabric: topo.fabric.clone(), state: None, dilation: topo.time_dilation, topo });
    }
    let fabric = match (fabric, a.dry_run) {
        (f, true) => crate::fabric::pick_fabric(f)
            .map_err(|e| anyhow!("{e:#}; a dry run works from the topology file too: --topology FILE"))?,
        (f, false) => crate::fabric::pick_fabric(f)?,
    };
    let crate::fabric::Fabric { st, topo, .. } = crate::fabric::Fabric::open(Some(&fabric))?;
    let dilation = st.clock()?.dilation();
    Ok(Target { fabric, state: Some(st), topo, dilation })
}

/// Refuses a schedule longer than `--max-duration` on the wall clock.
fn check_max_duration(
    a: &ReplayArgs,
    schedule: &Schedule,
    wall: &Schedule,
    pace: Pace,
    d: Dilation,
) -> anyhow::Result<()> {
    if Duration::from_nanos(wall.duration_ns()) <= a.max_duration {
        return Ok(());
    }
    let emulated = if d.is_real_time() {
        String::new()
    } else {
        format!(" on the wall clock ({} emulated at time_dilation {d})", fmt_ns(schedule.duration_ns() as f64))
    };
    bail!(
        "the schedule takes {:.3} s{emulated} ({} frames, {}, {}), longer than --max-duration {:.3} s",
        wall.duration_ns() as f64 / 1e9,
        schedule.len(),
        pace.describe(),
        plural(u64::from(a.loops), "loop"),
        a.max_duration.as_secs_f64()
    );
}

/// A prepared replay about to be sent into a running fabric.
struct Sending<'a> {
    a: &'a ReplayArgs,
    st: &'a State,
    plan: &'a Plan,
    /// The `--from` GPU.
    gpu: &'a Gpu,
    cls: &'a Classifier,
    prep: &'a Prepared,
    /// The schedule on the wall clock.
    wall: &'a Schedule,
    /// The destination GPUs (`host2:gpu1`).
    dests: &'a [&'a str],
}

impl Sending<'_> {
    /// Sends the frames while capturing the destination NICs and reading the first switch's
    /// queue counters before and after: what was sent, the report of it, and its warnings.
    fn send(
        &self,
        origin: Origin<'_>,
        pace: Pace,
        schedule: &Schedule,
        dilation: Dilation,
    ) -> anyhow::Result<(SendLog, Report, Vec<String>)> {
        let (prep, gpu) = (self.prep, self.gpu);
        // Capture the destination NICs while sending (their agents' AF_PACKET sockets).
        let targets: Vec<(String, String)> =
            self.dests.iter().filter_map(|g| g.split_once(':')).map(|(h, n)| (h.to_string(), n.to_string())).collect();
        let idents: Vec<Option<Ident>> =
            prep.frames.iter().map(|f| crate::replay::rx::ident(&f.bytes, gpu.ip)).collect();
        let mut warnings = Vec::new();
        let receivers = if self.a.no_receiver_timing || targets.is_empty() {
            None
        } else {
            match crate::replay::rx::Receivers::start(&crate::fabric::capture::daemon_urls(self.st), &targets, gpu.ip) {
                Ok(r) => Some(r),
                Err(e) => {
                    warnings.push(format!("receiver timing not measured: {e:#}"));
                    None
                }
            }
        };
        let before = self.switch_queues();
        let bytes: Vec<Vec<u8>> = prep.frames.iter().map(|f| f.bytes.clone()).collect();
        let log = pacer::send_from_netns(&gpu.netns, &gpu.ifname, bytes, self.wall.clone(), self.a.max_duration)?;
        let mut r = Report::new(origin, prep, pace, schedule, dilation, self.cls, Some(&log));
        if let Some(rx) = receivers {
            r.receiver = Some(self.receiver_report(rx, &log, &idents, dilation, &mut warnings));
        }
        match (before, self.switch_queues()) {
            (Some(b), Some(a)) => {
                for c in &mut r.traffic_classes {
                    c.enqueued_at_switch = Some(a[usize::from(c.tc)].saturating_sub(b[usize::from(c.tc)]));
                }
            }
            _ => warnings.push(format!(
                "the queue counters of {} could not be read: the traffic classes are by its DSCP map only",
                self.cls.switch
            )),
        }
        Ok((log, r, warnings))
    }

    /// The timing at the destination NICs: the frames sent (the pacer may have stopped at
    /// --max-duration) that the capture can match, against what arrived.
    fn receiver_report(
        &self,
        rx: crate::replay::rx::Receivers,
        log: &SendLog,
        idents: &[Option<Ident>],
        dilation: Dilation,
        warnings: &mut Vec<String>,
    ) -> ReceiverReport {
        let expected = (0..log.sent + log.errors).filter(|&k| idents[self.wall.frame(k)].is_some()).count() as u64;
        let ports = rx.ports.clone();
        let (arrivals, err) = rx.finish(expected, Duration::from_secs(2));
        if let Some(e) = err {
            warnings.push(format!("receiver capture: {e}"));
        }
        let (t, matched) = crate::replay::rx::match_arrivals(self.wall, idents, &arrivals);
        let timing = TimingReport::emulated(&t, dilation);
        if matched < expected {
            warnings.push(format!(
                "{} of {expected} frames did not arrive at {} within 2 s",
                expected - matched,
                ports.join(", ")
            ));
        }
        ReceiverReport { ports, frames_expected: expected, frames_received: matched, timing }
    }

    /// The first switch's `rocefab_queue_enqueued_packets_total` per queue, over every port
    /// but the one to the `--from` NIC; `None` when it cannot be read.
    fn switch_queues(&self) -> Option<[u64; 8]> {
        let (cls, gpu) = (self.cls, self.gpu);
        let host = gpu.name.split(':').next().unwrap_or("");
        let from_port = self.plan.links.iter().find_map(|l| {
            if l.a.node == cls.switch && l.b.node == host && l.b.ifname == gpu.ifname {
                Some(l.a.ifname.clone())
            } else if l.b.node == cls.switch && l.a.node == host && l.a.ifname == gpu.ifname {
                Some(l.b.ifname.clone())
            } else {
                None
            }
        })?;
        let urls = crate::fabric::capture::daemon_urls(self.st);
        let text =
            crate::fabric::daemon_http::scrape(&format!("{}/metrics", urls.get(&cls.switch)?), Duration::from_secs(2))
                .ok()?;
        Some(enqueued_per_queue(&text, &from_port))
    }
}

/// Runs `rocefab replay`.
pub fn run(a: &ReplayArgs) -> anyhow::Result<()> {
    let (fabric, file) = split_positional(&a.positional)?;
    let t = target(a, fabric)?;
    let plan = compile(&t.topo, 0);
    let gpus = gpus_of(&plan);
    // The error names the file (once) and what it is.
    let frames = pcap::read_all(&file)?;
    let opts =
        Options { file: &file, gpus: &gpus, from: &a.from, maps: &a.maps, sender: a.sender, pad: a.pad, mtu: plan.mtu };
    let prep = prepare(&frames, &opts)?;
    let pace = Pace::from_args(a);
    let ts: Vec<Duration> = prep.frames.iter().map(|f| f.timestamp).collect();
    let schedule = Schedule::new(&ts, pace, a.loops);
    let wall = schedule.dilated(t.dilation);
    let origin = Origin { fabric: &t.fabric, file: &file, from: &a.from };
    let cls = classifier(&plan, &a.from);
    let dests: Vec<&str> =
        prep.mapping.iter().filter(|m| m.how != MapHow::Sender).filter_map(|m| m.gpu.as_deref()).collect();
    let rule = gap_rule(&t.topo, &plan, &a.from, &dests, t.dilation);
    let lens: Vec<usize> = prep.frames.iter().map(|f| f.bytes.len()).collect();
    let gap_warning = rule.check(&schedule.offsets_ns, &lens);
    let mut dry = Report::new(origin, &prep, pace, &schedule, t.dilation, &cls, None);
    if let Some(w) = &gap_warning {
        dry.warnings.push(w.message.clone());
    }
    dry.gap_warning = gap_warning.clone();
    if a.json {
        eprint!("{}", render_mapping(&dry));
    } else {
        print!("{}", render_mapping(&dry));
    }
    check_max_duration(a, &schedule, &wall, pace, t.dilation)?;
    if a.dry_run {
        return print_report(&dry, a.json);
    }
    let st = t.state.as_ref().expect("a run without --dry-run has a fabric");
    if prep.frames.is_empty() {
        print_report(&dry, a.json)?;
        bail!("nothing to send: no frame of the capture was sent by {}", prep.sender);
    }
    if !nix::unistd::geteuid().is_root() {
        bail!("sending into a fabric needs root (setns and AF_PACKET); --dry-run does not");
    }
    let gpu = gpus.iter().find(|g| g.name == a.from).expect("prepare checked --from");
    if !crate::fabric::netns::exists(&gpu.netns) {
        bail!("fabric {}: namespace {} of {} does not exist", t.fabric, gpu.netns, gpu.name);
    }
    // Said before sending on stderr with --json (the text report ends with its warnings).
    if let (Some(w), true) = (&gap_warning, a.json) {
        eprintln!("warning: {}", w.message);
    }
    let sent = Sending { a, st, plan: &plan, gpu, cls: &cls, prep: &prep, wall: &wall, dests: &dests };
    let (log, mut r, warnings) = sent.send(origin, pace, &schedule, t.dilation)?;
    if let Some(w) = &gap_warning {
        r.warnings.push(w.message.clone());
    }
    r.gap_warning = gap_warning;
    r.warnings.extend(warnings);
    print_report(&r, a.json)?;
    if log.errors > 0 {
        bail!(
            "{} of {} frames could not be sent (first error: {})",
            log.errors,
            log.errors + log.sent,
            log.first_error.unwrap_or_default()
        );
    }
    Ok(())
}

fn print_report(r: &Report, json: bool) -> anyhow::Result<()> {
    if json {
        println!("{}", serde_json::to_string_pretty(r)?);
    } else {
        print!("{}", render_report(r));
    }
    Ok(())
}
