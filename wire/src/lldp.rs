//! LLDP, IEEE Std 802.1AB-2016 (Station and Media Access Control Connectivity Discovery):
//! the TLV format (clause 8.4), the mandatory and basic optional TLVs (8.5), organizationally
//! specific TLVs (8.6), and LLDPDU framing (dst 01:80:c2:00:00:0e, EtherType 0x88cc).
//!
//! ```text
//!  0               1               2
//!  0 1 2 3 4 5 6 7 0 1 2 3 4 5 6 7 0 ...
//! +-------------+-----------------+----------------------------+
//! | type (7 b)  | length (9 bits) | value (0..=511 octets)     |
//! +-------------+-----------------+----------------------------+
//!
//! LLDPDU = Chassis ID (1) | Port ID (2) | TTL (3) | optional TLVs ... | End (0, length 0)
//!
//! Chassis ID / Port ID value: | subtype (1) | ID (1..=255) |
//! Management address (8):     | addr len (1) | addr subtype | addr | if subtype | if number (4)
//!                             | OID len (1) | OID |
//! Organizationally specific:  | OUI (3) | subtype (1) | information (0..=507) |
//! ```
//!
//! IEEE 802.1Qaz DCBX TLVs (OUI 00-80-c2, subtypes 9..=12) and CEE DCBX (OUI 00-1b-21,
//! subtype 2) are decoded into [`Tlv::Dcbx`] by [`crate::dcbx`]; every other TLV is kept
//! ([`Tlv::OrgSpecific`], [`Tlv::Unknown`]).
//!
//! Text fields (descriptions, names, textual IDs) are `String`s; octets that are not UTF-8
//! are replaced with U+FFFD when parsing.

use core::fmt;
use std::net::{Ipv4Addr, Ipv6Addr};

use crate::dcbx::{self, DcbxTlv};
use crate::ethernet::{self, EthernetRepr, MacAddr, ETHERTYPE_LLDP};
use crate::hex::{hex_bytes, Hex};

/// Largest TLV value length (9-bit length field).
pub const MAX_VALUE_LEN: usize = 0x1ff;
/// TLV header length.
pub const HEADER_LEN: usize = 2;

mod field {
    use core::ops::Range;
    pub const HEADER: Range<usize> = 0..2;
    pub const TYPE_SHIFT: u16 = 9;
    pub const LEN_MASK: u16 = 0x01ff;
    pub const VALUE: usize = 2;
    // Organizationally specific TLV value.
    pub const ORG_OUI: Range<usize> = 0..3;
    pub const ORG_SUBTYPE: usize = 3;
    pub const ORG_INFO: usize = 4;
}

/// Errors decoding or encoding LLDP.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// Fewer than two bytes where a TLV header should be.
    #[error("LLDP TLV header truncated at offset {offset}: {len} byte(s) left")]
    HeaderTruncated {
        /// Offset of the TLV within the LLDPDU.
        offset: usize,
        /// Bytes left.
        len: usize,
    },
    /// The TLV length field runs past the end of the LLDPDU.
    #[error("LLDP TLV type {tlv_type} at offset {offset} declares {declared} value bytes, only {available} present")]
    ValueTruncated {
        /// TLV type.
        tlv_type: u8,
        /// Offset of the TLV.
        offset: usize,
        /// Declared value length.
        declared: usize,
        /// Bytes present.
        available: usize,
    },
    /// A TLV whose value length is not allowed for its type.
    #[error("LLDP {tlv} TLV has invalid length {len}: expected {expected}")]
    BadLength {
        /// TLV name.
        tlv: &'static str,
        /// Value length found.
        len: usize,
        /// What the standard allows.
        expected: &'static str,
    },
    /// A mandatory TLV is missing or out of order.
    #[error("LLDPDU must start with Chassis ID, Port ID, TTL: TLV #{index} is {found}, expected {expected}")]
    MissingMandatory {
        /// 0-based TLV index.
        index: usize,
        /// What was found ("end of data" if nothing).
        found: String,
        /// What was expected.
        expected: &'static str,
    },
    /// A value too long for its length field.
    #[error("LLDP {tlv} value of {len} bytes exceeds the maximum {max}")]
    TooLong {
        /// TLV or field name.
        tlv: &'static str,
        /// Length requested.
        len: usize,
        /// Maximum.
        max: usize,
    },
    /// The output buffer is too small.
    #[error("buffer too small: need {need} bytes, have {have}")]
    BufferTooSmall {
        /// Bytes needed.
        need: usize,
        /// Bytes available.
        have: usize,
    },
    /// A second Chassis ID, Port ID or TTL TLV (IEEE 802.1AB-2016 8.2: exactly one of each).
    #[error("LLDPDU has a second {tlv} TLV (TLV #{index}); 802.1AB allows exactly one")]
    DuplicateMandatory {
        /// 0-based TLV index.
        index: usize,
        /// Which TLV.
        tlv: &'static str,
    },
    /// A TLV type that does not fit the 7-bit type field (emit only: a parsed type always fits).
    #[error("LLDP TLV type {tlv_type} does not fit the 7-bit type field: expected 0..=127")]
    BadType {
        /// The type.
        tlv_type: u8,
    },
    /// A DCBX TLV inside the LLDPDU is malformed.
    #[error(transparent)]
    Dcbx(#[from] dcbx::Error),
    /// Ethernet framing problem.
    #[error(transparent)]
    Ethernet(#[from] ethernet::Error),
}

/// TLV type (7 bits). Unknown values are kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
pub enum TlvType {
    /// 0, End of LLDPDU.
    End,
    /// 1, Chassis ID.
    ChassisId,
    /// 2, Port ID.
    PortId,
    /// 3, Time To Live.
    Ttl,
    /// 4, Port Description.
    PortDescription,
    /// 5, System Name.
    SystemName,
    /// 6, System Description.
    SystemDescription,
    /// 7, System Capabilities.
    SystemCapabilities,
    /// 8, Management Address.
    ManagementAddress,
    /// 127, Organizationally Specific.
    OrgSpecific,
    /// Reserved values 9..=126.
    Unknown(u8),
}

impl From<u8> for TlvType {
    fn from(v: u8) -> Self {
        match v {
            0 => TlvType::End,
            1 => TlvType::ChassisId,
            2 => TlvType::PortId,
            3 => TlvType::Ttl,
            4 => TlvType::PortDescription,
            5 => TlvType::SystemName,
            6 => TlvType::SystemDescription,
            7 => TlvType::SystemCapabilities,
            8 => TlvType::ManagementAddress,
            127 => TlvType::OrgSpecific,
            t => TlvType::Unknown(t),
        }
    }
}

impl From<TlvType> for u8 {
    fn from(t: TlvType) -> u8 {
        match t {
            TlvType::End => 0,
            TlvType::ChassisId => 1,
            TlvType::PortId => 2,
            TlvType::Ttl => 3,
            TlvType::PortDescription => 4,
            TlvType::SystemName => 5,
            TlvType::SystemDescription => 6,
            TlvType::SystemCapabilities => 7,
            TlvType::ManagementAddress => 8,
            TlvType::OrgSpecific => 127,
            TlvType::Unknown(t) => t & 0x7f,
        }
    }
}

impl fmt::Display for TlvType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = match self {
            TlvType::End => "End of LLDPDU",
            TlvType::ChassisId => "Chassis ID",
            TlvType::PortId => "Port ID",
            TlvType::Ttl => "Time To Live",
            TlvType::PortDescription => "Port Description",
            TlvType::SystemName => "System Name",
            TlvType::SystemDescription => "System Description",
            TlvType::SystemCapabilities => "System Capabilities",
            TlvType::ManagementAddress => "Management Address",
            TlvType::OrgSpecific => "Organizationally Specific",
            TlvType::Unknown(t) => return write!(f, "TLV type {t}"),
        };
        f.write_str(s)
    }
}

