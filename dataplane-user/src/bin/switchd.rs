//! `rocefab-switchd --config <switch.json> [--log-file <file>]`
//!
//! One switch of the emulated fabric: binds the Prometheus listener (in the namespace it was
//! started in), enters the switch's network namespace, loads and attaches the XDP program,
//! opens one AF_XDP socket per port, and runs the data-plane thread until SIGTERM/SIGINT; then
//! stops the thread, closes the sockets, detaches XDP and exits 0. Startup failures exit 1 with
//! a message naming what failed.
use std::net::TcpListener;
use std::os::fd::AsFd;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::{Arc, Mutex};

use anyhow::{bail, Context};
use clap::Parser;
use dataplane_common::config::SwitchConfig;
use dataplane_user::daemon::{enter_netns, wait_control, Signals};
use dataplane_user::ctrl::DpEvent;
use dataplane_user::dataplane::{DataPlane, DataPlaneConfig, CTRL_EVENTS, CTRL_FRAMES};
use dataplane_user::loader::XdpSwitch;
use dataplane_user::metrics::{accept_and_serve, Metrics};
use dataplane_user::stats::SwitchStats;
use dataplane_user::xsk;

#[derive(Debug, Parser)]
#[command(name = "rocefab-switchd", version, about = "rocefab switch daemon (XDP + AF_XDP data plane)")]
struct Args {
    /// Switch configuration (JSON, as written by `rocefab up`).
    #[arg(long)]
    config: PathBuf,
    /// Append logs to this file instead of stderr.
    #[arg(long)]
    log_file: Option<PathBuf>,
}

fn init_logging(args: &Args) -> anyhow::Result<()> {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let b = tracing_subscriber::fmt().with_env_filter(filter);
    match &args.log_file {
        Some(p) => {
            let f = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(p)
                .with_context(|| format!("opening log file {}", p.display()))?;
            b.with_ansi(false).with_writer(Mutex::new(f)).init();
        }
        None => b.with_writer(std::io::stderr).init(),
    }
    Ok(())
}

