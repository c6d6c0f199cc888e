//! DCQCN end to end on `topologies/rail-spine-400g.yaml` (400G hosts, 800G spines, time dilation
//! 8000, the `hpcc-dcqcn-paper` DCQCN profile; issue 9): a 7:1 lossless incast into host1:gpu0 with
//! WRED/ECN on. The bottleneck queue
//! (rail1 towards host1:gpu0) must first reach WRED min; then rail1's XDP marks CE, rank 0's NIC
//! answers with CNPs at DSCP 48 that cross the switches in strict queue 7, and every sender's
//! DCQCN rate is cut below line rate. The same incast with `wred: off` needs more PFC frames (the
//! book's claim that ECN keeps PFC rare). `rocefab run --timeline` writes the Figure 11-7 SVG and
//! its samples during the run; both are checked for every series. The senders' goodput must be
//! fair (Jain's index ≥ 0.9), their rates once DCQCN acts within the spread ns-3 HPCC gives on
//! the same scenario (`sim/ns3-hpcc/rail-spine-incast/`), and the bottleneck busy ≥ 90 % of its
//! emulated rate while every sender had data left.
//!
//! A run whose report says the machine, not the model, was the bottleneck (`rocefab run`'s
//! warning: CPUs saturated while links ran below rate) measured the machine: it is retried, up to
//! [`ATTEMPTS`] runs, and the test fails if every run was machine-bound. Each retry is printed.
//!
//! Dilation invariance (issue 9, test 4): the same incast at D = 8000 and D = 16000, with
//! `rocefab run`'s default window and two runs per D, gives the mean completion time, the
//! senders' goodputs and the bottleneck's peak depth within 10 % in emulated units. The
//! goodputs are compared sorted (the slowest at D with the slowest at 2D, and so on): which
//! sender draws the marks and runs slower is random from run to run at the same D. With the
//! 4096-packet windows of the first test the peak is not comparable from one run to the next
//! even at the same D (6.4–10.5 MB: with at most one cut per 50 µs, how far the first burst goes
//! depends on which sender's first CNP comes late); with the default windows the senders' windows
//! bound it.
//! Needs root.
use std::process::Command;

use rocefab_tests::fabric::{metric, rocefab_bin, Fabric};
use rocefab_tests::scratch::TempFile;
use serde_json::Value;

/// Window of 4096 packets per QP: large enough that the incast can fill rail1's ingress groups
/// past xOFF when nothing else stops it, so that PFC has something to do.
const WINDOW: &str = "4096";

/// Runs per measurement before a machine that stays saturated fails the test.
const ATTEMPTS: u32 = 3;

/// `rocefab run`'s warning that the CPUs, not the emulated links, limited the run.
/// The bottleneck's time-weighted average depth (bytes) from the moment every sender had its
/// first CNP (the timeline's `cnps`, per sender) to the end of the bottleneck's busy period
/// (`bottleneck.utilisation.to_us`), from the timeline's `depth` samples (each held until the
/// next); and that window, µs. Panics when the window holds fewer than 20 samples.
fn steady_average_depth(t: &Value) -> (f64, f64, f64) {
    let first_cnp = |s: &Value| {
        s["points"].as_array()?.iter().find(|p| p["v"].as_f64().unwrap_or(0.0) > 0.0).and_then(|p| p["t_us"].as_f64())
    };
    let senders = t["cnps"].as_array().expect("cnps in the timeline");
    let from = senders
        .iter()
        .map(|s| first_cnp(s).unwrap_or_else(|| panic!("{} never got a CNP", s["name"])))
        .fold(0.0, f64::max);
    steady_average_depth_from(t, from)
}