/// Zero-copy view of one TLV at the start of a buffer (the buffer may continue after it).
#[derive(Debug, Clone)]
pub struct TlvPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> TlvPacket<T> {
    /// Wraps without checking.
    pub const fn new_unchecked(buffer: T) -> Self {
        TlvPacket { buffer }
    }

    /// Wraps after [`TlvPacket::check_len`].
    pub fn new_checked(buffer: T) -> Result<Self, Error> {
        let p = Self::new_unchecked(buffer);
        p.check_len()?;
        Ok(p)
    }

    /// Checks the header and the declared value fit in the buffer.
    pub fn check_len(&self) -> Result<(), Error> {
        let b = self.buffer.as_ref();
        if b.len() < HEADER_LEN {
            return Err(Error::HeaderTruncated { offset: 0, len: b.len() });
        }
        let need = HEADER_LEN + self.value_len();
        if b.len() < need {
            return Err(Error::ValueTruncated {
                tlv_type: self.raw_type(),
                offset: 0,
                declared: self.value_len(),
                available: b.len() - HEADER_LEN,
            });
        }
        Ok(())
    }

    fn header(&self) -> u16 {
        let b = &self.buffer.as_ref()[field::HEADER];
        u16::from_be_bytes([b[0], b[1]])
    }

    /// The 7-bit type.
    pub fn raw_type(&self) -> u8 {
        (self.header() >> field::TYPE_SHIFT) as u8
    }

    /// The decoded type.
    pub fn tlv_type(&self) -> TlvType {
        TlvType::from(self.raw_type())
    }

    /// The 9-bit value length.
    pub fn value_len(&self) -> usize {
        usize::from(self.header() & field::LEN_MASK)
    }

    /// Header plus value length.
    pub fn total_len(&self) -> usize {
        HEADER_LEN + self.value_len()
    }

    /// The value bytes.
    pub fn value(&self) -> &[u8] {
        &self.buffer.as_ref()[field::VALUE..self.total_len()]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> TlvPacket<T> {
    /// Writes type and length.
    pub fn set_header(&mut self, tlv_type: u8, len: usize) {
        let h = (u16::from(tlv_type & 0x7f) << field::TYPE_SHIFT) | (len as u16 & field::LEN_MASK);
        self.buffer.as_mut()[field::HEADER].copy_from_slice(&h.to_be_bytes());
    }

    /// Mutable value bytes (per the current length field).
    pub fn value_mut(&mut self) -> &mut [u8] {
        let end = self.total_len();
        &mut self.buffer.as_mut()[field::VALUE..end]
    }
}

/// IANA address family numbers used by network-address IDs and management addresses
/// (IEEE 802.1AB 8.5.2.3 referencing RFC 3232 / IANA "Address Family Numbers").
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "family", content = "address", rename_all = "snake_case")]
pub enum NetworkAddress {
    /// Family 1.
    Ipv4(Ipv4Addr),
    /// Family 2.
    Ipv6(Ipv6Addr),
    /// Any other family; the address octets are kept.
    Other {
        /// IANA family number.
        family: u8,
        /// Address octets.
        #[serde(serialize_with = "hex_bytes")]
        address: Vec<u8>,
    },
}

impl NetworkAddress {
    fn parse(b: &[u8], tlv: &'static str) -> Result<NetworkAddress, Error> {
        let (&family, addr) =
            b.split_first().ok_or(Error::BadLength { tlv, len: 0, expected: "at least an address family octet" })?;
        Ok(match family {
            1 => {
                let a: [u8; 4] = addr.try_into().map_err(|_| Error::BadLength {
                    tlv,
                    len: addr.len(),
                    expected: "4 octets of IPv4 address",
                })?;
                NetworkAddress::Ipv4(Ipv4Addr::from(a))
            }
            2 => {
                let a: [u8; 16] = addr.try_into().map_err(|_| Error::BadLength {
                    tlv,
                    len: addr.len(),
                    expected: "16 octets of IPv6 address",
                })?;
                NetworkAddress::Ipv6(Ipv6Addr::from(a))
            }
            family => NetworkAddress::Other { family, address: addr.to_vec() },
        })
    }

