//! The `rocefab_xdp` program on crafted frames, through `BPF_PROG_TEST_RUN` (needs root).
//!
//! Each test loads a fresh copy of the program (fresh maps and counters) with
//! [`load_for_test`], on a veth pair `rf-xdp-<tag>a`/`rf-xdp-<tag>b` that is removed on drop:
//! the kernel insists the test-run ingress ifindex is a real device. Both ends get a bound
//! AF_XDP socket in `XSKS`, so `bpf_redirect_map` succeeds and the run reports `XDP_REDIRECT`
//! (a non-live test run does not carry the redirect out; the output is the frame and, in front
//! of it, the XdpMeta: the program's clock and the Decision).
//!
//! Run: `cargo test -p rocefab-tests --test xdp_test_run --no-run` then run the binary as root,
//! or as root `cargo test -p rocefab-tests --test xdp_test_run -- --test-threads=1`.
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use dataplane_common::{counter, ecmp_index, flow_hash, kind, Decision, XdpMeta};
use etherparse::{IpDscp, IpHeaders, IpNumber, Ipv4Header, Ipv6Header, PacketBuilder, VlanId};
use rocefab_contracts::config::{NextHopConfig, PortConfig, RouteConfig, SwitchConfig};
use rocefab_plumbing::loader::{load_for_test, xdp_action::*, TestRunOutput, XdpSwitch};
use rocefab_tests::xdp::{ifindex, link_show, send_raw, VethPair, XskSocket};

/// The lookup3 reference vectors of `flow_hash`, computed outside the crate (set `xdp`: this
/// file's SEED, V4_SRC → V4_GROUP1 and V6_SRC → V6_GROUP1).
#[path = "../../dataplane-common/tests/vectors/mod.rs"]
mod vectors;

const SEED: u32 = 7;
const HOST_MAC: [u8; 6] = [0x02, 0, 0, 0, 0x10, 0x01];
const SWITCH_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 0x01];
/// ifindex of port 2, which never receives in these tests, so it need not exist.
const FAKE_IFINDEX: u32 = 0x7fff_0002;

// Routes of the test switch.
const V4_GROUP0: Ipv4Addr = Ipv4Addr::new(10, 0, 1, 5); // 10.0.1.0/24 → group 0 (1 member)
const V4_GROUP2: Ipv4Addr = Ipv4Addr::new(10, 0, 1, 200); // 10.0.1.128/25 → group 2 (longer prefix)
const V4_GROUP1: Ipv4Addr = Ipv4Addr::new(10, 0, 2, 9); // 10.0.2.0/24 → group 1 (2 members)
const V4_LOCAL: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 254); // /32 local
const V4_MISS: Ipv4Addr = Ipv4Addr::new(192, 168, 7, 7);
const V4_SRC: Ipv4Addr = Ipv4Addr::new(10, 0, 3, 1);
const V6_GROUP1: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0, 1, 0, 0, 0, 0x42); // 2001:db8:0:1::/64 → group 1
const V6_MISS: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0, 2, 0, 0, 0, 1);
const V6_SRC: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0, 3, 0, 0, 0, 1);

fn config(tag: &str) -> SwitchConfig {
    let port = |name: String, mac: u8| PortConfig {
        name,
        mac: rocefab_contracts::config::Mac([0x02, 0, 0, 0, 0, mac]),
        line_rate_bps: 1_000_000_000,
        addresses: vec![],
        peer: String::new(),
        tx_delay_ns: 0,
        rx_delay_ns: 0,
    };
    let nh =
        |port: u32, mac: u8| NextHopConfig { port, mac: rocefab_contracts::config::Mac([0x02, 0, 0, 0, 0x20, mac]) };
    let route = |prefix: IpAddr, len: u8, group: Option<u32>| RouteConfig { prefix, len, group };
    SwitchConfig {
        name: format!("rf-xdp-{tag}"),
        role: "rail".into(),
        netns: None,
        hash_seed: SEED,
        metrics_listen: "127.0.0.1:0".parse().unwrap(),
        dscp_to_tc: dataplane_common::dscp::default_table().to_vec(),
        queue_limit_bytes: 1 << 20,
        xdp_mode: "skb".into(),
        ports: vec![
            port(format!("rf-xdp-{tag}a"), 1),
            port(format!("rf-xdp-{tag}b"), 2),
            port("rf-xdp-fake".into(), 3),
        ],
        nexthops: vec![nh(2, 0), nh(1, 1), nh(2, 2), nh(0, 3)],
        groups: vec![vec![0], vec![1, 2], vec![3]],
        routes: vec![
            route(IpAddr::V4(Ipv4Addr::new(10, 0, 1, 0)), 24, Some(0)),
            route(IpAddr::V4(Ipv4Addr::new(10, 0, 1, 128)), 25, Some(2)),
            route(IpAddr::V4(Ipv4Addr::new(10, 0, 2, 0)), 24, Some(1)),
            route(IpAddr::V4(V4_LOCAL), 32, None),
            // Host bits set on purpose: the loader masks them.
            route(IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 0, 1, 0, 0, 0, 7)), 64, Some(1)),
        ],
        qos: Default::default(),
        lldp: Default::default(),
        chassis_mac: None,
        time_dilation: 1.0,
        load_balance: Default::default(),
        fib: false,
    }
}

/// A loaded program on a fresh veth pair, with AF_XDP sockets on ports 0 and 1.
struct Fixture {
    sw: XdpSwitch,
    cfg: SwitchConfig,
    /// ifindexes of ports 0 and 1.
    if0: u32,
    if1: u32,
    // Field order = drop order: sockets and program before the interfaces.
    _xsks: Vec<XskSocket>,
    _veth: VethPair,
}

impl Fixture {
    fn new(tag: &str) -> Self {
        Self::with_config(tag, config(tag), true)
    }

