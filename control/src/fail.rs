//! Failures on a running fabric (book ch. 10-11: what a cut link does to a training job), and the
//! fabric's event log.
//!
//! * `rocefab fail link [FABRIC] <NODE:PORT> [--for DURATION]` cuts a cable: both ends of the veth
//!   go down at once (no frame crosses in either direction, the carrier goes at both switches).
//!   With static routing each switch's link watch (`dataplane-user`'s `carrier`) removes the port
//!   from its ECMP groups as soon as the kernel reports the carrier loss; the command waits until
//!   both ends' switches have (their `rocefab_port_carrier` gauge reads 0) and says how long that
//!   took. `--for` restores the link after that long (emulated time, so D × it of wall clock).
//!   `--flap P --for D` takes it down and up every P for D, each change an event.
//! * `rocefab restore link [FABRIC] <NODE:PORT>` puts the cable back; the groups take the port
//!   back when the carrier returns.
//! * `rocefab events [FABRIC] [--json]`: every failure and restore, with its emulated time (the
//!   fabric's clock, docs/src/emulated-time.md) and its wall-clock time. The log is
//!   `<run dir>/events.jsonl`, one JSON object per line.
use std::io::Write;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context};
use serde::{Deserialize, Serialize};

use crate::fabric::routing::{cut_links, wait_converged};
use crate::fabric::rundir::{self, LinkState, State};
use crate::fabric::Fabric;

/// `rocefab fail ...`.
#[derive(clap::Subcommand, Debug)]
pub enum FailCmd {
    /// Cut a link: both ends down at once; `--for` restores it after that long (emulated);
    /// `--flap P --for D` takes it down and up every P for D.
    #[command(override_usage = "rocefab fail link [FABRIC] <NODE:PORT> [--for DURATION [--flap PERIOD]]")]
    Link(FailLinkArgs),
    /// A GPU NIC misbehaves: `--pfc-storm` (it sends PFC pauses without pause, as a stuck NIC
    /// does) or `--down` (its port goes down, as `fail link` of its cable).
    #[command(
        override_usage = "rocefab fail nic [FABRIC] <HOST:NIC> (--pfc-storm --for DURATION [--priority P] | --down [--for DURATION])"
    )]
    Nic(NicArgs),
    /// A switch goes away: its daemon stops and every cable to it goes dark; `--for` brings it
    /// back after that long (emulated).
    #[command(override_usage = "rocefab fail switch [FABRIC] <SWITCH> [--for DURATION]")]
    Switch(SwitchArgs),
}

/// `rocefab fail switch`, `rocefab restore switch`.
#[derive(clap::Args, Debug, Clone)]
pub struct SwitchArgs {
    /// `[FABRIC] SWITCH`.
    #[arg(num_args = 1..=2, required = true)]
    pub args: Vec<String>,
    /// Restore it after this long, emulated.
    #[arg(long = "for", value_parser = crate::text::parse_emulated_ns)]
    pub for_ns: Option<u64>,
}

/// `rocefab fail nic`.
#[derive(clap::Args, Debug, Clone)]
pub struct NicArgs {
    /// `[FABRIC] HOST:NIC`, e.g. `host2:gpu0`.
    #[arg(num_args = 1..=2, required = true)]
    pub args: Vec<String>,
    /// Send PFC frames pausing `--priority` for the longest time (65535 quanta), refreshed at
    /// half that time, for `--for` (required: the storm is bounded).
    #[arg(long, conflicts_with = "down", requires = "for_ns")]
    pub pfc_storm: bool,
    /// The priority the storm pauses.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u8).range(0..=7))]
    pub priority: u8,
    /// Take the NIC's port down (both ends of its cable).
    #[arg(long)]
    pub down: bool,
    /// How long, emulated (`500ms`, `2s`).
    #[arg(long = "for", value_parser = crate::text::parse_emulated_ns)]
    pub for_ns: Option<u64>,
}

/// `rocefab restore ...`.
#[derive(clap::Subcommand, Debug)]
pub enum RestoreCmd {
    /// Put a cut link back.
    #[command(override_usage = "rocefab restore link [FABRIC] <NODE:PORT>")]
    Link(LinkArgs),
    /// Bring a failed switch back: its cables, its daemon, the routes through it.
    #[command(override_usage = "rocefab restore switch [FABRIC] <SWITCH>")]
    Switch(SwitchArgs),
}

/// A link, by one of its ends.
#[derive(clap::Args, Debug, Clone)]
pub struct LinkArgs {
    /// `[FABRIC] NODE:PORT`: the fabric (optional when one is running) and either end of the
    /// link, e.g. `rail1:eth5` or `host2:gpu0`.
    #[arg(num_args = 1..=2, required = true)]
    pub args: Vec<String>,
}

/// `rocefab fail link`.
#[derive(clap::Args, Debug, Clone)]
pub struct FailLinkArgs {
    #[command(flatten)]
    pub link: LinkArgs,
    /// Restore the link after this long, emulated (`20ms`, `2s`); without it the link stays
    /// down until `rocefab restore link`. With `--flap`: how long the flapping lasts.
    #[arg(long = "for", value_parser = crate::text::parse_emulated_ns)]
    pub for_ns: Option<u64>,
    /// Flap: the link goes down, comes back after this long, goes down again after as long,
    /// and so on for `--for` (emulated; it ends up).
    #[arg(long, value_parser = crate::text::parse_emulated_ns, requires = "for_ns")]
    pub flap: Option<u64>,
    /// Fail silently: the carrier stays up and both ends drop every frame they receive (a dead
    /// optic that keeps link). Only BFD notices; static routing keeps sending into it.
    #[arg(long, conflicts_with = "flap")]
    pub silent: bool,
}

