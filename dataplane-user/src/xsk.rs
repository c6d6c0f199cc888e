//! AF_XDP sockets for a switch's ports, on the shared wrapper [`afxdp`] (copy mode, queue 0,
//! `XDP_USE_NEED_WAKEUP`, libxdp's program load inhibited: our program ([`rocefab_plumbing::loader`])
//! redirects into the `XSKS` map, which the daemon fills with
//! [`XdpSwitch::register_xsk`](rocefab_plumbing::loader::XdpSwitch::register_xsk)).
//!
//! One UMEM is shared by every port (`XDP_SHARED_UMEM` across devices): a frame received on one
//! port is transmitted from the same UMEM chunk on another, with no copy in userspace. Each port
//! gets its own fill and completion rings (libxdp creates a new context per device/queue).
//! Each socket's copy-mode TX budget is raised from 32 to the TX ring size
//! (`XDP_MAX_TX_SKB_BUDGET`, Linux ≥ 6.17; older kernels keep 32 and the data plane kicks again).
//!
//! A switch whose links carry frames longer than one UMEM chunk (MTU above 3822 bytes, e.g. the
//! 9216-byte jumbo MTU of the lossless class) binds every socket with `XDP_USE_SG`
//! ([`afxdp::chain`]); [`XskPort::receive`] then reassembles each packet's descriptors into a
//! chain named by its head ([`crate::frames`]).
//!
//! The kernel's per-socket drop counters are read by the control side through
//! [`XskStatsReader`], which holds duplicates of the socket descriptors: `getsockopt` touches
//! no ring, so it never races with the data-plane thread.
use std::num::NonZeroU32;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};

use afxdp::chain::{needs_multi_buffer, Gather, Gathered};
pub use afxdp::{xdp_statistics, XskStatistics};
use afxdp::{CompQueue, FillQueue, FrameDesc, RxQueue, TxQueue, Umem, DEFAULT_TX_BUDGET};

use crate::frames::FramePool;

/// Size of each port's RX ring and fill ring: how many frames the kernel can take for a port
/// while the data-plane thread is busy elsewhere (2048 frames ≈ 1.2 ms at 1.7 Mpps).
pub const RX_RING_SIZE: u32 = 2048;
/// Size of each port's TX ring and completion ring.
pub const TX_RING_SIZE: u32 = 1024;

/// Errors creating the UMEM or the sockets.
#[derive(Debug, thiserror::Error)]
pub enum XskError {
    #[error(transparent)]
    Umem(afxdp::Error),
    #[error("port {port} ({name:?}): {source}")]
    Socket { port: usize, name: String, source: afxdp::Error },
    #[error("frame count {0} is out of range")]
    FrameCount(u64),
    #[error("port {port} ({name:?}): reading the link MTU (SIOCGIFMTU): {source}")]
    Mtu { port: usize, name: String, source: std::io::Error },
    #[error("port {port} ({name:?}): duplicating the AF_XDP socket descriptor: {source}")]
    Dup { port: usize, name: String, source: std::io::Error },
}

/// Duplicated descriptors of every port's socket, for reading [`XskStatistics`] from the
/// control side while the data-plane thread owns the rings. Keeps the sockets open until it is
/// dropped (after the data-plane thread has stopped).
#[derive(Debug)]
pub struct XskStatsReader {
    fds: Vec<OwnedFd>,
}

impl XskStatsReader {
    /// Statistics of every port, in port order.
    pub fn read(&self) -> std::io::Result<Vec<XskStatistics>> {
        self.fds.iter().map(|f| xdp_statistics(f.as_fd())).collect()
    }
}

/// One port's rings.
#[derive(Debug)]
pub struct XskPort {
    pub name: String,
    pub rx: RxQueue,
    pub tx: TxQueue,
    pub fill: FillQueue,
    pub comp: CompQueue,
    /// Descriptors one TX kick sends in copy mode (the kernel's `max_tx_budget`).
    pub tx_budget: u32,
    /// The packet whose descriptors the last RX batch left half read (multi-buffer only).
    gather: Gather<FrameDesc>,
}

impl XskPort {
    /// The socket's file descriptor (for the XSKS map and for `poll`).
    pub fn fd(&self) -> RawFd {
        self.rx.fd().as_raw_fd()
    }

