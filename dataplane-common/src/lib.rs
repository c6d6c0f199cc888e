//! Types and pure functions shared by the rocefab XDP program (`dataplane-ebpf`) and the
//! userspace switch daemon (`dataplane-user`).
//!
//! This is the eBPF ABI only: everything is `#![no_std]`, `#[repr(C)]` and free of implicit
//! padding so it can live in BPF maps. The `user` feature adds nothing but the `aya::Pod` impls
//! the loaders need; the serde configurations live in `rocefab-contracts`.
#![cfg_attr(not(feature = "user"), no_std)]

mod hash;
mod wred;

pub use hash::{ecmp_index, flow_hash};
pub use wred::{ecn, wred_hit, wred_probability, xorshift32, WredParams};

/// Limits shared by the maps on both sides.
pub mod limits {
    /// Ports per switch (size of the port-indexed maps, XSK map included).
    pub const MAX_PORTS: u32 = 64;
    /// Traffic classes / egress queues per port (IEEE 802.1Q priorities 0..=7).
    pub const NUM_TC: usize = 8;
    /// Next hops in one ECMP group.
    pub const MAX_GROUP_MEMBERS: usize = 16;
    /// Next-hop groups per switch.
    pub const MAX_GROUPS: u32 = 1024;
    /// Next hops per switch.
    pub const MAX_NEXTHOPS: u32 = 1024;
    /// Routes per address family.
    pub const MAX_ROUTES: u32 = 4096;
    /// Flows in the flowlet table (LRU: the least recently seen flow is evicted).
    pub const MAX_FLOWLETS: u32 = 16384;
}

/// EtherTypes the XDP program recognises.
pub mod ethertype {
    pub const IPV4: u16 = 0x0800;
    pub const IPV6: u16 = 0x86dd;
    pub const VLAN: u16 = 0x8100;
    pub const QINQ: u16 = 0x88a8;
    pub const ARP: u16 = 0x0806;
    /// LLDP (IEEE 802.1AB).
    pub const LLDP: u16 = 0x88cc;
    /// MAC control: 802.3x PAUSE and 802.1Qbb PFC.
    pub const MAC_CONTROL: u16 = 0x8808;
}

/// Ultra Ethernet Transport's encapsulations as the ECMP hash sees them (UEC Specification 1.0;
/// field by field in docs/research/uet-wire-formats.md §1).
pub mod uet {
    /// IP protocol of UET's native encapsulation: uet-ref-prov `uet_pkt_hdr.h` `UET_IPPROTO`
    /// (line 29, "for UET over IP encap"), an RFC 3692 experimental number.
    pub const IPPROTO: u8 = 253;
    /// UDP destination port of UET (IANA; xdp2 `src/include/uet/pds.h` `UET_UDP_PORT_NUM`,
    /// Wireshark `packet-uet.c` `UDP_PORT_UET`): the UDP source port carries the entropy.
    pub const UDP_PORT: u16 = 4793;
    /// The entropy header right after the IP header on the native path: entropy (2 bytes,
    /// big-endian), reserved (2) (xdp2 `pds.h` `struct uet_entropy_hdr`, uet-ref-prov
    /// `struct uet_entropy`; Wireshark `dissect_uet_entropy`).
    pub const ENTROPY_HLEN: usize = 4;
}

/// Default DSCP → traffic-class mapping (the NX-OS reference design of the book, ch. 11; docs/src/lossless-qos.md).
pub mod dscp {
    /// RoCEv2 data.
    pub const ROCE: u8 = 24;
    /// Congestion notification packets.
    pub const CNP: u8 = 48;
    /// Traffic class of RoCEv2 data (lossless, PFC priority 3).
    pub const TC_ROCE: u8 = 3;
    /// Traffic class of CNPs (strict priority).
    pub const TC_CNP: u8 = 7;
    /// Traffic class of everything else.
    pub const TC_DEFAULT: u8 = 0;

    /// Default traffic class for a DSCP value: 24 → 3, 48 → 7, anything else → 0.
    #[inline(always)]
    pub const fn default_tc(dscp: u8) -> u8 {
        match dscp {
            ROCE => TC_ROCE,
            CNP => TC_CNP,
            _ => TC_DEFAULT,
        }
    }

