//! `up` and `down`.
//!
//! `up` turns a topology file into namespaces `rf-<fabric>-<node>`, veth pairs created directly
//! in their namespaces (names, MACs and MTU set atomically, nothing ever lives in the root
//! namespace), addresses, host policy routing, static neighbours, offloads off, one
//! `rocefab-switchd` per switch and, unless `lldp.enabled` or `lldp.nic_agent` is false, one
//! `rocefab-nicd` per host (its GPU NICs' LLDP/DCBX agent). Every resource is recorded in `state.json` before it is
//! created, so `down` (or a failing `up`) removes exactly what was made, even after a crash.
use std::collections::BTreeSet;
use std::fs::OpenOptions;
use std::io::{Read, Write};
use std::net::{Ipv4Addr, TcpListener};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context};

use crate::fabric::daemons::{
    daemon_pids, locate_nicd, locate_switchd, pid_alive, start_daemon, start_shared_switchd, wait_ready,
};
use crate::fabric::netns;
use crate::fabric::pick_fabric;
use crate::fabric::rundir::{self, DaemonState, EmulatedClock, LinkState, State, KIND_HOST, KIND_SWITCH};
use crate::plan::{compile, Plan};
use crate::progress::Phase;
use crate::topology::Topology;

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
pub fn print_warnings(topo: &Topology) {
    for w in topo.qos.iter().flat_map(|q| &q.warnings) {
        eprintln!("warning: {}: {w}", topo.file.display());
    }
}

/// How long `up` waits for its daemons by default: 20 s, plus 1 s per daemon.
pub fn default_up_timeout(switches: usize, agents: usize) -> Duration {
    Duration::from_secs(20 + (switches + agents) as u64)
}

pub fn up(path: &Path, timeout: Option<Duration>, switch_workers: Option<u16>) -> anyhow::Result<()> {
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
    crate::fabric::frontend::check(&fabric, &nodes, &backend)
        .map_err(|e| anyhow!("rocefab up {}: {e}", path.display()))?;
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
        switch_workers,
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

/// Waits for every daemon in `ds` ([`wait_ready`]), stepping `phase` as each answers.
/// `shared`: they run in one process, whose own log has its last words.
#[allow(clippy::too_many_arguments)]
fn wait_all_ready<'a>(
    fabric: &str,
    ds: impl Iterator<Item = &'a DaemonState>,
    url: impl Fn(&DaemonState) -> String,
    what: &str,
    deadline: Instant,
    timeout: Duration,
    shared: bool,
    phase: &Phase,
) -> anyhow::Result<()> {
    for d in ds {
        let process_log = shared.then(|| crate::fabric::daemons::shared_switch_log(&d.log));
        let go_on = || UpLock::check_not_taken_down(fabric);
        wait_ready(d, &url(d), what, deadline, timeout, process_log.as_deref(), &go_on)?;
        phase.step();
    }
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
    //    The frontend bridge's namespace too (crate::fabric::frontend).
    let fe = crate::fabric::frontend::netns(&plan.fabric);
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
        .chain(crate::fabric::frontend::veth_lines(&fe, &host_ns))
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
            b.extend(crate::fabric::frontend::host_lines(i));
            (ns, b, ifs)
        })
        .collect();
    jobs.extend(plan.switches.iter().map(switch_setup));
    jobs.push((fe.as_str(), crate::fabric::frontend::bridge_lines(plan.hosts.len()), Vec::new()));
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

    // 4. Switch daemons, each recorded before it is spawned; then wait for their metrics. With
    //    shared workers (the default), one process runs them all: each switch's lines in its
    //    own log, the process's in `switches.log`.
    let dir = rundir::dir(&plan.fabric);
    let deadline = Instant::now() + timeout;
    let phase = Phase::start("switch daemons", plan.switches.len());
    let shared = st.switch_workers;
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
        if shared.is_some() {
            st.daemons.push(d);
            st.save()?;
        } else {
            start_daemon(st, d, daemons.switchd).with_context(|| format!("starting the daemon of {}", s.name))?;
        }
    }
    if let Some(workers) = shared {
        start_shared_switchd(st, daemons.switchd, workers)?;
    }
    wait_all_ready(
        &plan.fabric,
        st.daemons.iter().filter(|d| !d.is_host()),
        |d| d.metrics_url.clone(),
        "rocefab-switchd",
        deadline,
        timeout,
        shared.is_some(),
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
            false,
            &phase,
        )?;
        phase.finish("ready");
    }
    // 6. With `routing: bgp`: FRR (zebra, bgpd, bfdd) in every switch namespace; the switch
    //    daemons take the routes it installs from the kernel (crate::fabric::frr).
    if topo.routing == crate::topology::Routing::Bgp {
        UpLock::check_not_taken_down(&plan.fabric)?;
        let phase = Phase::start("FRR", plan.switches.len());
        crate::fabric::frr::start(topo, plan)?;
        phase.all_done();
        phase.finish("started");
        // Usable once every switch's data path routes as static routing would (sessions up,
        // every rail advertised and installed): a job started before would miss routes.
        let phase = Phase::start("BGP switches", plan.switches.len());
        let limit = Duration::from_secs(60 + plan.switches.len() as u64);
        match crate::fabric::routing::wait_converged(st, topo, limit, std::time::Instant::now())? {
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

/// Stops the daemons (SIGTERM, SIGKILL after 5 s), deletes the namespaces (which removes their
/// veths) and the run directory.
fn teardown(st: &State) -> anyhow::Result<()> {
    use nix::sys::signal::{kill, Signal};
    use nix::unistd::Pid;
    // FRR first (`routing: bgp`): its pid files are in the run directory.
    let mut problems = crate::fabric::frr::stop_all(&st.fabric, &st.namespaces);
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

pub fn down(name: Option<&str>) -> anyhow::Result<()> {
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
pub struct UpLock {
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

fn require_root() -> anyhow::Result<()> {
    if !nix::unistd::geteuid().is_root() {
        bail!("this command manipulates network namespaces and needs root");
    }
    Ok(())
}

/// The namespaces of `fabric` that exist now.
fn fabric_namespaces(fabric: &str) -> Vec<String> {
    let prefix = crate::plan::netns_name(fabric, "");
    netns::list().into_iter().filter(|n| n.starts_with(&prefix)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
