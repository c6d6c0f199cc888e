//! Helpers for the XDP `BPF_PROG_TEST_RUN` tests: a veth pair guard (the kernel wants a real
//! ingress device for a test run) and a minimal AF_XDP socket to put into the `XSKS` map (a
//! redirect only reports `XDP_REDIRECT` when the slot holds a bound socket).
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::process::Command;

use anyhow::{bail, Context, Result};

/// Runs `ip <args>`, failing with its stderr.
pub fn ip(args: &[&str]) -> Result<()> {
    let out = Command::new("ip").args(args).output().context("running `ip` (iproute2)")?;
    if !out.status.success() {
        bail!("ip {}: {}", args.join(" "), String::from_utf8_lossy(&out.stderr).trim());
    }
    Ok(())
}

/// ifindex of `name` in the current network namespace.
pub fn ifindex(name: &str) -> Result<u32> {
    let c = std::ffi::CString::new(name)?;
    // SAFETY: `c` is a valid NUL-terminated string for the duration of the call.
    let i = unsafe { libc::if_nametoindex(c.as_ptr()) };
    if i == 0 {
        bail!("interface {name}: {}", std::io::Error::last_os_error());
    }
    Ok(i)
}

/// A veth pair `a`/`b` (both up) in the current namespace, deleted on drop.
#[derive(Debug)]
pub struct VethPair {
    pub a: String,
    pub b: String,
}

impl VethPair {
    /// Creates the pair, first removing a leftover of a previous crashed run with the same name.
    pub fn new(a: &str, b: &str) -> Result<Self> {
        let _ = ip(&["link", "del", a]);
        ip(&["link", "add", a, "type", "veth", "peer", "name", b])?;
        let pair = VethPair { a: a.to_string(), b: b.to_string() };
        ip(&["link", "set", a, "up"])?;
        ip(&["link", "set", b, "up"])?;
        Ok(pair)
    }
}

impl Drop for VethPair {
    fn drop(&mut self) {
        // Deleting one end removes both.
        if let Err(e) = ip(&["link", "del", &self.a]) {
            eprintln!("cleanup: {e:#}");
        }
    }
}

// AF_XDP uapi (include/uapi/linux/if_xdp.h); libc has the constants but not every struct.
const SOL_XDP: libc::c_int = 283;
const XDP_RX_RING: libc::c_int = 2;
const XDP_UMEM_REG: libc::c_int = 4;
const XDP_UMEM_FILL_RING: libc::c_int = 5;
const XDP_UMEM_COMPLETION_RING: libc::c_int = 6;
const XDP_COPY: u16 = 1 << 1;

#[repr(C)]
struct XdpUmemReg {
    addr: u64,
    len: u64,
    chunk_size: u32,
    headroom: u32,
    flags: u32,
    tx_metadata_len: u32,
}

#[repr(C)]
struct SockaddrXdp {
    sxdp_family: u16,
    sxdp_flags: u16,
    sxdp_ifindex: u32,
    sxdp_queue_id: u32,
    sxdp_shared_umem_fd: u32,
}

/// A bound AF_XDP socket (copy mode, queue 0) with a small UMEM. Its rings are never mapped:
/// it only exists so the `XSKS` slot is populated and `bpf_redirect_map` succeeds.
pub struct XskSocket {
    fd: OwnedFd,
    umem: *mut libc::c_void,
    umem_len: usize,
}

