//! `rocefab run … --fail-link NODE:PORT --fail-at T [--fail-for D] [--compare]`: a link cut
//! while the job runs, measured (book ch. 10-11: what a failed spine uplink costs a job).
//!
//! At `--fail-at` (emulated time after the job's start) the link is cut as `rocefab fail link`
//! cuts it (both ends down, the switches' carrier loss, static routing's recomputation or BGP's
//! convergence, an event in the log; `--fail-silent`: carrier up, every frame dropped, as
//! `fail link --silent`); after `--fail-for` it is restored, else when the job has ended. The report's `failover` section says:
//!
//! * when the cut came and what the switches saw (carrier loss, re-routing);
//! * how long each switch end kept sending frames into the cut link: from the cut to the
//!   data-plane pass that last handed the port frames (`rocefab_port_last_tx_timestamp_seconds`,
//!   read just before the restore), and when its data plane acted on the carrier loss
//!   (`rocefab_port_carrier_lost_timestamp_seconds`): the switch's own stamps, on the wall clock
//!   (emulated: ÷ D), not a polling of its counters. A switch hands a port without carrier
//!   nothing (what it holds for it is dropped, counted), so a cut cable's ends stop when their
//!   data planes see the carrier go; a silent cut's ends, when BGP moves the routes away; a
//!   link to a GPU is that GPU's only way, so its switch sends into it until the job ends;
//! * the frames the cut lost: what the switch ends handed to the link and the other end did
//!   not receive (`tx_packets` minus the peer's `rx_packets`, both directions, over the job),
//!   plus what the ends dropped for want of carrier (`carrier_dropped_packets`: a switch drops
//!   what it holds for a port without carrier), for a link between two switches;
//! * with `--compare`, the same job run first without the failure: both completion times and
//!   retransmission counts side by side.
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use serde::Serialize;

use crate::fabric::rundir::LinkState;
use crate::fabric::Fabric;

/// The options of `rocefab run` that inject a failure.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct FailoverArgs {
    /// Cut this link while the job runs (either end, as NODE:PORT, e.g. `rail1:eth3`).
    #[arg(long, value_name = "NODE:PORT")]
    pub fail_link: Option<String>,
    /// When to cut it: emulated time after the job's start (`1ms`, `200us`).
    #[arg(long, value_name = "DURATION", requires = "fail_link", value_parser = crate::text::parse_emulated_ns)]
    pub fail_at: Option<u64>,
    /// Restore it this long after the cut (emulated); without it, when the job has ended.
    #[arg(long, value_name = "DURATION", requires = "fail_link", value_parser = crate::text::parse_emulated_ns)]
    pub fail_for: Option<u64>,
    /// Run the same job first without the failure and report both side by side.
    #[arg(long, requires = "fail_link")]
    pub compare: bool,
    /// Cut it silently: the carrier stays up and both (switch) ends drop every frame they
    /// receive; only BFD notices (`routing: bgp`).
    #[arg(long, requires = "fail_link")]
    pub fail_silent: bool,
}

/// One switch end of the cut link.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct EndLine {
    /// `rail1:eth3`.
    pub end: String,
    /// Time from the cut to the data-plane pass that last handed the port frames, emulated ns
    /// (`None`: none after the cut).
    pub last_frame_after_ns: Option<u64>,
    /// Time from the cut to when its data plane acted on the carrier loss (from then on it
    /// handed the port nothing), emulated ns (`None`: it had carrier when the link came back,
    /// as under a silent cut).
    pub carrier_lost_after_ns: Option<u64>,
}

/// The job without the failure (`--compare`).
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Baseline {
    pub ok: bool,
    pub completion_ns: u64,
    pub retransmitted_packets: u64,
}

/// The report's `failover` section.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Failover {
    /// `rail1:eth3 -- spine1:eth1`.
    pub link: String,
    /// When the cut came (the first end set down), emulated ns after the job's start.
    pub cut_at_ns: u64,
    /// The same instant on the Unix clock, wall ns: to compare with what the kernel saw.
    pub cut_unix_ns: u64,
    /// When the injection's clock started (the job's go, after the hosts were told), Unix ns:
    /// what `cut_at_ns` and `restored_at_ns` count from. The report puts the hosts' migrations
    /// on this clock (each host's own started a little apart from it).
    pub started_unix_ns: u64,
    /// What the switches saw and how the routes followed (the event's detail).
    pub detail: String,
    /// Each switch end: how long it kept sending into the cut link.
    pub ends: Vec<EndLine>,
    /// Frames handed to the link by one end that the other did not receive, both directions,
    /// plus those either end dropped for its port's lack of carrier, over the job (`None`: an
    /// end is not a switch).
    pub frames_lost: Option<u64>,
    /// When the link came back, emulated ns after the job's start.
    pub restored_at_ns: Option<u64>,
    /// The same job without the failure, run first (`--compare`).
    pub baseline: Option<Baseline>,
}

