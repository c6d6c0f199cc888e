//! Was the machine, not the model, the bottleneck of a `rocefab run`? (docs/src/emulated-time.md:
//! the same scenario at D and 2D must give the same emulated results; when the machine cannot
//! keep up with the dilated rates, it does not.)
//!
//! Pure functions over what a run measured: the hosts' reports (emulated units) and the
//! machine's CPU time from `/proc/stat` before and after. Two signs, each worded with what to do:
//!
//! * the machine's CPUs were saturated (≥ [`CPU_SATURATED`]) while a receiving NIC's link ran
//!   clearly below its line rate (< [`RECEIVER_SLOW`] of it);
//! * a sending NIC that nothing in the model slowed down (no CNP, paused for less than
//!   [`PAUSED_LITTLE`] of its sending time, no retransmission) achieved less than
//!   [`SENDER_SLOW`] of its line rate while its QPs were sending — judged only for collectives
//!   whose senders have data from the start (not a chain broadcast, where a rank waits for
//!   its predecessor by design, nor a latency-bound ring AllReduce, [`ring_step_is_latency_bound`]).
//!
//! * a ring AllReduce took more than [`MODEL_SLACK`] times what the model expects of it if the
//!   machine keeps up ([`crate::job::expect`]: its critical path and its busiest link) with nothing in
//!   the model holding it back (no CNP, no retransmission, PFC pauses under [`PAUSED_LITTLE`] of
//!   every sender's time);
//!
//! * a switch port's AF_XDP socket lost frames in the kernel (its fill ring ran empty or its
//!   RX ring full: the data plane did not run in time), which nothing in a lossless model does;
//!
//! * a switch port stalled: it had frames queued that the peer did not pause and sent nothing for
//!   [`STALL_FRAMES`] frame times or more, and at least [`STALL_JOB_FRACTION`] of the job, in
//!   emulated time (the switch daemon logs every stall longer than four frame times,
//!   `switch_model::stall`): nothing in the model does that, whatever the machine's average
//!   CPU load (a daemon descheduled for a few ms on a busy machine is 71-230 µs at D 8000-16000).
//!   Reported with the port, when and how long, even when a link ran at its line rate. Stalls
//!   shorter than that count when they add up to [`STALL_TOTAL_FRACTION`] of the job or more: a
//!   port that sent nothing for half the job with frames queued is the machine's too.
//!
//! The first two signs do not count when a switch link ran at [`RECEIVER_SLOW`] of its line rate or more over
//! the job: such a link is the model's bottleneck (e.g. the rail-spine uplinks of a ring
//! AllReduce whose every hop crosses rails, two flows per uplink), and it, not the machine,
//! explains receivers and senders below their NICs' rate. A machine too slow for the dilated
//! rates keeps every link below it.
use rocefab_contracts::job::Report;
use rocefab_contracts::sample::{PortLoss, PortStalls, SwitchSample};

/// CPU busy fraction at which the machine counts as saturated.
pub const CPU_SATURATED: f64 = 0.90;
/// A receiving link below this fraction of its line rate is "clearly below".
pub const RECEIVER_SLOW: f64 = 0.70;
/// A sender below this fraction of its line rate, with nothing in the model holding it back.
pub const SENDER_SLOW: f64 = 0.50;
/// A sender paused by PFC for less than this fraction of its sending time was "free to send".
pub const PAUSED_LITTLE: f64 = 0.10;
/// A switch port's stall is reported from this many frame times (the serialisation time of the
/// largest frame the port sent)...
pub const STALL_FRAMES: u64 = 16;
/// ... when it is also at least this fraction of the job's completion time (a shorter stall
/// cannot move the job's completion time by more than that; the issue-23 runs' 71 µs stall was
/// 2.6 % of an 8 × 16 MiB incast at 400G, 2.7 ms).
pub const STALL_JOB_FRACTION: f64 = 0.02;
/// ... or when its stalls add up to at least this fraction of the job (a dual-port all-to-all
/// at D = 8 on a fabric held to one CPU: the port toward the surviving port of a cut NIC stalled
/// 823 times, 8.2 ms at the longest, 1.7 % of a 474 ms job, but 482.7 ms in all, and its QPs
/// ran out of retries; the 12-27 % below stay unreported).
pub const STALL_TOTAL_FRACTION: f64 = 0.5;
// Short stalls adding up to less are not a sign on their own: a gap of five frame times on a port with
// three frames of shaper credit costs two, yet counts five, and the 400G DCQCN incast of
// tests/tests/fabric_dcqcn.rs kept its bottleneck 97-98 % busy while its ports' stalls added up
// to 12-27 % of the job (2026-11-25, loaded machine): a total rule at 5 % called every such run
// machine-bound. The stalls are in `rocefab run --json` (`tx_stalls`) either way.

/// A job that took more than this many times the model's expectation, with nothing in the
/// model holding it back (no CNP, hardly any PFC pause), was the machine's.
pub const MODEL_SLACK: f64 = 1.25;

