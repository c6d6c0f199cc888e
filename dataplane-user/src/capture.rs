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
//! ([`StreamHeader`]) followed by records, until the client closes it.
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;

use serde::{Deserialize, Serialize};

/// Frame received on the port.
pub const DIR_IN: u8 = 1;
/// Frame sent on the port.
pub const DIR_OUT: u8 = 2;
/// Bytes of a record header.
pub const RECORD_HEADER: usize = 24;
/// Port number of a heartbeat record.
pub const HEARTBEAT_PORT: u16 = u16::MAX;
/// Default capacity of a switch's mirror ring.
pub const RING_BYTES: usize = 8 << 20;

/// One mirrored frame, decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record<'a> {
    pub ts_ns: u64,
    pub port: u16,
    pub dir: u8,
    pub orig_len: u32,
    pub data: &'a [u8],
}

impl Record<'_> {
    /// Writes the header for a frame of `orig_len` bytes of which `caplen` follow.
    pub fn header(ts_ns: u64, port: u16, dir: u8, orig_len: u32, caplen: u32) -> [u8; RECORD_HEADER] {
        let mut h = [0u8; RECORD_HEADER];
        h[0..8].copy_from_slice(&ts_ns.to_le_bytes());
        h[8..10].copy_from_slice(&port.to_le_bytes());
        h[10] = dir;
        h[12..16].copy_from_slice(&orig_len.to_le_bytes());
        h[16..20].copy_from_slice(&caplen.to_le_bytes());
        h
    }

    /// Encodes a whole record into `out`.
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&Record::header(self.ts_ns, self.port, self.dir, self.orig_len, self.data.len() as u32));
        out.extend_from_slice(self.data);
    }

    /// Decodes the record at the start of `buf`: the record and its total length, `None` if
    /// `buf` does not hold a whole record yet.
    pub fn decode(buf: &[u8]) -> Option<(Record<'_>, usize)> {
        let h = buf.get(..RECORD_HEADER)?;
        let u32_at = |i: usize| u32::from_le_bytes([h[i], h[i + 1], h[i + 2], h[i + 3]]);
        let caplen = u32_at(16) as usize;
        let data = buf.get(RECORD_HEADER..RECORD_HEADER + caplen)?;
        let rec = Record {
            ts_ns: u64::from_le_bytes(h[0..8].try_into().ok()?),
            port: u16::from_le_bytes([h[8], h[9]]),
            dir: h[10],
            orig_len: u32_at(12),
            data,
        };
        Some((rec, RECORD_HEADER + caplen))
    }
}

/// The first line of a capture stream.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StreamHeader {
    /// Node (switch or host) name.
    pub node: String,
    /// Port names by port number (the record's `port` indexes this list).
    pub ports: Vec<String>,
    /// Captured bytes per frame at most.
    pub snaplen: u32,
    /// What the timestamps are: [`WALL_CLOCK`] (ns since the Unix epoch, not dilated; the
    /// reader converts them to the fabric's emulated time).
    pub clock: String,
}

/// [`StreamHeader::clock`] of records stamped with the wall clock's Unix time in ns.
pub const WALL_CLOCK: &str = "wall clock";

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
    /// Captures started so far: tells a new capture from the one before it even when both
    /// mirror the same ports.
    generation: AtomicU64,
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
    /// Starts mirroring the ports in `mask`, at most `snaplen` bytes each.
    pub fn start(&self, mask: u64, snaplen: u32) {
        self.snaplen.store(snaplen.max(1), Ordering::Relaxed);
        self.generation.fetch_add(1, Ordering::AcqRel);
        self.mask.store(mask, Ordering::Release);
    }
    pub fn stop(&self) {
        self.mask.store(0, Ordering::Release);
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

/// The control side's end while no capture runs (a capture takes it, and gives it back when
/// its stream ends).
pub type Slot = std::sync::Arc<std::sync::Mutex<Option<TapConsumer>>>;

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

/// Stops the mirror and gives the consumer back when a capture stream ends (the client closed
/// the connection, or the server dropped the stream).
struct Running {
    consumer: Option<TapConsumer>,
    slot: Slot,
    buf: Vec<u8>,
    idle_since: std::time::Instant,
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(c) = self.consumer.take() {
            c.shared().stop();
            *self.slot.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Some(c);
        }
    }
}

