//! Port mirroring for `rocefab capture`: the data path copies the frames a port receives and
//! sends into a bounded single-producer single-consumer byte ring ([`TapProducer`]), and the
//! control side drains it ([`TapConsumer`]) into a capture stream for the CLI. Frames that
//! XDP hands to AF_XDP, and frames sent from AF_XDP in copy mode, never pass the kernel's packet
//! taps, so this is the only way to see a switch port's traffic.
//!
//! - Off by default: the data path reads one atomic port mask per frame batch; nothing is copied.
//! - Never blocks: when the ring has no room for a record, the frame is counted as lost
//!   ([`Tap::lost`]) and the data path goes on. Nothing is allocated per frame.
//! - Record (little endian): timestamp ns since the Unix epoch (u64), port (u16), direction
//!   (u8: [`DIR_IN`] / [`DIR_OUT`]), reserved (u8), original length (u32), captured length (u32),
//!   reserved (u32), then the captured bytes. A record with port [`HEARTBEAT_PORT`] and no bytes
//!   is a heartbeat (the stream sends one when idle, so a closed client is noticed).
//!
//! The stream a daemon serves on `GET /capture?ports=a,b[&snaplen=N]` is one JSON line
//! ([`StreamHeader`]) followed by records, until the client closes it. Several captures of one
//! daemon run at once: the data path mirrors the union of their ports into its one ring, and
//! the control side ([`Hub`]) hands each capture the records of its own ports.
//!
//! # Timestamps
//!
//! A record carries the time the frame crossed the port, per frame, not per batch (issue 21):
//! - received: the time the XDP program saw it (`bpf_ktime_get_ns`, CLOCK_MONOTONIC, carried in
//!   `dataplane_common::XdpMeta`), converted to the data path's clock;
//! - sent: its departure time in the egress shaper's schedule;
//! - either way, a frame never starts before the previous frame in the same direction of the
//!   same port has finished serialising at the port's line rate ([`LineStamp`]): where the
//!   kernel delivers a batch at once, a frame's stamp is
//!   `max(seen, previous stamp + previous frame's serialisation time)`, as a real link cannot
//!   deliver faster than its line rate.
//!
//! The data path's clock becomes Unix time with one offset, measured once at start
//! ([`MonoClock::unix_offset_ns`]), never per frame.
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;

use serde::Deserialize;

pub use rocefab_contracts::capture::{
    Record, StreamHeader, DIR_IN, DIR_OUT, HEARTBEAT_PORT, RECORD_HEADER, WALL_CLOCK,
};
pub use rocefab_contracts::time::{monotonic_ns, realtime_ns, MonoClock};
pub use rocefab_wire::ethernet::{serialisation_ns, LineStamp};

/// Default capacity of a switch's mirror ring.
pub const RING_BYTES: usize = 8 << 20;

/// State shared by the data path and the control side.
#[derive(Debug)]
pub struct Tap {
    /// Bit p: mirror port p (ports ≥ 64 cannot be mirrored).
    mask: AtomicU64,
    snaplen: AtomicU32,
    /// Frames not mirrored because the ring was full.
    lost: AtomicU64,
    /// Frames mirrored.
    mirrored: AtomicU64,
    /// Unix time (ns) of the data path clock's zero.
    epoch_unix_ns: AtomicU64,
    /// Captures started from idle so far: tells a new capture from the one before it even
    /// when both mirror the same ports (sources then discard what an earlier one left).
    generation: AtomicU64,
    /// Changes of the mirrored ports (starts and joins/leaves of concurrent captures): a
    /// source publishes the change it is set up for.
    changes: AtomicU64,
}