    /// The default 64-entry table, as loaded into the `DSCP_TC` map.
    pub const fn default_table() -> [u8; 64] {
        let mut t = [0u8; 64];
        let mut i = 0;
        while i < 64 {
            t[i] = default_tc(i as u8);
            i += 1;
        }
        t
    }
}

/// What the XDP program decided for a frame it redirected to the port's AF_XDP socket.
///
/// The program writes these 8 bytes as the end of the frame's XDP metadata ([`XdpMeta`],
/// `bpf_xdp_adjust_meta(-16)`).
/// Copy-mode AF_XDP (all veth offers) copies the metadata along: it sits in the UMEM chunk
/// right in front of the frame, [`Decision::LEN`] bytes before the address of the received
/// descriptor, which addresses the Ethernet frame itself — so a forwarded frame is transmitted
/// from where it was received, never moved.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Decision {
    /// [`Decision::MAGIC`], to catch frames that bypassed the program.
    pub magic: u16,
    /// One of [`kind`].
    pub kind: u8,
    /// Traffic class from the DSCP map (0 for non-IP kinds).
    pub tc: u8,
    /// Port index the frame arrived on.
    pub ingress_port: u8,
    /// Port index chosen by route + ECMP (only for [`kind::FORWARD`]).
    pub egress_port: u8,
    /// Next-hop id (index into the switch config's `nexthops`, only for [`kind::FORWARD`]).
    pub nexthop: u16,
}

impl Decision {
    pub const LEN: usize = 8;
    pub const MAGIC: u16 = 0xd3c1;

    /// Serialises to the on-wire (host byte order) layout the eBPF side writes.
    #[inline(always)]
    pub fn to_bytes(&self) -> [u8; 8] {
        let m = self.magic.to_ne_bytes();
        let n = self.nexthop.to_ne_bytes();
        [m[0], m[1], self.kind, self.tc, self.ingress_port, self.egress_port, n[0], n[1]]
    }

    /// Reads the header from the start of `buf`; `None` if too short or the magic is wrong.
    #[inline(always)]
    pub fn from_bytes(buf: &[u8]) -> Option<Self> {
        if buf.len() < Self::LEN {
            return None;
        }
        let d = Decision {
            magic: u16::from_ne_bytes([buf[0], buf[1]]),
            kind: buf[2],
            tc: buf[3],
            ingress_port: buf[4],
            egress_port: buf[5],
            nexthop: u16::from_ne_bytes([buf[6], buf[7]]),
        };
        (d.magic == Self::MAGIC).then_some(d)
    }
}

const _: () = assert!(core::mem::size_of::<Decision>() == Decision::LEN);

/// The XDP metadata the programs leave in front of a frame they redirect to an AF_XDP socket:
/// the time the program saw the frame, then the [`Decision`] (so the Decision ends where the
/// frame starts).
///
/// ```text
///  data_meta                              data
///  |  rx_ns: u64 (bpf_ktime_get_ns)  |  Decision (8)  |  Ethernet frame ...
/// ```
///
/// `rx_ns` is `bpf_ktime_get_ns()`, CLOCK_MONOTONIC: a capture stamps a received frame with
/// it rather than with the time the daemon took a whole batch off the RX ring (issue 21). The
/// host NIC program writes the same layout with [`kind::HOST`].
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct XdpMeta {
    /// CLOCK_MONOTONIC ns when the XDP program ran on the frame.
    pub rx_ns: u64,
    pub decision: Decision,
}

impl XdpMeta {
    /// Bytes of metadata (`bpf_xdp_adjust_meta(-LEN)`: a multiple of 4, at most 32).
    pub const LEN: usize = 16;

    /// The metadata bytes (host byte order) in the layout the programs write.
    #[inline(always)]
    pub fn to_bytes(&self) -> [u8; 16] {
        let mut b = [0u8; 16];
        b[..8].copy_from_slice(&self.rx_ns.to_ne_bytes());
        b[8..].copy_from_slice(&self.decision.to_bytes());
        b
    }

    /// Reads the metadata; `None` if too short or the Decision's magic is wrong.
    #[inline(always)]
    pub fn from_bytes(buf: &[u8]) -> Option<Self> {
        let ns = buf.get(..8)?;
        let decision = Decision::from_bytes(buf.get(8..)?)?;
        let rx_ns = u64::from_ne_bytes([ns[0], ns[1], ns[2], ns[3], ns[4], ns[5], ns[6], ns[7]]);
        Some(XdpMeta { rx_ns, decision })
    }
}