/// Aggregate CPU time of the machine (the `cpu` line of `/proc/stat`), in clock ticks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CpuTimes {
    pub busy: u64,
    pub total: u64,
}

/// Parses the `cpu ` line of `/proc/stat` (proc(5): user nice system idle iowait irq softirq
/// steal [guest guest_nice], guest time already counted in user). Idle = idle + iowait.
pub fn parse_proc_stat(text: &str) -> Option<CpuTimes> {
    let line = text.lines().find(|l| l.starts_with("cpu "))?;
    let v: Vec<u64> = line.split_whitespace().skip(1).take(8).map(|f| f.parse().ok()).collect::<Option<_>>()?;
    if v.len() < 4 {
        return None;
    }
    let total: u64 = v.iter().sum();
    let idle = v[3] + v.get(4).copied().unwrap_or(0);
    Some(CpuTimes { busy: total - idle, total })
}

/// Busy fraction (0..=1) of the machine between two samples; `None` when no time passed.
pub fn busy_fraction(before: CpuTimes, after: CpuTimes) -> Option<f64> {
    let total = after.total.checked_sub(before.total).filter(|&t| t > 0)?;
    let busy = after.busy.saturating_sub(before.busy);
    Some((busy as f64 / total as f64).min(1.0))
}

/// One NIC's use of its link during the job, emulated units.
#[derive(Clone, Debug, PartialEq)]
pub struct NicUse {
    /// `host:nic`.
    pub name: String,
    pub line_rate_bps: f64,
    /// Received bits per emulated second (every frame on the link) while its QPs were receiving
    /// data (until the last one had it all); 0 for a NIC whose QPs received no data, whose link
    /// carried only ACKs and CNPs (an incast's senders), which no model would run at line rate.
    pub rx_bps: f64,
    /// Whether the NIC's QPs sent anything.
    pub sends: bool,
    /// Transmitted bits per emulated second while its QPs were sending (until the last one was
    /// acknowledged).
    pub tx_bps: f64,
    /// Fraction of that sending time its data priority was paused by PFC.
    pub paused_fraction: f64,
    pub cnps_received: u64,
    pub retransmitted_packets: u64,
}

/// Bytes the switch shapers charge per frame beyond what `tx_bytes` counts: FCS 4, preamble/SFD
/// 8, inter-frame gap 12.
const WIRE_OVERHEAD_BYTES: u64 = 24;

/// One switch egress link's use during the job, emulated units.
#[derive(Clone, Debug, PartialEq)]
pub struct LinkUse {
    /// `switch:port (to peer)`.
    pub name: String,
    pub line_rate_bps: f64,
    /// Wire bits sent per emulated second of the job.
    pub tx_bps: f64,
}

/// The switch links' use between two samples of every switch (`before` the job's start and
/// `after` its reports) over `job_ns` emulated ns: frames dequeued, all queues, plus the per-frame
/// wire overhead. Switches or ports missing from either side are left out.
pub fn link_use(before: &[SwitchSample], after: &[SwitchSample], job_ns: u64) -> Vec<LinkUse> {
    let mut out = Vec::new();
    if job_ns == 0 {
        return out;
    }
    for a in after {
        let Some(b) = before.iter().find(|b| b.switch == a.switch) else { continue };
        for pa in &a.ports {
            let Some(pb) = b.ports.iter().find(|p| p.name == pa.name) else { continue };
            let bytes: u64 = pa.tx_bytes.iter().zip(&pb.tx_bytes).map(|(x, y)| x.saturating_sub(*y)).sum();
            let frames: u64 = pa.tx_packets.iter().zip(&pb.tx_packets).map(|(x, y)| x.saturating_sub(*y)).sum();
            out.push(LinkUse {
                name: format!("{}:{} (to {})", a.switch, pa.name, pa.peer),
                line_rate_bps: pa.line_rate_bps as f64,
                tx_bps: (bytes + frames * WIRE_OVERHEAD_BYTES) as f64 * 8e9 / job_ns as f64,
            });
        }
    }
    out
}

/// Packets a ring AllReduce step must carry for its senders to be busy throughout: a step's
/// chunk crosses its path store and forward, one packet time per switch (up to five, through
/// the super-spines) before the next step can start, so with fewer packets than this the model
/// itself keeps senders idle for much of each step (16 packets behind 5 packet times of path:
/// 76 % busy).
pub const BUSY_STEP_PACKETS: u64 = 16;

/// Is a ring AllReduce of `size_bytes` over `ranks` latency-bound, so that its senders idle
/// between steps by the model's design (their rate over the job says nothing about the
/// machine)? True when a step's chunk (`size / ranks`) is fewer than [`BUSY_STEP_PACKETS`]
/// packets of `path_mtu_bytes`. The 1 MiB AllReduce of 512 ranks (2 KiB, 2 packets at path MTU
/// 1024) is; that of 64 ranks (16 KiB, 16 packets) is not.
pub fn ring_step_is_latency_bound(size_bytes: u64, ranks: u64, path_mtu_bytes: u64) -> bool {
    let chunk = size_bytes / ranks.max(1);
    chunk.div_ceil(path_mtu_bytes.max(1)) < BUSY_STEP_PACKETS
}

