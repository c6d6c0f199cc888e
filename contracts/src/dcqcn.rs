//! The DCQCN parameters a NIC runs with (the topology's `dcqcn: { profile }`, the job file's
//! `dcqcn`): the published profiles and the checked configuration of a reaction point. The
//! algorithm (RP, NP) and the reasoning behind each profile are `gpu-host`'s `dcqcn` module.
use crate::time::Dilation;

/// NP-side default: at most one CNP per QP per 50 µs (emulated; × D on the wall clock).
pub const DEFAULT_CNP_INTERVAL_NS: u64 = 50_000;

/// The published parameter set a NIC's RP and NP take (the topology's `dcqcn: { profile }`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "kebab-case")]
pub enum DcqcnProfile {
    /// `RdmaHw::GetTypeId`'s attribute defaults in the HPCC repository's ns-3 model (`rdma-hw.cc`)
    /// with the paper's mechanism, a 2 MB byte counter and the paper's 50 µs CNP interval. No
    /// configuration in that repository runs these values (`third.cc` overwrites every one from
    /// its config file, and `run.py --cc dcqcn` writes others: [`DcqcnProfile::HpccDcqcn`]);
    /// gpu-host `dcqcn` module docs.
    #[default]
    Ns3Hpcc,
    /// NVIDIA ConnectX firmware defaults (module docs, "The NIC's profile").
    Connectx,
    /// The DCQCN paper's values and equations (Zhu et al., SIGCOMM 2015): F = 5, B = 10 MB,
    /// T = K = 55 µs, g = 1/256, `Rt = Rc` on every cut, no rate floor (gpu-host `dcqcn`
    /// module docs, "The paper's profile").
    DcqcnPaper,
    /// The DCQCN of the htsim packet simulator (`ultraethernet/uet-htsim`, `htsim/sim/dcqcn.cpp`
    /// defaults; gpu-host `dcqcn` module docs, "The htsim profile").
    Htsim,
    /// The HPCC repository's ns-3 simulations run with `simulation/run.py --cc dcqcn_paper`
    /// (what `dcqcn-paper` named before issue 23; gpu-host `dcqcn` module docs, "The HPCC
    /// `dcqcn_paper` setting").
    HpccDcqcnPaper,
    /// The HPCC repository's ns-3 simulations run with `simulation/run.py --cc dcqcn`, values and
    /// mechanism (CC mode 1, "Mellanox's version" in `rdma-hw.cc`): no byte counter, one R_HAI
    /// per hyper-increase event, a cut at most once per 4 µs, α once per 1 µs period, a CNP for
    /// every CE-marked packet (gpu-host `dcqcn` module docs, "The HPCC `dcqcn` setting").
    HpccDcqcn,
}

impl DcqcnProfile {
    /// The names the topology accepts.
    pub const NAMES: &'static str = "ns3-hpcc, connectx, dcqcn-paper, htsim, hpcc-dcqcn-paper, hpcc-dcqcn";

