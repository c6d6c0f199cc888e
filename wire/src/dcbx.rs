//! DCBX: the Data Center Bridging eXchange TLVs carried in LLDP organizationally specific TLVs.
//!
//! - IEEE Std 802.1Qaz, now IEEE Std 802.1Q-2018 clause 38 and annex D.2.9..D.2.12
//!   (OUI 00-80-c2): ETS Configuration (subtype 9), ETS Recommendation (10), PFC
//!   Configuration (11), Application Priority (12).
//! - The pre-standard "CEE" DCBX version 1.01 (OUI 00-1b-21, subtype 2), a list of sub-TLVs:
//!   Control (1), Priority Groups (2), PFC (3), Application (4).
//!
//! Layouts were checked against the Wireshark LLDP dissector (`epan/dissectors/packet-lldp.c`,
//! `dissect_ieee_802_1_tlv` and `dissect_dcbx_tlv`) and Open-LLDP's `lldp_8021qaz.c`; the
//! oracle tests decode our frames with tshark.
//!
//! ```text
//! All offsets below are within the information string, after OUI (3) and subtype (1).
//!
//! ETS Configuration (9), 21 octets       ETS Recommendation (10), 21 octets
//! +-+-+-----+-----+                      +-----------+
//! |W|C| res |MaxTC|  0  W willing,       | reserved  |  0
//! +-+-+-----+-----+     C credit-based   +-----------+
//! | prio→TC, 8×4 b |  1..5 shaper         | prio→TC   |  1..5  (prio 0 = high nibble of 1)
//! | TC bandwidth %  |  5..13              | bandwidth |  5..13
//! | TSA per TC      | 13..21              | TSA       | 13..21
//!
//! PFC Configuration (11), 2 octets       Application Priority (12), 1 + 3n octets
//! +-+-+---+-------+                      +-----------+
//! |W|M|res|PFC cap|  0  M MACsec bypass  | reserved  |  0
//! +-+-+---+-------+                      +-----+---+-----+----------------+
//! | enable bitmap |  1  bit i = prio i   |prio3|r 2|sel 3| protocol id 16 |  per entry
//! +---------------+                      +-----+---+-----+----------------+
//!
//! CEE sub-TLV: | type 7 b | length 9 b | oper version | max version | ...
//!   Control (1):   | seq no 32 | ack no 32 |
//!   Feature (2..): | E W Er reserved(5) | subtype | feature data |
//!     PG (2):   prio→PGID 8×4 b (4) | PG bandwidth % (8) | num TCs (1)
//!     PFC (3):  enable bitmap (1) | num TCs (1)
//!     App (4):  per entry: protocol id (2) | OUI upper 6 b + selector 2 b, OUI low 16 b (3)
//!               | priority bitmap (1)
//! ```

use core::fmt;

use crate::ethernet::{Priority, PrioritySet};
use crate::hex::Hex;

/// OUI of IEEE 802.1 organizationally specific TLVs.
pub const OUI_IEEE_8021: [u8; 3] = [0x00, 0x80, 0xc2];
/// OUI of CEE DCBX (Intel).
pub const OUI_CEE: [u8; 3] = [0x00, 0x1b, 0x21];
/// IEEE 802.1 subtype of ETS Configuration.
pub const SUBTYPE_ETS_CONFIGURATION: u8 = 9;
/// IEEE 802.1 subtype of ETS Recommendation.
pub const SUBTYPE_ETS_RECOMMENDATION: u8 = 10;
/// IEEE 802.1 subtype of PFC Configuration.
pub const SUBTYPE_PFC_CONFIGURATION: u8 = 11;
/// IEEE 802.1 subtype of Application Priority.
pub const SUBTYPE_APPLICATION_PRIORITY: u8 = 12;
/// CEE DCBX subtype (1 is the older CIN version, not decoded).
pub const SUBTYPE_CEE: u8 = 2;

/// Longest information string of an organizationally specific TLV (511 - OUI - subtype).
pub const MAX_INFO_LEN: usize = 507;
/// Information-string length of both ETS TLVs.
pub const ETS_LEN: usize = 21;
/// Information-string length of the PFC Configuration TLV.
pub const PFC_LEN: usize = 2;

mod field {
    use core::ops::Range;
    pub const ETS_FLAGS: usize = 0;
    pub const ETS_PRIO_TC: Range<usize> = 1..5;
    pub const ETS_BW: Range<usize> = 5..13;
    pub const ETS_TSA: Range<usize> = 13..21;
    pub const WILLING: u8 = 0x80;
    pub const ETS_CBS: u8 = 0x40;
    pub const ETS_MAX_TCS: u8 = 0x07;
    pub const PFC_FLAGS: usize = 0;
    pub const PFC_ENABLE: usize = 1;
    pub const PFC_MBC: u8 = 0x40;
    pub const PFC_CAP: u8 = 0x0f;
    pub const APP_ENTRIES: usize = 1;
    pub const APP_ENTRY_LEN: usize = 3;
    pub const APP_PRIO_SHIFT: u8 = 5;
    pub const APP_SEL: u8 = 0x07;
    // CEE
    pub const CEE_OPER_VERSION: usize = 0;
    pub const CEE_MAX_VERSION: usize = 1;
    pub const CEE_SEQ: Range<usize> = 2..6;
    pub const CEE_ACK: Range<usize> = 6..10;
    pub const CEE_FLAGS: usize = 2;
    pub const CEE_SUBTYPE: usize = 3;
    pub const CEE_DATA: usize = 4;
    pub const CEE_ENABLE: u8 = 0x80;
    pub const CEE_WILLING: u8 = 0x40;
    pub const CEE_ERROR: u8 = 0x20;
    pub const CEE_PG_PGID: Range<usize> = 0..4;
    pub const CEE_PG_BW: Range<usize> = 4..12;
    pub const CEE_PG_NUMTCS: usize = 12;
    pub const CEE_PG_LEN: usize = 13;
    pub const CEE_PFC_LEN: usize = 2;
    pub const CEE_APP_ENTRY_LEN: usize = 6;
    pub const CEE_APP_SEL: u8 = 0x03;
}

