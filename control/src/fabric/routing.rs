//! Where the fabric's routes stand: the links cut (failed links and those of failed switches),
//! and whether every live switch's data path routes as static routing computes without them,
//! read from the switches' `GET /routes` (with `routing: bgp`, BGP having converged). `rocefab
//! up` waits for it with BGP; `rocefab fail`/`restore` time the re-routing with it.
use std::time::{Duration, Instant};

use anyhow::anyhow;

use crate::fabric::rundir::State;

/// Every link cut: failed links and the links of failed switches (indices into `st.links`).
pub fn cut_links(st: &State) -> std::collections::BTreeSet<usize> {
    let of_switch = |i: usize| {
        let l = &st.links[i];
        [&l.a, &l.b].iter().any(|e| e.split(':').next().is_some_and(|n| st.failed_switches.iter().any(|s| s == n)))
    };
    st.failed_links.iter().copied().chain((0..st.links.len()).filter(|&i| of_switch(i))).collect()
}

/// Whether every live switch's data path sends every GPU's address where static routing's
/// computation without the cut links sends it (the same neighbours, each by longest-prefix
/// match, so a /24 toward the spines and per-GPU /32s learnt by BGP compare by where they lead),
/// read from every live switch's `GET /routes`. With `routing: bgp` this is BGP having
/// converged. `plan` is that computation.
fn converged(st: &State, plan: &crate::plan::Plan) -> anyhow::Result<bool> {
    let gpus: Vec<std::net::IpAddr> = plan.hosts.iter().flat_map(|h| &h.nics).map(|n| n.addr.into()).collect();
    for sw in plan.switches.iter().filter(|s| !st.failed_switches.contains(&s.name)) {
        let d = st
            .daemons
            .iter()
            .find(|d| !d.is_host() && d.node() == sw.name)
            .ok_or_else(|| anyhow!("no daemon for switch {}", sw.name))?;
        let held: serde_json::Value =
            serde_json::from_str(&crate::fabric::daemon_http::scrape(&d.url("/routes"), Duration::from_millis(500))?)?;
        let groups: Vec<Vec<u32>> = serde_json::from_value(held["groups"].clone())?;
        let routes: Vec<rocefab_contracts::config::RouteConfig> = serde_json::from_value(held["routes"].clone())?;
        let cfg = &sw.config;
        let peers = |members: &[u32]| -> std::collections::BTreeSet<String> {
            members
                .iter()
                .filter_map(|&nh| cfg.nexthops.get(nh as usize))
                .filter_map(|n| cfg.ports.get(n.port as usize).map(|p| p.peer.clone()))
                .collect()
        };
        let lpm = |table: &[rocefab_contracts::config::RouteConfig], a: std::net::IpAddr| {
            table.iter().filter(|r| prefix_contains(r.prefix, r.len, a)).max_by_key(|r| r.len).cloned()
        };
        for &a in &gpus {
            let Some(want) = lpm(&cfg.routes, a) else { continue };
            let want = want.group.map(|g| peers(cfg.groups.get(g as usize).map_or(&[][..], |m| m)));
            let got = lpm(&routes, a).map(|h| h.group.map(|g| peers(groups.get(g as usize).map_or(&[][..], |m| m))));
            if got != Some(want) {
                return Ok(false);
            }
        }
    }
    Ok(true)
}

/// Whether `prefix/len` contains `a` (IPv4; other families never).
fn prefix_contains(prefix: std::net::IpAddr, len: u8, a: std::net::IpAddr) -> bool {
    match (prefix, a) {
        (std::net::IpAddr::V4(p), std::net::IpAddr::V4(a)) => {
            let mask = if len == 0 { 0 } else { u32::MAX << (32 - u32::from(len.min(32))) };
            u32::from(p) & mask == u32::from(a) & mask
        }
        _ => false,
    }
}

/// Polls [`converged`] until true or `limit` after `since` (the change it converges from: the
/// cut, the restore, `up`'s start): how long after `since` it was first seen converged.
pub fn wait_converged(
    st: &State,
    topo: &crate::topology::Topology,
    limit: Duration,
    since: Instant,
) -> anyhow::Result<Option<Duration>> {
    // What static routing computes without the cut links, once: the state every poll compares.
    let plan = crate::plan::compile_static_without(topo, 0, &cut_links(st));
    while since.elapsed() < limit {
        if converged(st, &plan).unwrap_or(false) {
            return Ok(Some(since.elapsed()));
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    Ok(None)
}