/// A switch end: its name, its port, its daemon's metrics URL.
#[derive(Clone, Debug)]
struct SwitchEnd {
    end: String,
    port: String,
    url: String,
}

/// A failure ready to be injected: the link, its switch ends and their counters before the job.
pub struct Armed {
    fabric: Fabric,
    link: LinkState,
    index: usize,
    ends: Vec<SwitchEnd>,
    at_ns: u64,
    for_ns: Option<u64>,
    silent: bool,
    before: Vec<LinkCounters>,
}

/// The injection thread of a running job.
pub struct Running {
    thread: std::thread::JoinHandle<anyhow::Result<Injected>>,
    armed_ends: Vec<SwitchEnd>,
    before: Vec<LinkCounters>,
    go: Instant,
    go_unix_ns: u64,
    dilation: rocefab_contracts::time::Dilation,
}

struct Injected {
    fabric: Fabric,
    link: LinkState,
    index: usize,
    cut_at: Duration,
    cut_unix_ns: u64,
    detail: String,
    /// Each switch end's stamps, read just before the restore (`None`: not restored yet).
    ends: Option<Vec<Stamps>>,
    restored_at: Option<Duration>,
}

/// A switch end's stamps (Unix ns; `None`: 0, never): the data-plane pass that last handed
/// the port frames, and when its data plane acted on the port's present carrier loss.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Stamps {
    last_tx: Option<u64>,
    carrier_lost: Option<u64>,
}

fn stamps(e: &SwitchEnd) -> anyhow::Result<Stamps> {
    let text = crate::fabric::daemon_http::scrape(&e.url, Duration::from_millis(500))
        .with_context(|| format!("reading {}", e.end))?;
    let at = |name: &str| -> anyhow::Result<Option<u64>> {
        let s = crate::fabric::daemon_http::port_gauge(&text, name, &e.port)
            .ok_or_else(|| anyhow::anyhow!("{}: {} has no {name} for {}", e.end, e.url, e.port))?;
        Ok((s > 0.0).then_some((s * 1e9) as u64))
    };
    Ok(Stamps {
        last_tx: at("rocefab_port_last_tx_timestamp_seconds")?,
        carrier_lost: at("rocefab_port_carrier_lost_timestamp_seconds")?,
    })
}

/// A switch end's port counters that measure what the cut lost.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct LinkCounters {
    tx: u64,
    rx: u64,
    /// Frames the switch dropped for the port's lack of carrier (its queues, its cable, and
    /// arrivals routed to it before its groups moved).
    carrier_dropped: u64,
}

fn counters(e: &SwitchEnd) -> anyhow::Result<LinkCounters> {
    let text = crate::fabric::daemon_http::scrape(&e.url, Duration::from_millis(500))
        .with_context(|| format!("reading {}", e.end))?;
    let c = |name| crate::fabric::daemon_http::port_counter(&text, name, &e.port);
    Ok(LinkCounters {
        tx: c("rocefab_port_tx_packets_total"),
        rx: c("rocefab_port_rx_packets_total"),
        carrier_dropped: c("rocefab_port_carrier_dropped_packets_total"),
    })
}

/// Frames the cut lost between two switch ends, from their counters before and after the job:
/// what one end handed to the link that the other did not receive, both ways, plus what either
/// end dropped because its port had no carrier (a switch drops what it holds for a port that
/// lost it, rather than handing it to a dead link).
fn frames_lost(before: &[LinkCounters], after: &[LinkCounters]) -> u64 {
    let d = |i: usize| LinkCounters {
        tx: after[i].tx - before[i].tx,
        rx: after[i].rx - before[i].rx,
        carrier_dropped: after[i].carrier_dropped - before[i].carrier_dropped,
    };
    let (a, b) = (d(0), d(1));
    a.tx.saturating_sub(b.rx) + b.tx.saturating_sub(a.rx) + a.carrier_dropped + b.carrier_dropped
}

