//! What `rocefab web` pushes to the page a few times a second: a [`Frame`] computed from the
//! last two `GET /sample` answers of every switch daemon ([`rocefab_contracts::sample`]) and the
//! latest answer of every host running a job ([`rocefab_contracts::host_sample`]). Pure, so the
//! arithmetic is tested without a fabric.
//!
//! Utilisation of a link direction: the wire bytes a switch port sent (its `tx`, for the
//! direction away from the switch) or received (its `rx`, towards it) between two samples, with
//! 24 bytes per frame for preamble, FCS and inter-frame gap, over the emulated time between them
//! (the switch's data-plane clock, [`SwitchSample::clock_ns`]), against the port's emulated
//! line rate. A host link's direction towards the switch is measured at the switch port's rx; a
//! switch-to-switch link's two directions at the two ends' tx. Bytes do not scale with the time
//! dilation D, times and rates do (README "Emulated time"), so the utilisation is the same at
//! any D.
use std::collections::{BTreeMap, BTreeSet};

use dataplane_common::limits::NUM_TC;
use rocefab_contracts::host_sample::HostSample;
use rocefab_contracts::sample::{PortSample, SwitchSample, Thresholds};
use serde::Serialize;

use crate::view::View;

/// Preamble + start delimiter (8), FCS (4) and inter-frame gap (12) per frame, bytes.
pub const WIRE_OVERHEAD_BYTES: u64 = 24;
/// Utilisation from which a direction is congested.
pub const CONGESTED_UTIL: f64 = 0.85;
/// Utilisation below which a direction is idle.
pub const IDLE_UTIL: f64 = 0.01;

/// A sample and the wall-clock Unix time (ns) it was answered.
#[derive(Debug, Clone, PartialEq)]
pub struct Stamped<T> {
    pub wall_unix_ns: u64,
    pub sample: T,
}

/// What the poller knows of one switch daemon.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SwitchObs {
    pub prev: Option<Stamped<SwitchSample>>,
    pub cur: Option<Stamped<SwitchSample>>,
    /// Requests failed in a row.
    pub failures: u32,
    pub last_error: Option<String>,
}

impl SwitchObs {
    /// Takes a new answer: the current one becomes the previous.
    pub fn push(&mut self, s: Stamped<SwitchSample>) {
        self.prev = self.cur.take();
        self.cur = Some(s);
        self.failures = 0;
        self.last_error = None;
    }

    /// A failed request.
    pub fn fail(&mut self, e: String) {
        self.failures = self.failures.saturating_add(1);
        self.last_error = Some(e);
    }

    /// The daemon answers: the last request succeeded, or only one failed since.
    pub fn up(&self) -> bool {
        self.cur.is_some() && self.failures < DOWN_AFTER_FAILURES
    }
}

/// Failed requests in a row after which a daemon is shown as down.
pub const DOWN_AFTER_FAILURES: u32 = 2;

/// One direction of a link.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Dir {
    /// `down`, `unknown`, `idle`, `busy` or `congested`.
    pub state: &'static str,
    /// Fraction of the line rate (None when not measured).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub util: Option<f64>,
    /// Emulated bit/s on the wire.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bps: Option<f64>,
    /// The egress queue feeding this direction holds more than its congestion depth.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub queue_high: bool,
}

impl Dir {
    fn of(state: &'static str) -> Dir {
        Dir { state, util: None, bps: None, queue_high: false }
    }
}

/// One link in a frame: `ab` from end `a` to end `b` (as in [`crate::view::LinkView`]).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LinkLive {
    pub id: usize,
    pub ab: Dir,
    pub ba: Dir,
}

/// One port (of a switch, or a host NIC) in a frame.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct PortLive {
    /// PFC happened at this port in the last interval: it sent or received PFC frames, or its
    /// egress is paused by the peer now.
    pub pfc: bool,
    /// Egress priorities the peer pauses now (bit p).
    pub paused: u8,
    /// PFC frames sent / received in the last interval, every priority.
    pub pfc_tx: u64,
    pub pfc_rx: u64,
    /// Packets marked CE (ECN) at this port in the last interval.
    pub ecn: u64,
    /// Egress queue depths now as the buffer counts them (cells × cell size), per queue.
    #[serde(skip_serializing_if = "is_zero")]
    pub depth: [u64; NUM_TC],
}

