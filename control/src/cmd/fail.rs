//! Failures on a running fabric (book ch. 10-11: what a cut link does to a training job), and the
//! fabric's event log.
//!
//! * `rocefab fail link [FABRIC] <NODE:PORT> [--for DURATION]` cuts a cable: both ends of the veth
//!   go down at once (no frame crosses in either direction, the carrier goes at both switches).
//!   With static routing each switch's link watch (`switch-model`'s `carrier`) removes the port
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

use crate::fabric::events::{at, read_log, record};
use crate::fabric::links::cut_link;
use crate::fabric::links::cut_silently;
use crate::fabric::links::find_link;
use crate::fabric::links::find_switch;
use crate::fabric::links::flush_dead_rings;
use crate::fabric::links::links_of;
use crate::fabric::links::push_routes;
use crate::fabric::links::reroute;
use crate::fabric::links::restore_link;
use crate::fabric::links::set_link;
use crate::fabric::links::wait_ports;
use crate::fabric::links::Changed;
use crate::fabric::links::Relink;
use crate::fabric::rundir::{self, LinkState};
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
        std::thread::sleep(Duration::from_nanos(f.clock()?.dilation().duration(ns)));
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
    let d = f.clock()?.dilation();
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
    let d = f.clock()?.dilation();
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
        // Each frame at its own time from the start (k periods), so a late wake-up on a busy
        // machine delays one refresh, not every later one: the storm keeps its rate.
        let (t0, mut sent) = (Instant::now(), 0u64);
        while t0.elapsed() < wall_for {
            sock.send_retrying(&frame, Duration::from_millis(10)).with_context(|| format!("sending on {ifname}"))?;
            sent += 1;
            let next = period.saturating_mul(u32::try_from(sent).unwrap_or(u32::MAX)).min(wall_for);
            std::thread::sleep(next.saturating_sub(t0.elapsed()));
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

/// [`restore_link`], printed.
fn restore_link_printed(f: &mut Fabric, l: &LinkState, index: usize) -> anyhow::Result<()> {
    let e = restore_link(f, l, index)?;
    println!("{} link {} up; {}", at(&e), e.target, e.detail);
    Ok(())
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
