//! The switch daemon, `rocefab-switchd --config <switch.json> [--config ...] [--workers N]
//! [--log-file <file>]` (its binary only parses the arguments and calls [`run`]). Each switch of
//! the emulated fabric given: binds its Prometheus listener (in the namespace the daemon was
//! started in), enters the switch's network namespace (on its own thread), loads and attaches
//! the XDP program, opens one AF_XDP socket per port, and hands its data plane to one of the
//! `--workers` data-plane threads ([`crate::worker`]) until SIGTERM/SIGINT or `POST /stop`; then
//! stops its data plane, closes the sockets, detaches XDP. The daemon exits 0 when every switch
//! has ended cleanly; start-up failures exit 1 with a message naming the switch and what failed.
//!
//! HTTP routes: `/metrics` (Prometheus), `/sample` (JSON for the DCQCN timeline,
//! [`crate::sample`]), `/lldp` (neighbours, when the agent runs), the capture stream.
//!
//! Threads. The data-plane workers (`dp-<switch>` for a switch alone, else `dp-worker-<i>`) are
//! plain threads that never wait for a control side. Each switch's control side runs on its own
//! thread (`sw-<switch>`) on a current-thread tokio runtime ([`control`]): the HTTP server
//! ([`rocefab_plumbing::http`]) on the pre-bound listener, the data plane's bell, the shutdown
//! (the main thread's signalfd, or `POST /stop`), and its data plane's end (a oneshot channel
//! whose sender its worker drops when the data plane ends, so no polling). The main thread
//! reads the signalfd and waits for the switches to end.
//!
//! The control side's end of the rings, [`ControlEnd`], lives in an `Arc<Mutex<ControlEnd>>`
//! made in [`run`] and handed to [`control`]; every control task that talks to the data plane
//! holds a clone and locks it only around non-blocking ring operations, never across an `.await`.
//! The data plane's bell (`ControlEnd::from_dp`) has exactly one waiter, [`from_data_plane`]
//! (an fd registers with the runtime once), which empties what the bell announces. What a scrape
//! reads (the metric registry, the XDP counters map, the sockets' statistics) is behind another
//! mutex, [`Scrape`], which the data-plane thread never takes.
use std::convert::Infallible;
use std::net::TcpListener;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use crate::ctrl::{ControlEnd, DpEvent, OwnFrame};
use crate::dataplane::{DataPlane, DataPlaneConfig, CTRL_EVENTS, CTRL_FRAMES};
use crate::metrics::Metrics;
use crate::sample::{self, XdpCounters};
use crate::xsk::{self, XskStatsReader};
use anyhow::{anyhow, bail, Context};
use clap::Parser;
use lldp_agent::metrics::LldpMetrics;
use lldp_agent::{Link, NodeAgent};
use rocefab_contracts::config::SwitchConfig;
use rocefab_contracts::time::Dilation;
use rocefab_plumbing::capture;
use rocefab_plumbing::daemon::{AsyncSignals, Doorbell, Signals};
use rocefab_plumbing::http;
use rocefab_plumbing::loader::XdpSwitch;
use rocefab_plumbing::log_route;
use rocefab_plumbing::netns::enter as enter_netns;
use switch_model::stats::SwitchStats;

/// `rocefab-switchd`'s command line.
#[derive(Debug, Parser)]
#[command(name = "rocefab-switchd", version, about = "rocefab switch daemon (XDP + AF_XDP data plane)")]
pub struct Args {
    /// Switch configuration (JSON, as written by `rocefab up`). Repeat it to run several
    /// switches in this process, their data planes driven by `--workers` shared threads.
    #[arg(long, required = true)]
    pub config: Vec<PathBuf>,
    /// Data-plane worker threads shared by the switches: each switch's data plane runs on one
    /// (`--config` order cut into as many contiguous blocks, so that switches named next to
    /// each other, a pod's, share one), and a frame crossing switches of one worker goes from
    /// hop to hop without a thread waking up.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..))]
    pub workers: u16,
    /// Append logs to this file instead of stderr.
    #[arg(long)]
    pub log_file: Option<PathBuf>,
    /// Each switch's own lines (its start-up, control side, data plane) to `<DIR>/<switch>.log`,
    /// as a daemon of its own would write them; the process's own lines (signals, panics) stay
    /// in `--log-file`.
    #[arg(long, value_name = "DIR")]
    pub switch_logs: Option<PathBuf>,
}

/// Everything a scrape reads besides the data plane's atomics.
struct Scrape {
    metrics: Metrics,
    xdp: XdpSwitch,
    xsk_stats: XskStatsReader,
    /// The LLDP agent and its families (registered in `metrics`' registry), if it runs.
    lldp: Option<(LldpMetrics, Arc<Mutex<NodeAgent>>)>,
    /// Port mirroring counters (`rocefab capture`), in `metrics`' registry: the data path's
    /// tap, and the kernel path's (its ring and the kernel's socket drops).
    capture: (capture::CaptureMetrics, Arc<capture::Tap>, Arc<capture::Tap>, Arc<std::sync::atomic::AtomicU64>),
}

impl Scrape {
    /// The XDP program's per-CPU counters summed per port; `None` (logged) when unreadable.
    fn xdp_counters(&self) -> Option<XdpCounters> {
        match self.xdp.counters() {
            Ok(c) => Some(c),
            Err(e) => {
                tracing::warn!("reading XDP counters: {e}");
                None
            }
        }
    }

    /// Frames each port's AF_XDP socket lost in the kernel (`rx_dropped` + `rx_ring_full`);
    /// `None` (logged) when the statistics are unreadable.
    fn kernel_rx_lost(&self) -> Option<Vec<u64>> {
        Some(self.xsk_counters()?.iter().map(|x| x.rx_dropped + x.rx_ring_full).collect())
    }

    /// Every port's AF_XDP socket statistics; `None` (logged) when unreadable.
    fn xsk_counters(&self) -> Option<Vec<afxdp::XskStatistics>> {
        match self.xsk_stats.read() {
            Ok(s) => Some(s),
            Err(e) => {
                tracing::warn!("reading AF_XDP socket statistics: {e}");
                None
            }
        }
    }

    fn render(&self) -> String {
        let xdp_counters = self.xdp_counters();
        let xsk_counters = self.xsk_counters();
        let (capture, tap, ktap, klost) = &self.capture;
        capture.update(
            tap.mirrored() + ktap.mirrored(),
            tap.lost() + ktap.lost() + klost.load(std::sync::atomic::Ordering::Relaxed),
        );
        if let Some((m, agent)) = &self.lldp {
            m.update(&lock(agent).report().ports);
        }
        self.metrics.render(xdp_counters.as_deref(), xsk_counters.as_deref())
    }
}