    /// Family octet plus address octets.
    fn len(&self) -> usize {
        1 + match self {
            NetworkAddress::Ipv4(_) => 4,
            NetworkAddress::Ipv6(_) => 16,
            NetworkAddress::Other { address, .. } => address.len(),
        }
    }

    fn emit(&self, b: &mut [u8]) {
        match self {
            NetworkAddress::Ipv4(a) => {
                b[0] = 1;
                b[1..5].copy_from_slice(&a.octets());
            }
            NetworkAddress::Ipv6(a) => {
                b[0] = 2;
                b[1..17].copy_from_slice(&a.octets());
            }
            NetworkAddress::Other { family, address } => {
                b[0] = *family;
                b[1..1 + address.len()].copy_from_slice(address);
            }
        }
    }
}

impl fmt::Display for NetworkAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NetworkAddress::Ipv4(a) => write!(f, "{a}"),
            NetworkAddress::Ipv6(a) => write!(f, "{a}"),
            NetworkAddress::Other { family, address } => {
                write!(f, "family {family} {}", Hex(address))
            }
        }
    }
}

/// Chassis ID TLV (type 1, IEEE 802.1AB 8.5.2), by subtype.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "subtype", content = "id", rename_all = "snake_case")]
pub enum ChassisId {
    /// 1, entPhysicalAlias of a chassis component.
    ChassisComponent(String),
    /// 2, ifAlias.
    InterfaceAlias(String),
    /// 3, entPhysicalAlias of a port or backplane component.
    PortComponent(String),
    /// 4, MAC address.
    MacAddress(MacAddr),
    /// 5, network address.
    NetworkAddress(NetworkAddress),
    /// 6, ifName.
    InterfaceName(String),
    /// 7, locally assigned.
    LocallyAssigned(String),
    /// Reserved subtypes; the ID octets are kept.
    Unknown {
        /// Subtype.
        subtype: u8,
        /// ID octets.
        #[serde(serialize_with = "hex_bytes")]
        id: Vec<u8>,
    },
}

/// Port ID TLV (type 2, IEEE 802.1AB 8.5.3), by subtype.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "subtype", content = "id", rename_all = "snake_case")]
pub enum PortId {
    /// 1, ifAlias.
    InterfaceAlias(String),
    /// 2, entPhysicalAlias of a port component.
    PortComponent(String),
    /// 3, MAC address.
    MacAddress(MacAddr),
    /// 4, network address.
    NetworkAddress(NetworkAddress),
    /// 5, ifName.
    InterfaceName(String),
    /// 6, agent circuit ID (RFC 3046).
    AgentCircuitId(String),
    /// 7, locally assigned.
    LocallyAssigned(String),
    /// Reserved subtypes; the ID octets are kept.
    Unknown {
        /// Subtype.
        subtype: u8,
        /// ID octets.
        #[serde(serialize_with = "hex_bytes")]
        id: Vec<u8>,
    },
}

/// The textual, MAC, network-address or raw body shared by Chassis ID and Port ID.
enum IdBody<'a> {
    Text(&'a str),
    Mac(&'a MacAddr),
    Net(&'a NetworkAddress),
    Raw(&'a [u8]),
}

impl IdBody<'_> {
    fn len(&self) -> usize {
        match self {
            IdBody::Text(s) => s.len(),
            IdBody::Mac(_) => 6,
            IdBody::Net(n) => n.len(),
            IdBody::Raw(r) => r.len(),
        }
    }
    fn emit(&self, b: &mut [u8]) {
        match self {
            IdBody::Text(s) => b.copy_from_slice(s.as_bytes()),
            IdBody::Mac(m) => b.copy_from_slice(&m.0),
            IdBody::Net(n) => n.emit(b),
            IdBody::Raw(r) => b.copy_from_slice(r),
        }
    }
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn parse_id_mac(b: &[u8], tlv: &'static str) -> Result<MacAddr, Error> {
    if b.len() != 6 {
        return Err(Error::BadLength { tlv, len: b.len(), expected: "6 octets of MAC address" });
    }
    Ok(MacAddr::from_slice(b).unwrap_or_default())
}

fn split_id<'a>(v: &'a [u8], tlv: &'static str) -> Result<(u8, &'a [u8]), Error> {
    if v.len() < 2 || v.len() > 256 {
        return Err(Error::BadLength { tlv, len: v.len(), expected: "2..=256 (subtype + 1..=255 ID octets)" });
    }
    Ok((v[0], &v[1..]))
}

impl ChassisId {
    fn parse(v: &[u8]) -> Result<Self, Error> {
        let (st, id) = split_id(v, "Chassis ID")?;
        Ok(match st {
            1 => ChassisId::ChassisComponent(text(id)),
            2 => ChassisId::InterfaceAlias(text(id)),
            3 => ChassisId::PortComponent(text(id)),
            4 => ChassisId::MacAddress(parse_id_mac(id, "Chassis ID")?),
            5 => ChassisId::NetworkAddress(NetworkAddress::parse(id, "Chassis ID")?),
            6 => ChassisId::InterfaceName(text(id)),
            7 => ChassisId::LocallyAssigned(text(id)),
            subtype => ChassisId::Unknown { subtype, id: id.to_vec() },
        })
    }

    /// The subtype number.
    pub fn subtype(&self) -> u8 {
        self.parts().0
    }

    fn parts(&self) -> (u8, IdBody<'_>) {
        match self {
            ChassisId::ChassisComponent(s) => (1, IdBody::Text(s)),
            ChassisId::InterfaceAlias(s) => (2, IdBody::Text(s)),
            ChassisId::PortComponent(s) => (3, IdBody::Text(s)),
            ChassisId::MacAddress(m) => (4, IdBody::Mac(m)),
            ChassisId::NetworkAddress(n) => (5, IdBody::Net(n)),
            ChassisId::InterfaceName(s) => (6, IdBody::Text(s)),
            ChassisId::LocallyAssigned(s) => (7, IdBody::Text(s)),
            ChassisId::Unknown { subtype, id } => (*subtype, IdBody::Raw(id)),
        }
    }
}

impl PortId {
    fn parse(v: &[u8]) -> Result<Self, Error> {
        let (st, id) = split_id(v, "Port ID")?;
        Ok(match st {
            1 => PortId::InterfaceAlias(text(id)),
            2 => PortId::PortComponent(text(id)),
            3 => PortId::MacAddress(parse_id_mac(id, "Port ID")?),
            4 => PortId::NetworkAddress(NetworkAddress::parse(id, "Port ID")?),
            5 => PortId::InterfaceName(text(id)),
            6 => PortId::AgentCircuitId(text(id)),
            7 => PortId::LocallyAssigned(text(id)),
            subtype => PortId::Unknown { subtype, id: id.to_vec() },
        })
    }

    /// The subtype number.
    pub fn subtype(&self) -> u8 {
        self.parts().0
    }

    fn parts(&self) -> (u8, IdBody<'_>) {
        match self {
            PortId::InterfaceAlias(s) => (1, IdBody::Text(s)),
            PortId::PortComponent(s) => (2, IdBody::Text(s)),
            PortId::MacAddress(m) => (3, IdBody::Mac(m)),
            PortId::NetworkAddress(n) => (4, IdBody::Net(n)),
            PortId::InterfaceName(s) => (5, IdBody::Text(s)),
            PortId::AgentCircuitId(s) => (6, IdBody::Text(s)),
            PortId::LocallyAssigned(s) => (7, IdBody::Text(s)),
            PortId::Unknown { subtype, id } => (*subtype, IdBody::Raw(id)),
        }
    }
}

fn fmt_id(f: &mut fmt::Formatter<'_>, name: &str, body: IdBody<'_>) -> fmt::Result {
    match body {
        IdBody::Text(s) => write!(f, "{name} {s:?}"),
        IdBody::Mac(m) => write!(f, "{name} {m}"),
        IdBody::Net(n) => write!(f, "{name} {n}"),
        IdBody::Raw(r) => write!(f, "{name} {}", Hex(r)),
    }
}

impl fmt::Display for ChassisId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = match self {
            ChassisId::ChassisComponent(_) => "chassis-component",
            ChassisId::InterfaceAlias(_) => "ifalias",
            ChassisId::PortComponent(_) => "port-component",
            ChassisId::MacAddress(_) => "mac",
            ChassisId::NetworkAddress(_) => "network-address",
            ChassisId::InterfaceName(_) => "ifname",
            ChassisId::LocallyAssigned(_) => "local",
            ChassisId::Unknown { subtype, .. } => return fmt_id(f, &format!("subtype-{subtype}"), self.parts().1),
        };
        fmt_id(f, name, self.parts().1)
    }
}