/// `rocefab events`.
#[derive(clap::Args, Debug, Clone)]
pub struct EventsArgs {
    /// The fabric (optional when one is running).
    pub fabric: Option<String>,
    /// One JSON object per line.
    #[arg(long)]
    pub json: bool,
}

/// One line of the event log.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct Event {
    /// Emulated ns since `rocefab up` began (the fabric's clock).
    pub emulated_ns: u64,
    /// Wall-clock Unix time, ns.
    pub wall_unix_ns: u64,
    /// `link down`, `link up`.
    pub event: String,
    /// What it concerns (`rail1:eth5 -- spine1:eth1`).
    pub target: String,
    /// What was measured or why.
    pub detail: String,
}

/// The log's path.
pub fn log_path(fabric: &str) -> std::path::PathBuf {
    rundir::dir(fabric).join("events.jsonl")
}

/// Appends an event at the wall-clock Unix time `wall` to `fabric`'s log.
pub fn record(st: &State, wall: u64, event: &str, target: &str, detail: String) -> anyhow::Result<Event> {
    let clock = st.clock()?;
    let e = Event {
        emulated_ns: clock.emulated_unix_ns(wall).saturating_sub(clock.zero_unix_ns),
        wall_unix_ns: wall,
        event: event.into(),
        target: target.into(),
        detail,
    };
    append(&log_path(&st.fabric), &e)?;
    Ok(e)
}

/// Appends `e` to the log at `p`.
fn append(p: &std::path::Path, e: &Event) -> anyhow::Result<()> {
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(p)
        .with_context(|| format!("opening {}", p.display()))?;
    writeln!(f, "{}", serde_json::to_string(e)?).with_context(|| format!("writing {}", p.display()))
}

/// The log of `fabric`, oldest first.
pub fn read_log(fabric: &str) -> anyhow::Result<Vec<Event>> {
    read_log_at(&log_path(fabric))
}

/// The log at `p` (none yet: empty); a line that is not an event is an error naming its line.
fn read_log_at(p: &std::path::Path) -> anyhow::Result<Vec<Event>> {
    let text = match std::fs::read_to_string(p) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e).with_context(|| format!("reading {}", p.display())),
    };
    text.lines()
        .enumerate()
        .map(|(i, l)| serde_json::from_str(l).with_context(|| format!("{}:{}: not an event", p.display(), i + 1)))
        .collect()
}

/// The events of `fabric` whose wall-clock time lies in `from..=to` (Unix ns), as lines for a
/// report (`[12.5 ms emulated] link down rail1:eth3 -- spine1:eth1`); unreadable log: nothing.
pub fn events_between(fabric: &str, from: u64, to: u64) -> Vec<String> {
    read_log(fabric)
        .unwrap_or_default()
        .iter()
        .filter(|e| (from..=to).contains(&e.wall_unix_ns))
        .map(|e| format!("{} {} {}", at(e), e.event, e.target))
        .collect()
}

/// The fabric, the link named by `args` (`[FABRIC] NODE:PORT`) and its index.
pub fn find_link(args: &[String]) -> anyhow::Result<(Fabric, LinkState, usize)> {
    let (fabric, end) = match args {
        [end] => (crate::fabric::pick_fabric(None)?, end.clone()),
        [f, end] => (f.clone(), end.clone()),
        _ => bail!("expected [FABRIC] NODE:PORT"),
    };
    let st = crate::fabric::load_state(&fabric)?;
    if !end.contains(':') {
        bail!("{end:?}: name a link by one of its ends, as NODE:PORT (e.g. rail1:eth5)");
    }
    let index = st.links.iter().position(|l| l.a == end || l.b == end).ok_or_else(|| {
        let node = end.split(':').next().unwrap_or_default();
        let ports: Vec<&str> = st
            .links
            .iter()
            .flat_map(|l| [l.a.as_str(), l.b.as_str()])
            .filter(|e| e.split(':').next() == Some(node))
            .collect();
        anyhow!("fabric {fabric} has no link {end} (links of {node}: {})", ports.join(", "))
    })?;
    let link = st.links[index].clone();
    Ok((Fabric::with_state(st)?, link, index))
}

/// The fabric and the switch named by `args` (`[FABRIC] SWITCH`).
fn find_switch(args: &[String]) -> anyhow::Result<(Fabric, String)> {
    let (fabric, name) = crate::cmd::fabric::fabric_and_node(args, None, "SWITCH")?;
    let (fabric, name) = (crate::fabric::pick_fabric(fabric)?, name.to_string());
    let st = crate::fabric::load_state(&fabric)?;
    if !st.daemons.iter().any(|d| !d.is_host() && d.node() == name) {
        let all: Vec<&str> = st.daemons.iter().filter(|d| !d.is_host()).map(|d| d.node()).collect();
        bail!("fabric {fabric} has no switch {name:?} (switches: {})", all.join(", "));
    }
    Ok((Fabric::with_state(st)?, name))
}

/// The links of switch `name`.
fn links_of<'a>(st: &'a State, name: &str) -> Vec<&'a LinkState> {
    st.links.iter().filter(|l| [&l.a, &l.b].iter().any(|e| e.split(':').next() == Some(name))).collect()
}

