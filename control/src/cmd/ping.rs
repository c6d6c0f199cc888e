//! `rocefab ping`: the round-trip time between two GPU NICs of a running fabric, in emulated time,
//! beside the latency the topology configures along the path (docs/src/emulated-time.md).
//!
//! The configured one-way latency of a path is what the switch ports on it apply
//! ([`crate::plan::port_delays`]): at the first switch the receive delay of the port facing the
//! source NIC (its transmit pipeline and the cable), then at every switch the transmit delay of
//! the egress port (forwarding latency, cable and, toward the destination NIC, its receive
//! pipeline). The walk follows the switches' routes (longest prefix) and every member of an
//! ECMP group, so a path set with unequal delays reports its shortest and longest.
//!
//! The measurement is the system `ping` inside the source host's namespace; its wall-clock
//! times divided by D are emulated times. At D ≥ 1000 the daemons' own wake-ups (tens of µs of
//! wall clock per hop) are a few percent of a microsecond-scale path.
use std::net::{IpAddr, Ipv4Addr};
use std::process::Command;
use std::time::Duration;

use anyhow::{anyhow, bail, Context};
use clap::Args;
use serde::Serialize;

use crate::plan::{HostPlan, NicPlan, Plan};

#[derive(Args, Debug)]
#[command(override_usage = "rocefab ping [FABRIC] <FROM> <TO> [OPTIONS]")]
pub struct PingArgs {
    /// `[FABRIC] FROM TO`: the fabric (default: the only running one, as every command names
    /// it), the source and the destination GPU NIC, `hostN:gpuG`.
    #[arg(value_names = ["FABRIC", "FROM", "TO"], num_args = 2..=3, required = true)]
    pub at: Vec<String>,
    /// Echo requests to send (1..=1000).
    #[arg(short = 'c', long, default_value_t = 20)]
    pub count: u32,
    /// Wall-clock interval between requests (≥ 10ms), e.g. 50ms.
    #[arg(short = 'i', long, default_value = "50ms", value_parser = parse_interval)]
    pub interval: Duration,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

impl PingArgs {
    /// `[FABRIC] FROM TO` as given: the fabric, if named, and the two NICs.
    fn words(&self) -> anyhow::Result<(Option<&str>, &String, &String)> {
        match self.at.as_slice() {
            [from, to] => Ok((None, from, to)),
            [fabric, from, to] => Ok((Some(fabric.as_str()), from, to)),
            _ => bail!("expected [FABRIC] FROM TO"),
        }
    }
}

fn parse_interval(s: &str) -> Result<Duration, String> {
    let d = rocefab_units::parse_duration(s, rocefab_units::Bare::Seconds)?;
    if d < Duration::from_millis(10) || d > Duration::from_secs(10) {
        return Err(format!("{s:?}: the interval must be 10ms..=10s"));
    }
    Ok(d)
}

/// Configured one-way latency of the paths from a NIC to an address (emulated ns).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct PathLatency {
    pub min_ns: u64,
    pub max_ns: u64,
    /// Switches crossed on the shortest path.
    pub switches: u32,
}

/// What `rocefab ping --json` prints.
#[derive(Debug, Serialize)]
pub struct PingReport {
    pub from: String,
    pub to: String,
    pub time_dilation: f64,
    pub sent: u32,
    pub replies: usize,
    /// Configured round trip (both one-way paths), emulated ns.
    pub configured_rtt_min_ns: u64,
    pub configured_rtt_max_ns: u64,
    pub forward: PathLatency,
    pub reverse: PathLatency,
    /// Measured round trips in emulated ns, in the order they came.
    pub rtt_ns: Vec<u64>,
    pub rtt_min_ns: u64,
    pub rtt_p50_ns: u64,
    pub rtt_max_ns: u64,
}