impl XskSocket {
    pub fn bind(ifindex: u32) -> Result<Self> {
        const CHUNK: u32 = 4096;
        const CHUNKS: usize = 16;
        let umem_len = CHUNK as usize * CHUNKS;
        // SAFETY: anonymous private mapping, no file or existing memory involved.
        let umem = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                umem_len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if umem == libc::MAP_FAILED {
            bail!("mmap UMEM: {}", std::io::Error::last_os_error());
        }
        // SAFETY: plain socket(2) call.
        let raw = unsafe { libc::socket(libc::AF_XDP, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) };
        if raw < 0 {
            // SAFETY: `umem` is the mapping created above, unmapped once.
            unsafe { libc::munmap(umem, umem_len) };
            bail!("socket(AF_XDP): {}", std::io::Error::last_os_error());
        }
        // SAFETY: `raw` is a fresh fd we own.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let s = XskSocket { fd, umem, umem_len };
        let reg = XdpUmemReg {
            addr: umem as u64,
            len: umem_len as u64,
            chunk_size: CHUNK,
            headroom: 0,
            flags: 0,
            tx_metadata_len: 0,
        };
        s.setsockopt(XDP_UMEM_REG, &reg, "XDP_UMEM_REG")?;
        let ring: u32 = 16;
        s.setsockopt(XDP_UMEM_FILL_RING, &ring, "XDP_UMEM_FILL_RING")?;
        s.setsockopt(XDP_UMEM_COMPLETION_RING, &ring, "XDP_UMEM_COMPLETION_RING")?;
        s.setsockopt(XDP_RX_RING, &ring, "XDP_RX_RING")?;
        let sa = SockaddrXdp {
            sxdp_family: libc::AF_XDP as u16,
            sxdp_flags: XDP_COPY,
            sxdp_ifindex: ifindex,
            sxdp_queue_id: 0,
            sxdp_shared_umem_fd: 0,
        };
        // SAFETY: `sa` is a valid sockaddr_xdp and its size is passed.
        let r = unsafe {
            libc::bind(
                s.fd.as_raw_fd(),
                &sa as *const SockaddrXdp as *const libc::sockaddr,
                size_of::<SockaddrXdp>() as u32,
            )
        };
        if r != 0 {
            bail!("bind AF_XDP socket to ifindex {ifindex} queue 0: {}", std::io::Error::last_os_error());
        }
        Ok(s)
    }

    fn setsockopt<T>(&self, opt: libc::c_int, val: &T, what: &str) -> Result<()> {
        // SAFETY: `val` points to a live T whose size is passed.
        let r = unsafe {
            libc::setsockopt(
                self.fd.as_raw_fd(),
                SOL_XDP,
                opt,
                val as *const T as *const libc::c_void,
                size_of::<T>() as u32,
            )
        };
        if r != 0 {
            bail!("setsockopt(SOL_XDP, {what}): {}", std::io::Error::last_os_error());
        }
        Ok(())
    }

    pub fn fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

impl Drop for XskSocket {
    fn drop(&mut self) {
        // The socket fd (OwnedFd) closes after this; the kernel holds its own UMEM page pins,
        // released on close, so unmapping our view first is fine.
        // SAFETY: `umem` is the mapping created in `bind`, unmapped exactly once.
        unsafe { libc::munmap(self.umem, self.umem_len) };
    }
}

/// Sends one raw Ethernet frame out of `ifindex` with an AF_PACKET socket.
pub fn send_raw(ifindex: u32, frame: &[u8]) -> Result<()> {
    // SAFETY: plain socket(2) call; protocol 0 = send only, receive nothing.
    let raw = unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) };
    if raw < 0 {
        bail!("socket(AF_PACKET): {}", std::io::Error::last_os_error());
    }
    // SAFETY: `raw` is a fresh fd we own.
    let fd = unsafe { OwnedFd::from_raw_fd(raw) };
    // SAFETY: sockaddr_ll is plain old data; all-zero is a valid starting value.
    let mut sa: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
    sa.sll_family = libc::AF_PACKET as u16;
    sa.sll_ifindex = ifindex as i32;
    sa.sll_halen = 6;
    sa.sll_addr[..6].copy_from_slice(&frame[..6]);
    // SAFETY: `frame` and `sa` are valid for the given lengths during the call.
    let n = unsafe {
        libc::sendto(
            fd.as_raw_fd(),
            frame.as_ptr() as *const libc::c_void,
            frame.len(),
            0,
            &sa as *const libc::sockaddr_ll as *const libc::sockaddr,
            size_of::<libc::sockaddr_ll>() as u32,
        )
    };
    if n != frame.len() as isize {
        bail!("sendto on ifindex {ifindex}: {}", std::io::Error::last_os_error());
    }
    Ok(())
}

/// `ip link show dev <name>` output.
pub fn link_show(name: &str) -> Result<String> {
    let out = Command::new("ip").args(["link", "show", "dev", name]).output().context("running `ip link show`")?;
    if !out.status.success() {
        bail!("ip link show dev {name}: {}", String::from_utf8_lossy(&out.stderr).trim());
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}