/// `rocefab fail switch`: its cables dark (every neighbour sees the carrier go), its daemon
/// stopped, the routes recomputed without it and pushed to every other switch.
fn fail_switch(a: &SwitchArgs) -> anyhow::Result<()> {
    let (mut f, name) = find_switch(&a.args)?;
    if f.st.failed_switches.contains(&name) {
        bail!("switch {name} has already failed; `rocefab restore switch {name}` brings it back");
    }
    let links: Vec<LinkState> = links_of(&f.st, &name).into_iter().cloned().collect();
    let mut first = None;
    for l in &links {
        let c = set_link(l, false)?;
        first.get_or_insert(c);
    }
    let first = first.unwrap_or(Changed { at: Instant::now(), unix_ns: rundir::unix_now_ns() });
    let (wall, since) = (first.unix_ns, first.at);
    crate::fabric::daemons::stop_switch_daemon(&mut f.st, &name)?;
    f.st.failed_switches.push(name.clone());
    for l in &links {
        flush_dead_rings(&f, l)?;
    }
    f.st.failed_switches.retain(|s| *s != name);
    let ns = crate::plan::netns_name(&f.st.fabric, &name);
    let problems = crate::fabric::frr::stop_only(&f.st.fabric, Some(&name), &[ns]);
    if !problems.is_empty() {
        bail!("stopping {name}'s FRR: {}", problems.join("; "));
    }
    f.st.failed_switches.push(name.clone());
    f.st.save()?;
    let detail =
        format!("daemon stopped, {} links dark; {}", links.len(), reroute(&f, "without it", since, "the failure")?);
    let e = record(&f.st, wall, "switch down", &name, detail.clone())?;
    println!("{} switch {name} down: {detail}", at(&e));
    if let Some(ns) = a.for_ns {
        std::thread::sleep(Duration::from_nanos(f.st.clock()?.dilation().duration(ns)));
        restore_switch(&mut f, &name)?;
    }
    Ok(())
}

/// `rocefab restore switch`: its cables back, its daemon started with its configuration, then
/// the routes with it pushed to every switch (it too gets the fabric's routes of now).
fn restore_switch(f: &mut Fabric, name: &str) -> anyhow::Result<()> {
    if !f.st.failed_switches.iter().any(|s| s == name) {
        bail!("switch {name} has not failed");
    }
    let wall = rundir::unix_now_ns();
    let since = Instant::now();
    let links: Vec<LinkState> = links_of(&f.st, name).into_iter().cloned().collect();
    let relink = Relink::new(&f.topo);
    for l in links.iter().filter(|l| !f.st.failed_links.iter().any(|&i| f.st.links[i] == **l)) {
        relink.up(l)?;
    }
    crate::fabric::daemons::start_switch_daemon(&mut f.st, name)?;
    if f.bgp() {
        crate::fabric::frr::start_only(&f.topo, &relink.plan, Some(name))?;
    }
    f.st.failed_switches.retain(|s| s != name);
    f.st.save()?;
    let detail = format!("daemon ready; {}", reroute(f, "with it", since, "the restore")?);
    let e = record(&f.st, wall, "switch up", name, detail.clone())?;
    println!("{} switch {name} up: {detail}", at(&e));
    Ok(())
}

/// How the fabric takes a change: static routing pushes recomputed routes; BGP converges by
/// itself (BFD, withdrawals, zebra, the switches' FIB watch), and this waits for it. The line
/// that says how long it took, counted from the change itself (`since`, taken just before the
/// links or the switch were touched; `from` names it), not from when the switches noticed.
fn reroute(f: &Fabric, with: &str, since: Instant, from: &str) -> anyhow::Result<String> {
    if f.bgp() {
        let limit =
            Duration::from_nanos(f.st.clock()?.dilation().duration(10_000_000_000)).max(Duration::from_secs(30));
        return Ok(match wait_converged(&f.st, &f.topo, limit, since)? {
            Some(t) => format!(
                "BGP converged {with} in {:.1} ms from {from} (every switch's data path, wall clock)",
                t.as_secs_f64() * 1e3
            ),
            None => format!("BGP had not converged {with} {:.0} s after {from}", limit.as_secs_f64()),
        });
    }
    push_routes(f)?;
    Ok(format!(
        "routes {with} pushed to every switch in {:.1} ms from {from} (wall clock)",
        since.elapsed().as_secs_f64() * 1e3
    ))
}

/// Static routing's recomputation: the fabric's routes and ECMP groups without the cut links
/// (`st.failed_links`), pushed to every switch (`PUT /routes`), as the controller of a static
/// fabric does. A switch that only lost a member to carrier fixes that itself; one that routes
/// through a neighbour that lost its way (rail2 sending rail1's traffic to a spine cut from
/// rail1) needs this. How long it took, wall clock.
fn push_routes(f: &Fabric) -> anyhow::Result<Duration> {
    let t0 = Instant::now();
    let st = &f.st;
    let failed = cut_links(st);
    let plan = crate::plan::compile_without(&f.topo, 0, &failed);
    for sw in plan.switches.iter().filter(|s| !st.failed_switches.contains(&s.name)) {
        let d = st
            .daemons
            .iter()
            .find(|d| !d.is_host() && d.node() == sw.name)
            .ok_or_else(|| anyhow!("fabric {}: no daemon for switch {}", st.fabric, sw.name))?;
        let body = serde_json::json!({ "groups": sw.config.groups, "routes": sw.config.routes });
        crate::fabric::daemon_http::http_request(
            "PUT",
            &d.url("/routes"),
            Some(&serde_json::to_vec(&body)?),
            Duration::from_secs(5),
        )
        .with_context(|| format!("pushing the routes to {}", sw.name))?;
    }
    Ok(t0.elapsed())
}

