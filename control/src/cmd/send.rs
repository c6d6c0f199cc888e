//! `rocefab send`: a bounded UDP sender that runs inside a GPU host's namespace, binds the GPU's
//! address (so host policy routing sends it out of that GPU's NIC), marks DSCP in the IPv4 TOS
//! byte (RFC 2474: TOS = DSCP << 2) and spreads packets over a range of UDP source ports (one
//! flow per port, for ECMP).
use std::net::{Ipv4Addr, SocketAddrV4, UdpSocket};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context};
use nix::sys::socket::{setsockopt, sockopt};

use crate::plan::netns_name;

/// Arguments of `rocefab send`.
#[derive(Debug, Clone, clap::Args)]
#[command(override_usage = "rocefab send [FABRIC] --from <FROM> --to <TO> [OPTIONS]")]
pub struct SendArgs {
    /// Fabric name (default: the only running fabric).
    pub fabric: Option<String>,
    /// The fabric, as the older `--fabric NAME` spelling (the positional is preferred).
    #[arg(long = "fabric", hide = true, conflicts_with = "fabric")]
    pub fabric_option: Option<String>,
    /// Source GPU, `hostN:<nic>` (e.g. host1:gpu0).
    #[arg(long)]
    pub from: String,
    /// Destination GPU (`host3:gpu1`) or IPv4 address.
    #[arg(long)]
    pub to: String,
    /// DSCP (0..=63): 24 = RoCEv2 (queue 3), 48 = CNP (queue 7).
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u8).range(0..=63))]
    pub dscp: u8,
    /// Packets to send.
    #[arg(long, default_value_t = 1)]
    pub count: u64,
    /// UDP payload bytes.
    #[arg(long, default_value_t = 512, value_parser = clap::value_parser!(u16).range(0..=9000))]
    pub size: u16,
    /// Source ports `first:last`; packets go round-robin over them (one flow each).
    #[arg(long, default_value = "49152:49152")]
    pub sport_range: String,
    /// Destination UDP port.
    #[arg(long, default_value_t = 9000)]
    pub dport: u16,
    /// Packets per second (default: as fast as the socket accepts).
    #[arg(long)]
    pub rate_pps: Option<u64>,
    /// Stop after this many seconds even if `count` is not reached (at most 60).
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..=60))]
    pub max_seconds: u64,
}

/// Parses `a:b` (inclusive, a ≤ b, at most 4096 ports) or a single port.
pub fn parse_port_range(s: &str) -> anyhow::Result<(u16, u16)> {
    let (a, b) = s.split_once(':').unwrap_or((s, s));
    let a: u16 = a.trim().parse().with_context(|| format!("--sport-range {s:?}: bad first port"))?;
    let b: u16 = b.trim().parse().with_context(|| format!("--sport-range {s:?}: bad last port"))?;
    if a == 0 || b < a || b - a >= 4096 {
        bail!("--sport-range {s:?}: expected first:last with 1 <= first <= last, at most 4096 ports");
    }
    Ok((a, b))
}

/// What a send did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SendReport {
    pub sent: u64,
    pub errors: u64,
    pub elapsed: Duration,
}

/// Sends from `src` inside namespace `netns` to `dst`. Runs on a dedicated thread that enters
/// the namespace (setns affects only the calling thread), so the caller stays where it is.
pub fn send_from_netns(netns: &str, src: Ipv4Addr, dst: Ipv4Addr, a: &SendArgs) -> anyhow::Result<SendReport> {
    let (first, last) = parse_port_range(&a.sport_range)?;
    let ns_path = format!("/run/netns/{netns}");
    let (a, netns) = (a.clone(), netns.to_string());
    std::thread::spawn(move || -> anyhow::Result<SendReport> {
        crate::fabric::netns::enter(&netns)?;
        let tos = i32::from(a.dscp) << 2;
        let mut socks = Vec::new();
        for port in first..=last {
            let s = UdpSocket::bind(SocketAddrV4::new(src, port))
                .with_context(|| format!("bind {src}:{port} in {ns_path}"))?;
            setsockopt(&s, sockopt::Ipv4Tos, &tos).context("setsockopt(IP_TOS)")?;
            socks.push(s);
        }
        let payload = vec![0x5au8; a.size as usize];
        let to = SocketAddrV4::new(dst, a.dport);
        let start = Instant::now();
        let deadline = start + Duration::from_secs(a.max_seconds);
        let mut sent = 0u64;
        let mut errors = 0u64;
        for i in 0..a.count {
            let now = Instant::now();
            if now >= deadline {
                break;
            }
            if let Some(pps) = a.rate_pps.filter(|&p| p > 0) {
                let due = start + Duration::from_nanos(i.saturating_mul(1_000_000_000) / pps);
                if due > now {
                    std::thread::sleep(due - now);
                }
            }
            match socks[(i % socks.len() as u64) as usize].send_to(&payload, to) {
                Ok(_) => sent += 1,
                Err(e) => {
                    // ENOBUFS / ECONNREFUSED (an ICMP error from an earlier packet) are counted,
                    // not fatal; anything else is reported.
                    if !matches!(e.raw_os_error(), Some(libc::ENOBUFS) | Some(libc::ECONNREFUSED) | Some(libc::EAGAIN))
                    {
                        return Err(e).with_context(|| format!("sendto {to}"));
                    }
                    errors += 1;
                }
            }
        }
        Ok(SendReport { sent, errors, elapsed: start.elapsed() })
    })
    .join()
    .map_err(|_| anyhow::anyhow!("sender thread panicked"))?
}

pub fn run(a: &SendArgs) -> anyhow::Result<()> {
    let f = crate::fabric::Fabric::open(a.fabric.as_deref().or(a.fabric_option.as_deref()))?;
    let (st, plan) = (&f.st, f.plan());
    let fabric = st.fabric.clone();
    let gpus = || {
        plan.hosts
            .iter()
            .flat_map(|h| h.nics.iter().map(move |n| format!("{}:{}", h.name, n.ifname)))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let src = plan.gpu_addr(&a.from).ok_or_else(|| anyhow!("--from {}: no such GPU (have {})", a.from, gpus()))?;
    let dst = match a.to.parse::<Ipv4Addr>() {
        Ok(ip) => ip,
        Err(_) => {
            plan.gpu_addr(&a.to).ok_or_else(|| anyhow!("--to {}: no such GPU or address (have {})", a.to, gpus()))?
        }
    };
    let host = a.from.split(':').next().unwrap_or_default();
    let r = send_from_netns(&netns_name(&fabric, host), src, dst, a)?;
    println!(
        "sent {} packets ({} send errors) from {src} to {dst}:{} dscp {} in {:.3} s",
        r.sent,
        r.errors,
        a.dport,
        a.dscp,
        r.elapsed.as_secs_f64()
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn port_ranges() {
        assert_eq!(parse_port_range("49152:49215").unwrap(), (49152, 49215));
        assert_eq!(parse_port_range("5000").unwrap(), (5000, 5000));
        assert!(parse_port_range("10:5").is_err());
        assert!(parse_port_range("0:5").is_err());
        assert!(parse_port_range("1:9999").is_err());
        assert!(parse_port_range("x:5").is_err());
    }
}
