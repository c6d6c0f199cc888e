//! AF_XDP sockets for a switch's ports (Linux `Documentation/networking/af_xdp.rst`), via xsk-rs.
//!
//! One UMEM is shared by every port (`XDP_SHARED_UMEM` across devices): a frame received on one
//! port is transmitted from the same UMEM chunk on another, with no copy in userspace. Each port
//! gets its own fill and completion rings (libxdp creates a new context per device/queue).
//!
//! Sockets are bound in copy mode (veth has no zero-copy) with `XDP_USE_NEED_WAKEUP`, on queue 0.
//! In copy mode every TX frame is sent inside a `sendto` kick, at most `max_tx_budget`
//! descriptors per call (32 by default): the sockets raise it to the TX ring size with
//! `XDP_MAX_TX_SKB_BUDGET` (Linux ≥ 6.17; older kernels keep 32 and the data plane kicks again).
//! libxdp is told not to load its own XDP program (`XSK_LIBXDP_FLAGS_INHIBIT_PROG_LOAD`): our
//! program ([`crate::loader`]) redirects into the `XSKS` map, which the daemon fills with
//! [`XdpSwitch::register_xsk`](crate::loader::XdpSwitch::register_xsk).
//!
//! The kernel's per-socket drop counters (`getsockopt(SOL_XDP, XDP_STATISTICS)`, struct
//! `xdp_statistics` in `include/uapi/linux/if_xdp.h`) are read by the control side through
//! [`XskStatsReader`], which holds duplicates of the socket descriptors: `getsockopt` touches
//! no ring, so it never races with the data-plane thread.
use std::num::NonZeroU32;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};

use xsk_rs::config::{BindFlags, FrameSize, LibxdpFlags, QueueSize, SocketConfig, UmemConfig};
use xsk_rs::{CompQueue, FillQueue, FrameDesc, RxQueue, Socket, TxQueue, Umem};

/// UMEM chunk size: XDP headroom (256, the Decision metadata at its end) + frames up to
/// ~3.8 KB.
pub const FRAME_SIZE: u32 = 4096;
/// Size of each port's RX ring and fill ring: how many frames the kernel can take for a port
/// while the data-plane thread is busy elsewhere (2048 frames ≈ 1.2 ms at 1.7 Mpps).
pub const RX_RING_SIZE: u32 = 2048;
/// Size of each port's TX ring and completion ring.
pub const TX_RING_SIZE: u32 = 1024;
/// `XDP_MAX_TX_SKB_BUDGET` from `include/uapi/linux/if_xdp.h` (not in the libc crate yet).
const XDP_MAX_TX_SKB_BUDGET: libc::c_int = 9;

/// Errors creating the UMEM or the sockets.
#[derive(Debug, thiserror::Error)]
pub enum XskError {
    #[error("creating UMEM of {frames} frames x {FRAME_SIZE} bytes: {reason}")]
    Umem { frames: u32, reason: String },
    #[error("port {port} ({name:?}): creating AF_XDP socket on queue 0: {reason}")]
    Socket { port: usize, name: String, reason: String },
    #[error("port {port} ({name:?}): libxdp returned no fill/completion ring for the shared UMEM")]
    NoRings { port: usize, name: String },
    #[error("port {port}: interface name {name:?} contains a NUL byte")]
    BadName { port: usize, name: String },
    #[error("frame count {0} is out of range")]
    FrameCount(u64),
    #[error("port {port} ({name:?}): duplicating the AF_XDP socket descriptor: {source}")]
    Dup { port: usize, name: String, source: std::io::Error },
}

/// Kernel counters of one AF_XDP socket (`struct xdp_statistics`, Linux ≥ 5.9 layout; older
/// kernels leave the last three at 0).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct XskStatistics {
    /// Frames dropped for a reason other than a full RX ring (fill ring empty, frame too big).
    pub rx_dropped: u64,
    /// Invalid descriptors the kernel found on the RX ring.
    pub rx_invalid_descs: u64,
    /// Invalid descriptors the kernel found on the TX ring.
    pub tx_invalid_descs: u64,
    /// Frames dropped because the RX ring was full (userspace too slow).
    pub rx_ring_full: u64,
    /// Times the kernel wanted a buffer and found the fill ring empty.
    pub rx_fill_ring_empty_descs: u64,
    /// Times the kernel looked for descriptors to send and found the TX ring empty.
    pub tx_ring_empty_descs: u64,
}

