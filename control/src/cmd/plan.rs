//! `rocefab plan`: a topology validated, its address plan and switch configs printed (no root).
use std::path::Path;

use rocefab_contracts::time::Dilation;

use crate::fabric::lifecycle::print_warnings;
use crate::plan::{compile, Plan};
use crate::topology::{LineRate, Role, Topology};

pub fn print_plan(path: &Path, json: bool) -> anyhow::Result<()> {
    let topo = Topology::load(path)?;
    print_warnings(&topo);
    let plan = compile(&topo, topo.metrics_port_base.unwrap_or(9400));
    if json {
        let cfgs: Vec<_> = plan.switches.iter().map(|s| &s.config).collect();
        println!("{}", serde_json::to_string_pretty(&cfgs)?);
        return Ok(());
    }
    print!("{}", render_plan(&topo, &plan));
    Ok(())
}

/// What `rocefab plan` prints: hosts and their NICs, LLDP settings, then every switch with its
/// QoS, ports and routes.
pub fn render_plan(topo: &Topology, plan: &Plan) -> String {
    use std::fmt::Write as _;
    let mut o = String::new();
    // The RoCE path MTU the NICs choose from the link MTU (IPv4 RoCEv2 headers must fit too).
    let path_mtu = gpu_host::nic::engine::path_mtu_for_link(plan.mtu, false)
        .map_or_else(|| "none (links too small for RoCE)".to_string(), |m| m.bytes().to_string());
    let _ = writeln!(
        o,
        "fabric {} ({} hosts x {} GPUs{}, mtu {}, RoCE path mtu {path_mtu})",
        plan.fabric,
        topo.hosts,
        topo.gpus_per_host,
        match topo.nic_model {
            crate::topology::NicModel::PerGpu => String::new(),
            crate::topology::NicModel::Shared => " sharing one NIC".to_string(),
            crate::topology::NicModel::DualPort => " with dual-port NICs".to_string(),
        } + &topo.nvlink.map_or(String::new(), |n| {
            format!(
                ", NVLink {} {} ns{}",
                crate::topology::LineRate(n.bandwidth_bps),
                n.latency_ns,
                if topo.pxn { ", PXN" } else { "" }
            )
        }),
        plan.mtu
    );
    o += &describe_dilation(topo.time_dilation, plan);
    let _ = writeln!(
        o,
        "dcqcn profile {} (GPU NICs' reaction and notification points), notification point {}",
        topo.dcqcn, topo.dcqcn_np
    );
    o += &describe_latency(topo);
    let agents = topo.lldp.nic_agents();
    let memory = crate::memory::FabricMemory::of(
        plan,
        topo.time_dilation,
        agents,
        topo.routing == crate::topology::Routing::Bgp,
    );
    o += &crate::memory::describe_fabric(&memory);
    for h in &plan.hosts {
        if agents {
            let _ = writeln!(o, "  {} NIC agent {}", h.name, h.agent_listen);
        }
        for n in &h.nics {
            let _ = writeln!(
                o,
                "  {}:{:<6} {:<15} rail {} gw {} ({})",
                h.name, n.ifname, n.addr, n.rail, n.gateway, n.gateway_mac
            );
        }
    }
    let _ = writeln!(o, "lldp {}", crate::lldp::describe(&topo.lldp));
    let multi_pod = topo.pods.len() > 1 || topo.switches.iter().any(|s| s.role == Role::SuperSpine);
    if multi_pod {
        let names = |pod: Option<usize>, role: Role| {
            topo.switches
                .iter()
                .filter(|s| s.pod == pod && s.role == role)
                .map(|s| s.name.as_str())
                .collect::<Vec<_>>()
                .join(" ")
        };
        for (pi, p) in topo.pods.iter().enumerate() {
            let (rails, spines) = (names(Some(pi), Role::Rail), names(Some(pi), Role::Spine));
            let _ = writeln!(
                o,
                "pod {}: hosts {}-{}, rail switches {rails}, spines {spines}",
                pi + 1,
                p.hosts.first,
                p.hosts.last
            );
        }
        let _ = writeln!(o, "super-spines {}", names(None, Role::SuperSpine));
    }
    for (si, s) in plan.switches.iter().enumerate() {
        let chassis = s.config.chassis_mac.map(|m| format!(", chassis {m}")).unwrap_or_default();
        let pod = match topo.switches[si].pod {
            Some(p) if multi_pod => format!(", pod {}", p + 1),
            _ => String::new(),
        };
        let _ = writeln!(
            o,
            "{} ({}{pod}, seed {:#010x}, metrics {}{chassis})",
            s.name, s.config.role, s.config.hash_seed, s.config.metrics_listen
        );
        let _ = writeln!(o, "  qos {}", crate::qos::describe(&topo.qos[si]));
        let _ = writeln!(o, "  {}", crate::memory::describe_switch(&memory.switches[si].1));
        let _ = writeln!(o, "  load balance {}", crate::lb::describe(&topo.load_balance[si], topo.time_dilation));
        for (i, p) in s.config.ports.iter().enumerate() {
            let delays = if p.tx_delay_ns == 0 && p.rx_delay_ns == 0 {
                String::new()
            } else {
                format!(
                    "  delay out {} in {}",
                    rocefab_units::fmt_ns(p.tx_delay_ns as f64),
                    rocefab_units::fmt_ns(p.rx_delay_ns as f64)
                )
            };
            let _ = writeln!(
                o,
                "  port {i:<2} {:<6} {} {:<16} {:>8} -> {}{delays}",
                p.name,
                p.mac,
                p.addresses.join(","),
                LineRate(p.line_rate_bps).to_string(),
                p.peer
            );
        }
        for r in &s.config.routes {
            let via = match r.group {
                None => "local".to_string(),
                Some(g) => s.config.groups[g as usize]
                    .iter()
                    .map(|&nh| s.config.ports[s.config.nexthops[nh as usize].port as usize].peer.clone())
                    .collect::<Vec<_>>()
                    .join(" | "),
            };
            let _ = writeln!(o, "  route {}/{} -> {via}", r.prefix, r.len);
        }
    }
    // `routing: bgp`: the switches' routes through the fabric come from FRR; its configurations.
    let run = crate::fabric::rundir::dir(&plan.fabric).join("frr");
    for (name, text) in crate::fabric::frr::configs(topo, plan, &run.display().to_string()) {
        let _ = writeln!(
            o,
            "\nFRR configuration of {name} ({}/frr.conf):",
            crate::fabric::frr::dir(&plan.fabric, &name).display()
        );
        o += &text;
    }
    o
}

