//! AF_XDP sockets as rocefab uses them (Linux `Documentation/networking/af_xdp.rst`), over
//! xsk-rs: the one place the switch (`dataplane-user`) and the GPU-host NIC (`gpu-host`) create
//! UMEMs and sockets, read XDP metadata and the kernel's socket statistics.
//!
//! Every socket is bound on queue 0 in copy mode (veth has no zero-copy) with
//! `XDP_USE_NEED_WAKEUP`, and libxdp is told not to load its own XDP program
//! (`XSK_LIBXDP_FLAGS_INHIBIT_PROG_LOAD`): our programs redirect into their own XSK maps, which
//! the daemons fill. UMEM chunks are aligned, of the size the caller picks: [`SMALL_CHUNK`]
//! (2 KiB, the kernel's smallest) where the link MTU fits it, [`FRAME_SIZE`] (4 KiB, a page, the
//! largest) otherwise (`rocefab_contracts::memory::chunk_bytes`). A frame the kernel receives
//! starts after the 256-byte XDP headroom of its chunk, with the XDP metadata (if the program
//! wrote any) right in front of it ([`metadata`]).
//!
//! A link whose MTU makes frames longer than one chunk ([`chain::needs_multi_buffer`]: above
//! 3822 bytes; rocefab's jumbo links are 9216) binds its sockets with `XDP_USE_SG` and moves
//! each such frame as a chain of descriptors ([`chain`]): the kernel refuses chunks larger than
//! a page.
//!
//! In copy mode every TX frame is sent inside a `sendto` kick, at most `max_tx_budget`
//! descriptors per call (32 by default); [`Socket::open`] can raise it with
//! `XDP_MAX_TX_SKB_BUDGET` (Linux ≥ 6.17; older kernels keep 32 and the caller kicks again).
//!
//! The kernel's per-socket drop counters (`getsockopt(SOL_XDP, XDP_STATISTICS)`, struct
//! `xdp_statistics` in `include/uapi/linux/if_xdp.h`) are read with [`xdp_statistics`]:
//! `getsockopt` touches no ring, so another thread can read them on a duplicated descriptor
//! while the data path owns the rings.
use std::num::NonZeroU32;
use std::os::fd::{AsRawFd, BorrowedFd, RawFd};

pub mod chain;

use xsk_rs::config::{BindFlags, FrameSize, LibxdpFlags, QueueSize, SocketConfig, UmemConfig};
pub use xsk_rs::{CompQueue, FillQueue, FrameDesc, RxQueue, TxQueue, Umem};

/// The largest UMEM chunk (a page): XDP headroom (256, XDP metadata at its end) + frames up to
/// ~3.8 KB; multi-buffer chains ([`chain`]) are made of these.
pub const FRAME_SIZE: u32 = 4096;
/// The smallest UMEM chunk the kernel accepts (`XDP_UMEM_MIN_CHUNK_SIZE`): frames up to 1776
/// bytes after the headroom and the metadata (link MTU up to 1758).
pub const SMALL_CHUNK: u32 = 2048;
/// Copy-mode TX budget of the kernel when `XDP_MAX_TX_SKB_BUDGET` is unavailable.
pub const DEFAULT_TX_BUDGET: u32 = 32;
/// `XDP_MAX_TX_SKB_BUDGET` from `include/uapi/linux/if_xdp.h` (not in the libc crate yet).
const XDP_MAX_TX_SKB_BUDGET: libc::c_int = 9;

/// Errors creating a UMEM or a socket.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("creating UMEM of {frames} frames x {chunk} bytes: {reason}")]
    Umem { frames: u32, chunk: u32, reason: String },
    #[error("UMEM chunk of {0} bytes: rocefab uses {SMALL_CHUNK} or {FRAME_SIZE}")]
    ChunkSize(u32),
    #[error("ring size {0} is not a power of two")]
    RingSize(u32),
    #[error("creating AF_XDP socket on queue 0: {reason}")]
    Socket { reason: String },
    #[error(
        "creating AF_XDP socket on queue 0 with XDP_USE_SG (AF_XDP multi-buffer, needed for frames \
         longer than one {FRAME_SIZE}-byte UMEM chunk: link MTU above {max_single} bytes): {reason}; the \
         kernel needs Linux >= 6.6 for it (links up to MTU 3500 do without)",
        max_single = chain::RX_FRAME_BYTES - chain::ETH_TAGGED_HLEN
    )]
    MultiBufferSocket { reason: String },
    #[error("invalid interface name")]
    BadName,
    #[error("queue 0 already has a socket with this UMEM (libxdp returned no fill/completion rings)")]
    NoRings,
}

fn describe(e: &dyn std::error::Error) -> String {
    match e.source() {
        Some(s) => format!("{e}: {s}"),
        None => e.to_string(),
    }
}

fn queue_size(n: u32) -> Result<QueueSize, Error> {
    QueueSize::new(n).map_err(|_| Error::RingSize(n))
}

