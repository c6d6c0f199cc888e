//! `rocefab status`: the nodes, links, daemons (alive or not) and metrics URLs of a running fabric.

use crate::fabric::daemons::{is_our_daemon, pid_alive};
use crate::fabric::netns;
use crate::fabric::pick_fabric;
use crate::fabric::rundir::{DaemonState, State};
use crate::plan::netns_name;
use crate::topology::LineRate;

pub fn status(name: Option<&str>, json: bool) -> anyhow::Result<()> {
    let fabric = pick_fabric(name)?;
    let st = crate::fabric::load_state(&fabric)?;
    // A switch sharing its process with others (`up --switch-workers`) can end alone (`rocefab
    // fail switch`, or its data plane failing): alive only while it also answers.
    let shared = |d: &DaemonState| st.daemons.iter().filter(|o| o.pid.is_some() && o.pid == d.pid).count() > 1;
    let alive = |d: &DaemonState| {
        d.pid.is_some_and(|p| pid_alive(p) && is_our_daemon(p, &d.config))
            && (!shared(d)
                || crate::fabric::daemon_http::scrape(&d.metrics_url, std::time::Duration::from_millis(500)).is_ok())
    };
    if json {
        // `daemons` keeps listing switch daemons only (as before host agents existed); the
        // hosts' NIC agents are `nic_agents`.
        let daemons: Vec<serde_json::Value> = st
            .daemons
            .iter()
            .filter(|d| !d.is_host())
            .map(|d| {
                serde_json::json!({ "switch": d.switch, "pid": d.pid, "alive": alive(d), "metrics_url": d.metrics_url,
                                    "lldp_url": d.url("/lldp"), "config": d.config, "log": d.log })
            })
            .collect();
        let agents: Vec<serde_json::Value> = st
            .daemons
            .iter()
            .filter(|d| d.is_host())
            .map(|d| {
                serde_json::json!({ "host": d.switch, "pid": d.pid, "alive": alive(d), "metrics_url": d.metrics_url,
                                    "lldp_url": d.url("/lldp"), "config": d.config, "log": d.log })
            })
            .collect();
        let targets = metrics_targets(&st);
        let v = serde_json::json!({ "fabric": st.fabric, "topology": st.topology, "phase": st.phase,
                                    "namespaces": st.namespaces, "links": st.links, "daemons": daemons,
                                    "nic_agents": agents,
                                    "metrics_urls": targets.iter().map(|t| &t.url).collect::<Vec<_>>(),
                                    "prometheus_static_configs": prometheus_static_configs(&targets) });
        println!("{}", serde_json::to_string_pretty(&v)?);
        return Ok(());
    }
    println!("fabric {} ({}), {}", st.fabric, st.topology.display(), st.phase);
    println!("nodes:");
    for ns in &st.namespaces {
        let node = ns.strip_prefix(&netns_name(&st.fabric, "")).unwrap_or(ns);
        let state = if netns::exists(ns) { "" } else { "  (namespace missing)" };
        println!("  {node:<10} {ns}{state}");
    }
    println!("links:");
    for l in &st.links {
        println!("  {:<18} <-> {:<18} {:>8}  {}", l.a, l.b, LineRate(l.line_rate_bps).to_string(), l.class);
    }
    let live = |d: &DaemonState| match d.pid {
        Some(p) if alive(d) => format!("pid {p} running"),
        Some(p) => format!("pid {p} DEAD"),
        None => "not started".into(),
    };
    print!("{}", render_daemons(&st, live));
    Ok(())
}

/// The daemon part of `rocefab status`: switch daemons and NIC agents with their /metrics and
/// /lldp URLs, then every /metrics URL as Prometheus scrape targets.
pub fn render_daemons(st: &State, live: impl Fn(&DaemonState) -> String) -> String {
    use std::fmt::Write as _;
    let mut o = String::new();
    let row = |o: &mut String, d: &DaemonState| {
        let (metrics, lldp) = (d.url("/metrics"), d.url("/lldp"));
        let _ = writeln!(o, "  {:<10} {:<18} {metrics}  lldp {lldp}  log {}", d.switch, live(d), d.log.display());
    };
    let _ = writeln!(o, "switch daemons:");
    for d in st.daemons.iter().filter(|d| !d.is_host()) {
        row(&mut o, d);
    }
    if st.daemons.iter().any(|d| d.is_host()) {
        let _ = writeln!(o, "NIC agents (LLDP/DCBX):");
        for d in st.daemons.iter().filter(|d| d.is_host()) {
            row(&mut o, d);
        }
    }
    let targets = metrics_targets(st);
    let _ = writeln!(
        o,
        "Prometheus targets ({} /metrics; `rocefab prometheus-config` prints a prometheus.yml with them and the job hosts):",
        targets.len()
    );
    for t in &targets {
        let _ = writeln!(o, "  {:<16} {:<10} {}", t.job, t.node, t.url);
    }
    let _ = writeln!(o, "  (a job's hosts serve /metrics on 127.0.0.1:<rocefab run --metrics-port-base + n - 1> for host<n> while it runs)");
    o
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

#[cfg(test)]
mod status_tests {
    use super::*;
    use crate::fabric::rundir::{KIND_HOST, KIND_SWITCH};

    fn daemon(kind: &str, node: &str, port: u16) -> DaemonState {
        crate::fabric::rundir::test_daemon("t", kind, node, port)
    }

    #[test]
    fn status_lists_every_metrics_url_for_prometheus() {
        let st = State {
            fabric: "t".into(),
            daemons: vec![
                daemon(KIND_SWITCH, "rail1", 9400),
                daemon(KIND_SWITCH, "spine1", 9401),
                daemon(KIND_HOST, "host1", 9402),
            ],
            ..State::default()
        };
        let t = metrics_targets(&st);
        let urls: Vec<&str> = t.iter().map(|t| t.url.as_str()).collect();
        assert_eq!(
            urls,
            vec!["http://127.0.0.1:9400/metrics", "http://127.0.0.1:9401/metrics", "http://127.0.0.1:9402/metrics"]
        );
        let text = render_daemons(&st, |_| "pid 1 running".into());
        let host = text.lines().find(|l| l.trim_start().starts_with("host1 ")).unwrap();
        assert!(host.contains("http://127.0.0.1:9402/metrics  lldp http://127.0.0.1:9402/lldp"), "{text}");
        for u in &urls {
            assert!(
                text.lines().any(|l| l.trim_end().ends_with(u) && l.contains("rocefab-")),
                "{u} is no target line: {text}"
            );
        }
        let j = prometheus_static_configs(&t);
        assert_eq!(j[0]["job_name"], "rocefab-switchd");
        assert_eq!(j[0]["static_configs"][1]["targets"][0], "127.0.0.1:9401");
        assert_eq!(j[1]["job_name"], "rocefab-nicd");
        assert_eq!(j[1]["static_configs"][0]["targets"][0], "127.0.0.1:9402");
        assert_eq!(j[1]["static_configs"][0]["labels"]["node"], "host1");
    }
}