/// Reads `XDP_STATISTICS` of the AF_XDP socket `fd`.
pub fn xdp_statistics(fd: BorrowedFd<'_>) -> std::io::Result<XskStatistics> {
    let mut st = libc::xdp_statistics {
        rx_dropped: 0,
        rx_invalid_descs: 0,
        tx_invalid_descs: 0,
        rx_ring_full: 0,
        rx_fill_ring_empty_descs: 0,
        tx_ring_empty_descs: 0,
    };
    let mut len = std::mem::size_of::<libc::xdp_statistics>() as libc::socklen_t;
    // SAFETY: `st` is a live, writable xdp_statistics and `len` holds its size; the kernel
    // writes at most `len` bytes and stores the length it wrote back into `len`.
    let r = unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            libc::SOL_XDP,
            libc::XDP_STATISTICS,
            (&mut st as *mut libc::xdp_statistics).cast(),
            &mut len,
        )
    };
    if r < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(XskStatistics {
        rx_dropped: st.rx_dropped,
        rx_invalid_descs: st.rx_invalid_descs,
        tx_invalid_descs: st.tx_invalid_descs,
        rx_ring_full: st.rx_ring_full,
        rx_fill_ring_empty_descs: st.rx_fill_ring_empty_descs,
        tx_ring_empty_descs: st.tx_ring_empty_descs,
    })
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
                fd.try_clone_to_owned().map_err(|source| XskError::Dup {
                    port,
                    name: p.name.clone(),
                    source,
                })
            })
            .collect::<Result<_, _>>()?;
        Ok(XskStatsReader { fds })
    }
}

/// The `N` bytes of XDP metadata in front of the received frame `d`: copy-mode AF_XDP copies
/// the metadata an XDP program wrote (`bpf_xdp_adjust_meta`) into the UMEM chunk right before
/// the frame, and the RX descriptor addresses the frame. `None` when the frame starts less than
/// `N` bytes into its chunk (no room for metadata, so none was written).
///
/// The bytes are whatever the chunk's headroom holds: the caller validates them (a frame that
/// bypassed the program has stale or zero bytes there).
///
/// # Safety
///
/// `d` must describe a frame of `umem` that the caller owns (taken from the RX ring and not yet
/// given back to a ring).
#[inline(always)]
pub unsafe fn metadata<const N: usize>(umem: &Umem, d: &FrameDesc) -> Option<[u8; N]> {
    if (d.addr() % FRAME_SIZE as usize) < N {
        return None;
    }
    // SAFETY: the caller owns the frame, so the kernel does not write its chunk now.
    let frame = unsafe { umem.data(d) }.contents().as_ptr();
    // SAFETY: the N bytes before the frame lie in the same UMEM chunk (its offset in the chunk
    // is at least N, checked above), which is mapped for as long as `umem` lives and owned by
    // the caller; xsk-rs hands out no slice of the XDP headroom, so this steps back from the
    // start of the frame with a raw pointer. An unaligned read of plain bytes.
    Some(unsafe { frame.sub(N).cast::<[u8; N]>().read_unaligned() })
}

fn describe(e: &dyn std::error::Error) -> String {
    match e.source() {
        Some(s) => format!("{e}: {s}"),
        None => e.to_string(),
    }
}

/// Number of UMEM frames for `ports` ports: each port's fill ring, RX ring and TX ring may hold
/// a full ring of frames, plus `buffer_frames` for the egress queues (the shared buffer at its
/// smallest frame and the reserved pool). So the fill rings never starve while frames are held.
pub fn frame_count(ports: usize, buffer_frames: u32) -> u64 {
    ports as u64 * (2 * RX_RING_SIZE as u64 + TX_RING_SIZE as u64) + buffer_frames as u64
}

/// Copy-mode TX budget of the kernel when `XDP_MAX_TX_SKB_BUDGET` is unavailable.
pub const DEFAULT_TX_BUDGET: u32 = 32;
// Rings are powers of two, and the kernel accepts a budget in [32, TX ring entries].
const _: () = assert!(RX_RING_SIZE.is_power_of_two() && TX_RING_SIZE.is_power_of_two());
const _: () = assert!(TX_RING_SIZE >= DEFAULT_TX_BUDGET);