/// Locks `m`; a panic elsewhere while it was held leaves nothing half-updated that matters here.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The daemon: every switch of `--config` started, each on its own control thread
/// (`sw-<switch>`: its namespace, XDP program, sockets, HTTP listener, LLDP agent, carrier
/// watch), its data plane handed to a shared worker ([`crate::worker`]); then, until SIGTERM or
/// SIGINT, or until every switch has ended, their control sides; then each one's shutdown. A
/// switch that fails is logged by name and the others go on; the daemon fails if any did.
pub fn run(args: &Args) -> anyhow::Result<()> {
    let cfgs = args
        .config
        .iter()
        .map(|c| SwitchConfig::load(c).with_context(|| format!("loading switch config {}", c.display())))
        .collect::<anyhow::Result<Vec<_>>>()?;
    for (i, c) in cfgs.iter().enumerate() {
        if cfgs[..i].iter().any(|o| o.name == c.name) {
            bail!("switch {} is configured twice ({})", c.name, args.config[i].display());
        }
    }
    // Each switch's log file, when asked for.
    let routes: Vec<Option<log_route::Route>> = match &args.switch_logs {
        Some(dir) => {
            let paths: Vec<PathBuf> = cfgs.iter().map(|c| dir.join(format!("{}.log", c.name))).collect();
            log_route::open(&paths).context("opening the switches' log files")?.into_iter().map(Some).collect()
        }
        None => vec![None; cfgs.len()],
    };
    // 1. Metrics listeners first, in the namespace we were started in (root: reachable on lo).
    let mut listeners = Vec::with_capacity(cfgs.len());
    for (cfg, route) in cfgs.iter().zip(&routes) {
        let _on = log_route::scoped(*route);
        let l = TcpListener::bind(cfg.metrics_listen)
            .with_context(|| format!("switch {}: binding metrics listener {}", cfg.name, cfg.metrics_listen))?;
        // Each start-up step is logged as it begins, so a slow or killed start shows where it was.
        tracing::info!(switch = %cfg.name, "start-up 1/5: metrics listener bound on {}", cfg.metrics_listen);
        listeners.push(l);
    }
    // Signals go to the signalfd (blocked here, so in every thread spawned later).
    let signals = Signals::block().context("signal setup")?;
    let mut workers = Vec::new();
    let mut threads = Vec::new();
    for i in 0..usize::from(args.workers).min(cfgs.len()) {
        // A switch alone keeps its data-plane thread's name.
        let name = if cfgs.len() == 1 { format!("dp-{}", cfgs[0].name) } else { format!("dp-worker-{i}") };
        let (handle, thread) = crate::worker::Worker::spawn(&name).context("starting a data-plane worker")?;
        workers.push(handle);
        threads.push(thread);
    }
    let (shutdown_tx, shutdown) = tokio::sync::watch::channel(false);
    let (ended_tx, mut ended_rx) = tokio::sync::mpsc::unbounded_channel::<(String, anyhow::Result<()>)>();
    let (mut switches, total) = (Vec::with_capacity(cfgs.len()), cfgs.len());
    for (i, ((cfg, listener), route)) in cfgs.into_iter().zip(listeners).zip(routes).enumerate() {
        let worker = workers[i * workers.len() / total].clone();
        let (shutdown, ended) = (shutdown.clone(), ended_tx.clone());
        let name = cfg.name.clone();
        let t = std::thread::Builder::new()
            .name(format!("sw-{name}"))
            .spawn(move || {
                // This thread's lines, and its data plane's on the worker, go to its log.
                log_route::enter(route);
                let r = switch(cfg, listener, &worker, shutdown);
                if let Err(e) = &r {
                    if total > 1 {
                        tracing::error!(switch = %name, "switch failed: {e:#}");
                    }
                }
                drop(worker);
                let _ = ended.send((name, r));
            })
            .context("starting a switch's control thread")?;
        switches.push(t);
    }
    drop((workers, ended_tx));
    let mut failures = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("building the main thread's tokio runtime")?
        .block_on(async {
            let signals = AsyncSignals::new(signals).context("registering the signalfd")?;
            let mut failures = Vec::new();
            let mut left = total;
            while left > 0 {
                tokio::select! {
                    sig = signals.recv() => {
                        let sig = sig.context("reading the signalfd")?;
                        tracing::info!("received {sig}, shutting down");
                        let _ = shutdown_tx.send(true);
                    }
                    e = ended_rx.recv() => {
                        let Some((name, r)) = e else { break };
                        left -= 1;
                        if let Err(e) = r {
                            failures.push((name, e));
                        }
                    }
                }
            }
            anyhow::Ok(failures)
        })?;
    for t in switches.into_iter().chain(threads) {
        if t.join().is_err() {
            bail!("a switch's thread panicked");
        }
    }
    match failures.pop() {
        None => Ok(()),
        Some((_, e)) if total == 1 => Err(e),
        Some(last) => {
            failures.push(last);
            bail!(
                "{} of {total} switches failed: {}",
                failures.len(),
                failures.iter().map(|(n, e)| format!("{n}: {e:#}")).collect::<Vec<_>>().join("; ")
            )
        }
    }
}