    /// RP parameters of this profile for a port of `line_rate_bps` (emulated).
    pub fn rp(self, line_rate_bps: u64) -> DcqcnConfig {
        match self {
            DcqcnProfile::Ns3Hpcc => DcqcnConfig::with_line_rate(line_rate_bps),
            DcqcnProfile::Connectx => DcqcnConfig {
                line_rate_bps,
                min_rate_bps: 1_000_000,
                g: 5.0 / 1024.0,
                alpha_init: 1023.0 / 1024.0,
                alpha_update_period_ns: 1_000,
                rate_increase_period_ns: 300_000,
                byte_counter_bytes: 32_767 * 64,
                fast_recovery_steps: 1,
                rate_ai_bps: 5_000_000,
                rate_hai_bps: 50_000_000,
                clamp_target_rate: false,
                rate_decrease_interval_ns: 0,
                alpha_update: AlphaUpdate::PerCnp,
                hyper_increase: HyperIncrease::Scaled,
            },
            DcqcnProfile::DcqcnPaper => DcqcnConfig {
                line_rate_bps,
                // No floor: the paper states none.
                min_rate_bps: 0,
                g: 1.0 / 256.0,
                alpha_init: 1.0,
                alpha_update_period_ns: 55_000,
                rate_increase_period_ns: 55_000,
                byte_counter_bytes: 10_000_000,
                fast_recovery_steps: 5,
                // R_AI 40 Mbit/s on the paper's 40 Gbit/s NICs: line rate / 1000; R_HAI ten
                // times R_AI, QCN's ratio (5 and 50 Mbit/s).
                rate_ai_bps: line_rate_bps / 1000,
                rate_hai_bps: line_rate_bps / 100,
                clamp_target_rate: true,
                rate_decrease_interval_ns: 0,
                alpha_update: AlphaUpdate::PerCnp,
                hyper_increase: HyperIncrease::Scaled,
            },
            DcqcnProfile::Htsim => DcqcnConfig {
                line_rate_bps,
                min_rate_bps: 0,
                g: 1.0 / 256.0,
                alpha_init: 1.0,
                alpha_update_period_ns: 55_000,
                rate_increase_period_ns: 55_000,
                byte_counter_bytes: 10_000_000,
                fast_recovery_steps: 5,
                rate_ai_bps: line_rate_bps / 20,
                rate_hai_bps: line_rate_bps / 10,
                clamp_target_rate: true,
                rate_decrease_interval_ns: 0,
                alpha_update: AlphaUpdate::PerCnp,
                hyper_increase: HyperIncrease::Scaled,
            },
            DcqcnProfile::HpccDcqcnPaper => {
                // `ai = 5 * bw / 25` Mb/s with bw in Gbit/s: 0.2 Mb/s per Gbit/s of NIC rate.
                DcqcnConfig {
                    line_rate_bps,
                    min_rate_bps: 1_000_000_000,
                    g: 1.0 / 256.0,
                    alpha_init: 1.0,
                    alpha_update_period_ns: 50_000,
                    rate_increase_period_ns: 55_000,
                    byte_counter_bytes: 32_767 * 64,
                    fast_recovery_steps: 1,
                    rate_ai_bps: per_25g(line_rate_bps, 5),
                    rate_hai_bps: per_25g(line_rate_bps, 50),
                    clamp_target_rate: false,
                    rate_decrease_interval_ns: 0,
                    alpha_update: AlphaUpdate::PerCnp,
                    hyper_increase: HyperIncrease::Scaled,
                }
            }
            DcqcnProfile::HpccDcqcn => DcqcnConfig {
                line_rate_bps,
                // run.py:28 `MIN_RATE 1000Mb/s`.
                min_rate_bps: 1_000_000_000,
                // run.py:104 `g=0.00390625`.
                g: 1.0 / 256.0,
                // cnp_received_mlx sets α = 1 on the first CNP (rdma-hw.cc:643).
                alpha_init: 1.0,
                // run.py:104 `t_alpha=1` (µs).
                alpha_update_period_ns: 1_000,
                // run.py:104 `t_inc=300` (µs).
                rate_increase_period_ns: 300_000,
                // None: RateIncEventTimerMlx is the only increase event (rdma-hw.cc:683-739).
                byte_counter_bytes: 0,
                // run.py:25 `FAST_RECOVERY_TIMES 1`.
                fast_recovery_steps: 1,
                // run.py:100-101 `ai = 5 * bw / 25`, `hai = 50 * bw / 25` (Mb/s, bw in Gbit/s).
                rate_ai_bps: per_25g(line_rate_bps, 5),
                rate_hai_bps: per_25g(line_rate_bps, 50),
                // run.py:22 `CLAMP_TARGET_RATE 0`.
                clamp_target_rate: false,
                // run.py:104 `t_dec=4` (µs): CheckRateDecreaseMlx (rdma-hw.cc:655-681).
                rate_decrease_interval_ns: 4_000,
                // UpdateAlphaMlx (rdma-hw.cc:618-636).
                alpha_update: AlphaUpdate::PerPeriod,
                // HyperIncreaseMlx adds m_rhai once (rdma-hw.cc:724-739).
                hyper_increase: HyperIncrease::Fixed,
            },
        }
    }

    /// The NP's CNP interval per QP, emulated ns; 0: a CNP for every CE-marked packet.
    pub fn cnp_interval_ns(self) -> u64 {
        match self {
            DcqcnProfile::Ns3Hpcc => DEFAULT_CNP_INTERVAL_NS,
            // ns-3 sets the CNP flag on the ACK of every CE-marked packet (rdma-hw.cc:321-322).
            DcqcnProfile::HpccDcqcn => 0,
            DcqcnProfile::Connectx => 4_000,
            DcqcnProfile::DcqcnPaper | DcqcnProfile::Htsim | DcqcnProfile::HpccDcqcnPaper => 50_000,
        }
    }
}

impl core::fmt::Display for DcqcnProfile {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(match self {
            DcqcnProfile::Ns3Hpcc => "ns3-hpcc",
            DcqcnProfile::Connectx => "connectx",
            DcqcnProfile::DcqcnPaper => "dcqcn-paper",
            DcqcnProfile::Htsim => "htsim",
            DcqcnProfile::HpccDcqcnPaper => "hpcc-dcqcn-paper",
            DcqcnProfile::HpccDcqcn => "hpcc-dcqcn",
        })
    }
}

