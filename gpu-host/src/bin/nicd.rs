//! `rocefab-nicd --config <host.nicd.json> [--log-file <file>]`: the control plane of one GPU
//! host's NICs, started by `rocefab up` and running as long as the fabric. It binds its HTTP
//! listener (in the namespace it was started in), enters the host's network namespace, and runs
//! an LLDP/DCBX agent on every GPU NIC ([`gpu_host::nic::agent`]) on a tokio current-thread
//! runtime:
//!
//! - LLDPDUs with the NIC's DCBX TLVs, fast start at start-up and when an interface appears or a
//!   new neighbour is seen, then every `tx_interval`;
//! - received LLDPDUs update the neighbour, which ages out at its TTL; malformed ones are counted;
//! - `GET /lldp`: the neighbour table and negotiated settings as JSON (`lldp_agent::NodeReport`);
//!   `GET /metrics`: Prometheus metrics;
//! - SIGTERM/SIGINT: a shutdown LLDPDU (TTL 0) on every NIC, then exit 0.
use std::collections::HashMap;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::Parser;
use dataplane_common::config::Mac;
use dataplane_user::daemon::{enter_netns, AsyncSignals, Signals};
use dataplane_user::lldp::link_running;
use gpu_host::nic::agent::{ifindex, ifname, timing, AgentConfig, LldpSocket};
use lldp_agent::metrics::LldpMetrics;
use lldp_agent::{Identity, NodeReport, PortAgent, Rx};
use tokio::io::unix::AsyncFd;

#[derive(Debug, Parser)]
#[command(name = "rocefab-nicd", version, about = "rocefab GPU-host NIC agent: LLDP/DCBX on every GPU NIC")]
struct Args {
    /// Agent configuration (JSON, as written by `rocefab up`).
    #[arg(long)]
    config: PathBuf,
    /// Append logs to this file instead of stderr.
    #[arg(long)]
    log_file: Option<PathBuf>,
}

/// One NIC's agent and the interface index it was last seen at.
struct Nic {
    agent: PortAgent,
    ifindex: Option<i32>,
    /// Link up with carrier at the last look.
    running: bool,
    /// Mismatches last logged, to log each change once.
    logged: Vec<String>,
}

struct State {
    host: String,
    nics: Vec<Nic>,
    epoch: Instant,
}

impl State {
    fn now(&self) -> u64 {
        self.epoch.elapsed().as_nanos() as u64
    }
    fn report(&self) -> NodeReport {
        let now = self.now();
        NodeReport { node: self.host.clone(), kind: "host".into(), ports: self.nics.iter().map(|n| n.agent.report(now)).collect() }
    }
}

fn init_logging(args: &Args) -> anyhow::Result<()> {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let b = tracing_subscriber::fmt().with_env_filter(filter);
    match &args.log_file {
        Some(p) => {
            let f = std::fs::OpenOptions::new().create(true).append(true).open(p).with_context(|| format!("opening log file {}", p.display()))?;
            b.with_ansi(false).with_writer(std::sync::Mutex::new(f)).init();
        }
        None => b.with_writer(std::io::stderr).init(),
    }
    Ok(())
}

/// Looks every NIC up again (fast start when one appears, changes index or its link comes up)
/// and sends what is due.
fn poll(st: &mut State, sock: &LldpSocket) -> u64 {
    let now = st.now();
    let mut next = now + 1_000_000_000;
    for n in &mut st.nics {
        let name = n.agent.identity().port.clone();
        let idx = ifindex(&name);
        let running = link_running(&name).unwrap_or(false);
        if idx != n.ifindex {
            if idx.is_some() {
                tracing::info!(nic = %name, ifindex = ?idx, "interface appeared: LLDP fast start");
                n.agent.link_up(now);
            } else {
                tracing::warn!(nic = %name, "interface gone from the namespace");
            }
            n.ifindex = idx;
        } else if running && !n.running && idx.is_some() {
            tracing::info!(nic = %name, "link up: LLDP fast start");
            n.agent.link_up(now);
        }
        n.running = running;
        if let Some(frame) = n.agent.poll(now) {
            if let Some(i) = n.ifindex {
                if let Err(e) = sock.send(i, &frame) {
                    tracing::warn!(nic = %n.agent.identity().port, "sending LLDP: {e}");
                }
            }
        }
        next = next.min(n.agent.next_deadline());
    }
    next
}

/// Logs negotiation changes and mismatches once each.
fn log_changes(st: &mut State) {
    for n in &mut st.nics {
        let (oper, mismatches) = n.agent.negotiate();
        let now: Vec<String> = mismatches.iter().map(|m| m.to_string()).collect();
        if now != n.logged {
            for m in now.iter().filter(|m| !n.logged.contains(m)) {
                tracing::warn!(host = %st.host, nic = %n.agent.identity().port, "DCBX mismatch: {m}");
            }
            n.logged = now;
        }
        tracing::debug!(nic = %n.agent.identity().port, pfc = oper.pfc_enable, "negotiated");
    }
}

