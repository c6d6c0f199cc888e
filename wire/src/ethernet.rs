//! Ethernet II framing shared by the L2 control protocols (IEEE 802.3 clause 3, IEEE 802.1Q
//! priority code points), plus the small value types they share: [`MacAddr`], [`Priority`] and
//! [`PrioritySet`], and the walk over a frame's VLAN tags to its inner EtherType
//! ([`walk_vlan_tags`]: IEEE 802.1Q C-tags, IEEE 802.1ad S-tags, QinQ).
//!
//! ```text
//!  0                   6                  12        14
//! +-------------------+-------------------+---------+---------------- - -
//! | destination MAC   | source MAC        |EtherType| payload ... (padded so the frame
//! +-------------------+-------------------+---------+  is >= 60 bytes without FCS)
//!
//! A tagged frame (IEEE 802.1Q clause 9): each tag is a TPID where the EtherType was, then the
//! tag control information, then the next TPID or the EtherType:
//!  0                   6                  12        14        16        18
//! +-------------------+-------------------+---------+---------+---------+------ - -
//! | destination MAC   | source MAC        |  TPID   |   TCI   |EtherType| payload
//! +-------------------+-------------------+---------+---------+---------+------ - -
//!                                         TCI: PCP (3 bits) | DEI (1) | VID (12)
//! ```
//!
//! Captures and AF_XDP buffers carry frames without the 4-byte FCS, so the minimum frame length
//! used throughout this crate is [`MIN_FRAME_LEN`] = 60 bytes.

use core::fmt;
use core::str::FromStr;

/// EtherType of MAC control frames (IEEE 802.3 clause 31): PAUSE and PFC.
pub const ETHERTYPE_MAC_CONTROL: u16 = 0x8808;
/// EtherType of LLDP (IEEE 802.1AB).
pub const ETHERTYPE_LLDP: u16 = 0x88cc;
/// Length of the Ethernet II header (no VLAN tag).
pub const HEADER_LEN: usize = 14;
/// Minimum Ethernet frame length without the FCS.
pub const MIN_FRAME_LEN: usize = 60;
/// Length of one VLAN tag: TPID and TCI.
pub const VLAN_TAG_LEN: usize = 4;
/// Tag protocol identifiers [`walk_vlan_tags`] walks through: the IEEE 802.1Q C-tag (0x8100),
/// the IEEE 802.1ad S-tag (0x88a8) and the pre-standard QinQ outer tag (0x9100).
pub const VLAN_TPIDS: [u16; 3] = [0x8100, 0x88a8, 0x9100];

/// Preamble + start-of-frame delimiter (IEEE 802.3 clause 4/35).
pub const PREAMBLE_SFD: u64 = 8;
/// Minimum inter-frame gap.
pub const IFG: u64 = 12;
/// Frame check sequence (added by the "NIC"; our frames are handed over without it).
pub const FCS: u64 = 4;
/// Per-frame wire overhead on top of the frame bytes.
pub const WIRE_OVERHEAD: u64 = PREAMBLE_SFD + IFG + FCS;

/// Bytes a frame of `frame_len` (Ethernet header .. payload, no FCS) occupies on the wire:
/// padded to [`MIN_FRAME_LEN`], plus preamble, SFD, FCS and the inter-frame gap.
#[inline(always)]
pub const fn wire_bytes(frame_len: u32) -> u64 {
    let l = frame_len as u64;
    (if l < MIN_FRAME_LEN as u64 { MIN_FRAME_LEN as u64 } else { l }) + WIRE_OVERHEAD
}

/// Serialisation time (ns, rounded up) of a frame of `frame_len` bytes (no FCS) at `rate_bps`,
/// with the preamble, FCS and inter-frame gap it takes on the wire ([`wire_bytes`]).
#[inline]
pub fn serialisation_ns(frame_len: u32, rate_bps: u64) -> u64 {
    let bits_ns = wire_bytes(frame_len) as u128 * 8 * 1_000_000_000;
    let rate = rate_bps.max(1) as u128;
    bits_ns.div_ceil(rate) as u64
}