/// What a run measured.
#[derive(Clone, Debug, PartialEq)]
pub struct Measured {
    pub time_dilation: f64,
    /// Busy fraction of the machine's CPUs during the job (`None`: not measured).
    pub cpu_busy: Option<f64>,
    pub nics: Vec<NicUse>,
    /// Every sender has data to send from the job's start until it finishes (incast,
    /// all-to-all, ring AllReduce), so its sending time is link time.
    pub senders_busy_throughout: bool,
    /// The switch links during the job (empty: not measured).
    pub links: Vec<LinkUse>,
    /// The switch ports that stalled during the job (emulated; empty: none or not measured).
    pub stalls: Vec<PortStalls>,
    /// The switch ports whose AF_XDP socket lost frames in the kernel during the job.
    pub kernel_rx_lost: Vec<PortLoss>,
    /// The JCT the model expects if the machine keeps up ([`crate::job::expect`]), emulated ns;
    /// `None`: unknown, the job did not end normally, or a collective whose bound is not tight
    /// (judged for the ring AllReduce, whose NICs send one transfer at a time).
    pub expected_ns: Option<u64>,
    /// The job's completion time, emulated ns.
    pub job_ns: u64,
}

/// The NICs' link use from the hosts' reports (`(host, report)`, emulated units).
pub fn nic_use(hosts: &[(String, Report)]) -> Vec<NicUse> {
    let mut out = Vec::new();
    for (host, r) in hosts {
        for n in &r.nics {
            let qps: Vec<_> = r.qps.iter().filter(|q| q.nic == n.name && q.send_bytes > 0).collect();
            let sending_ns = qps.iter().map(|q| q.send_done_ns.unwrap_or(r.elapsed_ns)).max().unwrap_or(0);
            let receiving_ns = r
                .qps
                .iter()
                .filter(|q| q.nic == n.name && q.recv_bytes > 0)
                .map(|q| q.recv_done_ns.unwrap_or(r.elapsed_ns))
                .max()
                .unwrap_or(0);
            let per_s = |bytes: u64, ns: u64| if ns == 0 { 0.0 } else { bytes as f64 * 8e9 / ns as f64 };
            out.push(NicUse {
                name: format!("{host}:{}", n.name),
                line_rate_bps: n.line_rate_bps as f64,
                rx_bps: per_s(n.rx_bytes, receiving_ns),
                sends: !qps.is_empty(),
                tx_bps: per_s(n.tx_bytes, sending_ns),
                paused_fraction: if sending_ns == 0 { 0.0 } else { n.pfc_paused_ns_prio3 as f64 / sending_ns as f64 },
                cnps_received: n.cnps_received,
                retransmitted_packets: qps.iter().map(|q| q.retransmitted_packets).sum(),
            });
        }
    }
    out
}

fn list(names: &[String]) -> String {
    const SHOWN: usize = 4;
    let mut s = names.iter().take(SHOWN).cloned().collect::<Vec<_>>().join(", ");
    if names.len() > SHOWN {
        s += &format!(" and {} more", names.len() - SHOWN);
    }
    s
}

