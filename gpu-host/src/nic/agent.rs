//! The GPU host's NIC control plane, `rocefab-nicd`: an LLDP/DCBX agent on every GPU NIC
//! ([`lldp_agent::PortAgent`]), willing by default, so a NIC adopts the PFC enable bitmap and
//! Application Priority table of the switch port it is cabled to (IEEE 802.1Qaz). The
//! controller reads the negotiated values ([`classes_from`]) from the agent's `GET /lldp` and
//! gives them to the NIC emulator of a job ([`super::job::NicClasses`]): the DSCP it marks
//! RoCEv2 with, its priorities, and the PFC enable vector (the priorities whose PFC pauses it
//! honours).
//!
//! LLDP goes through one `AF_PACKET` socket for EtherType 0x88cc in the host namespace, not
//! bound to an interface: received frames name their interface by index, and frames are sent
//! to an interface looked up by name each time, so a NIC veth that is moved, renamed or
//! recreated is picked up again (with a fast start), as lldpd does.
//!
//! [`PacketTap`] is the kernel half of a NIC capture (`GET /capture` on the agent): an
//! `AF_PACKET` socket per captured NIC with kernel timestamps.
use std::io;
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use lldp_agent::{Dcb, PortReport};
use rocefab_contracts::config::LldpConfig;
use serde::{Deserialize, Serialize};

use super::job::NicClasses;

/// EtherType of LLDP.
pub const ETH_P_LLDP: u16 = 0x88cc;
/// LLDP nearest-bridge group address.
pub const LLDP_DST: [u8; 6] = [0x01, 0x80, 0xc2, 0x00, 0x00, 0x0e];

/// `rocefab-nicd`'s configuration, written by `rocefab up`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentConfig {
    /// Host name (the LLDP System Name).
    pub host: String,
    /// Network namespace of the host (entered after binding the HTTP listener).
    pub netns: Option<String>,
    /// `GET /lldp` and `/metrics` listen address, bound in the namespace the agent starts in.
    pub listen: SocketAddr,
    /// LLDP timing.
    #[serde(default)]
    pub lldp: LldpConfig,
    pub nics: Vec<AgentNic>,
}

/// One GPU NIC.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentNic {
    /// Interface name in the host namespace.
    pub name: String,
    /// The NIC's MAC (Chassis ID and source MAC).
    pub mac: String,
    /// What the NIC advertises before (or without) adopting a peer's settings.
    pub dcb: Dcb,
    /// DSCP the NIC marks RoCEv2 with when the APP table allows it (24).
    pub data_dscp: u8,
    /// DSCP of its CNPs (48).
    pub cnp_dscp: u8,
    /// The switch port the topology cables the NIC to (`rail1:eth1`): when the NIC hears
    /// several LLDP agents, it takes DCBX from this one (System Name and Port ID) if it is
    /// among them, else from the one heard first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peer: Option<String>,
}

/// The classes a NIC runs with after negotiation: RoCEv2 at the APP table's UDP 4791 priority
/// with a DSCP the table maps to it (`nic.data_dscp` when it does), CNPs at `nic.cnp_dscp` with
/// the priority the table gives that DSCP; PFC on the operational PFC enable vector (the
/// switch's, adopted by a willing NIC). Values the table does not give stay the NIC's own.
pub fn classes_from(nic: &AgentNic, report: &PortReport) -> NicClasses {
    let own = &nic.dcb;
    let oper = &report.oper;
    let data_priority = oper.roce_priority().or(own.roce_priority()).unwrap_or(3);
    let data_dscp = oper.roce_dscp(nic.data_dscp).unwrap_or(nic.data_dscp);
    let cnp_priority = oper
        .dscp_priority(nic.cnp_dscp)
        .or_else(|| {
            own.app
                .iter()
                .find(|a| a.selector == lldp_agent::dcb::SEL_DSCP && a.protocol == u16::from(nic.cnp_dscp))
                .map(|a| a.priority)
        })
        .unwrap_or(7);
    NicClasses { data_dscp, data_priority, cnp_dscp: nic.cnp_dscp, cnp_priority, pfc_enable: oper.pfc_enable }
}

