//! DCQCN congestion control (Zhu et al., "Congestion Control for Large-Scale RDMA
//! Deployments", ACM SIGCOMM 2015, §3 "The DCQCN algorithm").
//!
//! * [`NotificationPoint`] (NP, receiver NIC): at most one CNP per interval when CE-marked
//!   packets arrive (the paper's NP: "at most one CNP every N = 50 µs" per flow); interval 0
//!   sends one for every CE-marked packet (ns-3 HPCC's NP: `hpcc-dcqcn`). What it does with
//!   the marks within the interval ([`CnpMode`]) and what shares an interval ([`CnpScope`],
//!   [`CnpPacer`]) are selectable: "The notification point" below.
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
//! Four options select ns-3 HPCC's mechanism instead (`DcqcnConfig`; every profile but
//! `hpcc-dcqcn` keeps the paper's, described above):
//!   - `byte_counter_bytes` 0: no byte counter; the timer's stage count `t` alone selects the
//!     phase (`t < F` fast recovery, `t = F` additive, `t > F` hyper);
//!   - [`HyperIncrease::Fixed`]: a hyper-increase event adds `R_HAI` once, not `i·R_HAI`;
//!   - `rate_decrease_interval_ns` > 0: a CNP only records that it arrived; on a grid of that
//!     period from the QP's first CNP the RP cuts once if a CNP arrived since the last check
//!     (the increase timer restarting at the check). The first CNP starts the grid and does not
//!     cut. At equal times the increase timer runs before the check, as ns-3 orders them, so
//!     such a check clamps `Rt`;
//!   - [`AlphaUpdate::PerPeriod`]: α changes only at the boundaries of a K grid from the first
//!     CNP: `+g` (`α = (1 − g)·α + g`) if a CNP arrived in the period, else a decay; the first
//!     CNP sets α = `alpha_init` and does not count; a cut uses the α of the last boundary.
//!
//! # Where the default parameters come from (cited, not invented)
//!
//! The paper gives the equations; the numeric defaults (the `ns3-hpcc` profile) are the
//! attribute defaults of the ns-3 DCQCN model in the HPCC repository,
//! `alibaba-edu/High-Precision-Congestion-Control`, file
//! `simulation/src/point-to-point/model/rdma-hw.cc`, `RdmaHw::GetTypeId` (commit 0b41ed27 as
//! read). They are not what that repository's simulations run: `scratch/third.cc` sets every
//! one of them from its config file (`third.cc:861-882`), and `simulation/run.py --cc dcqcn`
//! writes g 1/256, K 1 µs, T 300 µs, F 1, R_AI and R_HAI per 25 Gbit/s and a 1 Gbit/s floor
//! (the `hpcc-dcqcn` profile below; `sim/ns3-hpcc/README.md` runs both sets). Nor is the
//! mechanism ns-3's: `ns3-hpcc` runs the paper's (a byte counter, `i·R_HAI`, a cut and an α
//! rise on every CNP, a 50 µs NP interval), where ns-3 has the four differences the
//! `hpcc-dcqcn` options model.
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
//! The NP interval (50 µs) is the paper's CNP generation interval and rocefab's default; ns-3
//! HPCC's NP has none (it flags the ACK of every CE-marked packet, `rdma-hw.cc:321-322`).
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
//! * `hpcc-dcqcn`: below; ns-3's mechanism as well as its values.
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
//! per K; and timers are checked when the source sends (`doNextEvent`). Its NP (lines 204–226)
//! also sends a CNP when the interval ends if a marked packet arrived during it: that is
//! [`CnpMode::Deferred`], which the `htsim` profile does not imply (`dcqcn: { np: { cnp:
//! deferred } }` selects it).
//!
//! # The notification point
//!
//! [`NpSettings`] (the topology's `dcqcn: { np: { cnp, scope } }`) choose, for every profile:
//!
//! * [`CnpMode::Immediate`] (default): a CE-marked packet gets a CNP at once if none was sent in
//!   the last N; marks within N of a CNP are ignored. The paper's NP (Zhu et al., SIGCOMM 2015,
//!   §3.1, "NP algorithm", and its NP state-machine figure: the decision is taken when a marked
//!   packet arrives, against the time of the last CNP; the figure number was not checked here).
//!   NVIDIA's ConnectX exposes the same rule as `min_time_between_cnps` of `ecn/roce_np` (MLNX_OFED
//!   "Explicit Congestion Notification (ECN)").
//! * [`CnpMode::Deferred`]: as immediate, and a mark within N of the last CNP is remembered;
//!   when N has passed since that CNP, one more CNP goes out if any mark arrived, and starts the
//!   next interval. This is UEC htsim's `DCQCNSink` (`ultraethernet/uet-htsim` commit 40ccb05,
//!   `htsim/sim/dcqcn.cpp`): `receivePacket` (lines 204–219) sends a CNP and schedules itself
//!   `_cnp_interval` later (line 212), or counts the mark in `_marked_packets_since_last_cnp`
//!   (line 215); `doNextEvent` (lines 221–226) sends a CNP if that count is non-zero. One
//!   congestion episode shorter than N thus gets two CNPs (two cuts) where the paper's NP sends
//!   one. Under a shared scope the deferred CNP goes to the QP of the latest mark (htsim has one
//!   sink per flow, so it never has to choose).
//! * [`CnpScope`]: one interval per QP (default, the paper's "per flow"), per pair of local and
//!   remote IP address, or per NIC port. sonic-mgmt-style RoCE CNP checks model NICs that pace
//!   CNPs per NIC port, per IP pair or per destination IP (`CNP_PACING_MODE` `PER_PORT`,
//!   `PER_IP_PAIR`, `PER_DEST_IP`, expected-CNP counting per scope with a
//!   `min_time_between_cnps_us`; a CNP checker module seen in the code index, its repository not
//!   identified here). Under a shared scope a CNP goes to the QP whose mark triggered it; the
//!   other QPs of the scope get none for their marks in that interval.
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
//! # The HPCC `dcqcn` setting ([`DcqcnProfile::HpccDcqcn`])
//!
//! What the HPCC repository's ns-3 simulations run with `simulation/run.py --cc dcqcn` (pinned
//! at commit 9f4be2a9, whose `rdma-hw.cc` CC code is that of 0b41ed27), values and mechanism,
//! so that rocefab and `sim/ns3-hpcc/results.json`'s DCQCN rows run identical parameters:
//!
//! | our field                     | value                     | where                                                  |
//! |-------------------------------|---------------------------|--------------------------------------------------------|
//! | `g`                           | 1/256                     | `run.py:104` `g=0.00390625` (`EWMA_GAIN`)              |
//! | `alpha_update_period_ns` K    | 1 µs                      | `run.py:104` `t_alpha=1` (`ALPHA_RESUME_INTERVAL`)     |
//! | `rate_increase_period_ns` T   | 300 µs                    | `run.py:104` `t_inc=300` (`RP_TIMER`)                  |
//! | `rate_decrease_interval_ns`   | 4 µs                      | `run.py:104` `t_dec=4` (`RATE_DECREASE_INTERVAL`)      |
//! | `fast_recovery_steps` F       | 1                         | `run.py:25` `FAST_RECOVERY_TIMES 1`                    |
//! | `rate_ai_bps` R_AI            | 5 Mb/s per 25 Gbit/s      | `run.py:100` `ai = 5 * bw / 25`: 20 / 80 Mb/s at 100 / 400G |
//! | `rate_hai_bps` R_HAI          | 50 Mb/s per 25 Gbit/s     | `run.py:101` `hai = 50 * bw / 25`: 200 / 800 Mb/s      |
//! | `min_rate_bps`                | 1 Gbit/s                  | `run.py:28` `MIN_RATE 1000Mb/s`                        |
//! | `clamp_target_rate`           | false                     | `run.py:22` `CLAMP_TARGET_RATE 0`; `rdma-hw.cc:661-667` clamps iff a timer stage ran |
//! | `alpha_init`                  | 1                         | `rdma-hw.cc:643`, on the first CNP                     |
//! | `byte_counter_bytes` B        | 0: none                   | `rdma-hw.cc:683-739`: increase events come from `RateIncEventTimerMlx` only |
//! | `hyper_increase`              | `Fixed`                   | `rdma-hw.cc:690-695, 732`: stage > F adds `m_rhai` once |
//! | `alpha_update`                | `PerPeriod`               | `rdma-hw.cc:618-636` (`UpdateAlphaMlx`), `:641-646` (first CNP) |
//! | first CNP                     | no cut, starts the grids  | `rdma-hw.cc:641-651`, `RateOnFirstCnp` 1.0 (`:62-66`, not set by `third.cc`) |
//! | CNP interval (NP)             | 0: every CE-marked packet | `rdma-hw.cc:306-309, 321-322`: the ACK of each CE packet carries the CNP flag |
//!
//! The NP is modelled with interval 0 (the NP's `now − last ≥ interval` test then passes for
//! every CE-marked packet), so the receiver sends one CNP frame per CE-marked packet where
//! ns-3 sets a flag on that packet's ACK; the RP's 4 µs decrease interval then bounds the cuts
//! as in ns-3. Two details are not modelled: ns-3 offsets the decrease grid by 1 ns from the α
//! grid so that α updates first (here: α first at equal times), and its increase timer keeps
//! running at line rate where this RP stops it (no effect on the rates; the stage count it
//! would keep raising only decides whether the next cut clamps, and it clamps here too).
//!
use std::net::IpAddr;