impl fmt::Display for PortId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = match self {
            PortId::InterfaceAlias(_) => "ifalias",
            PortId::PortComponent(_) => "port-component",
            PortId::MacAddress(_) => "mac",
            PortId::NetworkAddress(_) => "network-address",
            PortId::InterfaceName(_) => "ifname",
            PortId::AgentCircuitId(_) => "agent-circuit-id",
            PortId::LocallyAssigned(_) => "local",
            PortId::Unknown { subtype, .. } => return fmt_id(f, &format!("subtype-{subtype}"), self.parts().1),
        };
        fmt_id(f, name, self.parts().1)
    }
}

/// System Capabilities TLV (type 7, IEEE 802.1AB 8.5.8): two 16-bit capability bitmaps.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
pub struct SystemCapabilities {
    /// Capabilities the system has.
    pub capabilities: u16,
    /// Capabilities that are enabled.
    pub enabled: u16,
}

impl SystemCapabilities {
    /// Other.
    pub const OTHER: u16 = 1 << 0;
    /// Repeater.
    pub const REPEATER: u16 = 1 << 1;
    /// MAC Bridge component.
    pub const BRIDGE: u16 = 1 << 2;
    /// WLAN access point.
    pub const WLAN_AP: u16 = 1 << 3;
    /// Router.
    pub const ROUTER: u16 = 1 << 4;
    /// Telephone.
    pub const TELEPHONE: u16 = 1 << 5;
    /// DOCSIS cable device.
    pub const DOCSIS: u16 = 1 << 6;
    /// Station only.
    pub const STATION_ONLY: u16 = 1 << 7;
    /// C-VLAN component.
    pub const C_VLAN: u16 = 1 << 8;
    /// S-VLAN component.
    pub const S_VLAN: u16 = 1 << 9;
    /// Two-port MAC relay.
    pub const TPMR: u16 = 1 << 10;
}

/// Management Address TLV (type 8, IEEE 802.1AB 8.5.9).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ManagementAddress {
    /// The address (family + octets, 1..=31 octets).
    pub address: NetworkAddress,
    /// Interface numbering subtype: 1 unknown, 2 ifIndex, 3 system port number.
    pub interface_subtype: u8,
    /// Interface number.
    pub interface_number: u32,
    /// Object identifier (BER-encoded), 0..=128 octets.
    #[serde(serialize_with = "hex_bytes")]
    pub oid: Vec<u8>,
}

impl ManagementAddress {
    fn parse(v: &[u8]) -> Result<Self, Error> {
        const T: &str = "Management Address";
        let bad = |expected| Error::BadLength { tlv: T, len: v.len(), expected };
        let (&alen, rest) = v.split_first().ok_or(bad("9..=167"))?;
        let alen = usize::from(alen);
        if !(2..=32).contains(&alen) || rest.len() < alen + 6 {
            return Err(bad("address string length 2..=32 followed by interface and OID fields"));
        }
        let address = NetworkAddress::parse(&rest[..alen], T)?;
        let rest = &rest[alen..];
        let interface_subtype = rest[0];
        let interface_number = u32::from_be_bytes([rest[1], rest[2], rest[3], rest[4]]);
        let olen = usize::from(rest[5]);
        let oid = rest.get(6..6 + olen).ok_or(bad("an OID string length that stays within the TLV"))?;
        if olen > 128 || rest.len() != 6 + olen {
            return Err(bad("OID string length 0..=128 ending the TLV"));
        }
        Ok(ManagementAddress { address, interface_subtype, interface_number, oid: oid.to_vec() })
    }