/// A raw `AF_PACKET` socket receiving and sending LLDP frames on every interface of the
/// namespace it was opened in.
#[derive(Debug)]
pub struct LldpSocket(OwnedFd);

fn sockaddr(ifindex: i32) -> libc::sockaddr_ll {
    // SAFETY: sockaddr_ll is plain data; all-zero is a valid value.
    let mut a: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
    a.sll_family = libc::AF_PACKET as u16;
    a.sll_protocol = ETH_P_LLDP.to_be();
    a.sll_ifindex = ifindex;
    a.sll_halen = 6;
    a.sll_addr[..6].copy_from_slice(&LLDP_DST);
    a
}

impl LldpSocket {
    /// Opens the socket (non-blocking).
    pub fn open() -> io::Result<LldpSocket> {
        // SAFETY: plain socket(2) call; the descriptor is checked and then owned.
        let fd = unsafe {
            libc::socket(
                libc::AF_PACKET,
                libc::SOCK_RAW | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
                i32::from(ETH_P_LLDP.to_be()),
            )
        };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `fd` is a fresh descriptor nothing else owns.
        Ok(LldpSocket(unsafe { OwnedFd::from_raw_fd(fd) }))
    }

    /// Sends a complete Ethernet frame out of interface `ifindex`.
    pub fn send(&self, ifindex: i32, frame: &[u8]) -> io::Result<()> {
        let a = sockaddr(ifindex);
        // SAFETY: `frame` and `a` are live for the call; the length arguments match them.
        let r = unsafe {
            libc::sendto(
                self.0.as_raw_fd(),
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
        Ok(())
    }

    /// Receives one frame that arrived (not one this host sent): its length and interface
    /// index; `WouldBlock` when none is waiting.
    pub fn recv(&self, buf: &mut [u8]) -> io::Result<(usize, i32)> {
        loop {
            let mut a = sockaddr(0);
            let mut alen = std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t;
            // SAFETY: `buf` and `a` are live, writable, and their lengths are passed.
            let r = unsafe {
                libc::recvfrom(
                    self.0.as_raw_fd(),
                    buf.as_mut_ptr().cast(),
                    buf.len(),
                    libc::MSG_TRUNC,
                    (&mut a as *mut libc::sockaddr_ll).cast(),
                    &mut alen,
                )
            };
            if r < 0 {
                return Err(io::Error::last_os_error());
            }
            if a.sll_pkttype == libc::PACKET_OUTGOING {
                continue;
            }
            return Ok((r as usize, a.sll_ifindex));
        }
    }
}

impl AsRawFd for LldpSocket {
    fn as_raw_fd(&self) -> RawFd {
        self.0.as_raw_fd()
    }
}

/// One frame read by [`PacketTap::recv`].
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
}

/// An `AF_PACKET` socket that sees every frame one interface receives and every frame the
/// kernel sends on it (`ETH_P_ALL`, bound to the interface), stamped by the kernel
/// (`SO_TIMESTAMPNS`): the kernel half of a NIC capture in `rocefab-nicd` (the AF_XDP half is
/// [`super::mirror`]).
#[derive(Debug)]
pub struct PacketTap(OwnedFd);

/// Receive buffer asked for a capture socket (bursts while nicd sleeps between reads).
pub const PACKET_TAP_RCVBUF: i32 = 4 << 20;

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

impl PacketTap {
    /// Opens the socket (non-blocking) on interface `ifindex` of this thread's namespace.
    pub fn open(ifindex: i32) -> io::Result<PacketTap> {
        // Protocol 0: the socket receives nothing until it is bound to the one interface.
        // SAFETY: plain socket(2) call; the descriptor is checked and then owned.
        let fd = unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC, 0) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `fd` is a fresh descriptor nothing else owns.
        let sock = PacketTap(unsafe { OwnedFd::from_raw_fd(fd) });
        setsockopt_int(fd, libc::SOL_SOCKET, libc::SO_TIMESTAMPNS, 1)?;
        if setsockopt_int(fd, libc::SOL_SOCKET, libc::SO_RCVBUFFORCE, PACKET_TAP_RCVBUF).is_err() {
            let _ = setsockopt_int(fd, libc::SOL_SOCKET, libc::SO_RCVBUF, PACKET_TAP_RCVBUF);
        }
        let mut a = sockaddr(ifindex);
        a.sll_protocol = (libc::ETH_P_ALL as u16).to_be();
        // SAFETY: `a` is a live sockaddr_ll and its size is passed.
        let r = unsafe {
            libc::bind(
                fd,
                (&a as *const libc::sockaddr_ll).cast(),
                std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t,
            )
        };
        if r < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(sock)
    }