/// `mbps` Mb/s per 25 Gbit/s of `line_rate_bps`, as the HPCC repository's `run.py:100-101`
/// computes R_AI and R_HAI (`5 * bw / 25`, `50 * bw / 25` Mb/s, `bw` the line rate in Gbit/s).
fn per_25g(line_rate_bps: u64, mbps: u64) -> u64 {
    (mbps as u128 * 1_000_000 * line_rate_bps as u128 / 25_000_000_000) as u64
}

/// When the NP answers CE marks that arrive within the CNP interval after a CNP (the topology's
/// `dcqcn: { np: { cnp } }`, the job file's `dcqcn_np.cnp`; gpu-host `dcqcn` module docs, "The
/// notification point").
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum CnpMode {
    /// A CNP at the first mark after the interval has passed; marks within the interval are
    /// ignored (the paper's NP state machine; NVIDIA's `min_time_between_cnps`).
    #[default]
    Immediate,
    /// As immediate, and marks within the interval are remembered: one more CNP when the
    /// interval ends (UEC htsim's `DCQCNSink`, `htsim/sim/dcqcn.cpp:204-226`).
    Deferred,
}

/// Which marked packets share one CNP interval (the topology's `dcqcn: { np: { scope } }`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum CnpScope {
    /// Each QP has its own interval (the paper: "per flow").
    #[default]
    Qp,
    /// The QPs between one local and one remote IP address share one.
    IpPair,
    /// Every QP of a NIC port shares one.
    Port,
}

/// The NP's behaviour: what it does with marks within the interval and what shares one.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct NpSettings {
    /// Marks within the interval: ignored or remembered.
    #[serde(default)]
    pub cnp: CnpMode,
    /// What shares an interval.
    #[serde(default)]
    pub scope: CnpScope,
}

impl NpSettings {
    /// The names the topology accepts for `cnp`.
    pub const CNP_NAMES: &'static str = "immediate, deferred";
    /// The names the topology accepts for `scope`.
    pub const SCOPE_NAMES: &'static str = "qp, ip_pair, port";
}

impl core::fmt::Display for NpSettings {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let cnp = match self.cnp {
            CnpMode::Immediate => "immediate",
            CnpMode::Deferred => "deferred",
        };
        let scope = match self.scope {
            CnpScope::Qp => "qp",
            CnpScope::IpPair => "ip_pair",
            CnpScope::Port => "port",
        };
        write!(f, "cnp {cnp}, scope {scope}")
    }
}

/// How α follows the CNPs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum AlphaUpdate {
    /// The paper's Eq. 1 and 2: `α = (1 − g)·α + g` on every CNP (with the cut), and
    /// `α = (1 − g)·α` every K without a CNP, the K period restarting at each CNP.
    #[default]
    PerCnp,
    /// ns-3's `UpdateAlphaMlx` (`rdma-hw.cc:618-636`): once per K, on a fixed grid from the QP's
    /// first CNP, `α = (1 − g)·α + g` if a CNP arrived in the period, else `α = (1 − g)·α`; the
    /// first CNP sets α to `alpha_init` and does not count for its period (`:641-644`).
    PerPeriod,
}

/// How much a hyper-increase event adds to `Rt`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum HyperIncrease {
    /// QCN's and the paper's: `Rt += i·R_HAI`, `i = min(t, b) − F`.
    #[default]
    Scaled,
    /// ns-3's `HyperIncreaseMlx` (`rdma-hw.cc:724-739`): `Rt += R_HAI` once per event.
    Fixed,
}

