//! The NIC agent, `rocefab-nicd --config <host.nicd.json> [--log-file <file>]` (its binary only
//! parses the arguments and calls [`run`]): the control plane of one GPU host's NICs, started by `rocefab up` and running as long as the fabric. It binds its HTTP
//! listener (in the namespace it was started in), enters the host's network namespace, and runs
//! an LLDP/DCBX agent on every GPU NIC ([`gpu_host::nic::agent`]) on a tokio current-thread
//! runtime:
//!
//! - LLDPDUs with the NIC's DCBX TLVs, fast start at start-up and when an interface appears or a
//!   new neighbour is seen, then every `tx_interval`;
//! - received LLDPDUs update the neighbour table (one entry per Chassis ID + Port ID, each aging
//!   out at its TTL; DCBX acts on the switch port the topology cables the NIC to when it is
//!   there, else on the oldest entry, see `lldp_agent::port`); malformed ones are counted;
//! - `GET /lldp`: the neighbour table and negotiated settings as JSON (`lldp_agent::NodeReport`);
//!   `GET /metrics`: Prometheus metrics;
//! - `GET /capture?ports=gpu0,gpu1[&snaplen=N]`: what the NICs receive and send, as the stream of
//!   `rocefab_plumbing::capture` (port = the NIC's index in the configuration), for
//!   `rocefab capture`;
//! - SIGTERM/SIGINT: a shutdown LLDPDU (TTL 0) on every NIC, then exit 0.
//!
//! Captures ([`capture_thread::Capture`], a thread of its own, idle unless a capture runs) merge two
//! sources into the capture tap:
//!
//! - the kernel path: one `AF_PACKET` socket per captured NIC (`PacketSocket::tap`), which sees every
//!   frame when no job runs, and during a job the frames the host XDP program passes to the
//!   kernel (ARP, ICMP, LLDP, ...) and everything the kernel sends;
//! - the AF_XDP path: what `rocefab-hostd` takes from and gives to its AF_XDP sockets, which
//!   no packet tap sees, mirrored through a shared-memory ring this agent creates at start and
//!   removes at exit (`host_daemons::mirror`, whose docs explain why no frame is in both).
//!
//! `rocefab_capture_mirrored_frames_total` counts the frames a capture got,
//! `rocefab_capture_lost_frames_total` the ones it missed (a full tap, a full shared ring, or a
//! full socket buffer).
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Context;
use clap::Parser;
use lldp_agent::metrics::LldpMetrics;
use lldp_agent::{Expected, Identity, Kind, Link, NodeAgent, PortAgent};
use rocefab_contracts::agent::AgentConfig;
use rocefab_contracts::config::Mac;
use rocefab_plumbing::capture;
use rocefab_plumbing::daemon::{AsyncSignals, Signals};
use rocefab_plumbing::link::link_running;
use rocefab_plumbing::netns::enter as enter_netns;
use rocefab_plumbing::packet::{ifindex, PacketSocket};
use tokio::io::unix::AsyncFd;

pub mod capture_thread;

/// `rocefab-nicd`'s command line.
#[derive(Debug, Parser)]
#[command(name = "rocefab-nicd", version, about = "rocefab GPU-host NIC agent: LLDP/DCBX on every GPU NIC")]
pub struct Args {
    /// Agent configuration (JSON, as written by `rocefab up`).
    #[arg(long)]
    pub config: PathBuf,
    /// Append logs to this file instead of stderr.
    #[arg(long)]
    pub log_file: Option<PathBuf>,
}

/// Looks every NIC up again (a fast start when one appears, changes index or its link comes
/// up), sends what is due; returns when the agent next has work.
fn poll(agent: &mut NodeAgent, sock: &PacketSocket) -> u64 {
    let now = agent.now();
    agent.watch_links(now, |name| Link { ifindex: ifindex(name), running: link_running(name).unwrap_or(false) });
    for (port, frame) in agent.poll(now) {
        if let Some(i) = agent.ifindex(port) {
            if let Err(e) = sock.send_to(i, &frame) {
                tracing::warn!(nic = agent.port_name(port).unwrap_or("?"), "sending LLDP: {e}");
            }
        }
    }
    agent.next_deadline().min(now + 1_000_000_000)
}

/// Gives every LLDP frame waiting on the socket to the NIC it arrived on.
fn on_readable(agent: &mut NodeAgent, sock: &PacketSocket, buf: &mut [u8]) {
    loop {
        let (len, idx) = match sock.recv(buf) {
            Ok(r) => r,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return,
            Err(e) => {
                tracing::warn!("receiving LLDP: {e}");
                return;
            }
        };
        // The index seen at the last poll; an interface that just (re)appeared is looked up by name.
        let Some(port) = agent.port_at(idx, ifindex) else {
            continue;
        };
        let now = agent.now();
        agent.on_frame(port, &buf[..len.min(buf.len())], now);
    }
}

