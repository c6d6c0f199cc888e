//! A running fabric, the layer every command stands on: its run directory and state
//! ([`rundir`]), the handle that loads it once ([`Fabric`]), its namespaces ([`netns`]), its
//! daemons ([`daemons`]: located, spawned, waited for, described when they end; [`process`]),
//! their HTTP endpoints ([`daemon_http`]), bringing it up and down ([`lifecycle`]), routing
//! ([`routing`], FRR in [`frr`]) and the frontend network ([`frontend`]).
//!
//! Nothing here parses a command line or prints a report: the subcommands are in
//! `crate::cmd`, jobs on the fabric in `crate::job`.
pub mod cabling;
pub mod capture;
pub mod daemon_http;
pub mod daemons;
pub mod events;
pub mod frontend;
pub mod frr;
mod handle;
pub mod lifecycle;
pub mod links;
pub mod netns;
pub mod process;
pub mod routing;
pub mod rundir;
pub use handle::{load_state, Fabric};

use anyhow::bail;

use crate::fabric::rundir::State;
use crate::plan::netns_name;

pub fn require_root() -> anyhow::Result<()> {
    if !nix::unistd::geteuid().is_root() {
        bail!("this command manipulates network namespaces and needs root");
    }
    Ok(())
}

/// The single running fabric, or the named one.
pub fn pick_fabric(name: Option<&str>) -> anyhow::Result<String> {
    if let Some(n) = name {
        return Ok(n.to_string());
    }
    let all = rundir::fabrics();
    match all.len() {
        1 => Ok(all[0].clone()),
        0 => bail!("no fabric is running (run directories under {})", rundir::base().display()),
        _ => bail!("several fabrics are running ({}); name one", all.join(", ")),
    }
}

pub fn fabric_namespaces(fabric: &str) -> Vec<String> {
    let prefix = netns_name(fabric, "");
    netns::list().into_iter().filter(|n| n.starts_with(&prefix)).collect()
}

/// One Prometheus scrape target: a daemon's `/metrics`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct MetricsTarget {
    /// `rocefab-switchd` or `rocefab-nicd`.
    pub job: &'static str,
    pub node: String,
    pub url: String,
}

/// Every daemon's `/metrics`: the switch daemons, then the hosts' NIC agents.
pub fn metrics_targets(st: &State) -> Vec<MetricsTarget> {
    let switches = st.daemons.iter().filter(|d| !d.is_host()).map(|d| ("rocefab-switchd", d));
    let hosts = st.daemons.iter().filter(|d| d.is_host()).map(|d| ("rocefab-nicd", d));
    switches
        .chain(hosts)
        .map(|(job, d)| MetricsTarget { job, node: d.node().to_string(), url: d.url("/metrics") })
        .collect()
}

/// `scrape_configs` entries for prometheus.yml: one job per daemon kind, `host:port` targets
/// labelled with the node (Prometheus scrapes `/metrics` by default).
pub fn prometheus_static_configs(targets: &[MetricsTarget]) -> serde_json::Value {
    let mut jobs: Vec<serde_json::Value> = Vec::new();
    for job in ["rocefab-switchd", "rocefab-nicd"] {
        let configs: Vec<serde_json::Value> = targets
            .iter()
            .filter(|t| t.job == job)
            .map(|t| {
                let hostport = t.url.trim_start_matches("http://").trim_end_matches("/metrics");
                serde_json::json!({ "targets": [hostport], "labels": { "node": t.node } })
            })
            .collect();
        if !configs.is_empty() {
            jobs.push(serde_json::json!({ "job_name": job, "static_configs": configs }));
        }
    }
    serde_json::Value::Array(jobs)
}