    fn len(&self) -> usize {
        1 + self.address.len() + 1 + 4 + 1 + self.oid.len()
    }

    fn emit(&self, b: &mut [u8]) {
        let alen = self.address.len();
        b[0] = alen as u8;
        self.address.emit(&mut b[1..1 + alen]);
        let r = &mut b[1 + alen..];
        r[0] = self.interface_subtype;
        r[1..5].copy_from_slice(&self.interface_number.to_be_bytes());
        r[5] = self.oid.len() as u8;
        r[6..6 + self.oid.len()].copy_from_slice(&self.oid);
    }
}

/// Organizationally Specific TLV (type 127, IEEE 802.1AB 8.6) that is not decoded further.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct OrgSpecific {
    /// Organizationally unique identifier.
    #[serde(serialize_with = "hex_bytes")]
    pub oui: [u8; 3],
    /// Organizationally defined subtype.
    pub subtype: u8,
    /// Organizationally defined information string (0..=507 octets).
    #[serde(serialize_with = "hex_bytes")]
    pub info: Vec<u8>,
}

/// One decoded LLDP TLV.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "tlv", rename_all = "snake_case")]
pub enum Tlv {
    /// End of LLDPDU (type 0).
    End,
    /// Chassis ID (type 1).
    ChassisId {
        /// The ID.
        chassis_id: ChassisId,
    },
    /// Port ID (type 2).
    PortId {
        /// The ID.
        port_id: PortId,
    },
    /// Time To Live in seconds (type 3).
    Ttl {
        /// Seconds; 0 = remove this neighbour.
        seconds: u16,
    },
    /// Port Description (type 4).
    PortDescription {
        /// Text.
        text: String,
    },
    /// System Name (type 5).
    SystemName {
        /// Text.
        text: String,
    },
    /// System Description (type 6).
    SystemDescription {
        /// Text.
        text: String,
    },
    /// System Capabilities (type 7).
    SystemCapabilities(SystemCapabilities),
    /// Management Address (type 8).
    ManagementAddress(ManagementAddress),
    /// An IEEE 802.1Qaz or CEE DCBX TLV (type 127 with a DCBX OUI/subtype).
    Dcbx {
        /// The decoded DCBX TLV.
        dcbx: DcbxTlv,
    },
    /// Another organizationally specific TLV.
    OrgSpecific(OrgSpecific),
    /// A reserved TLV type; the value is kept.
    Unknown {
        /// Type 9..=126.
        tlv_type: u8,
        /// Value octets.
        #[serde(serialize_with = "hex_bytes")]
        value: Vec<u8>,
    },
}

fn check_text(tlv: &'static str, s: &str, max: usize) -> Result<(), Error> {
    if s.len() > max {
        return Err(Error::TooLong { tlv, len: s.len(), max });
    }
    Ok(())
}