/// One switch of the daemon, on its own thread: start-up, the control side until `shutdown` or
/// its data plane's end, then its shutdown (module docs).
fn switch(
    cfg: SwitchConfig,
    listener: TcpListener,
    worker: &crate::worker::WorkerHandle,
    shutdown: tokio::sync::watch::Receiver<bool>,
) -> anyhow::Result<()> {
    // 2. Then the switch namespace (this thread's: the process's other threads keep theirs).
    if let Some(ns) = &cfg.netns {
        enter_netns(ns).with_context(|| format!("switch {}: entering its network namespace", cfg.name))?;
    }
    tracing::info!(switch = %cfg.name, netns = ?cfg.netns, "start-up 2/5: loading and attaching the XDP program on {} port(s)", cfg.ports.len());

    // 4. XDP program and maps; dropping `xdp` on any error below detaches it again.
    let mut xdp =
        XdpSwitch::load(&cfg).with_context(|| format!("switch {}: loading and attaching the XDP program", cfg.name))?;
    let names: Vec<String> = cfg.ports.iter().map(|p| p.name.clone()).collect();
    let link_mtu = xsk::link_mtu(&names).with_context(|| format!("switch {}: reading the link MTUs", cfg.name))?;
    let dp_cfg = DataPlaneConfig::from_switch(&cfg, link_mtu);
    let (sockets, xsk_stats) = open_sockets(&cfg, &mut xdp, &names, &dp_cfg)?;
    tracing::info!(switch = %cfg.name, "start-up 4/5: AF_XDP sockets registered; building metrics and the data plane");
    let stats = Arc::new(SwitchStats::new(cfg.ports.len()));
    let metrics = Metrics::new(&cfg, stats.clone()).context("building metrics")?;
    let (ctrl, dp_end) = crate::ctrl::channel(CTRL_FRAMES, CTRL_EVENTS).context("control channel")?;
    let ctrl = Arc::new(Mutex::new(ctrl));
    let (tap_producer, tap_consumer, tap) = capture::tap(capture::RING_BYTES);
    let depths =
        crate::dataplane::depth_board(&xdp).with_context(|| format!("switch {}: queue depths for WRED", cfg.name))?;
    let dp = DataPlane::new(sockets, &dp_cfg, stats.clone(), dp_end)
        .context("data plane setup")?
        .with_tap(tap_producer, &tap)
        .with_depths(depths);
    let labels = std::collections::HashMap::from([("switch".to_string(), cfg.name.clone())]);
    // The kernel path (BGP, BFD, ARP: what XDP passes to the stack and the stack sends), in
    // this namespace: the thread inherits it.
    let (ktap_consumer, ktap_thread) = rocefab_plumbing::kernel_tap::start(names.clone())
        .with_context(|| format!("switch {}: the kernel-path capture thread", cfg.name))?;
    let capture_metrics = (
        capture::CaptureMetrics::new(metrics.registry(), &labels).context("registering capture metrics")?,
        tap.clone(),
        ktap_consumer.shared().clone(),
        ktap_thread.lost.clone(),
    );
    let slot = capture::slot(tap_consumer);
    capture::lock_hub(&slot).add_source(ktap_consumer, ktap_thread.thread.thread());
    let stop = dp.stop_handle();
    let (ended, dp_gone) = hand_to_worker(worker, dp)?;
    tracing::info!(
        switch = %cfg.name,
        netns = ?cfg.netns,
        ports = ?names,
        ifindexes = ?xdp.ifindexes(),
        "start-up 5/5: switch up; metrics on http://{}/metrics",
        listener.local_addr().map(|a| a.to_string()).unwrap_or_default()
    );
    let agent = cfg.lldp.enabled.then(|| Arc::new(Mutex::new(NodeAgent::switch(&cfg))));
    let lldp = match &agent {
        Some(a) => {
            Some((LldpMetrics::new(metrics.registry(), &labels).context("registering LLDP metrics")?, a.clone()))
        }
        None => None,
    };
    let bell = lock(&ctrl).to_dp.clone();
    let carrier = CarrierMetrics::new(metrics.registry(), &labels, &names, stats.clone(), bell)
        .context("registering carrier metrics")?;
    let scrape = Arc::new(Mutex::new(Scrape { metrics, xdp, xsk_stats, lldp, capture: capture_metrics }));
    let routing = Arc::new(Mutex::new(Routing {
        carrier: switch_model::carrier::Carrier::new(&cfg),
        routes: cfg.routes.clone(),
        nexthops: cfg.nexthops.len(),
        replaced: carrier.routes_replaced.clone(),
    }));
    // `POST /stop` ends this switch alone (`rocefab fail switch` in a shared process).
    let (stop_tx, stopped) = tokio::sync::watch::channel(false);
    let router = router(&cfg, &scrape, &names, slot, &stats, agent.as_ref())
        .merge(routes_router(&cfg, &scrape, &routing))
        .merge(faults_router(&cfg, &scrape))
        .merge(stop_router(&cfg, stop_tx));
    let links = watch_carrier(&cfg, &scrape, &routing, &names, &carrier);

    // 5. The control side, until a signal, `POST /stop`, the data plane's end or a failure;
    //    then the data plane stopped and XDP detached while the listener still answers, so
    //    that a caller who waits for it to close finds the switch gone.
    let (failure, joined) = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(rt) => {
            let mut side = Box::pin(control(&cfg, listener, router, [shutdown, stopped], ctrl, agent, dp_gone, links));
            let r = rt.block_on(async {
                let r = (&mut side).await;
                stop.stop();
                let joined = ended.recv();
                lock(&scrape).xdp.detach_ports();
                (r.err(), joined)
            });
            // Dropping the runtime closes the listener and ends the server's connection tasks
            // and their hold on `scrape`.
            drop((side, rt));
            r
        }
        Err(e) => {
            drop(links);
            stop.stop();
            (Some(anyhow::Error::new(e).context("building the control side's tokio runtime")), ended.recv())
        }
    };
    shut_down(&cfg, joined, scrape, failure)
}

/// Hands the data plane to its worker: a receiver of how it ended, and one that resolves when it
/// has (its sender is dropped then), so the control side learns of the end at once.
fn hand_to_worker(
    worker: &crate::worker::WorkerHandle,
    dp: DataPlane,
) -> anyhow::Result<(DataPlaneEnd, tokio::sync::oneshot::Receiver<Infallible>)> {
    let (dp_alive, dp_gone) = tokio::sync::oneshot::channel::<Infallible>();
    let (tx, rx) = std::sync::mpsc::channel();
    worker.add(
        dp,
        Box::new(move |r| {
            let _ = tx.send(r);
            drop(dp_alive);
        }),
    )?;
    Ok((rx, dp_gone))
}

/// How a switch's data plane ended; closed without a word if its worker panicked.
type DataPlaneEnd = std::sync::mpsc::Receiver<Result<(), crate::dataplane::DataPlaneError>>;

/// Start-up step 3: the UMEM and one AF_XDP socket per port (`names`), each registered in the
/// XDP program's socket map; and the reader of their kernel statistics.
fn open_sockets(
    cfg: &SwitchConfig,
    xdp: &mut XdpSwitch,
    names: &[String],
    dp_cfg: &DataPlaneConfig,
) -> anyhow::Result<(xsk::XskSet, XskStatsReader)> {
    // The UMEM holds the rings, the buffer at a realistic frame mix, the reserved pool for
    // frames the switch originates and the delay lines (`rocefab plan` prints the same sum).
    let m = &dp_cfg.memory;
    tracing::info!(
        switch = %cfg.name,
        "start-up 3/5: creating the UMEM ({} chunks x {} B = {} MiB, pinned: rings {} RX / {} TX per port = {}, buffer {} + headroom {}, own {}, delay lines {}) and {} AF_XDP socket(s)",
        m.umem_chunks,
        m.chunk_bytes,
        m.umem_bytes() >> 20,
        m.rx_ring,
        m.tx_ring,
        m.ring_chunks,
        m.buffer.shared,
        m.buffer.headroom,
        m.own_chunks,
        m.delay_chunks,
        names.len()
    );
    let sockets = xsk::open(names, m).with_context(|| format!("switch {}: creating AF_XDP sockets", cfg.name))?;
    for (i, p) in sockets.ports.iter().enumerate() {
        xdp.register_xsk(i as u32, p.fd())
            .with_context(|| format!("switch {}: registering the AF_XDP socket of port {}", cfg.name, p.name))?;
    }
    let xsk_stats = sockets.stats_reader().with_context(|| format!("switch {}: AF_XDP statistics reader", cfg.name))?;
    Ok((sockets, xsk_stats))
}

