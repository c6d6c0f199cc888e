//! `rocefab prometheus-config`: a Prometheus configuration (`prometheus.yml`) that scrapes every
//! daemon of a running fabric, each target labelled with the fabric, its node and its role.
//!
//! Three scrape jobs (Prometheus `static_configs`,
//! <https://prometheus.io/docs/prometheus/latest/configuration/configuration/#static_config>):
//! - `rocefab-switchd`: every switch daemon (`role="switch"`, `tier` rail / spine / super-spine);
//! - `rocefab-nicd`: every host's NIC agent, its LLDP/DCBX and capture metrics
//!   (`role="nic-agent"`);
//! - `rocefab-hostd`: every host's `rocefab-hostd` (`role="hostd"`), the per-NIC and per-QP
//!   metrics (CNPs, DCQCN rates, PFC pauses) of a job. A hostd runs only while `rocefab run` or
//!   `rocefab train` runs a job, and serves on 127.0.0.1 at the job's `--metrics-port-base`
//!   plus the host's index in the topology (host1 at the base). These targets are listed
//!   statically, at the ports the jobs will use, so Prometheus shows them down (`up == 0`)
//!   between jobs and scrapes them as soon as one runs: a Prometheus user sees the job's
//!   lifetime in `up{role="hostd"}` and needs no reload.
//!
//! Every daemon already puts its own name in its series (`switch` on a switch daemon's); the
//! target labels add what a dashboard selects by across daemons. A hostd also labels its series
//! `job` with the rocefab job's name: Prometheus keeps its own `job` (the scrape job) and renames
//! that one `exported_job` (`honor_labels: false`, the default).
use std::collections::BTreeMap;
use std::io::Write as _;
use std::time::Duration;

use anyhow::{bail, Context};
use serde::Serialize;

use crate::fabric::pick_fabric;
use crate::fabric::rundir::{self, DaemonState, State};
use crate::plan::{compile, Plan};
use crate::topology::Topology;

/// `rocefab prometheus-config [FABRIC]`.
#[derive(clap::Args, Debug)]
pub struct PrometheusConfigArgs {
    /// Fabric name (default: the only running fabric).
    pub fabric: Option<String>,
    /// How often Prometheus scrapes every target (`global.scrape_interval`): whole
    /// milliseconds, e.g. 1s, 500ms (a bare number is seconds).
    #[arg(long, value_name = "DURATION", default_value = "5s", value_parser = parse_interval)]
    pub scrape_interval: ScrapeInterval,
    /// The `--metrics-port-base` of the `rocefab run` / `rocefab train` jobs to scrape: host<n>'s
    /// rocefab-hostd serves on 127.0.0.1:BASE + n - 1 while a job runs.
    #[arg(long, value_name = "BASE", default_value_t = 9700)]
    pub hostd_port_base: u16,
}

/// A scrape interval in whole milliseconds, printed as Prometheus spells durations (`5s`,
/// `500ms`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ScrapeInterval(u64);

impl ScrapeInterval {
    pub fn from_millis(ms: u64) -> ScrapeInterval {
        ScrapeInterval(ms.max(1))
    }
}

impl std::fmt::Display for ScrapeInterval {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.0.is_multiple_of(1000) {
            write!(f, "{}s", self.0 / 1000)
        } else {
            write!(f, "{}ms", self.0)
        }
    }
}

fn parse_interval(s: &str) -> Result<ScrapeInterval, String> {
    let d = rocefab_units::parse_duration(s, rocefab_units::Bare::Seconds)?;
    if d < Duration::from_millis(1) || d.subsec_nanos() % 1_000_000 != 0 {
        return Err(format!("{s:?}: a scrape interval is whole milliseconds, at least 1ms"));
    }
    Ok(ScrapeInterval(d.as_millis() as u64))
}

/// What a target is, as its scrape job and its `role` label say.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Role {
    Switch,
    NicAgent,
    Hostd,
}

impl Role {
    pub const ALL: [Role; 3] = [Role::Switch, Role::NicAgent, Role::Hostd];