/// The bottleneck's time-weighted average depth from `from` µs to the end of its busy period.
fn steady_average_depth_from(t: &Value, from: f64) -> (f64, f64, f64) {
    let to = t["bottleneck"]["utilisation"]["to_us"].as_f64().expect("the busy period's end in the timeline");
    let depth: Vec<(f64, f64)> = t["depth"]
        .as_array()
        .expect("depth in the timeline")
        .iter()
        .map(|p| (p["t_us"].as_f64().unwrap(), p["v"].as_f64().unwrap()))
        .collect();
    let inside = depth.iter().filter(|(at, _)| (from..to).contains(at)).count();
    assert!(inside >= 20, "{inside} depth samples between every sender's first CNP ({from} us) and {to} us");
    let (mut area, mut span) = (0.0, 0.0);
    for w in depth.windows(2) {
        let (a, b) = (w[0].0.max(from), w[1].0.min(to));
        if b > a {
            area += w[0].1 * (b - a);
            span += b - a;
        }
    }
    (area / span, from, to)
}

fn machine_bound(rep: &Value) -> Option<String> {
    rep["warnings"]
        .as_array()?
        .iter()
        .filter_map(Value::as_str)
        .find(|w| w.contains("the machine, not the model"))
        .map(str::to_string)
}

/// `run(attempt)` until its report is not machine-bound; its result.
fn measured<T>(what: &str, mut run: impl FnMut(u32) -> (Value, T)) -> T {
    let mut why = Vec::new();
    for attempt in 1..=ATTEMPTS {
        let (rep, out) = run(attempt);
        match machine_bound(&rep) {
            None => return out,
            Some(w) => {
                eprintln!("{what}: attempt {attempt} of {ATTEMPTS} was machine-bound, not counted: {w}");
                why.push(w);
            }
        }
    }
    panic!("{what}: all {ATTEMPTS} runs were limited by this machine's CPUs, not by the model: {why:?}");
}

/// `rocefab run <fabric> incast --size 4MiB --json --window-packets 4096` plus `extra`; the
/// JSON report.
fn incast(f: &Fabric, extra: &[&str]) -> Value {
    incast_with(f, &["--window-packets", WINDOW], extra)
}

/// `rocefab run <fabric> incast --size 4MiB --json` plus `window` and `extra`; the JSON report.
fn incast_with(f: &Fabric, window: &[&str], extra: &[&str]) -> Value {
    let o = Command::new(rocefab_bin())
        .args(["run", &f.name, "incast", "--size", "4MiB", "--json", "--timeout", "120"])
        .args(window)
        .args(extra)
        .output()
        .expect("rocefab run");
    assert!(o.status.success(), "rocefab run failed:\n{}", String::from_utf8_lossy(&o.stderr));
    serde_json::from_slice(&o.stdout).expect("report JSON")
}

/// Senders cut by DCQCN: the median of their slowest unpaused ingress rates below a twentieth
/// of the 400 Gbit/s line rate. The paper's α starts at 1 and every CNP that follows within the
/// 50 µs timer halves the rate again, so the cuts go far below the fair share (400/7 =
/// 57 Gbit/s). On 2026-11-28, three runs with ECN: medians 6.2, 5.3 and 5.3 Gbit/s (single
/// senders 3.6-34 Gbit/s: one sender mostly held by PFC has few unpaused intervals); two
/// without: medians 98 and 48.6 Gbit/s (single senders 29.7-140). Per sender the two overlap,
/// so the check is on the median, and the ECN-off run checks that it fails there.
const CUT_BPS: f64 = 20e9;