impl Tap {
    pub fn lost(&self) -> u64 {
        self.lost.load(Ordering::Relaxed)
    }
    pub fn mirrored(&self) -> u64 {
        self.mirrored.load(Ordering::Relaxed)
    }
    /// The ports being mirrored.
    pub fn mask(&self) -> u64 {
        self.mask.load(Ordering::Acquire)
    }
    /// Which capture this is ([`Tap::start`] counts them).
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }
    /// How many times the mirrored ports changed ([`Tap::start`], [`Tap::set_ports`]).
    pub fn changes(&self) -> u64 {
        self.changes.load(Ordering::Acquire)
    }
    /// Starts mirroring the ports in `mask`, at most `snaplen` bytes each, as a new capture.
    pub fn start(&self, mask: u64, snaplen: u32) {
        self.snaplen.store(snaplen.max(1), Ordering::Relaxed);
        self.generation.fetch_add(1, Ordering::AcqRel);
        self.changes.fetch_add(1, Ordering::AcqRel);
        self.mask.store(mask, Ordering::Release);
    }
    /// Changes the mirrored ports and the snap length of the running capture (another
    /// concurrent capture joined or left); nothing mirrored so far is discarded.
    pub fn set_ports(&self, mask: u64, snaplen: u32) {
        self.snaplen.store(snaplen.max(1), Ordering::Relaxed);
        self.changes.fetch_add(1, Ordering::AcqRel);
        self.mask.store(mask, Ordering::Release);
    }
    pub fn stop(&self) {
        self.changes.fetch_add(1, Ordering::AcqRel);
        self.mask.store(0, Ordering::Release);
    }
    /// Counts frames a capture missed outside the ring (a slow client's backlog was full).
    pub fn add_lost(&self, n: u64) {
        self.lost.fetch_add(n, Ordering::Relaxed);
    }
    /// Sets the Unix time of the data path clock's zero (the data path's `now` is ns since it).
    pub fn set_epoch(&self, unix_ns: u64) {
        self.epoch_unix_ns.store(unix_ns, Ordering::Relaxed);
    }
}

/// The data path's end.
#[derive(Debug)]
pub struct TapProducer {
    ring: rtrb::Producer<u8>,
    shared: Arc<Tap>,
}

/// The control side's end.
#[derive(Debug)]
pub struct TapConsumer {
    ring: rtrb::Consumer<u8>,
    shared: Arc<Tap>,
}

/// A tap with a ring of `bytes`.
pub fn tap(bytes: usize) -> (TapProducer, TapConsumer, Arc<Tap>) {
    let (p, c) = rtrb::RingBuffer::new(bytes);
    let shared = Arc::new(Tap {
        mask: AtomicU64::new(0),
        snaplen: AtomicU32::new(u32::MAX),
        lost: AtomicU64::new(0),
        mirrored: AtomicU64::new(0),
        epoch_unix_ns: AtomicU64::new(0),
        generation: AtomicU64::new(0),
        changes: AtomicU64::new(0),
    });
    (TapProducer { ring: p, shared: shared.clone() }, TapConsumer { ring: c, shared: shared.clone() }, shared)
}

impl TapProducer {
    /// The shared state (mask, generation, counters).
    pub fn shared(&self) -> &Arc<Tap> {
        &self.shared
    }

    /// The ports being mirrored (one relaxed load: call once per batch).
    #[inline]
    pub fn mask(&self) -> u64 {
        self.shared.mask.load(Ordering::Relaxed)
    }

    /// Mirrors `frame` (seen on `port` in direction `dir` at data path time `now_ns`), or counts
    /// it as lost when the ring is full. The caller checked [`TapProducer::mask`].
    #[inline]
    pub fn mirror(&mut self, port: u16, dir: u8, now_ns: u64, frame: &[u8]) {
        self.mirror_cut(port, dir, now_ns, frame.len() as u32, frame);
    }

    /// [`TapProducer::mirror`] for a frame already cut: `frame` holds the first bytes of a
    /// frame of `orig_len` bytes.
    #[inline]
    pub fn mirror_cut(&mut self, port: u16, dir: u8, now_ns: u64, orig_len: u32, frame: &[u8]) {
        let caplen = frame.len().min(self.shared.snaplen.load(Ordering::Relaxed) as usize);
        let need = RECORD_HEADER + caplen;
        let Ok(mut chunk) = self.ring.write_chunk(need) else {
            self.shared.lost.fetch_add(1, Ordering::Relaxed);
            return;
        };
        let ts = self.shared.epoch_unix_ns.load(Ordering::Relaxed).wrapping_add(now_ns);
        let header = Record::header(ts, port, dir, orig_len.max(frame.len() as u32), caplen as u32);
        let (a, b) = chunk.as_mut_slices();
        let mut src = header.iter().chain(frame[..caplen].iter());
        for d in a.iter_mut().chain(b.iter_mut()) {
            // `need` bytes were reserved for exactly header + caplen bytes.
            *d = src.next().copied().unwrap_or(0);
        }
        chunk.commit_all();
        self.shared.mirrored.fetch_add(1, Ordering::Relaxed);
    }
}

