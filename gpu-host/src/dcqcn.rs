//! DCQCN congestion control (Zhu et al., "Congestion Control for Large-Scale RDMA
//! Deployments", ACM SIGCOMM 2015, §3 "The DCQCN algorithm").
//!
//! * [`NotificationPoint`] (NP, receiver NIC): at most one CNP per QP per interval when
//!   CE-marked packets arrive (the paper's NP: "at most one CNP every N = 50 µs" per flow).
//! * [`ReactionPoint`] (RP, sender NIC), per QP, pure and clock-injected:
//!   - on CNP (§3.1, Eq. 1): `Rt = Rc; Rc = Rc·(1 − α/2); α = (1 − g)·α + g` (the cut uses α
//!     before the update), and the rate-increase timer, byte counter and their stage counts are
//!     reset. With `clamp_target_rate` (the paper's equations: the `dcqcn-paper` and `htsim`
//!     profiles) `Rt = Rc` on every cut. Without it (`ClampTargetRate` false, the `ns3-hpcc` and
//!     `connectx` profiles, as the NIC firmware and ns-3 do by default) `Rt = Rc` only when the
//!     rate rose since the last cut (a timer or byte-counter increase event): a burst of CNPs
//!     with no recovery in between keeps the target the QP had before the burst;
//!   - α decay (§3.1, Eq. 2): every `K` without a CNP, `α = (1 − g)·α`;
//!   - rate increase events come from a timer (period `T`) and a byte counter (every `B`
//!     bytes), as in QCN (IEEE 802.1Qau). With `t`, `b` the numbers of timer / byte-counter
//!     events since the last cut:
//!     `max(t, b) < F` → fast recovery `Rc = (Rt + Rc)/2` (Eq. 3);
//!     `min(t, b) > F` → hyper increase `Rt += i·R_HAI` with `i = min(t, b) − F`, then
//!     `Rc = (Rt + Rc)/2`; otherwise additive increase `Rt += R_AI`, `Rc = (Rt + Rc)/2` (Eq. 4).
//!     The stage test uses the counts *before* the event that triggered it, so exactly `F`
//!     fast-recovery steps happen (the paper: "for F = 5 successive iterations");
//!   - `Rc` never drops below the minimum rate (0: no floor), `Rt` and `Rc` never exceed line
//!     rate.
//!
//! # Where the default parameters come from (cited, not invented)
//!
//! The paper gives the equations; the numeric defaults are those of the public ns-3 DCQCN
//! model in the HPCC repository, `alibaba-edu/High-Precision-Congestion-Control`, file
//! `simulation/src/point-to-point/model/rdma-hw.cc`, `RdmaHw::GetTypeId` attributes
//! (commit 0b41ed27 as read):
//!
//! | our field                  | rdma-hw.cc attribute (member)                       | default   |
//! |----------------------------|-----------------------------------------------------|-----------|
//! | `g`                        | `EwmaGain` (`m_g`)                                  | 1/16      |
//! | `alpha_update_period_ns` K | `AlphaResumInterval` (`m_alpha_resume_interval`)    | 55 µs     |
//! | `rate_increase_period_ns` T| `RPTimer` (`m_rpgTimeReset`)                        | 1500 µs   |
//! | `fast_recovery_steps` F    | `FastRecoveryTimes` (`m_rpgThreshold`)              | 5         |
//! | `rate_ai_bps` R_AI         | `RateAI` (`m_rai`)                                  | 5 Mb/s    |
//! | `rate_hai_bps` R_HAI       | `RateHAI` (`m_rhai`)                                | 50 Mb/s   |
//! | `min_rate_bps`             | `MinRate` (`m_minRate`)                             | 100 Mb/s  |
//! | `alpha_init`               | `cnp_received_mlx`: `m_alpha = 1` on the first CNP  | 1.0       |
//! | `clamp_target_rate`        | `ClampTargetRate` (`m_EcnClampTgtRate`)             | false     |
//!
//! With `ClampTargetRate` false, `CheckRateDecreaseMlx` clamps the target only when a timer
//! increase stage ran since the last cut (`m_rpTimeStage != 0`). ns-3 has no byte counter; the
//! NIC's firmware rule (`clamp_tgt_rate` false, `clamp_tgt_rate_after_time_inc` true, as Isekai
//! applies them in `HandleRateDecreaseTimer`: clamp when either stage count is non-zero) is the
//! one used here, so a byte-counter increase also counts as a rise.
//!
//! The ns-3 model has no byte counter. The byte-counter default `B` is taken from Google's
//! Isekai simulator's DCQCN model (the downstream copy `testing-cla/downstreamIsekai`,
//! `isekai/host/rdma/rdma_roce_cc_dcqcn.h`, `RdmaCcDcqcnOptions::byte_reset = 32767`, applied
//! in `rdma_roce_cc_dcqcn.cc` `SentBytes` as `byte_reset * 64` bytes, i.e. 2 097 088 bytes;
//! the header cites the Mellanox "DCQCN parameters" community article for these values).
//! The NP interval (50 µs) is the paper's CNP generation interval and rocefab's default.
//!
//! # The NIC's profile ([`DcqcnProfile::Connectx`])
//!
//! NVIDIA ConnectX firmware defaults, as `mlxconfig query` lists them (`RPG_TIME_RESET` 300,
//! `RPG_BYTE_RESET` 32767, `RPG_THRESHOLD` 1, `RPG_AI_RATE` 5, `RPG_HAI_RATE` 50, `RPG_MIN_RATE`
//! 1, `DCE_TCP_G` 1019, `DCE_TCP_RTT` 1, `INITIAL_ALPHA_VALUE` 1023, `CLAMP_TGT_RATE` false,
//! `CLAMP_TGT_RATE_AFTER_TIME_INC` true, `MIN_TIME_BETWEEN_CNPS` 4; the same RP values are
//! Isekai's `RdmaCcDcqcnOptions`, citing the Mellanox "DCQCN parameters" article), mapped onto
//! the equations above the way Isekai's `rdma_roce_cc_dcqcn.cc` applies them: α is 10-bit fixed
//! point, `α ← (1019·α)/1024 + (1024 − 1019)` every `DCE_TCP_RTT` µs with a CNP in the period,
//! so g = 5/1024, K = 1 µs and α starts at 1023/1024; the cut `Rc·α >> 11` is `Rc·α/2`; T =
//! 300 µs, B = 32767 × 64 bytes, F = 1, R_AI 5 Mb/s, R_HAI 50 Mb/s, minimum rate 1 Mb/s; the NP
//! sends at most one CNP per QP every 4 µs. Not modelled: `RATE_REDUCE_MONITOR_PERIOD` (4 µs,
//! cuts at most once per period: the NP's 4 µs spacing already bounds them) and
//! `RPG_MIN_DEC_FAC` (50 %: no cut here exceeds α/2 ≤ 50 %).
//!
//! # The paper's profile ([`DcqcnProfile::DcqcnPaper`])
//!
//! Zhu et al., "Congestion Control for Large-Scale RDMA Deployments", SIGCOMM 2015: the
//! equations of §3.1 exactly (Eq. 1 on every CNP, so `Rt = Rc` on every cut:
//! `clamp_target_rate`; Eq. 2 for α; Eq. 3 and 4 and the QCN hyper increase for recovery) and
//! the values the paper gives:
//!
//! | our field                   | value              | where in the paper                                   |
//! |-----------------------------|--------------------|------------------------------------------------------|
//! | `alpha_init`                | 1                  | §3.1, RP algorithm (α starts at 1)                    |
//! | `g`                         | 1/256              | §3.1 / §4 parameter table                             |
//! | `alpha_update_period_ns` K  | 55 µs              | §3.1 ("our implementation uses K = 55 µs")            |
//! | `fast_recovery_steps` F     | 5                  | §3.1 ("F = 5 successive iterations")                  |
//! | `rate_increase_period_ns` T | 55 µs              | §4, the recommended timer                             |
//! | `byte_counter_bytes` B      | 10 MB (10⁷ bytes)  | §4, the recommended byte counter                      |
//! | `rate_ai_bps` R_AI          | line rate / 1000   | §4: 40 Mbit/s on the paper's 40 Gbit/s NICs, scaled   |
//! | `rate_hai_bps` R_HAI        | 10 × R_AI          | not given; QCN's (802.1Qau) R_HAI / R_AI = 50 / 5     |
//! | `min_rate_bps`              | none (0)           | the paper states no floor                             |
//! | CNP interval N              | 50 µs              | §3.1, NP algorithm (at most one CNP per 50 µs a flow) |
//!
//! The paper's text could not be read where this was written; F, B, T, g and N are as the htsim
//! DCQCN model states them (below: `dcqcn.cpp` lines 19–26, with the comment "g = 1/256"), and
//! R_AI, B, T, F, g, N and K as a public implementation of the paper's §4 fluid model sets them.
//! R_AI scales with the line rate (the paper's 40 Mbit/s is 1/1000 of its 40 Gbit/s NICs; at
//! 400 Gbit/s it is 400 Mbit/s). Rt reset on every cut is what makes the recovery of a burst of
//! cuts (400 → 200 → 100 → 50 → 25 Gbit/s) climb back towards the last rate before the last cut
//! (50 Gbit/s), not to the rate before the burst.
//!
//! How the other profiles differ from the paper:
//!
//! * `ns3-hpcc` (the default): g = 1/16 (paper 1/256), T = 1.5 ms (55 µs), B = 2 MB (10 MB),
//!   R_AI 5 Mbit/s and R_HAI 50 Mbit/s at any line rate, a 100 Mbit/s floor, and `Rt = Rc` only
//!   when the rate rose since the last cut; K, F and N are the paper's.
//! * `connectx`: F = 1 (5), T = 300 µs, K = 1 µs with g = 5/1024 (α updated as the firmware
//!   does), α starting at 1023/1024, B = 2 MB, R_AI 5 / R_HAI 50 Mbit/s, a 1 Mbit/s floor, a CNP
//!   per 4 µs (50 µs), and `Rt = Rc` only after a rise.
//! * `htsim`: below; its parameters and its reset of `Rt` on every cut are the paper's except
//!   R_AI and R_HAI.
//!
//! # The htsim profile ([`DcqcnProfile::Htsim`])
//!
//! The DCQCN of the htsim packet simulator, so a side-by-side comparison runs identical
//! parameters. Broadcom's `csg-htsim` (read at commit 841d9e7) has no DCQCN: its RoCE source
//! (`sim/roce.cpp`) sends at a fixed packet spacing and ignores ECN, and `network.h` only names a
//! CNP packet type. The Ultra Ethernet Consortium's htsim, `ultraethernet/uet-htsim` (commit
//! 40ccb05, a descendant of the same simulator), has one: `htsim/sim/dcqcn.cpp`, whose defaults
//! are
//!
//! | our field                   | value            | `htsim/sim/dcqcn.cpp`                                          |
//! |-----------------------------|------------------|----------------------------------------------------------------|
//! | CNP interval N              | 50 µs            | line 19, `DCQCNSink::_cnp_interval = timeFromUs(50.0)`         |
//! | `rate_increase_period_ns` T | 55 µs            | line 20, `DCQCNSrc::_cc_update_period = timeFromUs(55.0)`      |
//! | `alpha_update_period_ns` K  | 55 µs            | line 128, the α decay also runs on `_cc_update_period`         |
//! | `alpha_init`                | 1                | line 22, `DCQCNSrc::_alpha = 1`                                |
//! | `g`                         | 1/256            | line 23, `DCQCNSrc::_g = .00390625`                            |
//! | `byte_counter_bytes` B      | 10⁷ bytes        | line 24, `DCQCNSrc::_B = 10000000`                             |
//! | `fast_recovery_steps` F     | 5                | line 26, `DCQCNSrc::_F = 5`                                    |
//! | `rate_ai_bps` R_AI          | line rate / 20   | line 42, `_RAI = rate / 20`                                    |
//! | `rate_hai_bps` R_HAI        | line rate / 10   | line 43, `_RHAI = rate / 10`                                   |
//! | `clamp_target_rate`         | true             | line 55, `_RT = _RC` on every CNP                              |
//! | `min_rate_bps`              | none (0)         | no floor in `processCNP` (lines 54–76) or `increaseRate`       |
//!
//! Where its mechanism differs from this RP (not modelled here; each matters only at the edges
//! noted): its stage test runs on the counts *after* the event (`max(T, BC) <= F`,
//! `min(T, BC) > F`, lines 84–98), which is the same fast-recovery rule and differs only once
//! both counts passed F (hyper increase one event earlier, with `i` one larger); its α is a
//! `static` member (`dcqcn.h` line 44), shared by every source of the simulation, where each QP
//! here has its own; its α decay compares against `_last_alpha_update`, which only a CNP sets (lines
//! 72–73, 128–131), so once K has passed without a CNP it decays at every send event, not once
//! per K; timers are checked when the source sends (`doNextEvent`); and its NP
//! (lines 204–226) also sends a CNP when the interval ends if a marked packet arrived during it,
//! where this NP waits for the next marked packet.
//!
//! # The HPCC `dcqcn_paper` setting ([`DcqcnProfile::HpccDcqcnPaper`])
//!
//! The same HPCC repository runs DCQCN in two settings, `simulation/run.py` `--cc dcqcn` (the
//! NIC-like 1 µs / 4 µs / 300 µs timers) and `--cc dcqcn_paper`, which takes some of the
//! paper's timers: `ALPHA_RESUME_INTERVAL` 50 µs (K), `RATE_DECREASE_INTERVAL` 50 µs (the RP
//! cuts at most once per 50 µs; here the NP's CNP interval), `RP_TIMER` 55 µs (T), `EWMA_GAIN`
//! 1/256, `FAST_RECOVERY_TIMES` 1, `RATE_AI` 5 Mb/s and `RATE_HAI` 50 Mb/s per 25 Gbit/s of NIC
//! rate (`ai = 5 * bw / 25`, `hai = 50 * bw / 25`), `MIN_RATE` 1000 Mb/s, `CLAMP_TARGET_RATE` 0;
//! α starts at 1 (`cnp_received_mlx`) and B is Isekai's, as above. This was `dcqcn-paper` before
//! issue 23; it differs from the paper in F = 1 (5), K = 50 µs (55), B = 2 MB (10 MB), R_AI
//! 200 kbit/s per Gbit/s of line rate (1 Mbit/s per Gbit/s), a 1 Gbit/s floor (none) and `Rt = Rc`
//! only after a rise (every cut).
//!
pub use rocefab_contracts::dcqcn::{DcqcnConfig, DcqcnError, DcqcnProfile, DEFAULT_CNP_INTERVAL_NS};