/// The median over the senders of [`ingress_cuts`]' slowest rates (a sender without an
/// unpaused interval counts as not cut).
fn median_slowest(cut: &[(String, Option<f64>)]) -> f64 {
    let mut v: Vec<f64> = cut.iter().map(|(_, s)| s.unwrap_or(f64::INFINITY)).collect();
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// 65535 quanta at 400 Gbit/s: the longest a PFC frame holds a sender, emulated ns.
const PAUSE_NS: u64 = 83_886;

/// Per sender (the peer of a switch port that is a GPU other than rank 0's): the rate at which
/// its frames entered the fabric from `from_us` to `to_us` of the job (emulated, the timeline's
/// clock: a switch sample's `t_ns` / 1000 / D), bits per emulated second, from its switch port's
/// `rx_bytes` at the first and the last sample inside that window.
fn ingress_rates_between(samples: &Value, d: f64, from_us: f64, to_us: f64) -> Vec<(String, f64)> {
    let names = samples["switches"].as_array().unwrap().len();
    let mut out = Vec::new();
    for si in 0..names {
        let seq: Vec<(f64, &Vec<Value>)> = samples["rounds"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|r| r["switches"].get(si).filter(|x| !x.is_null()))
            .map(|x| (x["t_ns"].as_u64().unwrap() as f64 / 1e3 / d, x["sample"]["ports"].as_array().unwrap()))
            .filter(|(t, _)| (from_us..=to_us).contains(t))
            .collect();
        let (Some(first), Some(last)) = (seq.first(), seq.last()) else { continue };
        if last.0 <= first.0 {
            continue;
        }
        for (pi, port) in last.1.iter().enumerate() {
            let peer = port["peer"].as_str().unwrap_or_default();
            if !peer.contains(":gpu") || peer == "host1:gpu0" {
                continue;
            }
            let rx = |ports: &Vec<Value>| ports[pi]["rx_bytes"].as_u64().unwrap() as f64;
            out.push((peer.to_string(), (rx(last.1) - rx(first.1)) * 8.0 / ((last.0 - first.0) * 1e-6)));
        }
    }
    out
}

/// Per sender (the peer of a switch port that is a GPU other than rank 0's): the lowest rate at
/// which its frames entered the fabric (bits per emulated second, from its switch port's
/// `rx_bytes` between two samples of the timeline) over an interval in the middle of its
/// sending (it sent in the intervals before and after) in which its switch sent it no PFC frame
/// for the longest pause before: what only its own rate control can have slowed.
fn ingress_cuts(samples: &Value) -> Vec<(String, Option<f64>)> {
    let names: Vec<&str> = samples["switches"].as_array().unwrap().iter().map(|n| n.as_str().unwrap()).collect();
    let mut out = Vec::new();
    for (si, _) in names.iter().enumerate() {
        // (clock ns, ports) of this switch, in order.
        let seq: Vec<(u64, &Vec<Value>)> = samples["rounds"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|r| r["switches"].get(si).filter(|x| !x.is_null()))
            .map(|x| (x["sample"]["clock_ns"].as_u64().unwrap(), x["sample"]["ports"].as_array().unwrap()))
            .collect();
        let Some((_, ports)) = seq.last() else { continue };
        for (pi, port) in ports.iter().enumerate() {
            let peer = port["peer"].as_str().unwrap_or_default();
            if !peer.contains(":gpu") || peer == "host1:gpu0" {
                continue;
            }
            let rx = |k: usize| seq[k].1[pi]["rx_bytes"].as_u64().unwrap();
            let pfc = |k: usize| seq[k].1[pi]["pfc_tx_frames"][3].as_u64().unwrap();
            let mut slowest: Option<f64> = None;
            // The interval k..k+1, with traffic in the one before and the one after it.
            for k in 1..seq.len().saturating_sub(2) {
                let (t0, t1) = (seq[k].0, seq[k + 1].0);
                let sending = rx(k) > rx(k - 1) && rx(k + 1) > rx(k) && rx(k + 2) > rx(k + 1);
                // The sample a whole pause before the interval: no PFC frame since then.
                let Some(quiet_from) = (0..=k).rev().find(|&j| seq[j].0 + PAUSE_NS <= t0) else { continue };
                if !sending || t1 <= t0 || pfc(k + 1) != pfc(quiet_from) {
                    continue;
                }
                let bps = (rx(k + 1) - rx(k)) as f64 * 8e9 / (t1 - t0) as f64;
                slowest = Some(slowest.map_or(bps, |s| s.min(bps)));
            }
            out.push((peer.to_string(), slowest));
        }
    }
    out
}

/// Jain's fairness index of `x`: (Σx)² / (n·Σx²), 1 when all are equal.
fn jain_index(x: &[f64]) -> f64 {
    x.iter().sum::<f64>().powi(2) / (x.len() as f64 * x.iter().map(|v| v * v).sum::<f64>())
}

/// The smallest of `x` over the largest.
fn min_over_max(x: &[f64]) -> f64 {
    x.iter().copied().fold(f64::INFINITY, f64::min) / x.iter().copied().fold(0.0, f64::max)
}

/// PFC frames every switch of the fabric sent, all ports and priorities.
fn switch_pfc_frames(f: &Fabric) -> f64 {
    f.metric_sum(&["rail1", "rail2", "spine1", "spine2"], "rocefab_pfc_tx_frames_total", &[])
}

#[test]
fn ecn_marks_cnps_in_the_strict_queue_cut_every_sender_and_pfc_stays_rarer_than_without_ecn() {
    let svg = TempFile::new("rf-dcqcn-timeline.svg");
    let json = TempFile::new("rf-dcqcn-timeline.json");
    let on = measured("ECN on", |_| {
        let f = Fabric::up("rail-spine-400g.yaml", "rfq");
        assert_eq!(f.config("rail1").time_dilation, 8000.0);
        let to_rank0 = f.port_to("rail1", "host1:gpu0");
        let port = format!("rail1:{to_rank0}");
        let rep = incast(
            &f,
            &["--timeline", svg.to_str().unwrap(), "--timeline", json.to_str().unwrap(), "--timeline-port", &port],
        );
        assert_eq!(rep["ok"], true, "{rep}");
        assert_eq!(rep["time_dilation"], 8000.0);
        let tl: Value = serde_json::from_str(&std::fs::read_to_string(&*json).expect("timeline JSON")).unwrap();
        let t = &tl["timeline"];
        // The congestion happened: rail1's queue 3 towards rank 0 went past WRED min. (With
        // these windows rail2's uplinks can congest too when ECMP puts three of its four
        // cross-rail senders on one spine: 1200G into 800G.)
        assert_eq!(
            (t["bottleneck"]["switch"].as_str(), t["bottleneck"]["port"].as_str(), t["bottleneck"]["tc"].as_u64()),
            (Some("rail1"), Some(to_rank0.as_str()), Some(3)),
            "{}",
            t["bottleneck"]
        );
        let peak = t["bottleneck"]["peak_depth_bytes"].as_f64().unwrap();
        assert!(peak >= 150_000.0, "the bottleneck queue peaked at {peak} bytes, below WRED min");
        // rail1 marked; rank 0's NIC sent CNPs; each one crossed rail1 in strict queue 7 (to a
        // local sender or towards a spine).
        let m = f.metrics("rail1");
        assert!(metric(&m, "rocefab_xdp_ecn_marked_total", &[]) > 0.0, "no CE marks at rail1");
        let marked: f64 = ["rail1", "rail2", "spine1", "spine2"]
            .iter()
            .map(|s| metric(&f.metrics(s), "rocefab_xdp_ecn_marked_total", &[]))
            .sum();
        let cnps = rep["cnps_sent"].as_f64().unwrap();
        assert!(cnps > 0.0 && cnps <= marked, "CNPs {cnps}, marks {marked}");
        let q7: f64 = f
            .config("rail1")
            .ports
            .iter()
            .filter(|p| p.name != to_rank0)
            .map(|p| metric(&m, "rocefab_queue_dequeued_packets_total", &[("port", &p.name), ("queue", "7")]))
            .sum();
        assert!(q7 >= cnps, "rail1 forwarded {q7} frames in queue 7, fewer than the {cnps} CNPs");
        // Every sender got CNPs and its DCQCN rate went below line rate during the run.
        let qps = rep["qps"].as_array().unwrap();
        assert_eq!(qps.len(), 7);
        for q in qps {
            assert!(q["cnps_received"].as_u64().unwrap() > 0, "{q}");
        }
        let rates = t["rates"].as_array().unwrap();
        assert_eq!(rates.len(), 7, "a DCQCN rate series per sender");
        for r in rates {
            let min =
                r["points"].as_array().unwrap().iter().map(|p| p["v"].as_f64().unwrap()).fold(f64::INFINITY, f64::min);
            assert!(min < 400e9 * 0.6, "{}: DCQCN rate never cut (min {min})", r["name"]);
        }
        // The senders slowed down on their own, measured where their frames enter the fabric
        // (the switches' ingress counters in the timeline's samples), not by the NICs' own rate.
        let cut = ingress_cuts(&tl["samples"]);
        eprintln!("ECN on, ingress: {cut:?}");
        assert_eq!(cut.len(), 7, "a sender per ingress port: {cut:?}");
        let m = median_slowest(&cut);
        assert!(m < CUT_BPS, "the senders' median slowest unpaused ingress rate {m} b/s is no DCQCN cut: {cut:?}");
        assert!(
            t["ecn_marks"].as_array().unwrap().iter().any(|p| p["v"].as_f64().unwrap() > 0.0),
            "no marks in the timeline"
        );
        assert_eq!(t["cnps"].as_array().unwrap().len(), 7);
        // The picture holds every series and threshold.
        let text = std::fs::read_to_string(&*svg).expect("timeline SVG");
        assert!(text.starts_with("<svg") || text.starts_with("<?xml"), "not an SVG");
        for label in ["WRED min", "WRED max", "xOFF", "xON", "rank 1 -&gt; rank 0", "rank 7 -&gt; rank 0"] {
            assert!(text.contains(label), "the SVG lacks {label:?}");
        }
        let g: Vec<f64> = qps.iter().map(|q| q["goodput_bps"].as_f64().unwrap()).collect();
        let jain = jain_index(&g);
        let util = t["bottleneck"]["utilisation"]["fraction"].as_f64();
        eprintln!("ECN on: JCT {} µs, Jain {jain:.3}, bottleneck utilisation {util:?}, CNPs {cnps}, marks {marked}, peak {peak} B", rep["completion_ns"].as_f64().unwrap() / 1e3);
        let pfc = switch_pfc_frames(&f);
        let spread = min_over_max(&g);
        let avg = t["bottleneck"]["average_depth_bytes"].as_f64().expect("average depth in the timeline");
        let (steady, from_us, to_us) = steady_average_depth(t);
        eprintln!(
            "ECN on: min/max goodput {spread:.3}, bottleneck average depth {avg:.0} B over the job, {steady:.0} B \
             from every sender's first CNP ({from_us:.1} us) to the end of the busy period ({to_us:.1} us)"
        );
        if machine_bound(&rep).is_none() {
            assert!(jain >= 0.9, "Jain's index of the senders' goodput {jain:.3} < 0.9: {g:?}");
            // Jain >= 0.9 on goodput passes one sender of seven at 20 % of the others. Here the
            // senders' rates once DCQCN acts (from every sender's first CNP to the end of the busy
            // period, at the switch ingress) must be within what a correct DCQCN gives on this
            // scenario in an independent model: ns-3 HPCC, the same 7:1 incast with rocefab's
            // thresholds per packet (sim/ns3-hpcc/rail-spine-incast/, ten seeds): min/max
            // 0.592-0.958 (five of ten below 0.7), Jain of the rates 0.964-1.000. So min/max >=
            // 0.55 and Jain >= 0.95; a sender at a fifth of the others fails both (Jain 0.91). The
            // bound was 0.7, from rocefab's own runs (0.675-0.91; fresh-clone CI runs at 0.639 and
            // 0.675), before ns-3 showed that a correct DCQCN goes below it half the time here.
            let rates = ingress_rates_between(&tl["samples"], 8000.0, from_us, to_us);
            assert_eq!(rates.len(), 7, "{rates:?}");
            let r: Vec<f64> = rates.iter().map(|r| r.1).collect();
            let (fair, jain_rates) = (min_over_max(&r), jain_index(&r));
            eprintln!(
                "ECN on: ingress rates once every sender was cut: min/max {fair:.3}, Jain {jain_rates:.4}: {rates:?}"
            );
            assert!(
                fair >= 0.55,
                "slowest sender's ingress rate once DCQCN acts is {fair:.3} of the fastest: {rates:?}"
            );
            assert!(
                jain_rates >= 0.95,
                "Jain's index of the senders' ingress rates once DCQCN acts is {jain_rates:.4}: {rates:?}"
            );
            // PFC bounds the peak: each of the five ingress groups feeding the queue at xOFF plus
            // its headroom. (The queue does not stay between WRED min and max, which the README
            // used to claim: with 4096-packet windows the first burst runs until the first CNPs
            // take effect, 5.6-7.9 MB, and the paper's DCQCN at 400G drains that backlog slower
            // than this 0.7 ms job lasts. Measured 2026-11-29, binaries before and after the NP
            // change alike: time-weighted average 2.6-3.8 MB over the job, 3.1-4.7 MB from every
            // sender's first CNP on; a 32 MiB job drains it, 209 kB, but leaves the link 29 %
            // busy. docs/src/wred-ecn-dcqcn.md has the runs.)
            assert!(peak <= 5.0 * (3_200_000.0 + 512_000.0), "peak {peak} B beyond what PFC allows");
            let util = util.expect("utilisation in the timeline");
            assert!(util >= 0.9, "bottleneck utilisation {util:.3} < 0.9 while every sender had data left");
        }
        (rep, (pfc, steady))
    });
    let off = measured("ECN off", |_| {
        let f = Fabric::up_with("rail-spine-400g.yaml", "rfq0", "  wred: off\n");
        assert_eq!(f.config("rail1").qos.wred.queues, 0, "the appended key lands in qos");
        let rep = incast(&f, &["--timeline", json.to_str().unwrap()]);
        assert_eq!(rep["ok"], true, "{rep}");
        assert_eq!(rep["cnps_sent"], 0);
        // The ingress measure tells a rate cut from a pause: without DCQCN's cuts, a sender its
        // switch did not pause entered the fabric at its line rate.
        let tl: Value = serde_json::from_str(&std::fs::read_to_string(&*json).expect("timeline JSON")).unwrap();
        let cut = ingress_cuts(&tl["samples"]);
        eprintln!("ECN off, ingress: {cut:?}");
        if machine_bound(&rep).is_none() {
            let m = median_slowest(&cut);
            assert!(
                m >= CUT_BPS,
                "without ECN the median sender went below {CUT_BPS} b/s unpaused ({m}): the ECN run's check cannot tell a cut: {cut:?}"
            );
        }
        let pfc = switch_pfc_frames(&f);
        let (steady, _, _) = steady_average_depth_from(&tl["timeline"], 0.0);
        (rep, (pfc, steady))
    });
    let ((on, depth_on), (off, depth_off)) = (on, off);
    eprintln!("PFC frames sent by the switches: ECN on {on}, ECN off {off}");
    eprintln!("bottleneck average depth in the busy period: ECN on {depth_on:.0} B (from every sender's first CNP), ECN off {depth_off:.0} B");
    // Once DCQCN acts, the queue it leaves is shallower than PFC alone holds: measured 0.43 to
    // 0.64 of it (2026-11-29, 4 runs); at most three quarters, as for the PFC frames.
    assert!(
        depth_on <= 0.75 * depth_off,
        "with ECN the bottleneck averaged {depth_on:.0} B once every sender was cut, more than 0.75 x the {depth_off:.0} B without"
    );
    assert!(off > 0.0, "without ECN the incast should have needed PFC");
    // The book's claim is that ECN keeps PFC rare, not one frame rarer (docs measured 50
    // against 90): at most three quarters.
    assert!(on <= 0.75 * off, "ECN on sent {on} PFC frames, more than 0.75 x ECN off ({off})");
}

/// Runs per time dilation in the invariance test. One run is one draw of DCQCN under random WRED
/// marks: on 2026-11-29, 6 runs at D 8000 took 689-799 µs and their slowest sender made
/// 42.0-48.7 Gbit/s; 6 at D 16000, 673-731 µs and 45.9-49.9 Gbit/s (about 6 % standard deviation
/// per run, the same at both D). Means of 2 runs then differ by more than 10 % about one time in
/// ten with nothing wrong (a fresh-clone CI run: 46.2 against 51.4 Gbit/s). Means of 8 runs
/// differ by about 3 % (one standard deviation), so the 10 % bound is kept and a time-dilation
/// fault, which shifts every run the same way, still fails it.
const RUNS: usize = 8;

/// The 4 MiB incast on rail-spine-400g.yaml at time dilation `d` with rocefab run's default
/// window, [`RUNS`] times: the mean completion time (µs), the senders' goodputs sorted and
/// averaged rank by rank of the sort, and rail1's peak queue-3 depth towards rank 0.
fn incast_at(d: &str, name: &str) -> (f64, Vec<f64>, f64) {
    let f = Fabric::up_replacing("rail-spine-400g.yaml", name, "time_dilation: 8000", &format!("time_dilation: {d}"));
    let mut jct = 0.0;
    let mut sorted = vec![0.0; 7];
    for run in 1..=RUNS {
        let (j, g) = measured(&format!("incast {run} at D {d}"), |_| {
            let rep = incast_with(&f, &[], &[]);
            assert_eq!(rep["ok"], true, "{rep}");
            assert_eq!(rep["time_dilation"].as_f64(), d.parse::<f64>().ok());
            let mut g: Vec<f64> =
                rep["qps"].as_array().unwrap().iter().filter_map(|q| q["goodput_bps"].as_f64()).collect();
            g.sort_by(f64::total_cmp);
            let j = rep["completion_ns"].as_f64().unwrap() / 1e3;
            (rep, (j, g))
        });
        assert_eq!(g.len(), 7, "a goodput per sender");
        jct += j / RUNS as f64;
        for (s, x) in sorted.iter_mut().zip(g) {
            *s += x / RUNS as f64;
        }
    }
    let to_rank0 = f.port_to("rail1", "host1:gpu0");
    let peak =
        metric(&f.metrics("rail1"), "rocefab_queue_depth_peak_bytes", &[("port", to_rank0.as_str()), ("queue", "3")]);
    (jct, sorted, peak)
}

/// Within 10 % of each other.
fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 0.1 * a.max(b)
}