impl TapConsumer {
    pub fn shared(&self) -> &Arc<Tap> {
        &self.shared
    }
    /// Moves every whole record in the ring to `out`; returns the bytes moved.
    pub fn drain(&mut self, out: &mut Vec<u8>) -> usize {
        let n = self.ring.slots();
        if n == 0 {
            return 0;
        }
        // Records are committed whole, so everything readable is whole records.
        let Ok(chunk) = self.ring.read_chunk(n) else { return 0 };
        let (a, b) = chunk.as_slices();
        out.extend_from_slice(a);
        out.extend_from_slice(b);
        chunk.commit_all();
        n
    }
    /// Empties the ring (stale records of an earlier capture).
    pub fn clear(&mut self) {
        let mut sink = Vec::new();
        self.drain(&mut sink);
    }
}

/// Bytes of records a capture's client may have pending before further frames for it are
/// counted as lost (a stalled client never grows a daemon's memory without bound).
pub const CLIENT_BACKLOG_BYTES: usize = RING_BYTES;

/// The control side's end of the tap, shared by every running capture: it drains the ring
/// and hands each capture (a [`Hub`] subscriber) the records of its ports, cut to its snap
/// length. The data path mirrors the union of the subscribers' ports at the largest snap
/// length.
#[derive(Debug)]
pub struct Hub {
    consumer: TapConsumer,
    /// Further sources (a switch's kernel path, [`crate::kernel_tap`]), each with the thread
    /// to wake when a capture starts.
    sources: Vec<(TapConsumer, Option<std::thread::Thread>)>,
    subs: Vec<Sub>,
    next_id: u64,
    scratch: Vec<u8>,
}

#[derive(Debug)]
struct Sub {
    id: u64,
    mask: u64,
    snaplen: u32,
    buf: Vec<u8>,
}

/// The hub as the HTTP handlers share it.
pub type Slot = std::sync::Arc<std::sync::Mutex<Hub>>;

/// The hub in `slot` (a poisoned lock still holds a usable hub).
pub fn lock_hub(slot: &Slot) -> std::sync::MutexGuard<'_, Hub> {
    slot.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A [`Slot`] around the control side's end of a tap.
pub fn slot(consumer: TapConsumer) -> Slot {
    std::sync::Arc::new(std::sync::Mutex::new(Hub::new(consumer)))
}

impl Hub {
    pub fn new(consumer: TapConsumer) -> Self {
        Hub { consumer, sources: Vec::new(), subs: Vec::new(), next_id: 0, scratch: Vec::new() }
    }

    /// Adds a source that mirrors the same ports into a ring of its own; `wake` is unparked
    /// whenever the mirrored ports change.
    pub fn add_source(&mut self, consumer: TapConsumer, wake: Option<std::thread::Thread>) {
        self.sources.push((consumer, wake));
    }

    /// Every source's consumer.
    fn consumers(&mut self) -> impl Iterator<Item = &mut TapConsumer> {
        std::iter::once(&mut self.consumer).chain(self.sources.iter_mut().map(|(c, _)| c))
    }

    fn wake(&self) {
        for t in self.sources.iter().filter_map(|(_, t)| t.as_ref()) {
            t.unpark();
        }
    }

    /// Captures running.
    pub fn subscribers(&self) -> usize {
        self.subs.len()
    }