const _: () = assert!(core::mem::size_of::<XdpMeta>() == XdpMeta::LEN);
const _: () = assert!(XdpMeta::LEN.is_multiple_of(4) && XdpMeta::LEN <= 32);

/// Values of [`Decision::kind`].
pub mod kind {
    /// Routed IPv4/IPv6 frame: forward out of `egress_port` towards `nexthop`, queue `tc`.
    pub const FORWARD: u8 = 0;
    /// LLDP frame (0x88cc) for the LLDP/DCBX agent.
    pub const LLDP: u8 = 1;
    /// MAC control frame (0x8808: PAUSE / PFC) for the PFC engine.
    pub const MAC_CONTROL: u8 = 2;
    /// A frame the host NIC program (`rocefab_host_xdp`) redirected to the NIC emulator; only
    /// [`super::XdpMeta::rx_ns`] is meaningful.
    pub const HOST: u8 = 3;
}

/// A port as the XDP program sees it. Key of the `PORTS` map is the ingress ifindex.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct PortInfo {
    /// Index into the XSK map and into the switch config's `ports`.
    pub index: u32,
    /// [`PortInfo::SILENT`] or 0.
    pub flags: u32,
}

impl PortInfo {
    /// The port drops every frame it receives, counted `SILENT_DROPPED`, while its carrier stays
    /// up: a link that fails silently (a dead optic that keeps link), which only BFD notices.
    pub const SILENT: u32 = 1;
}

/// A next hop. `NEXTHOPS` map, indexed by next-hop id.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct NextHop {
    /// Egress port index.
    pub port: u32,
}

/// An ECMP next-hop group. `GROUPS` map, indexed by group id.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NextHopGroup {
    /// Number of valid entries in `members` (1..=MAX_GROUP_MEMBERS).
    pub count: u32,
    /// Next-hop ids.
    pub members: [u32; limits::MAX_GROUP_MEMBERS],
}

impl Default for NextHopGroup {
    fn default() -> Self {
        NextHopGroup { count: 0, members: [0; limits::MAX_GROUP_MEMBERS] }
    }
}

/// Value of every route LPM entry (IPv4 key `[u8; 4]`, IPv6 key `[u8; 16]`, network order).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct RouteValue {
    /// Next-hop group id; [`RouteValue::LOCAL`] means "deliver to the switch's own stack" (XDP_PASS).
    pub group: u32,
}

impl RouteValue {
    pub const LOCAL: u32 = u32::MAX;
}

/// Per-switch parameters. `PARAMS` array map, single entry at index 0.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct SwitchParams {
    /// ECMP hash seed; a seed shared by all switches reproduces hash polarization.
    pub hash_seed: u32,
    /// Egress choice per traffic class (index tc): one of [`lb::mode`].
    pub lb_modes: [u8; limits::NUM_TC],
    pub _pad: u32,
    /// Flowlet gap δ in wall-clock ns (the topology's emulated gap × time dilation).
    pub flowlet_gap_ns: u64,
    /// Clock of the flowlet table for `BPF_PROG_TEST_RUN` tests: when non-zero the program uses
    /// it instead of `bpf_ktime_get_ns` (which a test cannot set). Always 0 in a running switch.
    pub clock_override_ns: u64,
}

/// Per-port, per-CPU counters of the host XDP program (`HOST_COUNTERS` per-CPU array, index
/// `slot * host_counter::COUNT + id`).
pub mod host_counter {
    /// Frames seen on a known port.
    pub const RX: u32 = 0;
    /// RoCEv2 and UET frames (the NIC's transport, UDP 4791 / 4793 or IP protocol 253)
    /// redirected to the port's socket (the name stays `roce`).
    pub const ROCE: u32 = 1;
    /// MAC control (PAUSE / PFC) frames redirected.
    pub const MAC_CONTROL: u32 = 2;
    /// Frames passed to the kernel stack.
    pub const PASS: u32 = 3;
    /// RoCEv2 / MAC control frames dropped because no socket was bound in the slot.
    pub const REDIRECT_FAILED: u32 = 4;
    /// RoCEv2 frames dropped by `rocefab_test_drop_nth`.
    pub const TEST_DROPPED: u32 = 5;
    /// RoCEv2 frames seen by `rocefab_test_drop_nth` (the per-CPU sequence it counts in).
    pub const TEST_SEEN: u32 = 6;
    /// Number of counters per port.
    pub const COUNT: u32 = 7;
    /// Names by id (Prometheus label values, reports).
    pub const NAMES: [&str; COUNT as usize] =
        ["rx", "roce", "mac_control", "pass", "redirect_failed", "test_dropped", "test_seen"];
}

