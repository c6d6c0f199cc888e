//! The raw socket replay sends from: a send-only `AF_PACKET` socket (packet(7), `SOCK_RAW`,
//! protocol 0 so it receives nothing) bound by ifindex to one interface of the namespace the
//! calling thread is in. Its whole API is [`PacketSocket::open`] and [`PacketSocket::send`]
//! (the shared AF_PACKET module of the plumbing crate is meant to replace this file).

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::time::{Duration, Instant};

/// Why the socket could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum SocketError {
    /// The interface name has a NUL byte. (The causes are in the messages, not chained as
    /// sources, so `{:#}` prints each once.)
    #[error("interface name: {err}")]
    InterfaceName { err: std::ffi::NulError },
    /// `if_nametoindex` failed: no such interface in this namespace.
    #[error("interface {ifname}: {err}")]
    NoInterface { ifname: String, err: std::io::Error },
    /// `socket(AF_PACKET, SOCK_RAW)` failed (not root, typically).
    #[error("socket(AF_PACKET): {0}")]
    Socket(std::io::Error),
}

/// How long [`PacketSocket::send`] retries a full transmit queue.
const BUSY_RETRY: Duration = Duration::from_millis(10);

/// A send-only `AF_PACKET` raw socket on one interface of the namespace it was opened in.
#[derive(Debug)]
pub struct PacketSocket {
    fd: OwnedFd,
    ifindex: i32,
}

impl PacketSocket {
    /// Opens the socket for `ifname`, looked up in the calling thread's namespace.
    pub fn open(ifname: &str) -> Result<PacketSocket, SocketError> {
        let name = std::ffi::CString::new(ifname).map_err(|err| SocketError::InterfaceName { err })?;
        // SAFETY: `name` is a valid NUL-terminated string for the call.
        let ifindex = unsafe { libc::if_nametoindex(name.as_ptr()) };
        if ifindex == 0 {
            return Err(SocketError::NoInterface { ifname: ifname.into(), err: std::io::Error::last_os_error() });
        }
        // SAFETY: plain socket(2) call; protocol 0 = send only, receive nothing.
        let raw = unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) };
        if raw < 0 {
            return Err(SocketError::Socket(std::io::Error::last_os_error()));
        }
        // SAFETY: `raw` is a fresh descriptor nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        Ok(PacketSocket { fd, ifindex: ifindex as i32 })
    }

    /// Sends one Ethernet frame (without FCS) to the destination MAC in its first 6 bytes; a
    /// full queue (ENOBUFS / EAGAIN) is retried for up to 10 ms. A frame shorter than an
    /// Ethernet header is refused (`InvalidInput`).
    pub fn send(&self, frame: &[u8]) -> std::io::Result<usize> {
        if frame.len() < 14 {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!("a frame of {} bytes has no Ethernet header", frame.len()),
            ));
        }
        // SAFETY: sockaddr_ll is plain data; all-zero is a valid value.
        let mut sa: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        sa.sll_family = libc::AF_PACKET as u16;
        sa.sll_ifindex = self.ifindex;
        sa.sll_halen = 6;
        sa.sll_addr[..6].copy_from_slice(&frame[..6]);
        let give_up = Instant::now() + BUSY_RETRY;
        loop {
            // SAFETY: `frame` and `sa` are live for the call and the lengths match them.
            let n = unsafe {
                libc::sendto(
                    self.fd.as_raw_fd(),
                    frame.as_ptr().cast(),
                    frame.len(),
                    0,
                    (&sa as *const libc::sockaddr_ll).cast(),
                    std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t,
                )
            };
            if n >= 0 {
                return Ok(n as usize);
            }
            let e = std::io::Error::last_os_error();
            let busy = matches!(e.raw_os_error(), Some(libc::ENOBUFS) | Some(libc::EAGAIN));
            if !busy || Instant::now() >= give_up {
                return Err(e);
            }
            std::thread::yield_now();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn open_names_the_interface_it_cannot_find() {
        let e = PacketSocket::open("rf-nonexistent0").unwrap_err();
        assert!(matches!(&e, SocketError::NoInterface { ifname, .. } if ifname == "rf-nonexistent0"), "{e}");
        assert!(e.to_string().starts_with("interface rf-nonexistent0: "), "{e}");
        let e = PacketSocket::open("a\0b").unwrap_err();
        assert!(matches!(e, SocketError::InterfaceName { .. }), "{e}");
    }
}
