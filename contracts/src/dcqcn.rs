//! The DCQCN parameters a NIC runs with (the topology's `dcqcn: { profile }`, the job file's
//! `dcqcn`): the published profiles and the checked configuration of a reaction point. The
//! algorithm (RP, NP) and the reasoning behind each profile are `gpu-host`'s `dcqcn` module.
use crate::time::Dilation;

/// NP-side default: at most one CNP per QP per 50 µs (emulated; × D on the wall clock).
pub const DEFAULT_CNP_INTERVAL_NS: u64 = 50_000;

/// The published parameter set a NIC's RP and NP take (the topology's `dcqcn: { profile }`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum DcqcnProfile {
    /// The ns-3 HPCC model's defaults and the paper's 50 µs CNP interval (module docs).
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
}

impl DcqcnProfile {
    /// The names the topology accepts.
    pub const NAMES: &'static str = "ns3-hpcc, connectx, dcqcn-paper, htsim, hpcc-dcqcn-paper";

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
            },
            DcqcnProfile::HpccDcqcnPaper => {
                // `ai = 5 * bw / 25` Mb/s with bw in Gbit/s: 0.2 Mb/s per Gbit/s of NIC rate.
                let per_25g = |mbps: u64| (mbps as u128 * 1_000_000 * line_rate_bps as u128 / 25_000_000_000) as u64;
                DcqcnConfig {
                    line_rate_bps,
                    min_rate_bps: 1_000_000_000,
                    g: 1.0 / 256.0,
                    alpha_init: 1.0,
                    alpha_update_period_ns: 50_000,
                    rate_increase_period_ns: 55_000,
                    byte_counter_bytes: 32_767 * 64,
                    fast_recovery_steps: 1,
                    rate_ai_bps: per_25g(5),
                    rate_hai_bps: per_25g(50),
                    clamp_target_rate: false,
                }
            }
        }
    }

    /// The NP's CNP interval per QP, emulated ns.
    pub fn cnp_interval_ns(self) -> u64 {
        match self {
            DcqcnProfile::Ns3Hpcc => DEFAULT_CNP_INTERVAL_NS,
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
        })
    }
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
    /// B: bytes per byte-counter event (Isekai `byte_reset` 32767 × 64 B).
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
        }
    }

    /// These parameters (emulated units) on the wall clock of a fabric slowed down by `d`
    /// (README "Emulated time"): line rate, minimum rate, R_AI and R_HAI divided by D, the α
    /// and rate-increase timers (K, T) multiplied by D; B stays bytes, g, α and F are unitless.
    pub fn dilated(self, d: Dilation) -> DcqcnConfig {
        DcqcnConfig {
            line_rate_bps: d.rate(self.line_rate_bps),
            // No floor stays no floor (`rate` would make it 1 bit/s).
            min_rate_bps: if self.min_rate_bps == 0 { 0 } else { d.rate(self.min_rate_bps) },
            alpha_update_period_ns: d.duration(self.alpha_update_period_ns),
            rate_increase_period_ns: d.duration(self.rate_increase_period_ns),
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
        if self.byte_counter_bytes == 0 {
            return Err(DcqcnError::Invalid("byte_counter_bytes must be > 0"));
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