    /// The scrape job's name.
    pub fn job(self) -> &'static str {
        match self {
            Role::Switch => "rocefab-switchd",
            Role::NicAgent => "rocefab-nicd",
            Role::Hostd => "rocefab-hostd",
        }
    }

    /// The `role` label.
    pub fn label(self) -> &'static str {
        match self {
            Role::Switch => "switch",
            Role::NicAgent => "nic-agent",
            Role::Hostd => "hostd",
        }
    }
}

/// One scrape target: `host:port` (Prometheus scrapes `/metrics`) and its labels.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    pub role: Role,
    pub address: String,
    /// `fabric`, `node`, `role`, and `tier` for a switch whose tier the plan knows.
    pub labels: BTreeMap<String, String>,
}

/// Every target of the fabric in `st`: its switch daemons and NIC agents as `up` recorded them,
/// and a hostd per host of `plan` (the topology's hosts, in the order `rocefab run` numbers
/// them) at `hostd_port_base` + index. Without a plan there are no hostd targets and no tiers.
pub fn targets(st: &State, plan: Option<&Plan>, hostd_port_base: u16) -> anyhow::Result<Vec<Target>> {
    let labels = |role: Role, node: &str| -> BTreeMap<String, String> {
        [("fabric", st.fabric.as_str()), ("node", node), ("role", role.label())]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    };
    let address = |d: &DaemonState| -> String {
        let base = d.url("/");
        base.trim_start_matches("http://").trim_end_matches('/').to_string()
    };
    let mut v = Vec::new();
    for d in st.daemons.iter().filter(|d| !d.is_host()) {
        let mut l = labels(Role::Switch, d.node());
        if let Some(s) = plan.and_then(|p| p.switch(d.node())) {
            l.insert("tier".into(), s.config.role.clone());
        }
        v.push(Target { role: Role::Switch, address: address(d), labels: l });
    }
    for d in st.daemons.iter().filter(|d| d.is_host()) {
        v.push(Target { role: Role::NicAgent, address: address(d), labels: labels(Role::NicAgent, d.node()) });
    }
    for (i, h) in plan.map(|p| p.hosts.as_slice()).unwrap_or_default().iter().enumerate() {
        let port = u16::try_from(i).ok().and_then(|i| hostd_port_base.checked_add(i)).with_context(|| {
            format!("--hostd-port-base {hostd_port_base}: {} (host {}) would be past port 65535", h.name, i + 1)
        })?;
        v.push(Target {
            role: Role::Hostd,
            address: format!("127.0.0.1:{port}"),
            labels: labels(Role::Hostd, &h.name),
        });
    }
    Ok(v)
}

#[derive(Serialize)]
struct PromConfig<'a> {
    global: Global,
    scrape_configs: Vec<ScrapeConfig<'a>>,
}

#[derive(Serialize)]
struct Global {
    scrape_interval: String,
}

#[derive(Serialize)]
struct ScrapeConfig<'a> {
    job_name: &'static str,
    static_configs: Vec<StaticConfig<'a>>,
}

#[derive(Serialize)]
struct StaticConfig<'a> {
    targets: [&'a str; 1],
    labels: &'a BTreeMap<String, String>,
}