/// The stamps of one direction of one port: a frame is stamped when it was seen, but never
/// before the previous frame has left the line (previous stamp + its serialisation time).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LineStamp {
    /// When the line is free again after the last stamped frame.
    free_at: u64,
}

impl LineStamp {
    /// The stamp of a frame seen at `seen_ns` that takes `ser_ns` on the line.
    #[inline]
    pub fn stamp(&mut self, seen_ns: u64, ser_ns: u64) -> u64 {
        let t = seen_ns.max(self.free_at);
        self.free_at = t.saturating_add(ser_ns);
        t
    }
}

mod field {
    use core::ops::Range;
    pub const DST: Range<usize> = 0..6;
    pub const SRC: Range<usize> = 6..12;
    pub const ETHERTYPE: Range<usize> = 12..14;
}

/// Errors of the Ethernet framing helpers and the shared value types.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// The frame is shorter than the Ethernet header.
    #[error("ethernet frame truncated: {len} bytes, the header needs {HEADER_LEN}")]
    Truncated {
        /// Bytes available.
        len: usize,
    },
    /// The output buffer cannot hold the frame.
    #[error("buffer too small: need {need} bytes, have {have}")]
    BufferTooSmall {
        /// Bytes needed.
        need: usize,
        /// Bytes available.
        have: usize,
    },
    /// The frame has another EtherType than the protocol expects.
    #[error("unexpected EtherType {found:#06x}, expected {expected:#06x}")]
    EtherType {
        /// EtherType in the frame.
        found: u16,
        /// EtherType the parser wanted.
        expected: u16,
    },
    /// A priority outside 0..=7.
    #[error("priority {0} out of range 0..=7")]
    InvalidPriority(u8),
    /// A MAC address string that is not six colon-separated hex octets.
    #[error("invalid MAC address {0:?}: expected six hex octets like 02:00:00:00:00:01")]
    InvalidMac(String),
    /// A VLAN tag announced by the TPID before it is cut short.
    #[error("VLAN tag {tag} truncated: {len} bytes, the tag needs {needed}")]
    VlanTagTruncated {
        /// Which tag (1 = the outermost).
        tag: usize,
        /// Bytes up to the end of the tag.
        needed: usize,
        /// Bytes available.
        len: usize,
    },
}

impl Error {
    /// For the truncation errors ([`Error::Truncated`], [`Error::VlanTagTruncated`]): the bytes
    /// the frame needed and those it had.
    pub const fn truncation(&self) -> Option<(usize, usize)> {
        match *self {
            Error::Truncated { len } => Some((HEADER_LEN, len)),
            Error::VlanTagTruncated { needed, len, .. } => Some((needed, len)),
            _ => None,
        }
    }
}

/// A 48-bit IEEE 802 MAC address. Displays and serializes as `01:80:c2:00:00:01`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, PartialOrd, Ord)]
pub struct MacAddr(pub [u8; 6]);

impl MacAddr {
    /// Nearest-bridge group address used by PAUSE / PFC frames (IEEE 802.3 annex 31B).
    pub const MAC_CONTROL: MacAddr = MacAddr([0x01, 0x80, 0xc2, 0x00, 0x00, 0x01]);
    /// Nearest-bridge group address used by LLDP (IEEE 802.1AB 7.1).
    pub const LLDP_NEAREST_BRIDGE: MacAddr = MacAddr([0x01, 0x80, 0xc2, 0x00, 0x00, 0x0e]);

    /// The address bytes.
    pub const fn octets(&self) -> [u8; 6] {
        self.0
    }

    /// Builds an address from the first 6 bytes of `b`; `None` if `b` is shorter.
    pub fn from_slice(b: &[u8]) -> Option<MacAddr> {
        b.get(..6).map(|s| {
            let mut a = [0u8; 6];
            a.copy_from_slice(s);
            MacAddr(a)
        })
    }
}

impl fmt::Display for MacAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let a = self.0;
        write!(f, "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}", a[0], a[1], a[2], a[3], a[4], a[5])
    }
}

