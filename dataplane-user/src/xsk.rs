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
use rocefab_contracts::memory::{SwitchMemory, MIN_RING};

use crate::frames::FramePool;

/// Errors creating the UMEM or the sockets.
#[derive(Debug, thiserror::Error)]
pub enum XskError {
    #[error(transparent)]
    Umem(afxdp::Error),
    #[error("port {port} ({name:?}): {source}")]
    Socket { port: usize, name: String, source: afxdp::Error },
    #[error("UMEM of {0} chunks is out of range (at most 2^32 - 1)")]
    FrameCount(u64),
    #[error("port {port} ({name:?}) has link MTU {mtu}, more than the {sized} bytes the switch's UMEM was sized for")]
    MtuAboveSizing { port: usize, name: String, mtu: u32, sized: u32 },
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
    /// UMEM chunk size (2 KiB or 4 KiB, [`rocefab_contracts::memory::chunk_bytes`]).
    pub chunk_bytes: u32,
    /// Entries of every port's RX and fill rings, and of its TX and completion rings.
    pub rx_ring: u32,
    pub tx_ring: u32,
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

// The kernel accepts a TX budget in [32, TX ring entries]; every ring is at least MIN_RING.
const _: () = assert!(MIN_RING >= DEFAULT_TX_BUDGET && MIN_RING.is_power_of_two());

/// The largest link MTU among the interfaces `names` (current netns): what the UMEM's chunks
/// are sized for ([`rocefab_contracts::memory::switch_memory`]).
pub fn link_mtu(names: &[String]) -> Result<u32, XskError> {
    Ok(port_mtus(names)?.into_iter().max().unwrap_or(0))
}

/// The MTU of each interface in `names` (current netns), in port order.
fn port_mtus(names: &[String]) -> Result<Vec<u32>, XskError> {
    names
        .iter()
        .enumerate()
        .map(|(port, name)| {
            rocefab_plumbing::link::link_mtu(name).map_err(|source| XskError::Mtu { port, name: name.clone(), source })
        })
        .collect()
}

/// Creates the UMEM of `mem` (its chunks, rings and frame count) and one socket per interface
/// in `names` (in the current netns); every socket multi-buffer (`XDP_USE_SG`) when some
/// interface's MTU needs it (the kernel keeps the choice per UMEM, so the ports sharing one
/// cannot differ). A link MTU above the one `mem` was sized for is an error.
pub fn open(names: &[String], mem: &SwitchMemory) -> Result<XskSet, XskError> {
    let mut multi_buffer = false;
    for (port, (name, mtu)) in names.iter().zip(port_mtus(names)?).enumerate() {
        if mtu > mem.link_mtu {
            return Err(XskError::MtuAboveSizing { port, name: name.clone(), mtu, sized: mem.link_mtu });
        }
        multi_buffer |= needs_multi_buffer(mtu);
    }
    let frames = mem.umem_chunks;
    let frames_u32 = u32::try_from(frames).ok().and_then(NonZeroU32::new).ok_or(XskError::FrameCount(frames))?;
    let (umem, descs) = afxdp::umem(frames_u32, mem.chunk_bytes, mem.rx_ring, mem.tx_ring).map_err(XskError::Umem)?;
    let mut ports = Vec::with_capacity(names.len());
    for (port, name) in names.iter().enumerate() {
        // SAFETY: the UMEM outlives the sockets (each socket keeps a handle on it), and every
        // frame descriptor we later hand to these rings comes from `descs` of this same UMEM.
        let s = unsafe { afxdp::Socket::open(&umem, name, mem.rx_ring, mem.tx_ring, true, multi_buffer) }
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
    Ok(XskSet {
        umem,
        chunk_bytes: mem.chunk_bytes,
        rx_ring: mem.rx_ring,
        tx_ring: mem.tx_ring,
        ports,
        frames: descs,
        multi_buffer,
    })
}