impl Tlv {
    /// Decodes one checked TLV.
    pub fn parse<T: AsRef<[u8]>>(packet: &TlvPacket<T>) -> Result<Tlv, Error> {
        packet.check_len()?;
        let v = packet.value();
        let exact = |tlv: &'static str, n: usize, expected: &'static str| {
            if v.len() == n {
                Ok(())
            } else {
                Err(Error::BadLength { tlv, len: v.len(), expected })
            }
        };
        let max_text = |tlv: &'static str| {
            if v.len() <= 255 {
                Ok(text(v))
            } else {
                Err(Error::BadLength { tlv, len: v.len(), expected: "0..=255" })
            }
        };
        Ok(match packet.tlv_type() {
            TlvType::End => {
                exact("End of LLDPDU", 0, "0")?;
                Tlv::End
            }
            TlvType::ChassisId => Tlv::ChassisId { chassis_id: ChassisId::parse(v)? },
            TlvType::PortId => Tlv::PortId { port_id: PortId::parse(v)? },
            TlvType::Ttl => {
                exact("Time To Live", 2, "2")?;
                Tlv::Ttl { seconds: u16::from_be_bytes([v[0], v[1]]) }
            }
            TlvType::PortDescription => Tlv::PortDescription { text: max_text("Port Description")? },
            TlvType::SystemName => Tlv::SystemName { text: max_text("System Name")? },
            TlvType::SystemDescription => Tlv::SystemDescription { text: max_text("System Description")? },
            TlvType::SystemCapabilities => {
                exact("System Capabilities", 4, "4")?;
                Tlv::SystemCapabilities(SystemCapabilities {
                    capabilities: u16::from_be_bytes([v[0], v[1]]),
                    enabled: u16::from_be_bytes([v[2], v[3]]),
                })
            }
            TlvType::ManagementAddress => Tlv::ManagementAddress(ManagementAddress::parse(v)?),
            TlvType::OrgSpecific => {
                if v.len() < field::ORG_INFO {
                    return Err(Error::BadLength {
                        tlv: "Organizationally Specific",
                        len: v.len(),
                        expected: "at least 4 (OUI + subtype)",
                    });
                }
                let mut oui = [0u8; 3];
                oui.copy_from_slice(&v[field::ORG_OUI]);
                let subtype = v[field::ORG_SUBTYPE];
                let info = &v[field::ORG_INFO..];
                match DcbxTlv::parse(oui, subtype, info)? {
                    Some(dcbx) => Tlv::Dcbx { dcbx },
                    None => Tlv::OrgSpecific(OrgSpecific { oui, subtype, info: info.to_vec() }),
                }
            }
            TlvType::Unknown(tlv_type) => Tlv::Unknown { tlv_type, value: v.to_vec() },
        })
    }

    /// The TLV type.
    pub fn tlv_type(&self) -> TlvType {
        match self {
            Tlv::End => TlvType::End,
            Tlv::ChassisId { .. } => TlvType::ChassisId,
            Tlv::PortId { .. } => TlvType::PortId,
            Tlv::Ttl { .. } => TlvType::Ttl,
            Tlv::PortDescription { .. } => TlvType::PortDescription,
            Tlv::SystemName { .. } => TlvType::SystemName,
            Tlv::SystemDescription { .. } => TlvType::SystemDescription,
            Tlv::SystemCapabilities(_) => TlvType::SystemCapabilities,
            Tlv::ManagementAddress(_) => TlvType::ManagementAddress,
            Tlv::Dcbx { .. } | Tlv::OrgSpecific(_) => TlvType::OrgSpecific,
            Tlv::Unknown { tlv_type, .. } => TlvType::from(*tlv_type),
        }
    }

    /// Length of the value [`Tlv::emit`] writes.
    pub fn value_len(&self) -> usize {
        match self {
            Tlv::End => 0,
            Tlv::ChassisId { chassis_id } => 1 + chassis_id.parts().1.len(),
            Tlv::PortId { port_id } => 1 + port_id.parts().1.len(),
            Tlv::Ttl { .. } => 2,
            Tlv::PortDescription { text } | Tlv::SystemName { text } | Tlv::SystemDescription { text } => text.len(),
            Tlv::SystemCapabilities(_) => 4,
            Tlv::ManagementAddress(m) => m.len(),
            Tlv::Dcbx { dcbx } => field::ORG_INFO + dcbx.info_len(),
            Tlv::OrgSpecific(o) => field::ORG_INFO + o.info.len(),
            Tlv::Unknown { value, .. } => value.len(),
        }
    }

    /// Header plus value length.
    pub fn buffer_len(&self) -> usize {
        HEADER_LEN + self.value_len()
    }

    /// Checks every length limit of the standard that the types do not already enforce.
    pub fn validate(&self) -> Result<(), Error> {
        let len = self.value_len();
        if len > MAX_VALUE_LEN {
            return Err(Error::TooLong { tlv: "TLV value", len, max: MAX_VALUE_LEN });
        }
        match self {
            Tlv::ChassisId { .. } | Tlv::PortId { .. } if !(2..=256).contains(&len) => {
                Err(Error::BadLength { tlv: "Chassis/Port ID", len, expected: "2..=256" })
            }
            Tlv::PortDescription { text } => check_text("Port Description", text, 255),
            Tlv::SystemName { text } => check_text("System Name", text, 255),
            Tlv::SystemDescription { text } => check_text("System Description", text, 255),
            Tlv::ManagementAddress(m) if !(2..=32).contains(&m.address.len()) || m.oid.len() > 128 => {
                Err(Error::BadLength { tlv: "Management Address", len, expected: "address 1..=31 octets, OID <= 128" })
            }
            Tlv::Unknown { tlv_type, .. } if *tlv_type > 0x7f => Err(Error::BadType { tlv_type: *tlv_type }),
            _ => Ok(()),
        }
    }

    /// Writes header and value at the start of `buf`; returns the bytes written.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize, Error> {
        self.validate()?;
        let len = self.value_len();
        let need = HEADER_LEN + len;
        if buf.len() < need {
            return Err(Error::BufferTooSmall { need, have: buf.len() });
        }
        let mut p = TlvPacket::new_unchecked(&mut buf[..need]);
        p.set_header(u8::from(self.tlv_type()), len);
        let v = p.value_mut();
        match self {
            Tlv::End => {}
            Tlv::ChassisId { chassis_id } => {
                let (st, body) = chassis_id.parts();
                v[0] = st;
                body.emit(&mut v[1..]);
            }
            Tlv::PortId { port_id } => {
                let (st, body) = port_id.parts();
                v[0] = st;
                body.emit(&mut v[1..]);
            }
            Tlv::Ttl { seconds } => v.copy_from_slice(&seconds.to_be_bytes()),
            Tlv::PortDescription { text } | Tlv::SystemName { text } | Tlv::SystemDescription { text } => {
                v.copy_from_slice(text.as_bytes())
            }
            Tlv::SystemCapabilities(c) => {
                v[0..2].copy_from_slice(&c.capabilities.to_be_bytes());
                v[2..4].copy_from_slice(&c.enabled.to_be_bytes());
            }
            Tlv::ManagementAddress(m) => m.emit(v),
            Tlv::Dcbx { dcbx } => {
                v[field::ORG_OUI].copy_from_slice(&dcbx.oui());
                v[field::ORG_SUBTYPE] = dcbx.subtype();
                dcbx.emit_info(&mut v[field::ORG_INFO..])?;
            }
            Tlv::OrgSpecific(o) => {
                v[field::ORG_OUI].copy_from_slice(&o.oui);
                v[field::ORG_SUBTYPE] = o.subtype;
                v[field::ORG_INFO..].copy_from_slice(&o.info);
            }
            Tlv::Unknown { value, .. } => v.copy_from_slice(value),
        }
        Ok(need)
    }
}

impl fmt::Display for Tlv {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Tlv::End => f.write_str("End of LLDPDU"),
            Tlv::ChassisId { chassis_id } => write!(f, "Chassis ID: {chassis_id}"),
            Tlv::PortId { port_id } => write!(f, "Port ID: {port_id}"),
            Tlv::Ttl { seconds } => write!(f, "TTL: {seconds} s"),
            Tlv::PortDescription { text } => write!(f, "Port Description: {text:?}"),
            Tlv::SystemName { text } => write!(f, "System Name: {text:?}"),
            Tlv::SystemDescription { text } => write!(f, "System Description: {text:?}"),
            Tlv::SystemCapabilities(c) => {
                write!(f, "System Capabilities: {:#06x} enabled {:#06x}", c.capabilities, c.enabled)
            }
            Tlv::ManagementAddress(m) => write!(
                f,
                "Management Address: {} if-subtype {} if {} oid {}",
                m.address,
                m.interface_subtype,
                m.interface_number,
                Hex(&m.oid)
            ),
            Tlv::Dcbx { dcbx } => dcbx.fmt(f),
            Tlv::OrgSpecific(o) => write!(
                f,
                "Org Specific: OUI {:02x}-{:02x}-{:02x} subtype {} info {}",
                o.oui[0],
                o.oui[1],
                o.oui[2],
                o.subtype,
                Hex(&o.info)
            ),
            Tlv::Unknown { tlv_type, value } => write!(f, "TLV type {tlv_type}: {}", Hex(value)),
        }
    }
}