/// The warnings for `m`, one sentence each, saying what to do; empty when nothing points at the
/// machine.
pub fn warnings(m: &Measured) -> Vec<String> {
    let mut out = Vec::new();
    let d = m.time_dilation;
    let pct = |x: f64| format!("{:.0} %", x * 100.0);
    let raise = format!("raise time_dilation (now {d}; try {}) in the topology and run again", d * 2.0);
    // A frame the kernel dropped at a switch's socket never reached the model: whatever the
    // links or the CPUs show, the machine lost it.
    if !m.kernel_rx_lost.is_empty() {
        let mut lost = m.kernel_rx_lost.clone();
        lost.sort_by_key(|l| std::cmp::Reverse(l.frames));
        let total: u64 = lost.iter().map(|l| l.frames).sum();
        let names: Vec<String> = lost.iter().map(|l| format!("{} {}", l.name, l.frames)).collect();
        out.push(format!(
            "the machine, not the model, was the bottleneck: the kernel dropped {total} frames at switch ports' AF_XDP sockets before their data planes took them (fill ring empty or RX ring full: the data plane did not run in time; {}); a lossless fabric loses none in the model, and the job's retransmissions follow from these; {raise}",
            list(&names)
        ));
    }
    // Far slower than the model with nothing in the model to slow it: the machine.
    // (A retransmission waits out a timeout the model has too: a drop it made, or one injected.)
    let held =
        m.nics.iter().any(|n| n.cnps_received > 0 || n.paused_fraction >= PAUSED_LITTLE || n.retransmitted_packets > 0);
    if let Some(e) = m.expected_ns.filter(|&e| e > 0 && !held) {
        if m.job_ns as f64 > MODEL_SLACK * e as f64 {
            out.push(format!(
                "the machine, not the model, was the bottleneck: the job took {:.2} times what the model expects if the machine keeps up ({:.3} ms emulated against {:.3} ms) while DCQCN never cut a sender, PFC barely paused one and nothing was retransmitted; {raise}",
                m.job_ns as f64 / e as f64,
                m.job_ns as f64 / 1e6,
                e as f64 / 1e6
            ));
        }
    }
    // A stalled port is the machine's, whatever the CPU average or the links' use.
    let job = m.job_ns as f64;
    let mut stalled: Vec<&PortStalls> = m
        .stalls
        .iter()
        .filter(|s| {
            s.longest_ns >= (STALL_FRAMES * s.frame_ns).max((STALL_JOB_FRACTION * job) as u64).max(1)
                || (m.job_ns > 0 && s.stalled_ns as f64 >= STALL_TOTAL_FRACTION * job)
        })
        .collect();
    stalled.sort_by_key(|s| std::cmp::Reverse(s.stalled_ns));
    if let Some(w) = stalled.first() {
        let us = |ns: u64| format!("{:.1} µs", ns as f64 / 1e3);
        let share = if m.job_ns > 0 {
            format!(", {:.1} % of the job", w.stalled_ns as f64 * 100.0 / job)
        } else {
            String::new()
        };
        let at = w.longest_at_ns.map_or_else(String::new, |t| format!(" at {} into the job", us(t)));
        let others: Vec<String> = stalled[1..].iter().map(|s| format!("{} ({})", s.name, us(s.stalled_ns))).collect();
        out.push(format!(
            "the machine, not the model, was the bottleneck: switch port {} had frames queued and sent nothing for {} in all ({} stalls{share}; the longest {}{at}, {} frame times; emulated){}; {raise}",
            w.name,
            us(w.stalled_ns),
            w.count,
            us(w.longest_ns),
            w.longest_ns / w.frame_ns.max(1),
            if others.is_empty() { String::new() } else { format!("; also {}", list(&others)) }
        ));
    }
    // A switch link near its line rate is the model's bottleneck.
    if m.links.iter().any(|l| l.line_rate_bps > 0.0 && l.tx_bps >= RECEIVER_SLOW * l.line_rate_bps) {
        return out;
    }
    if let Some(busy) = m.cpu_busy.filter(|&b| b >= CPU_SATURATED) {
        let slow: Vec<&NicUse> =
            m.nics.iter().filter(|n| n.rx_bps > 0.0 && n.rx_bps < RECEIVER_SLOW * n.line_rate_bps).collect();
        if !slow.is_empty() {
            let worst = slow.iter().map(|n| n.rx_bps / n.line_rate_bps).fold(f64::INFINITY, f64::min);
            let names: Vec<String> = slow.iter().map(|n| n.name.clone()).collect();
            out.push(format!(
                "the machine, not the model, was the bottleneck: its CPUs were {} busy while receiving links ran below {} of their line rate (down to {}: {}); {raise}",
                pct(busy),
                pct(RECEIVER_SLOW),
                pct(worst),
                list(&names)
            ));
        }
    }
    // A receiving link near its line rate is the bottleneck the senders share (an incast): their
    // low rates are its fair share, not the machine's doing.
    let judge_senders =
        m.senders_busy_throughout && !m.nics.iter().any(|n| n.rx_bps >= RECEIVER_SLOW * n.line_rate_bps);
    let free: Vec<&NicUse> = m
        .nics
        .iter()
        .filter(|n| {
            judge_senders
                && n.sends
                && n.cnps_received == 0
                && n.retransmitted_packets == 0
                && n.paused_fraction < PAUSED_LITTLE
        })
        .filter(|n| n.tx_bps < SENDER_SLOW * n.line_rate_bps)
        .collect();
    if !free.is_empty() {
        let worst = free.iter().map(|n| n.tx_bps / n.line_rate_bps).fold(f64::INFINITY, f64::min);
        let names: Vec<String> = free.iter().map(|n| n.name.clone()).collect();
        out.push(format!(
            "senders achieved less than {} of their line rate (down to {}: {}) although DCQCN never cut them, PFC barely paused them and nothing was retransmitted: the machine could not keep up with the dilated rates; {raise}",
            pct(SENDER_SLOW),
            pct(worst),
            list(&names)
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use rocefab_contracts::job::{NicReport, QpReport};

    const G400: f64 = 400e9;

    fn nic(name: &str, rx: f64, tx: f64) -> NicUse {
        NicUse {
            name: name.into(),
            line_rate_bps: G400,
            rx_bps: rx * G400,
            sends: tx > 0.0,
            tx_bps: tx * G400,
            paused_fraction: 0.0,
            cnps_received: 0,
            retransmitted_packets: 0,
        }
    }

    /// Issue 41: with two switches on one data-plane worker at D 1 (debug build), a spine's
    /// socket ran out of fill-ring buffers and the kernel dropped 1220 frames of a lossless
    /// class; the report said nothing of them, only of the retransmissions they caused.
    #[test]
    fn frames_the_kernel_dropped_at_a_switch_socket_are_the_machine_whatever_else_ran_well() {
        let m = Measured {
            time_dilation: 1.0,
            cpu_busy: Some(0.5),
            nics: vec![nic("host1:gpu0", 0.99, 0.99)],
            senders_busy_throughout: true,
            links: vec![],
            stalls: vec![],
            kernel_rx_lost: vec![
                PortLoss { name: "spine1:eth2 (from rail2:eth5)".into(), frames: 77 },
                PortLoss { name: "spine2:eth1 (from rail1:eth6)".into(), frames: 1220 },
            ],
            expected_ns: None,
            job_ns: 1_000_000_000,
        };
        let w = warnings(&m);
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(
            w[0].starts_with("the machine, not the model, was the bottleneck: the kernel dropped 1297 frames")
                && w[0].contains("spine2:eth1 (from rail1:eth6) 1220, spine1:eth2 (from rail2:eth5) 77")
                && w[0].contains("raise time_dilation (now 1; try 2)"),
            "{w:?}"
        );
        assert!(warnings(&Measured { kernel_rx_lost: vec![], ..m }).is_empty());
    }

    /// Issue 41: the 512-rank AllReduce of multi-pod-512gpu at D 100 took 665 ms emulated
    /// where the model expects about 10: no other sign fired on every such run.
    #[test]
    fn a_job_far_slower_than_the_model_with_nothing_holding_it_is_the_machine() {
        let m = |job_ns, cnps| Measured {
            time_dilation: 100.0,
            cpu_busy: Some(0.5),
            nics: vec![NicUse { cnps_received: cnps, ..nic("host1:gpu0", 0.99, 0.99) }],
            senders_busy_throughout: false,
            links: vec![],
            stalls: vec![],
            kernel_rx_lost: vec![],
            expected_ns: Some(10_000_000),
            job_ns,
        };
        let w = warnings(&m(665_000_000, 0));
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(
            w[0].contains("the job took 66.50 times what the model expects")
                && w[0].contains("(665.000 ms emulated against 10.000 ms)"),
            "{w:?}"
        );
        // Within the slack, or slowed by DCQCN (the model has no congestion control): no sign.
        assert!(warnings(&m(12_500_000, 0)).is_empty());
        assert_eq!(warnings(&m(12_600_000, 0)).len(), 1);
        assert!(warnings(&m(665_000_000, 3)).is_empty());
        assert!(warnings(&Measured { expected_ns: None, ..m(665_000_000, 0) }).is_empty());
    }

    #[test]
    fn senders_at_their_fair_share_of_a_saturated_receiver_are_not_the_machine() {
        // 7:1 incast: the receiver runs at 99 % of its rate, each sender at 1/7 of its own.
        let mut nics = vec![nic("host1:gpu0", 0.99, 0.0)];
        nics.extend((0..7).map(|i| nic(&format!("s{i}"), 0.0, 0.99 / 7.0)));
        let m = Measured {
            time_dilation: 8000.0,
            cpu_busy: Some(0.5),
            nics,
            senders_busy_throughout: true,
            links: vec![],
            stalls: vec![],
            kernel_rx_lost: vec![],
            expected_ns: None,
            job_ns: 0,
        };
        assert!(warnings(&m).is_empty(), "{:?}", warnings(&m));
        // The same senders with the receiver far below its rate: the machine.
        let mut m = m;
        m.nics[0].rx_bps = 0.2 * G400;
        assert_eq!(warnings(&m).len(), 1, "{:?}", warnings(&m));
    }

    #[test]
    fn proc_stat_parses_and_gives_the_busy_fraction() {
        let a = "cpu  100 0 50 800 50 0 0 0 0 0\ncpu0 50 0 25 400 25 0 0 0 0 0\nintr 1\n";
        let b = "cpu  280 0 90 840 50 5 5 0 0 0\ncpu0 1 1 1 1\n";
        let (ta, tb) = (parse_proc_stat(a).unwrap(), parse_proc_stat(b).unwrap());
        assert_eq!(ta, CpuTimes { busy: 150, total: 1000 });
        assert_eq!(tb, CpuTimes { busy: 380, total: 1270 });
        let f = busy_fraction(ta, tb).unwrap();
        assert!((f - 230.0 / 270.0).abs() < 1e-12, "{f}");
        assert_eq!(busy_fraction(ta, ta), None);
        assert_eq!(parse_proc_stat("intr 1\n"), None);
        assert_eq!(parse_proc_stat("cpu  1 x 3 4\n"), None);
    }

    #[test]
    fn saturated_cpu_with_slow_receivers_warns_with_the_fix() {
        let nics = vec![nic("host1:gpu0", 0.4, 0.0), nic("host2:gpu0", 0.95, 0.0)];
        let m = Measured {
            time_dilation: 8000.0,
            cpu_busy: Some(0.97),
            nics,
            senders_busy_throughout: true,
            links: vec![],
            stalls: vec![],
            kernel_rx_lost: vec![],
            expected_ns: None,
            job_ns: 0,
        };
        let w = warnings(&m);
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(w[0].contains("the machine, not the model, was the bottleneck"), "{w:?}");
        assert!(w[0].contains("97 % busy") && w[0].contains("(down to 40 %: host1:gpu0)"), "{w:?}");
        assert!(w[0].contains("raise time_dilation (now 8000; try 16000)"), "{w:?}");
    }

    #[test]
    fn an_idle_machine_or_full_links_do_not_warn() {
        let slow = vec![nic("host1:gpu0", 0.4, 0.0)];
        let m = |cpu_busy, nics| Measured {
            time_dilation: 1.0,
            cpu_busy,
            nics,
            senders_busy_throughout: true,
            links: vec![],
            stalls: vec![],
            kernel_rx_lost: vec![],
            expected_ns: None,
            job_ns: 0,
        };
        assert!(warnings(&m(Some(0.5), slow.clone())).is_empty());
        assert!(warnings(&m(None, slow)).is_empty());
        let full = vec![nic("host1:gpu0", 0.9, 0.0), nic("host2:gpu0", 0.0, 0.9)];
        assert!(warnings(&m(Some(1.0), full)).is_empty());
    }

    #[test]
    fn a_slow_sender_warns_only_when_nothing_in_the_model_held_it_back() {
        let m = |n: NicUse| {
            warnings(&Measured {
                time_dilation: 4.0,
                cpu_busy: None,
                nics: vec![n],
                senders_busy_throughout: true,
                links: vec![],
                stalls: vec![],
                kernel_rx_lost: vec![],
                expected_ns: None,
                job_ns: 0,
            })
        };
        let w = m(nic("host3:gpu1", 0.0, 0.2));
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(
            w[0].contains("down to 20 %: host3:gpu1") && w[0].contains("raise time_dilation (now 4; try 8)"),
            "{w:?}"
        );
        // DCQCN cut it, PFC paused it, or it lost packets: the model explains the rate.
        assert!(m(NicUse { cnps_received: 3, ..nic("h:g", 0.0, 0.2) }).is_empty());
        assert!(m(NicUse { paused_fraction: 0.5, ..nic("h:g", 0.0, 0.2) }).is_empty());
        assert!(m(NicUse { retransmitted_packets: 1, ..nic("h:g", 0.0, 0.2) }).is_empty());
        assert!(m(nic("h:g", 0.0, 0.8)).is_empty());
        // A chain broadcast's ranks wait for their predecessor: their sending time is not link time.
        let chain = Measured {
            time_dilation: 4.0,
            cpu_busy: None,
            nics: vec![nic("h:g", 0.0, 0.2)],
            senders_busy_throughout: false,
            links: vec![],
            stalls: vec![],
            kernel_rx_lost: vec![],
            expected_ns: None,
            job_ns: 0,
        };
        assert!(warnings(&chain).is_empty());
    }

    #[test]
    fn a_ring_step_of_few_packets_is_latency_bound() {
        // 1 MiB over 512 ranks at path MTU 1024: 2 KiB steps, 2 packets.
        assert!(ring_step_is_latency_bound(1 << 20, 512, 1024));
        // Over 64 ranks: 16 KiB, 16 packets: the senders are busy.
        assert!(!ring_step_is_latency_bound(1 << 20, 64, 1024));
        // 15 packets are not enough; at path MTU 4096 the 64-rank step is 4 packets.
        assert!(ring_step_is_latency_bound(15 * 1024, 1, 1024));
        assert!(ring_step_is_latency_bound(1 << 20, 64, 4096));
    }

    #[test]
    fn nic_use_comes_from_the_emulated_reports() {
        // 1 MB sent in 40 µs emulated by a 400G NIC: 200 Gb/s, half its line rate; 5 MB on the
        // wire while its responder QP received data, for 100 µs: 400 Gb/s. gpu1 received only
        // ACKs: no receiving link to judge.
        let r = Report {
            time_dilation: 8000.0,
            elapsed_ns: 100_000,
            qps: vec![
                QpReport {
                    qpn: 1,
                    nic: "gpu0".into(),
                    send_bytes: 1_000_000,
                    send_done_ns: Some(40_000),
                    ..Default::default()
                },
                QpReport {
                    qpn: 2,
                    nic: "gpu0".into(),
                    recv_bytes: 4_900_000,
                    recv_done_ns: Some(100_000),
                    ..Default::default()
                },
                QpReport {
                    qpn: 3,
                    nic: "gpu1".into(),
                    send_bytes: 1_000_000,
                    send_done_ns: Some(50_000),
                    ..Default::default()
                },
            ],
            nics: vec![
                NicReport {
                    name: "gpu0".into(),
                    line_rate_bps: 400_000_000_000,
                    tx_bytes: 1_000_000,
                    rx_bytes: 5_000_000,
                    pfc_paused_ns_prio3: 2_000,
                    ..Default::default()
                },
                NicReport {
                    name: "gpu1".into(),
                    line_rate_bps: 400_000_000_000,
                    tx_bytes: 1_000_000,
                    rx_bytes: 20_000,
                    ..Default::default()
                },
            ],
            ..Default::default()
        };
        let u = nic_use(&[("host1".into(), r)]);
        assert_eq!(u.len(), 2);
        assert_eq!(u[0].name, "host1:gpu0");
        assert!((u[0].tx_bps - 200e9).abs() < 1.0, "{}", u[0].tx_bps);
        assert!((u[0].rx_bps - 400e9).abs() < 1.0, "{}", u[0].rx_bps);
        assert!((u[0].paused_fraction - 0.05).abs() < 1e-12);
        assert!(u[0].sends && u[1].sends);
        assert!((u[1].tx_bps - 160e9).abs() < 1.0, "{}", u[1].tx_bps);
        assert_eq!(u[1].rx_bps, 0.0, "ACKs only");
        // A saturated machine with that ACK-only link and a full receiver: not the machine.
        let m = Measured {
            time_dilation: 8000.0,
            cpu_busy: Some(1.0),
            nics: u,
            senders_busy_throughout: true,
            links: vec![],
            stalls: vec![],
            kernel_rx_lost: vec![],
            expected_ns: None,
            job_ns: 0,
        };
        assert!(warnings(&m).iter().all(|w| !w.contains("receiving links")), "{:?}", warnings(&m));
    }

    /// The demo's ring AllReduce on rail-spine at D = 16 on a busy machine: receivers at ~42 %,
    /// CPUs at 99 %, but a rail-spine uplink carries two flows at its line rate: the model.
    #[test]
    fn a_switch_link_at_its_line_rate_is_the_models_bottleneck_not_the_machine() {
        use rocefab_contracts::sample::PortSample;
        let port = |name: &str, peer: &str, packets: u64, bytes: u64| {
            let mut p =
                PortSample { name: name.into(), peer: peer.into(), line_rate_bps: 1_000_000_000, ..Default::default() };
            p.tx_packets[3] = packets;
            p.tx_bytes[3] = bytes;
            p.tx_packets[0] = 1;
            p.tx_bytes[0] = 60;
            p
        };
        let sw = |ports| SwitchSample { switch: "rail1".into(), time_dilation: 16.0, ports, ..Default::default() };
        let before = vec![sw(vec![port("eth5", "spine1:eth1", 100, 100_000), port("eth6", "spine2:eth1", 0, 0)])];
        // 0.5 emulated s: 50 000 frames of 1076 bytes (+ 24 on the wire) on eth5 (88 % of its
        // rate), 1 000 on eth6.
        let after = vec![sw(vec![
            port("eth5", "spine1:eth1", 50_100, 100_000 + 50_000 * 1076),
            port("eth6", "spine2:eth1", 1_000, 1_000 * 1076),
        ])];
        let links = link_use(&before, &after, 500_000_000);
        assert_eq!(links.len(), 2);
        assert_eq!(links[0].name, "rail1:eth5 (to spine1:eth1)");
        assert!((links[0].tx_bps - 50_000.0 * 1100.0 * 8.0 / 0.5).abs() < 1.0, "{links:?}");
        assert!((links[1].tx_bps - 1_000.0 * 1100.0 * 8.0 / 0.5).abs() < 1.0, "{links:?}");
        assert!(link_use(&before, &after, 0).is_empty());

        let slow = vec![nic("host1:gpu0", 0.42, 0.0), nic("host2:gpu0", 0.42, 0.42)];
        let m = |links| Measured {
            time_dilation: 16.0,
            cpu_busy: Some(0.99),
            nics: slow.clone(),
            senders_busy_throughout: true,
            links,
            stalls: vec![],
            kernel_rx_lost: vec![],
            expected_ns: None,
            job_ns: 0,
        };
        assert!(warnings(&m(links.clone())).is_empty(), "{:?}", warnings(&m(links.clone())));
        // The same run with every link below 70 % of its rate: the machine.
        let quiet: Vec<LinkUse> =
            links.iter().map(|l| LinkUse { tx_bps: 0.69 * l.line_rate_bps, ..l.clone() }).collect();
        let w = warnings(&m(quiet));
        assert_eq!(w.len(), 2, "{w:?}");
        assert!(w[0].contains("the machine, not the model, was the bottleneck"), "{w:?}");
    }

    /// The issue-23 runs: the bottleneck stalled 71-230 µs (emulated) on a loaded machine whose
    /// average CPU stayed under 90 %, with the bottleneck link near its line rate over the job.
    /// Before the stall check, `warnings` said nothing for them.
    #[test]
    fn a_stalled_bottleneck_port_warns_with_when_and_how_long_even_at_low_cpu() {
        let stall = |name: &str, longest_ns, at| PortStalls {
            name: name.into(),
            count: 3,
            stalled_ns: longest_ns + 300,
            longest_at_ns: Some(at),
            longest_ns,
            // A 2 KiB RoCE frame at 400G: 42 ns.
            frame_ns: 42,
        };
        let full = LinkUse { name: "rail1:eth1 (to host1:gpu0)".into(), line_rate_bps: G400, tx_bps: 0.99 * G400 };
        let m = |stalls, job_ns| Measured {
            time_dilation: 8000.0,
            cpu_busy: Some(0.6),
            nics: vec![nic("host1:gpu0", 0.99, 0.0)],
            senders_busy_throughout: true,
            links: vec![full.clone()],
            stalls,
            kernel_rx_lost: vec![],
            expected_ns: None,
            job_ns,
        };
        let job = 2_000_000; // 2 ms emulated
        let w = warnings(&m(vec![stall("rail1:eth1 (to host1:gpu0)", 71_000, 412_000)], job));
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(
            w[0].starts_with("the machine, not the model, was the bottleneck: switch port rail1:eth1 (to host1:gpu0) had frames queued and sent nothing for 71.3 µs in all (3 stalls, 3.6 % of the job; the longest 71.0 µs at 412.0 µs into the job, 1690 frame times; emulated)"),
            "{w:?}"
        );
        assert!(w[0].ends_with("raise time_dilation (now 8000; try 16000) in the topology and run again"), "{w:?}");
        // Several ports: the most stalled first, the others named.
        let w = warnings(&m(
            vec![
                stall("rail1:eth1 (to host1:gpu0)", 71_000, 412_000),
                stall("spine1:eth2 (to rail1:eth5)", 230_000, 10_000),
            ],
            job,
        ));
        assert!(
            w[0].contains(
                "switch port spine1:eth2 (to rail1:eth5) had frames queued and sent nothing for 230.3 µs in all (3 stalls, 11.5 % of the job; the longest 230.0 µs at 10.0 µs"
            ),
            "{w:?}"
        );
        assert!(w[0].contains("; also rail1:eth1 (to host1:gpu0) (71.3 µs);"), "{w:?}");
        // Below 16 frame times, or below 2 % of the job: not reported.
        let short = |longest_ns, stalled_ns| PortStalls { stalled_ns, ..stall("a", longest_ns, 0) };
        assert!(warnings(&m(vec![short(16 * 42 - 1, 16 * 42 - 1)], 0)).is_empty());
        assert_eq!(warnings(&m(vec![short(16 * 42, 16 * 42)], 0)).len(), 1);
        assert!(warnings(&m(vec![short(39_999, 39_999)], job)).is_empty(), "under 2 % of 2 ms");
        assert_eq!(warnings(&m(vec![short(40_000, 40_000)], job)).len(), 1);
        // Many short stalls adding up to a quarter of the job: not a sign on their own; to half
        // of it, they are.
        assert!(warnings(&m(vec![short(8_000, 500_000)], job)).is_empty());
        assert!(warnings(&m(vec![short(8_000, 999_999)], job)).is_empty());
        assert_eq!(warnings(&m(vec![short(8_000, 1_000_000)], job)).len(), 1);
        assert!(warnings(&m(vec![], job)).is_empty());
    }

    /// The dual-port all-to-all with a port cut at D = 8, the fabric held to one CPU by a cgroup
    /// quota: its QPs ran out of retries and the run said nothing about the machine (the failure
    /// keeps the CPU sign out, and no single stall reached 2 % of the job).
    #[test]
    fn a_port_stalled_for_most_of_a_failed_job_warns() {
        let m = Measured {
            time_dilation: 8.0,
            cpu_busy: None,
            nics: vec![],
            senders_busy_throughout: false,
            links: vec![],
            kernel_rx_lost: vec![],
            expected_ns: None,
            stalls: vec![
                PortStalls {
                    name: "rail1b:eth1 (to host1:gpu0p1)".into(),
                    count: 823,
                    stalled_ns: 482_700_414,
                    longest_at_ns: Some(100_294_786),
                    longest_ns: 8_220_494,
                    frame_ns: 12_304,
                },
                PortStalls {
                    name: "rail1b:eth6 (to spine2:eth2)".into(),
                    count: 266,
                    stalled_ns: 203_512_338,
                    longest_at_ns: Some(88_416_318),
                    longest_ns: 8_125_779,
                    frame_ns: 6_152,
                },
            ],
            job_ns: 473_593_040,
        };
        let w = warnings(&m);
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(
            w[0].starts_with("the machine, not the model, was the bottleneck: switch port rail1b:eth1 (to host1:gpu0p1) had frames queued and sent nothing for 482700.4 µs in all (823 stalls, 101.9 % of the job;"),
            "{w:?}"
        );
        assert!(!w[0].contains("rail1b:eth6"), "43 % of the job in short stalls is not named: {w:?}");
        assert!(w[0].ends_with("raise time_dilation (now 8; try 16) in the topology and run again"), "{w:?}");
    }
}
