//! `rocefab-nicd`'s captures: a thread of its own ([`Capture`], idle unless a capture runs)
//! merges two sources into the capture tap, in timestamp order:
//!
//! - the kernel path: one `AF_PACKET` socket per captured NIC ([`PacketSocket::tap`]), which sees every
//!   frame when no job runs, and during a job the frames the host XDP program passes to the
//!   kernel (ARP, ICMP, LLDP, ...) and everything the kernel sends;
//! - the AF_XDP path: what `rocefab-hostd` takes from and gives to its AF_XDP sockets, which
//!   no packet tap sees, mirrored through a shared-memory ring this agent creates at start and
//!   removes at exit ([`crate::mirror`], whose docs explain why no frame is in both).
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use rocefab_contracts::agent::AgentConfig;
use rocefab_plumbing::capture::{self, Record, TapProducer};
use rocefab_plumbing::kernel_tap::KernelTaps;

use crate::mirror::{self, MirrorConsumer, MirrorCounters};

/// How often the parked capture thread looks at the tap's mask (a started capture wakes it at
/// once; this only bounds a missed wake-up).
const CAPTURE_IDLE_POLL: Duration = Duration::from_secs(1);
/// Longest wait for a kernel frame while capturing (the shared ring is drained at least this
/// often: 8 MiB in 2 ms is 4 GB/s, well above the NICs' line rates).
const CAPTURE_POLL_MS: i32 = 2;

/// The capture thread: feeds the tap from the kernel path and the AF_XDP mirror while a
/// capture runs; parked otherwise (woken by a `/capture` request, [`CaptureWake`]).
pub struct Capture {
    tap: TapProducer,
    shm: Option<MirrorConsumer>,
    /// The kernel path's sockets, one per NIC.
    kernel: KernelTaps,
    /// The mask the sources are set up for.
    active: u64,
    /// The capture (`Tap::generation`) the sources are set up for.
    generation: u64,
    /// The change of the mirrored ports (`Tap::changes`) the sources are set up for, published
    /// in `ready` once the sources are open (several captures may join and leave).
    ready: Arc<AtomicU64>,
    shm_buf: Vec<u8>,
    /// This round's records from both sources (encoded), and (timestamp, start, length) of each.
    stage: Vec<u8>,
    index: Vec<(u64, usize, usize)>,
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
            self.kernel.wait(CAPTURE_POLL_MS);
            self.round();
        }
        self.reconfigure(0, self.generation, self.ready.load(Ordering::Relaxed));
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
        tracing::info!(nics = mask, "capture {}", if mask == 0 { "stopped" } else { "started" });
        self.active = mask;
        // A new capture drops the sockets' backlog from before it.
        self.kernel.set(mask, generation != self.generation);
        self.generation = generation;
        self.ready.store(changes, Ordering::Release);
    }

    /// Moves what both sources have into the tap, in timestamp order.
    fn round(&mut self) {
        self.stage.clear();
        self.index.clear();
        let (stage, index) = (&mut self.stage, &mut self.index);
        self.kernel.read_each(|port, dir, ts, orig_len, data| {
            let start = stage.len();
            Record { ts_ns: ts, port, dir, orig_len, data }.encode(stage);
            index.push((ts, start, stage.len() - start));
        });
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
pub struct CaptureWake {
    thread: std::thread::Thread,
    /// The capture the thread's sources are set up for (published after `reconfigure`).
    ready: Arc<AtomicU64>,
    tap: Arc<capture::Tap>,
}

impl CaptureWake {
    /// Wakes the thread and waits (up to a second) until it has set its sources up for the
    /// capture that just started, so a client that got the stream header misses no frame after
    /// it. Returns at once when no capture started (the request was refused).
    pub async fn started(&self) {
        self.thread.unpark();
        let until = Instant::now() + Duration::from_secs(1);
        while self.tap.mask() != 0 && self.ready.load(Ordering::Acquire) < self.tap.changes() && Instant::now() < until
        {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }
}

/// The running capture thread: stopped and joined on drop (which removes the mirror ring).
pub type CaptureThread = rocefab_plumbing::kernel_tap::StopOnDrop;

/// What the metrics read of a capture.
pub struct CaptureStats {
    /// The tap (its `mirrored` count is the frames captures got).
    pub tap: Arc<capture::Tap>,
    shm: Option<MirrorCounters>,
    kernel_lost: Arc<AtomicU64>,
}

impl CaptureStats {
    /// Frames a capture missed: a full tap, a full shared ring, or a full socket buffer.
    pub fn lost(&self) -> u64 {
        self.tap.lost() + self.shm.as_ref().map_or(0, MirrorCounters::lost) + self.kernel_lost.load(Ordering::Relaxed)
    }
}

/// Creates the tap and the mirror ring, and starts the capture thread (in this thread's
/// network namespace). Returns the control side's slot, the counters, the thread's wake-up and
/// the thread.
pub fn start(cfg: &AgentConfig) -> anyhow::Result<(capture::Slot, CaptureStats, CaptureWake, CaptureThread)> {
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
    let kernel = KernelTaps::new(names);
    let kernel_lost = kernel.lost();
    let ready = Arc::new(AtomicU64::new(0));
    let wake_tap = tap.clone();
    let stats = CaptureStats { tap, shm: shm.as_ref().map(MirrorConsumer::counters), kernel_lost: kernel_lost.clone() };
    let cap = Capture {
        ready: ready.clone(),
        tap: producer,
        shm,
        kernel,
        active: 0,
        shm_buf: Vec::new(),
        stage: Vec::new(),
        index: Vec::new(),
        generation: 0,
    };
    let stop = Arc::new(AtomicBool::new(false));
    let s2 = stop.clone();
    let join = std::thread::Builder::new()
        .name("rocefab-capture".into())
        .spawn(move || cap.run(&s2))
        .context("spawning the capture thread")?;
    let wake = CaptureWake { thread: join.thread().clone(), ready, tap: wake_tap };
    Ok((capture::slot(consumer), stats, wake, CaptureThread::new(stop, join, "capture")))
}