/// Which increase phase an increase event ran.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IncreasePhase {
    /// `Rc = (Rt + Rc)/2`.
    FastRecovery,
    /// `Rt += R_AI; Rc = (Rt + Rc)/2`.
    Additive,
    /// `Rt += i·R_HAI; Rc = (Rt + Rc)/2`.
    Hyper,
}

/// RP counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RpCounters {
    /// CNPs processed (each one cuts the rate).
    pub cnps: u64,
    /// α decay steps applied.
    pub alpha_decays: u64,
    /// Fast-recovery events.
    pub fast_recovery: u64,
    /// Additive-increase events.
    pub additive_increase: u64,
    /// Hyper-increase events.
    pub hyper_increase: u64,
    /// Timer expirations that produced an increase event.
    pub timer_events: u64,
    /// Byte-counter expirations that produced an increase event.
    pub byte_events: u64,
}

/// DCQCN reaction point of one QP.
#[derive(Clone, Debug)]
pub struct ReactionPoint {
    cfg: DcqcnConfig,
    rc: f64,
    rt: f64,
    alpha: f64,
    /// A CNP has been seen: α timer runs.
    cnp_seen: bool,
    /// Rate below line rate (or target below): increase machinery runs.
    recovering: bool,
    next_alpha_update: u64,
    next_rate_timer: u64,
    timer_stage: u32,
    byte_stage: u32,
    bytes_acc: u64,
    counters: RpCounters,
}

