//! `rocefab-nicd --config <host.nicd.json> [--log-file <file>]`: the control plane of one GPU
//! host's NICs, started by `rocefab up` and running as long as the fabric. It binds its HTTP
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
//! Captures ([`Capture`], a thread of its own, idle unless a capture runs) merge two sources
//! into the capture tap:
//!
//! - the kernel path: one `AF_PACKET` socket per captured NIC ([`PacketTap`]), which sees every
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
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::Parser;
use host_daemons::agent::{ifindex, LldpSocket, PacketTap};
use host_daemons::mirror::{self, unix_now_ns, MirrorConsumer, MirrorCounters};
use lldp_agent::metrics::LldpMetrics;
use lldp_agent::{Expected, Identity, NodeReport, PortAgent, Rx};
use rocefab_contracts::config::Mac;
use rocefab_plumbing::capture::{self, Record, TapProducer, DIR_IN, DIR_OUT};
use rocefab_plumbing::daemon::{enter_netns, AsyncSignals, Signals};
use rocefab_plumbing::link::link_running;
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
        NodeReport {
            node: self.host.clone(),
            kind: "host".into(),
            ports: self.nics.iter().map(|n| n.agent.report(now)).collect(),
        }
    }
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
        // The index seen at the last poll; an interface that just (re)appeared is looked up by name.
        let pos = st
            .nics
            .iter()
            .position(|n| n.ifindex == Some(idx))
            .or_else(|| st.nics.iter().position(|n| ifindex(&n.agent.identity().port) == Some(idx)));
        let Some(n) = pos.map(|p| &mut st.nics[p]) else {
            continue;
        };
        let frame = &buf[..len.min(buf.len())];
        let port = n.agent.identity().port.clone();
        match n.agent.on_frame(frame, now) {
            Rx::Neighbour { new: true } => {
                let nb = n
                    .agent
                    .neighbour()
                    .map(|x| format!("{} port {}", x.system_name.as_deref().unwrap_or(&x.chassis), x.port));
                tracing::info!(nic = %port, neighbour = ?nb, "new LLDP neighbour");
                let (oper, _) = n.agent.negotiate();
                tracing::info!(nic = %port, pfc = %lldp_agent::dcb::prio_list(oper.pfc_enable), pfc_from = ?oper.pfc_from,
                    app = %lldp_agent::dcb::app_list(&oper.app), "DCBX operational settings");
            }
            Rx::Neighbour { new: false } => {}
            Rx::TableFull => {
                tracing::warn!(nic = %port, max = n.agent.max_neighbours(), "neighbour table full: LLDPDU of a new neighbour discarded")
            }
            Rx::Shutdown => tracing::info!(nic = %port, "neighbour sent a shutdown LLDPDU"),
            Rx::Malformed(why) => tracing::warn!(nic = %port, "malformed LLDPDU discarded: {why}"),
        }
    }
}

/// How often the parked capture thread looks at the tap's mask (a started capture wakes it at
/// once; this only bounds a missed wake-up).
const CAPTURE_IDLE_POLL: Duration = Duration::from_secs(1);
/// Longest wait for a kernel frame while capturing (the shared ring is drained at least this
/// often: 8 MiB in 2 ms is 4 GB/s, well above the NICs' line rates).
const CAPTURE_POLL_MS: i32 = 2;
/// How often a missing interface is looked up again, and socket drops read, while capturing.
const CAPTURE_HOUSEKEEPING: Duration = Duration::from_millis(100);
/// Largest frame read from the kernel path (a GSO super-frame is at most 64 KiB).
const CAPTURE_FRAME_BYTES: usize = 65_536 + 256;