fn is_zero(a: &[u64; NUM_TC]) -> bool {
    a.iter().all(|&v| v == 0)
}

/// One switch in a frame.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SwitchLive {
    /// `up`, `down` (the daemon does not answer) or `failed` (`rocefab fail switch`).
    pub state: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub thresholds: Option<Thresholds>,
}

/// One QP of a running job.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct QpLive {
    pub host: String,
    pub job: String,
    /// The QP as its host sends it (the page reads the same fields, flattened).
    #[serde(flatten)]
    pub qp: rocefab_contracts::host_sample::QpSample,
}

/// An entry of the event log.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LogEntry {
    /// Emulated ns since the fabric came up.
    pub t_ns: u64,
    /// `failure`, `restore`, `storm`, `lldp`, `daemon`.
    pub kind: &'static str,
    pub text: String,
}

/// What the page gets a few times a second.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Frame {
    pub seq: u64,
    /// Emulated ns since the fabric came up.
    pub t_ns: u64,
    /// The fabric's run directory is there.
    pub fabric_up: bool,
    pub switches: BTreeMap<String, SwitchLive>,
    pub links: Vec<LinkLive>,
    pub ports: BTreeMap<String, PortLive>,
    pub qps: Vec<QpLive>,
    /// Entries added to the event log since the previous frame.
    pub log: Vec<LogEntry>,
}

/// Everything a frame is computed from.
pub struct Inputs<'a> {
    pub view: &'a View,
    pub switches: &'a BTreeMap<String, SwitchObs>,
    /// (host, its latest sample) of every host running a job.
    pub hosts: &'a [(String, HostSample)],
    /// Links cut (indices as in the view) and switches stopped by `rocefab fail`.
    pub failed_links: &'a BTreeSet<usize>,
    pub failed_switches: &'a BTreeSet<String>,
    /// Time dilation D (to convert wall-clock stamps when a switch's clock did not move).
    pub time_dilation: f64,
}

/// The congestion depth of egress queue `tc`: WRED min on a WRED queue, else xOFF on a lossless
/// priority; None where neither applies.
pub fn congestion_depth(t: &Thresholds, tc: usize) -> Option<u64> {
    if t.wred_queues & (1 << tc) != 0 && t.wred_min_bytes > 0 {
        Some(t.wred_min_bytes)
    } else if t.lossless_priorities & (1 << tc) != 0 && t.xoff_bytes > 0 {
        Some(t.xoff_bytes)
    } else {
        None
    }
}

/// Emulated ns between two samples of one switch: its data-plane clock, or the wall clock ÷ D
/// when the clock is not reported.
fn interval_ns(prev: &Stamped<SwitchSample>, cur: &Stamped<SwitchSample>, d: f64) -> Option<f64> {
    let clock = cur.sample.clock_ns.saturating_sub(prev.sample.clock_ns);
    let dt =
        if clock > 0 { clock as f64 } else { cur.wall_unix_ns.saturating_sub(prev.wall_unix_ns) as f64 / d.max(1.0) };
    (dt > 0.0).then_some(dt)
}

/// Wire bytes sent (`rx` false) or received by a port so far.
fn wire_bytes(p: &PortSample, rx: bool) -> u64 {
    if rx {
        p.rx_bytes + WIRE_OVERHEAD_BYTES * p.rx_packets
    } else {
        p.tx_bytes.iter().sum::<u64>() + WIRE_OVERHEAD_BYTES * p.tx_packets.iter().sum::<u64>()
    }
}

/// The state of a direction with utilisation `util` whose queue is (or is not) above its
/// congestion depth.
pub fn state_of(util: f64, queue_high: bool) -> &'static str {
    if util >= CONGESTED_UTIL || queue_high {
        "congested"
    } else if util < IDLE_UTIL {
        "idle"
    } else {
        "busy"
    }
}