impl ReactionPoint {
    /// A fresh RP at line rate.
    pub fn new(cfg: DcqcnConfig) -> Result<ReactionPoint, DcqcnError> {
        cfg.validate()?;
        let line = cfg.line_rate_bps as f64;
        Ok(ReactionPoint {
            cfg,
            rc: line,
            rt: line,
            alpha: cfg.alpha_init,
            cnp_seen: false,
            recovering: false,
            next_alpha_update: 0,
            next_rate_timer: 0,
            timer_stage: 0,
            byte_stage: 0,
            bytes_acc: 0,
            counters: RpCounters::default(),
        })
    }

    /// Parameters.
    pub fn config(&self) -> &DcqcnConfig {
        &self.cfg
    }

    /// Current rate `Rc`, bits/s (rounded down).
    pub fn rate(&self) -> u64 {
        self.rc as u64
    }

    /// Current rate `Rc`, bits/s, unrounded.
    pub fn rate_f64(&self) -> f64 {
        self.rc
    }

    /// Target rate `Rt`, bits/s.
    pub fn target_rate_f64(&self) -> f64 {
        self.rt
    }

    /// α.
    pub fn alpha(&self) -> f64 {
        self.alpha
    }

    /// Counters.
    pub fn counters(&self) -> &RpCounters {
        &self.counters
    }

    /// Timer/byte stage counts since the last cut `(t, b)`.
    pub fn stages(&self) -> (u32, u32) {
        (self.timer_stage, self.byte_stage)
    }

