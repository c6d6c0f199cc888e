//! InfiniBand Global Route Header (GRH), IBTA vol. 1 §8.3 "Global route header", as RoCE v1
//! carries it directly after the Ethernet header (EtherType 0x8915, IBTA Annex A16 "RDMA over
//! Converged Ethernet (RoCE)": no LRH, no VCRC; the GRH is always present).
//!
//! ```text
//!  0                   1                   2                   3
//!  0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! | IPVer |    TClass     |               Flow Label              |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |            PayLen             |    NxtHdr     |    HopLmt     |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |                                                               |
//! +                   Source GID (SGID, 128 bits)                 +
//! |                                                               |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |                                                               |
//! +                Destination GID (DGID, 128 bits)               +
//! |                                                               |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! ```
//!
//! The layout is the IPv6 header's. IPVer is 6; NxtHdr 0x1B means an IBA transport header
//! (BTH) follows; PayLen counts the bytes after the GRH up to and including the ICRC. GIDs are
//! shown as IPv6 addresses, as Wireshark and `ibv_devinfo` do.

use core::net::Ipv6Addr;

use super::{Error, Layer};

mod field {
    use core::ops::Range;
    pub const VER_TC_FLOW: Range<usize> = 0..4;
    pub const PAYLEN: Range<usize> = 4..6;
    pub const NXTHDR: usize = 6;
    pub const HOPLMT: usize = 7;
    pub const SGID: Range<usize> = 8..24;
    pub const DGID: Range<usize> = 24..40;
    pub const END: usize = 40;
}

/// Length of the GRH in bytes.
pub const LEN: usize = field::END;
/// IPVer of a GRH.
pub const IP_VERSION: u8 = 6;
/// NxtHdr value announcing an IBA transport header (BTH).
pub const NEXT_HEADER_IBA: u8 = 0x1b;

const FLOW_MASK: u32 = 0x000f_ffff;

fixed_len_packet!("GRH", Layer::Grh);

impl<T: AsRef<[u8]>> Packet<T> {
    fn word0(&self) -> u32 {
        let b = &self.buffer.as_ref()[field::VER_TC_FLOW];
        u32::from_be_bytes([b[0], b[1], b[2], b[3]])
    }
    /// IP version (6 in a conforming GRH).
    pub fn ip_version(&self) -> u8 {
        (self.word0() >> 28) as u8
    }
    /// Traffic class.
    pub fn traffic_class(&self) -> u8 {
        (self.word0() >> 20) as u8
    }
    /// Flow label (20 bits).
    pub fn flow_label(&self) -> u32 {
        self.word0() & FLOW_MASK
    }
    /// Bytes after the GRH up to and including the ICRC.
    pub fn payload_len(&self) -> u16 {
        let b = &self.buffer.as_ref()[field::PAYLEN];
        u16::from_be_bytes([b[0], b[1]])
    }
    /// Next header (0x1B: IBA transport).
    pub fn next_header(&self) -> u8 {
        self.buffer.as_ref()[field::NXTHDR]
    }
    /// Hop limit.
    pub fn hop_limit(&self) -> u8 {
        self.buffer.as_ref()[field::HOPLMT]
    }
    /// Source GID.
    pub fn sgid(&self) -> Ipv6Addr {
        let mut a = [0u8; 16];
        a.copy_from_slice(&self.buffer.as_ref()[field::SGID]);
        Ipv6Addr::from(a)
    }
    /// Destination GID.
    pub fn dgid(&self) -> Ipv6Addr {
        let mut a = [0u8; 16];
        a.copy_from_slice(&self.buffer.as_ref()[field::DGID]);
        Ipv6Addr::from(a)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Set IPVer (4 bits), TClass and the flow label (20 bits).
    pub fn set_version_class_flow(&mut self, ip_version: u8, traffic_class: u8, flow_label: u32) {
        let w = (u32::from(ip_version & 0x0f) << 28) | (u32::from(traffic_class) << 20) | (flow_label & FLOW_MASK);
        self.buffer.as_mut()[field::VER_TC_FLOW].copy_from_slice(&w.to_be_bytes());
    }
    /// Set PayLen.
    pub fn set_payload_len(&mut self, v: u16) {
        self.buffer.as_mut()[field::PAYLEN].copy_from_slice(&v.to_be_bytes());
    }
    /// Set NxtHdr.
    pub fn set_next_header(&mut self, v: u8) {
        self.buffer.as_mut()[field::NXTHDR] = v;
    }
    /// Set HopLmt.
    pub fn set_hop_limit(&mut self, v: u8) {
        self.buffer.as_mut()[field::HOPLMT] = v;
    }
    /// Set the source GID.
    pub fn set_sgid(&mut self, v: Ipv6Addr) {
        self.buffer.as_mut()[field::SGID].copy_from_slice(&v.octets());
    }
    /// Set the destination GID.
    pub fn set_dgid(&mut self, v: Ipv6Addr) {
        self.buffer.as_mut()[field::DGID].copy_from_slice(&v.octets());
    }
}

/// A high-level representation of a GRH.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Repr {
    /// 4 bits; 6 in a conforming GRH.
    pub ip_version: u8,
    pub traffic_class: u8,
    /// 20 bits; higher bits are dropped on emit.
    pub flow_label: u32,
    /// Bytes after the GRH up to and including the ICRC.
    pub payload_len: u16,
    pub next_header: u8,
    pub hop_limit: u8,
    pub sgid: Ipv6Addr,
    pub dgid: Ipv6Addr,
}

impl Repr {
    /// A GRH announcing a BTH of `payload_len` bytes (through the ICRC), hop limit 64,
    /// traffic class and flow label 0.
    pub fn new(sgid: Ipv6Addr, dgid: Ipv6Addr, payload_len: u16) -> Self {
        Repr {
            ip_version: IP_VERSION,
            traffic_class: 0,
            flow_label: 0,
            payload_len,
            next_header: NEXT_HEADER_IBA,
            hop_limit: 64,
            sgid,
            dgid,
        }
    }
    /// Parse a GRH view (any IPVer / NxtHdr; callers decide what they accept).
    pub fn parse<T: AsRef<[u8]> + ?Sized>(p: &Packet<&T>) -> Result<Self, Error> {
        p.check_len()?;
        Ok(Repr {
            ip_version: p.ip_version(),
            traffic_class: p.traffic_class(),
            flow_label: p.flow_label(),
            payload_len: p.payload_len(),
            next_header: p.next_header(),
            hop_limit: p.hop_limit(),
            sgid: p.sgid(),
            dgid: p.dgid(),
        })
    }
    /// Bytes needed to emit.
    pub const fn buffer_len(&self) -> usize {
        LEN
    }
    /// Write into a view whose length was checked.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, p: &mut Packet<T>) {
        p.set_version_class_flow(self.ip_version, self.traffic_class, self.flow_label);
        p.set_payload_len(self.payload_len);
        p.set_next_header(self.next_header);
        p.set_hop_limit(self.hop_limit);
        p.set_sgid(self.sgid);
        p.set_dgid(self.dgid);
    }
}