/// `GET /capture?ports=a,b&snaplen=N`: a [`StreamHeader`] line, then records as the data path
/// mirrors them, a heartbeat record after a second without frames, until the client closes the
/// connection. One capture at a time: a second one gets 409 Conflict.
pub fn router(node: String, ports: Vec<String>, slot: Slot) -> axum::Router {
    use axum::http::{header, StatusCode};
    use axum::response::IntoResponse;
    let handler = move |axum::extract::Query(q): axum::extract::Query<CaptureQuery>| {
        let (node, ports, slot) = (node.clone(), ports.clone(), slot.clone());
        async move {
            let names: Vec<&str> = q.ports.as_deref().unwrap_or("").split(',').filter(|s| !s.is_empty()).collect();
            let mask = if names.is_empty() { (1u64 << ports.len().min(63)) - 1 } else {
                match port_mask(&ports, &names) {
                    Ok(m) => m,
                    Err(e) => return (StatusCode::BAD_REQUEST, format!("{node}: {e}\n")).into_response(),
                }
            };
            let Some(mut consumer) = slot.lock().unwrap_or_else(std::sync::PoisonError::into_inner).take() else {
                return (StatusCode::CONFLICT, format!("{node}: a capture is already running\n")).into_response();
            };
            let snaplen = q.snaplen.filter(|&s| s > 0).unwrap_or(u32::from(u16::MAX));
            consumer.clear();
            consumer.shared().start(mask, snaplen);
            let hdr = StreamHeader { node, ports, snaplen, clock: WALL_CLOCK.into() };
            let mut first = serde_json::to_vec(&hdr).unwrap_or_default();
            first.push(b'\n');
            let running = Running { consumer: Some(consumer), slot, buf: first, idle_since: std::time::Instant::now() };
            let stream = futures_util::stream::unfold(running, |mut r| async move {
                loop {
                    if let Some(c) = r.consumer.as_mut() {
                        c.drain(&mut r.buf);
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
            ([(header::CONTENT_TYPE, "application/x-rocefab-capture")], axum::body::Body::from_stream(stream)).into_response()
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
    pub fn new(registry: &prometheus::Registry, const_labels: &std::collections::HashMap<String, String>) -> prometheus::Result<Self> {
        let counter = |name: &str, help: &str| -> prometheus::Result<prometheus::IntCounter> {
            let c = prometheus::IntCounter::with_opts(prometheus::Opts::new(name, help).const_labels(const_labels.clone()))?;
            registry.register(Box::new(c.clone()))?;
            Ok(c)
        };
        Ok(CaptureMetrics {
            mirrored: counter("rocefab_capture_mirrored_frames_total", "frames copied to a running capture (rocefab capture)")?,
            lost: counter("rocefab_capture_lost_frames_total", "frames a running capture missed (its mirror ring or capture socket was full)")?,
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
        let i = ports.iter().position(|p| p == n).ok_or_else(|| format!("no port {n:?} (ports: {})", ports.join(", ")))?;
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
    fn records_round_trip_and_partial_buffers_wait() {
        let r = Record { ts_ns: 1_700_000_000_123_456_789, port: 3, dir: DIR_OUT, orig_len: 100, data: &[7; 60] };
        let mut v = Vec::new();
        r.encode(&mut v);
        assert_eq!(v.len(), RECORD_HEADER + 60);
        assert_eq!(Record::decode(&v), Some((r.clone(), v.len())));
        for cut in 0..v.len() {
            assert_eq!(Record::decode(&v[..cut]), None, "cut at {cut}");
        }
    }

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

    #[test]
    fn port_masks_name_unknown_ports() {
        let ports: Vec<String> = ["eth1", "eth2"].iter().map(|s| s.to_string()).collect();
        assert_eq!(port_mask(&ports, &["eth2"]), Ok(0b10));
        assert!(port_mask(&ports, &["eth9"]).unwrap_err().contains("eth9"));
    }
}