/// The latency line of `rocefab plan` (none without any delay): cables per class, switch and
/// NIC pipelines, emulated, and what they are on the wall clock.
pub fn describe_latency(topo: &Topology) -> String {
    use rocefab_units::fmt_ns;
    let mut classes: Vec<(&str, u64)> = Vec::new();
    for l in &topo.links {
        if !classes.contains(&(l.class.as_str(), l.delay_ns)) {
            classes.push((l.class.as_str(), l.delay_ns));
        }
    }
    if classes.iter().all(|c| c.1 == 0) && topo.switch_latency_ns == 0 && topo.nic_latency_ns == 0 {
        return String::new();
    }
    let cables: Vec<String> = classes.iter().map(|(c, ns)| format!("{c} {}", fmt_ns(*ns as f64))).collect();
    format!(
        "latency (emulated, x D on the wall clock): cables {}; switch forwarding {}; NIC pipeline {} each way\n",
        cables.join(", "),
        fmt_ns(topo.switch_latency_ns as f64),
        fmt_ns(topo.nic_latency_ns as f64)
    )
}

/// The time-dilation lines of `rocefab plan`: D, and the wall-clock rate of every distinct
/// (link class, emulated rate), e.g. `host-rail 400Gbps emulated = 50Mbps wall at D 8000`.
pub fn describe_dilation(d: Dilation, plan: &Plan) -> String {
    use std::fmt::Write as _;
    if d.is_real_time() {
        return "time dilation 1 (real time: rates and timers are wall-clock)\n".to_string();
    }
    let mut o = format!("time dilation {d}: rates, thresholds and timers are emulated; wall-clock rates are D times lower, timers D times longer\n");
    let mut seen: Vec<(&str, u64)> = Vec::new();
    for l in &plan.links {
        if !seen.contains(&(l.class, l.line_rate_bps)) {
            seen.push((l.class, l.line_rate_bps));
        }
    }
    for (class, bps) in seen {
        let _ = writeln!(o, "  {class} {} emulated = {} wall at D {d}", LineRate(bps), LineRate(d.rate(bps)));
    }
    o
}