impl FromStr for MacAddr {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self, Error> {
        let bad = || Error::InvalidMac(s.to_string());
        let mut out = [0u8; 6];
        let mut parts = s.split([':', '-']);
        for o in out.iter_mut() {
            let p = parts.next().ok_or_else(bad)?;
            if p.len() != 2 {
                return Err(bad());
            }
            *o = u8::from_str_radix(p, 16).map_err(|_| bad())?;
        }
        if parts.next().is_some() {
            return Err(bad());
        }
        Ok(MacAddr(out))
    }
}

impl serde::Serialize for MacAddr {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> serde::Deserialize<'de> for MacAddr {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

/// An IEEE 802.1Q priority (PCP), 0..=7.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default, serde::Serialize)]
#[serde(transparent)]
pub struct Priority(u8);

impl Priority {
    /// Largest priority value.
    pub const MAX: u8 = 7;

    /// `Ok` for 0..=7, else [`Error::InvalidPriority`].
    pub const fn try_new(p: u8) -> Result<Priority, Error> {
        if p <= Self::MAX {
            Ok(Priority(p))
        } else {
            Err(Error::InvalidPriority(p))
        }
    }

    /// Keeps the low three bits of `p` (for values read from 3-bit wire fields).
    pub const fn from_bits(p: u8) -> Priority {
        Priority(p & 0x07)
    }

    /// The priority number.
    pub const fn value(self) -> u8 {
        self.0
    }

    /// All eight priorities in order.
    pub fn all() -> impl Iterator<Item = Priority> {
        (0..=Self::MAX).map(Priority)
    }
}

impl fmt::Display for Priority {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

impl TryFrom<u8> for Priority {
    type Error = Error;
    fn try_from(p: u8) -> Result<Self, Error> {
        Priority::try_new(p)
    }
}

impl From<Priority> for u8 {
    fn from(p: Priority) -> u8 {
        p.0
    }
}

/// A set of priorities as the 8-bit vector used on the wire by PFC (class-enable vector, low
/// byte) and DCBX (PFC enable): bit `i` set = priority `i` is a member.
/// Displays as `{3,4}` and serializes as a list of priorities.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct PrioritySet(pub u8);

impl PrioritySet {
    /// The empty set.
    pub const EMPTY: PrioritySet = PrioritySet(0);

    /// Whether `p` is in the set.
    pub const fn contains(self, p: Priority) -> bool {
        self.0 & (1 << p.0) != 0
    }

    /// Adds `p`.
    pub fn insert(&mut self, p: Priority) {
        self.0 |= 1 << p.0;
    }

    /// Removes `p`.
    pub fn remove(&mut self, p: Priority) {
        self.0 &= !(1 << p.0);
    }

    /// The members in ascending order.
    pub fn iter(self) -> impl Iterator<Item = Priority> {
        Priority::all().filter(move |p| self.contains(*p))
    }

    /// The wire bitmap.
    pub const fn bits(self) -> u8 {
        self.0
    }
}

impl FromIterator<Priority> for PrioritySet {
    fn from_iter<I: IntoIterator<Item = Priority>>(it: I) -> Self {
        let mut s = PrioritySet::EMPTY;
        for p in it {
            s.insert(p);
        }
        s
    }
}

impl fmt::Display for PrioritySet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("{")?;
        for (i, p) in self.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{p}")?;
        }
        f.write_str("}")
    }
}

impl serde::Serialize for PrioritySet {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.iter())
    }
}

/// The Ethernet II header of a frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct EthernetRepr {
    /// Destination address.
    pub dst: MacAddr,
    /// Source address.
    pub src: MacAddr,
    /// EtherType (or 802.3 length, not interpreted here).
    pub ethertype: u16,
}