/// Per-port, per-CPU counters kept by the XDP program. `COUNTERS` per-CPU array,
/// index = `port_index * counter::COUNT + counter id`.
pub mod counter {
    /// Frames seen on the port.
    pub const RX: u32 = 0;
    /// Routed frames redirected to AF_XDP.
    pub const FORWARDED: u32 = 1;
    /// No route for the destination.
    pub const ROUTE_MISS: u32 = 2;
    /// TTL / hop limit would expire (≤ 1).
    pub const TTL_EXPIRED: u32 = 3;
    /// Truncated or invalid headers.
    pub const MALFORMED: u32 = 4;
    /// LLDP frames steered to userspace.
    pub const LLDP: u32 = 5;
    /// MAC control (PAUSE/PFC) frames steered to userspace.
    pub const MAC_CONTROL: u32 = 6;
    /// Frames passed to the kernel (ARP, ND, IPv4/IPv6 multicast and traffic to the switch itself).
    pub const PASS: u32 = 7;
    /// bpf_redirect_map to the XSK failed (no socket bound).
    pub const REDIRECT_FAILED: u32 = 8;
    /// ECT packets marked CE by WRED (counted on the ingress port; the queue is the egress one).
    pub const ECN_MARKED: u32 = 9;
    /// Not-ECT packets WRED dropped where it would have marked an ECT one.
    pub const WRED_DROPPED: u32 = 10;
    /// Flowlets that left on another member than the flow's previous flowlet (flowlet and
    /// adaptive modes; counted on the ingress port).
    pub const FLOWLET_PATH_CHANGES: u32 = 11;
    /// Packets whose egress member was chosen per packet (spray modes; ingress port).
    pub const SPRAYED: u32 = 12;
    /// Frames dropped because the port fails silently ([`super::PortInfo::SILENT`]).
    pub const SILENT_DROPPED: u32 = 13;
    /// Frames dropped because their EtherType is none the switch knows (after at most one
    /// 802.1Q/802.1ad tag: IPv4, IPv6, ARP, LLDP, MAC control), as an ASIC drops what it cannot
    /// forward; a second tag and 802.3 length/LLC frames count here too.
    pub const UNKNOWN_ETHERTYPE: u32 = 14;
    /// Number of counters per port.
    pub const COUNT: u32 = 15;
    /// Prometheus-friendly names, indexed by counter id.
    pub const NAMES: [&str; COUNT as usize] = [
        "rx",
        "forwarded",
        "route_miss",
        "ttl_expired",
        "malformed",
        "lldp",
        "mac_control",
        "pass",
        "redirect_failed",
        "ecn_marked",
        "wred_dropped",
        "flowlet_path_changes",
        "sprayed_packets",
        "silent_dropped",
        "unknown_ethertype_dropped",
    ];
    /// Prometheus help strings, indexed by counter id.
    pub const HELP: [&str; COUNT as usize] = [
        "Frames the XDP program saw on the port",
        "Routed frames the XDP program redirected to the daemon",
        "Frames dropped in XDP for want of a route (or an empty next-hop group)",
        "Frames dropped in XDP because their TTL / hop limit would expire (<= 1)",
        "Frames dropped in XDP because their headers are truncated or invalid",
        "LLDP frames the XDP program redirected to the daemon",
        "MAC control (PAUSE/PFC) frames the XDP program redirected to the daemon",
        "Frames the XDP program passed to the switch namespace's kernel (ARP, ND, multicast, traffic to the switch itself)",
        "Frames dropped in XDP because no AF_XDP socket was bound for the port (or the metadata did not fit)",
        "ECT packets WRED marked CE at enqueue, counted on the ingress port",
        "Not-ECT packets WRED dropped at enqueue where it would have marked an ECT one, counted on the ingress port",
        "Flowlets that left on another member than the flow's previous flowlet, counted on the ingress port",
        "Packets whose egress member was chosen per packet (spray), counted on the ingress port",
        "Frames dropped in XDP because the port fails silently (rocefab fail link --silent)",
        "Frames dropped in XDP because their EtherType is none the switch handles (IPv4, IPv6, ARP, LLDP, MAC control, behind at most one 802.1Q/802.1ad tag)",
    ];
}