/// Creates a UMEM of `frames` chunks of `chunk` bytes ([`SMALL_CHUNK`] or [`FRAME_SIZE`]) with
/// fill and completion rings of `fill_size` and `comp_size` entries (powers of two); returns it
/// with a descriptor of every chunk (all free).
pub fn umem(frames: NonZeroU32, chunk: u32, fill_size: u32, comp_size: u32) -> Result<(Umem, Vec<FrameDesc>), Error> {
    if chunk != SMALL_CHUNK && chunk != FRAME_SIZE {
        return Err(Error::ChunkSize(chunk));
    }
    let umem_err = |reason: String| Error::Umem { frames: frames.get(), chunk, reason };
    let cfg = UmemConfig::builder()
        .frame_size(FrameSize::new(chunk).map_err(|e| umem_err(e.to_string()))?)
        .fill_queue_size(queue_size(fill_size)?)
        .comp_queue_size(queue_size(comp_size)?)
        .build()
        .map_err(|e| umem_err(e.to_string()))?;
    Umem::new(cfg, frames, false).map_err(|e| umem_err(describe(&e)))
}

/// One socket's rings. The fill and completion rings are those of the socket's UMEM for its
/// device and queue.
#[derive(Debug)]
pub struct Socket {
    pub rx: RxQueue,
    pub tx: TxQueue,
    pub fill: FillQueue,
    pub comp: CompQueue,
    /// Descriptors one TX kick sends in copy mode (the kernel's `max_tx_budget`).
    pub tx_budget: u32,
}

impl Socket {
    /// Binds a socket to queue 0 of interface `ifname` (current netns) on `umem`, with RX and TX
    /// rings of `rx_size` and `tx_size` entries (powers of two). With `raise_tx_budget` the
    /// copy-mode TX budget is raised to `tx_size` where the kernel allows it
    /// ([`DEFAULT_TX_BUDGET`] otherwise). With `multi_buffer` the socket is bound with
    /// `XDP_USE_SG` (frames longer than a chunk come and go as descriptor chains, [`chain`]);
    /// sockets sharing a UMEM take the first one's choice (the kernel keeps it in the UMEM).
    ///
    /// # Safety
    ///
    /// Every frame descriptor later handed to this socket's rings must come from `umem`, and
    /// `umem` must outlive the socket (each socket keeps a handle on it).
    pub unsafe fn open(
        umem: &Umem,
        ifname: &str,
        rx_size: u32,
        tx_size: u32,
        raise_tx_budget: bool,
        multi_buffer: bool,
    ) -> Result<Socket, Error> {
        let mut bind = BindFlags::XDP_COPY | BindFlags::XDP_USE_NEED_WAKEUP;
        if multi_buffer {
            bind |= BindFlags::XDP_USE_SG;
        }
        let cfg = SocketConfig::builder()
            .rx_queue_size(queue_size(rx_size)?)
            .tx_queue_size(queue_size(tx_size)?)
            .libxdp_flags(LibxdpFlags::XSK_LIBXDP_FLAGS_INHIBIT_PROG_LOAD)
            .bind_flags(bind)
            .build();
        let name = ifname.parse().map_err(|_| Error::BadName)?;
        // SAFETY: the caller guarantees the descriptors and the UMEM's lifetime.
        let (tx, rx, rings) = unsafe { xsk_rs::Socket::new(cfg, umem, &name, 0) }.map_err(|e| {
            let reason = describe(&e);
            if multi_buffer {
                Error::MultiBufferSocket { reason }
            } else {
                Error::Socket { reason }
            }
        })?;
        let (fill, comp) = rings.ok_or(Error::NoRings)?;
        let mut tx_budget = DEFAULT_TX_BUDGET;
        if raise_tx_budget {
            match set_tx_budget(rx.fd().as_raw_fd(), tx_size) {
                Ok(()) => tx_budget = tx_size,
                Err(e) => {
                    tracing::debug!(%ifname, "XDP_MAX_TX_SKB_BUDGET not available ({e}): {DEFAULT_TX_BUDGET} frames per TX kick")
                }
            }
        }
        Ok(Socket { rx, tx, fill, comp, tx_budget })
    }

    /// The socket's file descriptor (for an XSK map and for `poll`).
    pub fn fd(&self) -> RawFd {
        self.rx.fd().as_raw_fd()
    }
}

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

/// The `N` bytes of XDP metadata in front of the received frame `d` of a UMEM of `chunk`-byte
/// chunks: copy-mode AF_XDP copies
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
pub unsafe fn metadata<const N: usize>(umem: &Umem, chunk: u32, d: &FrameDesc) -> Option<[u8; N]> {
    // Chunks are powers of two (the kernel's rule for aligned UMEMs): a mask, not a division.
    if (d.addr() & (chunk as usize).wrapping_sub(1)) < N {
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

/// [`xdp_statistics`] of the socket that owns the RX ring `rx`.
pub fn rx_statistics(rx: &RxQueue) -> std::io::Result<XskStatistics> {
    // SAFETY: `rx` keeps its socket's descriptor open for as long as the borrow lasts.
    let fd = unsafe { BorrowedFd::borrow_raw(rx.fd().as_raw_fd()) };
    xdp_statistics(fd)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsFd;

    #[test]
    fn statistics_of_a_non_xdp_socket_is_an_error() {
        // A UDP socket has no SOL_XDP options: the kernel refuses, and the error comes back
        // rather than a zeroed struct that would look like "no drops".
        let udp = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let e = xdp_statistics(udp.as_fd()).unwrap_err();
        // UDP answers EOPNOTSUPP for the unknown level (other families say ENOPROTOOPT).
        assert!(matches!(e.raw_os_error(), Some(libc::EOPNOTSUPP | libc::ENOPROTOOPT)), "{e}");
    }
}