    /// Takes up to `out.len()` descriptors from the RX ring and leaves in `out[..n]` the heads
    /// of the packets they complete (each descriptor, without multi-buffer); returns `n` and
    /// how many packets were too long to keep (more descriptors than any rocefab link's MTU
    /// makes: given back to `pool`, for the caller to count).
    ///
    /// # Safety
    ///
    /// `pool` must be the pool of this port's UMEM; the descriptors become the caller's.
    #[inline]
    pub unsafe fn receive(&mut self, out: &mut [FrameDesc], pool: &mut FramePool) -> (usize, u64) {
        // SAFETY: the RX ring returns descriptors of frames of our UMEM that we gave to the fill
        // ring; from now on we own them.
        let n = unsafe { self.rx.consume(out) };
        if pool.max_segments() == 1 {
            return (n, 0);
        }
        let (mut heads, mut too_long) = (0, 0);
        for i in 0..n {
            let d = out[i];
            let mut spilled = [FrameDesc::default(); 4];
            let mut ns = 0;
            let g = self.gather.push(pool.chains(), d, |s| {
                if ns < spilled.len() {
                    spilled[ns] = s;
                    ns += 1;
                }
            });
            for s in &spilled[..ns] {
                pool.push(*s);
            }
            match g {
                Gathered::Partial => {}
                // `heads` ≤ `i`: the slot was read already.
                Gathered::Packet(h) => {
                    out[heads] = h;
                    heads += 1;
                }
                Gathered::TooLong { head, .. } => {
                    pool.push(head);
                    too_long += 1;
                }
            }
        }
        (heads, too_long)
    }
}

/// The shared UMEM, every port's socket, and all frame descriptors (initially free).
#[derive(Debug)]
pub struct XskSet {
    pub umem: Umem,
    pub ports: Vec<XskPort>,
    pub frames: Vec<FrameDesc>,
    /// The sockets are bound with `XDP_USE_SG`: some port's MTU makes frames longer than a chunk.
    pub multi_buffer: bool,
}

impl XskSet {
    /// A reader of every socket's kernel statistics, on duplicated descriptors.
    pub fn stats_reader(&self) -> Result<XskStatsReader, XskError> {
        let fds = self
            .ports
            .iter()
            .enumerate()
            .map(|(port, p)| {
                // SAFETY: the socket's descriptor is open for as long as `p` lives, which
                // outlives this borrow (it is only used to duplicate the descriptor).
                let fd = unsafe { BorrowedFd::borrow_raw(p.fd()) };
                fd.try_clone_to_owned().map_err(|source| XskError::Dup { port, name: p.name.clone(), source })
            })
            .collect::<Result<_, _>>()?;
        Ok(XskStatsReader { fds })
    }
}

/// Number of UMEM frames for `ports` ports: each port's fill ring, RX ring and TX ring may hold
/// a full ring of frames, plus `buffer_frames` for the egress queues (the shared buffer at its
/// smallest frame and the reserved pool). So the fill rings never starve while frames are held.
pub fn frame_count(ports: usize, buffer_frames: u32) -> u64 {
    ports as u64 * (2 * RX_RING_SIZE as u64 + TX_RING_SIZE as u64) + buffer_frames as u64
}

// Rings are powers of two, and the kernel accepts a budget in [32, TX ring entries].
const _: () = assert!(RX_RING_SIZE.is_power_of_two() && TX_RING_SIZE.is_power_of_two());
const _: () = assert!(TX_RING_SIZE >= DEFAULT_TX_BUDGET);

/// Creates the UMEM and one socket per interface in `names` (in the current netns); every
/// socket multi-buffer (`XDP_USE_SG`) when some interface's MTU needs it (the kernel keeps the
/// choice per UMEM, so the ports sharing one cannot differ).
pub fn open(names: &[String], buffer_frames: u32) -> Result<XskSet, XskError> {
    let mut multi_buffer = false;
    for (port, name) in names.iter().enumerate() {
        let mtu = rocefab_plumbing::link::link_mtu(name).map_err(|source| XskError::Mtu {
            port,
            name: name.clone(),
            source,
        })?;
        multi_buffer |= needs_multi_buffer(mtu);
    }
    let frames = frame_count(names.len(), buffer_frames);
    let frames_u32 = u32::try_from(frames).ok().and_then(NonZeroU32::new).ok_or(XskError::FrameCount(frames))?;
    let (umem, descs) = afxdp::umem(frames_u32, RX_RING_SIZE, TX_RING_SIZE).map_err(XskError::Umem)?;
    let mut ports = Vec::with_capacity(names.len());
    for (port, name) in names.iter().enumerate() {
        // SAFETY: the UMEM outlives the sockets (each socket keeps a handle on it), and every
        // frame descriptor we later hand to these rings comes from `descs` of this same UMEM.
        let s = unsafe { afxdp::Socket::open(&umem, name, RX_RING_SIZE, TX_RING_SIZE, true, multi_buffer) }
            .map_err(|source| XskError::Socket { port, name: name.clone(), source })?;
        ports.push(XskPort {
            name: name.clone(),
            rx: s.rx,
            tx: s.tx,
            fill: s.fill,
            comp: s.comp,
            tx_budget: s.tx_budget,
            gather: Gather::default(),
        });
    }
    Ok(XskSet { umem, ports, frames: descs, multi_buffer })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frame_budget_covers_every_ring() {
        // Each port's fill, RX and TX rings can be full at once, plus the queueing buffer.
        assert_eq!(frame_count(2, 4096), 2 * (2 * RX_RING_SIZE + TX_RING_SIZE) as u64 + 4096);
        assert_eq!(frame_count(0, 7), 7);
    }
}