/// RP parameters. See the module docs for the source of every default.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DcqcnConfig {
    /// Line rate of the NIC port (upper bound of `Rc` and `Rt`), bits/s.
    pub line_rate_bps: u64,
    /// Lower bound of `Rc`, bits/s (`MinRate`, 100 Mb/s); 0: no floor.
    pub min_rate_bps: u64,
    /// EWMA gain g (`EwmaGain`, 1/16).
    pub g: f64,
    /// Initial α (1.0, as `cnp_received_mlx` sets on the first CNP).
    pub alpha_init: f64,
    /// K: α decays once per this period without a CNP (`AlphaResumInterval`, 55 µs).
    pub alpha_update_period_ns: u64,
    /// T: rate-increase timer period (`RPTimer`, 1500 µs).
    pub rate_increase_period_ns: u64,
    /// B: bytes per byte-counter event (Isekai `byte_reset` 32767 × 64 B); 0: no byte counter,
    /// the timer's stage count alone selects the increase phase (ns-3's `RateIncEventMlx`).
    pub byte_counter_bytes: u64,
    /// F: number of fast-recovery stages (`FastRecoveryTimes`, 5).
    pub fast_recovery_steps: u32,
    /// R_AI: additive-increase step, bits/s (`RateAI`, 5 Mb/s).
    pub rate_ai_bps: u64,
    /// R_HAI: hyper-increase step, bits/s (`RateHAI`, 50 Mb/s).
    pub rate_hai_bps: u64,
    /// Set `Rt = Rc` on every cut (the paper's equations); `false` (`ClampTargetRate`): only
    /// when the rate rose since the last cut.
    pub clamp_target_rate: bool,
    /// 0: every CNP cuts at once (the paper). Otherwise ns-3's `CheckRateDecreaseMlx`
    /// (`RateDecreaseInterval`, `rdma-hw.cc:655-681`): a CNP only records that it arrived; every
    /// this many ns, on a fixed grid from the QP's first CNP, the RP cuts once if a CNP arrived
    /// since the last check. The first CNP starts the grid and does not cut (`RateOnFirstCnp`
    /// 1.0, `:638-651`); the first cut comes at the first check.
    pub rate_decrease_interval_ns: u64,
    /// How α follows the CNPs.
    pub alpha_update: AlphaUpdate,
    /// How much a hyper-increase event adds to `Rt`.
    pub hyper_increase: HyperIncrease,
}

impl DcqcnConfig {
    /// The cited defaults for a port of `line_rate_bps`.
    pub fn with_line_rate(line_rate_bps: u64) -> DcqcnConfig {
        DcqcnConfig {
            line_rate_bps,
            min_rate_bps: 100_000_000,
            g: 1.0 / 16.0,
            alpha_init: 1.0,
            alpha_update_period_ns: 55_000,
            rate_increase_period_ns: 1_500_000,
            byte_counter_bytes: 32_767 * 64,
            fast_recovery_steps: 5,
            rate_ai_bps: 5_000_000,
            rate_hai_bps: 50_000_000,
            clamp_target_rate: false,
            rate_decrease_interval_ns: 0,
            alpha_update: AlphaUpdate::PerCnp,
            hyper_increase: HyperIncrease::Scaled,
        }
    }

    /// These parameters (emulated units) on the wall clock of a fabric slowed down by `d`
    /// (docs/src/emulated-time.md): line rate, minimum rate, R_AI and R_HAI divided by D, the α
    /// rate-increase and rate-decrease timers (K, T, the decrease interval) multiplied by D; B
    /// stays bytes, g, α and F are unitless.
    pub fn dilated(self, d: Dilation) -> DcqcnConfig {
        DcqcnConfig {
            line_rate_bps: d.rate(self.line_rate_bps),
            // No floor stays no floor (`rate` would make it 1 bit/s).
            min_rate_bps: if self.min_rate_bps == 0 { 0 } else { d.rate(self.min_rate_bps) },
            alpha_update_period_ns: d.duration(self.alpha_update_period_ns),
            rate_increase_period_ns: d.duration(self.rate_increase_period_ns),
            // 0 (a cut on every CNP) stays 0.
            rate_decrease_interval_ns: d.duration(self.rate_decrease_interval_ns),
            rate_ai_bps: d.rate(self.rate_ai_bps),
            rate_hai_bps: d.rate(self.rate_hai_bps),
            ..self
        }
    }

    /// Checks the parameters.
    pub fn validate(&self) -> Result<(), DcqcnError> {
        if self.line_rate_bps == 0 {
            return Err(DcqcnError::Invalid("line_rate_bps must be > 0"));
        }
        if self.min_rate_bps > self.line_rate_bps {
            return Err(DcqcnError::Invalid("min_rate_bps must be in 0..=line_rate_bps"));
        }
        if !(self.g > 0.0 && self.g <= 1.0) {
            return Err(DcqcnError::Invalid("g must be in (0, 1]"));
        }
        if !(0.0..=1.0).contains(&self.alpha_init) {
            return Err(DcqcnError::Invalid("alpha_init must be in [0, 1]"));
        }
        if self.alpha_update_period_ns == 0 || self.rate_increase_period_ns == 0 {
            return Err(DcqcnError::Invalid("timer periods must be > 0"));
        }
        Ok(())
    }
}

/// DCQCN configuration errors.
#[derive(Clone, Debug, thiserror::Error, PartialEq, Eq)]
pub enum DcqcnError {
    /// A parameter is out of range.
    #[error("invalid DCQCN parameter: {0}")]
    Invalid(&'static str),
}