impl EthernetRepr {
    /// Splits `frame` into its header and payload (the payload may include padding).
    pub fn parse(frame: &[u8]) -> Result<(EthernetRepr, &[u8]), Error> {
        if frame.len() < HEADER_LEN {
            return Err(Error::Truncated { len: frame.len() });
        }
        let repr = EthernetRepr {
            dst: MacAddr::from_slice(&frame[field::DST]).unwrap_or_default(),
            src: MacAddr::from_slice(&frame[field::SRC]).unwrap_or_default(),
            ethertype: u16::from_be_bytes([frame[field::ETHERTYPE.start], frame[field::ETHERTYPE.start + 1]]),
        };
        Ok((repr, &frame[HEADER_LEN..]))
    }

    /// Like [`EthernetRepr::parse`] but also requires `ethertype`.
    pub fn parse_expect(frame: &[u8], ethertype: u16) -> Result<(EthernetRepr, &[u8]), Error> {
        let (eth, payload) = Self::parse(frame)?;
        if eth.ethertype != ethertype {
            return Err(Error::EtherType { found: eth.ethertype, expected: ethertype });
        }
        Ok((eth, payload))
    }

    /// Writes the 14-byte header at the start of `buf`.
    pub fn emit(&self, buf: &mut [u8]) -> Result<(), Error> {
        if buf.len() < HEADER_LEN {
            return Err(Error::BufferTooSmall { need: HEADER_LEN, have: buf.len() });
        }
        buf[field::DST].copy_from_slice(&self.dst.0);
        buf[field::SRC].copy_from_slice(&self.src.0);
        buf[field::ETHERTYPE].copy_from_slice(&self.ethertype.to_be_bytes());
        Ok(())
    }
}

impl fmt::Display for EthernetRepr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} > {} type {:#06x}", self.src, self.dst, self.ethertype)
    }
}

/// The tag control information (TCI) of an IEEE 802.1Q / 802.1ad VLAN tag.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct VlanTci {
    /// Priority code point.
    pub pcp: Priority,
    /// Drop eligible indicator.
    pub dei: bool,
    /// VLAN identifier (12 bits).
    pub vid: u16,
}

impl VlanTci {
    /// Splits the 16-bit TCI as it is on the wire.
    pub const fn from_bits(tci: u16) -> VlanTci {
        VlanTci { pcp: Priority::from_bits((tci >> 13) as u8), dei: tci & 0x1000 != 0, vid: tci & 0x0fff }
    }

    /// The 16-bit TCI (the VID's upper bits beyond 12 are dropped).
    pub const fn bits(self) -> u16 {
        ((self.pcp.0 as u16) << 13) | if self.dei { 0x1000 } else { 0 } | (self.vid & 0x0fff)
    }
}

/// What follows the MACs of an Ethernet frame once its VLAN tags are walked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VlanWalk {
    /// The EtherType after the last tag (the frame's EtherType when it has none).
    pub ether_type: u16,
    /// Offset of the payload that EtherType announces: [`HEADER_LEN`] + [`VLAN_TAG_LEN`] × tags.
    pub payload_offset: usize,
    /// The outermost tag's TCI, `None` for an untagged frame.
    pub outer: Option<VlanTci>,
    /// Tags on the frame (2 for QinQ).
    pub tags: usize,
}

/// Walks the VLAN tags of an Ethernet frame (every TPID of [`VLAN_TPIDS`], as many as there
/// are) to its inner EtherType. Errors: [`Error::Truncated`] when the frame is shorter than the
/// Ethernet header, [`Error::VlanTagTruncated`] when a tag is cut short. Reads only the header
/// and the tags, so a frame whose payload a capture cut is walked all the same.
pub fn walk_vlan_tags(frame: &[u8]) -> Result<VlanWalk, Error> {
    if frame.len() < HEADER_LEN {
        return Err(Error::Truncated { len: frame.len() });
    }
    let mut et = u16::from_be_bytes([frame[field::ETHERTYPE.start], frame[field::ETHERTYPE.start + 1]]);
    let mut w = VlanWalk { ether_type: et, payload_offset: HEADER_LEN, outer: None, tags: 0 };
    while VLAN_TPIDS.contains(&et) {
        let off = w.payload_offset;
        let Some(tag) = frame.get(off..off + VLAN_TAG_LEN) else {
            return Err(Error::VlanTagTruncated { tag: w.tags + 1, needed: off + VLAN_TAG_LEN, len: frame.len() });
        };
        w.outer.get_or_insert(VlanTci::from_bits(u16::from_be_bytes([tag[0], tag[1]])));
        et = u16::from_be_bytes([tag[2], tag[3]]);
        w.tags += 1;
        w.payload_offset += VLAN_TAG_LEN;
    }
    w.ether_type = et;
    Ok(w)
}