/// The HTTP routes: `/metrics`, the capture stream, `/sample` and, when the agent runs, `/lldp`.
fn router(
    cfg: &SwitchConfig,
    scrape: &Arc<Mutex<Scrape>>,
    names: &[String],
    slot: capture::Slot,
    stats: &Arc<SwitchStats>,
    agent: Option<&Arc<Mutex<NodeAgent>>>,
) -> axum::Router {
    let render = scrape.clone();
    let mut r = http::metrics_router(move || lock(&render).render()).merge(capture::router(
        cfg.name.clone(),
        names.to_vec(),
        slot,
    ));
    // `GET /sample` (the DCQCN timeline, `rocefab run --timeline`).
    let xdp = scrape.clone();
    r = r.merge(sample::router(cfg.clone(), stats.clone(), move || {
        let s = lock(&xdp);
        (s.xdp_counters(), s.kernel_rx_lost())
    }));
    if let Some(a) = agent {
        let a = a.clone();
        r = r.route(
            "/lldp",
            axum::routing::get(move || {
                let report = lock(&a).report();
                async move { axum::Json(report) }
            }),
        );
    }
    r
}

/// After the control side: stops and joins the data-plane thread, detaches XDP, and says why
/// the daemon ends (the control side's `failure`, else the thread's result).
fn shut_down(
    cfg: &SwitchConfig,
    joined: Result<Result<(), crate::dataplane::DataPlaneError>, std::sync::mpsc::RecvError>,
    scrape: Arc<Mutex<Scrape>>,
    failure: Option<anyhow::Error>,
) -> anyhow::Result<()> {
    match Arc::try_unwrap(scrape) {
        Ok(scrape) => {
            let Scrape { xdp, xsk_stats, .. } = scrape.into_inner().unwrap_or_else(PoisonError::into_inner);
            drop(xsk_stats);
            xdp.detach();
        }
        // Cannot happen once the runtime is gone; dropping the last handle detaches anyway.
        Err(_) => tracing::warn!("scrape state still shared at exit; XDP detaches when it is dropped"),
    }
    tracing::info!(switch = %cfg.name, "XDP detached, exiting");
    if let Some(e) = failure {
        return Err(e);
    }
    match joined {
        Ok(Ok(())) => Ok(()),
        Ok(Err(e)) => Err(e).context("data plane failed"),
        Err(_) => bail!("data-plane worker panicked"),
    }
}

/// The control side (run on the main thread's current-thread runtime): serves HTTP on
/// `listener`, logs the data plane's events, and returns on SIGTERM/SIGINT or when the data-plane
/// thread has ended (`dp_gone` resolves; the caller joins it and reports why), or with an error.
///
/// `ctrl` is the control side's end of the rings to the data plane; a task that sends frames
/// (`ControlEnd::send`) takes a clone of it, next to [`from_data_plane`]'s.
#[allow(clippy::too_many_arguments)]
async fn control(
    cfg: &SwitchConfig,
    listener: TcpListener,
    router: axum::Router,
    [mut shutdown, mut stopped]: [tokio::sync::watch::Receiver<bool>; 2],
    ctrl: Arc<Mutex<ControlEnd>>,
    agent: Option<Arc<Mutex<NodeAgent>>>,
    mut dp_gone: tokio::sync::oneshot::Receiver<Infallible>,
    links: impl std::future::Future<Output = anyhow::Result<Infallible>>,
) -> anyhow::Result<()> {
    let from_dp = Doorbell::new(lock(&ctrl).from_dp.clone()).context("registering the data plane's event bell")?;
    let lldp = async {
        match &agent {
            Some(a) => lldp_transmit(cfg, a, &ctrl).await,
            None => std::future::pending().await,
        }
    };
    // A task of its own, so that it still answers while the caller stops the data plane and
    // detaches XDP after this returns (until the runtime is dropped).
    let mut server = tokio::spawn(http::serve(listener, router));
    let signalled = tokio::select! {
        _ = shutdown.wait_for(|s| *s) => {
            tracing::info!(switch = %cfg.name, "shutting down");
            true
        }
        _ = stopped.wait_for(|s| *s) => {
            tracing::info!(switch = %cfg.name, "asked to stop (POST /stop), shutting down");
            true
        }
        _ = lldp => false,
        r = from_data_plane(cfg, &from_dp, &ctrl, agent.as_deref()) => {
            let Err(e) = r;
            return Err(e).context("waiting for data-plane events");
        }
        _ = &mut dp_gone => false,
        r = links => {
            let Err(e) = r;
            return Err(e).context("watching the ports' carrier");
        }
        r = &mut server => {
            let r = r.map_err(anyhow::Error::new).and_then(|r| r.map_err(anyhow::Error::new));
            return Err(r.err().unwrap_or_else(|| anyhow!("stopped"))).context("metrics server");
        }
    };
    if let (true, Some(a)) = (signalled, &agent) {
        shutdown_lldp(cfg, a, &ctrl, &mut dp_gone).await;
    }
    Ok(())
}

/// The families of static routing's link watch ([`switch_model::carrier`]), and the data plane's
/// statistics, whose per-port `no_carrier` flag the watch sets.
struct CarrierMetrics {
    route_updates: prometheus::IntCounter,
    /// Route sets the switch took whole (`PUT /routes`, or zebra's FIB under BGP).
    routes_replaced: prometheus::IntCounter,
    carrier: prometheus::IntGaugeVec,
    oper_up: prometheus::IntGaugeVec,
    data_plane: Arc<SwitchStats>,
    /// Rung after every look: a port that came up without carrier has its TX ring flushed on
    /// the data plane's next pass ([`SwitchStats`]'s `tx_ring_unsent`), not whenever traffic
    /// elsewhere wakes it.
    data_plane_bell: Arc<crate::ctrl::EventFd>,
}

