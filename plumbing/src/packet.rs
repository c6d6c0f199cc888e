//! One `AF_PACKET` socket module (packet(7)) for every raw-frame path outside AF_XDP:
//!
//! - [`PacketSocket::lldp`]: LLDP (EtherType 0x88cc) on every interface of the namespace, not
//!   bound to one: received frames name their interface by index and frames are sent to an
//!   index looked up by name each time, so a NIC veth that is moved, renamed or recreated is
//!   picked up again, as lldpd does (`rocefab-nicd`).
//! - [`PacketSocket::tap`]: every frame one interface receives and every frame the kernel sends
//!   on it (`ETH_P_ALL`, bound), stamped by the kernel (`SO_TIMESTAMPNS`): the kernel half of a
//!   NIC capture.
//! - [`PacketSocket::sender`]: sends complete frames out of one interface and receives nothing
//!   (protocol 0): `rocefab replay` and `rocefab send`.
//!
//! Sockets are non-blocking except the sender's; [`PacketSocket::send_retrying`] rides out a
//! full transmit queue for a bounded time.
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::time::{Duration, Instant};

/// EtherType of LLDP.
pub const ETH_P_LLDP: u16 = 0x88cc;
/// LLDP nearest-bridge group address.
pub const LLDP_DST: [u8; 6] = [0x01, 0x80, 0xc2, 0x00, 0x00, 0x0e];
/// Receive buffer asked for a capture socket (bursts while nicd sleeps between reads).
pub const TAP_RCVBUF: i32 = 4 << 20;

/// One frame read by [`PacketSocket::recv_captured`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Captured {
    /// Bytes read into the buffer.
    pub len: usize,
    /// Bytes of the frame (more than `len` when the buffer was too short).
    pub orig_len: usize,
    /// Sent by this host (`PACKET_OUTGOING`), else received.
    pub outgoing: bool,
    /// When the kernel saw it (`SO_TIMESTAMPNS`), ns since the Unix epoch.
    pub ts_ns: Option<u64>,
    /// The interface it was seen on.
    pub ifindex: i32,
}

/// An `AF_PACKET`, `SOCK_RAW` socket.
#[derive(Debug)]
pub struct PacketSocket {
    fd: OwnedFd,
    /// EtherType the socket was opened for (network order in the kernel's view).
    protocol: u16,
    /// The interface a sender or tap is bound to.
    ifindex: i32,
}

/// The interface index of `name` in the calling thread's namespace, if it exists.
pub fn ifindex(name: &str) -> Option<i32> {
    nix::net::if_::if_nametoindex(name).ok().map(|i| i as i32)
}

fn sockaddr(protocol: u16, ifindex: i32, dst: &[u8]) -> libc::sockaddr_ll {
    // SAFETY: sockaddr_ll is plain data; all-zero is a valid value.
    let mut a: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
    a.sll_family = libc::AF_PACKET as u16;
    a.sll_protocol = protocol.to_be();
    a.sll_ifindex = ifindex;
    a.sll_halen = 6;
    if dst.len() >= 6 {
        a.sll_addr[..6].copy_from_slice(&dst[..6]);
    }
    a
}