/// Errors decoding or encoding DCBX TLVs.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// Information string of the wrong length.
    #[error("DCBX {tlv} has invalid length {len}: expected {expected}")]
    BadLength {
        /// TLV name.
        tlv: &'static str,
        /// Length found.
        len: usize,
        /// What the standard allows.
        expected: &'static str,
    },
    /// A field value outside its range (on emit).
    #[error("DCBX field {field} = {value} out of range {allowed}")]
    OutOfRange {
        /// Field name.
        field: &'static str,
        /// Value.
        value: u32,
        /// Allowed range.
        allowed: &'static str,
    },
    /// A CEE sub-TLV runs past the end of the TLV.
    #[error("CEE DCBX sub-TLV at offset {offset} truncated: needs {need} bytes, {available} left")]
    CeeTruncated {
        /// Offset within the CEE information string.
        offset: usize,
        /// Bytes needed.
        need: usize,
        /// Bytes left.
        available: usize,
    },
    /// The output buffer is too small.
    #[error("buffer too small: need {need} bytes, have {have}")]
    BufferTooSmall {
        /// Bytes needed.
        need: usize,
        /// Bytes available.
        have: usize,
    },
}

/// Transmission selection algorithm (IEEE 802.1Q-2018 table 8-6). Unknown values are kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Tsa {
    /// 0, strict priority.
    #[default]
    Strict,
    /// 1, credit-based shaper.
    CreditBasedShaper,
    /// 2, enhanced transmission selection.
    Ets,
    /// 255, vendor specific.
    Vendor,
    /// Reserved values.
    Unknown(u8),
}

impl From<u8> for Tsa {
    fn from(v: u8) -> Self {
        match v {
            0 => Tsa::Strict,
            1 => Tsa::CreditBasedShaper,
            2 => Tsa::Ets,
            255 => Tsa::Vendor,
            v => Tsa::Unknown(v),
        }
    }
}

impl From<Tsa> for u8 {
    fn from(t: Tsa) -> u8 {
        match t {
            Tsa::Strict => 0,
            Tsa::CreditBasedShaper => 1,
            Tsa::Ets => 2,
            Tsa::Vendor => 255,
            Tsa::Unknown(v) => v,
        }
    }
}

impl fmt::Display for Tsa {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Tsa::Strict => f.write_str("strict"),
            Tsa::CreditBasedShaper => f.write_str("cbs"),
            Tsa::Ets => f.write_str("ets"),
            Tsa::Vendor => f.write_str("vendor"),
            Tsa::Unknown(v) => write!(f, "tsa{v}"),
        }
    }
}

