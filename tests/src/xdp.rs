//! Helpers for the XDP `BPF_PROG_TEST_RUN` tests: a veth pair guard (the kernel wants a real
//! ingress device for a test run) and an AF_XDP socket to put into the `XSKS` map (a redirect
//! only reports `XDP_REDIRECT` when the slot holds a bound socket).
use std::os::fd::RawFd;
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

/// A bound AF_XDP socket (the [`afxdp`] crate's, as the daemons open them: copy mode, queue 0)
/// on a UMEM of its own. Its rings are never used: it only exists so the `XSKS` slot is
/// populated and `bpf_redirect_map` succeeds.
pub struct XskSocket {
    // Field order = drop order: the socket before its UMEM.
    socket: afxdp::Socket,
    _umem: afxdp::Umem,
}

impl XskSocket {
    /// Binds a socket to queue 0 of interface `ifname` (current namespace).
    pub fn bind(ifname: &str) -> Result<Self> {
        const CHUNKS: u32 = 16;
        const RING: u32 = 16;
        let frames = std::num::NonZeroU32::new(CHUNKS).expect("non-zero");
        let (umem, _descs) = afxdp::umem(frames, afxdp::FRAME_SIZE, RING, RING).context("AF_XDP UMEM")?;
        // SAFETY: no frame descriptor is ever handed to this socket's rings, and the UMEM is kept
        // beside the socket and dropped after it.
        let socket = unsafe { afxdp::Socket::open(&umem, ifname, RING, RING, false, false) }
            .with_context(|| format!("bind AF_XDP socket to {ifname} queue 0"))?;
        Ok(XskSocket { socket, _umem: umem })
    }

    pub fn fd(&self) -> RawFd {
        self.socket.fd()
    }
}

/// Sends one raw Ethernet frame out of `ifindex` (the plumbing crate's one AF_PACKET socket).
pub fn send_raw(ifindex: u32, frame: &[u8]) -> Result<()> {
    let sock = rocefab_plumbing::packet::PacketSocket::sender_on(ifindex as i32).context("socket(AF_PACKET)")?;
    let n = sock.send_to(ifindex as i32, frame).with_context(|| format!("sendto on ifindex {ifindex}"))?;
    if n != frame.len() {
        bail!("sendto on ifindex {ifindex}: {n} of {} bytes sent", frame.len());
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