    fn with_config(tag: &str, cfg: SwitchConfig, sockets: bool) -> Self {
        cfg.validate().expect("test config is valid");
        let veth =
            VethPair::new(&format!("rf-xdp-{tag}a"), &format!("rf-xdp-{tag}b")).expect("create veth pair (root?)");
        let if0 = ifindex(&veth.a).unwrap();
        let if1 = ifindex(&veth.b).unwrap();
        let mut sw = load_for_test(&cfg, &[if0, if1, FAKE_IFINDEX]).expect("load rocefab_xdp (verifier)");
        assert_eq!(sw.ifindexes(), &[if0, if1, FAKE_IFINDEX]);
        let mut xsks = Vec::new();
        if sockets {
            for (port, name) in [(0u32, &veth.a), (1, &veth.b)] {
                let s = XskSocket::bind(name).expect("bind AF_XDP socket");
                sw.register_xsk(port, s.fd()).expect("register socket in XSKS");
                xsks.push(s);
            }
        }
        Fixture { sw, cfg, if0, if1, _xsks: xsks, _veth: veth }
    }

    fn run(&mut self, frame: &[u8]) -> TestRunOutput {
        self.sw.test_run(frame, self.if0).expect("BPF_PROG_TEST_RUN")
    }

    fn counters(&self, port: usize) -> [u64; counter::COUNT as usize] {
        self.sw.counters().expect("read COUNTERS")[port]
    }

    /// Asserts the counters of `port` are exactly `expected` (id, value); all others zero.
    fn assert_counters(&self, port: usize, expected: &[(u32, u64)]) {
        let got = self.counters(port);
        let mut want = [0u64; counter::COUNT as usize];
        for &(id, v) in expected {
            want[id as usize] = v;
        }
        assert_eq!(named(got), named(want), "port {port} counters");
    }

    /// Expected (egress port, next hop) for a flow to a route's group, computed in userspace.
    fn expected_path(&self, group: usize, src: [u32; 4], dst: [u32; 4], sport: u16, dport: u16) -> (u8, u16) {
        let members = &self.cfg.groups[group];
        let h = flow_hash(src, dst, 17, sport, dport, SEED);
        let nh = members[ecmp_index(h, members.len() as u32) as usize];
        (self.cfg.nexthops[nh as usize].port as u8, nh as u16)
    }
}

fn named(c: [u64; counter::COUNT as usize]) -> Vec<(&'static str, u64)> {
    counter::NAMES.iter().copied().zip(c).collect()
}

fn v4_words(a: Ipv4Addr) -> [u32; 4] {
    [u32::from(a), 0, 0, 0]
}

fn v6_words(a: Ipv6Addr) -> [u32; 4] {
    let s = a.segments();
    [0, 2, 4, 6].map(|i| (s[i] as u32) << 16 | s[i + 1] as u32)
}

struct Udp {
    dscp: u8,
    /// ECN codepoint (RFC 3168): 0 Not-ECT, 1 ECT(1), 2 ECT(0), 3 CE.
    ecn: u8,
    ttl: u8,
    sport: u16,
    dport: u16,
    vlan: Option<u16>,
}

impl Default for Udp {
    fn default() -> Self {
        Udp { dscp: 24, ecn: 0, ttl: 64, sport: 49152, dport: 4791, vlan: None }
    }
}

fn build(ip: IpHeaders, u: &Udp) -> Vec<u8> {
    build_len(ip, u, 10)
}

/// A frame of `payload_len` UDP payload bytes (0xab, then a counter from byte 16 on, so a
/// changed tail shows).
fn build_len(ip: IpHeaders, u: &Udp, payload_len: usize) -> Vec<u8> {
    let payload: Vec<u8> = (0..payload_len).map(|i| if i < 16 { 0xab } else { (i % 251) as u8 }).collect();
    let mut out = Vec::new();
    let eth = PacketBuilder::ethernet2(HOST_MAC, SWITCH_MAC);
    match u.vlan {
        Some(v) => eth.single_vlan(VlanId::try_new(v).unwrap()).ip(ip).udp(u.sport, u.dport).write(&mut out, &payload),
        None => eth.ip(ip).udp(u.sport, u.dport).write(&mut out, &payload),
    }
    .expect("build frame");
    out
}

fn udp4(src: Ipv4Addr, dst: Ipv4Addr, u: &Udp) -> Vec<u8> {
    let mut h = Ipv4Header::new(0, u.ttl, IpNumber::UDP, src.octets(), dst.octets()).unwrap();
    h.dscp = IpDscp::try_new(u.dscp).unwrap();
    h.ecn = etherparse::IpEcn::try_new(u.ecn).unwrap();
    build(IpHeaders::Ipv4(h, Default::default()), u)
}

fn udp6(src: Ipv6Addr, dst: Ipv6Addr, u: &Udp) -> Vec<u8> {
    let h = Ipv6Header {
        traffic_class: u.dscp << 2 | u.ecn,
        flow_label: Default::default(),
        payload_length: 0,
        next_header: IpNumber::UDP,
        hop_limit: u.ttl,
        source: src.octets(),
        destination: dst.octets(),
    };
    build(IpHeaders::Ipv6(h, Default::default()), u)
}

/// Ethernet II frame with a raw payload, padded to the 60-byte minimum.
fn raw_frame(dst: [u8; 6], ethertype: u16, payload: &[u8]) -> Vec<u8> {
    let mut f = Vec::new();
    f.extend_from_slice(&dst);
    f.extend_from_slice(&HOST_MAC);
    f.extend_from_slice(&ethertype.to_be_bytes());
    f.extend_from_slice(payload);
    f.resize(f.len().max(60), 0);
    f
}

fn lldp_frame() -> Vec<u8> {
    // IEEE 802.1AB: Chassis ID (MAC), Port ID (ifname "p0"), TTL 120, End.
    let mut p = vec![0x02, 0x07, 0x04];
    p.extend_from_slice(&HOST_MAC);
    p.extend_from_slice(&[0x04, 0x03, 0x05, b'p', b'0', 0x06, 0x02, 0x00, 0x78, 0x00, 0x00]);
    raw_frame([0x01, 0x80, 0xc2, 0x00, 0x00, 0x0e], 0x88cc, &p)
}