/// Length of a frame carrying `payload_len` bytes after the header, padded to the minimum.
pub const fn padded_frame_len(payload_len: usize) -> usize {
    let n = HEADER_LEN + payload_len;
    if n < MIN_FRAME_LEN {
        MIN_FRAME_LEN
    } else {
        n
    }
}

/// Writes header, lets `emit_payload` fill the payload, zero-pads to [`MIN_FRAME_LEN`] and
/// returns the frame length. `buf` must hold [`padded_frame_len`]`(payload_len)` bytes.
pub(crate) fn emit_padded(
    buf: &mut [u8],
    eth: &EthernetRepr,
    payload_len: usize,
    emit_payload: impl FnOnce(&mut [u8]),
) -> Result<usize, Error> {
    let total = padded_frame_len(payload_len);
    if buf.len() < total {
        return Err(Error::BufferTooSmall { need: total, have: buf.len() });
    }
    eth.emit(buf)?;
    emit_payload(&mut buf[HEADER_LEN..HEADER_LEN + payload_len]);
    buf[HEADER_LEN + payload_len..total].fill(0);
    Ok(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gaps(t: &[u64]) -> Vec<u64> {
        t.windows(2).map(|w| w[1] - w[0]).collect()
    }

    #[test]
    fn serialisation_time_counts_the_wire_overhead_and_rounds_up() {
        // 1500-byte frame + 24 bytes (preamble, FCS, IFG) at 1 Gbit/s: 12.192 µs.
        assert_eq!(serialisation_ns(1500, 1_000_000_000), 12_192);
        // Short frames are padded to 60 bytes: 84 bytes on the wire.
        assert_eq!(serialisation_ns(42, 1_000_000_000), 672);
        // 84 bytes at 3 Gbit/s = 224 ns exactly; at 7 Gbit/s 96 ns exactly; at 9 Gbit/s
        // 74.67 ns rounds up, so stamps are never closer than the line allows.
        assert_eq!(serialisation_ns(60, 3_000_000_000), 224);
        assert_eq!(serialisation_ns(60, 9_000_000_000), 75);
        // At D = 1000 a 1 Gbit/s port runs at 1 Mbit/s on the wall clock.
        assert_eq!(serialisation_ns(1000, 1_000_000), 8_192_000);
    }

    #[test]
    fn a_batch_delivered_at_once_is_spread_at_the_line_rate() {
        // The kernel hands over 64 frames of 1000 bytes seen by XDP within 3 µs (what the
        // issue measured as runs of identical stamps): a 1 Gbit/s line delivers one every
        // 8.192 µs.
        let ser = serialisation_ns(1000, 1_000_000_000);
        assert_eq!(ser, 8_192);
        let mut l = LineStamp::default();
        let seen: Vec<u64> = (0..64).map(|i| 1_000_000 + i * 47).collect();
        let t: Vec<u64> = seen.iter().map(|&s| l.stamp(s, ser)).collect();
        assert_eq!(t[0], 1_000_000, "the first frame keeps the time XDP saw it");
        assert!(gaps(&t).iter().all(|&g| g == ser), "{:?}", gaps(&t));
        // A frame seen after the line is free again keeps its own time.
        let later = t[63] + ser + 5_000;
        assert_eq!(l.stamp(later, ser), later);
    }

    #[test]
    fn frames_slower_than_the_line_keep_their_own_times() {
        // 100 µs apart at a line that needs 8.192 µs: every stamp is exactly when XDP saw it,
        // including frames of different lengths.
        let mut l = LineStamp::default();
        for i in 0..100u64 {
            let len = 60 + (i as u32 * 97) % 1400;
            let seen = 5_000_000 + i * 100_000 + (i * 7) % 13;
            assert_eq!(l.stamp(seen, serialisation_ns(len, 1_000_000_000)), seen, "frame {i}");
        }
    }

    #[test]
    fn mixed_lengths_are_spaced_by_the_previous_frames_time() {
        // Three frames seen together: a 1514-byte frame holds the line 12.304 µs, the 60-byte
        // frame after it 672 ns, then the last one follows.
        let r = 1_000_000_000;
        let mut l = LineStamp::default();
        let a = l.stamp(10_000, serialisation_ns(1514, r));
        let b = l.stamp(10_010, serialisation_ns(60, r));
        let c = l.stamp(10_020, serialisation_ns(1514, r));
        assert_eq!((a, b, c), (10_000, 10_000 + 12_304, 10_000 + 12_304 + 672));
        // Never closer than serialisation, never two equal stamps, whatever the input order
        // of times (a stamp seen "before" the previous one waits for the line).
        let mut l = LineStamp::default();
        let mut x = 0x2545f4914f6cdd1du64;
        let mut prev: Option<(u64, u64)> = None;
        for _ in 0..10_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let seen = 1_000_000 + (x % 5_000_000);
            let ser = serialisation_ns((x >> 40) as u32 % 9000, 400_000_000);
            let t = l.stamp(seen, ser);
            assert!(t >= seen);
            if let Some((pt, pser)) = prev {
                assert!(t >= pt + pser, "{t} closer than {pser} after {pt}");
            }
            prev = Some((t, ser));
        }
    }

    #[test]
    fn mac_parse_display_round_trip() {
        let m: MacAddr = "02:1A:ff:00:00:01".parse().unwrap();
        assert_eq!(m.0, [0x02, 0x1a, 0xff, 0, 0, 1]);
        assert_eq!(m.to_string(), "02:1a:ff:00:00:01");
        assert!("02:1a:ff:00:00".parse::<MacAddr>().is_err());
        assert!("02:1a:ff:00:00:01:02".parse::<MacAddr>().is_err());
        assert!("02:1a:fg:00:00:01".parse::<MacAddr>().is_err());
    }

    #[test]
    fn priority_bounds() {
        assert_eq!(Priority::try_new(7).unwrap().value(), 7);
        assert_eq!(Priority::try_new(8), Err(Error::InvalidPriority(8)));
    }

    #[test]
    fn priority_set_display_and_json() {
        let s: PrioritySet = [3, 4].iter().map(|&p| Priority::try_new(p).unwrap()).collect();
        assert_eq!(s.bits(), 0x18);
        assert_eq!(s.to_string(), "{3,4}");
        assert_eq!(serde_json::to_string(&s).unwrap(), "[3,4]");
    }

    /// An IPv4 frame (MACs 0x11 / 0x22, 26 payload bytes) with `tags` (TPID, TCI) in front of
    /// its EtherType.
    fn tagged(tags: &[(u16, u16)]) -> Vec<u8> {
        let mut f = vec![0x11; 6];
        f.extend_from_slice(&[0x22; 6]);
        for (tpid, tci) in tags {
            f.extend_from_slice(&tpid.to_be_bytes());
            f.extend_from_slice(&tci.to_be_bytes());
        }
        f.extend_from_slice(&[0x08, 0x00]);
        f.extend_from_slice(&[0x45; 26]);
        f
    }

    #[test]
    fn vlan_walk_of_untagged_single_and_qinq_frames() {
        let w = walk_vlan_tags(&tagged(&[])).unwrap();
        assert_eq!(w, VlanWalk { ether_type: 0x0800, payload_offset: 14, outer: None, tags: 0 });
        // 802.1Q, TCI 0x6065: PCP 3, DEI 0, VID 101.
        let w = walk_vlan_tags(&tagged(&[(0x8100, 0x6065)])).unwrap();
        let tci = VlanTci { pcp: Priority(3), dei: false, vid: 101 };
        assert_eq!(w, VlanWalk { ether_type: 0x0800, payload_offset: 18, outer: Some(tci), tags: 1 });
        // QinQ: 802.1ad S-tag (PCP 5, DEI 1, VID 0xabc) over a C-tag; the outer tag is reported.
        let w = walk_vlan_tags(&tagged(&[(0x88a8, 0xbabc), (0x8100, 0x0001)])).unwrap();
        let tci = VlanTci { pcp: Priority(5), dei: true, vid: 0xabc };
        assert_eq!(w, VlanWalk { ether_type: 0x0800, payload_offset: 22, outer: Some(tci), tags: 2 });
        // The pre-standard 0x9100 outer tag, and a tag whose EtherType is not IP.
        let mut f = tagged(&[(0x9100, 0x0002), (0x8100, 0x0003)]);
        f[20..22].copy_from_slice(&0x88ccu16.to_be_bytes());
        let w = walk_vlan_tags(&f).unwrap();
        assert_eq!((w.ether_type, w.payload_offset, w.tags, w.outer.map(|t| t.vid)), (0x88cc, 22, 2, Some(2)));
        // Any EtherType that is no TPID ends the walk, 0x8808 (MAC control) included.
        let mut f = tagged(&[]);
        f[12..14].copy_from_slice(&0x8808u16.to_be_bytes());
        assert_eq!(walk_vlan_tags(&f).unwrap().ether_type, 0x8808);
    }

    #[test]
    fn vlan_walk_of_a_truncated_frame_names_the_tag_at_every_length() {
        let f = tagged(&[(0x88a8, 0x0064), (0x8100, 0x00c8)]);
        for len in 0..f.len() {
            let got = walk_vlan_tags(&f[..len]);
            let want = match len {
                0..=13 => Err(Error::Truncated { len }),
                14..=17 => Err(Error::VlanTagTruncated { tag: 1, needed: 18, len }),
                18..=21 => Err(Error::VlanTagTruncated { tag: 2, needed: 22, len }),
                _ => Ok(VlanWalk {
                    ether_type: 0x0800,
                    payload_offset: 22,
                    outer: Some(VlanTci::from_bits(0x0064)),
                    tags: 2,
                }),
            };
            assert_eq!(got, want, "{len} bytes");
            if let Err(e) = got {
                let (needed, have) = e.truncation().unwrap();
                assert_eq!(have, len);
                assert!(needed > len, "{e}");
            }
        }
        assert_eq!(
            Error::VlanTagTruncated { tag: 2, needed: 22, len: 20 }.to_string(),
            "VLAN tag 2 truncated: 20 bytes, the tag needs 22"
        );
        assert_eq!(Error::InvalidPriority(9).truncation(), None);
    }

    #[test]
    fn vlan_tci_round_trips_its_bits() {
        for tci in [0u16, 0x0fff, 0x1000, 0xe000, 0x6065, 0xffff] {
            assert_eq!(VlanTci::from_bits(tci).bits(), tci);
        }
        assert_eq!(VlanTci::from_bits(0xf00d), VlanTci { pcp: Priority(7), dei: true, vid: 0x00d });
    }

    use proptest::prelude::{any, prop_assert_eq, Strategy};

    proptest::proptest! {
        /// The walk agrees with etherparse's slicer (an independent VLAN parser) on up to three
        /// tags of any TPID and TCI: the inner EtherType, where its payload starts, the outer
        /// tag's PCP / DEI / VID and the number of tags.
        #[test]
        fn vlan_walk_agrees_with_etherparse(
            tags in proptest::collection::vec((0usize..3, any::<u16>()), 0..=3),
            // Neither a TPID nor MACsec (0x88e5), another link extension of etherparse's.
            et in any::<u16>().prop_filter("not a link extension", |e| !VLAN_TPIDS.contains(e) && *e != 0x88e5),
        ) {
            use etherparse::{LaxLinkExtSlice, LaxSlicedPacket};
            let tags: Vec<(u16, u16)> = tags.iter().map(|&(i, tci)| (VLAN_TPIDS[i], tci)).collect();
            let mut f = tagged(&tags);
            let at = HEADER_LEN + VLAN_TAG_LEN * tags.len() - 2;
            f[at..at + 2].copy_from_slice(&et.to_be_bytes());
            let w = walk_vlan_tags(&f).unwrap();
            let sp = LaxSlicedPacket::from_ethernet(&f).unwrap();
            let p = sp.ether_payload().unwrap();
            prop_assert_eq!(w.ether_type, p.ether_type.0);
            prop_assert_eq!(w.payload_offset, f.len() - p.payload.len());
            prop_assert_eq!(w.tags, sp.link_exts.len());
            let outer = sp.link_exts.first().map(|e| match e {
                LaxLinkExtSlice::Vlan(v) => {
                    (v.priority_code_point().value(), v.drop_eligible_indicator(), v.vlan_identifier().value())
                }
                other => panic!("{other:?}"),
            });
            prop_assert_eq!(w.outer.map(|t| (t.pcp.value(), t.dei, t.vid)), outer);
        }
    }

    #[test]
    fn header_parse_rejects_short_and_wrong_type() {
        assert_eq!(EthernetRepr::parse(&[0; 13]), Err(Error::Truncated { len: 13 }));
        let mut f = [0u8; 14];
        f[12] = 0x08;
        assert!(matches!(
            EthernetRepr::parse_expect(&f, ETHERTYPE_LLDP),
            Err(Error::EtherType { found: 0x0800, expected: 0x88cc })
        ));
    }
}

