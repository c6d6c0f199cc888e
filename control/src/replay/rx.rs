//! The receiving side of `rocefab replay`: what the destination GPU NICs received, when, and
//! which gaps of a capture the fabric can reproduce at its time dilation.
//!
//! **Measuring.** During the replay the destination NICs are captured with the machinery of
//! `rocefab capture` (`GET /capture` on each destination host's `rocefab-nicd`, whose
//! `AF_PACKET` socket stamps each frame with the kernel's receive time, `SO_TIMESTAMPNS`: the
//! stamp tcpdump in the destination namespace sees too). The inbound RoCEv2 frames from the
//! `--from` address are matched, per destination and in order, to the sends by opcode,
//! destination QP and PSN ([`match_arrivals`]), and their inter-arrival gaps are compared with
//! the schedule's gaps exactly as the sender's send times are ([`TimingError`]).
//!
//! **Reproducible gaps** ([`GapRule`]). A frame's gap to its predecessor survives the fabric
//! when (1) it is at least the frame's serialization time at the slowest line rate on the path
//! (emulated; on the wall clock both sides scale by D, so no D helps a capture from a faster
//! link) and (2) its wall-clock length D × g is large against the fabric's per-frame cost: the
//! timing noise every user-space switch hop adds to a frame (wake-up, batch, copy), measured at
//! [`COST_PER_HOP_WALL_NS`] per hop on this 2-core machine. A gap is reproducible within
//! [`TOLERANCE`] (10 %) when D × g × TOLERANCE ≥ hops × cost, so the smallest reproducible gap
//! at D is max(serialization, hops × cost / (TOLERANCE × D)), and the D that reproduces gap g is
//! hops × cost / (TOLERANCE × g). The replay warns when more than [`WARN_SHARE`] of the gaps are
//! below it, naming the D that reproduces all but that share (the 5th percentile gap).
use std::collections::BTreeMap;
use std::io::BufRead;
use std::net::{IpAddr, Ipv4Addr};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{anyhow, Context};
use rocefab_contracts::capture::{Record, DIR_IN, HEARTBEAT_PORT};
use rocefab_wire::roce::ParsedFrame;
use serde::Serialize;

use super::pacer::TimingError;
use super::schedule::Schedule;

/// Timing noise of one user-space switch hop on the wall clock, per frame. From the replay
/// test's arrivals at host2:gpu1 across rail1 → spine → rail2 at time dilation 1 (README
/// "Replay": mean absolute inter-arrival error 31–60 µs for the three hops at 5–10 ms gaps):
/// at most 20 µs per hop.
pub const COST_PER_HOP_WALL_NS: f64 = 20_000.0;
/// A gap is reproduced when the fabric's per-frame cost is at most this share of it.
pub const TOLERANCE: f64 = 0.10;
/// Warn when more than this share of the gaps is below the reproducible gap.
pub const WARN_SHARE: f64 = 0.05;

/// The rule that says which emulated gaps a fabric reproduces at time dilation D.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct GapRule {
    /// Switch hops from the sending NIC to the destination (1 on one rail, 3 across a spine).
    pub hops: u32,
    /// Per-frame cost of one hop on the wall clock, ns.
    pub cost_per_hop_wall_ns: f64,
    /// Slowest line rate on the path, bit/s (emulated).
    pub line_rate_bps: u64,
    pub time_dilation: f64,
}

/// What [`GapRule::check`] found.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GapWarning {
    /// Gaps (between consecutive frames of a loop, above 0) checked.
    pub gaps: u64,
    /// Of them below `min_gap_ns` at this D.
    pub below: u64,
    /// Below the frames' serialization time at `line_rate_bps`: no D reproduces them.
    pub below_serialization: u64,
    /// The smallest reproducible emulated gap at this D for the frames' mean size, ns.
    pub min_gap_ns: f64,
    /// The 5th percentile of the gaps at least their frame's serialization (emulated ns).
    pub p5_gap_ns: Option<f64>,
    /// The time dilation at which that gap is reproduced (`None` when only gaps below the
    /// serialization time were too small).
    pub needed_time_dilation: Option<f64>,
    pub message: String,
}