fn run(args: &Args) -> anyhow::Result<()> {
    let cfg = SwitchConfig::load(&args.config)
        .with_context(|| format!("loading switch config {}", args.config.display()))?;
    // 1. Metrics listener first, in the namespace we were started in (root: reachable on lo).
    let listener = TcpListener::bind(cfg.metrics_listen)
        .with_context(|| format!("switch {}: binding metrics listener {}", cfg.name, cfg.metrics_listen))?;
    listener.set_nonblocking(true).context("metrics listener: set non-blocking")?;
    // 2. Then the switch namespace, before any thread exists.
    if let Some(ns) = &cfg.netns {
        enter_netns(ns).with_context(|| format!("switch {}: entering its network namespace", cfg.name))?;
    }
    // 3. Signals go to the signalfd (blocked here, so in every thread spawned later).
    let signals = Signals::block().context("signal setup")?;

    // 4. XDP program and maps; dropping `xdp` on any error below detaches it again.
    let mut xdp =
        XdpSwitch::load(&cfg).with_context(|| format!("switch {}: loading and attaching the XDP program", cfg.name))?;
    let names: Vec<String> = cfg.ports.iter().map(|p| p.name.clone()).collect();
    let dp_cfg = DataPlaneConfig::from_switch(&cfg);
    // The UMEM holds the rings plus the configured buffer at the smallest frame, plus the
    // reserved pool for frames the switch originates.
    let buffer_frames = u32::try_from(dp_cfg.buffer_frames())
        .with_context(|| format!("switch {}: buffer of {} bytes needs too many frames", cfg.name, cfg.qos.buffer_bytes))?;
    let sockets = xsk::open(&names, buffer_frames)
        .with_context(|| format!("switch {}: creating AF_XDP sockets", cfg.name))?;
    for (i, p) in sockets.ports.iter().enumerate() {
        xdp.register_xsk(i as u32, p.fd())
            .with_context(|| format!("switch {}: registering the AF_XDP socket of port {}", cfg.name, p.name))?;
    }
    let xsk_stats = sockets
        .stats_reader()
        .with_context(|| format!("switch {}: AF_XDP statistics reader", cfg.name))?;
    let stats = Arc::new(SwitchStats::new(cfg.ports.len()));
    let metrics = Metrics::new(&cfg, stats.clone()).context("building metrics")?;
    let (mut ctrl, dp_end) = dataplane_user::ctrl::channel(CTRL_FRAMES, CTRL_EVENTS).context("control channel")?;
    let dp = DataPlane::new(sockets, &dp_cfg, stats, dp_end).context("data plane setup")?;
    let stop = dp.stop_handle();
    let thread = std::thread::Builder::new()
        .name(format!("dp-{}", cfg.name))
        .spawn(move || dp.run())
        .context("spawning the data-plane thread")?;
    tracing::info!(
        switch = %cfg.name,
        netns = ?cfg.netns,
        ports = ?names,
        ifindexes = ?xdp.ifindexes(),
        "switch up; metrics on http://{}/metrics",
        listener.local_addr().map(|a| a.to_string()).unwrap_or_default()
    );

    // 5. Control loop: scrapes and signals; also notices a dead data-plane thread.
    let mut failure = None;
    loop {
        let ready = match wait_control(listener.as_fd(), &signals, Some(ctrl.from_dp.as_fd()), 1000) {
            Ok(r) => r,
            Err(e) => {
                failure = Some(anyhow::Error::new(e));
                break;
            }
        };
        if ready.extra {
            ctrl.from_dp.drain();
            while let Some(e) = ctrl.next_event() {
                let port = |i: usize| cfg.ports.get(i).map_or("?", |p| p.name.as_str());
                match e {
                    DpEvent::Storm { port: p, prio, paused_for_ns } => tracing::warn!(
                        switch = %cfg.name, port = port(p), priority = prio,
                        "PFC watchdog: storm detected, queue paused for {:.1} ms (action {:?})",
                        paused_for_ns as f64 / 1e6, cfg.qos.watchdog.action
                    ),
                    DpEvent::Restore { port: p, prio } => tracing::warn!(
                        switch = %cfg.name, port = port(p), priority = prio, "PFC watchdog: queue restored"
                    ),
                }
            }
        }
        if ready.signal {
            if let Some(sig) = signals.read() {
                tracing::info!("received {sig}, shutting down");
                break;
            }
        }
        if ready.listener {
            let xdp_counters = match xdp.counters() {
                Ok(c) => Some(c),
                Err(e) => {
                    tracing::warn!("reading XDP counters: {e}");
                    None
                }
            };
            let xsk_counters = match xsk_stats.read() {
                Ok(s) => Some(s),
                Err(e) => {
                    tracing::warn!("reading AF_XDP socket statistics: {e}");
                    None
                }
            };
            match accept_and_serve(&listener, || metrics.render(xdp_counters.as_deref(), xsk_counters.as_deref())) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                Err(e) => tracing::warn!("metrics request: {e}"),
            }
        }
        if thread.is_finished() {
            break;
        }
    }
    stop.stop();
    let joined = thread.join();
    drop(xsk_stats);
    xdp.detach();
    tracing::info!(switch = %cfg.name, "XDP detached, exiting");
    if let Some(e) = failure {
        return Err(e);
    }
    match joined {
        Ok(Ok(())) => Ok(()),
        Ok(Err(e)) => Err(e).context("data-plane thread failed"),
        Err(_) => bail!("data-plane thread panicked"),
    }
}

fn main() -> ExitCode {
    let args = Args::parse();
    if let Err(e) = init_logging(&args) {
        eprintln!("rocefab-switchd: {e:#}");
        return ExitCode::FAILURE;
    }
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!("{e:#}");
            if args.log_file.is_some() {
                eprintln!("rocefab-switchd: {e:#}");
            }
            ExitCode::FAILURE
        }
    }
}