/// A direction measured at port `name` of switch `obs` (tx: away from the switch; rx: towards it).
fn measure(obs: Option<&SwitchObs>, name: &str, rx: bool, d: f64) -> Dir {
    let Some(o) = obs.filter(|o| o.up()) else { return Dir::of("unknown") };
    let (Some(prev), Some(cur)) = (&o.prev, &o.cur) else { return Dir::of("unknown") };
    let (Some(p0), Some(p1)) =
        (prev.sample.ports.iter().find(|p| p.name == name), cur.sample.ports.iter().find(|p| p.name == name))
    else {
        return Dir::of("unknown");
    };
    let Some(dt) = interval_ns(prev, cur, d) else { return Dir::of("unknown") };
    let bytes = wire_bytes(p1, rx).saturating_sub(wire_bytes(p0, rx));
    let bps = bytes as f64 * 8.0 / (dt / 1e9);
    let util = if p1.line_rate_bps > 0 { bps / p1.line_rate_bps as f64 } else { 0.0 };
    let t = &cur.sample.thresholds;
    let queue_high =
        !rx && (0..NUM_TC).any(|tc| congestion_depth(t, tc).is_some_and(|depth| p1.depth_cell_bytes[tc] >= depth));
    Dir { state: state_of(util, queue_high), util: Some(util), bps: Some(bps), queue_high }
}

/// What port `p1` of a switch did since `p0`.
fn port_live(p0: Option<&PortSample>, p1: &PortSample) -> PortLive {
    let sum = |a: &[u64; NUM_TC]| a.iter().sum::<u64>();
    let (tx0, rx0, ecn0) =
        p0.map_or((0, 0, 0), |p| (sum(&p.pfc_tx_frames), sum(&p.pfc_rx_frames), p.ecn_marked + p.ecn_marked_dequeue));
    // Without a previous sample the counters so far are no interval's: nothing happened yet.
    let (pfc_tx, pfc_rx, ecn) = match p0 {
        Some(_) => (
            sum(&p1.pfc_tx_frames).saturating_sub(tx0),
            sum(&p1.pfc_rx_frames).saturating_sub(rx0),
            (p1.ecn_marked + p1.ecn_marked_dequeue).saturating_sub(ecn0),
        ),
        None => (0, 0, 0),
    };
    let paused = p1.paused.iter().enumerate().fold(0u8, |m, (i, &b)| if b { m | 1 << i } else { m });
    PortLive { pfc: pfc_tx > 0 || pfc_rx > 0 || paused != 0, paused, pfc_tx, pfc_rx, ecn, depth: p1.depth_cell_bytes }
}