    /// Earliest time at which [`ReactionPoint::poll`] has work to do.
    pub fn next_deadline(&self) -> Option<u64> {
        let a = self.cnp_seen.then_some(self.next_alpha_update);
        let r = self.recovering.then_some(self.next_rate_timer);
        match (a, r) {
            (Some(a), Some(r)) => Some(a.min(r)),
            (a, r) => a.or(r),
        }
    }

    /// A CNP arrived for this QP at `now`.
    pub fn on_cnp(&mut self, now: u64) {
        self.poll(now);
        self.counters.cnps += 1;
        if self.cfg.clamp_target_rate || self.timer_stage > 0 || self.byte_stage > 0 {
            self.rt = self.rc;
        }
        let min = self.cfg.min_rate_bps as f64;
        self.rc = (self.rc * (1.0 - self.alpha / 2.0)).max(min);
        self.alpha = (1.0 - self.cfg.g) * self.alpha + self.cfg.g;
        self.cnp_seen = true;
        self.recovering = true;
        self.next_alpha_update = now.saturating_add(self.cfg.alpha_update_period_ns);
        self.next_rate_timer = now.saturating_add(self.cfg.rate_increase_period_ns);
        self.timer_stage = 0;
        self.byte_stage = 0;
        self.bytes_acc = 0;
    }

    /// `n` bytes were transmitted at `now` (drives the byte counter).
    pub fn on_bytes_sent(&mut self, n: u64, now: u64) {
        self.poll(now);
        if !self.recovering {
            return;
        }
        self.bytes_acc += n;
        while self.recovering && self.bytes_acc >= self.cfg.byte_counter_bytes {
            self.bytes_acc -= self.cfg.byte_counter_bytes;
            self.counters.byte_events += 1;
            self.increase();
            self.byte_stage = self.byte_stage.saturating_add(1);
        }
    }

    /// Runs the α-decay and rate-increase timers that expired at or before `now`, in time
    /// order. Returns the rate after processing.
    pub fn poll(&mut self, now: u64) -> u64 {
        loop {
            let alpha_due = self.cnp_seen && self.next_alpha_update <= now;
            let rate_due = self.recovering && self.next_rate_timer <= now;
            if !alpha_due && !rate_due {
                break;
            }
            if alpha_due && (!rate_due || self.next_alpha_update <= self.next_rate_timer) {
                if !rate_due {
                    // Only α events remain before `now`: apply them all in closed form.
                    let k = self.cfg.alpha_update_period_ns;
                    let n = (now - self.next_alpha_update) / k + 1;
                    self.decay_alpha(n);
                    self.next_alpha_update += n * k;
                } else {
                    self.decay_alpha(1);
                    self.next_alpha_update += self.cfg.alpha_update_period_ns;
                }
            } else {
                self.next_rate_timer += self.cfg.rate_increase_period_ns;
                self.counters.timer_events += 1;
                self.increase();
                self.timer_stage = self.timer_stage.saturating_add(1);
            }
        }
        self.rate()
    }

    fn decay_alpha(&mut self, n: u64) {
        let factor = (1.0 - self.cfg.g).powi(n.min(i32::MAX as u64) as i32);
        self.alpha *= factor;
        self.counters.alpha_decays += n;
    }

    fn increase(&mut self) {
        let f = self.cfg.fast_recovery_steps;
        let (t, b) = (self.timer_stage, self.byte_stage);
        let line = self.cfg.line_rate_bps as f64;
        let phase = if t.max(b) < f {
            IncreasePhase::FastRecovery
        } else if t.min(b) > f {
            IncreasePhase::Hyper
        } else {
            IncreasePhase::Additive
        };
        match phase {
            IncreasePhase::FastRecovery => self.counters.fast_recovery += 1,
            IncreasePhase::Additive => {
                self.counters.additive_increase += 1;
                self.rt += self.cfg.rate_ai_bps as f64;
            }
            IncreasePhase::Hyper => {
                self.counters.hyper_increase += 1;
                let i = f64::from(t.min(b) - f);
                self.rt += i * self.cfg.rate_hai_bps as f64;
            }
        }
        self.rt = self.rt.min(line);
        self.rc = ((self.rt + self.rc) / 2.0).min(line);
        if self.rt >= line && line - self.rc < 1.0 {
            // Within one bit/s of line rate: snap (the float midpoint can stall one ulp short).
            // Fully recovered: nothing left to increase until the next CNP.
            self.rc = line;
            self.recovering = false;
        }
    }
}

/// DCQCN notification point of one QP: CNP pacing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NotificationPoint {
    interval_ns: u64,
    last_cnp: Option<u64>,
    ce_packets: u64,
    cnps: u64,
}

impl NotificationPoint {
    /// An NP that sends at most one CNP per `interval_ns`.
    pub const fn new(interval_ns: u64) -> NotificationPoint {
        NotificationPoint { interval_ns, last_cnp: None, ce_packets: 0, cnps: 0 }
    }

    /// A CE-marked packet arrived at `now`; returns whether to send a CNP now.
    pub fn on_ce(&mut self, now: u64) -> bool {
        self.ce_packets += 1;
        let send = match self.last_cnp {
            None => true,
            Some(last) => now.saturating_sub(last) >= self.interval_ns,
        };
        if send {
            self.last_cnp = Some(now);
            self.cnps += 1;
        }
        send
    }

    /// CE-marked packets seen.
    pub const fn ce_packets(&self) -> u64 {
        self.ce_packets
    }

    /// CNPs generated.
    pub const fn cnps(&self) -> u64 {
        self.cnps
    }

    /// Time of the last CNP.
    pub const fn last_cnp(&self) -> Option<u64> {
        self.last_cnp
    }
}

impl Default for NotificationPoint {
    fn default() -> Self {
        NotificationPoint::new(DEFAULT_CNP_INTERVAL_NS)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rocefab_contracts::time::Dilation;

    const LINE: u64 = 100_000_000_000;
    const US: u64 = 1_000;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() <= 1e-6 * b.abs().max(1.0)
    }

    fn rp() -> ReactionPoint {
        ReactionPoint::new(DcqcnConfig::with_line_rate(LINE)).unwrap()
    }