#[test]
fn the_same_incast_at_d_and_2d_agrees_in_emulated_units() {
    let (jct1, g1, peak1) = incast_at("8000", "rfd1");
    let (jct2, g2, peak2) = incast_at("16000", "rfd2");
    let gbps = |g: &[f64]| g.iter().map(|x| (x / 1e8).round() / 10.0).collect::<Vec<_>>();
    eprintln!("D 8000: JCT {jct1:.1} µs, peak {peak1} B, per QP (sorted) {:?} Gb/s", gbps(&g1));
    eprintln!("D 16000: JCT {jct2:.1} µs, peak {peak2} B, per QP (sorted) {:?} Gb/s", gbps(&g2));
    // The congestion happened in both: the queue went past WRED min.
    assert!(peak1 >= 150_000.0 && peak2 >= 150_000.0, "peaks {peak1} {peak2}");
    assert!(close(jct1, jct2), "completion time {jct1} µs at D 8000 vs {jct2} µs at D 16000");
    assert!(close(peak1, peak2), "peak depth {peak1} B at D 8000 vs {peak2} B at D 16000");
    for (i, (a, b)) in g1.iter().zip(&g2).enumerate() {
        assert!(close(*a, *b), "the {i}th slowest sender: {a} b/s at D 8000 vs {b} b/s at D 16000");
    }
}