/// The NIC `spec` (`hostN:gpuG`) names in `plan`.
pub fn find_nic<'p>(plan: &'p Plan, spec: &str) -> anyhow::Result<(&'p HostPlan, &'p NicPlan)> {
    let (host, gpu) = spec.split_once(':').ok_or_else(|| anyhow!("{spec:?}: expected hostN:gpuG"))?;
    let h = plan.host(host).ok_or_else(|| anyhow!("{spec:?}: the fabric has no host {host:?}"))?;
    let n = h
        .nics
        .iter()
        .find(|n| n.ifname == gpu || gpu.strip_prefix("gpu").and_then(|g| g.parse().ok()) == Some(n.gpu))
        .ok_or_else(|| anyhow!("{spec:?}: {host} has no NIC {gpu:?}"))?;
    Ok((h, n))
}

/// The configured one-way latency from NIC `src` of `host` to `dst` along the plan's routes.
pub fn one_way(plan: &Plan, host: &HostPlan, src: &NicPlan, dst: Ipv4Addr) -> anyhow::Result<PathLatency> {
    let peer = format!("{}:{}", host.name, src.ifname);
    let (si, pi) = plan
        .switches
        .iter()
        .enumerate()
        .find_map(|(si, s)| s.config.ports.iter().position(|p| p.peer == peer).map(|pi| (si, pi)))
        .ok_or_else(|| anyhow!("{peer}: no switch port faces it"))?;
    let first = plan.switches[si].config.ports[pi].rx_delay_ns;
    let mut out = None;
    walk(plan, si, dst, first, 1, &mut out)?;
    out.ok_or_else(|| anyhow!("{dst}: no route from {peer}"))
}

/// Follows the routes of switch `si` toward `dst` with `acc` ns so far, `depth` switches crossed.
fn walk(
    plan: &Plan,
    si: usize,
    dst: Ipv4Addr,
    acc: u64,
    depth: u32,
    out: &mut Option<PathLatency>,
) -> anyhow::Result<()> {
    let sw = &plan.switches[si];
    if depth > 16 {
        bail!("{dst}: the routes loop (through {})", sw.name);
    }
    let c = &sw.config;
    let route = c
        .routes
        .iter()
        .filter(|r| match r.prefix {
            IpAddr::V4(p) => r.len <= 32 && (r.len == 0 || (u32::from(p) ^ u32::from(dst)) >> (32 - r.len) == 0),
            IpAddr::V6(_) => false,
        })
        .max_by_key(|r| r.len)
        .ok_or_else(|| anyhow!("{dst}: {} has no route", sw.name))?;
    let g = route.group.ok_or_else(|| anyhow!("{dst}: {} delivers it locally", sw.name))?;
    for &nh in c.groups.get(g as usize).ok_or_else(|| anyhow!("{}: group {g} missing", sw.name))? {
        let port = &c.ports[c.nexthops[nh as usize].port as usize];
        let here = acc + port.tx_delay_ns;
        let (node, ifname) = port.peer.split_once(':').unwrap_or((&port.peer, ""));
        if let Some(h) = plan.host(node) {
            if h.nics.iter().any(|n| n.ifname == ifname && n.addr == dst) {
                let o = out.get_or_insert(PathLatency { min_ns: here, max_ns: here, switches: depth });
                (o.min_ns, o.max_ns) = (o.min_ns.min(here), o.max_ns.max(here));
                o.switches = o.switches.min(depth);
            }
            continue;
        }
        let next =
            plan.switches.iter().position(|s| s.name == node).ok_or_else(|| anyhow!("{}: unknown", port.peer))?;
        let rx = plan.switches[next].config.ports.iter().find(|p| p.name == ifname).map_or(0, |p| p.rx_delay_ns);
        walk(plan, next, dst, here + rx, depth + 1, out)?;
    }
    Ok(())
}

/// The round-trip times (ms) in `ping`'s output.
pub fn parse_ping_times(out: &str) -> Vec<f64> {
    out.lines()
        .filter_map(|l| l.split_once("time=").and_then(|(_, t)| t.split_whitespace().next()?.parse().ok()))
        .collect()
}