    /// Adds a capture of the ports in `mask` (at most `snaplen` bytes per frame); returns its id.
    /// The first one starts the tap afresh (stale records dropped); later ones widen it.
    pub fn subscribe(&mut self, mask: u64, snaplen: u32) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        let first = self.subs.is_empty();
        if !first {
            // Records already in the ring belong to the captures running before this one.
            self.pump();
        }
        self.subs.push(Sub { id, mask, snaplen: snaplen.max(1), buf: Vec::new() });
        let (m, len) = self.union();
        for c in self.consumers() {
            if first {
                c.clear();
                c.shared().start(m, len);
            } else {
                c.shared().set_ports(m, len);
            }
        }
        self.wake();
        id
    }

    /// Removes capture `id`; the last one stops the tap.
    pub fn unsubscribe(&mut self, id: u64) {
        self.subs.retain(|s| s.id != id);
        let (empty, (m, len)) = (self.subs.is_empty(), self.union());
        for c in self.consumers() {
            if empty {
                c.shared().stop();
            } else {
                c.shared().set_ports(m, len);
            }
        }
        self.wake();
    }

    fn union(&self) -> (u64, u32) {
        self.subs.iter().fold((0, 1), |(m, l), s| (m | s.mask, l.max(s.snaplen)))
    }

    /// Moves the ring's records to the subscribers whose ports they are on.
    fn pump(&mut self) {
        self.scratch.clear();
        let mut scratch = std::mem::take(&mut self.scratch);
        let drained: usize = self.consumers().map(|c| c.drain(&mut scratch)).sum();
        self.scratch = scratch;
        if drained == 0 {
            return;
        }
        let mut off = 0;
        let mut lost = 0;
        while let Some((r, len)) = Record::decode(&self.scratch[off..]) {
            off += len;
            for s in &mut self.subs {
                if r.port >= 64 || s.mask & (1u64 << r.port) == 0 {
                    continue;
                }
                if s.buf.len() >= CLIENT_BACKLOG_BYTES {
                    lost += 1;
                    continue;
                }
                let cut = r.data.len().min(s.snaplen as usize);
                Record { data: &r.data[..cut], ..r.clone() }.encode(&mut s.buf);
            }
        }
        if lost > 0 {
            self.consumer.shared().add_lost(lost);
        }
    }

    /// Drains the ring and moves capture `id`'s pending records into `out`.
    pub fn take(&mut self, id: u64, out: &mut Vec<u8>) {
        self.pump();
        if let Some(s) = self.subs.iter_mut().find(|s| s.id == id) {
            if out.is_empty() {
                std::mem::swap(out, &mut s.buf);
            } else {
                out.append(&mut s.buf);
            }
        }
    }
}

/// Query of `GET /capture`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CaptureQuery {
    /// Comma-separated port names; empty or missing: every port.
    #[serde(default)]
    pub ports: Option<String>,
    /// Captured bytes per frame at most (default: whole frames).
    #[serde(default)]
    pub snaplen: Option<u32>,
}

/// Leaves the hub when a capture stream ends (the client closed the connection, or the
/// server dropped the stream).
struct Running {
    id: u64,
    slot: Slot,
    buf: Vec<u8>,
    idle_since: std::time::Instant,
}

impl Drop for Running {
    fn drop(&mut self) {
        self.slot.lock().unwrap_or_else(std::sync::PoisonError::into_inner).unsubscribe(self.id);
    }
}

/// `GET /capture?ports=a,b&snaplen=N`: a [`StreamHeader`] line, then records as the data path
/// mirrors them, a heartbeat record after a second without frames, until the client closes the
/// connection. Any number of captures may run at once, on the same ports or others; each gets
/// every frame of its ports.
pub fn router(node: String, ports: Vec<String>, slot: Slot) -> axum::Router {
    use axum::http::{header, StatusCode};
    use axum::response::IntoResponse;
    let handler = move |axum::extract::Query(q): axum::extract::Query<CaptureQuery>| {
        let (node, ports, slot) = (node.clone(), ports.clone(), slot.clone());
        async move {
            let names: Vec<&str> = q.ports.as_deref().unwrap_or("").split(',').filter(|s| !s.is_empty()).collect();
            let mask = if names.is_empty() {
                (1u64 << ports.len().min(63)) - 1
            } else {
                match port_mask(&ports, &names) {
                    Ok(m) => m,
                    Err(e) => return (StatusCode::BAD_REQUEST, format!("{node}: {e}\n")).into_response(),
                }
            };
            let snaplen = q.snaplen.filter(|&s| s > 0).unwrap_or(u32::from(u16::MAX));
            let id = slot.lock().unwrap_or_else(std::sync::PoisonError::into_inner).subscribe(mask, snaplen);
            let hdr = StreamHeader { node, ports, snaplen, clock: WALL_CLOCK.into() };
            let mut first = serde_json::to_vec(&hdr).unwrap_or_default();
            first.push(b'\n');
            let running = Running { id, slot, buf: first, idle_since: std::time::Instant::now() };
            let stream = futures_util::stream::unfold(running, |mut r| async move {
                loop {
                    {
                        let mut hub = r.slot.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                        hub.take(r.id, &mut r.buf);
                    }
                    if !r.buf.is_empty() {
                        r.idle_since = std::time::Instant::now();
                        let chunk = bytes::Bytes::from(std::mem::take(&mut r.buf));
                        return Some((Ok::<_, std::io::Error>(chunk), r));
                    }
                    if r.idle_since.elapsed() >= std::time::Duration::from_secs(1) {
                        let beat = Record { ts_ns: 0, port: HEARTBEAT_PORT, dir: 0, orig_len: 0, data: &[] };
                        beat.encode(&mut r.buf);
                        continue;
                    }
                    tokio::time::sleep(std::time::Duration::from_millis(5)).await;
                }
            });
            ([(header::CONTENT_TYPE, "application/x-rocefab-capture")], axum::body::Body::from_stream(stream))
                .into_response()
        }
    };
    axum::Router::new().route("/capture", axum::routing::get(handler))
}

