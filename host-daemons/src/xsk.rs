//! AF_XDP sockets for the GPU NIC ports, on the shared wrapper [`afxdp`]: one UMEM and one
//! socket per port, queue 0, copy mode (veth has no zero-copy), `XDP_USE_NEED_WAKEUP`, and
//! libxdp's own program load inhibited — the host program (`rocefab_plumbing::host_loader`)
//! redirects into `HOST_XSKS`, filled by the daemon. The copy-mode TX budget stays at the
//! kernel's default of 32 frames per kick.
//!
//! A port whose link MTU makes frames longer than one UMEM chunk (MTU above 3822 bytes: the
//! 9216-byte jumbo MTU that carries RoCE at path MTU 4096) binds with `XDP_USE_SG`
//! ([`afxdp::chain`]): a received packet of several descriptors is copied into one buffer for
//! the engine, and a frame the engine writes (into a buffer) leaves as a chain of descriptors
//! with `XDP_PKT_CONTD` on all but the last. A port without it moves one descriptor per frame,
//! written and read in place.
//!
//! The UMEM is sized from the link MTU, as a
//! switch's is ([`rocefab_contracts::memory::nic_memory`]): 2 KiB chunks where the MTU fits
//! them; the rings stay at [`rocefab_contracts::memory::NIC_MAX_RING`] (a smaller ring lost
//! frames when the process was descheduled, see there). Its frames are split once: one
//! RX ring's worth circulates between the fill and RX rings, the rest are the TX pool, returned
//! through the completion ring. Frames come back from the
//! completion ring with length 0; every TX frame is rewritten in full before it is produced.
//!
//! Captures: frames taken from the RX ring and frames produced to the TX ring never pass the
//! kernel's packet taps, so while `rocefab-nicd` captures a port ([`XskPort::mirror_port`]
//! enabled in the [`MirrorProducer`]'s mask, checked once per batch) they are copied into the
//! shared-memory mirror ring ([`crate::mirror`]), each stamped on its own
//! ([`CaptureStamps`]): a received frame with the time the host XDP program saw it (the
//! `rx_ns` of its `dataplane_common::XdpMeta`), a sent frame with the pass that sends it; both
//! spaced at least one serialisation time at the NIC's line rate after the previous frame in
//! that direction (`rocefab_plumbing::capture::LineStamp`).
use std::num::NonZeroU32;
use std::os::fd::{AsRawFd, RawFd};

use afxdp::chain::{needs_multi_buffer, Segment, MAX_FRAME_BYTES, MAX_SEGMENTS};
use afxdp::{CompQueue, FillQueue, FrameDesc, RxQueue, TxQueue, Umem};

use dataplane_common::{kind, XdpMeta};
use gpu_host::nic::engine::Engine;
use rocefab_plumbing::capture::{serialisation_ns, LineStamp, MonoClock};

use crate::mirror::{MirrorProducer, DIR_IN, DIR_OUT};

/// Most frames handled per ring operation.
pub const BATCH: usize = 64;