/// Iterator over the raw TLVs of an LLDPDU. Stops after End, at the end of the data, or after
/// yielding the first error.
#[derive(Debug, Clone)]
pub struct RawTlvs<'a> {
    buf: &'a [u8],
    offset: usize,
    done: bool,
}

impl<'a> RawTlvs<'a> {
    /// Iterates over the TLVs in `lldpdu` (the Ethernet payload).
    pub fn new(lldpdu: &'a [u8]) -> Self {
        RawTlvs { buf: lldpdu, offset: 0, done: false }
    }

    /// Offset of the next TLV within the LLDPDU.
    pub fn offset(&self) -> usize {
        self.offset
    }
}

impl<'a> Iterator for RawTlvs<'a> {
    type Item = Result<TlvPacket<&'a [u8]>, Error>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        let rest = &self.buf[self.offset..];
        if rest.is_empty() {
            self.done = true;
            return None;
        }
        match TlvPacket::new_checked(rest) {
            Ok(p) => {
                let p = TlvPacket::new_unchecked(&rest[..p.total_len()]);
                self.offset += p.total_len();
                if p.tlv_type() == TlvType::End {
                    self.done = true;
                }
                Some(Ok(p))
            }
            Err(e) => {
                self.done = true;
                Some(Err(match e {
                    Error::HeaderTruncated { len, .. } => Error::HeaderTruncated { offset: self.offset, len },
                    Error::ValueTruncated { tlv_type, declared, available, .. } => {
                        Error::ValueTruncated { tlv_type, offset: self.offset, declared, available }
                    }
                    e => e,
                }))
            }
        }
    }
}

/// Iterator decoding the TLVs of an LLDPDU into [`Tlv`]s; keeps unknown TLVs, stops after
/// End, at the end of the data, or after the first error.
#[derive(Debug, Clone)]
pub struct Tlvs<'a> {
    raw: RawTlvs<'a>,
}

impl<'a> Tlvs<'a> {
    /// Iterates over the TLVs in `lldpdu` (the Ethernet payload).
    pub fn new(lldpdu: &'a [u8]) -> Self {
        Tlvs { raw: RawTlvs::new(lldpdu) }
    }
}

impl Iterator for Tlvs<'_> {
    type Item = Result<Tlv, Error>;

    fn next(&mut self) -> Option<Self::Item> {
        let r = self.raw.next()?.and_then(|p| Tlv::parse(&p));
        if r.is_err() {
            self.raw.done = true;
        }
        Some(r)
    }
}

/// A Chassis ID, Port ID or TTL TLV after the first three is an error.
fn check_not_mandatory(t: &Tlv, index: usize) -> Result<(), Error> {
    let tlv = match t {
        Tlv::ChassisId { .. } => "Chassis ID",
        Tlv::PortId { .. } => "Port ID",
        Tlv::Ttl { .. } => "Time To Live",
        _ => return Ok(()),
    };
    Err(Error::DuplicateMandatory { index, tlv })
}

/// A whole LLDPDU: the three mandatory TLVs, then the optional ones. End is implicit.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct LldpduRepr {
    /// Chassis ID.
    pub chassis_id: ChassisId,
    /// Port ID.
    pub port_id: PortId,
    /// Time to live in seconds.
    pub ttl: u16,
    /// Optional TLVs in order (no End).
    pub tlvs: Vec<Tlv>,
}