/// Zero-copy view of an ETS Configuration / Recommendation information string.
#[derive(Debug, Clone)]
pub struct EtsPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> EtsPacket<T> {
    /// Wraps without checking.
    pub const fn new_unchecked(buffer: T) -> Self {
        EtsPacket { buffer }
    }
    /// Wraps after [`EtsPacket::check_len`].
    pub fn new_checked(buffer: T) -> Result<Self, Error> {
        let p = Self::new_unchecked(buffer);
        p.check_len()?;
        Ok(p)
    }
    /// The information string must be exactly [`ETS_LEN`] octets.
    pub fn check_len(&self) -> Result<(), Error> {
        let len = self.buffer.as_ref().len();
        if len != ETS_LEN {
            return Err(Error::BadLength { tlv: "ETS", len, expected: "21" });
        }
        Ok(())
    }
    /// Flags octet (ETS Configuration) or reserved octet (ETS Recommendation).
    pub fn flags(&self) -> u8 {
        self.buffer.as_ref()[field::ETS_FLAGS]
    }
    /// Willing bit (ETS Configuration).
    pub fn willing(&self) -> bool {
        self.flags() & field::WILLING != 0
    }
    /// Credit-based shaper supported bit (ETS Configuration).
    pub fn cbs(&self) -> bool {
        self.flags() & field::ETS_CBS != 0
    }
    /// Max TCs field as on the wire (0 means 8).
    pub fn max_tcs_raw(&self) -> u8 {
        self.flags() & field::ETS_MAX_TCS
    }
    /// Traffic class assigned to `prio` (4 bits).
    pub fn priority_tc(&self, prio: Priority) -> u8 {
        let i = usize::from(prio.value());
        let b = self.buffer.as_ref()[field::ETS_PRIO_TC][i / 2];
        if i % 2 == 0 {
            b >> 4
        } else {
            b & 0x0f
        }
    }
    /// Bandwidth percentage of traffic class `tc` (0..=7).
    pub fn tc_bandwidth(&self, tc: usize) -> u8 {
        self.buffer.as_ref()[field::ETS_BW][tc]
    }
    /// TSA of traffic class `tc` (0..=7).
    pub fn tsa(&self, tc: usize) -> Tsa {
        Tsa::from(self.buffer.as_ref()[field::ETS_TSA][tc])
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> EtsPacket<T> {
    /// Sets the flags / reserved octet.
    pub fn set_flags(&mut self, v: u8) {
        self.buffer.as_mut()[field::ETS_FLAGS] = v;
    }
    /// Sets the traffic class of `prio` (low 4 bits of `tc`).
    pub fn set_priority_tc(&mut self, prio: Priority, tc: u8) {
        let i = usize::from(prio.value());
        let b = &mut self.buffer.as_mut()[field::ETS_PRIO_TC][i / 2];
        *b = if i % 2 == 0 { (*b & 0x0f) | (tc << 4) } else { (*b & 0xf0) | (tc & 0x0f) };
    }
    /// Sets the bandwidth of `tc`.
    pub fn set_tc_bandwidth(&mut self, tc: usize, pct: u8) {
        self.buffer.as_mut()[field::ETS_BW][tc] = pct;
    }
    /// Sets the TSA of `tc`.
    pub fn set_tsa(&mut self, tc: usize, tsa: Tsa) {
        self.buffer.as_mut()[field::ETS_TSA][tc] = u8::from(tsa);
    }
}

/// The three ETS tables, shared by ETS Configuration and ETS Recommendation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
pub struct EtsTables {
    /// Traffic class (0..=7; 8..=15 reserved) per priority 0..=7.
    pub prio_tc: [u8; 8],
    /// Bandwidth percentage per traffic class 0..=7.
    pub tc_bandwidth: [u8; 8],
    /// Transmission selection algorithm per traffic class 0..=7.
    pub tsa: [Tsa; 8],
}

impl EtsTables {
    fn parse<T: AsRef<[u8]>>(p: &EtsPacket<T>) -> Self {
        let mut t = EtsTables::default();
        for prio in Priority::all() {
            t.prio_tc[usize::from(prio.value())] = p.priority_tc(prio);
        }
        for tc in 0..8 {
            t.tc_bandwidth[tc] = p.tc_bandwidth(tc);
            t.tsa[tc] = p.tsa(tc);
        }
        t
    }

    fn validate(&self) -> Result<(), Error> {
        if let Some(&tc) = self.prio_tc.iter().find(|&&tc| tc > 15) {
            return Err(Error::OutOfRange { field: "ETS priority assignment", value: tc.into(), allowed: "0..=15" });
        }
        Ok(())
    }

    fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, p: &mut EtsPacket<T>) {
        for prio in Priority::all() {
            p.set_priority_tc(prio, self.prio_tc[usize::from(prio.value())]);
        }
        for tc in 0..8 {
            p.set_tc_bandwidth(tc, self.tc_bandwidth[tc]);
            p.set_tsa(tc, self.tsa[tc]);
        }
    }
}

impl fmt::Display for EtsTables {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "prio->tc {:?} tc-bw% {:?} tsa [", self.prio_tc, self.tc_bandwidth)?;
        for (i, t) in self.tsa.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{t}")?;
        }
        f.write_str("]")
    }
}

/// ETS Configuration TLV (subtype 9, IEEE 802.1Q-2018 D.2.9).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct EtsConfig {
    /// Willing to accept the peer's recommendation.
    pub willing: bool,
    /// Credit-based shaper supported.
    pub cbs: bool,
    /// Number of traffic classes supported, 1..=8 (8 is sent as 0).
    pub max_tcs: u8,
    /// The tables.
    #[serde(flatten)]
    pub tables: EtsTables,
}

/// ETS Recommendation TLV (subtype 10, IEEE 802.1Q-2018 D.2.10).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
pub struct EtsRecommendation {
    /// The tables.
    #[serde(flatten)]
    pub tables: EtsTables,
}