/// Errors creating a port.
#[derive(Debug, thiserror::Error)]
pub enum XskError {
    #[error("{name}: {source}")]
    Open { name: String, source: afxdp::Error },
    #[error("{name}: fill ring accepted {got} of {want} frames")]
    Fill { name: String, got: usize, want: usize },
    #[error("{name}: reading the link MTU (SIOCGIFMTU): {source}")]
    Mtu { name: String, source: std::io::Error },
    #[error("{name}: {what}: {source}")]
    Io { name: String, what: &'static str, source: std::io::Error },
}

/// One NIC port's socket, rings and frame pools.
pub struct XskPort {
    pub name: String,
    umem: Umem,
    /// UMEM chunk size, and TX ring entries (the TX pool; the RX side's frames are the fill
    /// ring's).
    chunk_bytes: u32,
    tx_ring: u32,
    rx: RxQueue,
    tx: TxQueue,
    fill: FillQueue,
    comp: CompQueue,
    free: Vec<FrameDesc>,
    rx_descs: Vec<FrameDesc>,
    comp_descs: Vec<FrameDesc>,
    batch: Vec<FrameDesc>,
    /// TX frames handed to the kernel and not yet completed.
    pub tx_outstanding: usize,
    /// This NIC's capture port number in the mirror ring (`None`: never mirrored).
    pub mirror_port: Option<u16>,
    /// How captured frames are stamped.
    pub stamps: CaptureStamps,
    /// Multi-buffer (`XDP_USE_SG`): frames longer than a chunk, gathered and split through
    /// `rx_buf` / `tx_buf`.
    multi_buffer: bool,
    /// A received multi-descriptor packet so far (`rx_len` bytes; `rx_over`: longer than the
    /// buffer, dropped when it ends).
    rx_buf: Box<[u8]>,
    rx_len: usize,
    rx_over: bool,
    /// The XDP metadata in front of that packet's first descriptor (for a capture's stamp).
    rx_meta: Option<[u8; XdpMeta::LEN]>,
    /// Where the engine writes a frame before it is split into descriptors.
    tx_buf: Box<[u8]>,
    /// Received packets dropped for being longer than any link MTU rocefab allows.
    pub rx_too_long: u64,
}

/// The clock and line rate a port's captured frames are stamped with.
#[derive(Debug, Clone, Copy)]
pub struct CaptureStamps {
    /// The data loop's clock (its `now`), on CLOCK_MONOTONIC like `bpf_ktime_get_ns`.
    pub clock: MonoClock,
    /// Unix time of the clock's zero (measured once, [`MonoClock::unix_offset_ns`]).
    pub unix_offset_ns: u64,
    /// The NIC's wall-clock line rate (emulated / D).
    pub line_rate_bps: u64,
    rx: LineStamp,
    tx: LineStamp,
}

impl CaptureStamps {
    pub fn new(clock: MonoClock, line_rate_bps: u64) -> Self {
        CaptureStamps {
            clock,
            unix_offset_ns: clock.unix_offset_ns(),
            line_rate_bps,
            rx: LineStamp::default(),
            tx: LineStamp::default(),
        }
    }

    /// Unix ns of a frame received at data-loop time `now` whose XDP metadata is `meta`.
    #[inline]
    fn received(&mut self, meta: Option<[u8; XdpMeta::LEN]>, now: u64, len: usize) -> u64 {
        let seen = meta
            .and_then(|m| XdpMeta::from_bytes(&m))
            .filter(|m| m.decision.kind == kind::HOST)
            .map_or(now, |m| self.clock.from_ktime(m.rx_ns));
        self.rx.stamp(seen, serialisation_ns(len as u32, self.line_rate_bps)).wrapping_add(self.unix_offset_ns)
    }

    /// Unix ns of a frame sent by the pass at data-loop time `now`.
    #[inline]
    fn sent(&mut self, now: u64, len: usize) -> u64 {
        self.tx.stamp(now, serialisation_ns(len as u32, self.line_rate_bps)).wrapping_add(self.unix_offset_ns)
    }
}

impl std::fmt::Debug for XskPort {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("XskPort").field("name", &self.name).field("free", &self.free.len()).finish()
    }
}

impl XskPort {
    /// Creates the UMEM and the socket on queue 0 of `name` (current netns), for a NIC of
    /// `wall_rate_bps` (its line rate / D), and stocks the fill ring.
    pub fn open(name: &str, wall_rate_bps: u64) -> Result<XskPort, XskError> {
        let open_err = |source| XskError::Open { name: name.into(), source };
        let mtu =
            rocefab_plumbing::link::link_mtu(name).map_err(|source| XskError::Mtu { name: name.into(), source })?;
        let multi_buffer = needs_multi_buffer(mtu);
        let mem = rocefab_contracts::memory::nic_memory(wall_rate_bps, mtu);
        let (rx_ring, tx_ring) = (mem.rx_ring, mem.tx_ring);
        let frames = NonZeroU32::new(rx_ring + tx_ring).expect("non-zero");
        let (umem, mut descs) = afxdp::umem(frames, mem.chunk_bytes, rx_ring, tx_ring).map_err(open_err)?;
        // SAFETY: the UMEM is new and used by this socket only; every descriptor given to the
        // rings comes from `descs` of this UMEM, and the UMEM lives as long as the port.
        let afxdp::Socket { rx, tx, mut fill, comp, .. } =
            unsafe { afxdp::Socket::open(&umem, name, rx_ring, tx_ring, false, multi_buffer) }.map_err(open_err)?;
        let buf = || vec![0u8; if multi_buffer { MAX_FRAME_BYTES } else { 0 }].into_boxed_slice();
        let free = descs.split_off(rx_ring as usize);
        // SAFETY: fresh frames of this UMEM that are in no ring.
        let got = unsafe { fill.produce(&descs) };
        if got != descs.len() {
            return Err(XskError::Fill { name: name.into(), got, want: descs.len() });
        }
        Ok(XskPort {
            name: name.into(),
            umem,
            chunk_bytes: mem.chunk_bytes,
            tx_ring,
            rx,
            tx,
            fill,
            comp,
            free,
            rx_descs: vec![FrameDesc::default(); BATCH],
            comp_descs: vec![FrameDesc::default(); tx_ring as usize],
            batch: Vec::with_capacity(BATCH),
            tx_outstanding: 0,
            mirror_port: None,
            // Until the daemon gives the loop's clock and the NIC's rate.
            stamps: CaptureStamps::new(MonoClock::new(), u64::MAX),
            multi_buffer,
            rx_buf: buf(),
            rx_len: 0,
            rx_over: false,
            rx_meta: None,
            tx_buf: buf(),
            rx_too_long: 0,
        })
    }