/// Raises the socket's copy-mode TX budget to `budget` descriptors per kick.
fn set_tx_budget(fd: RawFd, budget: u32) -> std::io::Result<()> {
    // SAFETY: `budget` is a live u32 and the length passed is its size; the kernel only reads it.
    let r = unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_XDP,
            XDP_MAX_TX_SKB_BUDGET,
            (&budget as *const u32).cast(),
            std::mem::size_of::<u32>() as libc::socklen_t,
        )
    };
    if r < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Creates the UMEM and one socket per interface in `names` (in the current netns).
pub fn open(names: &[String], buffer_frames: u32) -> Result<XskSet, XskError> {
    let frames = frame_count(names.len(), buffer_frames);
    let frames_u32 = u32::try_from(frames).ok().and_then(NonZeroU32::new).ok_or(XskError::FrameCount(frames))?;
    let rx_ring = QueueSize::new(RX_RING_SIZE).expect("RX_RING_SIZE is a power of two");
    let tx_ring = QueueSize::new(TX_RING_SIZE).expect("TX_RING_SIZE is a power of two");
    let umem_cfg = UmemConfig::builder()
        .frame_size(FrameSize::new(FRAME_SIZE).expect("FRAME_SIZE >= 2048"))
        .fill_queue_size(rx_ring)
        .comp_queue_size(tx_ring)
        .build()
        .map_err(|e| XskError::Umem { frames: frames_u32.get(), reason: e.to_string() })?;
    let (umem, descs) = Umem::new(umem_cfg, frames_u32, false)
        .map_err(|e| XskError::Umem { frames: frames_u32.get(), reason: describe(&e) })?;

    let sock_cfg = SocketConfig::builder()
        .rx_queue_size(rx_ring)
        .tx_queue_size(tx_ring)
        .libxdp_flags(LibxdpFlags::XSK_LIBXDP_FLAGS_INHIBIT_PROG_LOAD)
        .bind_flags(BindFlags::XDP_COPY | BindFlags::XDP_USE_NEED_WAKEUP)
        .build();

    let mut ports = Vec::with_capacity(names.len());
    for (port, name) in names.iter().enumerate() {
        let ifname = name.parse().map_err(|_| XskError::BadName { port, name: name.clone() })?;
        // SAFETY: the UMEM outlives the sockets (each socket keeps a handle on it), and every
        // frame descriptor we later hand to these rings comes from `descs` of this same UMEM.
        let (tx, rx, rings) = unsafe { Socket::new(sock_cfg, &umem, &ifname, 0) }
            .map_err(|e| XskError::Socket { port, name: name.clone(), reason: describe(&e) })?;
        let (fill, comp) = rings.ok_or_else(|| XskError::NoRings { port, name: name.clone() })?;
        let tx_budget = match set_tx_budget(rx.fd().as_raw_fd(), TX_RING_SIZE) {
            Ok(()) => TX_RING_SIZE,
            Err(e) => {
                tracing::debug!(port = %name, "XDP_MAX_TX_SKB_BUDGET not available ({e}): {DEFAULT_TX_BUDGET} frames per TX kick");
                DEFAULT_TX_BUDGET
            }
        };
        ports.push(XskPort { name: name.clone(), rx, tx, fill, comp, tx_budget });
    }
    Ok(XskSet { umem, ports, frames: descs })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statistics_of_a_non_xdp_socket_is_an_error() {
        // A UDP socket has no SOL_XDP options: the kernel refuses, and the error comes back
        // rather than a zeroed struct that would look like "no drops".
        let udp = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let e = xdp_statistics(udp.as_fd()).unwrap_err();
        // UDP answers EOPNOTSUPP for the unknown level (other families say ENOPROTOOPT).
        assert!(matches!(e.raw_os_error(), Some(libc::EOPNOTSUPP | libc::ENOPROTOOPT)), "{e}");
    }

    #[test]
    fn frame_budget_covers_every_ring() {
        // Each port's fill, RX and TX rings can be full at once, plus the queueing buffer.
        assert_eq!(frame_count(2, 4096), 2 * (2 * RX_RING_SIZE + TX_RING_SIZE) as u64 + 4096);
        assert_eq!(frame_count(0, 7), 7);
    }
}
