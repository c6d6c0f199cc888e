//! Fabric lifecycle: `up`, `down`, `status`, `exec`, `send`, `uplinks`, `plan`.
//!
//! `up` turns a topology file into namespaces `rf-<fabric>-<node>`, veth pairs created directly
//! in their namespaces (names, MACs and MTU set atomically, nothing ever lives in the root
//! namespace), addresses, host policy routing, static neighbours, offloads off, one
//! `rocefab-switchd` per switch and, unless `lldp.enabled` or `lldp.nic_agent` is false, one
//! `rocefab-nicd` per host (its GPU NICs' LLDP/DCBX agent). Every resource is recorded in `state.json` before it is
//! created, so `down` (or a failing `up`) removes exactly what was made, even after a crash.
mod handle;
pub use handle::{load_state, Fabric};

use std::collections::BTreeSet;
use std::fs::OpenOptions;
use std::io::{Read, Write};
use std::net::{Ipv4Addr, TcpListener};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context};
use rocefab_contracts::time::Dilation;

use crate::daemon_http::{port_counter, scrape};
use crate::netns;
use crate::plan::{compile, netns_name, Plan};
use crate::progress::Phase;
use crate::rundir::{self, DaemonState, EmulatedClock, LinkState, State, KIND_HOST, KIND_SWITCH};
use crate::send::{send_from_netns, SendArgs};
use crate::topology::{LineRate, Role, Topology};

/// Fabric subcommands, flattened into the top-level CLI.
#[derive(Debug, clap::Subcommand)]
pub enum FabricCmd {
    /// Bring a fabric up from a topology file (root).
    Up {
        topology: PathBuf,
        /// Seconds to wait for every switch daemon's metrics and every NIC agent's /lldp, from
        /// when the first daemon starts. Default: 20 s plus 1 s per daemon (they start at once
        /// and share the machine's cores).
        #[arg(long)]
        timeout: Option<u64>,
    },
    /// Tear a fabric down: daemons, namespaces, veths, run directory (root).
    Down {
        /// Fabric name (default: the only running fabric).
        fabric: Option<String>,
    },
    /// Show nodes, links, daemons and metrics URLs of a running fabric.
    Status {
        fabric: Option<String>,
        /// Print the state as JSON (with daemon liveness).
        #[arg(long)]
        json: bool,
    },
    /// Run a command inside a node's namespace: `rocefab exec rs host1 -- ping 10.0.2.3` (the
    /// fabric may be left out when one runs).
    #[command(override_usage = "rocefab exec [FABRIC] <NODE> -- <CMD>...")]
    Exec {
        /// `[FABRIC] NODE`: the fabric (default: the only running one) and the node (host1,
        /// rail1, spine1, ...).
        #[arg(value_names = ["FABRIC", "NODE"], num_args = 1..=2, required = true)]
        at: Vec<String>,
        /// The fabric, as the older `--fabric NAME` spelling (the positional is preferred).
        #[arg(long = "fabric", hide = true)]
        fabric_option: Option<String>,
        #[arg(last = true, required = true)]
        cmd: Vec<String>,
    },
    /// FRR's vtysh on a switch of a `routing: bgp` fabric, as `docker exec <node> vtysh` in
    /// containerlab: `rocefab vtysh rs rail1 -c 'show bgp summary'` (no command: interactive;
    /// the fabric may be left out when one runs). Inside `rocefab exec <switch>`, plain `vtysh`
    /// reaches the same daemons.
    #[command(override_usage = "rocefab vtysh [FABRIC] <SWITCH> [ARGS]...")]
    Vtysh {
        /// The fabric, as the older `--fabric NAME` spelling (the positional is preferred).
        #[arg(long = "fabric", hide = true)]
        fabric_option: Option<String>,
        /// `[FABRIC] SWITCH [ARGS]...`: the fabric (default: the only running one), the switch
        /// (rail1, spine1, ...), then vtysh's own arguments (-c COMMAND, repeatable; -C; ...).
        #[arg(value_name = "ARGS", trailing_var_arg = true, allow_hyphen_values = true, required = true)]
        args: Vec<String>,
    },
    /// Send UDP packets from a GPU NIC (inside its host namespace).
    Send(SendArgs),
    /// Per-uplink packets and bytes of every switch (the ECMP stages: rail and spine uplinks,
    /// super-spine downlinks), with each port's share of its switch's total: shows hash
    /// polarization.
    Uplinks { fabric: Option<String> },
    /// Validate a topology and print its address plan and switch configs (no root needed).
    Plan {
        topology: PathBuf,
        /// Print the switch configs as JSON.
        #[arg(long)]
        json: bool,
    },
}

pub fn run(cmd: &FabricCmd) -> anyhow::Result<()> {
    match cmd {
        FabricCmd::Up { topology, timeout } => up(topology, timeout.map(Duration::from_secs)),
        FabricCmd::Down { fabric } => down(fabric.as_deref()),
        FabricCmd::Status { fabric, json } => status(fabric.as_deref(), *json),
        FabricCmd::Exec { at, fabric_option, cmd } => {
            let (fabric, node) = fabric_and_node(at, fabric_option.as_deref(), "NODE")?;
            let code = exec(fabric, node, cmd)?;
            std::process::exit(code);
        }
        FabricCmd::Vtysh { fabric_option, args } => {
            // The leading words before vtysh's first option: `[FABRIC] SWITCH`.
            let words = args.iter().take_while(|a| !a.starts_with('-')).count().min(2);
            let (fabric, switch) = fabric_and_node(&args[..words], fabric_option.as_deref(), "SWITCH")?;
            let code = vtysh(fabric, switch, &args[words..])?;
            std::process::exit(code);
        }
        FabricCmd::Send(a) => send(a),
        FabricCmd::Uplinks { fabric } => uplinks(fabric.as_deref()),
        FabricCmd::Plan { topology, json } => print_plan(topology, *json),
    }
}

/// `[FABRIC] NODE` as every command that names a node takes it (as `rocefab fail switch` and
/// `rocefab routes` do): one word is the node of the only running fabric, two are the fabric and
/// the node. `option` is the older `--fabric NAME`, refused beside a positional fabric.
pub fn fabric_and_node<'a>(
    words: &'a [String],
    option: Option<&'a str>,
    what: &str,
) -> anyhow::Result<(Option<&'a str>, &'a str)> {
    match (words, option) {
        ([node], f) => Ok((f, node.as_str())),
        ([fabric, node], None) => Ok((Some(fabric.as_str()), node.as_str())),
        ([fabric, _], Some(f)) => {
            bail!("the fabric is named twice ({fabric:?} and --fabric {f:?}): give it once, first: [FABRIC] {what}")
        }
        _ => bail!("expected [FABRIC] {what}"),
    }
}