    /// Reads one frame into `buf`; `WouldBlock` when none is waiting.
    pub fn recv(&self, buf: &mut [u8]) -> io::Result<Captured> {
        let mut addr = sockaddr(0);
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
        let r = unsafe { libc::recvmsg(self.0.as_raw_fd(), &mut msg, libc::MSG_TRUNC) };
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
                self.0.as_raw_fd(),
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

impl AsRawFd for PacketTap {
    fn as_raw_fd(&self) -> RawFd {
        self.0.as_raw_fd()
    }
}

/// Interface index of `name` in this thread's namespace, if it exists.
pub fn ifindex(name: &str) -> Option<i32> {
    nix::net::if_::if_nametoindex(name).ok().map(|i| i as i32)
}

#[cfg(test)]
mod tests {
    use super::*;
    use lldp_agent::{Identity, PortAgent, Timing};

    fn nic() -> AgentNic {
        AgentNic {
            name: "gpu0".into(),
            mac: "02:00:00:00:01:01".into(),
            dcb: Dcb::nic(true, 1 << 3, 24, 3, 48, 7),
            data_dscp: 24,
            cnp_dscp: 48,
            peer: None,
        }
    }

    fn report_with_peer(peer: Option<Dcb>) -> PortReport {
        let n = nic();
        let id = Identity {
            chassis_mac: [2, 0, 0, 0, 1, 1],
            mac: [2, 0, 0, 0, 1, 1],
            port: "gpu0".into(),
            system_name: "host1".into(),
            port_description: "gpu0".into(),
            bridge: false,
        };
        let mut a = PortAgent::new(Timing::default(), id, n.dcb.clone(), 0);
        if let Some(p) = peer {
            let sid = Identity {
                chassis_mac: [2, 0, 0, 0, 9, 9],
                mac: [2, 0, 0, 0, 9, 9],
                port: "eth0".into(),
                system_name: "rail1".into(),
                port_description: String::new(),
                bridge: true,
            };
            let sw = PortAgent::new(Timing::default(), sid, p, 0);
            a.on_frame(&sw.frame(120), 0);
        }
        a.report(0)
    }

    #[test]
    fn without_a_peer_the_nic_keeps_its_classes() {
        assert_eq!(classes_from(&nic(), &report_with_peer(None)), NicClasses::default());
    }

    #[test]
    fn a_willing_nic_takes_the_switch_priorities() {
        // The switch runs RoCEv2 lossless on priority 4 with DSCP 26, CNPs at DSCP 48 → 6.
        let mut sw = Dcb::nic(false, 1 << 4, 26, 4, 48, 6);
        sw.willing = false;
        let c = classes_from(&nic(), &report_with_peer(Some(sw)));
        assert_eq!(
            c,
            NicClasses { data_dscp: 26, data_priority: 4, cnp_dscp: 48, cnp_priority: 6, pfc_enable: 1 << 4 }
        );
    }

    #[test]
    fn config_round_trips() {
        let c = AgentConfig {
            host: "host1".into(),
            netns: Some("rf-x-host1".into()),
            listen: "127.0.0.1:9500".parse().unwrap(),
            lldp: LldpConfig::default(),
            nics: vec![nic()],
        };
        let s = serde_json::to_string(&c).unwrap();
        assert_eq!(serde_json::from_str::<AgentConfig>(&s).unwrap(), c);
    }
}