/// Why [`emit_ip_header`] wrote nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum IpHeaderError {
    /// The payload does not fit IPv4's total length.
    TooBig,
    /// Source and destination of different families.
    MixedFamilies,
}

/// Writes the IPv4 header (20 bytes, DF set, checksum computed) or IPv6 header (40 bytes) of a
/// packet of `payload_len` bytes of `protocol` into `ip` (exactly the header's length), the
/// DSCP's 6 bits and the ECN bits as given; returns the EtherType to carry it. The RoCEv2 and
/// UET frame builders share it.
#[allow(clippy::too_many_arguments)]
pub(crate) fn emit_ip_header(
    ip: &mut [u8],
    src: core::net::IpAddr,
    dst: core::net::IpAddr,
    dscp: u8,
    ecn: etherparse::IpEcn,
    ttl: u8,
    flow_label: u32,
    protocol: etherparse::IpNumber,
    payload_len: u16,
) -> Result<etherparse::EtherType, IpHeaderError> {
    use core::net::IpAddr;
    match (src, dst) {
        (IpAddr::V4(s), IpAddr::V4(d)) => {
            let mut h = etherparse::Ipv4Header::new(payload_len, ttl, protocol, s.octets(), d.octets())
                .map_err(|_| IpHeaderError::TooBig)?;
            h.dscp = etherparse::IpDscp::try_new(dscp & 0x3f).unwrap_or(etherparse::IpDscp::ZERO);
            h.ecn = ecn;
            h.dont_fragment = true;
            h.header_checksum = h.calc_header_checksum();
            ip.copy_from_slice(&h.to_bytes());
            Ok(etherparse::EtherType::IPV4)
        }
        (IpAddr::V6(s), IpAddr::V6(d)) => {
            let h = etherparse::Ipv6Header {
                traffic_class: ((dscp & 0x3f) << 2) | ecn.value(),
                flow_label: etherparse::Ipv6FlowLabel::try_new(flow_label & 0xfffff)
                    .unwrap_or(etherparse::Ipv6FlowLabel::ZERO),
                payload_length: payload_len,
                next_header: protocol,
                hop_limit: ttl,
                source: s.octets(),
                destination: d.octets(),
            };
            ip.copy_from_slice(&h.to_bytes());
            Ok(etherparse::EtherType::IPV6)
        }
        _ => Err(IpHeaderError::MixedFamilies),
    }
}