/// The capture thread: feeds the tap from the kernel path and the AF_XDP mirror while a
/// capture runs; parked otherwise (woken by a `/capture` request, [`CaptureWake`]).
struct Capture {
    tap: TapProducer,
    shm: Option<MirrorConsumer>,
    nics: Vec<String>,
    socks: Vec<Option<PacketTap>>,
    /// Frames the kernel dropped for the capture sockets.
    kernel_lost: Arc<AtomicU64>,
    /// The mask the sources are set up for.
    active: u64,
    /// The capture (`Tap::generation`) the sources are set up for.
    generation: u64,
    /// The change of the mirrored ports (`Tap::changes`) the sources are set up for, published
    /// in `ready` once the sources are open (several captures may join and leave).
    ready: Arc<AtomicU64>,
    housekeeping_at: Instant,
    frame: Vec<u8>,
    shm_buf: Vec<u8>,
    /// This round's records from both sources (encoded), and (timestamp, start, length) of each.
    stage: Vec<u8>,
    index: Vec<(u64, usize, usize)>,
    pollfds: Vec<libc::pollfd>,
}

impl Capture {
    fn run(mut self, stop: &AtomicBool) {
        while !stop.load(Ordering::Relaxed) {
            let changes = self.tap.shared().changes();
            let generation = self.tap.shared().generation();
            let mask = self.tap.mask();
            if mask != self.active || generation != self.generation || changes != self.ready.load(Ordering::Relaxed) {
                self.reconfigure(mask, generation, changes);
            }
            if self.active == 0 {
                std::thread::park_timeout(CAPTURE_IDLE_POLL);
                continue;
            }
            if self.housekeeping_at.elapsed() >= CAPTURE_HOUSEKEEPING {
                self.housekeeping();
            }
            self.wait();
            self.round();
        }
        self.reconfigure(0, self.generation, self.ready.load(Ordering::Relaxed));
    }

    fn wanted(&self, i: usize) -> bool {
        i < 64 && self.active & (1u64 << i) != 0
    }

    /// Sets both sources up for `mask` (0: stops them).
    fn reconfigure(&mut self, mask: u64, generation: u64, changes: u64) {
        if let Some(shm) = self.shm.as_mut() {
            if generation != self.generation {
                // What hostd wrote for an earlier capture.
                shm.clear();
            }
            shm.set_enabled(mask);
        }
        tracing::info!(nics = ?self.nics.iter().enumerate().filter(|(i, _)| *i < 64 && mask & (1u64 << i) != 0).map(|(_, n)| n).collect::<Vec<_>>(),
            "capture {}", if mask == 0 { "stopped" } else { "started" });
        self.active = mask;
        for i in 0..self.nics.len() {
            if !self.wanted(i) {
                if let Some(s) = self.socks[i].take() {
                    self.kernel_lost.fetch_add(s.drops().unwrap_or(0), Ordering::Relaxed);
                }
            }
        }
        if generation != self.generation {
            // Backlog of the capture sockets from before this capture started.
            for s in self.socks.iter().flatten() {
                while s.recv(&mut self.frame).is_ok() {}
            }
        }
        self.generation = generation;
        self.housekeeping();
        self.ready.store(changes, Ordering::Release);
    }

    /// Opens the sockets of captured NICs that have none (an interface may appear later) and
    /// counts the kernel's drops.
    fn housekeeping(&mut self) {
        self.housekeeping_at = Instant::now();
        for i in 0..self.nics.len() {
            if !self.wanted(i) {
                continue;
            }
            match &self.socks[i] {
                Some(s) => {
                    self.kernel_lost.fetch_add(s.drops().unwrap_or(0), Ordering::Relaxed);
                }
                None => match ifindex(&self.nics[i]).map(PacketTap::open) {
                    Some(Ok(s)) => self.socks[i] = Some(s),
                    Some(Err(e)) => tracing::warn!(nic = %self.nics[i], "capture socket: {e}"),
                    None => tracing::debug!(nic = %self.nics[i], "capture: no such interface (yet)"),
                },
            }
        }
    }

    /// Sleeps until a capture socket has a frame or [`CAPTURE_POLL_MS`] pass.
    fn wait(&mut self) {
        self.pollfds.clear();
        self.pollfds.extend(self.socks.iter().flatten().map(|s| libc::pollfd {
            fd: std::os::fd::AsRawFd::as_raw_fd(s),
            events: libc::POLLIN,
            revents: 0,
        }));
        // SAFETY: `pollfds` is a live array of `pollfds.len()` pollfd structs (possibly empty:
        // poll then only sleeps).
        unsafe { libc::poll(self.pollfds.as_mut_ptr(), self.pollfds.len() as libc::nfds_t, CAPTURE_POLL_MS) };
    }

