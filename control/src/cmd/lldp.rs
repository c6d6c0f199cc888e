//! `rocefab lldp [<fabric>] [<node>] [--json] [--check]`: the LLDP neighbour tables of a running
//! fabric, as every switch daemon and host NIC agent serves them on `GET /lldp`
//! ([`lldp_agent::NodeReport`]), printed like `show lldp neighbors detail`; `--check` compares
//! every link of the topology with what both ends see (IEEE 802.1AB neighbours, IEEE 802.1Qaz
//! DCBX mismatches).
//!
//! A port keeps one neighbour per Chassis ID + Port ID, so a port can show several (lldpd
//! running beside rocefab-nicd on a NIC). `--check` passes a link end whose table holds the
//! expected neighbour, whatever else it holds, and reports every other entry as an "extra
//! neighbour": a link with extra neighbours and nothing worse is `extra neighbour`, which makes
//! `--check` exit non-zero (the cabling check is not clean) while the expected neighbour stays
//! found. Hosts that run no rocefab NIC agent (`lldp.nic_agent: false`) are not asked; the
//! switch end of their links passes when it hears an LLDPDU whose Port ID or Chassis ID is the
//! NIC's MAC (what lldpd sends by default) or whose System Name and Port ID are the host and
//! NIC names.
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Duration;

use anyhow::{bail, Context};
use lldp_agent::dcb::{app_list, prio_list, Ets, Source, TSA_CBS, TSA_ETS, TSA_STRICT};
use lldp_agent::port::NeighbourReport;
use lldp_agent::{NodeReport, PeerDcb, PortReport};

use crate::fabric::cabling::check_links;
use crate::fabric::cabling::entries;
use crate::fabric::cabling::mark_failed;
use crate::fabric::cabling::same_msap;
use crate::fabric::cabling::LinkCheck;
use crate::fabric::cabling::LinkEnd;
use crate::fabric::cabling::LinkStatus;
use crate::fabric::daemon_http::scrape;
use crate::fabric::pick_fabric;
use crate::fabric::rundir::{self, State};
use crate::plan::compile;
use crate::topology::Topology;

/// Arguments of `rocefab lldp`.
#[derive(clap::Args, Debug, Clone)]
pub struct LldpArgs {
    /// Fabric (default: the only running fabric). A single name that is not a running fabric
    /// is taken as the node.
    #[arg(value_name = "FABRIC")]
    pub fabric: Option<String>,
    /// Show only this node (switch or host).
    #[arg(value_name = "NODE")]
    pub node: Option<String>,
    /// Print the neighbour tables (or, with --check, the link results) as JSON.
    #[arg(long)]
    pub json: bool,
    /// Compare every link of the topology with the neighbours both ends report.
    #[arg(long)]
    pub check: bool,
    /// Seconds to wait for each agent's answer.
    #[arg(long, default_value_t = 3)]
    pub timeout: u64,
}

/// One daemon to ask.
#[derive(Debug, Clone)]
struct Target {
    node: String,
    url: String,
}

/// `(fabric, node)` from the positional arguments.
fn fabric_and_node(a: &LldpArgs) -> anyhow::Result<(String, Option<String>)> {
    match (&a.fabric, &a.node) {
        (Some(f), Some(n)) => Ok((f.clone(), Some(n.clone()))),
        (Some(x), None) if rundir::fabrics().contains(x) => Ok((x.clone(), None)),
        (Some(x), None) => {
            Ok((pick_fabric(None).with_context(|| format!("{x:?} is not a running fabric"))?, Some(x.clone())))
        }
        (None, _) => Ok((pick_fabric(None)?, None)),
    }
}