/// One LLDP/DCBX agent per NIC of `cfg`: Chassis ID and source MAC the NIC's MAC, System
/// Name the host, advertising the NIC's own DCB settings and expecting the switch port the
/// topology cables it to.
fn port_agents(cfg: &AgentConfig) -> anyhow::Result<Vec<PortAgent>> {
    let t = lldp_agent::Timing::from(&cfg.lldp);
    let mut agents = Vec::new();
    for n in &cfg.nics {
        let mac: Mac = n.mac.parse().map_err(|e| anyhow::anyhow!("{}: mac {:?}: {e}", n.name, n.mac))?;
        let id = Identity {
            chassis_mac: mac.0,
            mac: mac.0,
            port: n.name.clone(),
            system_name: cfg.host.clone(),
            port_description: format!("{} {}", cfg.host, n.name),
            bridge: false,
        };
        let mut agent = PortAgent::new(t, id, n.dcb.clone(), 0);
        agent.expect(n.peer.as_deref().and_then(Expected::from_peer));
        agents.push(agent);
    }
    Ok(agents)
}

/// The agent: start-up, the LLDP loop and HTTP server until SIGTERM/SIGINT, then the shutdown
/// LLDPDUs (module docs).
pub fn run(args: &Args) -> anyhow::Result<()> {
    let text = std::fs::read_to_string(&args.config).with_context(|| format!("reading {}", args.config.display()))?;
    let cfg: AgentConfig = serde_json::from_str(&text)
        .with_context(|| format!("{}: not a NIC agent configuration", args.config.display()))?;
    let listener = std::net::TcpListener::bind(cfg.listen)
        .with_context(|| format!("host {}: binding {}", cfg.host, cfg.listen))?;
    if let Some(ns) = &cfg.netns {
        enter_netns(ns).with_context(|| format!("host {}: entering its network namespace", cfg.host))?;
    }
    let signals = Signals::block().context("signal setup")?;
    let sock = PacketSocket::lldp().context("opening the AF_PACKET socket for LLDP")?;
    let agents = port_agents(&cfg)?;
    let state = Arc::new(Mutex::new(NodeAgent::new(&cfg.host, Kind::Host, agents)));
    let registry = prometheus::Registry::new();
    let labels = HashMap::from([("host".to_string(), cfg.host.clone())]);
    let lldp = LldpMetrics::new(&registry, &labels).context("registering metrics")?;
    let capture = capture::CaptureMetrics::new(&registry, &labels).context("registering metrics")?;
    // Started after entering the namespace: the capture sockets must see the host's NICs.
    let (slot, capture_stats, wake, _capture_thread) = capture_thread::start(&cfg)?;
    let scrape = Scrape { registry, lldp, capture, capture_stats };

    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().context("tokio runtime")?;
    rt.block_on(async {
        let server = tokio::spawn(rocefab_plumbing::http::serve(listener, router(&cfg, &state, scrape, slot, wake)));
        // SAFETY: the socket's descriptor is owned by `sock`, which the AsyncFd owns until it is
        // dropped, so it stays open for as long as it is registered.
        let sock = unsafe { AsyncFd::register_with_interest(sock, tokio::io::Interest::READABLE) }
            .context("registering the LLDP socket")?;
        let signals = AsyncSignals::new(signals).context("registering the signalfd")?;
        tracing::info!(host = %cfg.host, nics = cfg.nics.len(), "NIC agent up; neighbour table on http://{}/lldp", cfg.listen);
        lldp_loop(&state, &sock, &signals, &server).await?;
        send_shutdown_lldpdus(&state.lock().unwrap_or_else(|p| p.into_inner()), sock.get_ref());
        Ok(())
    })
}

/// What `/metrics` reads besides the agents: the registry and the families in it.
struct Scrape {
    registry: prometheus::Registry,
    lldp: LldpMetrics,
    capture: capture::CaptureMetrics,
    capture_stats: capture_thread::CaptureStats,
}

impl Scrape {
    /// The Prometheus text of the agents' neighbour table (`report`) and the captures.
    fn render(&self, report: &lldp_agent::NodeReport) -> String {
        self.lldp.update(&report.ports);
        self.capture.update(self.capture_stats.tap.mirrored(), self.capture_stats.lost());
        let mut buf = Vec::new();
        let _ = prometheus::Encoder::encode(&prometheus::TextEncoder::new(), &self.registry.gather(), &mut buf);
        String::from_utf8_lossy(&buf).into_owned()
    }
}