pub fn run(a: &PingArgs) -> anyhow::Result<()> {
    if !(1..=1000).contains(&a.count) {
        bail!("--count {}: 1..=1000", a.count);
    }
    let (fabric, from, to) = a.words()?;
    let crate::fabric::Fabric { st, topo, .. } = crate::fabric::Fabric::open(fabric)?;
    // The path the frames take: with `routing: bgp` FRR's routes, which `rocefab up` waited to
    // equal static routing's computation (the switches' own configs hold no fabric routes then).
    let plan = crate::plan::compile_static_without(&topo, 0, &Default::default());
    let d = st.clock()?.dilation();
    let (h1, n1) = find_nic(&plan, from)?;
    let (h2, n2) = find_nic(&plan, to)?;
    let forward = one_way(&plan, h1, n1, n2.addr)?;
    let reverse = one_way(&plan, h2, n2, n1.addr)?;
    // Every request answered or not within the deadline: count x interval plus 10 s.
    let deadline = (a.count as f64 * a.interval.as_secs_f64()).ceil() as u64 + 10;
    let out = Command::new("ip")
        .args(["netns", "exec", &h1.netns, "ping", "-n", "-c", &a.count.to_string()])
        .args(["-i", &format!("{:.3}", a.interval.as_secs_f64()), "-w", &deadline.to_string()])
        .args(["-I", &n1.addr.to_string(), &n2.addr.to_string()])
        .output()
        .context("running ping (iputils-ping)")?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let rtt_ns: Vec<u64> = parse_ping_times(&stdout)
        .iter()
        .map(|ms| d.to_emulated_secs(ms / 1e3) * 1e9)
        .map(|ns| ns.round() as u64)
        .collect();
    if rtt_ns.is_empty() {
        bail!(
            "no reply from {} ({}) to {} requests: {}",
            to,
            n2.addr,
            a.count,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    let mut sorted = rtt_ns.clone();
    sorted.sort_unstable();
    let r = PingReport {
        from: from.clone(),
        to: to.clone(),
        time_dilation: d.factor(),
        sent: a.count,
        replies: rtt_ns.len(),
        configured_rtt_min_ns: forward.min_ns + reverse.min_ns,
        configured_rtt_max_ns: forward.max_ns + reverse.max_ns,
        forward,
        reverse,
        rtt_min_ns: sorted[0],
        rtt_p50_ns: sorted[(sorted.len() - 1) / 2],
        rtt_max_ns: sorted[sorted.len() - 1],
        rtt_ns,
    };
    if a.json {
        println!("{}", serde_json::to_string_pretty(&r)?);
    } else {
        print!("{}", render(&r, n1.addr, n2.addr));
    }
    Ok(())
}

fn render(r: &PingReport, src: Ipv4Addr, dst: Ipv4Addr) -> String {
    use rocefab_units::fmt_ns;
    let span = |lo: u64, hi: u64| {
        if lo == hi {
            fmt_ns(lo as f64)
        } else {
            format!("{}..{}", fmt_ns(lo as f64), fmt_ns(hi as f64))
        }
    };
    let conf = r.configured_rtt_min_ns.max(1) as f64;
    format!(
        "ping {} ({src}) -> {} ({dst}) at time dilation {}, times emulated\n\
         configured RTT {} (there {} through {} switches, back {})\n\
         measured RTT over {} of {} replies: min {}, p50 {}, max {}; p50 {:+.1} % of the configured RTT\n",
        r.from,
        r.to,
        r.time_dilation,
        span(r.configured_rtt_min_ns, r.configured_rtt_max_ns),
        span(r.forward.min_ns, r.forward.max_ns),
        r.forward.switches,
        span(r.reverse.min_ns, r.reverse.max_ns),
        r.replies,
        r.sent,
        fmt_ns(r.rtt_min_ns as f64),
        fmt_ns(r.rtt_p50_ns as f64),
        fmt_ns(r.rtt_max_ns as f64),
        (r.rtt_p50_ns as f64 / conf - 1.0) * 100.0,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 40: `rocefab ping` names the fabric as every command does, first and optional.
    #[test]
    fn the_fabric_comes_first_and_may_be_left_out() {
        use clap::Parser;
        #[derive(Parser)]
        struct Cli {
            #[command(flatten)]
            a: PingArgs,
        }
        let parse = |line: &[&str]| Cli::try_parse_from(std::iter::once("ping").chain(line.iter().copied()));
        let two = parse(&["host1:gpu0", "host2:gpu0"]).unwrap();
        let (f, from, to) = two.a.words().unwrap();
        assert_eq!((f, from.as_str(), to.as_str()), (None, "host1:gpu0", "host2:gpu0"));
        let three = parse(&["rs", "host1:gpu0", "host2:gpu0", "-c", "3"]).unwrap();
        let (f, from, to) = three.a.words().unwrap();
        assert_eq!((f, from.as_str(), to.as_str()), (Some("rs"), "host1:gpu0", "host2:gpu0"));
        assert!(parse(&["host1:gpu0"]).is_err(), "one NIC");
    }

    fn plan(extra: &str) -> Plan {
        let src = format!(
            "fabric: p\nhosts: {{ count: 2, gpus_per_host: 2 }}\n\
             switches:\n  rail: [{{ name: rail1, rails: [1] }}, {{ name: rail2, rails: [2] }}]\n  \
             spine: [{{ name: spine1 }}, {{ name: spine2 }}]\n{extra}"
        );
        let topo = crate::topology::Topology::parse(&src, std::path::Path::new("p.yaml")).unwrap();
        crate::plan::compile(&topo, 0)
    }

    #[test]
    fn the_configured_path_adds_every_cable_and_pipeline_once() {
        let p = plan(
            "links:\n  delay: { host_rail: 1us, rail_spine: 2us }\n  overrides:\n    \
             - { between: [rail1, spine2], delay: 5us }\nlatency: { switch: 600ns, nic: 100ns }\n",
        );
        let (h1, g0) = find_nic(&p, "host1:gpu0").unwrap();
        let (_, g1) = find_nic(&p, "host2:gpu1").unwrap();
        // host1:gpu0 -> rail1 -> spine{1,2} -> rail2 -> host2:gpu1: NIC tx 100 + cable 1000,
        // rail1 600 + cable 2000 (spine1) or 5000 (spine2), spine 600 + 2000, rail2 600 + 1000 + NIC rx 100.
        let w = one_way(&p, h1, g0, g1.addr).unwrap();
        let base = 100 + 1000 + 600 + 600 + 2000 + 600 + 1000 + 100;
        assert_eq!((w.min_ns, w.max_ns, w.switches), (base + 2000, base + 5000, 3));
        // Same rail: two cables, one switch, both NIC pipelines.
        let (_, h2g0) = find_nic(&p, "host2:gpu0").unwrap();
        let w = one_way(&p, h1, g0, h2g0.addr).unwrap();
        assert_eq!((w.min_ns, w.max_ns, w.switches), (100 + 1000 + 600 + 1000 + 100, 2800, 1));
    }

    #[test]
    fn without_delays_the_path_is_zero_and_bad_names_are_named() {
        let p = plan("");
        let (h1, g0) = find_nic(&p, "host1:gpu0").unwrap();
        let (_, g1) = find_nic(&p, "host2:gpu1").unwrap();
        assert_eq!(one_way(&p, h1, g0, g1.addr).unwrap(), PathLatency { min_ns: 0, max_ns: 0, switches: 3 });
        assert!(find_nic(&p, "host9:gpu0").unwrap_err().to_string().contains("no host \"host9\""));
        assert!(find_nic(&p, "host1:gpu7").unwrap_err().to_string().contains("no NIC \"gpu7\""));
        assert!(find_nic(&p, "host1").unwrap_err().to_string().contains("hostN:gpuG"));
    }

    #[test]
    fn ping_times_are_read_from_the_reply_lines() {
        let out = "PING 10.0.2.2 (10.0.2.2) from 10.0.1.1 : 56(84) bytes of data.\n\
                   64 bytes from 10.0.2.2: icmp_seq=1 ttl=61 time=14.7 ms\n\
                   64 bytes from 10.0.2.2: icmp_seq=2 ttl=61 time=16.01 ms\n\
                   --- 10.0.2.2 ping statistics ---\nrtt min/avg/max/mdev = 14.668/16.959/24.409/2.814 ms\n";
        assert_eq!(parse_ping_times(out), [14.7, 16.01]);
    }
}