/// Rounds up to two significant digits (8123 → 8200).
fn round_up_2(x: f64) -> f64 {
    if x <= 0.0 {
        return 0.0;
    }
    let k = 1 - x.log10().floor() as i32;
    if k > 0 {
        let m = 10f64.powi(k);
        (x * m).ceil() / m
    } else {
        let p = 10f64.powi(-k);
        (x / p).ceil() * p
    }
}

impl GapRule {
    /// The frame's serialization time at the path's slowest line rate, emulated ns (preamble,
    /// start delimiter, FCS and inter-frame gap included: 24 bytes beyond the frame).
    pub fn serialization_ns(&self, frame_len: usize) -> f64 {
        (frame_len as f64 + 24.0) * 8.0 * 1e9 / self.line_rate_bps.max(1) as f64
    }

    /// The fabric's per-frame cost on the path, wall ns.
    pub fn cost_wall_ns(&self) -> f64 {
        f64::from(self.hops) * self.cost_per_hop_wall_ns
    }

    /// The smallest emulated gap reproduced at this D, for a frame of `frame_len` bytes.
    pub fn min_gap_ns(&self, frame_len: usize) -> f64 {
        self.serialization_ns(frame_len).max(self.cost_wall_ns() / (TOLERANCE * self.time_dilation))
    }

    /// The time dilation that reproduces an emulated gap of `gap_ns`.
    pub fn dilation_for(&self, gap_ns: f64) -> f64 {
        self.cost_wall_ns() / (TOLERANCE * gap_ns.max(1.0))
    }

    /// Checks one loop's emulated schedule (`offsets_ns`) of frames of `lens` bytes; `None`
    /// when at most [`WARN_SHARE`] of its gaps are below what the fabric reproduces. The D it
    /// names reproduces the 5th-percentile gap among those some D can reproduce (at least their
    /// frame's serialization time).
    pub fn check(&self, offsets_ns: &[u64], lens: &[usize]) -> Option<GapWarning> {
        // Every gap above 0, and those at least their frame's serialization time.
        let (mut n, mut fit): (u64, Vec<f64>) = (0, Vec::new());
        let (mut below, mut below_ser) = (0u64, 0u64);
        for i in 1..offsets_ns.len() {
            let g = offsets_ns[i].saturating_sub(offsets_ns[i - 1]) as f64;
            if g <= 0.0 {
                // Due together (--topspeed, or one capture timestamp): nothing to reproduce.
                continue;
            }
            n += 1;
            let len = lens.get(i).copied().unwrap_or(64);
            if g < self.serialization_ns(len) {
                below_ser += 1;
                continue;
            }
            if g < self.min_gap_ns(len) {
                below += 1;
            }
            fit.push(g);
        }
        if n == 0 || ((below + below_ser) as f64) <= WARN_SHARE * n as f64 {
            return None;
        }
        fit.sort_by(f64::total_cmp);
        let p5 = (!fit.is_empty()).then(|| fit[((fit.len() - 1) as f64 * WARN_SHARE).floor() as usize]);
        let mean_len = if lens.is_empty() { 64 } else { lens.iter().sum::<usize>() / lens.len() };
        let min_gap = self.min_gap_ns(mean_len);
        let needed = p5.map(|g| round_up_2(self.dilation_for(g)).max(self.time_dilation));
        let d = self.time_dilation;
        let mut parts = Vec::new();
        if below > 0 {
            let hops = if self.hops == 1 { "1 hop".to_string() } else { format!("{} hops", self.hops) };
            let mut m = format!(
                "{below} of {n} gaps of the capture are below the {} the fabric reproduces at time_dilation {d} \
                 ({hops} x {} per frame on the wall clock, within {:.0} %): the timing at the receiver will not follow the capture",
                crate::units::fmt_ns(min_gap),
                crate::units::fmt_ns(self.cost_per_hop_wall_ns),
                TOLERANCE * 100.0,
            );
            if let (Some(nd), Some(g)) = (needed, p5) {
                m.push_str(&format!(
                    "; time_dilation {nd} reproduces the 5th-percentile gap ({})",
                    crate::units::fmt_ns(g)
                ));
            }
            parts.push(m);
        }
        if below_ser > 0 {
            parts.push(format!(
                "{below_ser} of {n} gaps are shorter than their frame's serialization at {} Gbit/s (the capture's link was faster): \
                 no time dilation reproduces them",
                self.line_rate_bps as f64 / 1e9
            ));
        }
        Some(GapWarning {
            gaps: n,
            below,
            below_serialization: below_ser,
            min_gap_ns: min_gap,
            p5_gap_ns: p5,
            needed_time_dilation: if below > 0 { needed } else { None },
            message: parts.join("; "),
        })
    }
}

