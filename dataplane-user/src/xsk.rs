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
//! The kernel's per-socket drop counters are read by the control side through
//! [`XskStatsReader`], which holds duplicates of the socket descriptors: `getsockopt` touches
//! no ring, so it never races with the data-plane thread.
use std::num::NonZeroU32;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};

pub use afxdp::{xdp_statistics, XskStatistics};
use afxdp::{CompQueue, FillQueue, FrameDesc, RxQueue, TxQueue, Umem, DEFAULT_TX_BUDGET};

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
}

impl XskPort {
    /// The socket's file descriptor (for the XSKS map and for `poll`).
    pub fn fd(&self) -> RawFd {
        self.rx.fd().as_raw_fd()
    }
}

/// The shared UMEM, every port's socket, and all frame descriptors (initially free).
#[derive(Debug)]
pub struct XskSet {
    pub umem: Umem,
    pub ports: Vec<XskPort>,
    pub frames: Vec<FrameDesc>,
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

/// Creates the UMEM and one socket per interface in `names` (in the current netns).
pub fn open(names: &[String], buffer_frames: u32) -> Result<XskSet, XskError> {
    let frames = frame_count(names.len(), buffer_frames);
    let frames_u32 = u32::try_from(frames).ok().and_then(NonZeroU32::new).ok_or(XskError::FrameCount(frames))?;
    let (umem, descs) = afxdp::umem(frames_u32, RX_RING_SIZE, TX_RING_SIZE).map_err(XskError::Umem)?;
    let mut ports = Vec::with_capacity(names.len());
    for (port, name) in names.iter().enumerate() {
        // SAFETY: the UMEM outlives the sockets (each socket keeps a handle on it), and every
        // frame descriptor we later hand to these rings comes from `descs` of this same UMEM.
        let s = unsafe { afxdp::Socket::open(&umem, name, RX_RING_SIZE, TX_RING_SIZE, true) }
            .map_err(|source| XskError::Socket { port, name: name.clone(), source })?;
        ports.push(XskPort {
            name: name.clone(),
            rx: s.rx,
            tx: s.tx,
            fill: s.fill,
            comp: s.comp,
            tx_budget: s.tx_budget,
        });
    }
    Ok(XskSet { umem, ports, frames: descs })
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