/// Zero-copy view of a PFC Configuration information string.
#[derive(Debug, Clone)]
pub struct PfcPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> PfcPacket<T> {
    /// Wraps without checking.
    pub const fn new_unchecked(buffer: T) -> Self {
        PfcPacket { buffer }
    }
    /// Wraps after [`PfcPacket::check_len`].
    pub fn new_checked(buffer: T) -> Result<Self, Error> {
        let p = Self::new_unchecked(buffer);
        p.check_len()?;
        Ok(p)
    }
    /// The information string must be exactly [`PFC_LEN`] octets.
    pub fn check_len(&self) -> Result<(), Error> {
        let len = self.buffer.as_ref().len();
        if len != PFC_LEN {
            return Err(Error::BadLength { tlv: "PFC Configuration", len, expected: "2" });
        }
        Ok(())
    }
    /// Willing bit.
    pub fn willing(&self) -> bool {
        self.buffer.as_ref()[field::PFC_FLAGS] & field::WILLING != 0
    }
    /// MACsec bypass capability bit.
    pub fn mbc(&self) -> bool {
        self.buffer.as_ref()[field::PFC_FLAGS] & field::PFC_MBC != 0
    }
    /// PFC capability: how many priorities may be PFC-enabled at once.
    pub fn pfc_cap(&self) -> u8 {
        self.buffer.as_ref()[field::PFC_FLAGS] & field::PFC_CAP
    }
    /// Priorities with PFC enabled.
    pub fn enabled(&self) -> PrioritySet {
        PrioritySet(self.buffer.as_ref()[field::PFC_ENABLE])
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> PfcPacket<T> {
    /// Sets willing, MBC and the capability (low 4 bits).
    pub fn set_flags(&mut self, willing: bool, mbc: bool, cap: u8) {
        let mut b = cap & field::PFC_CAP;
        if willing {
            b |= field::WILLING;
        }
        if mbc {
            b |= field::PFC_MBC;
        }
        self.buffer.as_mut()[field::PFC_FLAGS] = b;
    }
    /// Sets the enable bitmap.
    pub fn set_enabled(&mut self, s: PrioritySet) {
        self.buffer.as_mut()[field::PFC_ENABLE] = s.bits();
    }
}

/// PFC Configuration TLV (subtype 11, IEEE 802.1Q-2018 D.2.11).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
pub struct PfcConfig {
    /// Willing to accept the peer's configuration.
    pub willing: bool,
    /// MACsec bypass capability.
    pub mbc: bool,
    /// Number of priorities that may be PFC-enabled at once (0..=15 on the wire, 0..=8 used).
    pub pfc_cap: u8,
    /// Priorities with PFC enabled.
    pub enabled: PrioritySet,
}

/// Application priority selector (IEEE 802.1Q-2018 table D-9). Unknown values are kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum AppSelector {
    /// 1, EtherType.
    Ethertype,
    /// 2, well-known port over TCP or SCTP.
    TcpSctpPort,
    /// 3, well-known port over UDP or DCCP.
    UdpDccpPort,
    /// 4, well-known port over TCP, SCTP, UDP or DCCP.
    TcpSctpUdpDccpPort,
    /// 5, DSCP value.
    Dscp,
    /// Reserved 0, 6, 7.
    Unknown(u8),
}

impl From<u8> for AppSelector {
    fn from(v: u8) -> Self {
        match v {
            1 => AppSelector::Ethertype,
            2 => AppSelector::TcpSctpPort,
            3 => AppSelector::UdpDccpPort,
            4 => AppSelector::TcpSctpUdpDccpPort,
            5 => AppSelector::Dscp,
            v => AppSelector::Unknown(v),
        }
    }
}

impl From<AppSelector> for u8 {
    fn from(s: AppSelector) -> u8 {
        match s {
            AppSelector::Ethertype => 1,
            AppSelector::TcpSctpPort => 2,
            AppSelector::UdpDccpPort => 3,
            AppSelector::TcpSctpUdpDccpPort => 4,
            AppSelector::Dscp => 5,
            AppSelector::Unknown(v) => v,
        }
    }
}

impl fmt::Display for AppSelector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AppSelector::Ethertype => f.write_str("ethertype"),
            AppSelector::TcpSctpPort => f.write_str("tcp-sctp-port"),
            AppSelector::UdpDccpPort => f.write_str("udp-dccp-port"),
            AppSelector::TcpSctpUdpDccpPort => f.write_str("tcp-udp-port"),
            AppSelector::Dscp => f.write_str("dscp"),
            AppSelector::Unknown(v) => write!(f, "selector{v}"),
        }
    }
}

/// One Application Priority table entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
pub struct AppEntry {
    /// Priority the application's frames use.
    pub priority: Priority,
    /// What `protocol` means.
    pub selector: AppSelector,
    /// EtherType, port number or DSCP value.
    pub protocol: u16,
}

impl AppEntry {
    /// RoCEv2: UDP port 4791.
    pub fn rocev2(priority: Priority) -> AppEntry {
        AppEntry { priority, selector: AppSelector::UdpDccpPort, protocol: 4791 }
    }
    /// A DSCP → priority mapping.
    pub fn dscp(dscp: u8, priority: Priority) -> AppEntry {
        AppEntry { priority, selector: AppSelector::Dscp, protocol: u16::from(dscp) }
    }
}

impl fmt::Display for AppEntry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {} -> prio {}", self.selector, self.protocol, self.priority)
    }
}

/// Zero-copy view of an Application Priority information string.
#[derive(Debug, Clone)]
pub struct AppPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> AppPacket<T> {
    /// Wraps without checking.
    pub const fn new_unchecked(buffer: T) -> Self {
        AppPacket { buffer }
    }
    /// Wraps after [`AppPacket::check_len`].
    pub fn new_checked(buffer: T) -> Result<Self, Error> {
        let p = Self::new_unchecked(buffer);
        p.check_len()?;
        Ok(p)
    }
    /// Reserved octet plus a whole number of 3-octet entries.
    pub fn check_len(&self) -> Result<(), Error> {
        let len = self.buffer.as_ref().len();
        if len < field::APP_ENTRIES || !(len - field::APP_ENTRIES).is_multiple_of(field::APP_ENTRY_LEN) {
            return Err(Error::BadLength { tlv: "Application Priority", len, expected: "1 + 3n" });
        }
        Ok(())
    }
    /// Number of entries.
    pub fn entry_count(&self) -> usize {
        (self.buffer.as_ref().len() - field::APP_ENTRIES) / field::APP_ENTRY_LEN
    }
    /// Entry `i` (< [`AppPacket::entry_count`]).
    pub fn entry(&self, i: usize) -> AppEntry {
        let s = field::APP_ENTRIES + i * field::APP_ENTRY_LEN;
        let e = &self.buffer.as_ref()[s..s + field::APP_ENTRY_LEN];
        AppEntry {
            priority: Priority::from_bits(e[0] >> field::APP_PRIO_SHIFT),
            selector: AppSelector::from(e[0] & field::APP_SEL),
            protocol: u16::from_be_bytes([e[1], e[2]]),
        }
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> AppPacket<T> {
    /// Writes entry `i` (reserved bits 0).
    pub fn set_entry(&mut self, i: usize, e: &AppEntry) {
        let s = field::APP_ENTRIES + i * field::APP_ENTRY_LEN;
        let b = &mut self.buffer.as_mut()[s..s + field::APP_ENTRY_LEN];
        b[0] = (e.priority.value() << field::APP_PRIO_SHIFT) | (u8::from(e.selector) & field::APP_SEL);
        b[1..3].copy_from_slice(&e.protocol.to_be_bytes());
    }
}

/// Application Priority TLV (subtype 12, IEEE 802.1Q-2018 D.2.12).
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize)]
pub struct AppPriority {
    /// The entries (at most 168 fit in one TLV).
    pub entries: Vec<AppEntry>,
}