/// The configuration: a comment saying what it scrapes, then `global` and one scrape job per
/// role that has targets.
pub fn render(fabric: &str, targets: &[Target], interval: ScrapeInterval, hostd_port_base: u16) -> String {
    let scrape_configs = Role::ALL
        .iter()
        .filter(|r| targets.iter().any(|t| t.role == **r))
        .map(|&r| ScrapeConfig {
            job_name: r.job(),
            static_configs: targets
                .iter()
                .filter(|t| t.role == r)
                .map(|t| StaticConfig { targets: [t.address.as_str()], labels: &t.labels })
                .collect(),
        })
        .collect();
    let cfg = PromConfig { global: Global { scrape_interval: interval.to_string() }, scrape_configs };
    let count = |r: Role, one: &str, many: &str| match targets.iter().filter(|t| t.role == r).count() {
        1 => format!("1 {one}"),
        n => format!("{n} {many}"),
    };
    let mut o = format!(
        "# Prometheus configuration for rocefab fabric {fabric} (`rocefab prometheus-config`): {}, {}, {}.\n\
         # Run `prometheus --config.file=<this file>`, or add the scrape_configs to your own prometheus.yml;\n\
         # grafana/rocefab-dashboard.json selects by these labels.\n",
        count(Role::Switch, "switch daemon", "switch daemons"),
        count(Role::NicAgent, "NIC agent", "NIC agents"),
        count(Role::Hostd, "host daemon", "host daemons"),
    );
    if targets.iter().any(|t| t.role == Role::Hostd) {
        o.push_str(&format!(
            "# Job rocefab-hostd: each host's rocefab-hostd, up only while `rocefab run` or `rocefab train` runs\n\
             # a job with --metrics-port-base {hostd_port_base} (down between jobs).\n"
        ));
    }
    o.push_str(&yaml_serde::to_string(&cfg).expect("a Prometheus configuration serialises"));
    o
}

/// The fabric's plan, from the topology `up` read; `None` (with a warning) when that file no
/// longer loads.
fn plan_of(st: &State) -> Option<Plan> {
    match Topology::load(&st.topology) {
        Ok(t) => Some(compile(&t, 0)),
        Err(e) => {
            eprintln!(
                "rocefab: warning: {e}; the configuration has no rocefab-hostd targets and no tier labels \
                 (they come from the topology)"
            );
            None
        }
    }
}