    /// The socket fd (for the XSK map and `poll`).
    pub fn fd(&self) -> RawFd {
        self.rx.fd().as_raw_fd()
    }

    /// The mirror and this port's number in it when this port is being captured (one atomic
    /// load).
    fn capturing<'m>(&self, mirror: Option<&'m mut MirrorProducer>) -> Option<(&'m mut MirrorProducer, u16)> {
        let port = self.mirror_port?;
        let m = mirror?;
        m.enabled(port).then_some((m, port))
    }

    /// Hands up to [`BATCH`] received frames to `engine` as NIC `nic` (and to `mirror` while
    /// this port is captured) and refills the fill ring; returns how many.
    pub fn receive(
        &mut self,
        engine: &mut Engine,
        nic: usize,
        now: u64,
        mirror: Option<&mut MirrorProducer>,
    ) -> Result<usize, XskError> {
        // SAFETY: `rx_descs` receives descriptors of frames the kernel filled for us.
        let n = unsafe { self.rx.consume(&mut self.rx_descs) };
        let mut capture = if n > 0 { self.capturing(mirror) } else { None };
        for d in &self.rx_descs[..n] {
            // SAFETY: the frame was just consumed from the RX ring, so the kernel no longer
            // writes it until we put it back on the fill ring below.
            let data = unsafe { self.umem.data(d) };
            let first = self.rx_len == 0 && !self.rx_over;
            let frame = if first && !d.continues() {
                data.contents()
            } else {
                // A descriptor of a multi-buffer packet: gather it.
                if first {
                    // SAFETY: as above: a frame of this UMEM we own until it goes back to the
                    // fill ring. The metadata is in front of the packet's first descriptor.
                    self.rx_meta = unsafe { afxdp::metadata::<{ XdpMeta::LEN }>(&self.umem, self.chunk_bytes, d) };
                }
                let part = data.contents();
                match self.rx_buf.get_mut(self.rx_len..self.rx_len + part.len()) {
                    Some(b) => {
                        b.copy_from_slice(part);
                        self.rx_len += part.len();
                    }
                    None => self.rx_over = true,
                }
                if d.continues() {
                    continue;
                }
                let len = std::mem::take(&mut self.rx_len);
                if std::mem::take(&mut self.rx_over) {
                    self.rx_too_long += 1;
                    continue;
                }
                &self.rx_buf[..len]
            };
            if let Some((m, port)) = capture.as_mut() {
                let meta = if first {
                    // SAFETY: as above: a frame of this UMEM we own until it goes back to the fill ring.
                    unsafe { afxdp::metadata::<{ XdpMeta::LEN }>(&self.umem, self.chunk_bytes, d) }
                } else {
                    self.rx_meta
                };
                let ts = self.stamps.received(meta, now, frame.len());
                m.push(*port, DIR_IN, ts, frame);
            }
            engine.on_frame(nic, frame, now);
        }
        if n > 0 {
            let mut put = 0;
            while put < n {
                // SAFETY: frames of this UMEM we own (consumed above); the fill ring has room
                // for all `rx_ring` frames.
                put += unsafe { self.fill.produce(&self.rx_descs[put..n]) };
            }
            if self.fill.needs_wakeup() {
                self.fill.wakeup(self.rx.fd_mut(), 0).map_err(|source| XskError::Io {
                    name: self.name.clone(),
                    what: "fill ring wakeup",
                    source,
                })?;
            }
        }
        Ok(n)
    }

    /// Reclaims completed TX frames, then asks `engine` for frames to send as NIC `nic`,
    /// produces them (copying them to `mirror` while this port is captured) and kicks the
    /// kernel; returns how many were sent.
    pub fn transmit(
        &mut self,
        engine: &mut Engine,
        nic: usize,
        now: u64,
        mirror: Option<&mut MirrorProducer>,
    ) -> Result<usize, XskError> {
        // SAFETY: `comp_descs` receives descriptors of frames the kernel finished sending.
        let c = unsafe { self.comp.consume(&mut self.comp_descs) };
        self.free.extend_from_slice(&self.comp_descs[..c]);
        self.tx_outstanding -= c.min(self.tx_outstanding);
        let mut capture = self.capturing(mirror);
        self.batch.clear();
        if self.multi_buffer {
            return self.transmit_chained(engine, nic, now, capture);
        }
        while self.batch.len() < BATCH {
            let Some(mut d) = self.free.pop() else { break };
            // SAFETY: `d` is a free TX frame of this UMEM (in no ring): we may write it.
            let mut data = unsafe { self.umem.data_mut(&mut d) };
            let mut cur = data.cursor();
            let cap = cur.buf_len();
            cur.set_pos(cap);
            match engine.next_tx(nic, data.contents_mut(), now) {
                Some(n) => {
                    data.cursor().set_pos(n);
                    if let Some((m, port)) = capture.as_mut() {
                        let ts = self.stamps.sent(now, n);
                        m.push(*port, DIR_OUT, ts, data.contents());
                    }
                    self.batch.push(d);
                }
                None => {
                    self.free.push(d);
                    break;
                }
            }
        }
        self.produce_batch().map(|()| self.batch.len())
    }

    /// Produces `batch` on the TX ring and kicks (or kicks for what the ring still holds).
    fn produce_batch(&mut self) -> Result<(), XskError> {
        if self.batch.is_empty() {
            // Copy mode sends at most 32 frames per kick (the kernel's TX_BATCH_SIZE); frames
            // still in the TX ring need another kick, or they would wait for the next send.
            if self.tx_pending() {
                self.kick()?;
            }
            return Ok(());
        }
        let mut put = 0;
        while put < self.batch.len() {
            // SAFETY: frames of this UMEM written by the caller; the TX ring (`tx_ring`) can
            // hold every frame of the TX pool.
            put += unsafe { self.tx.produce(&self.batch[put..]) };
        }
        self.tx_outstanding += put;
        self.kick()
    }

    /// [`XskPort::transmit`] on a multi-buffer port: the engine writes each frame into
    /// `tx_buf`, which is split into as many descriptors as it takes (`XDP_PKT_CONTD` on all but
    /// the last). Returns the frames sent.
    fn transmit_chained(
        &mut self,
        engine: &mut Engine,
        nic: usize,
        now: u64,
        mut capture: Option<(&mut MirrorProducer, u16)>,
    ) -> Result<usize, XskError> {
        let mut frames = 0;
        // Room for the longest frame in descriptors, in the batch and in the pool.
        while self.batch.len() + MAX_SEGMENTS <= BATCH && self.free.len() >= MAX_SEGMENTS {
            let Some(n) = engine.next_tx(nic, &mut self.tx_buf, now) else { break };
            let frame = &self.tx_buf[..n.min(self.tx_buf.len())];
            if let Some((m, port)) = capture.as_mut() {
                let ts = self.stamps.sent(now, frame.len());
                m.push(*port, DIR_OUT, ts, frame);
            }
            let mut rest = frame;
            while !rest.is_empty() {
                let Some(mut d) = self.free.pop() else { break };
                // SAFETY: `d` is a free TX frame of this UMEM (in no ring): we may write it.
                let mut data = unsafe { self.umem.data_mut(&mut d) };
                let mut cur = data.cursor();
                let take = rest.len().min(cur.buf_len());
                cur.set_pos(0);
                // A chunk holds `take` bytes: the write is never short.
                let _ = std::io::Write::write_all(&mut cur, &rest[..take]);
                rest = &rest[take..];
                d.set_continues(!rest.is_empty());
                self.batch.push(d);
            }
            frames += 1;
        }
        self.produce_batch().map(|()| frames)
    }

    fn kick(&self) -> Result<(), XskError> {
        match self.tx.wakeup() {
            Ok(()) => Ok(()),
            // EAGAIN/EBUSY/ENOBUFS: the kernel is still busy with earlier frames; the next
            // kick retries. ENETDOWN: the port is down (a cut cable, `rocefab fail link`); what
            // the ring holds waits for it to come back, and the engine sends nothing new on it.
            Err(e)
                if matches!(
                    e.raw_os_error(),
                    Some(libc::EAGAIN) | Some(libc::EBUSY) | Some(libc::ENOBUFS) | Some(libc::ENETDOWN)
                ) =>
            {
                Ok(())
            }
            Err(source) => Err(XskError::Io { name: self.name.clone(), what: "TX kick (sendto)", source }),
        }
    }

    /// Frames are still in the TX ring, not yet taken by the kernel.
    pub fn tx_pending(&mut self) -> bool {
        self.tx.nb_free_exact() < self.tx_ring
    }

    /// Too few free TX frames are left for the longest frame (one; [`MAX_SEGMENTS`] on a
    /// multi-buffer port): the caller should wait briefly for completions.
    pub fn tx_starved(&self) -> bool {
        self.free.len() < if self.multi_buffer { MAX_SEGMENTS } else { 1 }
    }

    /// Socket statistics (`XDP_STATISTICS`): (rx_dropped, rx_ring_full, rx_fill_ring_empty).
    pub fn stats(&self) -> Result<(u64, u64, u64), XskError> {
        let s = afxdp::rx_statistics(&self.rx).map_err(|source| XskError::Io {
            name: self.name.clone(),
            what: "XDP_STATISTICS",
            source,
        })?;
        Ok((s.rx_dropped, s.rx_ring_full, s.rx_fill_ring_empty_descs))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dataplane_common::Decision;

    fn meta(kind: u8, rx_ns: u64) -> Option<[u8; XdpMeta::LEN]> {
        let decision = Decision { magic: Decision::MAGIC, kind, ..Default::default() };
        Some(XdpMeta { rx_ns, decision }.to_bytes())
    }

    #[test]
    fn received_frames_carry_the_xdp_time_spaced_at_the_line_rate() {
        // Loop clock zero at CLOCK_MONOTONIC 5 s, Unix time of that zero 1.7e18; a 10 Gbit/s
        // NIC at D = 10 (1 Gbit/s on the wall clock).
        let mut s = CaptureStamps::new(MonoClock::with_origin(5_000_000_000), 1_000_000_000);
        s.unix_offset_ns = 1_700_000_000_000_000_000;
        let ser = serialisation_ns(1000, 1_000_000_000);
        let now = 2_000_000; // the pass that took the batch
                             // XDP saw them 100 µs apart: each keeps its own time (not the batch's).
        let t: Vec<u64> =
            (0..4).map(|i| s.received(meta(kind::HOST, 5_000_000_000 + 1_000_000 + i * 100_000), now, 1000)).collect();
        assert_eq!(t, (0..4).map(|i| 1_700_000_000_000_000_000 + 1_000_000 + i * 100_000).collect::<Vec<_>>());
        // Seen within 1 µs (delivered at once): spread one serialisation time apart.
        let base = 5_000_000_000 + 1_500_000;
        let t: Vec<u64> = (0..4).map(|i| s.received(meta(kind::HOST, base + i * 300), now, 1000)).collect();
        assert!(t.windows(2).all(|w| w[1] - w[0] == ser), "{t:?}");
        // No metadata, or not the host program's: the pass's time (still spaced).
        let a = s.received(None, 3_000_000, 60);
        let b = s.received(meta(kind::FORWARD, 1), 3_000_000, 60);
        assert_eq!(a, 1_700_000_000_000_000_000 + 3_000_000);
        assert_eq!(b - a, serialisation_ns(60, 1_000_000_000));
    }

    #[test]
    fn a_burst_sent_in_one_pass_leaves_at_the_line_rate() {
        let mut s = CaptureStamps::new(MonoClock::with_origin(0), 50_000_000);
        s.unix_offset_ns = 0;
        let t: Vec<u64> = (0..16).map(|_| s.sent(10_000_000, 1100)).collect();
        let ser = serialisation_ns(1100, 50_000_000);
        assert_eq!(t[0], 10_000_000);
        assert!(t.windows(2).all(|w| w[1] - w[0] == ser), "{t:?}");
    }
}