/// CEE Control sub-TLV (type 1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
pub struct CeeControl {
    /// Operating version.
    pub oper_version: u8,
    /// Highest version supported.
    pub max_version: u8,
    /// Sequence number.
    pub seq_no: u32,
    /// Acknowledgement number.
    pub ack_no: u32,
}

/// Header shared by CEE feature sub-TLVs (types 2..).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
pub struct CeeFeature {
    /// Operating version.
    pub oper_version: u8,
    /// Highest version supported.
    pub max_version: u8,
    /// Feature enabled.
    pub enabled: bool,
    /// Willing to accept the peer's configuration.
    pub willing: bool,
    /// Error flag.
    pub error: bool,
    /// Feature subtype octet.
    pub subtype: u8,
}

/// CEE Priority Groups data.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
pub struct CeePriorityGroups {
    /// Priority group id (4 bits, 15 = strict) per priority 0..=7.
    pub pgid: [u8; 8],
    /// Bandwidth percentage per priority group 0..=7.
    pub pg_bandwidth: [u8; 8],
    /// Number of traffic classes supported.
    pub num_tcs: u8,
}

/// CEE PFC data.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
pub struct CeePfc {
    /// Priorities with PFC enabled.
    pub enabled: PrioritySet,
    /// Number of traffic classes that support PFC.
    pub num_tcs: u8,
}

/// One CEE application entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct CeeAppEntry {
    /// Protocol id (EtherType or port).
    pub protocol: u16,
    /// Selector (2 bits): 0 EtherType, 1 TCP/UDP port.
    pub selector: u8,
    /// OUI with the two low bits of its first octet cleared (they carry the selector).
    #[serde(serialize_with = "crate::hex::hex_bytes")]
    pub oui: [u8; 3],
    /// Priorities the application may use (bitmap).
    pub priorities: PrioritySet,
}

/// One CEE DCBX sub-TLV.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum CeeTlv {
    /// Control (1).
    Control(CeeControl),
    /// Priority Groups (2).
    PriorityGroups {
        /// Header.
        feature: CeeFeature,
        /// Data.
        pg: CeePriorityGroups,
    },
    /// PFC (3).
    Pfc {
        /// Header.
        feature: CeeFeature,
        /// Data.
        pfc: CeePfc,
    },
    /// Application (4).
    Application {
        /// Header.
        feature: CeeFeature,
        /// Entries.
        apps: Vec<CeeAppEntry>,
    },
    /// Any other sub-TLV (e.g. Logical Link Down, 6); the value is kept.
    Unknown {
        /// Sub-TLV type.
        tlv_type: u8,
        /// Value octets.
        #[serde(serialize_with = "crate::hex::hex_bytes")]
        value: Vec<u8>,
    },
}

impl CeeTlv {
    fn tlv_type(&self) -> u8 {
        match self {
            CeeTlv::Control(_) => 1,
            CeeTlv::PriorityGroups { .. } => 2,
            CeeTlv::Pfc { .. } => 3,
            CeeTlv::Application { .. } => 4,
            CeeTlv::Unknown { tlv_type, .. } => *tlv_type,
        }
    }

    fn value_len(&self) -> usize {
        match self {
            CeeTlv::Control(_) => field::CEE_ACK.end,
            CeeTlv::PriorityGroups { .. } => field::CEE_DATA + field::CEE_PG_LEN,
            CeeTlv::Pfc { .. } => field::CEE_DATA + field::CEE_PFC_LEN,
            CeeTlv::Application { apps, .. } => field::CEE_DATA + apps.len() * field::CEE_APP_ENTRY_LEN,
            CeeTlv::Unknown { value, .. } => value.len(),
        }
    }