/// Index of egress queue (`port`, `tc`) in the `DEPTHS` array (entries of u64 bytes, published
/// by the data-plane thread, read by XDP).
#[inline(always)]
pub const fn depth_index(port: u32, tc: u32) -> u32 {
    port * limits::NUM_TC as u32 + tc
}

/// Entries of the `DEPTHS` array.
pub const DEPTHS_LEN: u32 = limits::MAX_PORTS * limits::NUM_TC as u32;

pub mod lb;

#[cfg(feature = "user")]
mod pod {
    // SAFETY: all of these are #[repr(C)], Copy, contain only integers, and have no padding
    // (sizes asserted below), so any bit pattern is valid and they can be copied to/from maps.
    unsafe impl aya::Pod for super::PortInfo {}
    // SAFETY: as above.
    unsafe impl aya::Pod for super::NextHop {}
    // SAFETY: as above.
    unsafe impl aya::Pod for super::NextHopGroup {}
    // SAFETY: as above.
    unsafe impl aya::Pod for super::RouteValue {}
    // SAFETY: as above.
    unsafe impl aya::Pod for super::SwitchParams {}
    // SAFETY: as above.
    unsafe impl aya::Pod for super::Decision {}
    // SAFETY: as above.
    unsafe impl aya::Pod for super::XdpMeta {}
    // SAFETY: as above.
    unsafe impl aya::Pod for super::WredParams {}
    // SAFETY: as above.
    unsafe impl aya::Pod for super::lb::Flowlet {}
    // SAFETY: as above.
    unsafe impl aya::Pod for super::lb::FlowKey {}
}

// The XDP program masks member indexes with MAX_GROUP_MEMBERS − 1.
const _: () = assert!(limits::MAX_GROUP_MEMBERS.is_power_of_two());
const _: () = assert!(core::mem::size_of::<PortInfo>() == 8);
const _: () = assert!(core::mem::size_of::<NextHop>() == 4);
const _: () = assert!(core::mem::size_of::<NextHopGroup>() == 4 + 4 * limits::MAX_GROUP_MEMBERS);
const _: () = assert!(core::mem::size_of::<RouteValue>() == 4);
const _: () = assert!(core::mem::size_of::<SwitchParams>() == 32);
const _: () = assert!(core::mem::size_of::<lb::Flowlet>() == 16);
const _: () = assert!(core::mem::size_of::<lb::FlowKey>() == 40);
const _: () = assert!(core::mem::size_of::<WredParams>() == 24);

#[cfg(test)]
mod tests {
    use super::*;

    fn wred(min: u32, max: u32, percent: u8) -> WredParams {
        WredParams {
            queues: 1 << 3,
            min_bytes: min,
            max_bytes: max,
            pmax_q32: WredParams::pmax_from_percent(percent),
            seed: 1,
            _pad: 0,
        }
    }

    #[test]
    fn wred_curve_is_zero_below_min_linear_to_pmax_and_one_from_max() {
        let p = wred(150_000, 3_000_000, 7);
        assert_eq!(wred_probability(0, &p), 0);
        assert_eq!(wred_probability(149_999, &p), 0);
        assert_eq!(wred_probability(150_000, &p), 0);
        let mid = wred_probability(1_575_000, &p) as f64 / 2f64.powi(32);
        assert!((mid - 0.035).abs() < 1e-6, "{mid}");
        let near_max = wred_probability(2_999_999, &p) as f64 / 2f64.powi(32);
        assert!((near_max - 0.07).abs() < 1e-6, "{near_max}");
        assert_eq!(wred_probability(3_000_000, &p), u32::MAX);
        assert_eq!(wred_probability(u64::MAX, &p), u32::MAX);
        assert!(!wred_hit(0, 0));
        assert!(wred_hit(u32::MAX, u32::MAX));
        assert_eq!(WredParams::pmax_from_percent(100), u32::MAX);
        assert_eq!(WredParams::pmax_from_percent(0), 0);
    }