/// Asks every target at once; answers in target order.
fn fetch(targets: &[Target], timeout: Duration) -> Vec<Result<NodeReport, String>> {
    std::thread::scope(|sc| {
        let handles: Vec<_> = targets
            .iter()
            .map(|t| {
                sc.spawn(move || {
                    let body = scrape(&t.url, timeout).map_err(|e| format!("{e:#}"))?;
                    serde_json::from_str::<NodeReport>(&body).map_err(|e| format!("not a neighbour table: {e}"))
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap_or_else(|_| Err("fetch thread panicked".into()))).collect()
    })
}

pub fn run(a: &LldpArgs) -> anyhow::Result<()> {
    let (fabric, node) = fabric_and_node(a)?;
    let st = crate::fabric::load_state(&fabric)?;
    let all: Vec<Target> =
        st.daemons.iter().map(|d| Target { node: d.node().to_string(), url: d.url("/lldp") }).collect();
    let no_agents = !st.daemons.iter().any(|d| d.is_host());
    // The topology, read once, where the answer depends on it.
    let topo = if no_agents || a.check { Some(Topology::load(&st.topology)?) } else { None };
    if let (true, Some(topo)) = (no_agents, &topo) {
        if !topo.lldp.config.enabled {
            bail!("LLDP is off in fabric {fabric} ({}: lldp.enabled is false)", topo.file.display());
        }
        if !topo.lldp.nic_agent && !a.json {
            eprintln!(
                "rocefab: the hosts of fabric {fabric} run no NIC agent ({}: lldp.nic_agent is false); the switch ports show what the hosts' own LLDP agents send",
                topo.file.display()
            );
        }
    }
    let timeout = Duration::from_secs(a.timeout.max(1));
    if let (true, Some(topo)) = (a.check, &topo) {
        return check(&st, topo, &all, node.as_deref(), a.json, timeout);
    }
    // A host without a rocefab agent (lldp.nic_agent: false): what the switch ports facing it
    // hear, i.e. the host's own LLDP agent.
    let mut facing: Option<&str> = None;
    let targets: Vec<Target> = match &node {
        Some(n)
            if !all.iter().any(|t| &t.node == n) && topo.as_ref().is_some_and(|t| no_agents && is_host_of(t, n)) =>
        {
            facing = Some(n.as_str());
            if !a.json {
                eprintln!(
                    "rocefab: {n} runs no NIC agent (lldp.nic_agent: false): showing the switch ports cabled to it"
                );
            }
            all.iter().filter(|t| st.daemons.iter().any(|d| d.node() == t.node && !d.is_host())).cloned().collect()
        }
        Some(n) => {
            let t: Vec<Target> = all.iter().filter(|t| &t.node == n).cloned().collect();
            if t.is_empty() {
                let names: Vec<&str> = all.iter().map(|t| t.node.as_str()).collect();
                bail!("fabric {fabric} has no LLDP agent on node {n:?} (agents: {})", names.join(", "));
            }
            t
        }
        None => all,
    };
    let answers = fetch(&targets, timeout);
    let mut failed = 0;
    let mut reports = Vec::new();
    for (t, r) in targets.iter().zip(answers) {
        match r {
            Ok(r) => reports.push(r),
            Err(e) => {
                failed += 1;
                eprintln!("rocefab: {}: no neighbour table from {}: {e}", t.node, t.url);
            }
        }
    }
    if let Some(h) = facing {
        reports = facing_host(reports, h);
    }
    if a.json {
        println!("{}", serde_json::to_string_pretty(&reports)?);
    } else {
        let blocks: Vec<String> = reports.iter().map(render_node).collect();
        print!("{}", blocks.join("\n"));
    }
    if failed > 0 {
        bail!("{failed} of {} LLDP agents did not answer", targets.len());
    }
    Ok(())
}

/// Whether `node` is a host of the fabric's topology.
fn is_host_of(topo: &Topology, node: &str) -> bool {
    compile(topo, 0).hosts.iter().any(|h| h.name == node)
}

/// The switch reports cut to the ports whose expected neighbour is on `host`.
pub fn facing_host(reports: Vec<NodeReport>, host: &str) -> Vec<NodeReport> {
    reports
        .into_iter()
        .map(|mut r| {
            r.ports.retain(|p| p.expected.as_ref().is_some_and(|e| e.system_name == host));
            r
        })
        .filter(|r| !r.ports.is_empty())
        .collect()
}

fn check(
    st: &State,
    topo: &Topology,
    all: &[Target],
    node: Option<&str>,
    json: bool,
    timeout: Duration,
) -> anyhow::Result<()> {
    let plan = compile(topo, 0);
    // A host end without a rocefab agent is identified by its NIC's MAC.
    let end = |node: &str, ifname: &str| match plan.hosts.iter().find(|h| h.name == node) {
        Some(h) if !topo.lldp.nic_agent => {
            let mac = h.nics.iter().find(|n| n.ifname == ifname).map(|n| n.mac.to_string()).unwrap_or_default();
            LinkEnd::without_agent(node, ifname, &mac)
        }
        _ => LinkEnd::new(node, ifname),
    };
    let links: Vec<(LinkEnd, LinkEnd)> = plan
        .links
        .iter()
        .map(|l| (end(&l.a.node, &l.a.ifname), end(&l.b.node, &l.b.ifname)))
        .filter(|(a, b)| node.is_none_or(|n| a.node == n || b.node == n))
        .collect();
    if links.is_empty() {
        bail!("fabric {} has no link at node {:?}", st.fabric, node.unwrap_or_default());
    }
    let wanted: Vec<Target> =
        all.iter().filter(|t| links.iter().any(|(a, b)| a.node == t.node || b.node == t.node)).cloned().collect();
    let mut reports = Vec::new();
    for (t, r) in wanted.iter().zip(fetch(&wanted, timeout)) {
        match r {
            Ok(r) => reports.push(r),
            Err(e) => eprintln!("rocefab: {}: no neighbour table from {}: {e}", t.node, t.url),
        }
    }
    let mut results = check_links(&links, &reports);
    mark_failed(st, &mut results);
    if json {
        println!("{}", serde_json::to_string_pretty(&results)?);
    } else {
        print!("{}", render_check(&results));
    }
    let bad = results.iter().filter(|r| r.status != LinkStatus::Ok).count();
    if bad > 0 {
        bail!("{bad} of {} links differ from the topology", results.len());
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Rendering

/// `strict x8`, or the TSA of each class.
fn tsa_list(tsa: &[u8; 8]) -> String {
    let name = |t: u8| match t {
        TSA_STRICT => "strict".to_string(),
        TSA_CBS => "cbs".to_string(),
        TSA_ETS => "ets".to_string(),
        t => format!("tsa{t}"),
    };
    if tsa.iter().all(|&t| t == tsa[0]) {
        format!("{} x8", name(tsa[0]))
    } else {
        tsa.iter().map(|&t| name(t)).collect::<Vec<_>>().join(",")
    }
}

fn ets_text(e: &Ets) -> String {
    let prio_tc: Vec<String> = e.prio_tc.iter().map(|t| t.to_string()).collect();
    let mut s = format!("prio->tc [{}] tsa [{}]", prio_tc.join(","), tsa_list(&e.tsa));
    if e.tc_bandwidth.iter().any(|&b| b != 0) {
        let bw: Vec<String> = e.tc_bandwidth.iter().map(|b| b.to_string()).collect();
        let _ = write!(s, " bw% [{}]", bw.join(","));
    }
    s
}

/// The DCBX a neighbour advertised, one line.
fn peer_dcbx(p: &PeerDcb) -> String {
    if !p.any() {
        return "none".into();
    }
    let willing = match p.pfc_willing.or(p.ets_willing) {
        Some(w) => format!("willing={}", u8::from(w)),
        None => "willing=?".into(),
    };
    let pfc = p.pfc_enable.map_or("-".to_string(), prio_list);
    let ets = p.ets.or(p.ets_recommendation).map_or("-".to_string(), |e| ets_text(&e));
    let app = p.app.as_ref().map_or("-".to_string(), |a| format!("[{}]", app_list(a)));
    format!("{willing} pfc {pfc} ets {ets} app {app}")
}

fn source(s: Source) -> &'static str {
    match s {
        Source::Local => "local",
        Source::Peer => "peer",
    }
}

/// `host1 gpu0 (chassis 02:..., ttl 3/4 s)`.
fn neighbour_text(n: &NeighbourReport) -> String {
    let i = &n.info;
    let peer = i.system_name.as_deref().unwrap_or(&i.chassis);
    format!("{peer} {} (chassis {}, ttl {}/{} s)", i.port, i.chassis, n.ttl_left_s.max(0.0).floor() as u64, i.ttl_s)
}

/// One port's block: the neighbour DCBX acts on, its DCBX, the operational settings,
/// mismatches, then every other neighbour the port keeps.
pub fn render_port(node: &str, p: &PortReport) -> String {
    let mut s = String::new();
    let all = entries(p);
    let Some(n) = p.neighbour.as_ref().or(all.first().copied()) else {
        let _ = writeln!(s, "{node} {} -> no neighbour", p.port);
        if let Some(e) = &p.last_error {
            let _ = writeln!(s, "  last LLDPDU discarded: {e} ({} malformed)", p.counters.rx_malformed);
        }
        return s;
    };
    let i = &n.info;
    let _ = writeln!(s, "{node} {} -> {}", p.port, neighbour_text(n));
    let _ = writeln!(s, "  neighbour DCBX: {}", peer_dcbx(&i.dcb));
    let o = &p.oper;
    // The APP table is shown when it was adopted; otherwise it is the node's own.
    let app = match o.app_from {
        Source::Peer => format!("app [{}] (peer)", app_list(&o.app)),
        Source::Local => "app (local)".into(),
    };
    let _ = writeln!(s, "  operational: pfc {} ({}) {app}", prio_list(o.pfc_enable), source(o.pfc_from));
    for m in &p.mismatches {
        let _ = writeln!(s, "  MISMATCH: {m}");
    }
    let others: Vec<&&NeighbourReport> = all.iter().filter(|o| !same_msap(o, n)).collect();
    if !others.is_empty() {
        let _ = writeln!(s, "  {} neighbours on this port (DCBX with the one above); also:", all.len());
        for o in others {
            let _ = writeln!(s, "  also -> {} neighbour DCBX: {}", neighbour_text(o), peer_dcbx(&o.info.dcb));
        }
    }
    if p.counters.table_drops > 0 {
        let _ = writeln!(
            s,
            "  neighbour table full ({} entries): {} LLDPDUs of further neighbours discarded",
            p.max_neighbours, p.counters.table_drops
        );
    }
    if let Some(e) = &p.last_error {
        let _ = writeln!(s, "  last LLDPDU discarded: {e} ({} malformed)", p.counters.rx_malformed);
    }
    s
}

/// A node's header line and its ports.
pub fn render_node(r: &NodeReport) -> String {
    let mut s = String::new();
    let seen = r.ports.iter().filter(|p| !entries(p).is_empty()).count();
    let total: usize = r.ports.iter().map(|p| entries(p).len()).sum();
    let chassis = r.ports.first().map(|p| format!(", chassis {}", p.local.chassis)).unwrap_or_default();
    let extra = if total > seen { format!(" ({total} neighbours)") } else { String::new() };
    let _ = writeln!(s, "{} ({}{chassis}): {} ports, {seen} with a neighbour{extra}", r.node, r.kind, r.ports.len());
    for p in &r.ports {
        s.push_str(&render_port(&r.node, p));
    }
    s
}

// ---------------------------------------------------------------------------------------------
// --check

/// One line per link and a summary.
pub fn render_check(results: &[LinkCheck]) -> String {
    let mut s = String::new();
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for r in results {
        let _ = writeln!(s, "{:<18} <-> {:<18} {}", r.a, r.b, r.status);
        let k = match r.status {
            LinkStatus::Ok => "ok",
            LinkStatus::MissingNeighbour { .. } => "missing neighbour",
            LinkStatus::Miscabled { .. } => "miscabled",
            LinkStatus::DcbxMismatch { .. } => "DCBX mismatch",
            LinkStatus::NoData { .. } => "no LLDP data",
            LinkStatus::ExtraNeighbour { .. } => "extra neighbour",
            LinkStatus::LinkDown { .. } => "link down",
        };
        *counts.entry(k).or_default() += 1;
    }
    let order =
        ["ok", "missing neighbour", "miscabled", "DCBX mismatch", "no LLDP data", "extra neighbour", "link down"];
    let parts: Vec<String> = order
        .iter()
        .map(|k| (k, counts.get(k).copied().unwrap_or(0)))
        .filter(|&(k, n)| n > 0 || *k == "ok")
        .map(|(k, n)| format!("{n} {k}"))
        .collect();
    let _ = writeln!(s, "{} links: {}", results.len(), parts.join(", "));
    s
}