impl CarrierMetrics {
    fn new(
        registry: &prometheus::Registry,
        labels: &std::collections::HashMap<String, String>,
        ports: &[String],
        data_plane: Arc<SwitchStats>,
        data_plane_bell: Arc<crate::ctrl::EventFd>,
    ) -> prometheus::Result<CarrierMetrics> {
        let route_updates = prometheus::IntCounter::with_opts(
            prometheus::Opts::new(
                "rocefab_route_updates_total",
                "ECMP groups the switch rewrote in its XDP maps because a member's port went down \
                 (after the link-down debounce) or came back",
            )
            .const_labels(labels.clone()),
        )?;
        registry.register(Box::new(route_updates.clone()))?;
        let routes_replaced = prometheus::IntCounter::with_opts(
            prometheus::Opts::new(
                "rocefab_routes_replaced_total",
                "Route sets the switch took whole: the fabric's static routes pushed to it (PUT /routes), or \
                 the routes zebra installed (routing: bgp)",
            )
            .const_labels(labels.clone()),
        )?;
        registry.register(Box::new(routes_replaced.clone()))?;
        let carrier = prometheus::IntGaugeVec::new(
            prometheus::Opts::new("rocefab_port_carrier", "1 while the port is up with carrier, else 0")
                .const_labels(labels.clone()),
            &["port"],
        )?;
        registry.register(Box::new(carrier.clone()))?;
        let oper_up = prometheus::IntGaugeVec::new(
            prometheus::Opts::new(
                "rocefab_port_oper_up",
                "1 while the switch's routing counts the port up (its next hops in their ECMP groups), else 0: \
                 a carrier loss counts once it has lasted the 100 ms link-down debounce, a return at once",
            )
            .const_labels(labels.clone()),
            &["port"],
        )?;
        registry.register(Box::new(oper_up.clone()))?;
        for p in ports {
            carrier.with_label_values(&[p.as_str()]).set(1);
            oper_up.with_label_values(&[p.as_str()]).set(1);
        }
        Ok(CarrierMetrics { route_updates, routes_replaced, carrier, oper_up, data_plane, data_plane_bell })
    }
}

/// The switch's routing as its XDP maps hold it: the groups as routed with the carrier filter
/// ([`switch_model::carrier::Carrier`]) and the routes.
struct Routing {
    carrier: switch_model::carrier::Carrier,
    routes: Vec<rocefab_contracts::config::RouteConfig>,
    /// Next hops of the configuration (pushed groups must name them).
    nexthops: usize,
    /// `rocefab_routes_replaced_total`.
    replaced: prometheus::IntCounter,
}

/// What `PUT /routes` takes: the switch's ECMP groups and routes as the fabric's static route
/// computation has them now (`rocefab fail link` recomputes them without a cut link).
#[derive(serde::Deserialize, serde::Serialize)]
struct RoutesBody {
    groups: Vec<Vec<u32>>,
    routes: Vec<rocefab_contracts::config::RouteConfig>,
}

/// `PUT /routes` ([`RoutesBody`]; 400 naming what is wrong) and `GET /routes` (what the maps
/// hold: the routes and each group's live members).
/// Body of `PUT /ports/silent`.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct SilentBody {
    port: String,
    silent: bool,
}

/// `PUT /ports/silent` `{"port": "eth5", "silent": true}`: the port drops every frame it
/// receives while its carrier stays up (`rocefab fail link --silent`), or works again.
fn faults_router(cfg: &SwitchConfig, scrape: &Arc<Mutex<Scrape>>) -> axum::Router {
    use axum::http::StatusCode;
    let (s, name) = (scrape.clone(), cfg.name.clone());
    let ports: Vec<String> = cfg.ports.iter().map(|p| p.name.clone()).collect();
    let put = move |axum::Json(b): axum::Json<SilentBody>| {
        let res = match ports.iter().position(|p| *p == b.port) {
            None => Err(format!("switch {name} has no port {:?} (ports: {})", b.port, ports.join(", "))),
            Some(i) => lock(&s).xdp.set_port_silent(i as u32, b.silent).map_err(|e| format!("{e}")),
        };
        if res.is_ok() {
            tracing::warn!(switch = %name, port = %b.port, silent = b.silent, "silent failure: every frame the port receives is dropped");
        }
        async move {
            match res {
                Ok(()) => (StatusCode::OK, "ok\n".to_string()),
                Err(e) => (StatusCode::BAD_REQUEST, format!("{e}\n")),
            }
        }
    };
    axum::Router::new().route("/ports/silent", axum::routing::put(put))
}

/// `POST /stop`: this switch shuts down as on SIGTERM (its LLDP shutdown frames, its data plane
/// stopped, XDP detached, its listener closed); the daemon's other switches go on.
fn stop_router(cfg: &SwitchConfig, stop: tokio::sync::watch::Sender<bool>) -> axum::Router {
    let name = cfg.name.clone();
    let post = move || {
        tracing::info!(switch = %name, "POST /stop");
        let _ = stop.send(true);
        async { (axum::http::StatusCode::OK, "stopping\n") }
    };
    axum::Router::new().route("/stop", axum::routing::post(post))
}

fn routes_router(cfg: &SwitchConfig, scrape: &Arc<Mutex<Scrape>>, routing: &Arc<Mutex<Routing>>) -> axum::Router {
    use axum::http::StatusCode;
    let (s, r, name) = (scrape.clone(), routing.clone(), cfg.name.clone());
    let put = move |axum::Json(b): axum::Json<RoutesBody>| {
        let res = apply_routes(&name, &s, &r, b);
        async move {
            match res {
                Ok(n) => (StatusCode::OK, format!("{n} groups and routes written\n")),
                Err(e) => (StatusCode::BAD_REQUEST, format!("{e:#}\n")),
            }
        }
    };
    let r = routing.clone();
    let get = move || {
        let g = lock(&r);
        let body = RoutesBody { groups: g.carrier.live().to_vec(), routes: g.routes.clone() };
        async move { axum::Json(body) }
    };
    axum::Router::new().route("/routes", axum::routing::put(put).get(get))
}