// ---- matching arrivals to sends ----

/// What identifies a replayed frame at its destination: destination address, opcode, QP, PSN.
pub type Ident = (Ipv4Addr, u8, u32, u32);

/// The identity of a RoCEv2 frame sent from `from`, or `None` for anything else.
pub fn ident(frame: &[u8], from: Ipv4Addr) -> Option<Ident> {
    let p = ParsedFrame::parse(frame).ok()?;
    match (p.ip.src, p.ip.dst) {
        (IpAddr::V4(s), IpAddr::V4(d)) if s == from => {
            Some((d, u8::from(p.bth().opcode), p.bth().dest_qp, p.bth().psn))
        }
        _ => None,
    }
}

/// Matches `arrivals` (identity, receive time in wall ns, in order of arrival per
/// destination) to the sends of `schedule` (wall clock; `idents[i]` is one loop's frame i),
/// each destination in order: an arrival takes the next unmatched send of its identity. The
/// gaps between consecutive matched arrivals of one destination are compared with the gaps of
/// their sends' due times. Returns the error and how many arrivals were matched.
pub fn match_arrivals(schedule: &Schedule, idents: &[Option<Ident>], arrivals: &[(Ident, u64)]) -> (TimingError, u64) {
    // Sends per destination: (due ns, identity), in send order.
    let mut sends: BTreeMap<Ipv4Addr, Vec<(u64, Ident)>> = BTreeMap::new();
    for k in 0..schedule.len() {
        if let Some(id) = idents[schedule.frame(k)] {
            sends.entry(id.0).or_default().push((schedule.at(k), id));
        }
    }
    let mut next: BTreeMap<Ipv4Addr, usize> = BTreeMap::new();
    let mut per_dst: BTreeMap<Ipv4Addr, TimingError> = BTreeMap::new();
    let mut matched = 0;
    for &(id, t) in arrivals {
        let Some(list) = sends.get(&id.0) else { continue };
        let from = next.entry(id.0).or_insert(0);
        let Some(pos) = list[*from..].iter().position(|(_, s)| *s == id) else { continue };
        let (due, _) = list[*from + pos];
        *from += pos + 1;
        matched += 1;
        per_dst.entry(id.0).or_default().record(due, t);
    }
    let mut all = TimingError::default();
    for e in per_dst.values() {
        all.merge(e);
    }
    (all, matched)
}

// ---- capturing the destinations ----

/// A capture of the destination NICs running during a replay.
pub struct Receivers {
    stop: Arc<AtomicBool>,
    got: Arc<Mutex<Vec<(Ident, u64)>>>,
    threads: Vec<std::thread::JoinHandle<anyhow::Result<()>>>,
    /// `host2:gpu1`, ...
    pub ports: Vec<String>,
}

/// Reads one node's capture stream into `got` until `stop`.
fn pump(
    mut body: Box<dyn BufRead + Send>,
    from: Ipv4Addr,
    got: Arc<Mutex<Vec<(Ident, u64)>>>,
    stop: Arc<AtomicBool>,
) -> anyhow::Result<()> {
    let mut buf: Vec<u8> = Vec::with_capacity(1 << 16);
    let mut tmp = vec![0u8; 1 << 16];
    while !stop.load(Ordering::Relaxed) {
        let n = match body.read(&mut tmp) {
            Ok(0) => return Err(anyhow!("the daemon closed the capture stream")),
            Ok(n) => n,
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => continue,
            Err(e) => return Err(e).context("reading the capture stream"),
        };
        buf.extend_from_slice(&tmp[..n]);
        let mut off = 0;
        let mut new = Vec::new();
        while let Some((r, len)) = Record::decode(&buf[off..]) {
            off += len;
            if r.port == HEARTBEAT_PORT || r.dir != DIR_IN {
                continue;
            }
            if let Some(id) = ident(r.data, from) {
                new.push((id, r.ts_ns));
            }
        }
        buf.drain(..off);
        if !new.is_empty() {
            got.lock().map_err(|_| anyhow!("poisoned"))?.extend(new);
        }
    }
    Ok(())
}