fn setsockopt_int(fd: RawFd, level: i32, name: i32, v: i32) -> io::Result<()> {
    // SAFETY: `v` is a live c_int and its size is passed.
    let r = unsafe {
        libc::setsockopt(fd, level, name, (&v as *const i32).cast(), std::mem::size_of::<i32>() as libc::socklen_t)
    };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

impl PacketSocket {
    fn open(protocol: u16, nonblocking: bool) -> io::Result<PacketSocket> {
        let flags = libc::SOCK_RAW | libc::SOCK_CLOEXEC | if nonblocking { libc::SOCK_NONBLOCK } else { 0 };
        // SAFETY: plain socket(2) call; the descriptor is checked and then owned.
        let fd = unsafe { libc::socket(libc::AF_PACKET, flags, i32::from(protocol.to_be())) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `fd` is a fresh descriptor nothing else owns.
        Ok(PacketSocket { fd: unsafe { OwnedFd::from_raw_fd(fd) }, protocol, ifindex: 0 })
    }

    /// LLDP on every interface of the calling thread's namespace (non-blocking).
    pub fn lldp() -> io::Result<PacketSocket> {
        PacketSocket::open(ETH_P_LLDP, true)
    }

    /// Every frame interface `ifindex` receives or sends, with kernel timestamps (non-blocking).
    pub fn tap(ifindex: i32) -> io::Result<PacketSocket> {
        // Protocol 0: the socket receives nothing until it is bound to the one interface.
        let mut sock = PacketSocket::open(0, true)?;
        let fd = sock.fd.as_raw_fd();
        setsockopt_int(fd, libc::SOL_SOCKET, libc::SO_TIMESTAMPNS, 1)?;
        if setsockopt_int(fd, libc::SOL_SOCKET, libc::SO_RCVBUFFORCE, TAP_RCVBUF).is_err() {
            let _ = setsockopt_int(fd, libc::SOL_SOCKET, libc::SO_RCVBUF, TAP_RCVBUF);
        }
        let a = sockaddr(libc::ETH_P_ALL as u16, ifindex, &[]);
        // SAFETY: `a` is a live sockaddr_ll and its size is passed.
        let r = unsafe {
            libc::bind(fd, (&a as *const libc::sockaddr_ll).cast(), std::mem::size_of::<libc::sockaddr_ll>() as _)
        };
        if r < 0 {
            return Err(io::Error::last_os_error());
        }
        sock.ifindex = ifindex;
        Ok(sock)
    }

    /// Sends out of interface `ifname` of the calling thread's namespace, receives nothing
    /// (blocking sends).
    pub fn sender(ifname: &str) -> io::Result<PacketSocket> {
        let idx = ifindex(ifname).ok_or_else(|| {
            io::Error::new(io::ErrorKind::NotFound, format!("interface {ifname}: no such interface in this namespace"))
        })?;
        PacketSocket::sender_on(idx)
    }

    /// [`PacketSocket::sender`] by interface index.
    pub fn sender_on(ifindex: i32) -> io::Result<PacketSocket> {
        let mut sock = PacketSocket::open(0, false)?;
        sock.ifindex = ifindex;
        Ok(sock)
    }

    /// The interface a tap or sender is bound to (0 for an LLDP socket).
    pub fn bound_ifindex(&self) -> i32 {
        self.ifindex
    }

    /// Sends a complete Ethernet frame out of interface `ifindex` (its destination MAC is the
    /// link-layer address).
    pub fn send_to(&self, ifindex: i32, frame: &[u8]) -> io::Result<usize> {
        if frame.len() < 14 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("a frame of {} bytes has no Ethernet header", frame.len()),
            ));
        }
        let a = sockaddr(self.protocol, ifindex, frame);
        // SAFETY: `frame` and `a` are live for the call; the length arguments match them.
        let r = unsafe {
            libc::sendto(
                self.fd.as_raw_fd(),
                frame.as_ptr().cast(),
                frame.len(),
                0,
                (&a as *const libc::sockaddr_ll).cast(),
                std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t,
            )
        };
        if r < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(r as usize)
    }

    /// Sends a complete Ethernet frame out of the bound interface; a full queue (`ENOBUFS`,
    /// `EAGAIN`) is retried, yielding the CPU, for up to `patience`.
    pub fn send_retrying(&self, frame: &[u8], patience: Duration) -> io::Result<usize> {
        let give_up = Instant::now() + patience;
        loop {
            match self.send_to(self.ifindex, frame) {
                Ok(n) => return Ok(n),
                Err(e) => {
                    let busy = matches!(e.raw_os_error(), Some(libc::ENOBUFS) | Some(libc::EAGAIN));
                    if !busy || Instant::now() >= give_up {
                        return Err(e);
                    }
                    std::thread::yield_now();
                }
            }
        }
    }

    /// Receives one frame that arrived (not one this host sent): its length and interface
    /// index; `WouldBlock` when none is waiting.
    pub fn recv(&self, buf: &mut [u8]) -> io::Result<(usize, i32)> {
        loop {
            let c = self.recv_captured(buf)?;
            if !c.outgoing {
                return Ok((c.orig_len, c.ifindex));
            }
        }
    }

    /// Reads one frame (received or sent) into `buf`, with the kernel's timestamp if the socket
    /// asked for them; `WouldBlock` when none is waiting.
    pub fn recv_captured(&self, buf: &mut [u8]) -> io::Result<Captured> {
        let mut addr = sockaddr(0, 0, &[]);
        let mut iov = libc::iovec { iov_base: buf.as_mut_ptr().cast(), iov_len: buf.len() };
        // Room for a few control messages, aligned for cmsghdr.
        let mut control = [0u64; 16];
        // SAFETY: msghdr is plain data; all-zero is a valid value.
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_name = (&mut addr as *mut libc::sockaddr_ll).cast();
        msg.msg_namelen = std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t;
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.as_mut_ptr().cast();
        msg.msg_controllen = std::mem::size_of_val(&control) as _;
        // SAFETY: every pointer in `msg` refers to a live, writable buffer of the length given.
        let r = unsafe { libc::recvmsg(self.fd.as_raw_fd(), &mut msg, libc::MSG_TRUNC) };
        if r < 0 {
            return Err(io::Error::last_os_error());
        }
        let mut ts_ns = None;
        // SAFETY: `msg` was filled by recvmsg; the CMSG_* helpers walk its control buffer
        // within `msg_controllen`, and a SCM_TIMESTAMPNS message carries one timespec (read
        // unaligned, as CMSG_DATA gives no alignment guarantee for it).
        unsafe {
            let mut c = libc::CMSG_FIRSTHDR(&msg);
            while !c.is_null() {
                if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SCM_TIMESTAMPNS {
                    let t = std::ptr::read_unaligned(libc::CMSG_DATA(c).cast::<libc::timespec>());
                    ts_ns = Some((t.tv_sec as u64).saturating_mul(1_000_000_000).saturating_add(t.tv_nsec as u64))
                        .filter(|&t| t > 0);
                }
                c = libc::CMSG_NXTHDR(&msg, c);
            }
        }
        let orig_len = r as usize;
        Ok(Captured {
            len: orig_len.min(buf.len()),
            orig_len,
            outgoing: addr.sll_pkttype == libc::PACKET_OUTGOING,
            ts_ns,
            ifindex: addr.sll_ifindex,
        })
    }

    /// Frames the kernel dropped for this socket (receive buffer full) since the last call
    /// (`PACKET_STATISTICS` resets them).
    pub fn drops(&self) -> io::Result<u64> {
        // SAFETY: tpacket_stats is plain data; all-zero is a valid value.
        let mut st: libc::tpacket_stats = unsafe { std::mem::zeroed() };
        let mut len = std::mem::size_of::<libc::tpacket_stats>() as libc::socklen_t;
        // SAFETY: `st` is live and writable, `len` its size.
        let r = unsafe {
            libc::getsockopt(
                self.fd.as_raw_fd(),
                libc::SOL_PACKET,
                libc::PACKET_STATISTICS,
                (&mut st as *mut libc::tpacket_stats).cast(),
                &mut len,
            )
        };
        if r < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(u64::from(st.tp_drops))
    }
}