fn require_root() -> anyhow::Result<()> {
    if !nix::unistd::geteuid().is_root() {
        bail!("this command manipulates network namespaces and needs root");
    }
    Ok(())
}

/// The `rocefab-switchd` binary: `$ROCEFAB_SWITCHD`, else next to the running executable.
pub fn locate_switchd() -> anyhow::Result<PathBuf> {
    crate::process::sibling(
        "rocefab-switchd",
        Some("ROCEFAB_SWITCHD"),
        "switch daemon",
        "build it with `cargo build -p dataplane-user`, or set ROCEFAB_SWITCHD",
    )
}

/// The `rocefab-nicd` binary (a host's NIC agent): `$ROCEFAB_NICD`, else next to the running
/// executable.
pub fn locate_nicd() -> anyhow::Result<PathBuf> {
    crate::process::sibling(
        "rocefab-nicd",
        Some("ROCEFAB_NICD"),
        "NIC agent",
        "build it with `cargo build -p host-daemons`, set ROCEFAB_NICD, or set `lldp: { enabled: false }`",
    )
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

fn fabric_namespaces(fabric: &str) -> Vec<String> {
    let prefix = netns_name(fabric, "");
    netns::list().into_iter().filter(|n| n.starts_with(&prefix)).collect()
}

/// Daemon ports (one per switch daemon, then one per host NIC agent when LLDP is on): the
/// topology's base, or the first block of free ports from 9400 not used by another running
/// fabric.
fn choose_metrics_base(topo: &Topology) -> anyhow::Result<u16> {
    let agents = if topo.lldp.nic_agents() { topo.hosts as u16 } else { 0 };
    let n = topo.switches.len() as u16 + agents;
    let mut used = BTreeSet::new();
    for f in rundir::fabrics() {
        if let Ok(st) = State::load(&f) {
            for d in st.daemons {
                if let Some(p) = d.metrics_url.rsplit(':').next().and_then(|s| s.split('/').next()?.parse::<u16>().ok())
                {
                    used.insert((p, f.clone()));
                }
            }
        }
    }
    let taken = |p: u16| used.iter().find(|(q, _)| *q == p).map(|(_, f)| format!("fabric {f}"));
    let bindable = |p: u16| TcpListener::bind((Ipv4Addr::LOCALHOST, p)).is_ok();
    if let Some(b) = topo.metrics_port_base {
        for p in b..b + n {
            if let Some(f) = taken(p) {
                bail!("{}: metrics_port_base {b}: port {p} is used by {f}", topo.file.display());
            }
            if !bindable(p) {
                bail!("{}: metrics_port_base {b}: 127.0.0.1:{p} is in use", topo.file.display());
            }
        }
        return Ok(b);
    }
    let mut b: u16 = 9400;
    while b < 11400 {
        if (b..b + n).all(|p| taken(p).is_none() && bindable(p)) {
            return Ok(b);
        }
        b += n;
    }
    bail!("no free block of {n} daemon ports in 9400..11400")
}

/// Prints the topology's warnings (settings that work but break a rule of thumb) to stderr.
fn print_warnings(topo: &Topology) {
    for w in topo.qos.iter().flat_map(|q| &q.warnings) {
        eprintln!("warning: {}: {w}", topo.file.display());
    }
}

/// How long `up` waits for its daemons by default: 20 s, plus 1 s per daemon.
pub fn default_up_timeout(switches: usize, agents: usize) -> Duration {
    Duration::from_secs(20 + (switches + agents) as u64)
}

fn up(path: &Path, timeout: Option<Duration>) -> anyhow::Result<()> {
    let topo = Topology::load(path)?;
    print_warnings(&topo);
    require_root()?;
    let fabric = topo.fabric.clone();
    // One `up` per fabric name at a time; released (and its file removed) when `up` returns.
    let _lock = UpLock::take(&fabric)?;
    if rundir::state_path(&fabric).exists() {
        bail!("fabric {fabric} is already up; run `rocefab down {fabric}`");
    }
    let leftovers = fabric_namespaces(&fabric);
    if !leftovers.is_empty() {
        bail!("namespaces of fabric {fabric} already exist ({}); run `rocefab down {fabric}`", leftovers.join(", "));
    }
    let switchd = locate_switchd()?;
    let nicd = if topo.lldp.nic_agents() { Some(locate_nicd()?) } else { None };
    let base = choose_metrics_base(&topo)?;
    let plan = compile(&topo, base);
    for s in &plan.switches {
        s.config.validate().with_context(|| format!("generated config of {}", s.name))?;
    }
    let nodes: Vec<String> =
        plan.hosts.iter().map(|h| h.name.clone()).chain(plan.switches.iter().map(|s| s.name.clone())).collect();
    let backend: Vec<std::net::IpAddr> = plan.hosts.iter().flat_map(|h| h.nics.iter().map(|n| n.addr.into())).collect();
    crate::frontend::check(&fabric, &nodes, &backend).map_err(|e| anyhow!("rocefab up {}: {e}", path.display()))?;
    // Before anything is created: the daemons' memory against what the machine has.
    let bgp = topo.routing == crate::topology::Routing::Bgp;
    let memory = crate::memory::FabricMemory::of(&plan, topo.time_dilation, nicd.is_some(), bgp);
    let largest = memory.switches.iter().map(|(_, m)| m.umem_bytes()).max().unwrap_or(0);
    crate::memory::check_fits(&fabric, memory.need_bytes(), largest, crate::memory::available()?)
        .map_err(|line| anyhow!("rocefab up {}: {line}", path.display()))?;
    let mut st = State {
        fabric: fabric.clone(),
        topology: std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf()),
        phase: "creating".into(),
        clock: Some(EmulatedClock::starting_now(topo.time_dilation)),
        ..State::default()
    };
    st.save()?;
    let daemons = Daemons { switchd: &switchd, nicd: nicd.as_deref(), lldp: &topo.lldp };
    let agents = if nicd.is_some() { plan.hosts.len() } else { 0 };
    let timeout = timeout.unwrap_or_else(|| default_up_timeout(plan.switches.len(), agents));
    // A `rocefab down` meanwhile is seen before every daemon is started, while daemons are
    // awaited and before success; `down` waits for this process to remove what it made.
    let built = build(&topo, &plan, &mut st, &daemons, timeout).and_then(|()| UpLock::check_not_taken_down(&fabric));
    if let Err(e) = built {
        if let Some(pid) = UpLock::taken_down_by(&fabric) {
            // `rocefab down` asked meanwhile: what failed is that, not a daemon.
            let cleanup = teardown(&st);
            let mut msg =
                format!("fabric {fabric} was taken down (by rocefab down, pid {pid}) while it was being brought up");
            if let Err(c) = cleanup {
                msg.push_str(&format!("\n(removing what up had created failed: {c:#})"));
            }
            bail!("{msg}");
        }
        let cleanup = teardown(&st);
        let mut msg = format!("{e:#}");
        if let Err(c) = cleanup {
            msg.push_str(&format!("\n(cleanup after the failure also failed: {c:#})"));
        }
        bail!("rocefab up {}: {msg}\n(everything created was removed)", path.display());
    }
    st.phase = "up".into();
    st.save()?;
    let agents = if nicd.is_some() { format!(", {} NIC agents", plan.hosts.len()) } else { String::new() };
    println!(
        "fabric {fabric} is up: {} hosts, {} switches, {} links{agents}; `rocefab status {fabric}` for details",
        plan.hosts.len(),
        plan.switches.len(),
        plan.links.len()
    );
    Ok(())
}