    #[test]
    fn dilation_divides_rates_and_stretches_timers() {
        let emulated = DcqcnConfig::with_line_rate(400_000_000_000);
        let d = Dilation::new(8000.0).unwrap();
        let wall = emulated.dilated(d);
        wall.validate().unwrap();
        assert_eq!(wall.line_rate_bps, 50_000_000);
        assert_eq!(wall.min_rate_bps as f64, emulated.min_rate_bps as f64 / 8000.0);
        assert_eq!(wall.rate_ai_bps as f64, emulated.rate_ai_bps as f64 / 8000.0);
        assert_eq!(wall.rate_hai_bps as f64, emulated.rate_hai_bps as f64 / 8000.0);
        assert_eq!(wall.alpha_update_period_ns as f64, emulated.alpha_update_period_ns as f64 * 8000.0);
        assert_eq!(wall.rate_increase_period_ns as f64, emulated.rate_increase_period_ns as f64 * 8000.0);
        assert_eq!(wall.byte_counter_bytes, emulated.byte_counter_bytes, "B is bytes");
        assert_eq!(
            (wall.g, wall.alpha_init, wall.fast_recovery_steps),
            (emulated.g, emulated.alpha_init, emulated.fast_recovery_steps)
        );
        assert_eq!(emulated.dilated(Dilation::REAL_TIME), emulated);
        // The same CNP sequence, D times stretched, gives rates D times lower: a cut and the
        // recovery steps that follow, observed at the matching wall-clock instants.
        let mut e = ReactionPoint::new(emulated).unwrap();
        let mut w = ReactionPoint::new(wall).unwrap();
        e.on_cnp(10 * US);
        w.on_cnp(d.duration(10 * US));
        for (k, t) in (0..40).map(|k| (k, 10 * US + k * 100 * US)) {
            if k == 20 {
                e.on_cnp(t);
                w.on_cnp(d.duration(t));
            }
            e.poll(t);
            w.poll(d.duration(t));
            let (er, wr) = (e.rate() as f64, w.rate() as f64 * 8000.0);
            assert!((er - wr).abs() <= 1e-6 * er + 8000.0, "t {t}: emulated {er} vs wall × D {wr}");
        }
    }

    #[test]
    fn first_cnp_from_line_rate_halves_rate() {
        let mut r = rp();
        assert_eq!(r.rate(), LINE);
        r.on_cnp(1_000);
        assert!(close(r.rate_f64(), LINE as f64 / 2.0), "rate {}", r.rate_f64());
        assert!(close(r.target_rate_f64(), LINE as f64));
        // α = (1 − g)·1 + g = 1.
        assert!(close(r.alpha(), 1.0));
        assert_eq!(r.counters().cnps, 1);
    }

    #[test]
    fn alpha_and_rate_follow_equations_over_several_cnps() {
        let g = 1.0 / 16.0;
        let mut cfg = DcqcnConfig::with_line_rate(LINE);
        cfg.alpha_init = 0.5;
        cfg.clamp_target_rate = true;
        let mut r = ReactionPoint::new(cfg).unwrap();
        let (mut rc, mut alpha) = (LINE as f64, 0.5f64);
        // CNPs 10 µs apart: no α decay (K = 55 µs) and no timer (T = 1500 µs) in between.
        for i in 0..6u64 {
            r.on_cnp(i * 10 * US);
            let rt = rc;
            rc *= 1.0 - alpha / 2.0;
            alpha = (1.0 - g) * alpha + g;
            assert!(close(r.rate_f64(), rc), "cnp {i}: {} vs {rc}", r.rate_f64());
            assert!(close(r.target_rate_f64(), rt));
            assert!(close(r.alpha(), alpha), "cnp {i}: {} vs {alpha}", r.alpha());
        }
        // Concrete values: after the first CNP α = 15/16·0.5 + 1/16 = 0.53125.
        let mut r2 = ReactionPoint::new(cfg).unwrap();
        r2.on_cnp(0);
        assert!(close(r2.alpha(), 0.53125));
        assert!(close(r2.rate_f64(), LINE as f64 * 0.75));
    }

    #[test]
    fn rate_never_below_min() {
        let mut r = rp();
        for i in 0..200 {
            r.on_cnp(i * US);
        }
        assert_eq!(r.rate(), 100_000_000);
    }

    #[test]
    fn alpha_decays_every_k_without_cnp() {
        let g = 1.0 / 16.0;
        let mut r = rp();
        r.on_cnp(0);
        assert!(close(r.alpha(), 1.0));
        r.poll(54 * US);
        assert!(close(r.alpha(), 1.0), "no decay before K");
        r.poll(55 * US);
        assert!(close(r.alpha(), 1.0 - g));
        // 10 more periods in one jump (timer T = 1500 µs has not fired yet).
        r.poll(55 * US * 11);
        assert!(close(r.alpha(), (1.0 - g).powi(11)), "{}", r.alpha());
        assert_eq!(r.counters().alpha_decays, 11);
        // A CNP restarts the K period.
        let a = r.alpha();
        r.on_cnp(55 * US * 11 + 30 * US);
        let a2 = (1.0 - g) * a + g;
        assert!(close(r.alpha(), a2));
        r.poll(55 * US * 12 + 1);
        assert!(close(r.alpha(), a2), "decay period restarted by CNP");
        r.poll(55 * US * 11 + 30 * US + 55 * US);
        assert!(close(r.alpha(), a2 * (1.0 - g)));
    }

    #[test]
    fn fast_recovery_converges_to_target_in_f_steps() {
        let mut r = rp();
        r.on_cnp(0);
        let rt = LINE as f64;
        let mut rc = LINE as f64 / 2.0;
        let t = r.config().rate_increase_period_ns;
        for step in 1..=5u64 {
            r.poll(step * t);
            rc = (rt + rc) / 2.0;
            assert!(close(r.rate_f64(), rc), "step {step}");
            assert!(close(r.target_rate_f64(), rt), "Rt unchanged in fast recovery");
        }
        // Gap to Rt shrank by 2^5.
        assert!(close(LINE as f64 - r.rate_f64(), LINE as f64 / 2.0 / 32.0));
        assert_eq!(r.counters().fast_recovery, 5);
        assert_eq!(r.counters().additive_increase, 0);
    }