fn pfc_frame() -> Vec<u8> {
    // IEEE 802.1Qbb: opcode 0x0101, class-enable vector (priority 3), eight quanta.
    let mut p = vec![0x01, 0x01, 0x00, 0x08];
    for prio in 0..8 {
        p.extend_from_slice(&(if prio == 3 { 0xffffu16 } else { 0 }).to_be_bytes());
    }
    raw_frame([0x01, 0x80, 0xc2, 0x00, 0x00, 0x01], 0x8808, &p)
}

fn arp_frame() -> Vec<u8> {
    // ARP request who-has 10.0.0.254 tell 10.0.3.1 (RFC 826).
    let mut p = vec![0x00, 0x01, 0x08, 0x00, 6, 4, 0x00, 0x01];
    p.extend_from_slice(&HOST_MAC);
    p.extend_from_slice(&V4_SRC.octets());
    p.extend_from_slice(&[0; 6]);
    p.extend_from_slice(&V4_LOCAL.octets());
    raw_frame([0xff; 6], 0x0806, &p)
}

/// Asserts a redirect of the unmodified frame (not moved, nothing prepended) with a Decision
/// as its XDP metadata; returns the Decision.
fn assert_redirect(out: &TestRunOutput, frame: &[u8]) -> Decision {
    assert_eq!(out.action, XDP_REDIRECT, "action");
    assert_eq!(out.meta.len(), XdpMeta::LEN, "16 bytes of XDP metadata");
    let d = out.decision().expect("Decision with magic in the metadata");
    assert_eq!(out.data, frame, "frame is unchanged");
    assert_eq!(d.ingress_port, 0);
    d
}

#[test]
fn dscp_selects_traffic_class_ipv4_ipv6_with_and_without_vlan() {
    let mut fx = Fixture::new("d");
    let mut n = 0;
    for (dscp, tc) in [(24u8, 3u8), (48, 7), (0, 0), (46, 0), (26, 0)] {
        for vlan in [None, Some(100)] {
            let u = Udp { dscp, vlan, ..Default::default() };
            for frame in [udp4(V4_SRC, V4_GROUP0, &u), udp6(V6_SRC, V6_GROUP1, &u)] {
                let out = fx.run(&frame);
                let d = assert_redirect(&out, &frame);
                assert_eq!((d.kind, d.tc), (kind::FORWARD, tc), "dscp {dscp} vlan {vlan:?} frame {frame:02x?}");
                n += 1;
            }
        }
    }
    fx.assert_counters(0, &[(counter::RX, n), (counter::FORWARDED, n)]);
}

#[test]
fn metadata_carries_the_time_the_program_saw_the_frame() {
    // Captures stamp a received frame with the program's clock (issue 21), not the time the
    // daemon took its batch: the clock override stands in for bpf_ktime_get_ns, and every
    // redirected kind carries it, in front of the Decision.
    let mut fx = Fixture::new("t");
    let frames = [udp4(V4_SRC, V4_GROUP0, &Udp::default()), lldp_frame(), pfc_frame()];
    for (i, t) in [1_000_000_007u64, 1_000_000_008, 5_000_000_000_123].into_iter().enumerate() {
        fx.sw.set_clock_override(t).unwrap();
        let frame = &frames[i];
        let out = fx.run(frame);
        assert_redirect(&out, frame);
        let m = out.xdp_meta().unwrap();
        assert_eq!(m.rx_ns, t, "frame {i}");
        assert_eq!(&out.meta[8..], &m.decision.to_bytes(), "the Decision ends where the frame starts");
    }
}

#[test]
fn qinq_outer_tag_is_skipped() {
    let mut fx = Fixture::new("q");
    let mut frame = udp4(V4_SRC, V4_GROUP0, &Udp { dscp: 48, vlan: Some(5), ..Default::default() });
    frame[12..14].copy_from_slice(&0x88a8u16.to_be_bytes());
    let d = assert_redirect(&fx.run(&frame), &frame);
    assert_eq!((d.kind, d.tc, d.egress_port), (kind::FORWARD, 7, 2));
}

#[test]
fn non_default_dscp_map_from_config_is_honoured() {
    let mut cfg = config("m");
    cfg.dscp_to_tc = vec![1; 64];
    cfg.dscp_to_tc[10] = 5;
    cfg.dscp_to_tc[24] = 2;
    let mut fx = Fixture::with_config("m", cfg, true);
    for (dscp, tc) in [(10u8, 5u8), (24, 2), (48, 1), (0, 1)] {
        let u = Udp { dscp, ..Default::default() };
        for frame in [udp4(V4_SRC, V4_GROUP1, &u), udp6(V6_SRC, V6_GROUP1, &u)] {
            let d = assert_redirect(&fx.run(&frame), &frame);
            assert_eq!(d.tc, tc, "dscp {dscp}");
        }
    }
}

#[test]
fn routed_frames_follow_lpm_and_userspace_ecmp() {
    let mut fx = Fixture::new("r");
    let u = Udp { sport: 50000, dport: 4791, ..Default::default() };
    // Single-member group, and the longer /25 inside the same /24.
    let d = assert_redirect(&fx.run(&udp4(V4_SRC, V4_GROUP0, &u)), &udp4(V4_SRC, V4_GROUP0, &u));
    assert_eq!((d.egress_port, d.nexthop), (2, 0));
    let d = assert_redirect(&fx.run(&udp4(V4_SRC, V4_GROUP2, &u)), &udp4(V4_SRC, V4_GROUP2, &u));
    assert_eq!((d.egress_port, d.nexthop), (0, 3), "10.0.1.128/25 beats 10.0.1.0/24");
    // Two-member group: the member userspace predicts for this 5-tuple.
    let f = udp4(V4_SRC, V4_GROUP1, &u);
    let d = assert_redirect(&fx.run(&f), &f);
    let want = fx.expected_path(1, v4_words(V4_SRC), v4_words(V4_GROUP1), 50000, 4791);
    assert_eq!((d.egress_port, d.nexthop), want);
    let f = udp6(V6_SRC, V6_GROUP1, &u);
    let d = assert_redirect(&fx.run(&f), &f);
    let want = fx.expected_path(1, v6_words(V6_SRC), v6_words(V6_GROUP1), 50000, 4791);
    assert_eq!((d.egress_port, d.nexthop), want);
    fx.assert_counters(0, &[(counter::RX, 4), (counter::FORWARDED, 4)]);
    fx.assert_counters(1, &[]);
}

