//! The carrier of the host's NIC ports, as the data thread sees it: a non-blocking rtnetlink
//! socket subscribed to link notifications (`RTMGRP_LINK`), read by the data loop when it wakes
//! on the socket or at most every [`CHECK_NS`] while busy. A port is up while it is `IFF_UP`
//! with carrier (`IFLA_CARRIER`, the driver's state now; not `IFF_RUNNING`, which follows the
//! operstate the kernel may update up to a second later, see `dataplane-user`'s carrier watch).
//!
//! The engine takes each change ([`gpu_host::nic::engine::Engine::set_link`]): a port without
//! carrier sends nothing and its QPs with an alternate path migrate (a dual-port NIC, book Fig.
//! 13-5). A real NIC sees its own link go down; a cut cable (`rocefab fail link hostN:gpuMpP`)
//! takes both veth ends' carrier.
use std::os::fd::{AsRawFd, RawFd};

use rtnetlink::packet_core::{NetlinkHeader, NetlinkMessage, NetlinkPayload, NLM_F_REQUEST};
use rtnetlink::packet_route::link::{LinkAttribute, LinkFlags, LinkMessage};
use rtnetlink::packet_route::RouteNetlinkMessage;
use rtnetlink::sys::{protocols::NETLINK_ROUTE, Socket, SocketAddr};

/// How often a busy data loop reads the socket (wall ns); an idle one wakes on it.
pub const CHECK_NS: u64 = 1_000_000;

/// `RTMGRP_LINK` (linux/rtnetlink.h).
const RTMGRP_LINK: u32 = 1;

/// The watch: the socket, each port's interface index, its last known state.
pub struct LinkWatch {
    sock: Socket,
    ifindex: Vec<u32>,
    up: Vec<bool>,
    buf: Vec<u8>,
    next_check: u64,
}

impl LinkWatch {
    /// Subscribes to link notifications of the calling thread's namespace, then reads the
    /// current state of `names` (the job's NICs, in order).
    pub fn open(names: &[String]) -> std::io::Result<LinkWatch> {
        let mut sock = Socket::new(NETLINK_ROUTE)?;
        sock.bind(&SocketAddr::new(0, RTMGRP_LINK))?;
        sock.set_non_blocking(true)?;
        let mut ifindex = Vec::with_capacity(names.len());
        let mut up = Vec::with_capacity(names.len());
        for n in names {
            let c = std::ffi::CString::new(n.as_str())
                .map_err(|_| std::io::Error::new(std::io::ErrorKind::InvalidInput, format!("{n:?}")))?;
            // SAFETY: if_nametoindex reads the NUL-terminated name and nothing else.
            let i = unsafe { libc::if_nametoindex(c.as_ptr()) };
            if i == 0 {
                return Err(std::io::Error::new(std::io::ErrorKind::NotFound, format!("no interface {n}")));
            }
            ifindex.push(i);
        }
        // The carrier now, asked after subscribing (a change from here on is notified). Not
        // IFF_RUNNING: it follows the operstate, which the kernel's linkwatch updates later
        // (the switches saw ports down for 26 to 490 ms after `rocefab up` and as jobs started,
        // docs/src/failures.md), and a port seen down at the start moves its QPs away.
        let mut query = Socket::new(NETLINK_ROUTE)?;
        query.bind_auto()?;
        query.connect(&SocketAddr::new(0, 0))?;
        let mut buf = vec![0; 64 * 1024];
        for (&i, n) in ifindex.iter().zip(names) {
            up.push(carrier_now(&mut query, i, &mut buf).map_err(|e| {
                std::io::Error::new(e.kind(), format!("reading the carrier of {n} (RTM_GETLINK): {e}"))
            })?);
        }
        Ok(LinkWatch { sock, ifindex, up, buf: vec![0; 64 * 1024], next_check: 0 })
    }

    /// The socket, for the data loop's ppoll.
    pub fn fd(&self) -> RawFd {
        self.sock.as_raw_fd()
    }

    /// Each port's state as last seen.
    pub fn up(&self) -> &[bool] {
        &self.up
    }

    /// Whether the loop should read the socket at `now` (every [`CHECK_NS`], or when ppoll
    /// saw it readable: `readable`).
    pub fn due(&mut self, now: u64, readable: bool) -> bool {
        if readable || now >= self.next_check {
            self.next_check = now.saturating_add(CHECK_NS);
            return true;
        }
        false
    }

    /// Reads every pending notification and calls `changed(port, up)` for each port whose
    /// state changed. A notification lost to a full socket buffer (`ENOBUFS`) is no worse than
    /// a late one: the next notification of the port carries its whole state.
    pub fn read(&mut self, mut changed: impl FnMut(usize, bool)) -> std::io::Result<()> {
        loop {
            let mut b = &mut self.buf[..];
            let n = match self.sock.recv(&mut b, 0) {
                Ok(n) => n.min(self.buf.len()),
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return Ok(()),
                Err(e) if e.raw_os_error() == Some(libc::ENOBUFS) => continue,
                Err(e) => return Err(e),
            };
            for (index, up) in link_states(&self.buf[..n]) {
                if let Some(p) = self.ifindex.iter().position(|&i| i == index) {
                    if self.up[p] != up {
                        self.up[p] = up;
                        changed(p, up);
                    }
                }
            }
        }
    }
}