/// The daemons `up` starts.
struct Daemons<'a> {
    switchd: &'a Path,
    /// `None` when LLDP is off: no NIC agents.
    nicd: Option<&'a Path>,
    lldp: &'a crate::lldp::LldpSettings,
}

/// Namespaces set up at once: each is a thread (in-process sysctls and offloads) and at
/// most one `ip -batch` process.
const SETUP_WIDTH: usize = 8;

fn build(topo: &Topology, plan: &Plan, st: &mut State, daemons: &Daemons, timeout: Duration) -> anyhow::Result<()> {
    // 1. Namespaces (recorded first), IPv6 off so no ND/MLD chatter crosses the switches; set
    //    in-process (a thread per namespace) before any interface exists, so `default` applies.
    //    The frontend bridge's namespace too (crate::frontend).
    let fe = crate::frontend::netns(&plan.fabric);
    st.namespaces = plan.namespaces();
    st.namespaces.push(fe.clone());
    st.save()?;
    let phase = Phase::start("namespaces", st.namespaces.len());
    let adds: Vec<String> = st.namespaces.iter().map(|n| format!("netns add {n}")).collect();
    netns::ip_batch(None, &adds)?;
    let host_kv = {
        let mut kv: Vec<String> =
            ["net.ipv6.conf.all.disable_ipv6=1", "net.ipv6.conf.default.disable_ipv6=1"].map(String::from).into();
        for scope in ["all", "default"] {
            kv.push(format!("net.ipv4.conf.{scope}.rp_filter=0"));
            kv.push(format!("net.ipv4.conf.{scope}.arp_ignore=1"));
            kv.push(format!("net.ipv4.conf.{scope}.arp_announce=2"));
        }
        kv
    };
    let switch_kv: Vec<String> =
        ["net.ipv6.conf.all.disable_ipv6=1", "net.ipv6.conf.default.disable_ipv6=1", "net.ipv4.ip_forward=0"]
            .map(String::from)
            .into();
    let jobs: Vec<(&str, &[String])> = plan
        .hosts
        .iter()
        .map(|h| (h.netns.as_str(), host_kv.as_slice()))
        .chain(plan.switches.iter().map(|s| (s.netns.as_str(), switch_kv.as_slice())))
        .chain([(fe.as_str(), &switch_kv[..2])])
        .collect();
    netns::each_in_netns(&jobs, SETUP_WIDTH, |j| j.0, |j| netns::sysctls_here(j.0, j.1), || phase.step())?;
    phase.finish("created");

    // 2. veth pairs, each end created directly in its namespace with its final name and MAC.
    st.links = plan
        .links
        .iter()
        .map(|l| LinkState {
            a: format!("{}:{}", l.a.node, l.a.ifname),
            b: format!("{}:{}", l.b.node, l.b.ifname),
            a_netns: l.a.netns.clone(),
            b_netns: l.b.netns.clone(),
            line_rate_bps: l.line_rate_bps,
            class: l.class.to_string(),
        })
        .collect();
    st.save()?;
    let phase = Phase::start("links", plan.links.len());
    let mtu = plan.mtu;
    let host_ns: Vec<String> = plan.hosts.iter().map(|h| h.netns.clone()).collect();
    let veths: Vec<String> = plan
        .links
        .iter()
        .map(|l| {
            format!(
                "link add {} netns {} address {} mtu {mtu} type veth peer name {} netns {} address {} mtu {mtu}",
                l.a.ifname, l.a.netns, l.a.mac, l.b.ifname, l.b.netns, l.b.mac
            )
        })
        .chain(crate::frontend::veth_lines(&fe, &host_ns))
        .collect();
    netns::ip_batch(None, &veths)?;
    phase.all_done();
    phase.finish("created");

    // 3. Addresses, routes, neighbours and offloads of every namespace, several at once.
    let mut jobs: Vec<(&str, Vec<String>, Vec<String>)> = plan
        .hosts
        .iter()
        .enumerate()
        .map(|(i, h)| {
            let (ns, mut b, ifs) = host_setup(h);
            b.extend(crate::frontend::host_lines(i));
            (ns, b, ifs)
        })
        .collect();
    jobs.extend(plan.switches.iter().map(switch_setup));
    jobs.push((fe.as_str(), crate::frontend::bridge_lines(plan.hosts.len()), Vec::new()));
    let phase = Phase::start("addresses", jobs.len());
    netns::each_in_netns(
        &jobs,
        SETUP_WIDTH,
        |j| j.0,
        |(ns, batch, ifs)| {
            netns::ip_batch(Some(ns), batch)?;
            netns::offloads_off_here(ns, ifs)
        },
        || phase.step(),
    )?;
    phase.finish("namespaces configured");

    // 4. Switch daemons, each recorded before it is spawned; then wait for their metrics.
    let dir = rundir::dir(&plan.fabric);
    let deadline = Instant::now() + timeout;
    let phase = Phase::start("switch daemons", plan.switches.len());
    for s in &plan.switches {
        let config = dir.join(format!("{}.json", s.name));
        let log = dir.join(format!("{}.log", s.name));
        s.config.save(&config)?;
        let d = DaemonState {
            kind: KIND_SWITCH.into(),
            switch: s.name.clone(),
            netns: s.netns.clone(),
            pid: None,
            config,
            log,
            metrics_url: format!("http://{}/metrics", s.config.metrics_listen),
        };
        UpLock::check_not_taken_down(&plan.fabric)?;
        start_daemon(st, d, daemons.switchd).with_context(|| format!("starting the daemon of {}", s.name))?;
    }
    wait_all_ready(
        &plan.fabric,
        st.daemons.iter().filter(|d| !d.is_host()),
        |d| d.metrics_url.clone(),
        "rocefab-switchd",
        deadline,
        timeout,
        &phase,
    )?;
    phase.finish("ready");

    // 5. One NIC agent per host (LLDP/DCBX on its GPU NICs), after the switches; wait for /lldp.
    if let Some(nicd) = daemons.nicd {
        let phase = Phase::start("NIC agents", plan.hosts.len());
        for h in &plan.hosts {
            let config = dir.join(format!("{}.nicd.json", h.name));
            let log = dir.join(format!("{}.nicd.log", h.name));
            let cfg = crate::plan::agent_config(h, &plan.links, daemons.lldp, h.agent_listen);
            let text = serde_json::to_string_pretty(&cfg).context("NIC agent config")?;
            std::fs::write(&config, text).with_context(|| format!("writing {}", config.display()))?;
            let d = DaemonState {
                kind: KIND_HOST.into(),
                switch: h.name.clone(),
                netns: h.netns.clone(),
                pid: None,
                config,
                log,
                metrics_url: format!("http://{}/metrics", h.agent_listen),
            };
            UpLock::check_not_taken_down(&plan.fabric)?;
            start_daemon(st, d, nicd).with_context(|| format!("starting the NIC agent of {}", h.name))?;
        }
        wait_all_ready(
            &plan.fabric,
            st.daemons.iter().filter(|d| d.is_host()),
            |d| d.url("/lldp"),
            "rocefab-nicd",
            deadline,
            timeout,
            &phase,
        )?;
        phase.finish("ready");
    }
    // 6. With `routing: bgp`: FRR (zebra, bgpd, bfdd) in every switch namespace; the switch
    //    daemons take the routes it installs from the kernel (crate::frr).
    if topo.routing == crate::topology::Routing::Bgp {
        UpLock::check_not_taken_down(&plan.fabric)?;
        let phase = Phase::start("FRR", plan.switches.len());
        crate::frr::start(topo, plan)?;
        phase.all_done();
        phase.finish("started");
        // Usable once every switch's data path routes as static routing would (sessions up,
        // every rail advertised and installed): a job started before would miss routes.
        let phase = Phase::start("BGP switches", plan.switches.len());
        let limit = Duration::from_secs(60 + plan.switches.len() as u64);
        match crate::routing::wait_converged(st, topo, limit, std::time::Instant::now())? {
            Some(_) => {
                phase.all_done();
                phase.finish("converged");
            }
            None => {
                phase.finish("started");
                eprintln!(
                    "up: warning: BGP had not converged after {} s: `rocefab routes {}` shows where the data paths differ",
                    limit.as_secs(),
                    topo.fabric
                );
            }
        }
    }
    Ok(())
}