    #[test]
    fn additive_then_hyper_increase_amounts() {
        let mut cfg = DcqcnConfig::with_line_rate(LINE);
        cfg.byte_counter_bytes = 1_000_000;
        cfg.clamp_target_rate = true;
        let mut r = ReactionPoint::new(cfg).unwrap();
        // Two clamping CNPs so that Rt is well below line rate: Rt = 50G, Rc = 25G.
        r.on_cnp(0);
        r.on_cnp(1);
        let (mut rt, mut rc) = (LINE as f64 / 2.0, LINE as f64 / 4.0);
        assert!(close(r.rate_f64(), rc) && close(r.target_rate_f64(), rt));
        let t = cfg.rate_increase_period_ns;
        let ai = cfg.rate_ai_bps as f64;
        let hai = cfg.rate_hai_bps as f64;
        // 5 timer events: fast recovery (t = 0..4 before each).
        for k in 1..=5u64 {
            r.poll(1 + k * t);
            rc = (rt + rc) / 2.0;
        }
        assert!(close(r.rate_f64(), rc));
        // 6th timer event (t = 5, b = 0): additive.
        r.poll(1 + 6 * t);
        rt += ai;
        rc = (rt + rc) / 2.0;
        assert!(close(r.target_rate_f64(), rt), "Rt {} vs {rt}", r.target_rate_f64());
        assert!(close(r.rate_f64(), rc));
        assert_eq!(r.counters().additive_increase, 1);
        // Byte-counter events b = 0..=5 with t = 6: max ≥ F and min ≤ F → additive.
        let now = 1 + 6 * t + 10;
        for _ in 0..6 {
            r.on_bytes_sent(cfg.byte_counter_bytes, now);
            rt += ai;
            rc = (rt + rc) / 2.0;
        }
        assert!(close(r.target_rate_f64(), rt));
        assert_eq!(r.stages(), (6, 6));
        // Now t = 6, b = 6 > F: hyper with i = 1, then b = 7 → i = 1 still (min(6,7) = 6).
        r.on_bytes_sent(cfg.byte_counter_bytes, now);
        rt += 1.0 * hai;
        rc = (rt + rc) / 2.0;
        assert!(close(r.target_rate_f64(), rt), "{} vs {rt}", r.target_rate_f64());
        assert!(close(r.rate_f64(), rc));
        // Timer event at t = 6, b = 7 → i = 1; then t = 7, b = 7 → i = 2.
        r.poll(1 + 7 * t);
        rt += hai;
        rc = (rt + rc) / 2.0;
        assert!(close(r.target_rate_f64(), rt));
        r.on_bytes_sent(cfg.byte_counter_bytes, 1 + 7 * t);
        rt += 2.0 * hai;
        rc = (rt + rc) / 2.0;
        assert!(close(r.target_rate_f64(), rt), "{} vs {rt}", r.target_rate_f64());
        assert!(close(r.rate_f64(), rc));
        assert_eq!(r.counters().hyper_increase, 3);
    }

    #[test]
    fn recovers_to_line_rate_and_stops() {
        let mut r = rp();
        r.on_cnp(0);
        r.poll(10_000_000_000);
        assert_eq!(r.rate(), LINE);
        assert!(r.target_rate_f64() <= LINE as f64);
        // Only the α timer is left once recovered.
        let d = r.next_deadline().unwrap();
        assert!(d > 10_000_000_000 && d <= 10_000_000_000 + 55 * US);
    }

    #[test]
    fn byte_counter_idle_before_first_cnp() {
        let mut r = rp();
        r.on_bytes_sent(1 << 40, 5);
        assert_eq!(r.rate(), LINE);
        assert_eq!(r.counters().byte_events, 0);
        assert_eq!(r.next_deadline(), None);
    }

    #[test]
    fn invalid_config_is_rejected() {
        let mut c = DcqcnConfig::with_line_rate(LINE);
        c.g = 0.0;
        assert!(ReactionPoint::new(c).is_err());
        let c = DcqcnConfig::with_line_rate(0);
        assert!(matches!(ReactionPoint::new(c), Err(DcqcnError::Invalid(_))));
    }

    #[test]
    fn np_sends_at_most_one_cnp_per_interval() {
        let mut np = NotificationPoint::default();
        assert!(np.on_ce(1_000));
        // Many CE packets within 50 µs: no further CNP.
        for i in 1..1000u64 {
            assert!(!np.on_ce(1_000 + i * 49), "t = {}", 1_000 + i * 49);
        }
        assert_eq!(np.cnps(), 1);
        // Exactly 50 µs after the last CNP: another one.
        assert!(np.on_ce(51_000));
        assert!(!np.on_ce(100_999));
        assert!(np.on_ce(101_000));
        assert_eq!(np.cnps(), 3);
        assert_eq!(np.ce_packets(), 1003);
    }