#[test]
fn sixty_four_source_ports_use_both_members_as_predicted() {
    let mut fx = Fixture::new("e");
    for (family, mk) in [
        ("v4", Box::new(|u: &Udp| udp4(V4_SRC, V4_GROUP1, u)) as Box<dyn Fn(&Udp) -> Vec<u8>>),
        ("v6", Box::new(|u: &Udp| udp6(V6_SRC, V6_GROUP1, u))),
    ] {
        let mut hits = [0u32; 2];
        for sport in 49152..49152 + 64u16 {
            let u = Udp { sport, ..Default::default() };
            let f = mk(&u);
            let d = assert_redirect(&fx.run(&f), &f);
            let (src, dst) = if family == "v4" {
                (v4_words(V4_SRC), v4_words(V4_GROUP1))
            } else {
                (v6_words(V6_SRC), v6_words(V6_GROUP1))
            };
            assert_eq!(
                (d.egress_port, d.nexthop),
                fx.expected_path(1, src, dst, sport, 4791),
                "{family} sport {sport}"
            );
            hits[(d.nexthop - 1) as usize] += 1;
        }
        // binomial(64, 1/2): mean 32, sigma 4; 32 +- 3 sigma = 20..=44.
        assert!(hits.iter().all(|h| (20..=44).contains(h)), "{family}: each member of group 1 20..=44 of 64: {hits:?}");
    }
    fx.assert_counters(0, &[(counter::RX, 128), (counter::FORWARDED, 128)]);
}

/// The program's ECMP choice for IPv4 and IPv6 frames is the member `hash % 2` of the lookup3
/// reference vectors (`dataplane-common/tests/vectors/flow_hash.py`, outside the crate): the
/// XDP program's hash, IPv6 address words included, is pinned, not only the userspace copy.
#[test]
fn ecmp_choice_matches_the_lookup3_reference_vectors() {
    let mut fx = Fixture::new("v");
    let v: Vec<vectors::Vector> = vectors::vectors().into_iter().filter(|v| v.set == "xdp").collect();
    assert_eq!(v.len(), 32, "vectors of set xdp");
    let mut families = [0; 2];
    for x in &v {
        assert_eq!((x.proto, x.dport, x.seed), (17, 4791, SEED), "the xdp vectors describe this file's frames");
        let u = Udp { sport: x.sport, dport: x.dport, ..Default::default() };
        let f = if (x.src, x.dst) == (v4_words(V4_SRC), v4_words(V4_GROUP1)) {
            families[0] += 1;
            udp4(V4_SRC, V4_GROUP1, &u)
        } else if (x.src, x.dst) == (v6_words(V6_SRC), v6_words(V6_GROUP1)) {
            families[1] += 1;
            udp6(V6_SRC, V6_GROUP1, &u)
        } else {
            panic!("xdp vector {:x?} -> {:x?}: not a flow of this file", x.src, x.dst);
        };
        let d = assert_redirect(&fx.run(&f), &f);
        let members = &fx.cfg.groups[1];
        let nh = members[(x.hash % members.len() as u32) as usize];
        assert_eq!(
            (d.egress_port, d.nexthop),
            (fx.cfg.nexthops[nh as usize].port as u8, nh as u16),
            "{:x?} sport {}: lookup3 hash {:#010x} % 2",
            x.dst,
            x.sport,
            x.hash
        );
    }
    assert_eq!(families, [16, 16], "IPv4 and IPv6 vectors");
}

#[test]
fn ttl_and_hop_limit_one_are_dropped() {
    let mut fx = Fixture::new("t");
    for ttl in [0u8, 1] {
        let u = Udp { ttl, ..Default::default() };
        assert_eq!(fx.run(&udp4(V4_SRC, V4_GROUP1, &u)).action, XDP_DROP, "ttl {ttl}");
        assert_eq!(fx.run(&udp6(V6_SRC, V6_GROUP1, &u)).action, XDP_DROP, "hop limit {ttl}");
    }
    // TTL 2 is still forwarded; TTL 1 to the switch itself is delivered (RFC 1812 §5.3.1).
    let f = udp4(V4_SRC, V4_GROUP1, &Udp { ttl: 2, ..Default::default() });
    assert_redirect(&fx.run(&f), &f);
    assert_eq!(fx.run(&udp4(V4_SRC, V4_LOCAL, &Udp { ttl: 1, ..Default::default() })).action, XDP_PASS);
    fx.assert_counters(0, &[(counter::RX, 6), (counter::TTL_EXPIRED, 4), (counter::FORWARDED, 1), (counter::PASS, 1)]);
}

#[test]
fn route_miss_is_dropped_and_local_route_passes() {
    let mut fx = Fixture::new("l");
    let u = Udp::default();
    assert_eq!(fx.run(&udp4(V4_SRC, V4_MISS, &u)).action, XDP_DROP);
    assert_eq!(fx.run(&udp6(V6_SRC, V6_MISS, &u)).action, XDP_DROP);
    let f = udp4(V4_SRC, V4_LOCAL, &u);
    let out = fx.run(&f);
    assert_eq!(out.action, XDP_PASS);
    assert_eq!((&out.data, out.meta.len()), (&f, 0), "passed frame is untouched (no Decision)");
    // 10.0.0.253 is not covered by the local /32.
    assert_eq!(fx.run(&udp4(V4_SRC, Ipv4Addr::new(10, 0, 0, 253), &u)).action, XDP_DROP);
    fx.assert_counters(0, &[(counter::RX, 4), (counter::ROUTE_MISS, 3), (counter::PASS, 1)]);
}