/// Checks the options against the fabric (the link exists and is up) and reads the link's
/// counters; `None` without `--fail-link`.
pub fn arm(fabric: &str, a: &FailoverArgs) -> anyhow::Result<Option<Armed>> {
    let Some(end) = &a.fail_link else { return Ok(None) };
    let (f, link, index) = crate::fabric::links::find_link(&[fabric.to_string(), end.clone()])?;
    if crate::fabric::routing::cut_links(&f.st).contains(&index) {
        bail!("--fail-link {end}: link {} -- {} is down already", link.a, link.b);
    }
    let ends: Vec<SwitchEnd> = [&link.a, &link.b]
        .into_iter()
        .filter_map(|e| {
            let (node, port) = e.split_once(':')?;
            let d = f.st.daemons.iter().find(|d| !d.is_host() && d.node() == node)?;
            Some(SwitchEnd { end: e.clone(), port: port.to_string(), url: d.metrics_url.clone() })
        })
        .collect();
    let before = ends.iter().map(counters).collect::<anyhow::Result<_>>()?;
    Ok(Some(Armed {
        fabric: f,
        link,
        index,
        ends,
        at_ns: a.fail_at.unwrap_or(0),
        for_ns: a.fail_for,
        silent: a.fail_silent,
        before,
    }))
}

impl Armed {
    /// Starts the injection: call when the job starts.
    pub fn start(self) -> anyhow::Result<Running> {
        let dilation = self.fabric.st.clock()?.dilation();
        let go = Instant::now();
        let go_unix_ns = crate::fabric::rundir::unix_now_ns();
        let (armed_ends, before) = (self.ends.clone(), self.before.clone());
        let thread = std::thread::Builder::new()
            .name("rocefab-failover".into())
            .spawn(move || inject(self, go, dilation))
            .context("starting the failure injection")?;
        Ok(Running { thread, armed_ends, before, go, go_unix_ns, dilation })
    }
}

/// Waits for `--fail-at`, cuts the link, and after `--fail-for` reads its ends' stamps and restores it.
fn inject(a: Armed, go: Instant, d: rocefab_contracts::time::Dilation) -> anyhow::Result<Injected> {
    let Armed { mut fabric, link, index, ends, at_ns, for_ns, silent, .. } = a;
    std::thread::sleep(Duration::from_nanos(d.duration(at_ns)).saturating_sub(go.elapsed()));
    let cut = if silent {
        crate::fabric::links::cut_silently(&mut fabric, &link, index)
    } else {
        let restore_after = for_ns.map(|f| Duration::from_nanos(d.duration(at_ns + f)).saturating_sub(go.elapsed()));
        crate::fabric::links::cut_link(&mut fabric, &link, index, restore_after)
    }?;
    let changed = cut.changed;
    // From the change itself (the first end set down), not from when the cut was called.
    let cut_at = changed.at.saturating_duration_since(go);
    let mut restored_at = None;
    let mut stamped = None;
    if let Some(f) = for_ns {
        std::thread::sleep(Duration::from_nanos(d.duration(at_ns + f)).saturating_sub(go.elapsed()));
        stamped = Some(ends.iter().map(stamps).collect::<anyhow::Result<_>>()?);
        restored_at = Some(go.elapsed());
        crate::fabric::links::restore_link(&mut fabric, &link, index)?;
    }
    Ok(Injected {
        fabric,
        link,
        index,
        cut_at,
        cut_unix_ns: changed.unix_ns,
        detail: cut.event.detail,
        ends: stamped,
        restored_at,
    })
}

impl Running {
    /// After the job: waits for the injection, restores the link if it is still cut, and
    /// measures. `job_ns`: the job's completion time (emulated).
    pub fn finish(self) -> anyhow::Result<Failover> {
        let Injected { mut fabric, link, index, cut_at, cut_unix_ns, detail, ends, mut restored_at } =
            self.thread.join().map_err(|_| anyhow::anyhow!("the failure injection panicked"))??;
        let after: Vec<LinkCounters> = self.armed_ends.iter().map(counters).collect::<anyhow::Result<_>>()?;
        let frames_lost = (self.armed_ends.len() == 2).then(|| frames_lost(&self.before, &after));
        let ends = match ends {
            Some(e) => e,
            None => self.armed_ends.iter().map(stamps).collect::<anyhow::Result<_>>()?,
        };
        if restored_at.is_none() {
            restored_at = Some(self.go.elapsed());
            crate::fabric::links::restore_link(&mut fabric, &link, index)?;
        }
        let emulated = |t: Duration| self.dilation.to_emulated_ns(t.as_nanos() as u64);
        Ok(Failover {
            link: format!("{} -- {}", link.a, link.b),
            cut_at_ns: emulated(cut_at),
            cut_unix_ns,
            started_unix_ns: self.go_unix_ns,
            detail,
            ends: self
                .armed_ends
                .iter()
                .zip(ends)
                .map(|(e, s)| end_line(&e.end, s, cut_unix_ns, self.dilation))
                .collect(),
            frames_lost,
            restored_at_ns: restored_at.map(emulated),
            baseline: None,
        })
    }
}