/// A host namespace's `ip -batch` lines (addresses, per-NIC source policy routing `from <gpu
/// addr> lookup 100+rail`, static gateway neighbours) and the interfaces whose offloads go off.
fn host_setup(h: &crate::plan::HostPlan) -> (&str, Vec<String>, Vec<String>) {
    let mut b = vec!["link set lo up".to_string()];
    for n in &h.nics {
        let (i, a, t) = (&n.ifname, n.addr, n.table);
        b.push(format!("link set {i} up"));
        // The rail switch routes (a /32 per GPU) and does no L2 flooding or ARP between
        // GPUs, so even the own rail subnet goes via the gateway: no prefix route.
        b.push(format!("addr add {a}/{} dev {i} noprefixroute", n.subnet.len));
        b.push(format!("rule add from {a} lookup {t} pref {t}"));
        b.extend(host_nic_routes(n));
    }
    (&h.netns, b, h.nics.iter().map(|n| n.ifname.clone()).collect())
}

/// Host NIC `n`'s routes (main table and its own) and its gateway's permanent neighbour: what
/// the kernel flushes when the interface goes down, so a restored link gets them again
/// ([`relink_lines`]). Addresses and rules survive.
fn host_nic_routes(n: &crate::plan::NicPlan) -> Vec<String> {
    let (i, a, t, gw, net) = (&n.ifname, n.addr, n.table, n.gateway, n.subnet);
    vec![
        format!("route replace {net} via {gw} dev {i} src {a} onlink"),
        format!("route replace {net} via {gw} dev {i} src {a} onlink table {t}"),
        format!("route replace default via {gw} dev {i} src {a} onlink table {t}"),
        format!("neigh replace {gw} lladdr {} dev {i} nud permanent", n.gateway_mac),
    ]
}

/// A switch namespace's `ip -batch` lines: port addresses (informational; the kernel only sees
/// `local` traffic), /32 routes to GPUs on shared rail subnets, static neighbours.
fn switch_setup(s: &crate::plan::SwitchPlan) -> (&str, Vec<String>, Vec<String>) {
    let mut b = vec!["link set lo up".to_string()];
    for p in &s.config.ports {
        b.push(format!("link set {} up", p.name));
    }
    for (p, nb) in s.config.ports.iter().zip(&s.neighbors) {
        for a in &p.addresses {
            let extra = if nb.host_route { " noprefixroute" } else { "" };
            b.push(format!("addr add {a} dev {}{extra}", p.name));
        }
        b.extend(switch_port_route(p, nb));
        b.push(format!("neigh replace {} lladdr {} dev {} nud permanent", nb.addr, nb.mac, p.name));
    }
    (&s.netns, b, s.config.ports.iter().map(|p| p.name.clone()).collect())
}

/// Switch port `p`'s /32 route to its GPU `nb` on a shared rail subnet, if it needs one: what
/// the kernel flushes when the port goes down ([`relink_lines`]).
fn switch_port_route(p: &rocefab_contracts::config::PortConfig, nb: &crate::plan::PortNeighbor) -> Option<String> {
    nb.host_route.then(|| {
        let src = p.addresses.first().and_then(|a| a.split('/').next()).unwrap_or_default();
        format!("route replace {}/32 dev {} src {src}", nb.addr, p.name)
    })
}

/// What a link end `node:ifname` needs again in its namespace once it is back up: the routes
/// `rocefab up` gave the interface, which the kernel flushed when it went down (addresses and
/// rules survive), and on a host the gateway's permanent neighbour (a host's NIC knows its
/// gateway). A switch port learns its neighbour again by ARP, as a switch does after a link
/// comes back. `None` for an end the plan does not know.
pub fn relink_lines(plan: &crate::plan::Plan, end: &str) -> Option<(String, Vec<String>)> {
    let (node, ifname) = end.split_once(':')?;
    if let Some(h) = plan.hosts.iter().find(|h| h.name == node) {
        let n = h.nics.iter().find(|n| n.ifname == ifname)?;
        return Some((h.netns.clone(), host_nic_routes(n)));
    }
    let s = plan.switches.iter().find(|s| s.name == node)?;
    let (p, nb) = s.config.ports.iter().zip(&s.neighbors).find(|(p, _)| p.name == ifname)?;
    Some((s.netns.clone(), switch_port_route(p, nb).into_iter().collect()))
}

/// Waits for every daemon in `ds` ([`wait_ready`]), stepping `phase` as each answers.
fn wait_all_ready<'a>(
    fabric: &str,
    ds: impl Iterator<Item = &'a DaemonState>,
    url: impl Fn(&DaemonState) -> String,
    what: &str,
    deadline: Instant,
    timeout: Duration,
    phase: &Phase,
) -> anyhow::Result<()> {
    for d in ds {
        wait_ready(d, &url(d), what, deadline, timeout, &|| UpLock::check_not_taken_down(fabric))?;
        phase.step();
    }
    Ok(())
}