#[test]
fn lldp_and_mac_control_go_to_userspace() {
    let mut fx = Fixture::new("c");
    let f = lldp_frame();
    let d = assert_redirect(&fx.run(&f), &f);
    assert_eq!((d.kind, d.tc), (kind::LLDP, 0));
    let f = pfc_frame();
    let d = assert_redirect(&fx.run(&f), &f);
    assert_eq!((d.kind, d.tc), (kind::MAC_CONTROL, 0));
    // Behind an 802.1Q tag too.
    let mut tagged = f[..12].to_vec();
    tagged.extend_from_slice(&[0x81, 0x00, 0x60, 0x05]);
    tagged.extend_from_slice(&f[12..]);
    let d = assert_redirect(&fx.run(&tagged), &tagged);
    assert_eq!(d.kind, kind::MAC_CONTROL);
    // On port 1, the Decision names port 1.
    let out = fx.sw.test_run(&lldp_frame(), fx.if1).unwrap();
    assert_eq!(out.action, XDP_REDIRECT);
    assert_eq!(out.decision().unwrap().ingress_port, 1);
    fx.assert_counters(0, &[(counter::RX, 3), (counter::LLDP, 1), (counter::MAC_CONTROL, 2)]);
    fx.assert_counters(1, &[(counter::RX, 1), (counter::LLDP, 1)]);
}

#[test]
fn arp_multicast_and_link_local_pass_to_the_kernel() {
    let mut fx = Fixture::new("a");
    let arp = arp_frame();
    let out = fx.run(&arp);
    assert_eq!((out.action, &out.data, out.meta.len()), (XDP_PASS, &arp, 0));
    // IPv6 neighbour solicitation goes to ff02::1:ff00:42; link-local unicast too.
    let u = Udp::default();
    let ns_dst = Ipv6Addr::new(0xff02, 0, 0, 0, 0, 1, 0xff00, 0x42);
    let ll = Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, 1);
    assert_eq!(fx.run(&udp6(V6_SRC, ns_dst, &u)).action, XDP_PASS);
    assert_eq!(fx.run(&udp6(V6_SRC, ll, &u)).action, XDP_PASS);
    assert_eq!(fx.run(&udp4(V4_SRC, Ipv4Addr::new(224, 0, 0, 5), &u)).action, XDP_PASS);
    fx.assert_counters(0, &[(counter::RX, 4), (counter::PASS, 4)]);
}

/// `frame` with an 802.1Q tag (TPID 0x8100, PCP 3, VID 5) inserted after the MAC addresses.
fn tagged(frame: &[u8]) -> Vec<u8> {
    let mut t = frame[..12].to_vec();
    t.extend_from_slice(&[0x81, 0x00, 0x60, 0x05]);
    t.extend_from_slice(&frame[12..]);
    t
}

/// A frame whose EtherType the switch does not handle is dropped in XDP (no Decision, the kernel
/// of the switch namespace never gets it) and counted `UNKNOWN_ETHERTYPE`, as an ASIC drops what
/// it cannot forward; ARP (kernel), LLDP and PFC (daemon), IPv4 and IPv6 (routed, or to the
/// kernel when local) keep their verdicts, behind one 802.1Q tag too; a frame too short for the
/// EtherType behind its tag stays malformed.
#[test]
fn unknown_ethertypes_are_dropped_and_counted() {
    let mut fx = Fixture::new("e");
    let ipv4 = udp4(V4_SRC, V4_GROUP1, &Udp::default());
    let mut header_only = raw_frame(SWITCH_MAC, 0x88b5, &[]);
    header_only.truncate(14);
    let unknown = [
        ("0x88b5 (IEEE 802 local experimental)", raw_frame(SWITCH_MAC, 0x88b5, b"rocefab unknown ethertype")),
        ("0x88b5, Ethernet header only", header_only),
        ("0x8915 (RoCEv1)", raw_frame(SWITCH_MAC, 0x8915, &[0; 40])),
        ("0x88b5 behind an 802.1Q tag", tagged(&raw_frame(SWITCH_MAC, 0x88b5, &[1; 46]))),
        // A second tag: the data path has no VLANs, as an ASIC port without VLAN configuration.
        ("IPv4 behind two 802.1Q tags", tagged(&tagged(&ipv4))),
        // IEEE 802.3 length field with LLC (STP BPDU): no spanning tree on a routed port.
        ("802.3 length 0x0026, LLC (STP BPDU)", raw_frame([0x01, 0x80, 0xc2, 0, 0, 0], 0x0026, &[0x42, 0x42, 0x03])),
    ];
    for (name, f) in &unknown {
        let out = fx.run(f);
        assert_eq!((out.action, out.meta.len(), &out.data), (XDP_DROP, 0, f), "{name}");
    }
    let n = unknown.len() as u64;
    fx.assert_counters(0, &[(counter::RX, n), (counter::UNKNOWN_ETHERTYPE, n)]);

    // The known ones keep their paths.
    let arp = arp_frame();
    for f in [arp.clone(), tagged(&arp)] {
        let out = fx.run(&f);
        assert_eq!((out.action, out.meta.len()), (XDP_PASS, 0), "ARP {f:02x?}");
    }
    assert_eq!(fx.run(&udp4(V4_SRC, V4_LOCAL, &Udp::default())).action, XDP_PASS, "IPv4 to the switch");
    for (f, k) in
        [(lldp_frame(), kind::LLDP), (pfc_frame(), kind::MAC_CONTROL), (tagged(&pfc_frame()), kind::MAC_CONTROL)]
    {
        assert_eq!(assert_redirect(&fx.run(&f), &f).kind, k, "{f:02x?}");
    }
    for f in [ipv4.clone(), tagged(&ipv4), udp6(V6_SRC, V6_GROUP1, &Udp::default())] {
        assert_eq!(assert_redirect(&fx.run(&f), &f).kind, kind::FORWARD, "{f:02x?}");
    }
    // A tag with no room for the EtherType behind it.
    let mut short = tagged(&ipv4);
    short.truncate(17);
    assert_eq!(fx.run(&short).action, XDP_DROP);
    fx.assert_counters(
        0,
        &[
            (counter::RX, n + 10),
            (counter::UNKNOWN_ETHERTYPE, n),
            (counter::PASS, 3),
            (counter::LLDP, 1),
            (counter::MAC_CONTROL, 2),
            (counter::FORWARDED, 3),
            (counter::MALFORMED, 1),
        ],
    );
    // Counted on the port the frame came in on.
    assert_eq!(fx.sw.test_run(&unknown[0].1, fx.if1).unwrap().action, XDP_DROP);
    fx.assert_counters(1, &[(counter::RX, 1), (counter::UNKNOWN_ETHERTYPE, 1)]);
}

