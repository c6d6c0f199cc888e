//! AF_XDP sockets for the GPU NIC ports, on the shared wrapper [`afxdp`]: one UMEM and one
//! socket per port, queue 0, copy mode (veth has no zero-copy), `XDP_USE_NEED_WAKEUP`, and
//! libxdp's own program load inhibited — the host program (`dataplane_user::host_loader`)
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
//! shared-memory mirror ring ([`super::mirror`]), stamped once per batch.
use std::num::NonZeroU32;
use std::os::fd::{AsRawFd, RawFd};

use afxdp::{CompQueue, FillQueue, FrameDesc, RxQueue, TxQueue, Umem};

use super::engine::Engine;
use super::mirror::{unix_now_ns, MirrorProducer, DIR_IN, DIR_OUT};

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
        })
    }

    /// The socket fd (for the XSK map and `poll`).
    pub fn fd(&self) -> RawFd {
        self.rx.fd().as_raw_fd()
    }

    /// The mirror and this port's number in it when this port is being captured (one atomic
    /// load), with the batch's timestamp.
    fn capturing<'m>(&self, mirror: Option<&'m mut MirrorProducer>) -> Option<(&'m mut MirrorProducer, u16, u64)> {
        let port = self.mirror_port?;
        let m = mirror?;
        m.enabled(port).then(|| (m, port, unix_now_ns()))
    }

    /// Hands up to [`BATCH`] received frames to `engine` as NIC `nic` (and to `mirror` while
    /// this port is captured) and refills the fill ring; returns how many.
    pub fn receive(&mut self, engine: &mut Engine, nic: usize, now: u64, mirror: Option<&mut MirrorProducer>) -> Result<usize, XskError> {
        // SAFETY: `rx_descs` receives descriptors of frames the kernel filled for us.
        let n = unsafe { self.rx.consume(&mut self.rx_descs) };
        let mut capture = if n > 0 { self.capturing(mirror) } else { None };
        for d in &self.rx_descs[..n] {
            // SAFETY: the frame was just consumed from the RX ring, so the kernel no longer
            // writes it until we put it back on the fill ring below.
            let data = unsafe { self.umem.data(d) };
            if let Some((m, port, ts)) = capture.as_mut() {
                m.push(*port, DIR_IN, *ts, data.contents());
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
                self.fill
                    .wakeup(self.rx.fd_mut(), 0)
                    .map_err(|source| XskError::Io { name: self.name.clone(), what: "fill ring wakeup", source })?;
            }
        }
        Ok(n)
    }

    /// Reclaims completed TX frames, then asks `engine` for frames to send as NIC `nic`,
    /// produces them (copying them to `mirror` while this port is captured) and kicks the
    /// kernel; returns how many were sent.
    pub fn transmit(&mut self, engine: &mut Engine, nic: usize, now: u64, mirror: Option<&mut MirrorProducer>) -> Result<usize, XskError> {
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
                    if let Some((m, port, ts)) = capture.as_mut() {
                        m.push(*port, DIR_OUT, *ts, data.contents());
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
            Err(e) if matches!(e.raw_os_error(), Some(libc::EAGAIN) | Some(libc::EBUSY) | Some(libc::ENOBUFS)) => Ok(()),
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
        let s = afxdp::rx_statistics(&self.rx)
            .map_err(|source| XskError::Io { name: self.name.clone(), what: "XDP_STATISTICS", source })?;
        Ok((s.rx_dropped, s.rx_ring_full, s.rx_fill_ring_empty_descs))
    }
}