    /// Moves what both sources have into the tap, in timestamp order.
    fn round(&mut self) {
        self.stage.clear();
        self.index.clear();
        for i in 0..self.socks.len() {
            let Some(s) = &self.socks[i] else { continue };
            loop {
                match s.recv(&mut self.frame) {
                    Ok(c) => {
                        let ts = c.ts_ns.unwrap_or_else(unix_now_ns);
                        let dir = if c.outgoing { DIR_OUT } else { DIR_IN };
                        let start = self.stage.len();
                        Record {
                            ts_ns: ts,
                            port: i as u16,
                            dir,
                            orig_len: c.orig_len as u32,
                            data: &self.frame[..c.len],
                        }
                        .encode(&mut self.stage);
                        self.index.push((ts, start, self.stage.len() - start));
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                    Err(e) => {
                        tracing::warn!(nic = %self.nics[i], "capture socket: {e}; reopening");
                        self.socks[i] = None;
                        break;
                    }
                }
            }
        }
        if let Some(shm) = self.shm.as_mut() {
            let (active, stage, index) = (self.active, &mut self.stage, &mut self.index);
            shm.drain_each(&mut self.shm_buf, |r| {
                if r.port < 64 && active & (1u64 << r.port) != 0 {
                    let start = stage.len();
                    r.encode(stage);
                    index.push((r.ts_ns, start, stage.len() - start));
                }
            });
        }
        self.index.sort_by_key(|&(ts, ..)| ts);
        for &(_, start, len) in &self.index {
            if let Some((r, _)) = Record::decode(&self.stage[start..start + len]) {
                self.tap.mirror_cut(r.port, r.dir, r.ts_ns, r.orig_len, r.data);
            }
        }
    }
}

/// Wakes the capture thread once a capture has started, and tells when its sources are set up.
#[derive(Clone)]
struct CaptureWake {
    thread: std::thread::Thread,
    /// The capture the thread's sources are set up for (published after `reconfigure`).
    ready: Arc<AtomicU64>,
    tap: Arc<capture::Tap>,
}

impl CaptureWake {
    /// Wakes the thread and waits (up to a second) until it has set its sources up for the
    /// capture that just started, so a client that got the stream header misses no frame after
    /// it. Returns at once when no capture started (the request was refused).
    async fn started(&self) {
        self.thread.unpark();
        let until = Instant::now() + Duration::from_secs(1);
        while self.tap.mask() != 0 && self.ready.load(Ordering::Acquire) < self.tap.changes() && Instant::now() < until
        {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }
}

/// The running capture thread: stopped and joined on drop (which removes the mirror ring).
struct CaptureThread {
    stop: Arc<AtomicBool>,
    join: Option<std::thread::JoinHandle<()>>,
}

impl Drop for CaptureThread {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(j) = self.join.take() {
            j.thread().unpark();
            if j.join().is_err() {
                tracing::error!("the capture thread panicked");
            }
        }
    }
}

/// What the metrics read of a capture.
struct CaptureStats {
    tap: Arc<capture::Tap>,
    shm: Option<MirrorCounters>,
    kernel_lost: Arc<AtomicU64>,
}

impl CaptureStats {
    fn lost(&self) -> u64 {
        self.tap.lost() + self.shm.as_ref().map_or(0, MirrorCounters::lost) + self.kernel_lost.load(Ordering::Relaxed)
    }
}

/// Creates the tap and the mirror ring, and starts the capture thread (in this thread's
/// network namespace). Returns the control side's slot, the counters, the thread's wake-up and
/// the thread.
fn start_capture(cfg: &AgentConfig) -> anyhow::Result<(capture::Slot, CaptureStats, CaptureWake, CaptureThread)> {
    let names: Vec<String> = cfg.nics.iter().map(|n| n.name.clone()).collect();
    let (producer, consumer, tap) = capture::tap(capture::RING_BYTES);
    // The sources give wall-clock timestamps already (the tap's epoch stays 0).
    let path = mirror::shm_path(cfg.netns.as_deref().unwrap_or(&cfg.host));
    let shm = match MirrorConsumer::create(&path, mirror::DATA_BYTES, &names) {
        Ok(m) => {
            tracing::debug!(path = %path.display(), "AF_XDP mirror ring for rocefab-hostd");
            Some(m)
        }
        Err(e) => {
            tracing::warn!("{e}: captures will not see the frames of NIC emulator jobs");
            None
        }
    };
    let kernel_lost = Arc::new(AtomicU64::new(0));
    let ready = Arc::new(AtomicU64::new(0));
    let wake_tap = tap.clone();
    let stats = CaptureStats { tap, shm: shm.as_ref().map(MirrorConsumer::counters), kernel_lost: kernel_lost.clone() };
    let cap = Capture {
        ready: ready.clone(),
        tap: producer,
        shm,
        socks: names.iter().map(|_| None).collect(),
        nics: names,
        kernel_lost,
        active: 0,
        housekeeping_at: Instant::now(),
        frame: vec![0; CAPTURE_FRAME_BYTES],
        shm_buf: Vec::new(),
        stage: Vec::new(),
        index: Vec::new(),
        pollfds: Vec::new(),
        generation: 0,
    };
    let stop = Arc::new(AtomicBool::new(false));
    let s2 = stop.clone();
    let join = std::thread::Builder::new()
        .name("rocefab-capture".into())
        .spawn(move || cap.run(&s2))
        .context("spawning the capture thread")?;
    let wake = CaptureWake { thread: join.thread().clone(), ready, tap: wake_tap };
    Ok((capture::slot(consumer), stats, wake, CaptureThread { stop, join: Some(join) }))
}

fn run(args: &Args) -> anyhow::Result<()> {
    let text = std::fs::read_to_string(&args.config).with_context(|| format!("reading {}", args.config.display()))?;
    let cfg: AgentConfig = serde_json::from_str(&text)
        .with_context(|| format!("{}: not a NIC agent configuration", args.config.display()))?;
    let listener = std::net::TcpListener::bind(cfg.listen)
        .with_context(|| format!("host {}: binding {}", cfg.host, cfg.listen))?;
    if let Some(ns) = &cfg.netns {
        enter_netns(ns).with_context(|| format!("host {}: entering its network namespace", cfg.host))?;
    }
    let signals = Signals::block().context("signal setup")?;
    let sock = LldpSocket::open().context("opening the AF_PACKET socket for LLDP")?;
    let t = lldp_agent::Timing::from(&cfg.lldp);
    let epoch = Instant::now();
    let mut nics = Vec::new();
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
        nics.push(Nic { agent, ifindex: None, running: false, logged: Vec::new() });
    }
    let state = Arc::new(Mutex::new(State { host: cfg.host.clone(), nics, epoch }));
    let registry = prometheus::Registry::new();
    let labels = HashMap::from([("host".to_string(), cfg.host.clone())]);
    let metrics = LldpMetrics::new(&registry, &labels).context("registering metrics")?;
    let capture_metrics = capture::CaptureMetrics::new(&registry, &labels).context("registering metrics")?;
    // Started after entering the namespace: the capture sockets must see the host's NICs.
    let (slot, capture_stats, wake, _capture_thread) = start_capture(&cfg)?;
    let nic_names: Vec<String> = cfg.nics.iter().map(|n| n.name.clone()).collect();

    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().context("tokio runtime")?;
    rt.block_on(async {
        let s1 = state.clone();
        let render = move || {
            let r = s1.lock().unwrap_or_else(|p| p.into_inner()).report();
            metrics.update(&r.ports);
            capture_metrics.update(capture_stats.tap.mirrored(), capture_stats.lost());
            let mut buf = Vec::new();
            let _ = prometheus::Encoder::encode(&prometheus::TextEncoder::new(), &registry.gather(), &mut buf);
            String::from_utf8_lossy(&buf).into_owned()
        };
        let s2 = state.clone();
        let router = rocefab_plumbing::http::metrics_router(render)
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
            )));
        let server = tokio::spawn(rocefab_plumbing::http::serve(listener, router));
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
    rocefab_plumbing::daemon::main_with("rocefab-nicd", args.log_file.as_deref(), || run(&args))
}
