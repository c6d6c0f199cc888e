//! Interpretation of the 8-byte [`Decision`] header the XDP program prepends to every frame it
//! redirects to a port's AF_XDP socket (`dataplane_common::Decision`, in-band because copy-mode
//! AF_XDP does not carry XDP metadata).
//!
//! Descriptors come from the kernel but their contents are only as trustworthy as the program
//! that wrote them: a frame that bypassed the program, a stale program version or a bug must
//! not crash the daemon. Every field is range-checked here; anything odd is [`Rx::Invalid`].
use dataplane_common::{kind, limits::NUM_TC, Decision};

/// Shortest Ethernet frame we accept after the header (destination, source, EtherType).
pub const MIN_ETH: usize = 14;

/// What to do with a received descriptor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rx {
    /// Routed frame: rewrite and enqueue on `(egress_port, tc)` towards next hop `nexthop`.
    Forward { egress_port: usize, tc: u8, nexthop: usize },
    /// LLDP for the (future) LLDP/DCBX agent.
    Lldp,
    /// PAUSE / PFC for the (future) PFC engine.
    MacControl,
    /// No usable Decision: counted as invalid and dropped.
    Invalid(Invalid),
}

/// Why a descriptor was rejected.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Invalid {
    /// Shorter than the header plus an Ethernet header.
    Short(usize),
    /// Wrong magic: the frame did not come through our XDP program.
    Magic,
    /// Unknown `kind`.
    Kind(u8),
    /// Egress port outside the switch's port list.
    Port(u8),
    /// Next hop outside the switch's next-hop table.
    NextHop(u16),
    /// Next hop does not leave through the chosen egress port.
    NextHopPort { nexthop: u16, egress_port: u8 },
    /// Traffic class above 7.
    Tc(u8),
}

/// Validates the header at the start of `buf` (header + Ethernet frame).
/// `nexthop_ports[i]` is the egress port of next hop `i`.
pub fn classify(buf: &[u8], nports: usize, nexthop_ports: &[u32]) -> Rx {
    if buf.len() < Decision::LEN + MIN_ETH {
        return Rx::Invalid(Invalid::Short(buf.len()));
    }
    let Some(d) = Decision::from_bytes(buf) else {
        return Rx::Invalid(Invalid::Magic);
    };
    match d.kind {
        kind::FORWARD => {
            if d.egress_port as usize >= nports {
                return Rx::Invalid(Invalid::Port(d.egress_port));
            }
            let Some(&nh_port) = nexthop_ports.get(d.nexthop as usize) else {
                return Rx::Invalid(Invalid::NextHop(d.nexthop));
            };
            if nh_port != d.egress_port as u32 {
                return Rx::Invalid(Invalid::NextHopPort { nexthop: d.nexthop, egress_port: d.egress_port });
            }
            if d.tc as usize >= NUM_TC {
                return Rx::Invalid(Invalid::Tc(d.tc));
            }
            Rx::Forward { egress_port: d.egress_port as usize, tc: d.tc, nexthop: d.nexthop as usize }
        }
        kind::LLDP => Rx::Lldp,
        kind::MAC_CONTROL => Rx::MacControl,
        k => Rx::Invalid(Invalid::Kind(k)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(d: Decision, eth_len: usize) -> Vec<u8> {
        let mut v = d.to_bytes().to_vec();
        v.extend(std::iter::repeat_n(0xab, eth_len));
        v
    }

    fn fwd(egress: u8, tc: u8, nh: u16) -> Decision {
        Decision { magic: Decision::MAGIC, kind: kind::FORWARD, tc, ingress_port: 0, egress_port: egress, nexthop: nh }
    }

    const NH: [u32; 3] = [0, 1, 1];

    #[test]
    fn valid_forward() {
        assert_eq!(classify(&frame(fwd(1, 3, 2), 60), 2, &NH), Rx::Forward { egress_port: 1, tc: 3, nexthop: 2 });
        assert_eq!(classify(&frame(fwd(0, 7, 0), 14), 2, &NH), Rx::Forward { egress_port: 0, tc: 7, nexthop: 0 });
    }

    #[test]
    fn control_kinds() {
        let mut d = fwd(0, 0, 0);
        d.kind = kind::LLDP;
        assert_eq!(classify(&frame(d, 60), 2, &NH), Rx::Lldp);
        d.kind = kind::MAC_CONTROL;
        assert_eq!(classify(&frame(d, 60), 2, &NH), Rx::MacControl);
    }

    #[test]
    fn malformed_descriptors() {
        // Every truncation, including an empty descriptor.
        let full = frame(fwd(1, 3, 2), 14);
        for cut in 0..full.len() {
            assert_eq!(classify(&full[..cut], 2, &NH), Rx::Invalid(Invalid::Short(cut)));
        }
        // A plain Ethernet frame with no header in front.
        let mut raw = vec![0xffu8; 6];
        raw.extend([2, 0, 0, 0, 0, 1, 0x08, 0x00]);
        raw.extend([0x45; 46]);
        assert_eq!(classify(&raw, 2, &NH), Rx::Invalid(Invalid::Magic));
        let mut d = fwd(1, 3, 2);
        d.kind = 9;
        assert_eq!(classify(&frame(d, 60), 2, &NH), Rx::Invalid(Invalid::Kind(9)));
        assert_eq!(classify(&frame(fwd(2, 3, 1), 60), 2, &NH), Rx::Invalid(Invalid::Port(2)));
        assert_eq!(classify(&frame(fwd(1, 3, 3), 60), 2, &NH), Rx::Invalid(Invalid::NextHop(3)));
        assert_eq!(
            classify(&frame(fwd(0, 3, 1), 60), 2, &NH),
            Rx::Invalid(Invalid::NextHopPort { nexthop: 1, egress_port: 0 })
        );
        assert_eq!(classify(&frame(fwd(1, 8, 1), 60), 2, &NH), Rx::Invalid(Invalid::Tc(8)));
    }

    #[test]
    fn arbitrary_bytes_never_panic() {
        // Deterministic pseudo-random descriptors (xorshift), many lengths.
        let mut x = 0x9e3779b97f4a7c15u64;
        for _ in 0..20_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let len = (x % 80) as usize;
            let mut buf: Vec<u8> = (0..len).map(|i| (x >> (i % 8 * 8)) as u8).collect();
            if x & 1 == 0 && len >= 2 {
                buf[..2].copy_from_slice(&Decision::MAGIC.to_ne_bytes());
            }
            let _ = classify(&buf, 2, &NH);
        }
    }
}