impl LldpduRepr {
    /// Decodes an LLDPDU (Ethernet payload; trailing padding after End is ignored). The End
    /// TLV may be missing if the TLVs fill the buffer exactly.
    pub fn parse(lldpdu: &[u8]) -> Result<LldpduRepr, Error> {
        let mut it = Tlvs::new(lldpdu);
        let mut next = |index: usize, expected: &'static str| -> Result<Tlv, Error> {
            match it.next() {
                Some(Ok(t)) => Ok(t),
                Some(Err(e)) => Err(e),
                None => Err(Error::MissingMandatory { index, found: "end of data".into(), expected }),
            }
        };
        let chassis_id = match next(0, "Chassis ID")? {
            Tlv::ChassisId { chassis_id } => chassis_id,
            t => {
                return Err(Error::MissingMandatory {
                    index: 0,
                    found: t.tlv_type().to_string(),
                    expected: "Chassis ID",
                })
            }
        };
        let port_id = match next(1, "Port ID")? {
            Tlv::PortId { port_id } => port_id,
            t => {
                return Err(Error::MissingMandatory { index: 1, found: t.tlv_type().to_string(), expected: "Port ID" })
            }
        };
        let ttl = match next(2, "Time To Live")? {
            Tlv::Ttl { seconds } => seconds,
            t => {
                return Err(Error::MissingMandatory {
                    index: 2,
                    found: t.tlv_type().to_string(),
                    expected: "Time To Live",
                })
            }
        };
        let mut tlvs = Vec::new();
        for (i, t) in it.enumerate() {
            match t? {
                Tlv::End => break,
                t => {
                    check_not_mandatory(&t, i + 3)?;
                    tlvs.push(t)
                }
            }
        }
        Ok(LldpduRepr { chassis_id, port_id, ttl, tlvs })
    }

    /// Decodes an LLDPDU as an LLDP agent's receive side does (IEEE 802.1AB-2016 9.2.7.7.2):
    /// the LLDPDU is discarded (`Err`) when a TLV runs past the end of the data, the mandatory
    /// TLVs are missing, out of order, malformed or repeated, or End has a length; an optional
    /// TLV whose contents do not decode (e.g. a DCBX PFC TLV with a short information string)
    /// is discarded alone, and its error is returned next to the LLDPDU
    /// (statsTLVsDiscardedTotal).
    pub fn parse_discarding(lldpdu: &[u8]) -> Result<(LldpduRepr, Vec<Error>), Error> {
        let mut raw = RawTlvs::new(lldpdu);
        // The three mandatory TLVs, strictly.
        let mut mandatory = Vec::with_capacity(3);
        for (index, expected) in ["Chassis ID", "Port ID", "Time To Live"].into_iter().enumerate() {
            let p = match raw.next() {
                Some(p) => p?,
                None => return Err(Error::MissingMandatory { index, found: "end of data".into(), expected }),
            };
            mandatory.push(Tlv::parse(&p)?);
        }
        let head = mandatory.iter().map(|t| t.tlv_type().to_string()).collect::<Vec<_>>();
        let mut m = mandatory.into_iter();
        let (Some(Tlv::ChassisId { chassis_id }), Some(Tlv::PortId { port_id }), Some(Tlv::Ttl { seconds: ttl })) =
            (m.next(), m.next(), m.next())
        else {
            let (index, expected) = match head.as_slice() {
                [a, ..] if a != "Chassis ID" => (0, "Chassis ID"),
                [_, b, ..] if b != "Port ID" => (1, "Port ID"),
                _ => (2, "Time To Live"),
            };
            return Err(Error::MissingMandatory { index, found: head[index].clone(), expected });
        };
        let mut tlvs = Vec::new();
        let mut discarded = Vec::new();
        for (i, p) in raw.enumerate() {
            let p = p?;
            match Tlv::parse(&p) {
                Ok(Tlv::End) => break,
                Ok(t) => {
                    check_not_mandatory(&t, i + 3)?;
                    tlvs.push(t);
                }
                // End with a length is a framing error, not a bad optional TLV.
                Err(e) if p.tlv_type() == TlvType::End => return Err(e),
                Err(e) => discarded.push(e),
            }
        }
        Ok((LldpduRepr { chassis_id, port_id, ttl, tlvs }, discarded))
    }

    fn mandatory(&self) -> [Tlv; 3] {
        [
            Tlv::ChassisId { chassis_id: self.chassis_id.clone() },
            Tlv::PortId { port_id: self.port_id.clone() },
            Tlv::Ttl { seconds: self.ttl },
        ]
    }

    /// Bytes [`LldpduRepr::emit`] writes, End TLV included.
    pub fn buffer_len(&self) -> usize {
        1 + self.chassis_id.parts().1.len()
            + HEADER_LEN
            + 1
            + self.port_id.parts().1.len()
            + HEADER_LEN
            + 2
            + HEADER_LEN
            + self.tlvs.iter().map(Tlv::buffer_len).sum::<usize>()
            + HEADER_LEN
    }

    /// Writes the LLDPDU (mandatory TLVs, optional TLVs, End); returns the bytes written.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize, Error> {
        let need = self.buffer_len();
        if buf.len() < need {
            return Err(Error::BufferTooSmall { need, have: buf.len() });
        }
        let mut off = 0;
        for t in self.mandatory().iter().chain(self.tlvs.iter()).chain(core::iter::once(&Tlv::End)) {
            off += t.emit(&mut buf[off..])?;
        }
        Ok(off)
    }

    /// Length of the complete frame [`LldpduRepr::emit_frame`] writes (padded to 60 bytes).
    pub fn frame_len(&self) -> usize {
        ethernet::padded_frame_len(self.buffer_len())
    }

    /// Writes a complete frame: dst 01:80:c2:00:00:0e, `src`, EtherType 0x88cc, LLDPDU,
    /// zero padding. Returns the frame length.
    pub fn emit_frame(&self, src: MacAddr, buf: &mut [u8]) -> Result<usize, Error> {
        let eth = EthernetRepr { dst: MacAddr::LLDP_NEAREST_BRIDGE, src, ethertype: ETHERTYPE_LLDP };
        // Validate before the closure so errors are reported, not swallowed.
        let mut res = Ok(0);
        let n = ethernet::emit_padded(buf, &eth, self.buffer_len(), |p| res = self.emit(p))?;
        res.map(|_| n)
    }

    /// Builds the complete frame into a new vector.
    pub fn to_frame(&self, src: MacAddr) -> Result<Vec<u8>, Error> {
        let mut v = vec![0u8; self.frame_len()];
        let n = self.emit_frame(src, &mut v)?;
        v.truncate(n);
        Ok(v)
    }

    /// Parses a complete Ethernet frame carrying an LLDPDU.
    pub fn parse_frame(frame: &[u8]) -> Result<(EthernetRepr, LldpduRepr), Error> {
        let (eth, payload) = EthernetRepr::parse_expect(frame, ETHERTYPE_LLDP)?;
        Ok((eth, LldpduRepr::parse(payload)?))
    }

    /// [`LldpduRepr::parse_discarding`] on a complete Ethernet frame.
    pub fn parse_frame_discarding(frame: &[u8]) -> Result<(EthernetRepr, LldpduRepr, Vec<Error>), Error> {
        let (eth, payload) = EthernetRepr::parse_expect(frame, ETHERTYPE_LLDP)?;
        let (pdu, discarded) = LldpduRepr::parse_discarding(payload)?;
        Ok((eth, pdu, discarded))
    }

    /// The DCBX TLVs of this LLDPDU.
    pub fn dcbx(&self) -> impl Iterator<Item = &DcbxTlv> {
        self.tlvs.iter().filter_map(|t| match t {
            Tlv::Dcbx { dcbx } => Some(dcbx),
            _ => None,
        })
    }
}

impl fmt::Display for LldpduRepr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "LLDP chassis {} port {} ttl {}", self.chassis_id, self.port_id, self.ttl)?;
        for t in &self.tlvs {
            write!(f, "\n  {t}")?;
        }
        Ok(())
    }
}

/// A DCBX TLV as an LLDP TLV for [`LldpduRepr::tlvs`] (type 127, OUI 00-80-C2 or CEE's 00-1B-21).
impl From<DcbxTlv> for Tlv {
    fn from(dcbx: DcbxTlv) -> Tlv {
        Tlv::Dcbx { dcbx }
    }
}
