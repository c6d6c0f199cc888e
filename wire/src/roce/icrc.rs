//! The RoCEv2 Invariant CRC (ICRC), IBTA Annex A17 "RoCEv2" §A17.3.3 (with vol. 1 §7.8.1).
//!
//! The ICRC is the Ethernet CRC-32 (polynomial 0x04C11DB7, reflected, initial value and final
//! XOR 0xFFFFFFFF) over:
//!
//! ```text
//! 8 bytes 0xFF          stands in for the InfiniBand LRH ("64 bits of ones")
//! IP header             variant fields set to all ones:
//!                         IPv4: Type of Service (DSCP+ECN), TTL, header checksum
//!                         IPv6: traffic class, flow label, hop limit
//! UDP header            checksum set to 0xFFFF
//! BTH                   the FECN/BECN/resv6 byte (formerly resv8a) set to 0xFF
//! extension headers, payload and pad bytes, as they are (every extension header of every
//!                       opcode, DETH of UD included: none has a variant field)
//! ```
//!
//! and it is transmitted least significant byte first (the CRC register's natural order, as
//! Ethernet's FCS), i.e. `icrc.to_le_bytes()` sits in the last 4 bytes of the UDP payload.
//!
//! The masks match two public implementations we checked against:
//! - Linux `drivers/infiniband/sw/rxe/rxe_icrc.c` (`rxe_icrc_hdr`: `ip4h->ttl = 0xff;
//!   ip4h->check = CSUM_MANGLED_0; ip4h->tos = 0xff;` / `memset(ip6h->flow_lbl, 0xff, ..);
//!   ip6h->priority = 0xf; ip6h->hop_limit = 0xff;` / `udph->check = CSUM_MANGLED_0;`
//!   / `bth->qpn |= cpu_to_be32(~BTH_QPN_MASK);`, CRC seeded with 0xdebb20e3, which is the
//!   CRC register after eight 0xff bytes);
//! - scapy `scapy/contrib/roce.py` (`BTH.compute_icrc`: `Raw(b'\xff' * 8) / ip` with
//!   `chksum = 0xffff`, `ttl = 0xff`, `tos = 0xff`, UDP `chksum = 0xffff`, `fecn = becn = 1`,
//!   `resv6 = 0xff`; packed with `struct.pack("!I", icrc)[::-1]`).
//!
//! The computation allocates nothing: masked copies of the fixed headers live on the stack.

use super::{bth, Error, Layer};

/// CRC-32 as used by Ethernet and the ICRC (zlib's `crc32`): `crc32fast` folds with
/// carry-less multiplication (PCLMULQDQ) where the CPU has it, several times the throughput of
/// slice-by-16 tables, which it falls back to otherwise. Every frame a host sends or receives
/// runs it over the whole packet (17 % of a host emulator's CPU with the tables).
type Crc32 = crc32fast::Hasher;

/// Length of the ICRC trailer.
pub const LEN: usize = 4;

const UDP_LEN: usize = 8;
const IPV6_LEN: usize = 40;
const IPPROTO_UDP: u8 = 17;

/// Outcome of checking a received ICRC.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum IcrcStatus {
    /// The stored ICRC equals the computed one (the value).
    Good(u32),
    /// The stored ICRC differs.
    Bad { expected: u32, found: u32 },
    /// The capture's snap length cut the frame before the ICRC: `captured` of the `orig_len`
    /// bytes the frame had on the wire were recorded, so the ICRC could not be checked.
    NotCaptured { captured: usize, orig_len: usize },
    /// RoCE v1: the ICRC (`stored`, as on the wire) was not verified. Its coverage starts at
    /// the GRH instead of the IP header, and no independent implementation we test against
    /// (scapy, tshark) computes it, so this crate reports it unchecked rather than guess.
    NotChecked { stored: u32 },
}

impl IcrcStatus {
    /// True when the ICRC matched.
    pub fn is_good(&self) -> bool {
        matches!(self, IcrcStatus::Good(_))
    }
}

/// An ICRC as Wireshark's "Invariant CRC" (`infiniband.invariant.crc`) shows it: the four
/// bytes in the order they are on the wire, read as one big-endian number. The CRC register
/// value this module computes is sent least significant byte first, so this is its byte swap.
pub fn wire_order(v: u32) -> u32 {
    u32::from_be_bytes(v.to_le_bytes())
}

/// Values are printed in wire order ([`wire_order`]), as Wireshark prints them.
impl core::fmt::Display for IcrcStatus {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            IcrcStatus::Good(v) => write!(f, "good (0x{:08x})", wire_order(*v)),
            IcrcStatus::Bad { expected, found } => {
                write!(f, "bad (expected 0x{:08x}, found 0x{:08x})", wire_order(*expected), wire_order(*found))
            }
            IcrcStatus::NotCaptured { captured, orig_len } => {
                write!(f, "not captured (frame cut at {captured} of {orig_len} bytes)")
            }
            IcrcStatus::NotChecked { .. } => f.write_str("not checked (RoCE v1)"),
        }
    }
}

fn trunc(layer: Layer, needed: usize, available: usize) -> Error {
    Error::Truncated { layer, needed, available }
}