#[test]
fn unknown_ingress_ifindex_passes_uncounted() {
    let mut fx = Fixture::new("u");
    // `lo` is not a switch port.
    let out = fx.sw.test_run(&udp4(V4_SRC, V4_GROUP1, &Udp::default()), 1).unwrap();
    assert_eq!(out.action, XDP_PASS);
    for p in 0..3 {
        fx.assert_counters(p, &[]);
    }
}

#[test]
fn redirect_without_socket_drops_and_counts() {
    let mut fx = Fixture::with_config("n", config("n"), false);
    let f = udp4(V4_SRC, V4_GROUP0, &Udp::default());
    let out = fx.run(&f);
    assert_eq!(out.action, XDP_DROP);
    // The Decision was written before the redirect was attempted.
    assert_eq!(out.decision().map(|d| d.egress_port), Some(2));
    let out = fx.run(&lldp_frame());
    assert_eq!(out.action, XDP_DROP);
    fx.assert_counters(0, &[(counter::RX, 2), (counter::REDIRECT_FAILED, 2)]);
}

#[test]
fn every_truncation_of_a_valid_frame_is_malformed() {
    let mut fx = Fixture::new("x");
    let frames = [
        ("ipv4/udp", udp4(V4_SRC, V4_GROUP1, &Udp::default())),
        ("vlan/ipv4/udp", udp4(V4_SRC, V4_GROUP1, &Udp { vlan: Some(7), ..Default::default() })),
        ("ipv6/udp", udp6(V6_SRC, V6_GROUP1, &Udp::default())),
    ];
    let mut cut = 0;
    for (name, frame) in &frames {
        // The whole frame is forwarded, so each truncation is what makes the difference.
        assert_redirect(&fx.run(frame), frame);
        // The kernel rejects test-run input shorter than an Ethernet header (ETH_HLEN, 14).
        for len in 0..14 {
            assert!(fx.sw.test_run(&frame[..len], fx.if0).is_err(), "{name}: {len}-byte input accepted");
        }
        for len in 14..frame.len() {
            let out = fx.run(&frame[..len]);
            assert_eq!(out.action, XDP_DROP, "{name} cut to {len} bytes");
            assert_eq!(
                (&out.data[..], out.meta.len()),
                (&frame[..len], 0),
                "{name} cut to {len}: no Decision on a malformed frame"
            );
            cut += 1;
        }
    }
    fx.assert_counters(0, &[(counter::RX, cut + 3), (counter::FORWARDED, 3), (counter::MALFORMED, cut)]);
}

#[test]
fn invalid_ip_headers_are_malformed() {
    let mut fx = Fixture::new("i");
    let good = udp4(V4_SRC, V4_GROUP1, &Udp::default());
    let mut bad_version = good.clone();
    bad_version[14] = 0x55;
    let mut short_ihl = good.clone();
    short_ihl[14] = 0x44;
    let mut long_total = good.clone();
    long_total[16..18].copy_from_slice(&(good.len() as u16).to_be_bytes());
    let mut v6_long_payload = udp6(V6_SRC, V6_GROUP1, &Udp::default());
    v6_long_payload[18..20].copy_from_slice(&100u16.to_be_bytes());
    for (name, f) in [
        ("version 5", &bad_version),
        ("IHL 4", &short_ihl),
        ("total length", &long_total),
        ("v6 payload length", &v6_long_payload),
    ] {
        assert_eq!(fx.run(f).action, XDP_DROP, "{name}");
    }
    // Ethernet padding after the datagram is fine.
    let mut padded = good.clone();
    padded.resize(good.len() + 18, 0);
    assert_redirect(&fx.run(&padded), &padded);
    fx.assert_counters(0, &[(counter::RX, 5), (counter::MALFORMED, 4), (counter::FORWARDED, 1)]);
}

/// Two-port config on the real veth ends, for attach tests.
fn attach_config(tag: &str, mode: &str) -> SwitchConfig {
    let mut cfg = config(tag);
    cfg.ports.truncate(2);
    cfg.nexthops = vec![NextHopConfig { port: 1, mac: cfg.ports[1].mac }];
    cfg.groups = vec![vec![0]];
    cfg.routes.retain(|r| r.group.is_none_or(|g| g == 0));
    cfg.xdp_mode = mode.into();
    cfg
}

/// Polls the counters until `done` holds (frames sent through a veth are processed in the
/// peer's NAPI poll, asynchronously); fails after 5 s.
fn wait_counters(
    sw: &XdpSwitch,
    port: usize,
    done: impl Fn(&[u64; counter::COUNT as usize]) -> bool,
) -> [u64; counter::COUNT as usize] {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    loop {
        let c = sw.counters().unwrap()[port];
        if done(&c) {
            return c;
        }
        assert!(std::time::Instant::now() < deadline, "counters of port {port} never matched: {:?}", named(c));
        std::thread::yield_now();
    }
}