/// What a restored link's ends get back: the routes the kernel flushed when their interfaces
/// went down (a host's policy routes and its gateway's neighbour entry, a switch port's /32 to
/// its GPU; `fabric::relink_lines`). Without them a host's kernel traffic from a restored port
/// (`rocefab ping`) left through another port, or not at all.
struct Relink {
    plan: crate::plan::Plan,
}

impl Relink {
    /// The fabric's plan from its topology, computed once for every link put back.
    fn new(topo: &crate::topology::Topology) -> Relink {
        Relink { plan: crate::plan::compile(topo, 0) }
    }

    /// Sets both ends of `l` up and gives them back their routes and neighbours.
    fn up(&self, l: &LinkState) -> anyhow::Result<Changed> {
        let changed = set_link(l, true)?;
        for end in [&l.a, &l.b] {
            if let Some((ns, lines)) = crate::fabric::lifecycle::relink_lines(&self.plan, end) {
                crate::fabric::netns::ip_batch(Some(&ns), &lines).with_context(|| format!("routes of {end}"))?;
            }
        }
        Ok(changed)
    }
}

/// When a link's ends were changed: the instant just before the first end's change, on the
/// monotonic and the Unix clock.
#[derive(Clone, Copy, Debug)]
pub struct Changed {
    pub at: Instant,
    pub unix_ns: u64,
}

/// After a cut that its switches have seen: the kernel takes nothing from the AF_XDP TX ring of
/// a down interface, so what a switch had put there in the moment before it saw the carrier go
/// (237 frames seen) would go out when the link came back, seconds late. Each switch end is
/// brought up alone (the other end is down: no carrier), its switch empties that ring into the
/// dead link (the kernel drops what it takes from an interface without carrier, as a dead cable
/// loses it; `rocefab_port_tx_ring_frames` reads 0), and it goes down again. The switch has no
/// carrier throughout, so it puts nothing more there.
///
/// Not with `routing: bgp`: zebra would see the interface come and go, and BGP converged 2 s
/// later than without it. There a frame on a ring at the cut can still arrive after the
/// restore.
fn flush_dead_rings(f: &Fabric, l: &LinkState) -> anyhow::Result<()> {
    if f.bgp() {
        return Ok(());
    }
    // Only once a switch itself has seen the carrier go does it stop filling the ring.
    let seen = wait_ports(&f.st, l, "rocefab_port_carrier", false, Duration::from_secs(5), Instant::now());
    if let Some((end, _)) = seen.iter().find(|(_, t)| t.is_none()) {
        bail!("{end}: its switch did not report the carrier loss within 5 s");
    }
    for (ns, end) in [(&l.a_netns, &l.a), (&l.b_netns, &l.b)] {
        if switch_daemon(&f.st, end).is_none() {
            continue;
        }
        set_end(ns, end, true)?;
        wait_tx_ring_empty(&f.st, end, Duration::from_secs(2));
        set_end(ns, end, false)?;
    }
    Ok(())
}

/// The running switch daemon at `end` (`node:port`), if `end` is a switch's port.
fn switch_daemon<'a>(st: &'a State, end: &str) -> Option<&'a rundir::DaemonState> {
    let (node, _) = end.split_once(':')?;
    if st.failed_switches.iter().any(|s| s == node) {
        return None;
    }
    st.daemons.iter().find(|d| !d.is_host() && d.node() == node)
}

/// Cuts or restores the cable `l` in-process (`SIOCSIFFLAGS` in each end's namespace, from a
/// thread that entered it; a spawned `ip` made the change 3-19 ms after the time reported):
/// both ends down or up at once, each end's daemon hearing of it from its own interface's
/// change (an end left up would hear of its lost carrier through the kernel's linkwatch, seen
/// 200 ms late on a busy machine). The instant of the change. A cut is followed by
/// [`flush_dead_rings`].
fn set_link(l: &LinkState, up: bool) -> anyhow::Result<Changed> {
    let state = if up { "up" } else { "down" };
    let ends = [(&l.a_netns, &l.a), (&l.b_netns, &l.b)];
    let go = std::sync::Barrier::new(ends.len() + 1);
    let changed: Vec<anyhow::Result<Changed>> = std::thread::scope(|sc| {
        let threads: Vec<_> = ends
            .iter()
            .map(|&(ns, end)| {
                let go = &go;
                sc.spawn(move || {
                    let entered = crate::fabric::netns::enter(ns);
                    go.wait();
                    entered.with_context(|| format!("setting {end} {state}"))?;
                    let ifname = end.split_once(':').map_or(end.as_str(), |x| x.1);
                    let t = Changed { at: Instant::now(), unix_ns: rundir::unix_now_ns() };
                    rocefab_plumbing::link::set_admin_up(ifname, up)
                        .with_context(|| format!("setting {end} {state} in namespace {ns}"))?;
                    Ok(t)
                })
            })
            .collect();
        go.wait();
        threads
            .into_iter()
            .map(|t| t.join().unwrap_or_else(|_| Err(anyhow!("setting a link end {state}: panicked"))))
            .collect()
    });
    let changed = changed.into_iter().collect::<anyhow::Result<Vec<_>>>()?;
    Ok(changed.into_iter().min_by_key(|c| c.at).expect("two ends"))
}