/// The frame of `inp`, numbered `seq`, at `t_ns` (emulated since up), with `log` the new events.
pub fn frame(inp: &Inputs, seq: u64, t_ns: u64, fabric_up: bool, log: Vec<LogEntry>) -> Frame {
    let d = inp.time_dilation;
    let mut switches = BTreeMap::new();
    let mut ports = BTreeMap::new();
    for n in inp.view.nodes.iter().filter(|n| n.kind != "host") {
        let obs = inp.switches.get(&n.name);
        let state = if inp.failed_switches.contains(&n.name) {
            "failed"
        } else if obs.is_some_and(SwitchObs::up) {
            "up"
        } else {
            "down"
        };
        let cur = obs.and_then(|o| o.cur.as_ref());
        switches.insert(
            n.name.clone(),
            SwitchLive {
                state,
                error: obs.and_then(|o| o.last_error.clone()).filter(|_| state != "up"),
                thresholds: cur.map(|c| c.sample.thresholds.clone()),
            },
        );
        if state != "up" {
            continue;
        }
        let (Some(o), Some(cur)) = (obs, cur) else { continue };
        for p1 in &cur.sample.ports {
            let p0 = o.prev.as_ref().and_then(|p| p.sample.ports.iter().find(|x| x.name == p1.name));
            ports.insert(format!("{}:{}", n.name, p1.name), port_live(p0, p1));
        }
    }
    // Host NICs: paused or PFC received, from the jobs' samples.
    for (host, s) in inp.hosts {
        for nic in &s.nics {
            let e: &mut PortLive = ports.entry(format!("{host}:{}", nic.name)).or_default();
            if nic.paused {
                e.paused |= 1 << (nic.data_priority & 7);
                e.pfc = true;
            }
        }
    }
    let links = inp
        .view
        .links
        .iter()
        .map(|l| {
            let down = inp.failed_links.contains(&l.id)
                || [&l.a, &l.b].iter().any(|e| inp.failed_switches.contains(e.split(':').next().unwrap_or_default()));
            if down {
                return LinkLive { id: l.id, ab: Dir::of("down"), ba: Dir::of("down") };
            }
            let end = |spec: &str| {
                let (node, port) = spec.split_once(':').unwrap_or((spec, ""));
                (node.to_string(), port.to_string())
            };
            let ((an, ap), (bn, bp)) = (end(&l.a), end(&l.b));
            let a_switch = inp.view.node(&an).is_some_and(|n| n.kind != "host");
            // a → b: a's tx when a is a switch, else b's rx; b → a: b's tx.
            let ab = if a_switch {
                measure(inp.switches.get(&an), &ap, false, d)
            } else {
                measure(inp.switches.get(&bn), &bp, true, d)
            };
            let ba = measure(inp.switches.get(&bn), &bp, false, d);
            LinkLive { id: l.id, ab, ba }
        })
        .collect();
    let qps = inp
        .hosts
        .iter()
        .flat_map(|(host, s)| {
            s.qps.iter().map(move |q| QpLive { host: host.clone(), job: s.job.clone(), qp: q.clone() })
        })
        .collect();
    Frame { seq, t_ns, fabric_up, switches, links, ports, qps, log }
}