#[test]
fn load_names_a_missing_interface() {
    let _veth = VethPair::new("rf-xdp-ma", "rf-xdp-mb").unwrap();
    let err = XdpSwitch::load(&config("m")).unwrap_err().to_string();
    assert!(err.contains("port 2") && err.contains("rf-xdp-fake"), "{err}");
    let mut cfg = attach_config("m", "driver");
    cfg.xdp_mode = "offload".into();
    let err = XdpSwitch::load(&cfg).unwrap_err().to_string();
    assert!(err.contains("offload"), "{err}");
}

#[test]
fn load_attaches_to_every_port_counts_real_frames_and_detaches() {
    for (mode, flag) in [("driver", " xdp "), ("skb", " xdpgeneric ")] {
        let veth = VethPair::new("rf-xdp-ka", "rf-xdp-kb").unwrap();
        let sw = XdpSwitch::load(&attach_config("k", mode)).expect("load + attach");
        let (ia, ib) = (ifindex(&veth.a).unwrap(), ifindex(&veth.b).unwrap());
        assert_eq!(sw.ifindexes(), &[ia, ib]);
        for name in [&veth.a, &veth.b] {
            let show = link_show(name).unwrap();
            assert!(show.contains(flag) && show.contains("prog/xdp"), "{mode}: {name} not attached:\n{show}");
        }
        // Frames sent into b arrive on a (port 0). LLDP is steered to the XSK, which is not
        // registered, so each frame counts REDIRECT_FAILED; the kernel sends no LLDP itself.
        for _ in 0..3 {
            send_raw(ib, &lldp_frame()).unwrap();
        }
        let c = wait_counters(&sw, 0, |c| c[counter::REDIRECT_FAILED as usize] >= 3);
        assert_eq!(c[counter::REDIRECT_FAILED as usize], 3, "{mode}: {:?}", named(c));
        assert!(c[counter::RX as usize] >= 3);
        if mode == "driver" {
            sw.detach();
        } else {
            drop(sw);
        }
        for name in [&veth.a, &veth.b] {
            let show = link_show(name).unwrap();
            assert!(!show.contains("prog/xdp"), "{mode}: {name} still attached:\n{show}");
        }
    }
}

/// Egress queue of [`V4_GROUP0`] / DSCP 24 frames: port 2 (next hop 0), queue 3.
const WRED_PORT: usize = 2;

/// Runs `frame` with the published depth of (port 2, queue 3) at `depth`.
fn run_at_depth(f: &mut Fixture, board: &switch_model::depths::DepthBoard, depth: u64, frame: &[u8]) -> TestRunOutput {
    board.publish(WRED_PORT, 3, depth);
    f.run(frame)
}

fn ecn_v4(out: &TestRunOutput) -> u8 {
    let ip = &out.data[14..];
    let (h, _) = Ipv4Header::from_slice(ip).expect("IPv4 header");
    assert_eq!(h.header_checksum, h.calc_header_checksum(), "IPv4 header checksum after marking");
    h.ecn.value()
}

#[test]
fn wred_marks_ect_above_max_drops_not_ect_keeps_ce_and_fixes_the_checksum() {
    let mut f = Fixture::new("wr1");
    let board = dataplane_user::dataplane::depth_board(&f.sw).expect("mmap DEPTHS");
    let w = f.cfg.qos.wred.clone();
    assert_eq!(
        (w.queues, w.min_bytes, w.max_bytes, w.probability_percent),
        (1 << 3, 150_000, 3_000_000, 7),
        "the book's defaults"
    );
    let frame = |ecn: u8, dscp: u8| udp4(V4_SRC, V4_GROUP0, &Udp { ecn, dscp, ..Default::default() });

    // Below min: never marked, whatever the codepoint.
    for ecn in 0..4 {
        let out = run_at_depth(&mut f, &board, w.min_bytes - 1, &frame(ecn, 24));
        assert_redirect(&out, &frame(ecn, 24));
    }
    // At max: ECT(0) and ECT(1) become CE with a valid checksum, CE stays, Not-ECT is dropped.
    for ecn in [1u8, 2] {
        let out = run_at_depth(&mut f, &board, w.max_bytes, &frame(ecn, 24));
        assert_eq!(out.action, XDP_REDIRECT);
        assert_eq!(ecn_v4(&out), 3, "ECT({}) → CE", 2 - ecn);
        // Only the ECN bits and the checksum changed.
        let (a, b) = (&out.data, frame(ecn, 24));
        let diff: Vec<usize> = (0..b.len()).filter(|&i| a[i] != b[i]).collect();
        assert!(diff.iter().all(|&i| [15, 24, 25].contains(&i)), "changed bytes {diff:?}");
    }
    let out = run_at_depth(&mut f, &board, w.max_bytes, &frame(3, 24));
    assert_redirect(&out, &frame(3, 24));
    let out = run_at_depth(&mut f, &board, w.max_bytes, &frame(0, 24));
    assert_eq!(out.action, XDP_DROP, "Not-ECT in a WRED queue past max");
    // Another queue (DSCP 0 → queue 0) does not run WRED.
    let out = run_at_depth(&mut f, &board, w.max_bytes, &frame(2, 0));
    assert_redirect(&out, &frame(2, 0));
    f.assert_counters(
        0,
        &[(counter::RX, 9), (counter::FORWARDED, 8), (counter::ECN_MARKED, 2), (counter::WRED_DROPPED, 1)],
    );

    // IPv6: traffic class ECN bits.
    let v6 = udp6(V6_SRC, V6_GROUP1, &Udp { ecn: 2, ..Default::default() });
    let (egress, _) = f.expected_path(1, v6_words(V6_SRC), v6_words(V6_GROUP1), 49152, 4791);
    board.publish(egress as usize, 3, w.max_bytes);
    let out = f.run(&v6);
    assert_eq!(out.action, XDP_REDIRECT);
    let (h, _) = Ipv6Header::from_slice(&out.data[14..]).unwrap();
    assert_eq!(h.traffic_class, 24 << 2 | 3, "IPv6 ECT(0) → CE");
}