/// Records `d` in the state, spawns it, records its pid.
fn start_daemon(st: &mut State, d: DaemonState, binary: &Path) -> anyhow::Result<()> {
    let (config, log) = (d.config.clone(), d.log.clone());
    st.daemons.push(d);
    st.save()?;
    let pid = spawn_daemon(binary, &config, &log)?;
    st.daemons.last_mut().expect("pushed").pid = Some(pid);
    st.save()?;
    Ok(())
}

/// Waits until `url` answers 200, failing with the log's tail if the daemon exits or the
/// deadline passes.
/// Stops switch `name`'s daemon (SIGTERM, then SIGKILL after 5 s); its pid is forgotten.
pub fn stop_switch_daemon(st: &mut State, name: &str) -> anyhow::Result<()> {
    use nix::sys::signal::{kill, Signal};
    use nix::unistd::Pid;
    let d = st
        .daemons
        .iter_mut()
        .find(|d| !d.is_host() && d.node() == name)
        .ok_or_else(|| anyhow!("fabric {}: no switch {name}", st.fabric))?;
    if let Some(pid) = d.pid.take() {
        let _ = kill(Pid::from_raw(pid as i32), Signal::SIGTERM);
        let end = Instant::now() + Duration::from_secs(5);
        while pid_alive(pid) && Instant::now() < end {
            std::thread::sleep(Duration::from_millis(20));
        }
        if pid_alive(pid) {
            let _ = kill(Pid::from_raw(pid as i32), Signal::SIGKILL);
        }
    }
    st.save()?;
    Ok(())
}

/// Starts switch `name`'s daemon again with its configuration and waits until it serves its
/// metrics (30 s).
pub fn start_switch_daemon(st: &mut State, name: &str) -> anyhow::Result<()> {
    let switchd = locate_switchd()?;
    let i = st
        .daemons
        .iter()
        .position(|d| !d.is_host() && d.node() == name)
        .ok_or_else(|| anyhow!("fabric {}: no switch {name}", st.fabric))?;
    let (config, log) = (st.daemons[i].config.clone(), st.daemons[i].log.clone());
    let pid = spawn_daemon(&switchd, &config, &log)?;
    st.daemons[i].pid = Some(pid);
    st.save()?;
    let d = &st.daemons[i];
    let timeout = Duration::from_secs(30);
    wait_ready(d, &d.metrics_url, "rocefab-switchd", Instant::now() + timeout, timeout, &|| Ok(()))
}

