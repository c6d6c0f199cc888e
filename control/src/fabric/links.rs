//! The fabric's cables and switches failing and coming back: both ends of a link set down or up
//! at once, the switches' carrier reports waited for, the frames a cut left on a dead link's TX
//! ring flushed, static routing's recomputation pushed (or BGP's convergence waited for).
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context};

use crate::fabric::events::{record, Event};
use crate::fabric::routing::{cut_links, wait_converged};
use crate::fabric::rundir::{self, LinkState, State};
use crate::fabric::Fabric;

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
pub fn find_switch(args: &[String]) -> anyhow::Result<(Fabric, String)> {
    let (fabric, name) = crate::text::fabric_and_node(args, None, "SWITCH")?;
    let (fabric, name) = (crate::fabric::pick_fabric(fabric)?, name.to_string());
    let st = crate::fabric::load_state(&fabric)?;
    if !st.daemons.iter().any(|d| !d.is_host() && d.node() == name) {
        let all: Vec<&str> = st.daemons.iter().filter(|d| !d.is_host()).map(|d| d.node()).collect();
        bail!("fabric {fabric} has no switch {name:?} (switches: {})", all.join(", "));
    }
    Ok((Fabric::with_state(st)?, name))
}

/// The links of switch `name`.
pub fn links_of<'a>(st: &'a State, name: &str) -> Vec<&'a LinkState> {
    st.links.iter().filter(|l| [&l.a, &l.b].iter().any(|e| e.split(':').next() == Some(name))).collect()
}

/// How the fabric takes a change: static routing pushes recomputed routes; BGP converges by
/// itself (BFD, withdrawals, zebra, the switches' FIB watch), and this waits for it. The line
/// that says how long it took, counted from the change itself (`since`, taken just before the
/// links or the switch were touched; `from` names it), not from when the switches noticed.
pub fn reroute(f: &Fabric, with: &str, since: Instant, from: &str) -> anyhow::Result<String> {
    if f.bgp() {
        let limit = Duration::from_nanos(f.clock()?.dilation().duration(10_000_000_000)).max(Duration::from_secs(30));
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
pub fn push_routes(f: &Fabric) -> anyhow::Result<Duration> {
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
/// its GPU; `lifecycle::relink_lines`). Without them a host's kernel traffic from a restored port
/// (`rocefab ping`) left through another port, or not at all.
pub struct Relink {
    pub plan: crate::plan::Plan,
}

impl Relink {
    /// The fabric's plan from its topology, computed once for every link put back.
    pub fn new(topo: &crate::topology::Topology) -> Relink {
        Relink { plan: crate::plan::compile(topo, 0) }
    }

    /// Sets both ends of `l` up and gives them back their routes and neighbours.
    pub fn up(&self, l: &LinkState) -> anyhow::Result<Changed> {
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
/// (237 frames seen) would go out when the link came back, seconds late. Once each switch's
/// data plane has acted on the carrier loss (a pass already running when the switch reported
/// it may still put frames there: `rocefab_port_carrier_lost_timestamp_seconds`), each switch end is
/// brought up alone (the other end is down: no carrier), its switch empties that ring into the
/// dead link (the kernel drops what it takes from an interface without carrier, as a dead cable
/// loses it; `rocefab_port_tx_ring_frames` reads 0), and it goes down again. The switch has no
/// carrier throughout, so it puts nothing more there.
///
/// Not with `routing: bgp`: zebra would see the interface come and go, and BGP converged 2 s
/// later than without it. There a frame on a ring at the cut can still arrive after the
/// restore.
pub fn flush_dead_rings(f: &Fabric, l: &LinkState) -> anyhow::Result<()> {
    if f.bgp() {
        return Ok(());
    }
    // Only once a switch itself has seen the carrier go does it stop filling the ring.
    let seen = wait_ports(&f.st, l, "rocefab_port_carrier", false, Duration::from_secs(5), Instant::now());
    if let Some((end, _)) = seen.iter().find(|(_, t)| t.is_none()) {
        bail!("{end}: its switch did not report the carrier loss within 5 s");
    }
    // And once its data plane has acted on it: a pass already running when the carrier went
    // may still put frames on the ring after the switch reported the loss.
    for end in [&l.a, &l.b] {
        wait_carrier_lost(&f.st, end, Duration::from_secs(5))?;
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

/// Polls the switch at `end` (if it is one) until its data plane reports acting on the port as
/// without carrier (`rocefab_port_carrier_lost_timestamp_seconds` not 0: it hands the port no
/// more frames); an error naming the end after `limit`.
fn wait_carrier_lost(st: &State, end: &str, limit: Duration) -> anyhow::Result<()> {
    let (Some(d), Some((_, port))) = (switch_daemon(st, end), end.split_once(':')) else { return Ok(()) };
    let t0 = Instant::now();
    let mut why = String::from("its data plane still sends on the port");
    loop {
        match crate::fabric::daemon_http::scrape(&d.metrics_url, Duration::from_millis(500)) {
            Ok(text) => {
                let name = "rocefab_port_carrier_lost_timestamp_seconds";
                let at = crate::fabric::daemon_http::port_gauge(&text, name, port)
                    .ok_or_else(|| anyhow!("{end}: {} has no {name} for {port}", d.metrics_url))?;
                if at > 0.0 {
                    return Ok(());
                }
            }
            Err(e) => why = format!("{e:#}"),
        }
        if t0.elapsed() >= limit {
            bail!("{end}: its data plane did not act on the carrier loss within {} s ({why})", limit.as_secs());
        }
        std::thread::sleep(Duration::from_millis(2));
    }
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
pub fn set_link(l: &LinkState, up: bool) -> anyhow::Result<Changed> {
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
pub fn wait_ports(
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

#[cfg(test)]
mod tests {
    use super::*;

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