/// `12.345 ms`: an emulated duration for the event log.
pub fn fmt_t(ns: u64) -> String {
    control::units::fmt_ns(ns as f64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::view::{LinkView, NodeView, PortView};
    use rocefab_contracts::host_sample::{NicSample, QpSample};

    fn node(name: &str, kind: &'static str, ports: &[&str]) -> NodeView {
        NodeView {
            name: name.into(),
            kind,
            pod: None,
            x: 0.0,
            y: 0.0,
            w: 10.0,
            h: 10.0,
            ports: ports
                .iter()
                .map(|p| PortView { name: p.to_string(), peer: String::new(), x: 0.0, y: 0.0, rail: None })
                .collect(),
        }
    }

    fn link(id: usize, a: &str, b: &str) -> LinkView {
        LinkView {
            id,
            a: a.into(),
            b: b.into(),
            class: "x",
            line_rate_bps: 100_000_000,
            ax: 0.0,
            ay: 0.0,
            bx: 0.0,
            by: 0.0,
            rail: None,
        }
    }

    /// host1:gpu0 -- rail1:eth1 (100 Mbit/s), rail1:eth2 -- spine1:eth1.
    fn view() -> View {
        View {
            fabric: "t".into(),
            time_dilation: 1.0,
            width: 1.0,
            height: 1.0,
            nodes: vec![
                node("host1", "host", &["gpu0"]),
                node("rail1", "rail", &["eth1", "eth2"]),
                node("spine1", "spine", &["eth1"]),
            ],
            links: vec![link(0, "host1:gpu0", "rail1:eth1"), link(1, "rail1:eth2", "spine1:eth1")],
        }
    }

    fn thresholds() -> Thresholds {
        Thresholds {
            wred_min_bytes: 150_000,
            wred_max_bytes: 3_000_000,
            wred_queues: 0,
            xoff_bytes: 64_000,
            xon_bytes: 16_000,
            lossless_priorities: 1 << 3,
            cell_bytes: 256,
        }
    }

    fn port(name: &str, tx_frames: u64, rx_frames: u64) -> PortSample {
        let mut p = PortSample { name: name.into(), line_rate_bps: 100_000_000, ..Default::default() };
        // 1000-byte frames: 1024 bytes on the wire each.
        p.tx_packets[3] = tx_frames;
        p.tx_bytes[3] = tx_frames * 1_000;
        p.rx_packets = rx_frames;
        p.rx_bytes = rx_frames * 1_000;
        p
    }

    fn sample(name: &str, clock_ns: u64, ports: Vec<PortSample>) -> Stamped<SwitchSample> {
        Stamped {
            wall_unix_ns: clock_ns,
            sample: SwitchSample {
                switch: name.into(),
                time_dilation: 1.0,
                thresholds: thresholds(),
                clock_ns,
                ports,
                ..Default::default()
            },
        }
    }

    fn inputs<'a>(
        v: &'a View,
        sw: &'a BTreeMap<String, SwitchObs>,
        hosts: &'a [(String, HostSample)],
        fl: &'a BTreeSet<usize>,
        fs: &'a BTreeSet<String>,
    ) -> Inputs<'a> {
        Inputs { view: v, switches: sw, hosts, failed_links: fl, failed_switches: fs, time_dilation: 1.0 }
    }

    #[test]
    fn utilisation_per_direction_from_counter_deltas_over_emulated_time() {
        let v = view();
        let mut rail1 = SwitchObs::default();
        rail1.push(sample("rail1", 1_000_000_000, vec![port("eth1", 0, 0), port("eth2", 0, 0)]));
        // 200 ms later: 2,400 frames (19.66 Mbit) out of eth1 towards host1: 98.3 % of 100 Mbit/s;
        // 240 frames in from host1 (9.8 %); nothing on eth2; eth1's queue 3 above xOFF.
        let mut e1 = port("eth1", 2_400, 240);
        e1.depth_cell_bytes[3] = 70_000;
        rail1.push(sample("rail1", 1_200_000_000, vec![e1, port("eth2", 0, 0)]));
        let mut sw = BTreeMap::from([("rail1".to_string(), rail1)]);
        let (fl, fs) = (BTreeSet::new(), BTreeSet::new());
        let f = frame(&inputs(&v, &sw, &[], &fl, &fs), 1, 5, true, vec![]);
        let host = &f.links[0];
        // a = host1 → rail1: rail1's rx; b → a: rail1's tx.
        assert_eq!(host.ab.state, "busy");
        assert!((host.ab.util.unwrap() - 0.098304).abs() < 1e-9, "{:?}", host.ab);
        assert_eq!((host.ba.state, host.ba.queue_high), ("congested", true));
        assert!((host.ba.util.unwrap() - 0.98304).abs() < 1e-9, "{:?}", host.ba);
        let up = &f.links[1];
        assert_eq!(up.ab.state, "idle");
        assert_eq!(up.ba.state, "unknown", "spine1 never answered");
        assert_eq!(f.switches["spine1"].state, "down");
        assert_eq!(f.switches["rail1"].state, "up");
        assert_eq!(f.ports["rail1:eth1"].depth[3], 70_000);

        // The same traffic at D = 1000 over a clock that moved the same emulated time: the same.
        let mut slow = sw["rail1"].clone();
        for s in [&mut slow.prev, &mut slow.cur].into_iter().flatten() {
            s.wall_unix_ns *= 1000;
            s.sample.time_dilation = 1000.0;
        }
        sw.insert("rail1".into(), slow);
        let mut inp = inputs(&v, &sw, &[], &fl, &fs);
        inp.time_dilation = 1000.0;
        assert_eq!(frame(&inp, 2, 5, true, vec![]).links[0].ba.util, host.ba.util);
    }

    #[test]
    fn pfc_and_ecn_of_the_interval_and_pauses_now() {
        let v = view();
        let mut rail1 = SwitchObs::default();
        rail1.push(sample("rail1", 0, vec![port("eth1", 0, 0), port("eth2", 0, 0)]));
        let mut e2 = port("eth2", 0, 0);
        e2.pfc_tx_frames[3] = 3;
        e2.ecn_marked = 5;
        let mut e1 = port("eth1", 0, 0);
        e1.paused[3] = true;
        rail1.push(sample("rail1", 100, vec![e1, e2]));
        let sw = BTreeMap::from([("rail1".to_string(), rail1)]);
        let hosts = vec![(
            "host1".to_string(),
            HostSample {
                job: "incast".into(),
                elapsed_ns: 1,
                qps: vec![QpSample { qpn: 7, label: "r1->r0".into(), sender: true, rate_bps: 5, ..Default::default() }],
                nics: vec![NicSample { name: "gpu0".into(), data_priority: 3, paused: true, ..Default::default() }],
            },
        )];
        let (fl, fs) = (BTreeSet::new(), BTreeSet::new());
        let f = frame(&inputs(&v, &sw, &hosts, &fl, &fs), 1, 0, true, vec![]);
        let p = &f.ports["rail1:eth2"];
        assert_eq!((p.pfc, p.pfc_tx, p.pfc_rx, p.ecn, p.paused), (true, 3, 0, 5, 0));
        let p = &f.ports["rail1:eth1"];
        assert_eq!((p.pfc, p.paused, p.pfc_tx), (true, 1 << 3, 0));
        let h = &f.ports["host1:gpu0"];
        assert_eq!((h.pfc, h.paused), (true, 1 << 3));
        assert_eq!((f.qps.len(), f.qps[0].host.as_str(), f.qps[0].job.as_str()), (1, "host1", "incast"));
        // Counters seen for the first time are no interval's PFC.
        let mut first = SwitchObs::default();
        first.push(sample(
            "rail1",
            100,
            vec![port("eth1", 0, 0), {
                let mut p = port("eth2", 0, 0);
                p.pfc_tx_frames[3] = 9;
                p
            }],
        ));
        let sw = BTreeMap::from([("rail1".to_string(), first)]);
        let f = frame(&inputs(&v, &sw, &[], &fl, &fs), 1, 0, true, vec![]);
        assert!(!f.ports["rail1:eth2"].pfc);
    }

    #[test]
    fn failed_links_switches_and_silent_daemons() {
        let v = view();
        let mut rail1 = SwitchObs::default();
        rail1.push(sample("rail1", 0, vec![port("eth1", 0, 0), port("eth2", 0, 0)]));
        rail1.push(sample("rail1", 100, vec![port("eth1", 0, 0), port("eth2", 0, 0)]));
        rail1.fail("connect refused".into());
        assert!(rail1.up(), "one failure is not down yet");
        rail1.fail("connect refused".into());
        assert!(!rail1.up());
        let sw = BTreeMap::from([("rail1".to_string(), rail1)]);
        let fl = BTreeSet::from([0]);
        let fs = BTreeSet::from(["spine1".to_string()]);
        let f = frame(&inputs(&v, &sw, &[], &fl, &fs), 1, 0, true, vec![]);
        assert_eq!((f.links[0].ab.state, f.links[0].ba.state), ("down", "down"));
        assert_eq!((f.links[1].ab.state, f.links[1].ba.state), ("down", "down"));
        assert_eq!(f.switches["spine1"].state, "failed");
        assert_eq!(f.switches["rail1"].state, "down");
        assert_eq!(f.switches["rail1"].error.as_deref(), Some("connect refused"));
        assert!(f.ports.is_empty(), "a silent daemon's ports are not shown as live");
    }

    #[test]
    fn congestion_depth_follows_the_queue_kind() {
        let mut t = thresholds();
        assert_eq!(congestion_depth(&t, 3), Some(64_000));
        assert_eq!(congestion_depth(&t, 0), None);
        t.wred_queues = 1 << 3;
        assert_eq!(congestion_depth(&t, 3), Some(150_000));
        assert_eq!(state_of(0.5, false), "busy");
        assert_eq!(state_of(0.9, false), "congested");
        assert_eq!(state_of(0.0, true), "congested");
        assert_eq!(state_of(0.001, false), "idle");
    }
}