fn wait_ready(
    d: &DaemonState,
    url: &str,
    what: &str,
    deadline: Instant,
    timeout: Duration,
    go_on: &dyn Fn() -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    let pid = d.pid.expect("spawned");
    loop {
        go_on()?;
        if scrape(url, Duration::from_millis(500)).is_ok() {
            return Ok(());
        }
        let alive = pid_alive(pid);
        if !alive || Instant::now() >= deadline {
            let why = if alive {
                format!("did not answer on {url} within {} s", timeout.as_secs())
            } else {
                how_it_ended(pid)
            };
            bail!(
                "{} {}: {what} (pid {pid}) {why}; last lines of {}:\n{}",
                d.kind,
                d.node(),
                d.log.display(),
                tail(&d.log, 15)
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn spawn_daemon(binary: &Path, config: &Path, log: &Path) -> anyhow::Result<u32> {
    let out =
        OpenOptions::new().create(true).append(true).open(log).with_context(|| format!("open {}", log.display()))?;
    let err = out.try_clone().context("dup log fd")?;
    let mut cmd = Command::new(binary);
    cmd.arg("--config").arg(config).arg("--log-file").arg(log).stdin(Stdio::null()).stdout(out).stderr(err);
    // SAFETY: setsid() is async-signal-safe and touches no memory of the parent; it detaches
    // the daemon from our session and terminal so it outlives `rocefab up`.
    unsafe {
        cmd.pre_exec(|| {
            if libc::setsid() < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let child = cmd.spawn().with_context(|| format!("spawn {}", binary.display()))?;
    Ok(child.id())
}

/// How a daemon this process started has ended, reaped with `waitpid`: its exit code or the
/// signal that killed it. SIGKILL nobody sent is most often the kernel's OOM killer, so the kernel
/// log is searched for it and the hint names memory.
fn how_it_ended(pid: u32) -> String {
    let mut status = 0;
    // SAFETY: waitpid only writes the status integer we pass; WNOHANG never blocks. The pid is a
    // child of this process (spawn_daemon), so no other process's status is consumed.
    let r = unsafe { libc::waitpid(pid as libc::pid_t, &mut status, libc::WNOHANG) };
    if r != pid as libc::pid_t {
        return "exited (its exit status is unknown: it is not a child of this rocefab)".into();
    }
    crate::process::describe_exit(std::process::ExitStatus::from_raw(status), || crate::process::oom_killed(pid))
}

fn tail(p: &Path, n: usize) -> String {
    match std::fs::read_to_string(p) {
        Ok(t) => {
            let lines: Vec<&str> = t.lines().collect();
            let s = lines[lines.len().saturating_sub(n)..].join("\n");
            if s.is_empty() {
                "(log is empty)".into()
            } else {
                s
            }
        }
        Err(e) => format!("(cannot read log: {e})"),
    }
}

/// `/proc/<pid>` exists and is not a zombie.
pub fn pid_alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(s) => {
            s.rsplit(')').next().and_then(|r| r.split_whitespace().next()).is_some_and(|st| st != "Z" && st != "X")
        }
        Err(_) => false,
    }
}

/// True if `pid` is the daemon started with `--config <config>`.
pub fn is_our_daemon(pid: u32, config: &Path) -> bool {
    let Ok(raw) = std::fs::read(format!("/proc/{pid}/cmdline")) else { return false };
    let args: Vec<String> = raw.split(|&b| b == 0).map(|a| String::from_utf8_lossy(a).into_owned()).collect();
    // The config path lives in this fabric's run directory: no other process carries it.
    let cfg = config.display().to_string();
    args.windows(2).any(|w| w[0] == "--config" && w[1] == cfg)
}

/// Every process started with `--config <config>` (covers a pid lost in a crash).
fn daemon_pids(d: &DaemonState) -> BTreeSet<u32> {
    let mut pids: BTreeSet<u32> = d.pid.into_iter().filter(|&p| is_our_daemon(p, &d.config)).collect();
    if let Ok(rd) = std::fs::read_dir("/proc") {
        for e in rd.flatten() {
            if let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) {
                if is_our_daemon(pid, &d.config) {
                    pids.insert(pid);
                }
            }
        }
    }
    pids
}

/// Stops the daemons (SIGTERM, SIGKILL after 5 s), deletes the namespaces (which removes their
/// veths) and the run directory.
fn teardown(st: &State) -> anyhow::Result<()> {
    use nix::sys::signal::{kill, Signal};
    use nix::unistd::Pid;
    // FRR first (`routing: bgp`): its pid files are in the run directory.
    let mut problems = crate::frr::stop_all(&st.fabric, &st.namespaces);
    let started = Instant::now();
    let mut pids = BTreeSet::new();
    for d in &st.daemons {
        pids.extend(daemon_pids(d));
    }
    for &p in &pids {
        let _ = kill(Pid::from_raw(p as i32), Signal::SIGTERM);
    }
    let deadline = Instant::now() + Duration::from_secs(5);
    while pids.iter().any(|&p| pid_alive(p)) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    for &p in pids.iter().filter(|&&p| pid_alive(p)) {
        tracing::warn!("daemon pid {p} ignored SIGTERM; killing it");
        let _ = kill(Pid::from_raw(p as i32), Signal::SIGKILL);
    }
    eprintln!("{}", crate::progress::line_of("down", "daemons", pids.len() as u64, "stopped", started.elapsed()));
    let started = Instant::now();
    let mut all: BTreeSet<String> = st.namespaces.iter().cloned().collect();
    all.extend(fabric_namespaces(&st.fabric));
    // One `ip -batch` for all (the kernel frees each namespace's devices asynchronously); on a
    // failure, one by one, so every namespace that can go goes and each failure is named.
    let dels: Vec<String> = all.iter().filter(|ns| netns::exists(ns)).map(|ns| format!("netns del {ns}")).collect();
    if netns::ip_batch(None, &dels).is_err() {
        for ns in &all {
            if let Err(e) = netns::delete(ns) {
                problems.push(e.to_string());
            }
        }
    }
    eprintln!("{}", crate::progress::line_of("down", "namespaces", all.len() as u64, "deleted", started.elapsed()));
    for ns in &all {
        // A NIC agent that was killed leaves its capture mirror ring behind.
        let ring = rocefab_contracts::capture::nic_mirror_shm_path(ns);
        if ring.exists() {
            if let Err(e) = std::fs::remove_file(&ring) {
                problems.push(format!("remove {}: {e}", ring.display()));
            }
        }
    }
    let dir = rundir::dir(&st.fabric);
    if dir.exists() {
        if let Err(e) = std::fs::remove_dir_all(&dir) {
            problems.push(format!("remove {}: {e}", dir.display()));
        }
    }
    if !problems.is_empty() {
        bail!("{}", problems.join("; "));
    }
    Ok(())
}

fn down(name: Option<&str>) -> anyhow::Result<()> {
    require_root()?;
    let fabric = match name {
        Some(n) => n.to_string(),
        None => pick_fabric(None)?,
    };
    let st = match State::load(&fabric) {
        Ok(st) => st,
        Err(e) => {
            let ns = fabric_namespaces(&fabric);
            if ns.is_empty() && !rundir::dir(&fabric).exists() {
                bail!("fabric {fabric} is not running (no {})", rundir::state_path(&fabric).display());
            }
            tracing::warn!("{e}; removing namespaces by name");
            State { fabric: fabric.clone(), ..State::default() }
        }
    };
    // An `up` still bringing it up is asked to stop: it removes what it created (it alone knows
    // the daemon it is spawning right now) and names this process; then whatever is left goes.
    let st = match UpLock::note_down(&fabric) {
        None => st,
        Some(up_pid) => {
            eprintln!("down: fabric {fabric} is being brought up by pid {up_pid}; waiting for it to stop");
            if !UpLock::wait_released(&fabric, UP_STOP_WAIT) {
                tracing::warn!(
                    "rocefab up (pid {up_pid}) did not stop within {} s; removing what its state records",
                    UP_STOP_WAIT.as_secs()
                );
            }
            // Left when up had just succeeded as this asked (it no longer looked).
            let _ = std::fs::remove_file(UpLock::down_path(&fabric));
            match State::load(&fabric) {
                Ok(now) => now,
                Err(_) => State { fabric: fabric.clone(), namespaces: st.namespaces, ..State::default() },
            }
        }
    };
    teardown(&st)?;
    println!("fabric {fabric} is down");
    Ok(())
}

/// How long `down` waits for an `up` it interrupted to stop and remove what it created (FRR's
/// start is the longest step between two checks).
const UP_STOP_WAIT: Duration = Duration::from_secs(60);

/// The lock `rocefab up` holds on a fabric name while it brings the fabric up:
/// `<run base>/<fabric>.up.lock`, `flock`ed, holding up's pid. A second `up` of the same name
/// fails at once naming that pid; a `down` meanwhile leaves its pid in `<fabric>.down-by` for
/// `up` to report. The file is opened close-on-exec, so the daemons `up` starts do not inherit
/// the lock.
struct UpLock {
    path: PathBuf,
    _file: std::fs::File,
}

impl UpLock {
    fn path(fabric: &str) -> PathBuf {
        rundir::base().join(format!("{fabric}.up.lock"))
    }
    fn down_path(fabric: &str) -> PathBuf {
        rundir::base().join(format!("{fabric}.down-by"))
    }

    /// `flock(LOCK_EX | LOCK_NB)` on `f`: whether it was taken.
    fn try_lock(f: &std::fs::File) -> bool {
        use std::os::fd::AsRawFd;
        // SAFETY: flock(2) on a file descriptor this function borrows; no memory is involved.
        unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) == 0 }
    }

    fn take(fabric: &str) -> anyhow::Result<UpLock> {
        let base = rundir::base();
        std::fs::create_dir_all(&base).with_context(|| format!("creating {}", base.display()))?;
        let path = Self::path(fabric);
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .with_context(|| format!("opening {}", path.display()))?;
        if !Self::try_lock(&file) {
            let mut pid = String::new();
            let _ = file.read_to_string(&mut pid);
            let pid = pid.trim();
            bail!(
                "fabric {fabric} is being brought up by pid {} (another rocefab up); wait for it, or `rocefab down {fabric}`",
                if pid.is_empty() { "?" } else { pid }
            );
        }
        file.set_len(0).and_then(|_| write!(file, "{}", std::process::id())).context("writing the up lock")?;
        let _ = std::fs::remove_file(Self::down_path(fabric));
        Ok(UpLock { path, _file: file })
    }

    /// Called by `down`: when an `up` of `fabric` holds the lock, leaves this process's pid for it
    /// and returns up's pid (0 when unreadable).
    fn note_down(fabric: &str) -> Option<u32> {
        let mut f = std::fs::File::open(Self::path(fabric)).ok()?;
        if Self::try_lock(&f) {
            return None;
        }
        let _ = std::fs::write(Self::down_path(fabric), std::process::id().to_string());
        let mut pid = String::new();
        let _ = f.read_to_string(&mut pid);
        Some(pid.trim().parse().unwrap_or(0))
    }

    /// Waits up to `limit` for the `up` holding `fabric`'s lock to release it: whether it did.
    fn wait_released(fabric: &str, limit: Duration) -> bool {
        let end = Instant::now() + limit;
        loop {
            // `up` removes the file as it releases the lock: gone or lockable is released.
            match std::fs::File::open(Self::path(fabric)) {
                Err(_) => return true,
                Ok(f) if Self::try_lock(&f) => return true,
                Ok(_) => {}
            }
            if Instant::now() >= end {
                return false;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Inside `up`: fails with the asking `down`'s pid once a `rocefab down` of `fabric` asked.
    fn check_not_taken_down(fabric: &str) -> anyhow::Result<()> {
        match std::fs::read_to_string(Self::down_path(fabric)) {
            Ok(pid) => bail!("taken down by rocefab down, pid {}", pid.trim()),
            Err(_) => Ok(()),
        }
    }

    /// The pid of the `rocefab down` that took `fabric` down while this `up` held the lock.
    fn taken_down_by(fabric: &str) -> Option<u32> {
        let pid = std::fs::read_to_string(Self::down_path(fabric)).ok()?.trim().parse().ok();
        let _ = std::fs::remove_file(Self::down_path(fabric));
        pid
    }
}

impl Drop for UpLock {
    fn drop(&mut self) {
        // Removed while still held: a later `up` makes a new one.
        let _ = std::fs::remove_file(&self.path);
    }
}

fn status(name: Option<&str>, json: bool) -> anyhow::Result<()> {
    let fabric = pick_fabric(name)?;
    let st = State::load(&fabric)?;
    let alive = |d: &DaemonState| d.pid.is_some_and(|p| pid_alive(p) && is_our_daemon(p, &d.config));
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

fn exec(name: Option<&str>, node: &str, cmd: &[String]) -> anyhow::Result<i32> {
    let fabric = pick_fabric(name)?;
    let ns = netns_name(&fabric, node);
    if !netns::exists(&ns) {
        bail!("fabric {fabric} has no node {node} (namespace {ns} does not exist)");
    }
    let mut c = Command::new("ip");
    c.args(["netns", "exec", &ns]).args(cmd);
    // On a switch that runs FRR, `vtysh` on the PATH is the one that reaches its daemons
    // ([`crate::frr::vtysh_wrapper`]).
    let wrapper = crate::frr::wrapper_dir(&fabric, node);
    if wrapper.join("vtysh").exists() {
        let path = std::env::var_os("PATH").unwrap_or_default();
        let mut dirs = vec![wrapper];
        dirs.extend(std::env::split_paths(&path));
        c.env("PATH", std::env::join_paths(dirs).context("PATH")?);
    }
    let status = c.status().with_context(|| format!("ip netns exec {ns} {}", cmd.join(" ")))?;
    Ok(status.code().unwrap_or_else(|| 128 + status.signal().unwrap_or(0)))
}

/// `rocefab vtysh`: vtysh inside switch `switch`'s namespace, on its own FRR daemons.
fn vtysh(name: Option<&str>, switch: &str, args: &[String]) -> anyhow::Result<i32> {
    let fabric = pick_fabric(name)?;
    let st = State::load(&fabric)?;
    let switches: Vec<&str> = st.daemons.iter().filter(|d| !d.is_host()).map(|d| d.node()).collect();
    if !switches.contains(&switch) {
        bail!("fabric {fabric} has no switch {switch} (switches: {})", switches.join(", "));
    }
    if !crate::frr::dir(&fabric, switch).join("zebra.pid").exists() {
        bail!(
            "switch {switch} of fabric {fabric} runs no FRR: vtysh needs a fabric with `routing: bgp` \
             (this one routes statically; `rocefab routes {fabric} {switch}` shows its routes)"
        );
    }
    let mut cmd = vec!["vtysh".to_string()];
    cmd.extend(crate::frr::vtysh_args(&fabric, switch));
    cmd.extend(args.iter().cloned());
    exec(Some(&fabric), switch, &cmd)
}

fn send(a: &SendArgs) -> anyhow::Result<()> {
    let fabric = pick_fabric(a.fabric.as_deref().or(a.fabric_option.as_deref()))?;
    let st = State::load(&fabric)?;
    let topo = Topology::load(&st.topology)?;
    let plan = compile(&topo, 0);
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

fn uplinks(name: Option<&str>) -> anyhow::Result<()> {
    let fabric = pick_fabric(name)?;
    let st = State::load(&fabric)?;
    let topo = Topology::load(&st.topology)?;
    let plan = compile(&topo, 0);
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
    println!("fabric {fabric}: ECMP ports (rail and spine uplinks, super-spine downlinks), counted since `rocefab up`");
    print!("{}", render_uplinks(&uplink_ports(&topo, &plan), &counters));
    Ok(())
}

fn print_plan(path: &Path, json: bool) -> anyhow::Result<()> {
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
    let run = crate::rundir::dir(&plan.fabric).join("frr");
    for (name, text) in crate::frr::configs(topo, plan, &run.display().to_string()) {
        let _ =
            writeln!(o, "\nFRR configuration of {name} ({}/frr.conf):", crate::frr::dir(&plan.fabric, &name).display());
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::ExitStatus;

    /// Issue 40: exec, vtysh and send name the fabric as the other commands do, first and
    /// optional; `--fabric` still parses, but not beside a positional fabric.
    #[test]
    fn exec_vtysh_and_send_take_the_fabric_first_as_every_command_does() {
        use clap::Parser;
        #[derive(Parser)]
        struct Cli {
            #[command(subcommand)]
            c: FabricCmd,
        }
        let parse =
            |line: &[&str]| Cli::try_parse_from(std::iter::once("rocefab").chain(line.iter().copied())).map(|c| c.c);
        let words = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let Ok(FabricCmd::Exec { at, fabric_option, cmd }) = parse(&["exec", "rs", "host1", "--", "ip", "-br", "a"])
        else {
            panic!("exec")
        };
        assert_eq!(
            (at.clone(), fabric_option.clone(), cmd),
            (words(&["rs", "host1"]), None, words(&["ip", "-br", "a"]))
        );
        assert_eq!(fabric_and_node(&at, None, "NODE").unwrap(), (Some("rs"), "host1"));
        let Ok(FabricCmd::Exec { at, fabric_option, .. }) = parse(&["exec", "host1", "--", "true"]) else { panic!() };
        assert_eq!(fabric_and_node(&at, fabric_option.as_deref(), "NODE").unwrap(), (None, "host1"));
        let Ok(FabricCmd::Exec { at, fabric_option, .. }) = parse(&["exec", "--fabric", "rs", "host1", "--", "true"])
        else {
            panic!()
        };
        assert_eq!(fabric_and_node(&at, fabric_option.as_deref(), "NODE").unwrap(), (Some("rs"), "host1"));
        let Ok(FabricCmd::Exec { at, fabric_option, .. }) =
            parse(&["exec", "--fabric", "rs", "rs", "host1", "--", "true"])
        else {
            panic!()
        };
        let e = fabric_and_node(&at, fabric_option.as_deref(), "NODE").unwrap_err().to_string();
        assert_eq!(e, "the fabric is named twice (\"rs\" and --fabric \"rs\"): give it once, first: [FABRIC] NODE");
        assert!(parse(&["exec", "rs", "host1", "x", "--", "true"]).is_err(), "three words before --");
        // vtysh: the words before vtysh's first option.
        let Ok(FabricCmd::Vtysh { args, .. }) = parse(&["vtysh", "rs", "rail1", "-c", "show bgp summary"]) else {
            panic!("vtysh")
        };
        assert_eq!(args, words(&["rs", "rail1", "-c", "show bgp summary"]));
        let Ok(FabricCmd::Send(a)) = parse(&["send", "rs", "--from", "host1:gpu0", "--to", "host2:gpu0"]) else {
            panic!("send")
        };
        assert_eq!((a.fabric.as_deref(), a.fabric_option.as_deref()), (Some("rs"), None));
        let Ok(FabricCmd::Send(a)) = parse(&["send", "--fabric", "rs", "--from", "host1:gpu0", "--to", "host2:gpu0"])
        else {
            panic!("send --fabric")
        };
        assert_eq!((a.fabric.as_deref(), a.fabric_option.as_deref()), (None, Some("rs")));
        assert!(parse(&["send", "rs", "--fabric", "rs", "--from", "h:g", "--to", "h:g"]).is_err(), "named twice");
    }

    fn shipped_plan(file: &str) -> crate::plan::Plan {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../topologies").join(file);
        crate::plan::compile(&Topology::load(&path).unwrap(), 0)
    }

    #[test]
    fn a_restored_link_end_gets_back_the_routes_up_gave_it() {
        let plan = shipped_plan("dual-port.yaml");
        let (ns, lines) = relink_lines(&plan, "host1:gpu0p0").unwrap();
        assert_eq!(ns, "rf-dp-host1");
        assert_eq!(
            lines,
            [
                "route replace 10.0.1.0/24 via 10.0.1.254 dev gpu0p0 src 10.0.1.1 onlink",
                "route replace 10.0.1.0/24 via 10.0.1.254 dev gpu0p0 src 10.0.1.1 onlink table 101",
                "route replace default via 10.0.1.254 dev gpu0p0 src 10.0.1.1 onlink table 101",
                &format!(
                    "neigh replace 10.0.1.254 lladdr {} dev gpu0p0 nud permanent",
                    plan.hosts[0].nics[0].gateway_mac
                ),
            ]
        );
        // Every line is one `up` gave the interface, and only rules and addresses are left out.
        let (_, up, _) = host_setup(&plan.hosts[0]);
        assert!(lines.iter().all(|l| up.contains(l)), "{lines:?} not all in {up:?}");
        // A rail switch's port to a GPU gets the GPU's /32 again (the rail subnet is shared by
        // its host ports); a port to a spine (a /31) has no route to put back. Neighbours come
        // back by ARP, as on a switch.
        let (ns, lines) = relink_lines(&plan, "rail1a:eth1").unwrap();
        assert_eq!(
            (ns.as_str(), lines.as_slice()),
            ("rf-dp-rail1a", ["route replace 10.0.1.1/32 dev eth1 src 10.0.1.254".to_string()].as_slice())
        );
        assert!(switch_setup(&plan.switches[0]).1.contains(&lines[0]));
        assert_eq!(relink_lines(&plan, "rail1a:eth5").unwrap().1, Vec::<String>::new());
        assert_eq!(relink_lines(&plan, "host9:gpu0p0"), None);
        assert_eq!(relink_lines(&plan, "host1:gpu7"), None);
        assert_eq!(relink_lines(&plan, "spine1"), None);
    }

    #[test]
    fn an_ended_daemon_is_described_by_code_or_signal() {
        assert_eq!(
            crate::process::describe_exit(ExitStatus::from_raw(1 << 8), || unreachable!()),
            "exited with code 1"
        );
        let oom = crate::process::describe_exit(ExitStatus::from_raw(libc::SIGKILL), || Some(true));
        assert!(oom.starts_with("was killed by signal 9 (SIGKILL): the kernel's OOM killer ended it"), "{oom}");
        let maybe = crate::process::describe_exit(ExitStatus::from_raw(libc::SIGKILL), || None);
        assert!(maybe.contains("if nobody sent it") && maybe.contains("dmesg"), "{maybe}");
        let segv = crate::process::describe_exit(ExitStatus::from_raw(libc::SIGSEGV), || {
            panic!("only SIGKILL asks the kernel log")
        });
        assert_eq!(segv, "was killed by signal 11 (SIGSEGV)");
    }

    #[test]
    fn a_child_killed_by_sigkill_is_reaped_and_named() {
        /// Blocks until `pid` has ended, leaving it unreaped (WNOWAIT) for `how_it_ended`.
        fn wait_unreaped(pid: u32) {
            // SAFETY: a zeroed siginfo_t is a valid out-parameter; waitid only writes into it.
            let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
            // SAFETY: `info` outlives the call; P_PID with our child's pid touches no other process.
            let r = unsafe { libc::waitid(libc::P_PID, pid, &mut info, libc::WEXITED | libc::WNOWAIT) };
            assert_eq!(r, 0, "waitid: {}", std::io::Error::last_os_error());
        }
        // Real children of this process that end as a killed or failing daemon would.
        #[expect(
            clippy::zombie_processes,
            reason = "how_it_ended reaps it with waitpid, as rocefab up does its daemons"
        )]
        let child = Command::new("sh").args(["-c", "kill -9 $$"]).spawn().expect("spawn sh");
        wait_unreaped(child.id());
        let why = how_it_ended(child.id());
        assert!(why.starts_with("was killed by signal 9 (SIGKILL)"), "{why}");
        #[expect(clippy::zombie_processes, reason = "how_it_ended reaps it with waitpid")]
        let child = Command::new("sh").args(["-c", "exit 3"]).spawn().expect("spawn sh");
        wait_unreaped(child.id());
        assert_eq!(how_it_ended(child.id()), "exited with code 3");
        assert!(how_it_ended(1).contains("not a child"));
    }
}

#[cfg(test)]
mod status_tests {
    use super::*;

    fn daemon(kind: &str, node: &str, port: u16) -> DaemonState {
        crate::rundir::test_daemon("t", kind, node, port)
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
