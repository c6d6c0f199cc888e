//! AF_XDP sockets for the GPU NIC ports, on the shared wrapper [`afxdp`]: one UMEM and one
//! socket per port, queue 0, copy mode (veth has no zero-copy), `XDP_USE_NEED_WAKEUP`, and
//! libxdp's own program load inhibited — the host program (`rocefab_plumbing::host_loader`)
//! redirects into `HOST_XSKS`, filled by the daemon. The copy-mode TX budget stays at the
//! kernel's default of 32 frames per kick.
//!
//! UMEM frames are split once: [`RX_FRAMES`] circulate between the fill and RX rings, the
//! rest are the TX pool, returned through the completion ring. Frames come back from the
//! completion ring with length 0; every TX frame is rewritten in full before it is produced.
//!
//! Captures: frames taken from the RX ring and frames produced to the TX ring never pass the
//! kernel's packet taps, so while `rocefab-nicd` captures a port ([`XskPort::mirror_port`]
//! enabled in the [`MirrorProducer`]'s mask, checked once per batch) they are copied into the
//! shared-memory mirror ring ([`super::mirror`]), each stamped on its own
//! ([`CaptureStamps`]): a received frame with the time the host XDP program saw it (the
//! `rx_ns` of its `dataplane_common::XdpMeta`), a sent frame with the pass that sends it; both
//! spaced at least one serialisation time at the NIC's line rate after the previous frame in
//! that direction (`rocefab_plumbing::capture::LineStamp`).
use std::num::NonZeroU32;
use std::os::fd::{AsRawFd, RawFd};

use afxdp::{CompQueue, FillQueue, FrameDesc, RxQueue, TxQueue, Umem};

use super::engine::Engine;
use dataplane_common::{kind, XdpMeta};
use rocefab_plumbing::capture::{serialisation_ns, LineStamp, MonoClock};

use super::mirror::{MirrorProducer, DIR_IN, DIR_OUT};

/// Frames on the fill/RX side (also the fill, completion and RX ring sizes).
pub const RX_FRAMES: u32 = 1024;
/// Frames in the TX pool (also the TX ring size).
pub const TX_FRAMES: u32 = 1024;
/// Most frames handled per ring operation.
pub const BATCH: usize = 64;

/// Errors creating a port.
#[derive(Debug, thiserror::Error)]
pub enum XskError {
    #[error("{name}: {source}")]
    Open { name: String, source: afxdp::Error },
    #[error("{name}: fill ring accepted {got} of {want} frames")]
    Fill { name: String, got: usize, want: usize },
    #[error("{name}: {what}: {source}")]
    Io { name: String, what: &'static str, source: std::io::Error },
}

/// One NIC port's socket, rings and frame pools.
pub struct XskPort {
    pub name: String,
    umem: Umem,
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
    /// Creates the UMEM and the socket on queue 0 of `name` (current netns) and stocks the
    /// fill ring.
    pub fn open(name: &str) -> Result<XskPort, XskError> {
        let open_err = |source| XskError::Open { name: name.into(), source };
        let frames = NonZeroU32::new(RX_FRAMES + TX_FRAMES).expect("non-zero");
        let (umem, mut descs) = afxdp::umem(frames, RX_FRAMES, TX_FRAMES).map_err(open_err)?;
        // SAFETY: the UMEM is new and used by this socket only; every descriptor given to the
        // rings comes from `descs` of this UMEM, and the UMEM lives as long as the port.
        let afxdp::Socket { rx, tx, mut fill, comp, .. } =
            unsafe { afxdp::Socket::open(&umem, name, RX_FRAMES, TX_FRAMES, false) }.map_err(open_err)?;
        let free = descs.split_off(RX_FRAMES as usize);
        // SAFETY: fresh frames of this UMEM that are in no ring.
        let got = unsafe { fill.produce(&descs) };
        if got != descs.len() {
            return Err(XskError::Fill { name: name.into(), got, want: descs.len() });
        }
        Ok(XskPort {
            name: name.into(),
            umem,
            rx,
            tx,
            fill,
            comp,
            free,
            rx_descs: vec![FrameDesc::default(); BATCH],
            comp_descs: vec![FrameDesc::default(); TX_FRAMES as usize],
            batch: Vec::with_capacity(BATCH),
            tx_outstanding: 0,
            mirror_port: None,
            // Until the daemon gives the loop's clock and the NIC's rate.
            stamps: CaptureStamps::new(MonoClock::new(), u64::MAX),
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
            if let Some((m, port)) = capture.as_mut() {
                // SAFETY: as above: a frame of this UMEM we own until it goes back to the fill ring.
                let meta = unsafe { afxdp::metadata::<{ XdpMeta::LEN }>(&self.umem, d) };
                let ts = self.stamps.received(meta, now, data.contents().len());
                m.push(*port, DIR_IN, ts, data.contents());
            }
            engine.on_frame(nic, data.contents(), now);
        }
        if n > 0 {
            let mut put = 0;
            while put < n {
                // SAFETY: frames of this UMEM we own (consumed above); the fill ring has room
                // for all RX_FRAMES frames.
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
        if self.batch.is_empty() {
            // Copy mode sends at most 32 frames per kick (the kernel's TX_BATCH_SIZE); frames
            // still in the TX ring need another kick, or they would wait for the next send.
            if self.tx_pending() {
                self.kick()?;
            }
            return Ok(0);
        }
        let mut put = 0;
        while put < self.batch.len() {
            // SAFETY: frames of this UMEM written above; the TX ring (TX_FRAMES) can hold
            // every frame of the TX pool.
            put += unsafe { self.tx.produce(&self.batch[put..]) };
        }
        self.tx_outstanding += put;
        self.kick()?;
        Ok(put)
    }

    fn kick(&self) -> Result<(), XskError> {
        match self.tx.wakeup() {
            Ok(()) => Ok(()),
            // EAGAIN/EBUSY/ENOBUFS: the kernel is still busy with earlier frames; the next
            // kick retries.
            Err(e) if matches!(e.raw_os_error(), Some(libc::EAGAIN) | Some(libc::EBUSY) | Some(libc::ENOBUFS)) => {
                Ok(())
            }
            Err(source) => Err(XskError::Io { name: self.name.clone(), what: "TX kick (sendto)", source }),
        }
    }

    /// Frames are still in the TX ring, not yet taken by the kernel.
    pub fn tx_pending(&mut self) -> bool {
        self.tx.nb_free_exact() < TX_FRAMES
    }

    /// No free TX frame is left (the caller should wait briefly for completions).
    pub fn tx_starved(&self) -> bool {
        self.free.is_empty()
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