impl Receivers {
    /// Starts capturing `targets` (`(node, port)`, one stream per node) through the daemons at
    /// `urls` (node → base URL); returns once every daemon mirrors.
    pub fn start(
        urls: &BTreeMap<String, String>,
        targets: &[(String, String)],
        from: Ipv4Addr,
    ) -> anyhow::Result<Receivers> {
        let mut by_node: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        for (n, p) in targets {
            by_node.entry(n).or_default().push(p);
        }
        let stop = Arc::new(AtomicBool::new(false));
        let got = Arc::new(Mutex::new(Vec::new()));
        let mut threads = Vec::new();
        for (node, ports) in by_node {
            let url = urls.get(node).ok_or_else(|| anyhow!("no daemon on {node} to capture its NIC"))?;
            let (_, body) = crate::fabric::capture::open_stream(url, &ports, None)
                .with_context(|| format!("capturing {node}:{}", ports.join(",")))?;
            let (g, s) = (got.clone(), stop.clone());
            threads.push(std::thread::spawn(move || pump(body, from, g, s)));
        }
        Ok(Receivers { stop, got, threads, ports: targets.iter().map(|(n, p)| format!("{n}:{p}")).collect() })
    }

    /// Waits until `expect` frames arrived or `grace` passed, stops the capture and returns
    /// the arrivals (per destination in arrival order) and the first stream error.
    pub fn finish(self, expect: u64, grace: Duration) -> (Vec<(Ident, u64)>, Option<String>) {
        let end = Instant::now() + grace;
        while Instant::now() < end
            && (self.got.lock().map_or(0, |g| g.len()) as u64) < expect
            && !self.threads.iter().all(|t| t.is_finished())
        {
            std::thread::sleep(Duration::from_millis(5));
        }
        self.stop.store(true, Ordering::Relaxed);
        let mut err = None;
        for t in self.threads {
            match t.join() {
                Ok(Ok(())) => {}
                Ok(Err(e)) => {
                    err.get_or_insert(format!("{e:#}"));
                }
                Err(_) => {
                    err.get_or_insert("capture thread panicked".into());
                }
            }
        }
        let mut v = self.got.lock().map(|g| g.clone()).unwrap_or_default();
        v.sort_by_key(|&(_, t)| t);
        (v, err)
    }
}

#[cfg(test)]
mod tests {
    use super::super::schedule::Pace;
    use super::*;

    fn rule(d: f64) -> GapRule {
        GapRule { hops: 3, cost_per_hop_wall_ns: 20_000.0, line_rate_bps: 100_000_000_000, time_dilation: d }
    }

    #[test]
    fn the_reproducible_gap_follows_cost_serialization_and_dilation() {
        let r = rule(1.0);
        // 1000-byte frame at 100G: 1024 × 8 bits = 81.92 ns.
        assert!((r.serialization_ns(1000) - 81.92).abs() < 1e-9);
        // 3 hops × 20 us / (10 % × D): 600 us at D 1, 600 ns at D 1000, and the
        // serialization bounds it from below whatever D.
        assert!((r.min_gap_ns(1000) - 600_000.0).abs() < 1e-6);
        assert!((rule(1000.0).min_gap_ns(1000) - 600.0).abs() < 1e-6);
        assert!((rule(1e6).min_gap_ns(1000) - 81.92).abs() < 1e-9);
        assert!((r.dilation_for(30_000.0) - 20.0).abs() < 1e-9);
        assert_eq!(round_up_2(8123.0), 8200.0);
        assert_eq!(round_up_2(20.0), 20.0);
        assert_eq!(round_up_2(4.7619), 4.8);
        assert_eq!(round_up_2(0.123), 0.13);
    }

