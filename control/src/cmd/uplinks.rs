//! `rocefab uplinks`: per-uplink packets and bytes of every switch, with each port's share of
//! its switch's total (the ECMP stages; shows hash polarization).
use std::time::Duration;

use anyhow::Context;

use crate::fabric::daemon_http::{port_counter, scrape};
use crate::plan::Plan;
use crate::topology::{Role, Topology};

/// One ECMP port of `rocefab uplinks`: a rail switch's or spine's port towards the tier above,
/// or a super-spine's port towards a spine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UplinkPort {
    pub switch: String,
    pub port: String,
    /// `node:ifname` at the other end.
    pub peer: String,
}

/// The ports `rocefab uplinks` reports, switch by switch in topology order.
pub fn uplink_ports(topo: &Topology, plan: &Plan) -> Vec<UplinkPort> {
    let tier = |r: Role| match r {
        Role::Rail => 0,
        Role::Spine => 1,
        Role::SuperSpine => 2,
    };
    let mut out = Vec::new();
    for (si, s) in plan.switches.iter().enumerate() {
        let mine = topo.switches[si].role;
        for p in &s.config.ports {
            let node = p.peer.split(':').next().unwrap_or_default();
            let Some(peer) = topo.switch_index(node) else { continue };
            let up = tier(topo.switches[peer].role) > tier(mine);
            if up || mine == Role::SuperSpine {
                out.push(UplinkPort { switch: s.name.clone(), port: p.name.clone(), peer: p.peer.clone() });
            }
        }
    }
    out
}

/// The `rocefab uplinks` table: one row per port with transmitted packets and bytes
/// (`counters(switch, port)`) and its share of its switch's reported packets.
pub fn render_uplinks(ports: &[UplinkPort], counters: &dyn Fn(&str, &str) -> (u64, u64)) -> String {
    use std::fmt::Write as _;
    let rows: Vec<(&UplinkPort, u64, u64)> = ports
        .iter()
        .map(|p| {
            let (pk, by) = counters(&p.switch, &p.port);
            (p, pk, by)
        })
        .collect();
    let mut o =
        format!("{:<16} {:<6} {:<22} {:>12} {:>14} {:>6}\n", "switch", "port", "to", "tx packets", "tx bytes", "share");
    for (p, pk, by) in &rows {
        let total: u64 = rows.iter().filter(|(q, ..)| q.switch == p.switch).map(|(_, k, _)| k).sum();
        let share = if total == 0 { "-".to_string() } else { format!("{:.1}%", 100.0 * *pk as f64 / total as f64) };
        let _ = writeln!(o, "{:<16} {:<6} {:<22} {pk:>12} {by:>14} {share:>6}", p.switch, p.port, p.peer);
    }
    o
}

pub fn uplinks(name: Option<&str>) -> anyhow::Result<()> {
    let f = crate::fabric::Fabric::open(name)?;
    let (st, topo, plan) = (&f.st, &f.topo, f.plan());
    let mut scrapes = std::collections::BTreeMap::new();
    for d in st.daemons.iter().filter(|d| !d.is_host()) {
        let text =
            scrape(&d.metrics_url, Duration::from_secs(2)).with_context(|| format!("metrics of {}", d.switch))?;
        scrapes.insert(d.switch.clone(), text);
    }
    let counters = |sw: &str, port: &str| match scrapes.get(sw) {
        Some(t) => (
            port_counter(t, "rocefab_port_tx_packets_total", port),
            port_counter(t, "rocefab_port_tx_bytes_total", port),
        ),
        None => (0, 0),
    };
    println!(
        "fabric {}: ECMP ports (rail and spine uplinks, super-spine downlinks), counted since `rocefab up`",
        st.fabric
    );
    print!("{}", render_uplinks(&uplink_ports(topo, plan), &counters));
    Ok(())
}