    #[test]
    fn cuts_without_a_rise_in_between_keep_the_target() {
        // ClampTargetRate false (the references' default): a burst of CNPs, no increase event in
        // between, keeps Rt where it was before the burst.
        let mut r = rp();
        r.on_cnp(0);
        r.on_cnp(10 * US);
        r.on_cnp(20 * US);
        assert!(close(r.target_rate_f64(), LINE as f64), "Rt {}", r.target_rate_f64());
        assert!(r.rate_f64() < LINE as f64 / 4.0, "three cuts: {}", r.rate_f64());
        // One byte-counter increase event, then a cut: now the target is clamped to Rc.
        let before = r.rate_f64();
        r.on_bytes_sent(r.config().byte_counter_bytes, 30 * US);
        let risen = (LINE as f64 + before) / 2.0;
        assert!(close(r.rate_f64(), risen), "fast recovery step: {} vs {risen}", r.rate_f64());
        r.on_cnp(40 * US);
        assert!(close(r.target_rate_f64(), risen), "clamped after a rise: {}", r.target_rate_f64());
        // A timer increase event counts as a rise too.
        let mut t = rp();
        t.on_cnp(0);
        t.poll(t.config().rate_increase_period_ns);
        let rc = t.rate_f64();
        t.on_cnp(t.config().rate_increase_period_ns + US);
        assert!(close(t.target_rate_f64(), rc));
        // With clamp_target_rate every cut clamps, as in the paper's equations.
        let mut cfg = DcqcnConfig::with_line_rate(LINE);
        cfg.clamp_target_rate = true;
        let mut c = ReactionPoint::new(cfg).unwrap();
        c.on_cnp(0);
        let rc = c.rate_f64();
        c.on_cnp(10 * US);
        assert!(close(c.target_rate_f64(), rc));
    }

    #[test]
    fn connectx_profile_maps_the_firmware_defaults() {
        let c = DcqcnProfile::Connectx.rp(LINE);
        c.validate().unwrap();
        assert_eq!((c.rate_increase_period_ns, c.alpha_update_period_ns, c.fast_recovery_steps), (300 * US, US, 1));
        assert_eq!(
            (c.byte_counter_bytes, c.rate_ai_bps, c.rate_hai_bps, c.min_rate_bps),
            (32_767 * 64, 5_000_000, 50_000_000, 1_000_000)
        );
        assert!(!c.clamp_target_rate);
        assert_eq!(DcqcnProfile::Connectx.cnp_interval_ns(), 4 * US);
        assert_eq!(DcqcnProfile::default().rp(LINE), DcqcnConfig::with_line_rate(LINE));
        assert_eq!(DcqcnProfile::default().cnp_interval_ns(), 50 * US);
        // The firmware's fixed-point α update: 1023 · 1019/1024 + 5 with a CNP in the period.
        let mut r = ReactionPoint::new(c).unwrap();
        r.on_cnp(0);
        assert!(close(r.alpha(), (1023.0 / 1024.0) * (1019.0 / 1024.0) + 5.0 / 1024.0), "{}", r.alpha());
        // One decay step per µs without a CNP.
        r.poll(US);
        assert!(close(r.alpha(), ((1023.0 / 1024.0) * (1019.0 / 1024.0) + 5.0 / 1024.0) * 1019.0 / 1024.0));
        assert_eq!(serde_json::to_string(&DcqcnProfile::Connectx).unwrap(), "\"connectx\"");
        assert_eq!(serde_json::from_str::<DcqcnProfile>("\"ns3-hpcc\"").unwrap(), DcqcnProfile::Ns3Hpcc);
    }

    #[test]
    fn dcqcn_paper_profile_takes_the_papers_values() {
        // 400 Gbit/s NIC: R_AI = 40 Mbit/s × 400 / 40 = 400 Mbit/s, R_HAI ten times that.
        let c = DcqcnProfile::DcqcnPaper.rp(400_000_000_000);
        c.validate().unwrap();
        assert_eq!((c.alpha_update_period_ns, c.rate_increase_period_ns, c.fast_recovery_steps), (55 * US, 55 * US, 5));
        assert_eq!((c.byte_counter_bytes, c.rate_ai_bps, c.rate_hai_bps), (10_000_000, 400_000_000, 4_000_000_000));
        assert_eq!((c.g, c.alpha_init, c.clamp_target_rate, c.min_rate_bps), (1.0 / 256.0, 1.0, true, 0));
        assert_eq!(DcqcnProfile::DcqcnPaper.rp(40_000_000_000).rate_ai_bps, 40_000_000, "the paper's 40G value");
        assert_eq!(DcqcnProfile::DcqcnPaper.cnp_interval_ns(), 50 * US);
        assert_eq!(serde_json::from_str::<DcqcnProfile>("\"dcqcn-paper\"").unwrap(), DcqcnProfile::DcqcnPaper);
        assert_eq!(DcqcnProfile::DcqcnPaper.to_string(), "dcqcn-paper");
        // No floor survives dilation as no floor.
        let wall = c.dilated(Dilation::new(8000.0).unwrap());
        assert_eq!((wall.min_rate_bps, wall.rate_ai_bps), (0, 50_000));
        wall.validate().unwrap();
    }

    /// Asserts `r`'s (Rt, Rc) in Gbit/s against hand-computed values.
    fn at(r: &ReactionPoint, rt: f64, rc: f64, what: &str) {
        let (grt, grc) = (r.target_rate_f64() / 1e9, r.rate_f64() / 1e9);
        assert!(close(grt, rt) && close(grc, rc), "{what}: (Rt, Rc) = ({grt}, {grc}) Gbit/s, expected ({rt}, {rc})");
    }