    #[test]
    fn seeded_xorshift_marks_at_the_curve_rate() {
        // 200 000 draws at 3.5 %: the binomial σ is 82 marks; allow 5σ.
        let p = wred(150_000, 3_000_000, 7);
        let prob = wred_probability(1_575_000, &p);
        let mut x = 0x2545_f491u32;
        let hits = (0..200_000).filter(|_| {
            x = xorshift32(x);
            wred_hit(prob, x)
        });
        let n = hits.count() as f64;
        assert!((n - 7000.0).abs() < 5.0 * 82.0, "{n}");
    }

    #[test]
    fn default_dscp_map() {
        let t = dscp::default_table();
        assert_eq!(t[24], 3);
        assert_eq!(t[48], 7);
        assert_eq!(t[0], 0);
        assert_eq!(t[46], 0);
    }

    #[test]
    fn decision_round_trip() {
        let d = Decision {
            magic: Decision::MAGIC,
            kind: kind::FORWARD,
            tc: 3,
            ingress_port: 2,
            egress_port: 5,
            nexthop: 700,
        };
        assert_eq!(Decision::from_bytes(&d.to_bytes()), Some(d));
        let mut bad = d.to_bytes();
        bad[0] ^= 1;
        assert_eq!(Decision::from_bytes(&bad), None);
        assert_eq!(Decision::from_bytes(&d.to_bytes()[..7]), None);
    }

    #[test]
    fn xdp_meta_round_trips_with_the_decision_last() {
        let d =
            Decision { magic: Decision::MAGIC, kind: kind::HOST, tc: 0, ingress_port: 1, egress_port: 0, nexthop: 0 };
        let m = XdpMeta { rx_ns: 0x0123_4567_89ab_cdef, decision: d };
        let b = m.to_bytes();
        assert_eq!(&b[8..], &d.to_bytes(), "the Decision sits right in front of the frame");
        assert_eq!(XdpMeta::from_bytes(&b), Some(m));
        assert_eq!(XdpMeta::from_bytes(&b[..15]), None);
        let mut bad = b;
        bad[8] ^= 1;
        assert_eq!(XdpMeta::from_bytes(&bad), None);
    }

    #[test]
    fn flow_hash_depends_on_every_field_and_seed() {
        let base = flow_hash([0x0a000101, 0, 0, 0], [0x0a000202, 0, 0, 0], 17, 1000, 4791, 1);
        assert_ne!(base, flow_hash([0x0a000102, 0, 0, 0], [0x0a000202, 0, 0, 0], 17, 1000, 4791, 1));
        assert_ne!(base, flow_hash([0x0a000101, 0, 0, 0], [0x0a000203, 0, 0, 0], 17, 1000, 4791, 1));
        assert_ne!(base, flow_hash([0x0a000101, 0, 0, 0], [0x0a000202, 0, 0, 0], 6, 1000, 4791, 1));
        assert_ne!(base, flow_hash([0x0a000101, 0, 0, 0], [0x0a000202, 0, 0, 0], 17, 1001, 4791, 1));
        assert_ne!(base, flow_hash([0x0a000101, 0, 0, 0], [0x0a000202, 0, 0, 0], 17, 1000, 4792, 1));
        assert_ne!(base, flow_hash([0x0a000101, 0, 0, 0], [0x0a000202, 0, 0, 0], 17, 1000, 4791, 2));
    }

    fn no_depth(_: u32) -> u64 {
        panic!("depths are read only by adaptive at a new flowlet")
    }

    #[test]
    fn ecmp_and_spray_picks() {
        use lb::{mode, pick};
        let p = pick(mode::ECMP, 4, 11, None, 0, 0, 3, 2, no_depth);
        assert_eq!((p.member, p.flowlet, p.path_changed, p.sprayed), (3, None, false, false));
        // Round robin follows the sequence number, random the draw; both count as sprayed.
        let rr: [u32; 6] = core::array::from_fn(|seq| {
            pick(mode::SPRAY_ROUND_ROBIN, 3, 11, None, 0, 0, 7, seq as u32, no_depth).member
        });
        assert_eq!(rr, [0, 1, 2, 0, 1, 2]);
        let p = pick(mode::SPRAY_RANDOM, 3, 11, None, 0, 0, 7, 0, no_depth);
        assert_eq!((p.member, p.sprayed, p.flowlet), (1, true, None));
        // An unknown mode falls back to ECMP; a group of one always picks member 0.
        assert_eq!(pick(99, 4, 11, None, 0, 0, 0, 0, no_depth).member, 3);
        assert_eq!(pick(mode::SPRAY_RANDOM, 1, 11, None, 0, 0, 7, 0, no_depth).member, 0);
    }