/// The capture counters both daemons export: frames copied to a running capture and frames it
/// missed (a full ring, or a daemon's other losses it adds in).
#[derive(Debug, Clone)]
pub struct CaptureMetrics {
    mirrored: prometheus::IntCounter,
    lost: prometheus::IntCounter,
}

impl CaptureMetrics {
    /// Registers `rocefab_capture_{mirrored,lost}_frames_total` with `const_labels`.
    pub fn new(
        registry: &prometheus::Registry,
        const_labels: &std::collections::HashMap<String, String>,
    ) -> prometheus::Result<Self> {
        let counter = |name: &str, help: &str| -> prometheus::Result<prometheus::IntCounter> {
            let c = prometheus::IntCounter::with_opts(
                prometheus::Opts::new(name, help).const_labels(const_labels.clone()),
            )?;
            registry.register(Box::new(c.clone()))?;
            Ok(c)
        };
        Ok(CaptureMetrics {
            mirrored: counter(
                "rocefab_capture_mirrored_frames_total",
                "frames copied to a running capture (rocefab capture)",
            )?,
            lost: counter(
                "rocefab_capture_lost_frames_total",
                "frames a running capture missed (its mirror ring or capture socket was full)",
            )?,
        })
    }
    /// Brings the counters up to the (monotonic) totals.
    pub fn update(&self, mirrored: u64, lost: u64) {
        self.mirrored.inc_by(mirrored.saturating_sub(self.mirrored.get()));
        self.lost.inc_by(lost.saturating_sub(self.lost.get()));
    }
}