    fn parse(tlv_type: u8, v: &[u8]) -> Result<CeeTlv, Error> {
        let bad = |tlv, expected| Error::BadLength { tlv, len: v.len(), expected };
        let feature = || -> Result<CeeFeature, Error> {
            if v.len() < field::CEE_DATA {
                return Err(bad("CEE feature sub-TLV", "at least 4"));
            }
            let fl = v[field::CEE_FLAGS];
            Ok(CeeFeature {
                oper_version: v[field::CEE_OPER_VERSION],
                max_version: v[field::CEE_MAX_VERSION],
                enabled: fl & field::CEE_ENABLE != 0,
                willing: fl & field::CEE_WILLING != 0,
                error: fl & field::CEE_ERROR != 0,
                subtype: v[field::CEE_SUBTYPE],
            })
        };
        Ok(match tlv_type {
            1 => {
                if v.len() != field::CEE_ACK.end {
                    return Err(bad("CEE Control", "10"));
                }
                CeeTlv::Control(CeeControl {
                    oper_version: v[field::CEE_OPER_VERSION],
                    max_version: v[field::CEE_MAX_VERSION],
                    seq_no: u32::from_be_bytes(v[field::CEE_SEQ].try_into().unwrap_or_default()),
                    ack_no: u32::from_be_bytes(v[field::CEE_ACK].try_into().unwrap_or_default()),
                })
            }
            2 => {
                if v.len() != field::CEE_DATA + field::CEE_PG_LEN {
                    return Err(bad("CEE Priority Groups", "17"));
                }
                let feature = feature()?;
                let d = &v[field::CEE_DATA..];
                let mut pg = CeePriorityGroups { num_tcs: d[field::CEE_PG_NUMTCS], ..Default::default() };
                for (i, b) in d[field::CEE_PG_PGID].iter().enumerate() {
                    pg.pgid[2 * i] = b >> 4;
                    pg.pgid[2 * i + 1] = b & 0x0f;
                }
                pg.pg_bandwidth.copy_from_slice(&d[field::CEE_PG_BW]);
                CeeTlv::PriorityGroups { feature, pg }
            }
            3 => {
                if v.len() != field::CEE_DATA + field::CEE_PFC_LEN {
                    return Err(bad("CEE PFC", "6"));
                }
                let feature = feature()?;
                let d = &v[field::CEE_DATA..];
                CeeTlv::Pfc { feature, pfc: CeePfc { enabled: PrioritySet(d[0]), num_tcs: d[1] } }
            }
            4 => {
                let feature = feature()?;
                let d = &v[field::CEE_DATA..];
                if !d.len().is_multiple_of(field::CEE_APP_ENTRY_LEN) {
                    return Err(bad("CEE Application", "4 + 6n"));
                }
                let apps = d
                    .chunks_exact(field::CEE_APP_ENTRY_LEN)
                    .map(|e| CeeAppEntry {
                        protocol: u16::from_be_bytes([e[0], e[1]]),
                        selector: e[2] & field::CEE_APP_SEL,
                        oui: [e[2] & !field::CEE_APP_SEL, e[3], e[4]],
                        priorities: PrioritySet(e[5]),
                    })
                    .collect();
                CeeTlv::Application { feature, apps }
            }
            t => CeeTlv::Unknown { tlv_type: t, value: v.to_vec() },
        })
    }

    fn emit(&self, v: &mut [u8]) {
        let hdr = |v: &mut [u8], f: &CeeFeature| {
            v[field::CEE_OPER_VERSION] = f.oper_version;
            v[field::CEE_MAX_VERSION] = f.max_version;
            let mut fl = 0;
            if f.enabled {
                fl |= field::CEE_ENABLE;
            }
            if f.willing {
                fl |= field::CEE_WILLING;
            }
            if f.error {
                fl |= field::CEE_ERROR;
            }
            v[field::CEE_FLAGS] = fl;
            v[field::CEE_SUBTYPE] = f.subtype;
        };
        match self {
            CeeTlv::Control(c) => {
                v[field::CEE_OPER_VERSION] = c.oper_version;
                v[field::CEE_MAX_VERSION] = c.max_version;
                v[field::CEE_SEQ].copy_from_slice(&c.seq_no.to_be_bytes());
                v[field::CEE_ACK].copy_from_slice(&c.ack_no.to_be_bytes());
            }
            CeeTlv::PriorityGroups { feature, pg } => {
                hdr(v, feature);
                let d = &mut v[field::CEE_DATA..];
                for (b, pair) in d[field::CEE_PG_PGID].iter_mut().zip(pg.pgid.chunks_exact(2)) {
                    *b = (pair[0] << 4) | (pair[1] & 0x0f);
                }
                d[field::CEE_PG_BW].copy_from_slice(&pg.pg_bandwidth);
                d[field::CEE_PG_NUMTCS] = pg.num_tcs;
            }
            CeeTlv::Pfc { feature, pfc } => {
                hdr(v, feature);
                v[field::CEE_DATA] = pfc.enabled.bits();
                v[field::CEE_DATA + 1] = pfc.num_tcs;
            }
            CeeTlv::Application { feature, apps } => {
                hdr(v, feature);
                for (e, a) in v[field::CEE_DATA..].chunks_exact_mut(field::CEE_APP_ENTRY_LEN).zip(apps) {
                    e[0..2].copy_from_slice(&a.protocol.to_be_bytes());
                    e[2] = (a.oui[0] & !field::CEE_APP_SEL) | (a.selector & field::CEE_APP_SEL);
                    e[3] = a.oui[1];
                    e[4] = a.oui[2];
                    e[5] = a.priorities.bits();
                }
            }
            CeeTlv::Unknown { value, .. } => v.copy_from_slice(value),
        }
    }

    fn validate(&self) -> Result<(), Error> {
        match self {
            CeeTlv::PriorityGroups { pg, .. } if pg.pgid.iter().any(|&g| g > 15) => Err(Error::OutOfRange {
                field: "CEE PGID",
                value: pg.pgid.iter().copied().max().unwrap_or(0).into(),
                allowed: "0..=15",
            }),
            CeeTlv::Application { apps, .. } if apps.iter().any(|a| a.selector > 3) => {
                Err(Error::OutOfRange { field: "CEE app selector", value: 4, allowed: "0..=3" })
            }
            CeeTlv::Unknown { tlv_type, .. } if *tlv_type > 0x7f => {
                Err(Error::OutOfRange { field: "CEE sub-TLV type", value: (*tlv_type).into(), allowed: "0..=127" })
            }
            _ if self.value_len() > 0x1ff => Err(Error::OutOfRange {
                field: "CEE sub-TLV length",
                value: self.value_len() as u32,
                allowed: "0..=511",
            }),
            _ => Ok(()),
        }
    }
}

