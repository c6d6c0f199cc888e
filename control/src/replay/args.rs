//! The arguments of `rocefab replay` and their value parsers (clap's `value_parser`s return
//! the message as a `String`, which clap prints after the option).

use std::net::IpAddr;
use std::path::PathBuf;
use std::time::Duration;

/// Arguments of `rocefab replay`.
#[derive(Debug, Clone, clap::Args)]
pub struct ReplayArgs {
    /// `[FABRIC] CAPTURE`: the fabric (default: the only running fabric) and the pcap or pcapng
    /// file to replay.
    #[arg(value_name = "[FABRIC] CAPTURE", num_args = 1..=2, required = true)]
    pub positional: Vec<String>,
    /// The GPU NIC that sends the capture's frames, `host1:gpu0`.
    #[arg(long, value_name = "HOST:GPU")]
    pub from: String,
    /// Map a capture endpoint onto a fabric GPU, `10.1.1.2=host2:gpu1` (repeatable); overrides
    /// the default mapping.
    #[arg(long = "map", value_name = "CAPTURE_IP=HOST:GPU", value_parser = parse_map)]
    pub maps: Vec<(IpAddr, String)>,
    /// The capture endpoint whose frames are injected (default: the address mapped to --from,
    /// else the source of the first RoCEv2 frame).
    #[arg(long, value_name = "CAPTURE_IP")]
    pub sender: Option<IpAddr>,
    /// Pad frames the capture's snap length cut with zeros to their original length (their
    /// ICRC is computed over the padded frame) instead of refusing them.
    #[arg(long)]
    pub pad: bool,
    /// Print the mapping, the traffic classes and what would be skipped, send nothing. Works
    /// without a running fabric with --topology (or a topology file in the fabric's place).
    #[arg(long)]
    pub dry_run: bool,
    /// The topology file to plan a dry run with, instead of a running fabric's.
    #[arg(long, value_name = "FILE", requires = "dry_run")]
    pub topology: Option<PathBuf>,
    /// Do not capture the destination NICs to measure the timing at the receiver.
    #[arg(long)]
    pub no_receiver_timing: bool,
    /// Replay X times faster than captured (0.5 = half speed); the captured timing is taken
    /// as emulated time and stretched by the fabric's time dilation.
    #[arg(long, value_name = "X", value_parser = parse_speed_factor, conflicts_with_all = ["pps", "topspeed"])]
    pub speed: Option<f64>,
    /// Send N frames per second of emulated time (N / D per wall-clock second on a fabric at
    /// time dilation D), evenly spaced, instead of the captured timing.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=100_000_000), conflicts_with = "topspeed")]
    pub pps: Option<u64>,
    /// Send as fast as possible.
    #[arg(long)]
    pub topspeed: bool,
    /// Replay the capture N times; between loops the capture's mean inter-frame gap.
    #[arg(long = "loop", value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub loops: u32,
    /// Refuse a schedule longer than this on the wall clock, and stop sending after it (`90s`,
    /// `10m`, `500ms`): how long the command may run, whatever the fabric's time dilation.
    #[arg(long, value_name = "DURATION", default_value = "10m", value_parser = crate::text::parse_wall_duration)]
    pub max_duration: Duration,
    /// Print the report as JSON (the mapping goes to stderr as text).
    #[arg(long)]
    pub json: bool,
}

/// Why an option value is refused (clap prints the message after the option).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ArgError {
    #[error("{given:?} is not CAPTURE_IP=HOST:GPU (e.g. 10.1.1.2=host2:gpu1)")]
    NotAMap { given: String },
    #[error("{given:?}: {ip:?} is not an IP address")]
    NotAnIp { given: String, ip: String },
    #[error("{given:?}: {gpu:?} is not HOST:GPU (e.g. host2:gpu1)")]
    NotAGpu { given: String, gpu: String },
    #[error("{given:?} is not a number")]
    NotANumber { given: String },
    #[error("{given}: the speed factor must be above 0 and at most 1000000")]
    SpeedOutOfRange { given: String },
}

/// Parses `CAPTURE_IP=HOST:GPU`.
pub fn parse_map(s: &str) -> Result<(IpAddr, String), ArgError> {
    let (ip, gpu) = s.split_once('=').ok_or_else(|| ArgError::NotAMap { given: s.into() })?;
    let ip: IpAddr = ip.trim().parse().map_err(|_| ArgError::NotAnIp { given: s.into(), ip: ip.into() })?;
    let gpu = gpu.trim();
    match gpu.split_once(':') {
        Some((h, g)) if !h.is_empty() && !g.is_empty() => Ok((ip, gpu.to_string())),
        _ => Err(ArgError::NotAGpu { given: s.into(), gpu: gpu.into() }),
    }
}

/// Parses a `--speed` factor: a finite number above 0 (at most 10^6).
pub fn parse_speed_factor(s: &str) -> Result<f64, ArgError> {
    let v: f64 = s.trim().parse().map_err(|_| ArgError::NotANumber { given: s.into() })?;
    if !(v > 0.0 && v <= 1e6) {
        return Err(ArgError::SpeedOutOfRange { given: s.into() });
    }
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refused_values_say_what_is_wrong() {
        let e = |r: Result<(IpAddr, String), ArgError>| r.unwrap_err().to_string();
        assert_eq!(e(parse_map("10.1.1.2")), "\"10.1.1.2\" is not CAPTURE_IP=HOST:GPU (e.g. 10.1.1.2=host2:gpu1)");
        assert_eq!(e(parse_map("x=host2:gpu1")), "\"x=host2:gpu1\": \"x\" is not an IP address");
        assert_eq!(e(parse_map("10.1.1.2=host2")), "\"10.1.1.2=host2\": \"host2\" is not HOST:GPU (e.g. host2:gpu1)");
        assert_eq!(parse_map(" 10.1.1.2 = host2:gpu1 "), Ok(("10.1.1.2".parse().unwrap(), "host2:gpu1".into())));
        assert_eq!(
            parse_speed_factor("0").unwrap_err().to_string(),
            "0: the speed factor must be above 0 and at most 1000000"
        );
        assert_eq!(parse_speed_factor("fast").unwrap_err().to_string(), "\"fast\" is not a number");
    }
}