/// Sets the interface of `end` (`node:ifname`) in namespace `ns` up or down; the instant just
/// before.
fn set_end(ns: &str, end: &str, up: bool) -> anyhow::Result<Changed> {
    let state = if up { "up" } else { "down" };
    std::thread::scope(|sc| {
        sc.spawn(|| {
            crate::fabric::netns::enter(ns).with_context(|| format!("setting {end} {state}"))?;
            let ifname = end.split_once(':').map_or(end, |x| x.1);
            let t = Changed { at: Instant::now(), unix_ns: rundir::unix_now_ns() };
            rocefab_plumbing::link::set_admin_up(ifname, up)
                .with_context(|| format!("setting {end} {state} in namespace {ns}"))?;
            Ok(t)
        })
        .join()
        .unwrap_or_else(|_| Err(anyhow!("setting {end} {state}: panicked")))
    })
}

/// Waits (polling its metrics every 2 ms, at most `limit`) until the switch at `end` has no
/// frame left on the port's TX ring. An end that is not a running switch has nothing to wait
/// for. Frames still there at the limit go out with the carrier, late: said on stderr.
fn wait_tx_ring_empty(st: &State, end: &str, limit: Duration) {
    let (Some(d), Some((_, port))) = (switch_daemon(st, end), end.split_once(':')) else { return };
    let t0 = Instant::now();
    let mut left = None;
    while t0.elapsed() < limit {
        if let Ok(text) = crate::fabric::daemon_http::scrape(&d.metrics_url, Duration::from_millis(500)) {
            let n = crate::fabric::daemon_http::port_counter(&text, "rocefab_port_tx_ring_frames", port);
            if n == 0 {
                return;
            }
            left = Some(n);
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    match left {
        Some(n) => eprintln!(
            "rocefab: {end} still held {n} frames on its TX ring {} ms after it came up without carrier; they go out late",
            limit.as_millis()
        ),
        None => eprintln!("rocefab: could not read {end}'s TX ring from {}", d.metrics_url),
    }
}

/// Polls the switches at the ends of `l` until each reports its port's `gauge` (by port) as
/// `up` (1) or not (0), within `limit` of `since` (the change); how long after it each did, by
/// end (hosts and failed switches have no switch daemon and are left out).
fn wait_ports(
    st: &State,
    l: &LinkState,
    gauge: &str,
    up: bool,
    limit: Duration,
    since: Instant,
) -> Vec<(String, Option<Duration>)> {
    let t0 = since;
    let ends: Vec<(String, String, String)> = [&l.a, &l.b]
        .into_iter()
        .filter_map(|end| {
            let d = switch_daemon(st, end)?;
            let port = end.split_once(':')?.1;
            Some((end.clone(), port.to_string(), d.metrics_url.clone()))
        })
        .collect();
    let mut seen: Vec<Option<Duration>> = vec![None; ends.len()];
    while seen.iter().any(Option::is_none) && t0.elapsed() < limit {
        for (i, (_, port, url)) in ends.iter().enumerate() {
            if seen[i].is_some() {
                continue;
            }
            let Ok(text) = crate::fabric::daemon_http::scrape(url, Duration::from_millis(500)) else { continue };
            let v = crate::fabric::daemon_http::port_counter(&text, gauge, port);
            if (v == 1) == up {
                seen[i] = Some(t0.elapsed());
            }
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    ends.into_iter().map(|e| e.0).zip(seen).collect()
}

/// `rocefab fail ...`.
pub fn fail(cmd: &FailCmd) -> anyhow::Result<()> {
    match cmd {
        FailCmd::Nic(a) if a.down => fail(&FailCmd::Link(FailLinkArgs {
            link: LinkArgs { args: a.args.clone() },
            for_ns: a.for_ns,
            flap: None,
            silent: false,
        })),
        FailCmd::Nic(a) if a.pfc_storm => pfc_storm(a),
        FailCmd::Nic(_) => bail!("rocefab fail nic: say how it fails: --pfc-storm --for DURATION, or --down"),
        FailCmd::Switch(a) => fail_switch(a),
        FailCmd::Link(a) if a.flap.is_some() => flap(a),
        FailCmd::Link(a) => {
            let (mut f, l, index) = find_link(&a.link.args)?;
            if f.st.failed_links.contains(&index) {
                bail!("link {} -- {} is down already; `rocefab restore link` first", l.a, l.b);
            }
            let wall_for = a.for_ns.map(|ns| f.st.clock().map(|c| Duration::from_nanos(c.dilation().duration(ns))));
            let wall_for = wall_for.transpose()?;
            let cut = if a.silent { cut_silently(&mut f, &l, index)? } else { cut_link(&mut f, &l, index, wall_for)? };
            println!("{} link {} down; {}", at(&cut.event), cut.event.target, cut.event.detail);
            if let Some(wall_for) = wall_for {
                // `--for` from the change itself, not from when the routes were pushed.
                std::thread::sleep((cut.changed.at + wall_for).saturating_duration_since(Instant::now()));
                restore_link_printed(&mut f, &l, index)?;
            }
            if !cut.carrier_seen {
                bail!(
                    "link {}: a switch did not report the carrier loss within 5 s ({})",
                    cut.event.target,
                    cut.event.detail
                );
            }
            Ok(())
        }
    }
}

/// `rocefab fail link --flap P --for D`: down, P, up, P, down, ... for D (emulated; × D on the
/// wall clock), ending up. Every change is an event. The switches see each carrier change
/// (a loss only once it has lasted their 100 ms wall-clock debounce, so faster flaps never
/// leave the groups); static routing's recomputation is pushed at each change the switches
/// report before the next one is due, BGP reacts by itself. The flap keeps its period.
fn flap(a: &FailLinkArgs) -> anyhow::Result<()> {
    let (mut f, l, index) = find_link(&a.link.args)?;
    if f.st.failed_links.contains(&index) {
        bail!("link {} -- {} is down already; `rocefab restore link` first", l.a, l.b);
    }
    let (period, total) = (a.flap.expect("flap() is called with --flap"), a.for_ns.expect("clap requires --for"));
    if period == 0 || period > total {
        bail!(
            "--flap {}: the period must be above 0 and at most --for ({})",
            crate::text::duration(period),
            crate::text::duration(total)
        );
    }
    let target = format!("{} -- {}", l.a, l.b);
    let d = f.st.clock()?.dilation();
    let bgp = f.bgp();
    let relink = Relink::new(&f.topo);
    let t0 = Instant::now();
    let (changes, mut down, mut heard_down) = (total / period, false, false);
    for i in 0..changes {
        // Each change at its own time from the start, so the commands' time does not drift it.
        let due = Duration::from_nanos(d.duration(i * period));
        std::thread::sleep(due.saturating_sub(t0.elapsed()));
        down = !down;
        let c = if down {
            let c = set_link(&l, false)?;
            flush_dead_rings(&f, &l)?;
            f.st.failed_links.push(index);
            c
        } else {
            let c = relink.up(&l)?;
            f.st.failed_links.retain(|&x| x != index);
            c
        };
        f.st.save()?;
        let mut detail = format!("flap {} of {changes}", i + 1);
        if !bgp {
            // As for a cut: the routes are pushed once the switches report the change (a loss
            // after their debounce), waiting no longer than the next change is due. A loss not
            // reported by then was a blip to them, and so is its return.
            let next = (t0 + Duration::from_nanos(d.duration((i + 1) * period))).saturating_duration_since(c.at);
            let gauge = if down { "rocefab_port_oper_up" } else { "rocefab_port_carrier" };
            let reported = wait_ports(&f.st, &l, gauge, !down, next, c.at).iter().all(|(_, t)| t.is_some());
            if (down && reported) || (!down && heard_down) {
                push_routes(&f)?;
            } else {
                detail += if down {
                    "; not reported before the next change: the switches' 100 ms debounce outlasted it"
                } else {
                    "; the loss was not reported: no route recomputed"
                };
            }
            heard_down = down && reported;
        }
        let event = if down { "link down" } else { "link up" };
        let e = record(&f.st, c.unix_ns, event, &target, detail)?;
        println!("{} {event} {target} (flap {} of {changes})", at(&e), i + 1);
    }
    let due = Duration::from_nanos(d.duration(changes * period));
    std::thread::sleep(due.saturating_sub(t0.elapsed()));
    if down {
        restore_link_printed(&mut f, &l, index)?;
    }
    println!("link {target}: flapped every {} for {}", crate::text::duration(period), crate::text::duration(total));
    Ok(())
}

/// A cut link, as logged.
pub struct Cut {
    pub event: Event,
    /// When the ends were set down (for `--fail-silent`: asked to drop).
    pub changed: Changed,
    /// Both switch ends reported the carrier loss (within 5 s).
    pub carrier_seen: bool,
}

/// Cuts link `index` (`l`) of the fabric: both ends down, the switches' carrier loss waited
/// for, the routes recomputed (static) or BGP's convergence waited for, the event logged.
///
/// Static routing's controller learns of the cut as a real one does: from the switches, once
/// their link-down debounce has passed and they took the port out of their ECMP groups
/// (`rocefab_port_oper_up` 0). Only then are the routes without the link pushed, so each switch
/// rewrites its groups once, for the carrier, and then takes the new routes. A link that is to
/// come back (`restore_after`, wall clock from the call) before the switches report it stays in
/// their groups, and nothing is pushed: the controller never heard of it.
pub fn cut_link(f: &mut Fabric, l: &LinkState, index: usize, restore_after: Option<Duration>) -> anyhow::Result<Cut> {
    let target = format!("{} -- {}", l.a, l.b);
    let restore_due = restore_after.map(|d| Instant::now() + d);
    let changed = set_link(l, false)?;
    let (wall, since) = (changed.unix_ns, changed.at);
    let limit = Duration::from_secs(5);
    let seen = wait_ports(&f.st, l, "rocefab_port_carrier", false, limit, since);
    flush_dead_rings(f, l)?;
    if !f.st.failed_links.contains(&index) {
        f.st.failed_links.push(index);
        f.st.save()?;
    }
    let mut detail = describe("saw the carrier loss", "did not report the carrier loss", &seen);
    let reported = if !f.bgp() {
        let limit = restore_due.map_or(limit, |due| limit.min(due.saturating_duration_since(since)));
        let out = wait_ports(&f.st, l, "rocefab_port_oper_up", false, limit, since);
        detail +=
            &format!("; {}", describe("took the port out of its ECMP groups", "kept the port in its groups", &out));
        out.iter().all(|(_, t)| t.is_some())
    } else {
        true
    };
    if !reported && restore_due.is_some_and(|due| Instant::now() >= due) {
        detail += "; due back before the switches' 100 ms link-down debounce ended: no route recomputed";
    } else {
        detail += &format!("; {}", reroute(f, "without it", since, "the cut")?);
    }
    let event = record(&f.st, wall, "link down", &target, detail)?;
    Ok(Cut { event, changed, carrier_seen: seen.iter().all(|(_, t)| t.is_some()) })
}

/// The switch daemons at both ends of `l` (their metrics URLs), or an error naming an end that
/// is not a switch.
fn switch_ends(st: &State, l: &LinkState) -> anyhow::Result<Vec<(String, String)>> {
    [&l.a, &l.b]
        .into_iter()
        .map(|end| {
            let (node, port) = end.split_once(':').unwrap_or((end, ""));
            st.daemons
                .iter()
                .find(|d| !d.is_host() && d.node() == node)
                .map(|d| (d.url("/ports/silent"), port.to_string()))
                .ok_or_else(|| {
                    anyhow!(
                        "--silent needs a switch at both ends (BFD runs between switches); {end} is a GPU NIC's end"
                    )
                })
        })
        .collect()
}

/// Sets `l`'s ends silent (every frame they receive dropped, carrier up) or working.
fn set_silent(st: &State, l: &LinkState, silent: bool) -> anyhow::Result<()> {
    for (url, port) in switch_ends(st, l)? {
        let body = serde_json::json!({ "port": port, "silent": silent });
        crate::fabric::daemon_http::http_request(
            "PUT",
            &url,
            Some(&serde_json::to_vec(&body)?),
            Duration::from_secs(5),
        )
        .with_context(|| format!("{url}: setting {port} silent {silent}"))?;
    }
    Ok(())
}

/// `rocefab fail link --silent`: both switch ends drop every frame they receive while the carrier
/// stays up. With BGP, BFD detects it (its detection time × D) and the fabric converges around
/// it; static routing cannot see it, and the data path keeps sending into the link.
pub fn cut_silently(f: &mut Fabric, l: &LinkState, index: usize) -> anyhow::Result<Cut> {
    let target = format!("{} -- {}", l.a, l.b);
    switch_ends(&f.st, l)?;
    let changed = Changed { at: Instant::now(), unix_ns: rundir::unix_now_ns() };
    let (wall, since) = (changed.unix_ns, changed.at);
    set_silent(&f.st, l, true)?;
    f.st.failed_links.push(index);
    f.st.silent_links.push(index);
    f.st.save()?;
    let detail = if f.bgp() {
        format!("silent (carrier up, every frame dropped); {}", reroute(f, "without it", since, "the cut")?)
    } else {
        "silent (carrier up, every frame dropped); static routing cannot see it: the switches keep sending into it until `rocefab restore link`".to_string()
    };
    let event = record(&f.st, wall, "link down", &target, detail)?;
    Ok(Cut { event, changed, carrier_seen: true })
}

/// Longest PFC pause, quanta.
const STORM_QUANTA: u16 = 0xffff;

/// `rocefab fail nic --pfc-storm`: PFC frames pausing one priority for 65535 quanta from the
/// NIC's port, every half pause (at the link's emulated rate, × D on the wall clock, at most
/// 10 ms apart), for `--for`. The switch port's PFC watchdog is what should notice.
fn pfc_storm(a: &NicArgs) -> anyhow::Result<()> {
    let (f, l, _) = find_link(&a.args)?;
    let end = if a.args.len() == 2 { &a.args[1] } else { &a.args[0] };
    let (host, nic) = end.split_once(':').ok_or_else(|| anyhow!("{end:?}: name a NIC as HOST:NIC"))?;
    let (ns, _) = if l.a == *end { (&l.a_netns, &l.b) } else { (&l.b_netns, &l.a) };
    let plan = crate::plan::compile(&f.topo, 0);
    let mac = plan
        .host(host)
        .and_then(|h| h.nics.iter().find(|n| n.ifname == nic))
        .map(|n| n.mac)
        .ok_or_else(|| anyhow!("fabric {}: {end} is not a GPU NIC", f.st.fabric))?;
    let d = f.st.clock()?.dilation();
    let pause_ns = u64::from(STORM_QUANTA) * 512 * 1_000_000_000 / l.line_rate_bps.max(1);
    let period =
        Duration::from_nanos(d.duration(pause_ns / 2)).clamp(Duration::from_micros(100), Duration::from_millis(10));
    let wall_for = Duration::from_nanos(d.duration(a.for_ns.expect("clap requires --for")));
    let prio = rocefab_wire::ethernet::Priority::try_new(a.priority).map_err(|e| anyhow!("--priority: {e}"))?;
    let mut set = rocefab_wire::ethernet::PrioritySet::EMPTY;
    set.insert(prio);
    let frame =
        rocefab_wire::mac_control::MacControlRepr::Pfc(rocefab_wire::mac_control::PfcRepr::pause(set, STORM_QUANTA))
            .to_frame(mac);
    let target = end.to_string();
    let detail = format!(
        "PFC pause priority {} for {STORM_QUANTA} quanta every {:.2} ms (wall) for {}",
        a.priority,
        period.as_secs_f64() * 1e3,
        crate::text::duration(a.for_ns.unwrap_or(0))
    );
    let e = record(&f.st, rundir::unix_now_ns(), "pfc storm start", &target, detail.clone())?;
    println!("{} PFC storm from {target}: {detail}", at(&e));
    let (ns, ifname) = (ns.clone(), nic.to_string());
    let sent = std::thread::spawn(move || -> anyhow::Result<u64> {
        crate::fabric::netns::enter(&ns)?;
        let sock = rocefab_plumbing::packet::PacketSocket::sender(&ifname)
            .with_context(|| format!("a packet socket on {ifname} in {ns}"))?;
        let (t0, mut sent) = (Instant::now(), 0u64);
        while t0.elapsed() < wall_for {
            sock.send_retrying(&frame, Duration::from_millis(10)).with_context(|| format!("sending on {ifname}"))?;
            sent += 1;
            std::thread::sleep(period.min(wall_for.saturating_sub(t0.elapsed())));
        }
        Ok(sent)
    })
    .join()
    .map_err(|_| anyhow!("the storm thread panicked"))??;
    let e = record(&f.st, rundir::unix_now_ns(), "pfc storm end", &target, format!("{sent} PFC frames sent"))?;
    println!("{} PFC storm from {target} over: {sent} PFC frames sent", at(&e));
    Ok(())
}

/// `rocefab restore ...`.
pub fn restore(cmd: &RestoreCmd) -> anyhow::Result<()> {
    match cmd {
        RestoreCmd::Link(a) => {
            let (mut f, l, index) = find_link(&a.args)?;
            restore_link_printed(&mut f, &l, index)
        }
        RestoreCmd::Switch(a) => {
            let (mut f, name) = find_switch(&a.args)?;
            restore_switch(&mut f, &name)
        }
    }
}

/// Puts link `index` (`l`) back: both ends up, the carrier waited for, the routes with it.
/// The event logged; an error when a switch did not report the carrier within 5 s.
pub fn restore_link(f: &mut Fabric, l: &LinkState, index: usize) -> anyhow::Result<Event> {
    let target = format!("{} -- {}", l.a, l.b);
    let wall = rundir::unix_now_ns();
    let since = Instant::now();
    if f.st.silent_links.contains(&index) {
        set_silent(&f.st, l, false)?;
        f.st.silent_links.retain(|&i| i != index);
        f.st.failed_links.retain(|&i| i != index);
        f.st.save()?;
        let detail = format!("frames pass again; {}", reroute(f, "with it", since, "the restore")?);
        return record(&f.st, wall, "link up", &target, detail);
    }
    let changed = Relink::new(&f.topo).up(l)?;
    let (wall, since) = (changed.unix_ns, changed.at);
    let seen = wait_ports(&f.st, l, "rocefab_port_carrier", true, Duration::from_secs(5), since);
    f.st.failed_links.retain(|&i| i != index);
    f.st.save()?;
    let detail = format!(
        "{}; {}",
        describe("saw the carrier", "did not report the carrier", &seen),
        reroute(f, "with it", since, "the restore")?
    );
    let e = record(&f.st, wall, "link up", &target, detail.clone())?;
    if seen.iter().any(|(_, t)| t.is_none()) {
        bail!("link {target}: a switch did not report the carrier within 5 s ({detail})");
    }
    Ok(e)
}

/// [`restore_link`], printed.
fn restore_link_printed(f: &mut Fabric, l: &LinkState, index: usize) -> anyhow::Result<()> {
    let e = restore_link(f, l, index)?;
    println!("{} link {} up; {}", at(&e), e.target, e.detail);
    Ok(())
}

/// `rail1:eth5 saw the carrier loss after 1.2 ms, spine1:eth1 did not report the carrier loss
/// (wall clock, from the change)`: `did` for an end that reported in time, `not` for one that
/// did not.
fn describe(did: &str, not: &str, seen: &[(String, Option<Duration>)]) -> String {
    if seen.is_empty() {
        return "no switch at either end".into();
    }
    let parts: Vec<String> = seen
        .iter()
        .map(|(end, t)| match t {
            Some(t) => format!("{end} {did} after {:.1} ms", t.as_secs_f64() * 1e3),
            None => format!("{end} {not}"),
        })
        .collect();
    format!("{} (wall clock, from the change)", parts.join(", "))
}

fn at(e: &Event) -> String {
    format!("[{} emulated]", crate::text::duration(e.emulated_ns))
}

/// `rocefab events`.
pub fn events(a: &EventsArgs) -> anyhow::Result<()> {
    let fabric = crate::fabric::pick_fabric(a.fabric.as_deref())?;
    let log = read_log(&fabric)?;
    let mut out = std::io::stdout().lock();
    if log.is_empty() && !a.json {
        writeln!(out, "fabric {fabric}: no events")?;
    }
    for e in &log {
        if a.json {
            writeln!(out, "{}", serde_json::to_string(e)?)?;
        } else {
            writeln!(
                out,
                "{:>14} emulated  {}  {:<10} {}  {}",
                crate::text::duration(e.emulated_ns),
                rundir::rfc3339(e.wall_unix_ns),
                e.event,
                e.target,
                e.detail
            )?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_log_appends_reads_back_and_names_a_bad_line() {
        let dir = std::env::temp_dir().join(format!("rocefab-events-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("events.jsonl");
        let _ = std::fs::remove_file(&p);
        assert!(read_log_at(&p).unwrap().is_empty(), "no log yet: no events");
        let e = |ns, what: &str| Event {
            emulated_ns: ns,
            wall_unix_ns: 1_000 + ns,
            event: what.into(),
            target: "rail1:eth3 -- spine1:eth1".into(),
            detail: "x".into(),
        };
        append(&p, &e(5, "link down")).unwrap();
        append(&p, &e(9, "link up")).unwrap();
        assert_eq!(read_log_at(&p).unwrap(), vec![e(5, "link down"), e(9, "link up")]);
        std::fs::write(&p, format!("{}\nnot json\n", serde_json::to_string(&e(1, "link down")).unwrap())).unwrap();
        let err = read_log_at(&p).unwrap_err();
        assert!(format!("{err:#}").contains("events.jsonl:2: not an event"), "{err:#}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn carrier_times_read_as_a_sentence() {
        let seen =
            vec![("rail1:eth3".to_string(), Some(Duration::from_micros(1_250))), ("spine1:eth1".to_string(), None)];
        assert_eq!(
            describe("saw the carrier loss", "did not report the carrier loss", &seen),
            "rail1:eth3 saw the carrier loss after 1.2 ms, spine1:eth1 did not report the carrier loss (wall clock, from the change)"
        );
    }
}