impl fmt::Display for CeeFeature {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "ver {}/{} enabled={} willing={} error={}",
            self.oper_version, self.max_version, self.enabled as u8, self.willing as u8, self.error as u8
        )
    }
}

impl fmt::Display for CeeTlv {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CeeTlv::Control(c) => {
                write!(f, "Control ver {}/{} seq {} ack {}", c.oper_version, c.max_version, c.seq_no, c.ack_no)
            }
            CeeTlv::PriorityGroups { feature, pg } => {
                write!(f, "PG {feature} pgid {:?} pg-bw% {:?} num-tcs {}", pg.pgid, pg.pg_bandwidth, pg.num_tcs)
            }
            CeeTlv::Pfc { feature, pfc } => {
                write!(f, "PFC {feature} enable {} num-tcs {}", pfc.enabled, pfc.num_tcs)
            }
            CeeTlv::Application { feature, apps } => {
                write!(f, "App {feature}")?;
                for a in apps {
                    write!(f, " [sel {} proto {:#06x} prio {}]", a.selector, a.protocol, a.priorities)?;
                }
                Ok(())
            }
            CeeTlv::Unknown { tlv_type, value } => write!(f, "sub-TLV {tlv_type}: {}", Hex(value)),
        }
    }
}

/// CEE DCBX TLV (OUI 00-1b-21, subtype 2): a list of sub-TLVs.
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize)]
pub struct CeeDcbx {
    /// Sub-TLVs in order.
    pub tlvs: Vec<CeeTlv>,
}

impl CeeDcbx {
    fn parse(info: &[u8]) -> Result<Self, Error> {
        let mut tlvs = Vec::new();
        let mut off = 0;
        while off < info.len() {
            let rest = &info[off..];
            if rest.len() < 2 {
                return Err(Error::CeeTruncated { offset: off, need: 2, available: rest.len() });
            }
            let h = u16::from_be_bytes([rest[0], rest[1]]);
            let (t, len) = ((h >> 9) as u8, usize::from(h & 0x1ff));
            let v = rest.get(2..2 + len).ok_or(Error::CeeTruncated {
                offset: off,
                need: 2 + len,
                available: rest.len(),
            })?;
            tlvs.push(CeeTlv::parse(t, v)?);
            off += 2 + len;
        }
        Ok(CeeDcbx { tlvs })
    }

    fn info_len(&self) -> usize {
        self.tlvs.iter().map(|t| 2 + t.value_len()).sum()
    }

    fn emit(&self, b: &mut [u8]) -> Result<(), Error> {
        let mut off = 0;
        for t in &self.tlvs {
            t.validate()?;
            let len = t.value_len();
            let h = (u16::from(t.tlv_type()) << 9) | len as u16;
            b[off..off + 2].copy_from_slice(&h.to_be_bytes());
            t.emit(&mut b[off + 2..off + 2 + len]);
            off += 2 + len;
        }
        Ok(())
    }
}

/// A decoded DCBX organizationally specific TLV.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum DcbxTlv {
    /// IEEE ETS Configuration (00-80-c2 / 9).
    EtsConfiguration(EtsConfig),
    /// IEEE ETS Recommendation (00-80-c2 / 10).
    EtsRecommendation(EtsRecommendation),
    /// IEEE PFC Configuration (00-80-c2 / 11).
    PfcConfiguration(PfcConfig),
    /// IEEE Application Priority (00-80-c2 / 12).
    ApplicationPriority(AppPriority),
    /// CEE DCBX (00-1b-21 / 2).
    Cee(CeeDcbx),
}

impl DcbxTlv {
    /// Decodes the information string of an organizationally specific TLV; `Ok(None)` when
    /// `oui`/`subtype` are not a DCBX TLV this module knows.
    pub fn parse(oui: [u8; 3], subtype: u8, info: &[u8]) -> Result<Option<DcbxTlv>, Error> {
        let known = matches!((oui, subtype), (OUI_IEEE_8021, 9..=12) | (OUI_CEE, SUBTYPE_CEE));
        if known && info.len() > MAX_INFO_LEN {
            return Err(Error::BadLength { tlv: "DCBX", len: info.len(), expected: "at most 507 (511-octet TLV)" });
        }
        Ok(Some(match (oui, subtype) {
            (OUI_IEEE_8021, SUBTYPE_ETS_CONFIGURATION) => {
                let p = EtsPacket::new_checked(info)?;
                let m = p.max_tcs_raw();
                DcbxTlv::EtsConfiguration(EtsConfig {
                    willing: p.willing(),
                    cbs: p.cbs(),
                    max_tcs: if m == 0 { 8 } else { m },
                    tables: EtsTables::parse(&p),
                })
            }
            (OUI_IEEE_8021, SUBTYPE_ETS_RECOMMENDATION) => {
                let p = EtsPacket::new_checked(info)?;
                DcbxTlv::EtsRecommendation(EtsRecommendation { tables: EtsTables::parse(&p) })
            }
            (OUI_IEEE_8021, SUBTYPE_PFC_CONFIGURATION) => {
                let p = PfcPacket::new_checked(info)?;
                DcbxTlv::PfcConfiguration(PfcConfig {
                    willing: p.willing(),
                    mbc: p.mbc(),
                    pfc_cap: p.pfc_cap(),
                    enabled: p.enabled(),
                })
            }
            (OUI_IEEE_8021, SUBTYPE_APPLICATION_PRIORITY) => {
                let p = AppPacket::new_checked(info)?;
                DcbxTlv::ApplicationPriority(AppPriority {
                    entries: (0..p.entry_count()).map(|i| p.entry(i)).collect(),
                })
            }
            (OUI_CEE, SUBTYPE_CEE) => DcbxTlv::Cee(CeeDcbx::parse(info)?),
            _ => return Ok(None),
        }))
    }