/// The HTTP routes: `/metrics`, `/lldp` and the capture stream of the NICs (whose stream
/// header goes out only once the capture thread has its sources open).
fn router(
    cfg: &AgentConfig,
    state: &Arc<Mutex<NodeAgent>>,
    scrape: Scrape,
    slot: capture::Slot,
    wake: capture_thread::CaptureWake,
) -> axum::Router {
    let s1 = state.clone();
    let render = move || {
        let r = s1.lock().unwrap_or_else(|p| p.into_inner()).report();
        scrape.render(&r)
    };
    let s2 = state.clone();
    let nic_names: Vec<String> = cfg.nics.iter().map(|n| n.name.clone()).collect();
    rocefab_plumbing::http::metrics_router(render)
        .route(
            "/lldp",
            axum::routing::get(move || {
                let r = s2.lock().unwrap_or_else(|p| p.into_inner()).report();
                async move { axum::Json(r) }
            }),
        )
        .merge(capture::router(cfg.host.clone(), nic_names, slot).layer(axum::middleware::from_fn(
            move |req: axum::extract::Request, next: axum::middleware::Next| {
                let wake = wake.clone();
                async move {
                    // The handler starts the tap; the stream header goes out only once the
                    // capture sockets are open.
                    let resp = next.run(req).await;
                    wake.started().await;
                    resp
                }
            },
        )))
}

/// The agents' loop: sends what is due, takes what arrives, until SIGTERM/SIGINT (`Ok`) or the
/// HTTP server stops (an error).
async fn lldp_loop(
    state: &Mutex<NodeAgent>,
    sock: &AsyncFd<PacketSocket>,
    signals: &AsyncSignals,
    server: &tokio::task::JoinHandle<std::io::Result<()>>,
) -> anyhow::Result<()> {
    let mut buf = vec![0u8; 9216];
    loop {
        let next = {
            let mut st = state.lock().unwrap_or_else(|p| p.into_inner());
            let next = poll(&mut st, sock.get_ref());
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
                return Ok(());
            }
            _ = tokio::time::sleep(wait) => {}
        }
        if server.is_finished() {
            anyhow::bail!("the HTTP server stopped");
        }
    }
}

/// A TTL-0 LLDPDU out of every NIC (IEEE 802.1AB 9.2.7.7.2).
fn send_shutdown_lldpdus(agent: &NodeAgent, sock: &PacketSocket) {
    for (port, frame) in agent.shutdown_frames() {
        let name = agent.port_name(port).unwrap_or("?");
        if let Some(i) = ifindex(name) {
            if let Err(e) = sock.send_to(i, &frame) {
                tracing::warn!(nic = name, "sending the shutdown LLDPDU: {e}");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lldp_agent::Dcb;
    use rocefab_contracts::agent::AgentNic;

    fn cfg(peer: Option<&str>, mac: &str) -> AgentConfig {
        AgentConfig {
            host: "host1".into(),
            netns: Some("rf-x-host1".into()),
            listen: "127.0.0.1:0".parse().unwrap(),
            lldp: Default::default(),
            nics: vec![AgentNic {
                name: "gpu0".into(),
                mac: mac.into(),
                dcb: Dcb::nic(true, 1 << 3, 24, 3, 48, 7),
                data_dscp: 24,
                cnp_dscp: 48,
                peer: peer.map(str::to_string),
            }],
        }
    }

    #[test]
    fn each_nic_advertises_its_own_identity_and_settings_and_expects_its_switch_port() {
        let c = cfg(Some("rail1:eth3"), "02:00:00:00:01:07");
        let a = port_agents(&c).unwrap();
        assert_eq!(a.len(), 1);
        let id = a[0].identity();
        assert_eq!((id.chassis_mac, id.mac), ([2, 0, 0, 0, 1, 7], [2, 0, 0, 0, 1, 7]));
        assert_eq!(
            (id.port.as_str(), id.system_name.as_str(), id.port_description.as_str()),
            ("gpu0", "host1", "host1 gpu0")
        );
        assert!(!id.bridge);
        assert_eq!(a[0].dcb(), &c.nics[0].dcb);
        let expected = a[0].report(0).expected.unwrap();
        assert_eq!((expected.system_name.as_str(), expected.port.as_str()), ("rail1", "eth3"));
        assert_eq!(port_agents(&cfg(None, "02:00:00:00:01:07")).unwrap()[0].report(0).expected, None);
    }

    #[test]
    fn a_bad_mac_names_the_nic_and_the_value() {
        let e = port_agents(&cfg(None, "02:00:00:00:01")).unwrap_err().to_string();
        assert!(e.starts_with("gpu0: mac \"02:00:00:00:01\": "), "{e}");
    }
}
