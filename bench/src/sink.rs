//! `rocefab-bench sink`: counts the frames delivered to an interface as cheaply as possible.
//!
//! Counting: the veth's `rx_packets` counter, read before and after from `/proc/self/net/dev`.
//! veth counts a frame when its peer transmits it, whatever happens to it next. The benchmark
//! disables IPv6 and uses static neighbours, so nothing but the generator's frames reaches it.
//!
//! Dropping (`--drop`), which costs CPU on whichever core transmitted into the veth, i.e. the
//! device under test's core:
//! - `stack` (default): nothing attached. The sink holds no address for the destination, so
//!   IPv4 input drops each frame after one failed route lookup (`IpInAddrErrors`): no UDP
//!   lookup, no ICMP. Measured here it is the cheapest.
//! - `xdp`: an `XDP_DROP` program ([`crate::xdp`]). On veth this is *more* expensive: the
//!   native XDP path copies every skb into a page-pool page to get 256 bytes of XDP headroom.
//!
//! Runs until `--duration` has elapsed or SIGINT/SIGTERM arrives, then prints one JSON line.
use std::io::Write;
use std::time::{Duration, Instant};

use crate::sys;
use crate::xdp;

#[derive(Debug, clap::Args)]
pub struct SinkArgs {
    /// Network namespace to enter.
    #[arg(long)]
    pub netns: Option<String>,
    /// Interface to count on.
    #[arg(long)]
    pub iface: String,
    /// Longest time to count (SIGINT/SIGTERM stops earlier).
    #[arg(long, default_value = "60s", value_parser = sys::parse_duration)]
    pub duration: Duration,
    /// How delivered frames are discarded.
    #[arg(long, value_enum, default_value = "stack")]
    pub drop: DropMode,
    /// XDP attach mode for `--drop xdp`.
    #[arg(long, value_enum, default_value = "driver")]
    pub xdp_mode: xdp::Mode,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum DropMode {
    /// Let IPv4 input drop them (no local address).
    Stack,
    /// `XDP_DROP` on the interface.
    Xdp,
}

#[derive(Debug, serde::Serialize)]
pub struct SinkReport {
    pub delivered: u64,
    pub elapsed_s: f64,
}

pub fn run(a: &SinkArgs) -> anyhow::Result<()> {
    if let Some(ns) = &a.netns {
        sys::enter_netns(ns)?;
    }
    sys::install_stop_handler()?;
    let _prog = match a.drop {
        DropMode::Xdp => Some(xdp::attach(&a.iface, xdp::Program::Drop, a.xdp_mode)?),
        DropMode::Stack => None,
    };
    let before = sys::rx_packets(&a.iface)?;
    let start = Instant::now();
    // The orchestrator waits for this line before starting the generator.
    println!("{{\"ready\":true}}");
    std::io::stdout().flush()?;
    while !sys::stop_requested() && start.elapsed() < a.duration {
        std::thread::sleep(Duration::from_millis(5));
    }
    let after = sys::rx_packets(&a.iface)?;
    let report = SinkReport { delivered: after.wrapping_sub(before), elapsed_s: start.elapsed().as_secs_f64() };
    tracing::info!(delivered = report.delivered, "sink done");
    println!("{}", serde_json::to_string(&report)?);
    Ok(())
}