fn on_readable(st: &mut State, sock: &LldpSocket, buf: &mut [u8]) {
    loop {
        let (len, idx) = match sock.recv(buf) {
            Ok(r) => r,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return,
            Err(e) => {
                tracing::warn!("receiving LLDP: {e}");
                return;
            }
        };
        let now = st.now();
        let name = ifname(idx);
        let Some(n) = st.nics.iter_mut().find(|n| Some(n.agent.identity().port.as_str()) == name.as_deref()) else {
            continue;
        };
        let frame = &buf[..len.min(buf.len())];
        let port = n.agent.identity().port.clone();
        match n.agent.on_frame(frame, now) {
            Rx::Neighbour { new: true } => {
                let nb = n.agent.neighbour().map(|x| format!("{} port {}", x.system_name.as_deref().unwrap_or(&x.chassis), x.port));
                tracing::info!(nic = %port, neighbour = ?nb, "new LLDP neighbour");
                let (oper, _) = n.agent.negotiate();
                tracing::info!(nic = %port, pfc = %lldp_agent::dcb::prio_list(oper.pfc_enable), pfc_from = ?oper.pfc_from,
                    app = %lldp_agent::dcb::app_list(&oper.app), "DCBX operational settings");
            }
            Rx::Neighbour { new: false } => {}
            Rx::Shutdown => tracing::info!(nic = %port, "neighbour sent a shutdown LLDPDU"),
            Rx::Malformed(why) => tracing::warn!(nic = %port, "malformed LLDPDU discarded: {why}"),
        }
    }
}

fn run(args: &Args) -> anyhow::Result<()> {
    let text = std::fs::read_to_string(&args.config).with_context(|| format!("reading {}", args.config.display()))?;
    let cfg: AgentConfig = serde_json::from_str(&text).with_context(|| format!("{}: not a NIC agent configuration", args.config.display()))?;
    let listener = std::net::TcpListener::bind(cfg.listen).with_context(|| format!("host {}: binding {}", cfg.host, cfg.listen))?;
    if let Some(ns) = &cfg.netns {
        enter_netns(ns).with_context(|| format!("host {}: entering its network namespace", cfg.host))?;
    }
    let signals = Signals::block().context("signal setup")?;
    let sock = LldpSocket::open().context("opening the AF_PACKET socket for LLDP")?;
    let t = timing(&cfg.lldp);
    let epoch = Instant::now();
    let mut nics = Vec::new();
    for n in &cfg.nics {
        let mac: Mac = n.mac.parse().map_err(|e| anyhow::anyhow!("{}: mac {:?}: {e}", n.name, n.mac))?;
        let id = Identity { chassis_mac: mac.0, mac: mac.0, port: n.name.clone(), system_name: cfg.host.clone(), port_description: format!("{} {}", cfg.host, n.name), bridge: false };
        nics.push(Nic { agent: PortAgent::new(t, id, n.dcb.clone(), 0), ifindex: None, running: false, logged: Vec::new() });
    }
    let state = Arc::new(Mutex::new(State { host: cfg.host.clone(), nics, epoch }));
    let registry = prometheus::Registry::new();
    let labels = HashMap::from([("host".to_string(), cfg.host.clone())]);
    let metrics = LldpMetrics::new(&registry, &labels).context("registering metrics")?;

    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().context("tokio runtime")?;
    rt.block_on(async {
        let s1 = state.clone();
        let render = move || {
            let r = s1.lock().unwrap_or_else(|p| p.into_inner()).report();
            metrics.update(&r.ports);
            let mut buf = Vec::new();
            let _ = prometheus::Encoder::encode(&prometheus::TextEncoder::new(), &registry.gather(), &mut buf);
            String::from_utf8_lossy(&buf).into_owned()
        };
        let s2 = state.clone();
        let router = dataplane_user::http::metrics_router(render).route(
            "/lldp",
            axum::routing::get(move || {
                let r = s2.lock().unwrap_or_else(|p| p.into_inner()).report();
                async move { axum::Json(r) }
            }),
        );
        let server = tokio::spawn(dataplane_user::http::serve(listener, router));
        // SAFETY: the socket's descriptor is owned by `sock`, which the AsyncFd owns until it is
        // dropped, so it stays open for as long as it is registered.
        let sock = unsafe { AsyncFd::register_with_interest(sock, tokio::io::Interest::READABLE) }.context("registering the LLDP socket")?;
        let signals = AsyncSignals::new(signals).context("registering the signalfd")?;
        tracing::info!(host = %cfg.host, nics = cfg.nics.len(), "NIC agent up; neighbour table on http://{}/lldp", cfg.listen);
        let mut buf = vec![0u8; 9216];
        loop {
            let next = {
                let mut st = state.lock().unwrap_or_else(|p| p.into_inner());
                let next = poll(&mut st, sock.get_ref());
                log_changes(&mut st);
                next.saturating_sub(st.now())
            };
            let wait = Duration::from_nanos(next.clamp(1_000_000, 1_000_000_000));
            tokio::select! {
                r = sock.readable() => {
                    let mut g = r.context("LLDP socket")?;
                    let mut st = state.lock().unwrap_or_else(|p| p.into_inner());
                    on_readable(&mut st, sock.get_ref(), &mut buf);
                    g.clear_ready();
                }
                sig = signals.recv() => {
                    let sig = sig.context("reading the signalfd")?;
                    tracing::info!("received {sig}: sending shutdown LLDPDUs");
                    break;
                }
                _ = tokio::time::sleep(wait) => {}
            }
            if server.is_finished() {
                anyhow::bail!("the HTTP server stopped");
            }
        }
        let st = state.lock().unwrap_or_else(|p| p.into_inner());
        for n in &st.nics {
            if let Some(i) = ifindex(&n.agent.identity().port) {
                if let Err(e) = sock.get_ref().send(i, &n.agent.shutdown_frame()) {
                    tracing::warn!(nic = %n.agent.identity().port, "sending the shutdown LLDPDU: {e}");
                }
            }
        }
        Ok(())
    })
}

fn main() -> ExitCode {
    let args = Args::parse();
    if let Err(e) = init_logging(&args) {
        eprintln!("rocefab-nicd: {e:#}");
        return ExitCode::FAILURE;
    }
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!("{e:#}");
            if args.log_file.is_some() {
                eprintln!("rocefab-nicd: {e:#}");
            }
            ExitCode::FAILURE
        }
    }
}
