//! A job on a running fabric, as `rocefab run` and `rocefab train` start it: its options
//! ([`JobArgs`]), the fabric's hosts and their classes ([`hosts`]), the hostd processes and
//! their supervision ([`launch`]), the report ([`report`]), the DCQCN timeline ([`timeline`]),
//! the machine-bound judge ([`bottleneck`]) and a link cut measured during the job
//! ([`failover`]).

use rocefab_contracts::rdma::SegmentMode;

pub mod bottleneck;
pub mod expect;
pub mod failover;
pub mod hosts;
pub mod launch;
pub mod report;
pub mod timeline;

/// How requesters cut RDMA WRITEs into packets (`--segment`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Segment {
    /// First/Middle/Last (standard RC): reordering is a sequence error, NAK and go-back-N.
    #[default]
    FirstMiddleLast,
    /// Every packet a WRITE Only with its own RETH; responders place out-of-order arrivals.
    WriteOnly,
}

impl Segment {
    fn mode(self) -> SegmentMode {
        match self {
            Segment::FirstMiddleLast => SegmentMode::FirstMiddleLast,
            Segment::WriteOnly => SegmentMode::WriteOnlyPerPacket,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Segment::FirstMiddleLast => "first-middle-last",
            Segment::WriteOnly => "write-only",
        }
    }
}

/// `--transport`.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transport {
    Rocev2,
    Uet,
}

/// `--uet-delivery`.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum UetDelivery {
    Rud,
    Rod,
}

/// `--uet-encap`.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum UetEncap {
    Udp,
    Ip,
}

/// `--uet-entropy`.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum UetEntropy {
    Spray,
    Pdc,
}

/// The options of every job on a fabric (`rocefab run`, `rocefab train`): how the QPs are set
/// up, the data's seed and where the hosts serve metrics.
#[derive(clap::Args, Debug, Clone)]
pub struct JobArgs {
    /// The transport on the wire: RoCEv2 (RC QPs, PFC, DCQCN) or UET (Ultra Ethernet RUD
    /// PDCs: per-packet entropy, SACK, NACKs of trimmed packets, a window cut on ECN or trims).
    #[arg(long, value_enum, default_value_t = Transport::Rocev2)]
    pub transport: Transport,
    /// UET: a different entropy (UDP source port) per packet (`spray`) or one per PDC (`pdc`).
    #[arg(long, value_enum, default_value_t = UetEntropy::Spray)]
    pub uet_entropy: UetEntropy,
    /// UET: the DSCP of data and ACKs. The default, 26, is not in the reference design's DSCP
    /// map, so UET lands in the lossy default class (no PFC), where switches may trim
    /// (`qos.trim`); 24 puts it in RoCEv2's lossless class.
    #[arg(long, default_value_t = 26, value_parser = clap::value_parser!(u8).range(0..64))]
    pub uet_dscp: u8,
    /// UET: over UDP to port 4793 (`udp`, the entropy in the source port) or natively over IP
    /// protocol 253 with the 4-byte entropy header (`ip`, as the UEC's reference provider).
    #[arg(long, value_enum, default_value_t = UetEncap::Udp)]
    pub uet_encap: UetEncap,
    /// UET: Reliable Unordered Delivery (`rud`: every packet placed where it lands, sprayed) or
    /// Reliable Ordered Delivery (`rod`: one path per PDC, packets accepted in order only, a
    /// hole NACKed and gone back to).
    #[arg(long, value_enum, default_value_t = UetDelivery::Rud)]
    pub uet_delivery: UetDelivery,
    /// How requesters cut their writes: first-middle-last (standard RC) or write-only (every
    /// packet a WRITE Only with its RETH; responders place out-of-order arrivals, for spraying).
    #[arg(long, value_enum, default_value_t = Segment::FirstMiddleLast)]
    pub segment: Segment,
    /// First port of the hosts' Prometheus metrics while the job runs: host1 serves on
    /// 127.0.0.1:BASE, the n-th host of the fabric (host<n>) on BASE + n - 1; the report lists
    /// every URL.
    #[arg(long, default_value_t = 9700)]
    pub metrics_port_base: u16,
    /// Pattern seed of rank 0's data (rank r uses seed + r).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Requester window of every QP, in packets (go-back-N: also the most a loss resends).
    /// Default: 128 KiB of payload at the fabric's path MTU (128 packets at MTU 1500).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    pub window_packets: Option<u32>,
    /// Local ACK timeout of every requester, in emulated milliseconds. Default: 100 ms of wall
    /// clock but at least 1 ms emulated, i.e. max(100 ms, 1 ms × time_dilation) on the wall clock,
    /// and at least four times a window's serialisation at the slowest NIC's line rate.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    pub retransmit_timeout_ms: Option<u64>,
    /// How the hosts' NICs run: `N` (>= 1) runs every host in one `rocefab-hostd` whose NICs
    /// share N data threads (a thread wakes once for the frames of all its hosts); `per-host`
    /// runs a process per host; `auto` is a process per host up to four hosts a core, and one
    /// process with a thread per core beyond (unless a host has more than 256 QPs, as in a
    /// large all-to-all).
    #[arg(long, env = "ROCEFAB_HOST_WORKERS", default_value = "auto", value_parser = crate::workers::host_workers)]
    pub host_workers: crate::workers::Workers,
}

/// Parses `64MiB`, `4096`, `512KB` (512,000) into bytes, as topology files do
/// ([`rocefab_units::parse_bytes`]); zero is refused.
pub fn parse_size(s: &str) -> Result<u64, String> {
    match rocefab_units::parse_bytes(s) {
        Ok(0) => Err(format!("size {s:?} is zero")),
        r => r.map_err(|e| format!("size {e}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metrics_port_base_help_says_host1_gets_the_base() {
        use clap::Args;
        let cmd = JobArgs::augment_args(clap::Command::new("run"));
        let arg = cmd.get_arguments().find(|a| a.get_long() == Some("metrics-port-base")).unwrap();
        let help = arg.get_long_help().or(arg.get_help()).unwrap().to_string();
        assert!(
            help.contains("host1 serves on 127.0.0.1:BASE, the n-th host of the fabric (host<n>) on BASE + n - 1"),
            "{help}"
        );
    }

    #[test]
    fn sizes_parse_with_units_and_errors_name_the_problem() {
        assert_eq!(parse_size("64MiB"), Ok(64 << 20));
        assert!(parse_size("1G").unwrap_err().contains("1GiB"), "a bare G is ambiguous");
        assert_eq!(parse_size("4096"), Ok(4096));
        // SI as in topology files: 512KB is 512,000 bytes, 512KiB 524,288.
        assert_eq!(parse_size("512KB"), Ok(512_000));
        assert_eq!(parse_size("512KiB"), Ok(512 << 10));
        assert_eq!(parse_size("512KB"), crate::qos::parse_byte_size("512KB"));
        assert!(parse_size("12XB").unwrap_err().contains("unknown size unit"));
        assert!(parse_size("MiB").unwrap_err().contains("expected a size"));
        assert!(parse_size("0").is_err());
    }
}