    #[test]
    fn paper_profile_trajectory_follows_the_papers_equations() {
        // The start-up transient at 400 Gbit/s: four CNPs 10 µs apart (no α decay, no
        // timer in between). Eq. 1 with α = 1: Rt = Rc, Rc = Rc/2, α = (1 − g) + g = 1.
        let mut r = ReactionPoint::new(DcqcnProfile::DcqcnPaper.rp(400_000_000_000)).unwrap();
        at(&r, 400.0, 400.0, "line rate");
        for (k, (rt, rc)) in [(400.0, 200.0), (200.0, 100.0), (100.0, 50.0), (50.0, 25.0)].into_iter().enumerate() {
            r.on_cnp(k as u64 * 10 * US);
            at(&r, rt, rc, "cut");
            assert_eq!(r.alpha(), 1.0);
        }
        // Timer events every T = 55 µs from the last cut (30 µs): F = 5 fast-recovery steps
        // towards Rt = 50 (Eq. 3), not towards the 400 before the burst.
        for (k, rc) in [37.5, 43.75, 46.875, 48.4375, 49.21875].into_iter().enumerate() {
            r.poll((30 + 55 * (k as u64 + 1)) * US);
            at(&r, 50.0, rc, "fast recovery");
        }
        // α decayed once per K = 55 µs (Eq. 2) at 85, 140, 195, 250 and 305 µs.
        assert!(close(r.alpha(), (255.0f64 / 256.0).powi(5)), "α {}", r.alpha());
        // The sixth timer event (t = 5 before it): additive increase, R_AI = 0.4 Gbit/s (Eq. 4).
        r.poll(360 * US);
        at(&r, 50.4, 49.809375, "additive (timer)");
        // Byte-counter events (B = 10 MB) with t = 6: b = 0..5 before each, additive.
        let expected = [
            (50.8, 50.3046875),
            (51.2, 50.75234375),
            (51.6, 51.176171875),
            (52.0, 51.5880859375),
            (52.4, 51.99404296875),
            (52.8, 52.397021484375),
        ];
        for (rt, rc) in expected {
            r.on_bytes_sent(10_000_000, 360 * US);
            at(&r, rt, rc, "additive (bytes)");
        }
        assert_eq!(r.stages(), (6, 6));
        // t = 6, b = 6: hyper increase with i = min(t, b) − F = 1, R_HAI = 4 Gbit/s.
        r.on_bytes_sent(10_000_000, 360 * US);
        at(&r, 56.8, 54.5985107421875, "hyper i = 1 (bytes)");
        // Timer at 415 µs with t = 6, b = 7: i = 1; then a byte event with t = 7, b = 7: i = 2.
        r.poll(415 * US);
        at(&r, 60.8, 57.69925537109375, "hyper i = 1 (timer)");
        r.on_bytes_sent(10_000_000, 415 * US);
        at(&r, 68.8, 63.249627685546875, "hyper i = 2 (bytes)");
        let c = r.counters();
        assert_eq!((c.cnps, c.fast_recovery, c.additive_increase, c.hyper_increase), (4, 5, 7, 3));
        // A cut at 420 µs, after seven α decays (85 … 415 µs): Rt = Rc, Rc cut by α/2, then α
        // rises by g.
        let a7 = (255.0f64 / 256.0).powi(7);
        r.on_cnp(420 * US);
        at(&r, 63.249627685546875, 63.249627685546875 * (1.0 - a7 / 2.0), "cut after recovery");
        assert!(close(r.alpha(), a7 * 255.0 / 256.0 + 1.0 / 256.0), "α {}", r.alpha());
    }

    #[test]
    fn paper_profile_has_no_rate_floor() {
        // Twelve cuts with α = 1 halve 400 Gbit/s twelve times: 97.66 Mbit/s, below the 1 Gbit/s
        // and 100 Mbit/s floors of the other settings; Rt follows Rc down.
        let mut r = ReactionPoint::new(DcqcnProfile::DcqcnPaper.rp(400_000_000_000)).unwrap();
        for k in 0..12 {
            r.on_cnp(k * US);
        }
        assert_eq!(r.rate_f64(), 400e9 / 4096.0);
        assert_eq!(r.target_rate_f64(), 400e9 / 2048.0);
    }

    #[test]
    fn hpcc_dcqcn_paper_profile_maps_the_hpcc_run_py_setting() {
        // 400 Gbit/s NIC: ai = 5 · 400 / 25 = 80 Mb/s, hai = 800 Mb/s.
        let c = DcqcnProfile::HpccDcqcnPaper.rp(400_000_000_000);
        c.validate().unwrap();
        assert_eq!((c.alpha_update_period_ns, c.rate_increase_period_ns, c.fast_recovery_steps), (50 * US, 55 * US, 1));
        assert_eq!((c.rate_ai_bps, c.rate_hai_bps, c.min_rate_bps), (80_000_000, 800_000_000, 1_000_000_000));
        assert_eq!((c.g, c.alpha_init, c.clamp_target_rate), (1.0 / 256.0, 1.0, false));
        assert_eq!(DcqcnProfile::HpccDcqcnPaper.rp(25_000_000_000).rate_ai_bps, 5_000_000);
        assert_eq!(DcqcnProfile::HpccDcqcnPaper.cnp_interval_ns(), 50 * US);
        let parsed = serde_json::from_str::<DcqcnProfile>("\"hpcc-dcqcn-paper\"").unwrap();
        assert_eq!(parsed, DcqcnProfile::HpccDcqcnPaper);
        assert_eq!(DcqcnProfile::HpccDcqcnPaper.to_string(), "hpcc-dcqcn-paper");
    }

    #[test]
    fn htsim_profile_takes_the_simulators_defaults() {
        let c = DcqcnProfile::Htsim.rp(100_000_000_000);
        c.validate().unwrap();
        assert_eq!((c.alpha_update_period_ns, c.rate_increase_period_ns, c.fast_recovery_steps), (55 * US, 55 * US, 5));
        assert_eq!((c.byte_counter_bytes, c.rate_ai_bps, c.rate_hai_bps), (10_000_000, 5_000_000_000, 10_000_000_000));
        assert_eq!((c.g, c.alpha_init, c.clamp_target_rate, c.min_rate_bps), (1.0 / 256.0, 1.0, true, 0));
        assert_eq!(DcqcnProfile::Htsim.cnp_interval_ns(), 50 * US);
        assert_eq!(serde_json::from_str::<DcqcnProfile>("\"htsim\"").unwrap(), DcqcnProfile::Htsim);
        // Two cuts, five fast-recovery steps, one additive step of line rate / 20.
        let mut r = ReactionPoint::new(c).unwrap();
        r.on_cnp(0);
        r.on_cnp(US);
        at(&r, 50.0, 25.0, "two cuts");
        for (k, rc) in [37.5, 43.75, 46.875, 48.4375, 49.21875].into_iter().enumerate() {
            r.poll(US + 55 * US * (k as u64 + 1));
            at(&r, 50.0, rc, "fast recovery");
        }
        r.poll(US + 55 * US * 6);
        at(&r, 55.0, 52.109375, "additive");
    }
}