/// Checks the UDP + BTH + ICRC minimum after an IP header of `ihl` bytes and returns the end of
/// the covered data (start of the ICRC).
fn covered_end(ip_packet: &[u8], ip_hlen: usize) -> Result<usize, Error> {
    let need = ip_hlen + UDP_LEN + bth::LEN + LEN;
    if ip_packet.len() < need {
        return Err(trunc(Layer::Icrc, need, ip_packet.len()));
    }
    Ok(ip_packet.len() - LEN)
}

fn digest_transport(digest: &mut Crc32, udp_and_rest: &[u8]) {
    let mut udp = [0u8; UDP_LEN];
    udp.copy_from_slice(&udp_and_rest[..UDP_LEN]);
    udp[6] = 0xff;
    udp[7] = 0xff;
    digest.update(&udp);
    let mut bth = [0u8; bth::LEN];
    bth.copy_from_slice(&udp_and_rest[UDP_LEN..UDP_LEN + bth::LEN]);
    bth[4] = 0xff;
    digest.update(&bth);
    digest.update(&udp_and_rest[UDP_LEN + bth::LEN..]);
}

/// ICRC of an IPv4 RoCEv2 packet. `ip_packet` starts at the IPv4 header and ends with the 4
/// ICRC bytes (whose value is ignored), i.e. it is exactly `total_length` bytes long.
pub fn icrc_ipv4(ip_packet: &[u8]) -> Result<u32, Error> {
    if ip_packet.len() < 20 {
        return Err(trunc(Layer::Ipv4, 20, ip_packet.len()));
    }
    if ip_packet[0] >> 4 != 4 {
        return Err(Error::IpVersion(ip_packet[0] >> 4));
    }
    let ihl = usize::from(ip_packet[0] & 0x0f) * 4;
    if ihl < 20 {
        return Err(Error::Ipv4HeaderLen(ihl));
    }
    let end = covered_end(ip_packet, ihl)?;
    let mut hdr = [0u8; 60];
    hdr[..ihl].copy_from_slice(&ip_packet[..ihl]);
    hdr[1] = 0xff; // DSCP + ECN
    hdr[8] = 0xff; // TTL
    hdr[10] = 0xff; // header checksum
    hdr[11] = 0xff;
    let mut d = Crc32::new();
    d.update(&[0xff; 8]);
    d.update(&hdr[..ihl]);
    digest_transport(&mut d, &ip_packet[ihl..end]);
    Ok(d.finalize())
}

/// ICRC of an IPv6 RoCEv2 packet. `ip_packet` starts at the IPv6 header (whose next header must
/// be UDP: RoCEv2 uses no extension headers) and ends with the 4 ICRC bytes.
pub fn icrc_ipv6(ip_packet: &[u8]) -> Result<u32, Error> {
    if ip_packet.len() < IPV6_LEN {
        return Err(trunc(Layer::Ipv6, IPV6_LEN, ip_packet.len()));
    }
    if ip_packet[0] >> 4 != 6 {
        return Err(Error::IpVersion(ip_packet[0] >> 4));
    }
    if ip_packet[6] != IPPROTO_UDP {
        return Err(Error::NotUdp(ip_packet[6]));
    }
    let end = covered_end(ip_packet, IPV6_LEN)?;
    let mut hdr = [0u8; IPV6_LEN];
    hdr.copy_from_slice(&ip_packet[..IPV6_LEN]);
    hdr[0] |= 0x0f; // traffic class, high nibble
    hdr[1] = 0xff; // traffic class low nibble + flow label
    hdr[2] = 0xff;
    hdr[3] = 0xff;
    hdr[7] = 0xff; // hop limit
    let mut d = Crc32::new();
    d.update(&[0xff; 8]);
    d.update(&hdr);
    digest_transport(&mut d, &ip_packet[IPV6_LEN..end]);
    Ok(d.finalize())
}

/// ICRC of an IPv4 or IPv6 RoCEv2 packet, chosen by the version nibble.
pub fn icrc(ip_packet: &[u8]) -> Result<u32, Error> {
    match ip_packet.first().map(|b| b >> 4) {
        Some(4) => icrc_ipv4(ip_packet),
        Some(6) => icrc_ipv6(ip_packet),
        Some(v) => Err(Error::IpVersion(v)),
        None => Err(trunc(Layer::Ipv4, 20, 0)),
    }
}

/// The ICRC value stored in the last 4 bytes of `ip_packet` (little-endian on the wire).
pub fn stored(ip_packet: &[u8]) -> Result<u32, Error> {
    let n = ip_packet.len();
    if n < LEN {
        return Err(trunc(Layer::Icrc, LEN, n));
    }
    let mut b = [0u8; LEN];
    b.copy_from_slice(&ip_packet[n - LEN..]);
    Ok(u32::from_le_bytes(b))
}

/// Compute the ICRC of `ip_packet` (IPv4 or IPv6) and compare it with the stored one.
pub fn verify(ip_packet: &[u8]) -> Result<IcrcStatus, Error> {
    let expected = icrc(ip_packet)?;
    let found = stored(ip_packet)?;
    Ok(if expected == found { IcrcStatus::Good(found) } else { IcrcStatus::Bad { expected, found } })
}

/// Compute the ICRC of `ip_packet` and write it into its last 4 bytes.
pub fn fill(ip_packet: &mut [u8]) -> Result<u32, Error> {
    let v = icrc(ip_packet)?;
    let n = ip_packet.len();
    ip_packet[n - LEN..].copy_from_slice(&v.to_le_bytes());
    Ok(v)
}