/// An end's line of the report from its stamps and the cut (Unix ns): what came after the cut,
/// in emulated ns.
fn end_line(end: &str, s: Stamps, cut_unix_ns: u64, d: rocefab_contracts::time::Dilation) -> EndLine {
    let after = |t: Option<u64>| t.filter(|&t| t > cut_unix_ns).map(|t| d.to_emulated_ns(t - cut_unix_ns));
    EndLine {
        end: end.to_string(),
        last_frame_after_ns: after(s.last_tx),
        carrier_lost_after_ns: after(s.carrier_lost),
    }
}

/// The section as text lines.
pub fn render(f: &Failover) -> Vec<String> {
    let t = crate::text::duration;
    let mut out = vec![format!(
        "failure: link {} cut at {} (emulated, after the job's start): {}",
        f.link,
        t(f.cut_at_ns),
        f.detail
    )];
    for e in &f.ends {
        let sent = match e.last_frame_after_ns {
            Some(ns) => format!("  {} sent its last frame into the cut link {} after the cut", e.end, t(ns)),
            None => format!("  {} sent nothing into the cut link", e.end),
        };
        out.push(match e.carrier_lost_after_ns {
            Some(ns) => format!("{sent}; its data plane acted on the carrier loss {} after the cut", t(ns)),
            None => sent,
        });
    }
    match f.frames_lost {
        Some(n) => out.push(format!(
            "  frames lost to the cut: {n} (sent into the link and never received by the other end, or dropped by an end without carrier)"
        )),
        None => out.push("  frames lost to the cut: not measured (an end is not a switch)".into()),
    }
    if let Some(r) = f.restored_at_ns {
        out.push(format!("  restored at {}", t(r)));
    }
    if let Some(b) = &f.baseline {
        out.push(format!(
            "  without the failure: job completion time {}, retransmitted packets {}{}",
            t(b.completion_ns),
            b.retransmitted_packets,
            if b.ok { "" } else { " (that run did not verify)" }
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_lost_counts_the_link_both_ways_and_what_the_ends_dropped_without_carrier() {
        let c = |tx, rx, carrier_dropped| LinkCounters { tx, rx, carrier_dropped };
        let before = [c(100, 50, 0), c(60, 90, 0)];
        // a sent 40 more, b received 37 of them; b sent 10, a received all; a dropped 25 frames
        // it held for its port once the carrier went, b none.
        let after = [c(140, 60, 25), c(70, 127, 0)];
        assert_eq!(frames_lost(&before, &after), 3 + 25);
        // Nothing handed to the dead link (the switch dropped it all at once): still lost.
        assert_eq!(frames_lost(&before, &[c(100, 50, 12), c(60, 90, 0)]), 12);
        assert_eq!(frames_lost(&before, &before), 0);
    }

    #[test]
    fn an_end_line_counts_only_what_came_after_the_cut_in_emulated_time() {
        let d = rocefab_contracts::time::Dilation::new(10.0).unwrap();
        let cut = 1_000_000_000_000;
        // Sent 30 ms (wall) after the cut, acted on the loss 40 ms after: 3 and 4 ms emulated.
        let s = Stamps { last_tx: Some(cut + 30_000_000), carrier_lost: Some(cut + 40_000_000) };
        let l = end_line("rail1:eth5", s, cut, d);
        assert_eq!((l.last_frame_after_ns, l.carrier_lost_after_ns), (Some(3_000_000), Some(4_000_000)));
        // The last frame before the cut, no carrier loss acted on (a silent cut): neither.
        let s = Stamps { last_tx: Some(cut - 1), carrier_lost: None };
        let l = end_line("rail1:eth5", s, cut, d);
        assert_eq!((l.last_frame_after_ns, l.carrier_lost_after_ns), (None, None));
    }
}