pub use rocefab_contracts::dcqcn::{
    AlphaUpdate, CnpMode, CnpScope, DcqcnConfig, DcqcnError, DcqcnProfile, HyperIncrease, NpSettings,
    DEFAULT_CNP_INTERVAL_NS,
};

/// Which increase phase an increase event ran.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IncreasePhase {
    /// `Rc = (Rt + Rc)/2`.
    FastRecovery,
    /// `Rt += R_AI; Rc = (Rt + Rc)/2`.
    Additive,
    /// `Rt += i·R_HAI` (or `R_HAI` with [`HyperIncrease::Fixed`]); `Rc = (Rt + Rc)/2`.
    Hyper,
}

/// RP counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RpCounters {
    /// CNPs processed.
    pub cnps: u64,
    /// α decay steps applied.
    pub alpha_decays: u64,
    /// Fast-recovery events.
    pub fast_recovery: u64,
    /// Additive-increase events.
    pub additive_increase: u64,
    /// Hyper-increase events.
    pub hyper_increase: u64,
    /// Rate cuts (with `rate_decrease_interval_ns` 0, one per CNP).
    pub cuts: u64,
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
    /// A CNP has been seen.
    cnp_seen: bool,
    /// The α timer runs (per-CNP α: from the first cut; per-period α: from the first CNP).
    alpha_running: bool,
    /// Per-period α: a CNP arrived in the current K period.
    alpha_cnp_arrived: bool,
    /// Rate-decrease interval: a CNP arrived since the last check.
    decrease_pending: bool,
    /// Rate-decrease interval: the next check on the grid from the first CNP.
    next_decrease_check: u64,
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
            alpha_running: false,
            alpha_cnp_arrived: false,
            decrease_pending: false,
            next_decrease_check: 0,
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

    /// Earliest time at which [`ReactionPoint::poll`] has work to do. With per-period α the
    /// α grid is not a deadline: α only matters at a cut, and `poll` brings it up to date
    /// first ([`ReactionPoint::alpha`] may lag until the next `poll`).
    pub fn next_deadline(&self) -> Option<u64> {
        let a = (self.alpha_running && self.cfg.alpha_update == AlphaUpdate::PerCnp).then_some(self.next_alpha_update);
        let r = self.recovering.then_some(self.next_rate_timer);
        let d = self.decrease_pending.then_some(self.next_decrease_check);
        [a, r, d].into_iter().flatten().min()
    }

    /// A CNP arrived for this QP at `now`: a cut at once, or, with a rate-decrease interval,
    /// at the next check.
    pub fn on_cnp(&mut self, now: u64) {
        self.poll(now);
        self.counters.cnps += 1;
        let first = !self.cnp_seen;
        self.cnp_seen = true;
        if self.cfg.alpha_update == AlphaUpdate::PerPeriod {
            if first {
                // cnp_received_mlx: α = 1, the α grid starts, this CNP does not count for it.
                self.alpha = self.cfg.alpha_init;
                self.alpha_running = true;
                self.next_alpha_update = now.saturating_add(self.cfg.alpha_update_period_ns);
            } else {
                self.alpha_cnp_arrived = true;
            }
        }
        let interval = self.cfg.rate_decrease_interval_ns;
        if interval == 0 {
            self.cut(now);
            return;
        }
        self.decrease_pending = true;
        if first {
            // The grid starts at the first CNP, which does not cut (RateOnFirstCnp 1.0).
            self.next_decrease_check = now.saturating_add(interval);
        } else if self.next_decrease_check < now {
            // Checks without a CNP since the last one changed nothing: skip to the first one
            // at or after `now`.
            let behind = now - self.next_decrease_check;
            self.next_decrease_check += behind.div_ceil(interval) * interval;
        }
        // A check falling exactly at `now` sees this CNP.
        self.poll(now);
    }

    /// Cuts the rate at `now` (Eq. 1; with per-CNP α, α rises with the cut).
    fn cut(&mut self, now: u64) {
        self.counters.cuts += 1;
        if self.cfg.clamp_target_rate || self.timer_stage > 0 || self.byte_stage > 0 {
            self.rt = self.rc;
        }
        let min = self.cfg.min_rate_bps as f64;
        self.rc = (self.rc * (1.0 - self.alpha / 2.0)).max(min);
        if self.cfg.alpha_update == AlphaUpdate::PerCnp {
            self.alpha = (1.0 - self.cfg.g) * self.alpha + self.cfg.g;
            self.alpha_running = true;
            self.next_alpha_update = now.saturating_add(self.cfg.alpha_update_period_ns);
        }
        self.recovering = true;
        self.next_rate_timer = now.saturating_add(self.cfg.rate_increase_period_ns);
        self.timer_stage = 0;
        self.byte_stage = 0;
        self.bytes_acc = 0;
    }

    /// `n` bytes were transmitted at `now` (drives the byte counter, if there is one).
    pub fn on_bytes_sent(&mut self, n: u64, now: u64) {
        self.poll(now);
        if !self.recovering || self.cfg.byte_counter_bytes == 0 {
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

    /// Runs the α, rate-increase and rate-decrease timers that expired at or before `now`, in
    /// time order (at equal times: α, then the increase timer, then the decrease check, as
    /// ns-3 orders them). Returns the rate after processing.
    pub fn poll(&mut self, now: u64) -> u64 {
        loop {
            let alpha_at = (self.alpha_running && self.next_alpha_update <= now).then_some(self.next_alpha_update);
            let rate_at = (self.recovering && self.next_rate_timer <= now).then_some(self.next_rate_timer);
            let dec_at = (self.decrease_pending && self.next_decrease_check <= now).then_some(self.next_decrease_check);
            let other = rate_at.into_iter().chain(dec_at).min();
            match (alpha_at, rate_at, dec_at) {
                (Some(a), _, _) if other.is_none_or(|o| a <= o) => {
                    let k = self.cfg.alpha_update_period_ns;
                    if self.alpha_cnp_arrived {
                        // Per-period α with a CNP in the period just ended.
                        self.alpha = (1.0 - self.cfg.g) * self.alpha + self.cfg.g;
                        self.alpha_cnp_arrived = false;
                        self.next_alpha_update += k;
                    } else {
                        // Decays only, up to the next other event (or `now`): closed form.
                        let until = other.unwrap_or(now);
                        let n = (until - a) / k + 1;
                        self.decay_alpha(n);
                        self.next_alpha_update += n * k;
                    }
                }
                (_, Some(r), _) if dec_at.is_none_or(|d| r <= d) => {
                    self.next_rate_timer += self.cfg.rate_increase_period_ns;
                    self.counters.timer_events += 1;
                    self.increase();
                    self.timer_stage = self.timer_stage.saturating_add(1);
                }
                (_, _, Some(d)) => {
                    self.decrease_pending = false;
                    self.next_decrease_check += self.cfg.rate_decrease_interval_ns;
                    self.cut(d);
                }
                _ => break,
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
        let t = self.timer_stage;
        // Without a byte counter the timer's count alone selects the phase.
        let b = if self.cfg.byte_counter_bytes == 0 { t } else { self.byte_stage };
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
                let i = match self.cfg.hyper_increase {
                    HyperIncrease::Scaled => f64::from(t.min(b) - f),
                    HyperIncrease::Fixed => 1.0,
                };
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

/// DCQCN notification point of one pacing domain (a QP, an IP pair or a port: [`CnpPacer`]):
/// at most one CNP per interval, and with [`CnpMode::Deferred`] one more when the interval ends
/// if marks arrived during it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NotificationPoint {
    interval_ns: u64,
    mode: CnpMode,
    last_cnp: Option<u64>,
    /// Deferred: marks arrived since the last CNP, the QP of the latest.
    pending: Option<usize>,
    ce_packets: u64,
    cnps: u64,
}

impl NotificationPoint {
    /// An NP that sends at most one CNP per `interval_ns` (0: one for every CE-marked packet)
    /// and ignores the marks in between (the paper's).
    pub const fn new(interval_ns: u64) -> NotificationPoint {
        NotificationPoint::with_mode(interval_ns, CnpMode::Immediate)
    }

    /// An NP with `mode`.
    pub const fn with_mode(interval_ns: u64, mode: CnpMode) -> NotificationPoint {
        NotificationPoint { interval_ns, mode, last_cnp: None, pending: None, ce_packets: 0, cnps: 0 }
    }

    /// A CE-marked packet of QP `qp` arrived at `now`; returns whether to send a CNP now. Within
    /// the interval a deferred NP remembers the mark (and `qp`: the CNP at the interval's end
    /// goes to the QP of the latest mark).
    pub fn on_ce(&mut self, now: u64, qp: usize) -> bool {
        self.ce_packets += 1;
        let send = match self.last_cnp {
            None => true,
            Some(last) => now.saturating_sub(last) >= self.interval_ns,
        };
        if send {
            self.sent(now);
        } else if self.mode == CnpMode::Deferred {
            self.pending = Some(qp);
        }
        send
    }

    fn sent(&mut self, now: u64) {
        self.last_cnp = Some(now);
        self.pending = None;
        self.cnps += 1;
    }

    /// When a deferred CNP is due (`None`: none pending): the end of the interval.
    pub fn next_deadline(&self) -> Option<u64> {
        match (self.pending, self.last_cnp) {
            (Some(_), Some(last)) => Some(last.saturating_add(self.interval_ns)),
            _ => None,
        }
    }

    /// At `now`: the QP to send the deferred CNP to, if the interval ended with marks in it
    /// (htsim's `DCQCNSink::doNextEvent`). The next interval starts at `now`.
    pub fn poll(&mut self, now: u64) -> Option<usize> {
        let due = self.next_deadline().is_some_and(|d| d <= now);
        let qp = self.pending.filter(|_| due)?;
        self.sent(now);
        Some(qp)
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

/// What one QP's marks are paced with: the QP itself, its IP pair or its port.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NpKey {
    /// The QP (an index of the caller's).
    pub qp: usize,
    /// Its NIC port (an index of the caller's).
    pub port: usize,
    /// Local and remote IP address.
    pub local: IpAddr,
    pub peer: IpAddr,
}

/// The pacing domain a [`NpKey`] falls in under a [`CnpScope`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Domain {
    Qp(usize),
    IpPair(IpAddr, IpAddr),
    Port(usize),
}

/// The NPs of one host: one [`NotificationPoint`] per pacing domain of the scope.
#[derive(Clone, Debug)]
pub struct CnpPacer {
    settings: NpSettings,
    interval_ns: u64,
    domains: Vec<(Domain, NotificationPoint)>,
}

impl CnpPacer {
    /// No domains yet; [`CnpPacer::domain`] adds them.
    pub fn new(interval_ns: u64, settings: NpSettings) -> CnpPacer {
        CnpPacer { settings, interval_ns, domains: Vec::new() }
    }

    /// The settings.
    pub fn settings(&self) -> NpSettings {
        self.settings
    }

    /// The CNP interval, ns (0: a CNP for every CE-marked packet).
    pub fn interval_ns(&self) -> u64 {
        self.interval_ns
    }

    /// The domain of a QP keyed `k` (created on first use: at setup and at a path migration, not
    /// per packet).
    pub fn domain(&mut self, k: NpKey) -> usize {
        let d = match self.settings.scope {
            CnpScope::Qp => Domain::Qp(k.qp),
            CnpScope::IpPair => Domain::IpPair(k.local, k.peer),
            CnpScope::Port => Domain::Port(k.port),
        };
        if let Some(i) = self.domains.iter().position(|(x, _)| *x == d) {
            return i;
        }
        self.domains.push((d, NotificationPoint::with_mode(self.interval_ns, self.settings.cnp)));
        self.domains.len() - 1
    }

    /// A CE-marked packet of QP `qp` in domain `domain` (from [`CnpPacer::domain`]) arrived at
    /// `now`; whether to send that QP a CNP now.
    pub fn on_ce(&mut self, domain: usize, qp: usize, now: u64) -> bool {
        self.domains[domain].1.on_ce(now, qp)
    }

    /// When the next deferred CNP is due.
    pub fn next_deadline(&self) -> Option<u64> {
        self.domains.iter().filter_map(|(_, np)| np.next_deadline()).min()
    }

    /// At `now`: calls `send` with the QP of every deferred CNP due.
    pub fn poll(&mut self, now: u64, mut send: impl FnMut(usize)) {
        for (_, np) in &mut self.domains {
            if let Some(qp) = np.poll(now) {
                send(qp);
            }
        }
    }

    /// The NP of domain `domain`.
    pub fn np(&self, domain: usize) -> &NotificationPoint {
        &self.domains[domain].1
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
        assert!(np.on_ce(1_000, 0));
        // Many CE packets within 50 µs: no further CNP, now or when the interval ends.
        for i in 1..1000u64 {
            assert!(!np.on_ce(1_000 + i * 49, 0), "t = {}", 1_000 + i * 49);
        }
        assert_eq!(np.next_deadline(), None, "immediate: the marks within the interval are ignored");
        assert_eq!(np.poll(51_000), None);
        assert_eq!(np.poll(1_000_000), None);
        assert_eq!(np.cnps(), 1);
        // Exactly 50 µs after the last CNP: another one.
        assert!(np.on_ce(51_000, 0));
        assert!(!np.on_ce(100_999, 0));
        assert!(np.on_ce(101_000, 0));
        assert_eq!(np.cnps(), 3);
        assert_eq!(np.ce_packets(), 1003);
    }

    #[test]
    fn deferred_np_sends_one_more_cnp_when_an_interval_with_marks_ends() {
        // htsim's DCQCNSink: a mark within 50 µs of the last CNP is remembered, and the CNP
        // interval's end sends one CNP for all of them (dcqcn.cpp:204-226).
        let mut np = NotificationPoint::with_mode(50 * US, CnpMode::Deferred);
        assert_eq!(np.next_deadline(), None);
        assert!(np.on_ce(1_000, 7));
        assert_eq!(np.next_deadline(), None, "no mark since the CNP: nothing due");
        for t in [2_000, 10_000, 30_000, 50_999] {
            assert!(!np.on_ce(t, 7), "t = {t}");
        }
        assert_eq!(np.next_deadline(), Some(51_000));
        assert_eq!(np.poll(50_999), None, "not before the interval ends");
        assert_eq!(np.poll(51_000), Some(7), "one CNP at the interval's end");
        assert_eq!(np.poll(51_000), None, "exactly one");
        assert_eq!(np.cnps(), 2);
        // The deferred CNP starts the next interval: no mark in it, nothing at its end.
        assert_eq!(np.next_deadline(), None);
        assert_eq!(np.poll(200_000), None);
        // A mark 10 µs after the deferred CNP waits for that interval's end (101 µs) ...
        assert!(!np.on_ce(61_000, 7));
        assert_eq!(np.next_deadline(), Some(101_000));
        // ... and a late poll sends it then and starts the interval there.
        assert_eq!(np.poll(103_000), Some(7));
        assert_eq!(np.last_cnp(), Some(103_000));
        // A mark after the interval passed is sent at once, with nothing pending.
        assert!(np.on_ce(153_000, 7));
        assert_eq!((np.next_deadline(), np.cnps(), np.ce_packets()), (None, 4, 7));
        // One episode of marks over 40 µs: immediate sends one CNP, deferred two.
        let episode = |mode| {
            let mut np = NotificationPoint::with_mode(50 * US, mode);
            let mut cnps = 0;
            for t in (0..40 * US).step_by(1_000) {
                cnps += u32::from(np.on_ce(t, 0));
                cnps += u32::from(np.poll(t).is_some());
            }
            cnps + u32::from(np.poll(1_000 * US).is_some())
        };
        assert_eq!((episode(CnpMode::Immediate), episode(CnpMode::Deferred)), (1, 2));
    }

    #[test]
    fn cnp_scope_paces_per_qp_per_ip_pair_or_per_port() {
        let ip = |x: u8| IpAddr::from([10, 0, 0, x]);
        // QPs 0 and 1 from .1 to .2 on port 0, QP 2 from .1 to .3 on port 0, QP 3 from .4 to .2
        // on port 1.
        let keys = [
            NpKey { qp: 0, port: 0, local: ip(1), peer: ip(2) },
            NpKey { qp: 1, port: 0, local: ip(1), peer: ip(2) },
            NpKey { qp: 2, port: 0, local: ip(1), peer: ip(3) },
            NpKey { qp: 3, port: 1, local: ip(4), peer: ip(2) },
        ];
        let run = |scope, cnp| {
            let mut p = CnpPacer::new(50 * US, NpSettings { cnp, scope });
            let d: Vec<usize> = keys.iter().map(|&k| p.domain(k)).collect();
            assert_eq!(d, keys.iter().map(|&k| p.domain(k)).collect::<Vec<_>>(), "domains are stable");
            // Every QP marked at 0-3 ns, and again at 10 µs.
            let mut sent = Vec::new();
            for t in [0, 10 * US] {
                for k in keys {
                    if p.on_ce(d[k.qp], k.qp, t + k.qp as u64) {
                        sent.push((t + k.qp as u64, k.qp));
                    }
                }
            }
            let mut deferred = Vec::new();
            p.poll(49 * US, |q| deferred.push(q));
            assert!(deferred.is_empty());
            let due = p.next_deadline();
            p.poll(60 * US, |q| deferred.push(q));
            (sent, due, deferred)
        };
        use CnpMode::{Deferred, Immediate};
        // Per QP: every QP's first mark gets a CNP, the marks 10 µs later none.
        let all = vec![(0, 0), (1, 1), (2, 2), (3, 3)];
        assert_eq!(run(CnpScope::Qp, Immediate), (all.clone(), None, vec![]));
        // Per IP pair: QP 1 shares QP 0's pair (.1 -> .2); QP 3's pair is .4 -> .2.
        assert_eq!(run(CnpScope::IpPair, Immediate), (vec![(0, 0), (2, 2), (3, 3)], None, vec![]));
        // Per port: one CNP per port.
        assert_eq!(run(CnpScope::Port, Immediate), (vec![(0, 0), (3, 3)], None, vec![]));
        // Deferred: one more CNP per domain at 50 µs after its first, to its latest marked QP.
        assert_eq!(run(CnpScope::Qp, Deferred), (all, Some(50 * US), vec![0, 1, 2, 3]));
        assert_eq!(run(CnpScope::IpPair, Deferred), (vec![(0, 0), (2, 2), (3, 3)], Some(50 * US), vec![1, 2, 3]));
        assert_eq!(run(CnpScope::Port, Deferred), (vec![(0, 0), (3, 3)], Some(50 * US), vec![2, 3]));
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

    /// The paper's mechanism with one ns-3 option changed, at 100 Gbit/s with round numbers:
    /// F = 1, T = 300 µs, K = 1 µs, g = 1/256, R_AI 20 Mb/s, R_HAI 200 Mb/s, a 1 Gbit/s floor.
    fn ns3_like(f: impl FnOnce(&mut DcqcnConfig)) -> ReactionPoint {
        let mut c = DcqcnConfig::with_line_rate(LINE);
        (c.g, c.alpha_update_period_ns, c.rate_increase_period_ns, c.fast_recovery_steps) =
            (1.0 / 256.0, US, 300 * US, 1);
        (c.rate_ai_bps, c.rate_hai_bps, c.min_rate_bps) = (20_000_000, 200_000_000, 1_000_000_000);
        f(&mut c);
        ReactionPoint::new(c).unwrap()
    }

    #[test]
    fn without_a_byte_counter_the_timer_count_alone_selects_the_phase() {
        // ns-3's RateIncEventMlx: stage < F fast recovery, = F additive, > F hyper, counting
        // timer events only; bytes sent change nothing.
        let mut r = ns3_like(|c| c.byte_counter_bytes = 0);
        r.on_cnp(0);
        r.on_cnp(1);
        at(&r, 100.0, 25.0, "two cuts (α = 1), Rt kept: no rise in between");
        r.on_bytes_sent(1 << 40, 2);
        assert_eq!((r.counters().byte_events, r.stages()), (0, (0, 0)));
        // t = 0: fast recovery, Rc = (100 + 25)/2.
        r.poll(1 + 300 * US);
        at(&r, 100.0, 62.5, "fast recovery");
        // A cut after a rise clamps Rt = Rc (α = 1 still: K decays are 1/256 each, 300 of them).
        let a = (255.0f64 / 256.0).powi(300) * 255.0 / 256.0 + 1.0 / 256.0;
        r.on_cnp(1 + 300 * US);
        let a_cut = (255.0f64 / 256.0).powi(300);
        let rc = 62.5 * (1.0 - a_cut / 2.0);
        at(&r, 62.5, rc, "clamped cut");
        assert!(close(r.alpha(), a), "α {}", r.alpha());
        // t = 0 fast recovery, t = 1 = F additive (+0.02), t = 2 and 3 hyper with i = t − F
        // (the default, scaled): +0.2, then +0.4 Gbit/s.
        let t0 = 1 + 300 * US;
        let mut rc = rc;
        for (k, rt) in [(1u64, 62.5), (2, 62.52), (3, 62.72), (4, 63.12)] {
            r.poll(t0 + k * 300 * US);
            rc = (rt + rc) / 2.0;
            at(&r, rt, rc, "timer-only stages");
        }
        let c = r.counters();
        assert_eq!((c.fast_recovery, c.additive_increase, c.hyper_increase, c.byte_events), (2, 1, 2, 0));
    }

    #[test]
    fn fixed_hyper_increase_adds_r_hai_once_per_event() {
        // ns-3's HyperIncreaseMlx: Rt += R_HAI, whatever the stage count.
        let mut r = ns3_like(|c| {
            c.byte_counter_bytes = 0;
            c.hyper_increase = HyperIncrease::Fixed;
            c.clamp_target_rate = true;
        });
        r.on_cnp(0);
        at(&r, 100.0, 50.0, "cut");
        r.on_cnp(1);
        at(&r, 50.0, 25.0, "clamping cut");
        // FR, AI (+0.02), then four hyper events of +0.2 each (scaled would add 0.2, 0.4, 0.6, 0.8).
        let mut rc = 25.0;
        for (k, rt) in [(1u64, 50.0), (2, 50.02), (3, 50.22), (4, 50.42), (5, 50.62), (6, 50.82)] {
            r.poll(1 + k * 300 * US);
            rc = (rt + rc) / 2.0;
            at(&r, rt, rc, "fixed hyper");
        }
        assert_eq!(r.counters().hyper_increase, 4);
        // Rt stays capped at line rate.
        r.poll(1_000_000_000_000);
        assert_eq!(r.rate(), LINE);
        assert!(r.target_rate_f64() <= LINE as f64);
    }

    #[test]
    fn decrease_interval_cuts_at_most_once_per_interval_from_the_first_cnp() {
        // ns-3's cnp_received_mlx / CheckRateDecreaseMlx with RateDecreaseInterval 4 µs: the first
        // CNP (10 µs) cuts nothing and starts the 4 µs grid (14, 18, 22 … µs); each check cuts
        // once if a CNP arrived since the previous one. α here is per CNP, applied at the cut,
        // and K is long enough (1 s) for α not to decay in between.
        let mut r = ns3_like(|c| {
            c.rate_decrease_interval_ns = 4 * US;
            c.alpha_update_period_ns = 1_000_000 * US;
        });
        assert_eq!(r.next_deadline(), None);
        r.on_cnp(10 * US);
        at(&r, 100.0, 100.0, "first CNP: no cut");
        assert_eq!(r.next_deadline(), Some(14 * US));
        r.on_cnp(12 * US);
        r.on_cnp(13 * US);
        r.poll(14 * US - 1);
        at(&r, 100.0, 100.0, "no cut before the check");
        r.poll(14 * US);
        at(&r, 100.0, 50.0, "one cut at 14 µs for three CNPs");
        assert_eq!((r.counters().cnps, r.counters().cuts), (3, 1));
        // Nothing pending: no decrease deadline, only the rate timer's (α's is 1 s away).
        assert_eq!(r.next_deadline(), Some(314 * US));
        r.poll(17 * US);
        // A CNP at 25 µs: the checks at 18 and 22 µs found none; the next is at 26 µs.
        r.on_cnp(25 * US);
        assert_eq!(r.counters().cuts, 1);
        assert!(r.next_deadline().unwrap() <= 26 * US);
        let a = r.alpha();
        r.poll(26 * US);
        at(&r, 100.0, 50.0 * (1.0 - a / 2.0), "cut on the 4 µs grid");
        assert_eq!(r.counters().cuts, 2);
        // A CNP exactly at a check time is seen by that check.
        let (a, rc) = (r.alpha(), r.rate_f64());
        r.on_cnp(30 * US);
        assert!(close(r.rate_f64(), rc * (1.0 - a / 2.0)), "cut at 30 µs");
        // The increase timer restarts at the check time, 30 µs: fast recovery at 330 µs.
        let rc = r.rate_f64();
        r.poll(330 * US - 1);
        assert!(close(r.rate_f64(), rc));
        r.poll(330 * US);
        assert!(close(r.rate_f64(), (LINE as f64 + rc) / 2.0));
    }

    #[test]
    fn increase_timer_runs_before_a_decrease_check_at_the_same_time() {
        // ns-3 schedules both on the grid of the first CNP; the increase timer (scheduled 300 µs
        // earlier) runs first, so the check that follows sees a rise and clamps Rt.
        let mut r = ns3_like(|c| c.rate_decrease_interval_ns = 4 * US);
        r.on_cnp(0);
        r.poll(4 * US);
        at(&r, 100.0, 50.0, "first cut at 4 µs");
        r.on_cnp(303 * US);
        r.poll(304 * US);
        // 304 µs: fast recovery to 75, then the cut with α decayed 300 times from its
        // post-cut value: Rt = 75 (clamped).
        let a = ((255.0f64 / 256.0) + 1.0 / 256.0) * (255.0f64 / 256.0).powi(300);
        at(&r, 75.0, 75.0 * (1.0 - a / 2.0), "increase, then clamping cut");
    }

    #[test]
    fn per_period_alpha_rises_once_per_period_with_a_cnp() {
        // ns-3's UpdateAlphaMlx, K = 1 µs, g = 1/256: the first CNP (10 µs) sets α = 1 and does
        // not count; at each µs boundary α = (1 − g)α + g if a CNP arrived in the period, else
        // (1 − g)α, however many CNPs the period had.
        let g = 1.0 / 256.0;
        let mut r = ns3_like(|c| {
            c.alpha_update = AlphaUpdate::PerPeriod;
            c.alpha_init = 0.5;
        });
        r.on_cnp(10 * US + 100);
        // Eq. 1 at the cut, with α = alpha_init and no α rise.
        at(&r, 100.0, 75.0, "cut with α = 0.5");
        assert_eq!(r.alpha(), 0.5);
        // The α grid is not a deadline: only the rate timer's.
        assert_eq!(r.next_deadline(), Some(10 * US + 100 + 300 * US));
        // Periods [10.1, 11.1) and [11.1, 12.1) without a CNP; three CNPs in [12.1, 13.1).
        for t in [12_500, 12_600, 13_000] {
            r.on_cnp(t);
        }
        r.poll(13 * US + 100);
        let a = 0.5 * (1.0 - g) * (1.0 - g) * (1.0 - g) + g;
        assert!(close(r.alpha(), a), "α {} vs {a}", r.alpha());
        // Ten empty periods in one poll.
        r.poll(23 * US + 100);
        let a = a * (1.0 - g).powi(10);
        assert!(close(r.alpha(), a), "α {} vs {a}", r.alpha());
        // Concrete: 0.5 · (255/256)³ + 1/256 = 0.49804 …, × (255/256)¹⁰.
        assert!((r.alpha() - 0.478_952_343_532_780_4).abs() < 1e-12, "α {}", r.alpha());
        // Per-period α with cuts on every CNP: the cut uses the α of the last boundary.
        let rc = r.rate_f64();
        r.on_cnp(23 * US + 600);
        assert!(close(r.rate_f64(), rc * (1.0 - a / 2.0)));
        assert!(close(r.alpha(), a), "α rises at the period's end, not at the CNP");
        r.poll(24 * US + 100);
        assert!(close(r.alpha(), (1.0 - g) * a + g));
    }

    #[test]
    fn np_with_interval_zero_sends_a_cnp_for_every_ce_packet() {
        // ns-3 sets the CNP flag on the ACK of every CE-marked packet (rdma-hw.cc:321-322).
        let mut np = NotificationPoint::new(0);
        for t in [0, 0, 1, 331, 331, 662] {
            assert!(np.on_ce(t, 0), "t = {t}");
        }
        assert_eq!((np.cnps(), np.ce_packets()), (6, 6));
        assert_eq!(DcqcnProfile::HpccDcqcn.cnp_interval_ns(), 0);
    }

    #[test]
    fn hpcc_dcqcn_profile_maps_the_hpcc_run_py_dcqcn_setting() {
        // run.py --cc dcqcn: ai = 5 · bw / 25, hai = 50 · bw / 25 Mb/s.
        for (rate, ai, hai) in [(100_000_000_000, 20_000_000, 200_000_000), (400_000_000_000, 80_000_000, 800_000_000)]
        {
            let c = DcqcnProfile::HpccDcqcn.rp(rate);
            c.validate().unwrap();
            assert_eq!((c.rate_ai_bps, c.rate_hai_bps, c.min_rate_bps), (ai, hai, 1_000_000_000));
            assert_eq!(
                (
                    c.alpha_update_period_ns,
                    c.rate_increase_period_ns,
                    c.rate_decrease_interval_ns,
                    c.fast_recovery_steps
                ),
                (US, 300 * US, 4 * US, 1)
            );
            assert_eq!((c.g, c.alpha_init, c.clamp_target_rate, c.byte_counter_bytes), (1.0 / 256.0, 1.0, false, 0));
            assert_eq!((c.alpha_update, c.hyper_increase), (AlphaUpdate::PerPeriod, HyperIncrease::Fixed));
        }
        let parsed = serde_json::from_str::<DcqcnProfile>("\"hpcc-dcqcn\"").unwrap();
        assert_eq!(parsed, DcqcnProfile::HpccDcqcn);
        assert_eq!(DcqcnProfile::HpccDcqcn.to_string(), "hpcc-dcqcn");
        // Every other profile keeps the paper's mechanism.
        for p in [
            DcqcnProfile::Ns3Hpcc,
            DcqcnProfile::Connectx,
            DcqcnProfile::DcqcnPaper,
            DcqcnProfile::Htsim,
            DcqcnProfile::HpccDcqcnPaper,
        ] {
            let c = p.rp(LINE);
            assert_eq!(
                (c.rate_decrease_interval_ns, c.alpha_update, c.hyper_increase),
                (0, AlphaUpdate::PerCnp, HyperIncrease::Scaled),
                "{p}"
            );
            assert!(c.byte_counter_bytes > 0 && p.cnp_interval_ns() > 0, "{p}");
        }
        // The decrease interval stretches with the other timers.
        let wall = DcqcnProfile::HpccDcqcn.rp(400_000_000_000).dilated(Dilation::new(8000.0).unwrap());
        assert_eq!(
            (wall.rate_decrease_interval_ns, wall.alpha_update_period_ns, wall.byte_counter_bytes),
            (32_000_000, 8_000_000, 0)
        );
    }

    #[test]
    fn hpcc_dcqcn_profile_trajectory_follows_ns3s_equations() {
        // 100 Gbit/s, the profile as ns-3 runs it. CNPs (ACKs with the CNP flag) at 10, 12.5,
        // 15.5, 16.5, 320.5 µs; α boundaries every µs from 10 µs, decrease checks every 4 µs.
        let g = 1.0 / 256.0;
        let d = |a: f64| a * (1.0 - g);
        let u = |a: f64| a * (1.0 - g) + g;
        let mut r = ReactionPoint::new(DcqcnProfile::HpccDcqcn.rp(LINE)).unwrap();
        r.on_cnp(10 * US);
        at(&r, 100.0, 100.0, "first CNP: α = 1, no cut");
        r.on_cnp(12 * US + 500);
        // α: 11 decay, 12 decay, 13 rise (the CNP at 12.5), 14 decay; the check at 14 cuts with
        // it; Rt stays 100 (no rise since the QP started).
        let a14 = d(u(d(d(1.0))));
        assert!((a14 - 0.988_357_305_759_564).abs() < 1e-12);
        r.poll(14 * US);
        at(&r, 100.0, 50.582_134_712_021_8, "cut at 14 µs");
        // Two CNPs in the next 4 µs: one cut at 18 with α rising at 16 and 17.
        r.on_cnp(15 * US + 500);
        r.on_cnp(16 * US + 500);
        r.poll(18 * US);
        let a18 = d(u(u(d(a14))));
        assert!((a18 - 0.980_771_257_495_785_3).abs() < 1e-12);
        at(&r, 100.0, 25.777_382_777_856_38, "cut at 18 µs");
        // No CNP: no cut at 22 µs.
        r.poll(22 * US);
        assert_eq!(r.counters().cuts, 2);
        // Fast recovery at 318 µs (T from the cut at 18): Rc = (100 + 25.78)/2.
        r.poll(318 * US);
        let rc = (100.0 + 25.777_382_777_856_38) / 2.0;
        at(&r, 100.0, rc, "fast recovery");
        // A CNP at 320.5 µs, cut at the check at 322 µs: Rt = Rc (a timer stage ran), α has
        // decayed 302 times since 18 µs, risen at 321.
        r.on_cnp(320 * US + 500);
        r.poll(322 * US);
        let a322 = d(u(a18 * (1.0 - g).powi(302)));
        let rc = rc * (1.0 - a322 / 2.0);
        at(&r, 62.888_691_388_928_19, rc, "clamped cut at 322 µs");
        // Timer from 322 µs: fast recovery (stage 0 < F = 1), additive +0.02 (stage 1), then
        // +0.2 per event (stage 2, 3, …), Rc halfway to Rt each time.
        let mut rc = rc;
        let rt0 = 62.888_691_388_928_19;
        for (k, rt) in [(1u64, rt0), (2, rt0 + 0.02), (3, rt0 + 0.22), (4, rt0 + 0.42)] {
            r.poll(22 * US + (k + 1) * 300 * US);
            rc = (rt + rc) / 2.0;
            at(&r, rt, rc, "increase");
        }
        let c = r.counters();
        assert_eq!((c.cnps, c.cuts, c.fast_recovery, c.additive_increase, c.hyper_increase), (5, 3, 2, 1, 2));
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
