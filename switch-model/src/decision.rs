//! Interpretation of the 8-byte [`Decision`] the XDP program writes as the XDP metadata of
//! every frame it redirects to a port's AF_XDP socket (`dataplane_common::Decision`; copy-mode
//! AF_XDP copies it into the UMEM chunk right in front of the frame, read with
//! [`afxdp::metadata`]).
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
    /// Shorter than an Ethernet header.
    Short(usize),
    /// No metadata, or wrong magic: the frame did not come through our XDP program.
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

/// Validates the metadata `meta` found in front of a received frame of `frame_len` bytes
/// (`None`: the frame had no room for metadata). `nexthop_ports[i]` is the egress port of next
/// hop `i`.
pub fn classify(meta: Option<[u8; Decision::LEN]>, frame_len: usize, nports: usize, nexthop_ports: &[u32]) -> Rx {
    if frame_len < MIN_ETH {
        return Rx::Invalid(Invalid::Short(frame_len));
    }
    let Some(d) = meta.and_then(|m| Decision::from_bytes(&m)) else {
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

    fn meta(d: Decision) -> Option<[u8; Decision::LEN]> {
        Some(d.to_bytes())
    }

    fn fwd(egress: u8, tc: u8, nh: u16) -> Decision {
        Decision { magic: Decision::MAGIC, kind: kind::FORWARD, tc, ingress_port: 0, egress_port: egress, nexthop: nh }
    }

    const NH: [u32; 3] = [0, 1, 1];

    #[test]
    fn valid_forward() {
        assert_eq!(classify(meta(fwd(1, 3, 2)), 60, 2, &NH), Rx::Forward { egress_port: 1, tc: 3, nexthop: 2 });
        assert_eq!(classify(meta(fwd(0, 7, 0)), 14, 2, &NH), Rx::Forward { egress_port: 0, tc: 7, nexthop: 0 });
    }

    #[test]
    fn control_kinds() {
        let mut d = fwd(0, 0, 0);
        d.kind = kind::LLDP;
        assert_eq!(classify(meta(d), 60, 2, &NH), Rx::Lldp);
        d.kind = kind::MAC_CONTROL;
        assert_eq!(classify(meta(d), 60, 2, &NH), Rx::MacControl);
    }

    #[test]
    fn malformed_descriptors() {
        // Every frame shorter than an Ethernet header, including an empty descriptor, even
        // with valid metadata.
        for len in 0..MIN_ETH {
            assert_eq!(classify(meta(fwd(1, 3, 2)), len, 2, &NH), Rx::Invalid(Invalid::Short(len)));
        }
        // No room for metadata in front of the frame.
        assert_eq!(classify(None, 60, 2, &NH), Rx::Invalid(Invalid::Magic));
        // Headroom that the program did not write: zeros, or the start of a plain frame.
        assert_eq!(classify(Some([0; Decision::LEN]), 60, 2, &NH), Rx::Invalid(Invalid::Magic));
        assert_eq!(classify(Some([0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 2, 0]), 60, 2, &NH), Rx::Invalid(Invalid::Magic));
        let mut d = fwd(1, 3, 2);
        d.kind = 9;
        assert_eq!(classify(meta(d), 60, 2, &NH), Rx::Invalid(Invalid::Kind(9)));
        assert_eq!(classify(meta(fwd(2, 3, 1)), 60, 2, &NH), Rx::Invalid(Invalid::Port(2)));
        assert_eq!(classify(meta(fwd(1, 3, 3)), 60, 2, &NH), Rx::Invalid(Invalid::NextHop(3)));
        assert_eq!(
            classify(meta(fwd(0, 3, 1)), 60, 2, &NH),
            Rx::Invalid(Invalid::NextHopPort { nexthop: 1, egress_port: 0 })
        );
        assert_eq!(classify(meta(fwd(1, 8, 1)), 60, 2, &NH), Rx::Invalid(Invalid::Tc(8)));
    }

    #[test]
    fn arbitrary_bytes_never_panic() {
        // Deterministic pseudo-random metadata (xorshift) and frame lengths.
        let mut x = 0x9e3779b97f4a7c15u64;
        for _ in 0..20_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let len = (x % 80) as usize;
            let mut m = x.to_ne_bytes();
            if x & 1 == 0 {
                m[..2].copy_from_slice(&Decision::MAGIC.to_ne_bytes());
            }
            let _ = classify((x & 6 != 0).then_some(m), len, 2, &NH);
        }
    }
}