pub fn run(a: &PrometheusConfigArgs) -> anyhow::Result<()> {
    let fabric = pick_fabric(a.fabric.as_deref())?;
    let path = rundir::state_path(&fabric);
    if !path.exists() {
        bail!("fabric {fabric} is not up (no {})", path.display());
    }
    let st = State::load(&fabric)?;
    if st.phase != "up" {
        bail!("fabric {fabric} is not up (its state is {:?}); see `rocefab status {fabric}`", st.phase);
    }
    let plan = plan_of(&st);
    let t = targets(&st, plan.as_ref(), a.hostd_port_base)?;
    let text = render(&fabric, &t, a.scrape_interval, a.hostd_port_base);
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes()).context("writing the configuration")?;
    out.flush().context("writing the configuration")?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::fabric::rundir::{KIND_HOST, KIND_SWITCH};

    fn daemon(kind: &str, node: &str, port: u16) -> DaemonState {
        crate::fabric::rundir::test_daemon("rs", kind, node, port)
    }

    fn rail_spine() -> (State, Plan) {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../topologies/rail-spine.yaml");
        let plan = compile(&Topology::load(&path).unwrap(), 9400);
        let mut daemons: Vec<DaemonState> = ["rail1", "rail2", "spine1", "spine2"]
            .iter()
            .enumerate()
            .map(|(i, s)| daemon(KIND_SWITCH, s, 9400 + i as u16))
            .collect();
        daemons.extend((1..=4).map(|h| daemon(KIND_HOST, &format!("host{h}"), 9403 + h)));
        let st = State { fabric: "rs".into(), topology: path, phase: "up".into(), daemons, ..State::default() };
        (st, plan)
    }

    fn yaml(text: &str) -> serde_json::Value {
        yaml_serde::from_str(text).unwrap_or_else(|e| panic!("{e}:\n{text}"))
    }

    #[test]
    fn every_daemon_is_a_target_labelled_with_fabric_node_role_and_tier() {
        let (st, plan) = rail_spine();
        let t = targets(&st, Some(&plan), 9700).unwrap();
        let text = render("rs", &t, ScrapeInterval::from_millis(1000), 9700);
        let c = yaml(&text);
        assert_eq!(c["global"]["scrape_interval"], "1s");
        let jobs: Vec<&str> =
            c["scrape_configs"].as_array().unwrap().iter().map(|j| j["job_name"].as_str().unwrap()).collect();
        assert_eq!(jobs, ["rocefab-switchd", "rocefab-nicd", "rocefab-hostd"]);
        let sw = &c["scrape_configs"][0]["static_configs"];
        assert_eq!(sw.as_array().unwrap().len(), 4);
        assert_eq!(sw[0]["targets"], serde_json::json!(["127.0.0.1:9400"]));
        assert_eq!(
            sw[0]["labels"],
            serde_json::json!({"fabric": "rs", "node": "rail1", "role": "switch", "tier": "rail"})
        );
        assert_eq!(sw[3]["labels"]["tier"], "spine");
        assert_eq!(sw[3]["targets"][0], "127.0.0.1:9403");
        let nic = &c["scrape_configs"][1]["static_configs"];
        assert_eq!(nic[1]["targets"][0], "127.0.0.1:9405");
        assert_eq!(nic[1]["labels"], serde_json::json!({"fabric": "rs", "node": "host2", "role": "nic-agent"}));
        let hostd = &c["scrape_configs"][2]["static_configs"];
        let hosts: Vec<(&str, &str)> = hostd
            .as_array()
            .unwrap()
            .iter()
            .map(|s| (s["targets"][0].as_str().unwrap(), s["labels"]["node"].as_str().unwrap()))
            .collect();
        assert_eq!(
            hosts,
            [
                ("127.0.0.1:9700", "host1"),
                ("127.0.0.1:9701", "host2"),
                ("127.0.0.1:9702", "host3"),
                ("127.0.0.1:9703", "host4")
            ]
        );
        assert_eq!(hostd[0]["labels"]["role"], "hostd");
        // The comment says what the hostd job is; every line before the YAML is a comment.
        assert!(text.contains("--metrics-port-base 9700 (down between jobs)"), "{text}");
        assert!(text.lines().take_while(|l| !l.starts_with("global:")).all(|l| l.starts_with('#')), "{text}");
    }

    #[test]
    fn without_the_topology_switches_and_nic_agents_remain() {
        let (st, _) = rail_spine();
        let t = targets(&st, None, 9700).unwrap();
        assert_eq!(t.len(), 8);
        assert!(t.iter().all(|t| t.role != Role::Hostd && !t.labels.contains_key("tier")), "{t:?}");
        let c = yaml(&render("rs", &t, ScrapeInterval::from_millis(5000), 9700));
        assert_eq!(c["scrape_configs"].as_array().unwrap().len(), 2);
        assert_eq!(c["global"]["scrape_interval"], "5s");
    }

    #[test]
    fn hostd_ports_past_65535_are_refused() {
        let (st, plan) = rail_spine();
        let e = targets(&st, Some(&plan), 65534).unwrap_err().to_string();
        assert!(e.contains("--hostd-port-base 65534: host3 (host 3) would be past port 65535"), "{e}");
        assert!(targets(&st, Some(&plan), 65532).is_ok());
    }

    #[test]
    fn super_spines_are_their_own_tier() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../topologies/multi-pod.yaml");
        let plan = compile(&Topology::load(&path).unwrap(), 9400);
        let ss = plan.switches.iter().find(|s| s.config.role == "super-spine").expect("a super-spine");
        let st = State { fabric: "mp".into(), daemons: vec![daemon(KIND_SWITCH, &ss.name, 9400)], ..State::default() };
        let t = targets(&st, Some(&plan), 9700).unwrap();
        assert_eq!(t[0].labels["tier"], "super-spine");
    }

    #[test]
    fn scrape_intervals_are_whole_milliseconds() {
        assert_eq!(parse_interval("1s").unwrap().to_string(), "1s");
        assert_eq!(parse_interval("2").unwrap().to_string(), "2s");
        assert_eq!(parse_interval("500ms").unwrap().to_string(), "500ms");
        assert_eq!(parse_interval("1.5s").unwrap().to_string(), "1500ms");
        assert_eq!(parse_interval("2m").unwrap().to_string(), "120s");
        assert!(parse_interval("0s").is_err() && parse_interval("1500us").is_err() && parse_interval("x").is_err());
    }
}