/// Port mask for `names` among `ports`; an unknown name is an error naming it.
pub fn port_mask(ports: &[String], names: &[&str]) -> Result<u64, String> {
    let mut m = 0u64;
    for n in names {
        let i =
            ports.iter().position(|p| p == n).ok_or_else(|| format!("no port {n:?} (ports: {})", ports.join(", ")))?;
        if i >= 64 {
            return Err(format!("port {n} is port {i}: only the first 64 ports can be mirrored"));
        }
        m |= 1 << i;
    }
    Ok(m)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mirroring_is_off_until_started_and_overflow_is_counted() {
        let (mut p, mut c, tap) = tap(300);
        assert_eq!(p.mask(), 0);
        tap.set_epoch(1_000);
        tap.start(0b10, 64);
        assert_eq!(p.mask(), 0b10);
        p.mirror(1, DIR_IN, 5, &[1; 100]); // 24 + 64 bytes
        p.mirror(1, DIR_OUT, 6, &[2; 30]); // 24 + 30
        p.mirror(1, DIR_OUT, 7, &[3; 200]); // 24 + 64: 230 of 300 used
        p.mirror(1, DIR_OUT, 8, &[4; 200]); // no room
        assert_eq!((tap.mirrored(), tap.lost()), (3, 1));
        let mut out = Vec::new();
        c.drain(&mut out);
        let (r1, n1) = Record::decode(&out).unwrap();
        assert_eq!((r1.ts_ns, r1.dir, r1.orig_len, r1.data.len()), (1_005, DIR_IN, 100, 64));
        let (r2, n2) = Record::decode(&out[n1..]).unwrap();
        assert_eq!((r2.ts_ns, r2.data), (1_006, &[2u8; 30][..]));
        let (r3, _) = Record::decode(&out[n1 + n2..]).unwrap();
        assert_eq!(r3.data[0], 3);
        // The ring wraps: records split across its end come out whole.
        for i in 0..20u8 {
            p.mirror(0, DIR_IN, u64::from(i), &[i; 50]);
            let mut o = Vec::new();
            c.drain(&mut o);
            let (r, _) = Record::decode(&o).unwrap();
            assert_eq!(r.data, &[i; 50][..]);
        }
        tap.stop();
        assert_eq!(p.mask(), 0);
    }

    /// Gaps between consecutive stamps.
    #[test]
    fn concurrent_captures_each_get_every_frame_of_their_ports() {
        let (mut p, c, tap) = tap(1 << 16);
        let mut hub = Hub::new(c);
        assert_eq!(p.mask(), 0);
        // A captures ports 0 and 1 whole; B joins for port 1 with a snap length of 20.
        let a = hub.subscribe(0b011, 9000);
        let g = tap.generation();
        assert_eq!(p.mask(), 0b011);
        p.mirror(0, DIR_IN, 1, &[1; 60]);
        let b = hub.subscribe(0b010, 20);
        assert_eq!(tap.generation(), g, "joining does not restart the capture");
        assert_eq!(p.mask(), 0b011);
        p.mirror(1, DIR_OUT, 2, &[2; 100]);
        p.mirror(0, DIR_IN, 3, &[3; 60]);
        let c3 = hub.subscribe(0b100, 9000);
        assert_eq!(p.mask(), 0b111);
        p.mirror(2, DIR_IN, 4, &[4; 70]);
        p.mirror(1, DIR_IN, 5, &[5; 80]);
        let read = |hub: &mut Hub, id| {
            let mut out = Vec::new();
            hub.take(id, &mut out);
            let mut v = Vec::new();
            let mut off = 0;
            while let Some((r, len)) = Record::decode(&out[off..]) {
                v.push((r.ts_ns, r.port, r.orig_len, r.data.len()));
                off += len;
            }
            v
        };
        assert_eq!(read(&mut hub, a), vec![(1, 0, 60, 60), (2, 1, 100, 100), (3, 0, 60, 60), (5, 1, 80, 80)]);
        assert_eq!(read(&mut hub, b), vec![(2, 1, 100, 20), (5, 1, 80, 20)], "B's own snap length");
        assert_eq!(read(&mut hub, c3), vec![(4, 2, 70, 70)]);
        // A leaves: the tap narrows to what B and C want; B still gets everything on port 1.
        hub.unsubscribe(a);
        assert_eq!(p.mask(), 0b110);
        p.mirror(1, DIR_IN, 6, &[6; 30]);
        assert_eq!(read(&mut hub, b), vec![(6, 1, 30, 20)]);
        hub.unsubscribe(b);
        hub.unsubscribe(c3);
        assert_eq!((p.mask(), hub.subscribers()), (0, 0), "the last one stops the mirror");
        // A new capture after all ended starts afresh (stale records are not handed out).
        p.mirror(1, DIR_IN, 7, &[7; 30]);
        let d = hub.subscribe(0b010, 9000);
        assert_eq!(tap.generation(), g + 1);
        assert_eq!(read(&mut hub, d), vec![]);
    }

    #[test]
    fn a_stalled_capture_loses_frames_counted_without_holding_the_others_back() {
        let (mut p, c, tap) = tap(1 << 20);
        let mut hub = Hub::new(c);
        let fast = hub.subscribe(1, 9000);
        let slow = hub.subscribe(1, 9000);
        let frame = vec![0u8; 8192];
        let per = RECORD_HEADER + frame.len();
        let n = CLIENT_BACKLOG_BYTES / per + 10;
        let mut got = 0;
        for i in 0..n {
            p.mirror(0, DIR_IN, i as u64, &frame);
            let mut out = Vec::new();
            hub.take(fast, &mut out);
            got += out.len() / per;
        }
        assert_eq!(got, n, "the reading capture got every frame");
        let backlog = CLIENT_BACKLOG_BYTES.div_ceil(per);
        assert_eq!(tap.lost(), (n - backlog) as u64, "the stalled one's overflow is counted");
        let mut out = Vec::new();
        hub.take(slow, &mut out);
        assert_eq!(out.len() / per, backlog);
    }

    #[test]
    fn port_masks_name_unknown_ports() {
        let ports: Vec<String> = ["eth1", "eth2"].iter().map(|s| s.to_string()).collect();
        assert_eq!(port_mask(&ports, &["eth2"]), Ok(0b10));
        assert!(port_mask(&ports, &["eth9"]).unwrap_err().contains("eth9"));
    }
}
