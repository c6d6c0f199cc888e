//! `rocefab-bench sink`: counts the frames delivered to an interface as cheaply as possible.
//!
//! It attaches an `XDP_DROP` program ([`crate::xdp`]) to the interface, so delivered frames are
//! discarded before the kernel builds an skb (no UDP lookup, no ICMP port-unreachable), and
//! counts them with the veth's `rx_packets` counter, read before and after from
//! `/proc/self/net/dev`. veth counts every frame its XDP hook sees there. The benchmark disables
//! IPv6 and uses static neighbours, so nothing but the generator's frames reaches the sink.
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
    #[arg(long, value_enum, default_value = "driver")]
    pub xdp_mode: xdp::Mode,
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
    let _prog = xdp::attach(&a.iface, xdp::Program::Drop, a.xdp_mode)?;
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