/// Writes pushed groups (with the carrier filter) and routes into the XDP maps; how many
/// groups and routes were written.
fn apply_routes(name: &str, scrape: &Mutex<Scrape>, routing: &Mutex<Routing>, b: RoutesBody) -> anyhow::Result<usize> {
    let mut r = lock(routing);
    if let Some((g, m)) = b.groups.iter().enumerate().find(|(_, m)| {
        m.len() > dataplane_common::limits::MAX_GROUP_MEMBERS || m.iter().any(|&nh| nh as usize >= r.nexthops)
    }) {
        bail!(
            "group {g} {m:?}: more than {} members or a next hop beyond the {} configured",
            dataplane_common::limits::MAX_GROUP_MEMBERS,
            r.nexthops
        );
    }
    if b.groups.len() > dataplane_common::limits::MAX_GROUPS as usize {
        bail!("{} groups, at most {}", b.groups.len(), dataplane_common::limits::MAX_GROUPS);
    }
    if let Some(x) = b.routes.iter().find(|x| x.group.is_some_and(|g| g as usize >= b.groups.len())) {
        bail!("route {}/{} names group {:?} of {}", x.prefix, x.len, x.group, b.groups.len());
    }
    let live = r.carrier.set_groups(b.groups);
    let mut s = lock(scrape);
    for (g, members) in &live {
        s.xdp.set_group(*g, members).with_context(|| format!("writing ECMP group {g}"))?;
    }
    s.xdp.replace_routes(&r.routes, &b.routes).context("writing the routes")?;
    let n = live.len() + b.routes.len();
    tracing::info!(switch = %name, groups = live.len(), routes = b.routes.len(), "routes replaced");
    r.routes = b.routes;
    r.replaced.inc();
    Ok(n)
}

/// The link and FIB watch: at start and on every link notification of the switch's namespace
/// (RTM_NEWLINK/RTM_DELLINK, rtnetlink), reads the ports' carrier and rewrites the ECMP groups
/// whose live members changed ([`switch_model::carrier`]); with `fib` (`routing: bgp`) also on every
/// route notification, reads the routes zebra installed and writes them with the configuration's
/// ([`switch_model::fib`]). Returns only on an error.
async fn watch_carrier(
    cfg: &SwitchConfig,
    scrape: &Mutex<Scrape>,
    routing: &Mutex<Routing>,
    names: &[String],
    m: &CarrierMetrics,
) -> anyhow::Result<Infallible> {
    use futures_util::{FutureExt, StreamExt};
    use rtnetlink::sys::AsyncSocket;
    let (mut conn, handle, mut messages) = rtnetlink::new_connection().context("opening a netlink socket")?;
    let groups = rtnetlink::constants::RTMGRP_LINK | if cfg.fib { rtnetlink::constants::RTMGRP_IPV4_ROUTE } else { 0 };
    conn.socket_mut()
        .socket_mut()
        .bind(&rtnetlink::sys::SocketAddr::new(0, groups))
        .context("subscribing to link and route notifications")?;
    if cfg.fib {
        // zebra keeps ECMP next hops as kernel nexthop objects: when a group gains or loses a
        // member, only the object changes (RTM_NEWNEXTHOP), not the routes using it.
        conn.socket_mut()
            .socket_mut()
            .add_membership(RTNLGRP_NEXTHOP)
            .context("subscribing to nexthop notifications")?;
    }
    tokio::spawn(conn);
    let ifindexes = lock(scrape).xdp.ifindexes().to_vec();
    let mut taken: Option<Vec<switch_model::fib::KernelRoute>> = None;
    let t0 = std::time::Instant::now();
    loop {
        // Unreadable (a netlink error): every port keeps its state.
        let carriers = link_carriers(&handle).await.unwrap_or_else(|e| {
            tracing::warn!(switch = %cfg.name, "reading the ports' carrier: {e:#}");
            std::collections::HashMap::new()
        });
        let seen: Vec<Option<bool>> = ifindexes.iter().map(|i| carriers.get(i).copied()).collect();
        let debounce = apply_carrier(cfg, scrape, routing, names, &seen, m, t0.elapsed().as_nanos() as u64)?;
        if cfg.fib {
            let kernel = kernel_routes(&handle).await.context("reading the kernel's routes")?;
            if taken.as_ref() != Some(&kernel) {
                let (groups, routes) = switch_model::fib::merge(cfg, &ifindexes, &kernel);
                tracing::info!(switch = %cfg.name, kernel_routes = kernel.len(), "FIB changed");
                apply_routes(&cfg.name, scrape, routing, RoutesBody { groups, routes })?;
                taken = Some(kernel);
            }
        }
        // The next notification, or the end of a pending carrier loss's debounce.
        let wait =
            debounce.map(|at| std::time::Duration::from_nanos(at.saturating_sub(t0.elapsed().as_nanos() as u64)));
        tokio::select! {
            msg = messages.next() => {
                if msg.is_none() {
                    bail!("the netlink socket closed");
                }
            }
            _ = tokio::time::sleep(wait.unwrap_or(std::time::Duration::from_secs(3600))), if wait.is_some() => {}
        }
        // A burst of notifications (BGP converging) is one look.
        while let Some(Some(_)) = messages.next().now_or_never() {}
    }
}

/// Every interface of the namespace by index: up (`IFF_UP`) with carrier (`IFLA_CARRIER`, the
/// driver's state now). Not `IFF_RUNNING`: it follows the operstate, which the kernel's linkwatch
/// may update up to a second after the carrier changed (its non-urgent path), so a carrier blip
/// of a few ms read as a loss of hundreds of ms and emptied ECMP groups past their debounce.
async fn link_carriers(handle: &rtnetlink::Handle) -> anyhow::Result<std::collections::HashMap<u32, bool>> {
    use futures_util::TryStreamExt;
    use rtnetlink::packet_route::link::{LinkAttribute, LinkFlags};
    let mut out = std::collections::HashMap::new();
    let mut links = handle.link().get().execute();
    while let Some(l) = links.try_next().await? {
        let carrier = l
            .attributes
            .iter()
            .find_map(|a| if let LinkAttribute::Carrier(c) = a { Some(*c != 0) } else { None })
            .unwrap_or_else(|| l.header.flags.contains(LinkFlags::LowerUp));
        out.insert(l.header.index, l.header.flags.contains(LinkFlags::Up) && carrier);
    }
    Ok(out)
}

/// `RTNLGRP_NEXTHOP` (linux/rtnetlink.h): nexthop object notifications.
const RTNLGRP_NEXTHOP: u32 = 32;