    #[test]
    fn flowlet_moves_only_after_a_gap_longer_than_delta() {
        use lb::{mode, pick, Flowlet};
        const GAP: u64 = 50_000;
        // First packet: the ECMP member, state stored, no change counted.
        let p = pick(mode::FLOWLET, 2, 5, None, 1_000, GAP, 0, 0, no_depth);
        assert_eq!(p.member, 1);
        assert_eq!(p.flowlet, Some(Flowlet { last_ns: 1_000, member: 1, _pad: 0 }));
        assert!(!p.path_changed);
        // A continuous flow (gaps ≤ δ, exactly δ included) never moves, however long it lasts.
        let mut state = p.flowlet;
        let mut now = 1_000;
        for _ in 0..1_000 {
            now += GAP;
            let p = pick(mode::FLOWLET, 2, 5, state, now, GAP, 12345, 0, no_depth);
            assert_eq!((p.member, p.path_changed), (1, false));
            state = p.flowlet;
        }
        // One ns more than δ: a new flowlet, on the other member of two.
        let p = pick(mode::FLOWLET, 2, 5, state, now + GAP + 1, GAP, 12345, 0, no_depth);
        assert_eq!((p.member, p.path_changed), (0, true));
        assert_eq!(p.flowlet.unwrap().last_ns, now + GAP + 1);
        // Of four members, never the previous one; the draw chooses among the other three.
        let prev = Some(Flowlet { last_ns: 0, member: 2, _pad: 0 });
        let got: [u32; 3] =
            core::array::from_fn(|r| pick(mode::FLOWLET, 4, 5, prev, GAP + 1, GAP, r as u32, 0, no_depth).member);
        assert_eq!(got, [3, 0, 1]);
        // A clock that went backwards is no gap; a stale member beyond a shrunk group is no state.
        assert_eq!(pick(mode::FLOWLET, 4, 5, prev, 0, GAP, 0, 0, no_depth).member, 2);
        let stale = Some(Flowlet { last_ns: 0, member: 7, _pad: 0 });
        let p = pick(mode::FLOWLET, 4, 5, stale, 10, GAP, 0, 0, no_depth);
        assert_eq!((p.member, p.path_changed), (1, false));
    }

    #[test]
    fn adaptive_new_flowlets_take_the_shallowest_queue() {
        use lb::{least_loaded, mode, pick, Flowlet};
        const GAP: u64 = 50_000;
        let depths = [3_000_000u64, 0, 9_000, 0];
        let depth = |m: u32| depths[m as usize];
        // First packet: least loaded, ties scanned from the ECMP member (5 % 4 = 1).
        assert_eq!(pick(mode::ADAPTIVE, 4, 5, None, 0, GAP, 0, 0, depth).member, 1);
        assert_eq!(pick(mode::ADAPTIVE, 4, 6, None, 0, GAP, 0, 0, depth).member, 3);
        // Within a flowlet the congested member is kept (no reordering), depths not even read.
        let on_congested = Some(Flowlet { last_ns: 0, member: 0, _pad: 0 });
        let p = pick(mode::ADAPTIVE, 4, 5, on_congested, GAP, GAP, 0, 0, no_depth);
        assert_eq!((p.member, p.path_changed), (0, false));
        // After the gap it moves off to the first shallowest member after it.
        let p = pick(mode::ADAPTIVE, 4, 5, on_congested, GAP + 1, GAP, 0, 0, depth);
        assert_eq!((p.member, p.path_changed), (1, true));
        // Already on a shallowest member: a new flowlet may stay, which is no path change.
        let two = [u64::MAX, 0];
        let p = pick(mode::ADAPTIVE, 2, 0, Some(Flowlet { last_ns: 0, member: 1, _pad: 0 }), GAP + 1, GAP, 0, 0, |m| {
            two[m as usize]
        });
        assert_eq!((p.member, p.path_changed), (1, false));
        // Equal queues rotate from `start`.
        assert_eq!(least_loaded(3, 2, |_| 7), 2);
        assert_eq!(least_loaded(3, 4, |_| 7), 1);
        assert_eq!(least_loaded(16, 0, |m| if m == 15 { 0 } else { 1 }), 15);
    }
}