    /// The OUI this TLV is sent with.
    pub fn oui(&self) -> [u8; 3] {
        match self {
            DcbxTlv::Cee(_) => OUI_CEE,
            _ => OUI_IEEE_8021,
        }
    }

    /// The organizationally defined subtype.
    pub fn subtype(&self) -> u8 {
        match self {
            DcbxTlv::EtsConfiguration(_) => SUBTYPE_ETS_CONFIGURATION,
            DcbxTlv::EtsRecommendation(_) => SUBTYPE_ETS_RECOMMENDATION,
            DcbxTlv::PfcConfiguration(_) => SUBTYPE_PFC_CONFIGURATION,
            DcbxTlv::ApplicationPriority(_) => SUBTYPE_APPLICATION_PRIORITY,
            DcbxTlv::Cee(_) => SUBTYPE_CEE,
        }
    }

    /// Length of the information string (after OUI and subtype).
    pub fn info_len(&self) -> usize {
        match self {
            DcbxTlv::EtsConfiguration(_) | DcbxTlv::EtsRecommendation(_) => ETS_LEN,
            DcbxTlv::PfcConfiguration(_) => PFC_LEN,
            DcbxTlv::ApplicationPriority(a) => field::APP_ENTRIES + a.entries.len() * field::APP_ENTRY_LEN,
            DcbxTlv::Cee(c) => c.info_len(),
        }
    }

    /// Checks field ranges the types do not enforce.
    pub fn validate(&self) -> Result<(), Error> {
        match self {
            DcbxTlv::EtsConfiguration(e) => {
                if !(1..=8).contains(&e.max_tcs) {
                    return Err(Error::OutOfRange { field: "ETS max TCs", value: e.max_tcs.into(), allowed: "1..=8" });
                }
                e.tables.validate()
            }
            DcbxTlv::EtsRecommendation(e) => e.tables.validate(),
            DcbxTlv::PfcConfiguration(p) if p.pfc_cap > 15 => {
                Err(Error::OutOfRange { field: "PFC cap", value: p.pfc_cap.into(), allowed: "0..=15" })
            }
            DcbxTlv::ApplicationPriority(a) => match a.entries.iter().find(|e| u8::from(e.selector) > 7) {
                Some(e) => Err(Error::OutOfRange {
                    field: "app selector",
                    value: u8::from(e.selector).into(),
                    allowed: "0..=7",
                }),
                None => Ok(()),
            },
            _ => Ok(()),
        }?;
        if self.info_len() > MAX_INFO_LEN {
            return Err(Error::OutOfRange {
                field: "information string length",
                value: self.info_len() as u32,
                allowed: "0..=507",
            });
        }
        Ok(())
    }

    /// Writes the information string into `buf` (exactly [`DcbxTlv::info_len`] bytes used).
    pub fn emit_info(&self, buf: &mut [u8]) -> Result<(), Error> {
        self.validate()?;
        let need = self.info_len();
        if buf.len() < need {
            return Err(Error::BufferTooSmall { need, have: buf.len() });
        }
        let buf = &mut buf[..need];
        match self {
            DcbxTlv::EtsConfiguration(e) => {
                let mut p = EtsPacket::new_unchecked(buf);
                let mut fl = e.max_tcs & field::ETS_MAX_TCS; // 8 → 0
                if e.willing {
                    fl |= field::WILLING;
                }
                if e.cbs {
                    fl |= field::ETS_CBS;
                }
                p.set_flags(fl);
                e.tables.emit(&mut p);
            }
            DcbxTlv::EtsRecommendation(e) => {
                let mut p = EtsPacket::new_unchecked(buf);
                p.set_flags(0);
                e.tables.emit(&mut p);
            }
            DcbxTlv::PfcConfiguration(c) => {
                let mut p = PfcPacket::new_unchecked(buf);
                p.set_flags(c.willing, c.mbc, c.pfc_cap);
                p.set_enabled(c.enabled);
            }
            DcbxTlv::ApplicationPriority(a) => {
                buf[0] = 0;
                let mut p = AppPacket::new_unchecked(buf);
                for (i, e) in a.entries.iter().enumerate() {
                    p.set_entry(i, e);
                }
            }
            DcbxTlv::Cee(c) => c.emit(buf)?,
        }
        Ok(())
    }
}

impl fmt::Display for DcbxTlv {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DcbxTlv::EtsConfiguration(e) => write!(
                f,
                "ETS Configuration: willing={} cbs={} max-tcs={} {}",
                e.willing as u8, e.cbs as u8, e.max_tcs, e.tables
            ),
            DcbxTlv::EtsRecommendation(e) => write!(f, "ETS Recommendation: {}", e.tables),
            DcbxTlv::PfcConfiguration(p) => write!(
                f,
                "PFC Configuration: willing={} mbc={} cap={} enable={}",
                p.willing as u8, p.mbc as u8, p.pfc_cap, p.enabled
            ),
            DcbxTlv::ApplicationPriority(a) => {
                f.write_str("Application Priority:")?;
                for e in &a.entries {
                    write!(f, " [{e}]")?;
                }
                Ok(())
            }
            DcbxTlv::Cee(c) => {
                f.write_str("CEE DCBX:")?;
                for t in &c.tlvs {
                    write!(f, " {{{t}}}")?;
                }
                Ok(())
            }
        }
    }
}