#[test]
fn wred_ramp_marks_at_the_curve_with_a_seeded_generator() {
    // Pin to one CPU: the generator is per CPU, seeded with seed ^ cpu.
    let mut one = nix::sched::CpuSet::new();
    one.set(0).unwrap();
    nix::sched::sched_setaffinity(nix::unistd::Pid::from_raw(0), &one).expect("pin to CPU 0");
    let frame = udp4(V4_SRC, V4_GROUP0, &Udp { ecn: 2, ..Default::default() });
    let pattern = |tag: &str, seed: u32, depth_frac: f64| -> Vec<bool> {
        let mut cfg = config(tag);
        cfg.qos.wred.seed = seed;
        let (min, max) = (cfg.qos.wred.min_bytes as f64, cfg.qos.wred.max_bytes as f64);
        let mut f = Fixture::with_config(tag, cfg, true);
        let board = dataplane_user::dataplane::depth_board(&f.sw).unwrap();
        (0..4000)
            .map(|_| {
                let out = run_at_depth(&mut f, &board, (min + depth_frac * (max - min)) as u64, &frame);
                ecn_v4(&out) == 3
            })
            .collect()
    };
    for (frac, p) in [(0.25f64, 0.0175f64), (0.5, 0.035), (0.9, 0.063)] {
        let a = pattern("wr2", 77, frac);
        let n = a.iter().filter(|&&m| m).count() as f64;
        // Binomial: mean 4000 p, σ = sqrt(4000 p (1 − p)); 4σ bounds.
        let (mean, sigma) = (4000.0 * p, (4000.0 * p * (1.0 - p)).sqrt());
        assert!(
            (n - mean).abs() < 4.0 * sigma,
            "depth fraction {frac}: {n} marks of 4000, expected {mean} ± {}",
            4.0 * sigma
        );
        assert_eq!(a, pattern("wr3", 77, frac), "the same seed marks the same packets");
        assert_ne!(a, pattern("wr4", 78, frac), "another seed marks others");
    }
}

/// RoCEv2 at path MTU 4096: BTH (12) + RETH (16) + 4096 bytes of payload + ICRC (4) in UDP.
const ROCE_4096_UDP_PAYLOAD: usize = 12 + 16 + 4096 + 4;

#[test]
fn jumbo_roce_frames_are_parsed_from_their_first_buffer_forwarded_and_marked() {
    // A 4170-byte frame is longer than one page less the XDP headroom: BPF_PROG_TEST_RUN gives
    // an `xdp.frags` program its first ~3.5 KB linear and the rest as a fragment, as veth does
    // on a 9216-byte link (a program without frags support is refused such a frame, and the
    // IP length check must count every buffer, not `data_end - data`).
    let mut f = Fixture::new("jb");
    let board = dataplane_user::dataplane::depth_board(&f.sw).expect("mmap DEPTHS");
    let w = f.cfg.qos.wred.clone();
    let v4 = |ecn: u8, vlan: Option<u16>| {
        let mut h = Ipv4Header::new(0, 64, IpNumber::UDP, V4_SRC.octets(), V4_GROUP0.octets()).unwrap();
        h.dscp = IpDscp::try_new(24).unwrap();
        h.ecn = etherparse::IpEcn::try_new(ecn).unwrap();
        build_len(
            IpHeaders::Ipv4(h, Default::default()),
            &Udp { ecn, vlan, ..Default::default() },
            ROCE_4096_UDP_PAYLOAD,
        )
    };
    let frame = v4(2, None);
    assert_eq!(frame.len(), 4170);
    // Below WRED min: redirected unchanged, every byte of every buffer.
    let out = run_at_depth(&mut f, &board, 0, &frame);
    let d = assert_redirect(&out, &frame);
    assert_eq!((d.kind, d.tc, d.egress_port), (kind::FORWARD, 3, 2));
    let tagged = v4(2, Some(100));
    let out = run_at_depth(&mut f, &board, 0, &tagged);
    assert_redirect(&out, &tagged);
    // Above max: ECT(0) → CE in the first buffer, checksum fixed, the fragment untouched.
    let out = run_at_depth(&mut f, &board, w.max_bytes, &frame);
    assert_eq!(out.action, XDP_REDIRECT);
    assert_eq!(ecn_v4(&out), 3);
    assert_eq!(out.data.len(), frame.len());
    let diff: Vec<usize> = (0..frame.len()).filter(|&i| out.data[i] != frame[i]).collect();
    assert!(diff.contains(&15) && diff.iter().all(|i| [15, 24, 25].contains(i)), "only TOS and the checksum: {diff:?}");
    // IPv6 at the same size.
    let h = Ipv6Header {
        traffic_class: 24 << 2 | 2,
        flow_label: Default::default(),
        payload_length: 0,
        next_header: IpNumber::UDP,
        hop_limit: 64,
        source: V6_SRC.octets(),
        destination: V6_GROUP1.octets(),
    };
    let v6 = build_len(IpHeaders::Ipv6(h, Default::default()), &Udp::default(), ROCE_4096_UDP_PAYLOAD);
    let out = run_at_depth(&mut f, &board, 0, &v6);
    assert_redirect(&out, &v6);
    // A 9216-byte IP packet (the link MTU) is forwarded too.
    let mut h = Ipv4Header::new(0, 64, IpNumber::UDP, V4_SRC.octets(), V4_GROUP0.octets()).unwrap();
    h.dscp = IpDscp::try_new(24).unwrap();
    let max = build_len(IpHeaders::Ipv4(h, Default::default()), &Udp::default(), 9216 - 28);
    assert_eq!(max.len(), 9230);
    let out = run_at_depth(&mut f, &board, 0, &max);
    assert_redirect(&out, &max);
    // An IPv4 total length beyond the whole frame is still malformed.
    let mut bad = frame.clone();
    bad[16..18].copy_from_slice(&(4170u16 - 14 + 1).to_be_bytes());
    let out = f.run(&bad);
    assert_eq!(out.action, XDP_DROP);
    f.assert_counters(
        0,
        &[(counter::RX, 6), (counter::FORWARDED, 5), (counter::ECN_MARKED, 1), (counter::MALFORMED, 1)],
    );
}