/// The routes zebra installed (protocol bgp) in the main IPv4 table, with their outgoing
/// interfaces, sorted.
async fn kernel_routes(handle: &rtnetlink::Handle) -> anyhow::Result<Vec<switch_model::fib::KernelRoute>> {
    use futures_util::TryStreamExt;
    use rtnetlink::packet_route::route::{RouteAddress, RouteAttribute, RouteHeader, RouteProtocol};
    let mut out = Vec::new();
    let mut stream = handle.route().get(rtnetlink::RouteMessageBuilder::<std::net::Ipv4Addr>::new().build()).execute();
    while let Some(r) = stream.try_next().await? {
        if r.header.protocol != RouteProtocol::Bgp || r.header.table != RouteHeader::RT_TABLE_MAIN {
            continue;
        }
        let mut prefix = std::net::Ipv4Addr::UNSPECIFIED;
        let mut oifs = Vec::new();
        for a in &r.attributes {
            match a {
                RouteAttribute::Destination(RouteAddress::Inet(d)) => prefix = *d,
                RouteAttribute::Oif(i) => oifs.push(*i),
                RouteAttribute::MultiPath(hops) => oifs.extend(hops.iter().map(|h| h.interface_index)),
                _ => {}
            }
        }
        oifs.sort_unstable();
        out.push(switch_model::fib::KernelRoute { prefix, len: r.header.destination_prefix_length, oifs });
    }
    out.sort_by_key(|k| (k.prefix, k.len));
    Ok(out)
}

/// One look of [`watch_carrier`] at `now` (ns on its clock): the ports' carrier as read (`seen`,
/// by port; `None`: unreadable), and the groups that changed written; when a pending carrier loss's debounce ends, if one is pending.
fn apply_carrier(
    cfg: &SwitchConfig,
    scrape: &Mutex<Scrape>,
    routing: &Mutex<Routing>,
    names: &[String],
    seen: &[Option<bool>],
    m: &CarrierMetrics,
    now: u64,
) -> anyhow::Result<Option<u64>> {
    let mut r = lock(routing);
    // An interface that cannot be read keeps its state (a failed read is not a cut cable).
    let up: Vec<bool> =
        (0..names.len()).map(|p| seen.get(p).copied().flatten().unwrap_or_else(|| r.carrier.is_up(p))).collect();
    for (p, (&seen, name)) in up.iter().zip(names).enumerate() {
        // The data plane drops what it holds for a port without carrier at once.
        if let Some(s) = m.data_plane.ports.get(p) {
            s.no_carrier.store(!seen, std::sync::atomic::Ordering::Relaxed);
        }
        let g = m.carrier.with_label_values(&[name.as_str()]);
        if i64::from(seen) != g.get() {
            tracing::info!(switch = %cfg.name, port = %name, carrier = seen, "port carrier changed");
            g.set(i64::from(seen));
        }
    }
    // Routing, then the maps (as `apply_routes` takes them).
    let changed = r.carrier.update(&up, now);
    if !changed.is_empty() {
        let mut s = lock(scrape);
        for (g, members) in changed {
            s.xdp.set_group(g, &members).with_context(|| format!("rewriting ECMP group {g}"))?;
            tracing::info!(switch = %cfg.name, group = g, ?members, "ECMP group rewritten");
            m.route_updates.inc();
        }
    }
    // After the maps: a controller that reads 0 here finds the port out of the groups.
    for (p, name) in names.iter().enumerate() {
        m.oper_up.with_label_values(&[name.as_str()]).set(i64::from(r.carrier.is_up(p)));
    }
    m.data_plane_bell.ring();
    Ok(r.carrier.next_deadline())
}

/// The LLDP agent's transmit side: hands every due LLDPDU to the data plane (which sends it
/// through the port's control queue) and sleeps until the next one is due or a neighbour ages
/// out. A full ring is logged and the frame is sent at the next interval.
async fn lldp_transmit(cfg: &SwitchConfig, agent: &Mutex<NodeAgent>, ctrl: &Mutex<ControlEnd>) -> Infallible {
    loop {
        let wait = lldp_tick(cfg, agent, ctrl, |name| {
            let running = rocefab_plumbing::link::link_running(name);
            // The switch's ports are attached by index once; present is all that matters here.
            Link { ifindex: running.map(|_| 0), running: running.unwrap_or(false) }
        });
        tokio::time::sleep(wait).await;
    }
}

/// One round of [`lldp_transmit`]: looks at the ports' links (`look`), queues every LLDPDU due
/// now on the control ring, and returns how long to sleep (until the agent's next deadline,
/// between 1 ms and 1 s).
fn lldp_tick(
    cfg: &SwitchConfig,
    agent: &Mutex<NodeAgent>,
    ctrl: &Mutex<ControlEnd>,
    look: impl Fn(&str) -> Link,
) -> std::time::Duration {
    let mut a = lock(agent);
    let now = a.now();
    a.watch_links(now, look);
    let frames = a.poll(now);
    let mut c = lock(ctrl);
    for (port, f) in frames {
        let Some(own) = OwnFrame::new(port as u16, &f) else {
            tracing::warn!(switch = %cfg.name, port, len = f.len(), "LLDPDU longer than a control frame; not sent");
            continue;
        };
        if c.send(own).is_err() {
            tracing::warn!(switch = %cfg.name, port, "control ring full; LLDPDU not sent");
        }
    }
    let wait = a.next_deadline().saturating_sub(a.now());
    std::time::Duration::from_nanos(wait.clamp(1_000_000, 1_000_000_000))
}

/// On shutdown: a TTL-0 LLDPDU out of every port (IEEE 802.1AB 9.2.7.7.2), then a bounded wait
/// until the data-plane thread has taken them off the ring (it sends them in the same pass).
async fn shutdown_lldp(
    cfg: &SwitchConfig,
    agent: &Mutex<NodeAgent>,
    ctrl: &Mutex<ControlEnd>,
    dp_gone: &mut tokio::sync::oneshot::Receiver<Infallible>,
) {
    let frames = lock(agent).shutdown_frames();
    let capacity = {
        let mut c = lock(ctrl);
        let capacity = c.frame_slots();
        for (port, f) in frames {
            if let Some(own) = OwnFrame::new(port as u16, &f) {
                if c.send(own).is_err() {
                    tracing::warn!(switch = %cfg.name, port, "control ring full; shutdown LLDPDU not sent");
                }
            }
        }
        capacity
    };
    let drained = async {
        while lock(ctrl).frame_slots() < capacity {
            tokio::time::sleep(std::time::Duration::from_millis(2)).await;
        }
        // One more pass of the data-plane thread moves them from its control queue to TX.
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    };
    tokio::select! {
        _ = drained => {}
        _ = dp_gone => {}
        _ = tokio::time::sleep(std::time::Duration::from_millis(500)) => {
            tracing::warn!(switch = %cfg.name, "shutdown LLDPDUs still queued after 500 ms");
        }
    }
}