    #[test]
    fn gaps_of_30_to_300_us_warn_at_d1_and_name_the_d_that_reproduces_them() {
        // 101 frames, gaps 30, 33, ..., 330 us: all below 600 us at D 1.
        let ts: Vec<Duration> = (0..101u64)
            .scan(0u64, |t, i| {
                let now = *t;
                *t += 30_000 + (i % 101) * 3_000;
                Some(Duration::from_nanos(now))
            })
            .collect();
        let s = Schedule::new(&ts, Pace::Speed(1.0), 1);
        let lens = vec![1000; ts.len()];
        let w = rule(1.0).check(&s.offsets_ns, &lens).expect("must warn");
        assert_eq!((w.gaps, w.below, w.below_serialization), (100, 100, 0));
        // The 5th percentile gap is the 5th smallest (index 4.95 → 4): 42 us → D 600/42 = 14.3 → 15.
        assert_eq!(w.p5_gap_ns, Some(42_000.0));
        assert_eq!(w.needed_time_dilation, Some(15.0));
        assert!(w.message.contains("time_dilation 15 reproduces"), "{}", w.message);
        // At that D at most 5 % of the gaps are below: no warning.
        assert_eq!(rule(15.0).check(&s.offsets_ns, &lens), None);
        // Below it, more than 5 % are not reproduced (D 13: 46.2 us, six gaps below): it warns.
        assert!(rule(13.0).check(&s.offsets_ns, &lens).is_some());
        // 5-10 ms gaps at D 1 need nothing; top speed has no gaps to keep.
        let slow: Vec<u64> = (0..50).map(|i| i * 5_000_000).collect();
        assert_eq!(rule(1.0).check(&slow, &[1000; 50]), None);
        assert_eq!(rule(1.0).check(&[0; 50], &[1000; 50]), None);
        // Gaps below the serialization time (50 ns < 81.92 ns) are named: no D helps them, and
        // no D is named for them.
        let tight: Vec<u64> = (0..50).map(|i| i * 50).collect();
        let w = rule(1e6).check(&tight, &[1000; 50]).unwrap();
        assert_eq!((w.below_serialization, w.below, w.needed_time_dilation), (49, 0, None));
        assert_eq!(w.message, "49 of 49 gaps are shorter than their frame's serialization at 100 Gbit/s (the capture's link was faster): no time dilation reproduces them");
        // Both kinds: half the gaps 50 ns, half 30 us, at D 1: the D named is for the 30 us gaps.
        let mixed: Vec<u64> = (0..41u64)
            .scan(0u64, |t, i| {
                let now = *t;
                *t += if i % 2 == 0 { 50 } else { 30_000 };
                Some(now)
            })
            .collect();
        let w = rule(1.0).check(&mixed, &[1000; 41]).unwrap();
        assert_eq!((w.gaps, w.below, w.below_serialization, w.needed_time_dilation), (40, 20, 20, Some(20.0)));
        assert!(
            w.message.starts_with("20 of 40 gaps of the capture are below the 600.000 us")
                && w.message.contains("; 20 of 40 gaps are shorter"),
            "{}",
            w.message
        );
    }

    #[test]
    fn arrivals_match_sends_per_destination_in_order() {
        let ts: Vec<Duration> = [0u64, 10, 20, 30].iter().map(|&m| Duration::from_millis(m)).collect();
        let s = Schedule::new(&ts, Pace::Speed(1.0), 2);
        let b = Ipv4Addr::new(10, 0, 2, 2);
        let c = Ipv4Addr::new(10, 0, 2, 3);
        let ids = vec![Some((b, 6, 1, 1)), Some((c, 10, 2, 7)), Some((b, 8, 1, 2)), None];
        // Loop 2 starts at 30 + mean gap 10 = 40 ms. Arrivals 1 ms after their due time,
        // except B's second loop Write Last 300 us late; C's frames of loop 1 lost.
        let ms = 1_000_000u64;
        let arr = vec![
            ((b, 6, 1, 1), ms),
            ((b, 8, 1, 2), 21 * ms),
            ((b, 6, 1, 1), 41 * ms),
            ((c, 10, 2, 7), 51 * ms),
            ((b, 8, 1, 2), 61 * ms + 300_000),
            ((Ipv4Addr::new(9, 9, 9, 9), 1, 1, 1), 62 * ms),
        ];
        let (e, matched) = match_arrivals(&s, &ids, &arr);
        assert_eq!(matched, 5);
        // B: gaps 20, 20, 20.3 ms against 20, 20, 20: 300 us in 3 gaps; C: one frame, no gap.
        assert_eq!(e.gaps, 3);
        assert_eq!(e.max_abs_error_ns, 300_000);
        assert!((e.mean_abs_error_ns().unwrap() - 100_000.0).abs() < 1e-6);
    }
}