/// Whether interface `index` is up with carrier now: an `RTM_GETLINK` request on `sock` (a
/// connected NETLINK_ROUTE socket), its answer read into `buf`.
fn carrier_now(sock: &mut Socket, index: u32, buf: &mut [u8]) -> std::io::Result<bool> {
    let mut l = LinkMessage::default();
    l.header.index = index;
    let mut h = NetlinkHeader::default();
    h.flags = NLM_F_REQUEST;
    let mut m = NetlinkMessage::new(h, NetlinkPayload::InnerMessage(RouteNetlinkMessage::GetLink(l)));
    m.finalize();
    let mut req = vec![0; m.buffer_len()];
    m.serialize(&mut req);
    sock.send(&req, 0)?;
    let mut b = &mut buf[..];
    let n = sock.recv(&mut b, 0)?.min(buf.len());
    link_states(&buf[..n])
        .into_iter()
        .find(|&(i, _)| i == index)
        .map(|(_, up)| up)
        .ok_or_else(|| std::io::Error::new(std::io::ErrorKind::InvalidData, "the answer describes no such link"))
}

/// The links a datagram of rtnetlink notifications describes: (interface index, up with
/// carrier). Messages that are not RTM_NEWLINK are skipped; a deleted link is down.
pub fn link_states(mut buf: &[u8]) -> Vec<(u32, bool)> {
    let mut out = Vec::new();
    while buf.len() >= 16 {
        let len = u32::from_ne_bytes([buf[0], buf[1], buf[2], buf[3]]) as usize;
        if len < 16 || len > buf.len() {
            break;
        }
        if let Ok(m) = NetlinkMessage::<RouteNetlinkMessage>::deserialize(&buf[..len]) {
            match m.payload {
                NetlinkPayload::InnerMessage(RouteNetlinkMessage::NewLink(l)) => {
                    out.push((l.header.index, is_up(&l)));
                }
                NetlinkPayload::InnerMessage(RouteNetlinkMessage::DelLink(l)) => out.push((l.header.index, false)),
                _ => {}
            }
        }
        // Messages are aligned to 4 bytes (NLMSG_ALIGN).
        buf = &buf[((len + 3) & !3).min(buf.len())..];
    }
    out
}

/// Up (`IFF_UP`) with carrier (`IFLA_CARRIER`, else `IFF_LOWER_UP`).
fn is_up(l: &LinkMessage) -> bool {
    let carrier = l
        .attributes
        .iter()
        .find_map(|a| if let LinkAttribute::Carrier(c) = a { Some(*c != 0) } else { None })
        .unwrap_or_else(|| l.header.flags.contains(LinkFlags::LowerUp));
    l.header.flags.contains(LinkFlags::Up) && carrier
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg(index: u32, flags: LinkFlags, carrier: Option<u8>, new: bool) -> Vec<u8> {
        let mut l = LinkMessage::default();
        l.header.index = index;
        l.header.flags = flags;
        if let Some(c) = carrier {
            l.attributes.push(LinkAttribute::Carrier(c));
        }
        let inner = if new { RouteNetlinkMessage::NewLink(l) } else { RouteNetlinkMessage::DelLink(l) };
        let mut m = NetlinkMessage::new(NetlinkHeader::default(), NetlinkPayload::InnerMessage(inner));
        m.finalize();
        let mut b = vec![0; m.buffer_len()];
        m.serialize(&mut b);
        b
    }

    #[test]
    fn the_watch_starts_from_the_carrier_the_kernel_reports() {
        // Loopback is up with carrier in every namespace (no privilege needed to ask).
        let w = LinkWatch::open(&["lo".to_string()]).unwrap();
        assert_eq!(w.up(), [true]);
        let e = LinkWatch::open(&["lo".to_string(), "rfnone0".to_string()]).err().unwrap();
        assert!(e.to_string().contains("no interface rfnone0"), "{e}");
    }

    #[test]
    fn a_datagram_of_link_notifications_gives_each_links_carrier() {
        let mut d = msg(4, LinkFlags::Up | LinkFlags::Running, Some(1), true);
        d.extend(msg(5, LinkFlags::Up, Some(0), true));
        d.extend(msg(6, LinkFlags::empty(), Some(1), true));
        d.extend(msg(7, LinkFlags::Up | LinkFlags::LowerUp, None, true));
        d.extend(msg(8, LinkFlags::Up, Some(1), false));
        assert_eq!(
            link_states(&d),
            vec![(4, true), (5, false), (6, false), (7, true), (8, false)],
            "carrier, no carrier, administratively down, LOWER_UP without IFLA_CARRIER, deleted"
        );
    }

    #[test]
    fn a_truncated_or_garbled_datagram_yields_what_it_can_and_never_panics() {
        let good = msg(4, LinkFlags::Up, Some(1), true);
        let mut d = good.clone();
        d.extend_from_slice(&good[..10]);
        assert_eq!(link_states(&d), vec![(4, true)]);
        assert_eq!(link_states(&[0xff; 40]), vec![]);
        assert_eq!(link_states(&[]), vec![]);
        let mut bad_len = good.clone();
        bad_len[0..4].copy_from_slice(&3u32.to_ne_bytes());
        assert_eq!(link_states(&bad_len), vec![]);
    }
}