/// The one waiter on the data plane's bell (an fd registers with the runtime once): at each
/// ring, logs every event the data plane reported and gives the LLDP frames the ports received
/// to the agent.
async fn from_data_plane(
    cfg: &SwitchConfig,
    bell: &Doorbell,
    ctrl: &Mutex<ControlEnd>,
    agent: Option<&Mutex<NodeAgent>>,
) -> std::io::Result<Infallible> {
    let dilation = cfg.dilation().unwrap_or_default();
    loop {
        bell.rung().await?;
        take_from_data_plane(cfg, dilation, &mut lock(ctrl), agent);
    }
}

/// Empties what the data plane handed up: LLDP frames go to the agent (`None`: disabled, logged
/// at debug), events are logged.
fn take_from_data_plane(
    cfg: &SwitchConfig,
    dilation: Dilation,
    ctrl: &mut ControlEnd,
    agent: Option<&Mutex<NodeAgent>>,
) {
    let port = |i: usize| cfg.ports.get(i).map_or("?", |p| p.name.as_str());
    while let Some(f) = ctrl.next_received() {
        match agent {
            Some(a) => {
                let mut a = lock(a);
                let now = a.now();
                a.on_frame(usize::from(f.port), f.bytes(), now);
            }
            None => {
                tracing::debug!(switch = %cfg.name, port = port(usize::from(f.port)), "LLDP frame received; agent disabled")
            }
        }
    }
    while let Some(e) = ctrl.next_event() {
        match e {
            DpEvent::Storm { port: p, prio, paused_for_ns } => tracing::warn!(
                switch = %cfg.name, port = port(p), priority = prio,
                "PFC watchdog: storm detected, queue paused for {:.3} ms emulated (action {:?})",
                dilation.to_emulated_ns(paused_for_ns) as f64 / 1e6, cfg.qos.watchdog.action
            ),
            DpEvent::Restore { port: p, prio } => tracing::warn!(
                switch = %cfg.name, port = port(p), priority = prio, "PFC watchdog: queue restored"
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ctrl::DataEnd;
    use lldp_agent::{Dcb, Identity, PortAgent, Timing};
    use std::time::Duration;

    fn cfg() -> SwitchConfig {
        serde_json::from_str(
            r#"{"name":"rail1","role":"rail","netns":null,"hash_seed":1,"metrics_listen":"127.0.0.1:0",
                "queue_limit_bytes":1048576,"xdp_mode":"skb","nexthops":[],"groups":[],"routes":[],
                "ports":[{"name":"eth0","mac":"02:00:00:00:00:01","line_rate_bps":1000000000,"peer":"host1:gpu0"},
                         {"name":"eth1","mac":"02:00:00:00:00:02","line_rate_bps":1000000000,"peer":"host2:gpu0"}]}"#,
        )
        .unwrap()
    }

    fn rings(frames: usize) -> (Mutex<ControlEnd>, DataEnd) {
        let (c, d) = crate::ctrl::channel(frames, 8).unwrap();
        (Mutex::new(c), d)
    }

    fn up(_: &str) -> Link {
        Link { ifindex: Some(0), running: true }
    }

    /// (port, source MAC, EtherType) of every frame the data plane would send.
    fn sent(dp: &mut DataEnd) -> Vec<(u16, [u8; 6], u16)> {
        std::iter::from_fn(|| dp.next_frame())
            .map(|f| {
                let b = f.bytes();
                (f.port, b[6..12].try_into().unwrap(), u16::from_be_bytes([b[12], b[13]]))
            })
            .collect()
    }

    #[test]
    fn each_port_queues_its_fast_start_lldpdu_once_then_sleeps_until_the_next() {
        let cfg = cfg();
        let agent = Mutex::new(NodeAgent::switch(&cfg));
        let (ctrl, mut dp) = rings(8);
        let wait = lldp_tick(&cfg, &agent, &ctrl, up);
        let mac = |last| [2, 0, 0, 0, 0, last];
        assert_eq!(sent(&mut dp), [(0, mac(1), 0x88cc), (1, mac(2), 0x88cc)]);
        // Fast start sends the next LLDPDU a second later (IEEE 802.1AB msgFastTx 1 s).
        assert!(wait > Duration::from_millis(900) && wait <= Duration::from_secs(1), "{wait:?}");
        let again = lldp_tick(&cfg, &agent, &ctrl, up);
        assert!(sent(&mut dp).is_empty(), "nothing is due yet");
        assert!(again <= wait && again >= Duration::from_millis(1), "{again:?}");
    }

    #[test]
    fn a_full_control_ring_drops_an_lldpdu_instead_of_waiting() {
        let cfg = cfg();
        let agent = Mutex::new(NodeAgent::switch(&cfg));
        let (ctrl, mut dp) = rings(1);
        lldp_tick(&cfg, &agent, &ctrl, up);
        assert_eq!(sent(&mut dp).iter().map(|f| f.0).collect::<Vec<_>>(), [0], "one slot: port 1's frame is dropped");
    }

    #[test]
    fn frames_the_data_plane_hands_up_reach_the_agent_and_events_are_taken() {
        let cfg = cfg();
        let agent = Mutex::new(NodeAgent::switch(&cfg));
        let (ctrl, mut dp) = rings(8);
        let id = Identity {
            chassis_mac: [2, 0, 0, 0, 1, 1],
            mac: [2, 0, 0, 0, 1, 1],
            port: "gpu0".into(),
            system_name: "host1".into(),
            port_description: "host1 gpu0".into(),
            bridge: false,
        };
        let nic = PortAgent::new(Timing::default(), id, Dcb::nic(true, 1 << 3, 24, 3, 48, 7), 0);
        assert!(dp.hand_up(1, &nic.frame(120)));
        dp.report(DpEvent::Restore { port: 1, prio: 3 });
        let dilation = cfg.dilation().unwrap();
        take_from_data_plane(&cfg, dilation, &mut lock(&ctrl), Some(&agent));
        let report = lock(&agent).report();
        let heard = |p: usize| report.ports[p].neighbour.as_ref().and_then(|n| n.info.system_name.clone());
        assert_eq!((heard(0), heard(1)), (None, Some("host1".to_string())));
        let mut c = lock(&ctrl);
        assert!(c.next_received().is_none() && c.next_event().is_none(), "both rings emptied");
        // Without an agent the frame is taken off the ring all the same.
        drop(c);
        assert!(dp.hand_up(0, &nic.frame(120)));
        take_from_data_plane(&cfg, dilation, &mut lock(&ctrl), None);
        assert!(lock(&ctrl).next_received().is_none());
    }
}