impl AsRawFd for PacketSocket {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Loopback in a private network namespace of a thread of its own (root only, as every
    /// AF_PACKET socket; the privileged suite runs as root).
    fn in_private_netns<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> Option<T> {
        if !nix::unistd::Uid::effective().is_root() {
            panic!("AF_PACKET tests need root (CAP_NET_RAW and unshare(CLONE_NEWNET)): run as root");
        }
        std::thread::spawn(move || {
            nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWNET).expect("unshare(CLONE_NEWNET)");
            let lo = std::process::Command::new("ip").args(["link", "set", "lo", "up"]).status().expect("ip");
            assert!(lo.success());
            f()
        })
        .join()
        .ok()
    }

    fn lldp_frame(src: [u8; 6], tag: u8) -> Vec<u8> {
        let mut f = LLDP_DST.to_vec();
        f.extend_from_slice(&src);
        f.extend_from_slice(&ETH_P_LLDP.to_be_bytes());
        f.extend_from_slice(&[tag; 46]);
        f
    }

    #[test]
    fn lldp_socket_hears_frames_a_sender_puts_on_the_interface_and_not_its_own() {
        let r = in_private_netns(|| {
            let lo = ifindex("lo").expect("lo");
            assert_eq!(ifindex("no-such-if0"), None);
            let lldp = PacketSocket::lldp().unwrap();
            let tap = PacketSocket::tap(lo).unwrap();
            assert_eq!(tap.bound_ifindex(), lo);
            let tx = PacketSocket::sender("lo").unwrap();
            let e = PacketSocket::sender("no-such-if0").unwrap_err();
            assert!(e.to_string().starts_with("interface no-such-if0: "), "{e}");
            assert_eq!(PacketSocket::sender("a\0b").unwrap_err().kind(), io::ErrorKind::NotFound);
            assert_eq!(tx.send_to(lo, &[0u8; 13]).unwrap_err().kind(), io::ErrorKind::InvalidInput);
            let f = lldp_frame([2, 0, 0, 0, 0, 1], 0xab);
            assert_eq!(tx.send_retrying(&f, Duration::from_millis(10)).unwrap(), f.len());
            let mut buf = [0u8; 256];
            // The tap sees the frame leave and come back on lo, stamped by the kernel.
            let mut seen = Vec::new();
            while let Ok(c) = tap.recv_captured(&mut buf) {
                assert_eq!(&buf[..c.len], &f[..], "{c:?}");
                assert!(c.ts_ns.is_some_and(|t| t > 1_600_000_000_000_000_000), "{c:?}");
                seen.push((c.outgoing, c.ifindex));
            }
            assert_eq!(seen, vec![(true, lo), (false, lo)]);
            assert_eq!(tap.drops().unwrap(), 0);
            // The LLDP socket skips the outgoing copy: one frame, on lo.
            let (len, idx) = lldp.recv(&mut buf).unwrap();
            assert_eq!((len, idx, &buf[..len]), (f.len(), lo, &f[..]));
            assert_eq!(lldp.recv(&mut buf).unwrap_err().kind(), io::ErrorKind::WouldBlock);
            // Short buffer: the original length is reported.
            lldp.send_to(lo, &f).unwrap();
            let mut small = [0u8; 20];
            let c = tap.recv_captured(&mut small).unwrap();
            assert_eq!((c.len, c.orig_len), (20, f.len()));
            true
        });
        assert_eq!(r, Some(true));
    }
}
