//! The egress choice modes of `rocefab_xdp` (ecmp, flowlet, adaptive, spray round-robin and
//! random) on crafted frames through `BPF_PROG_TEST_RUN` (needs root; issue 11, test 5).
//!
//! One switch config selects a different mode per traffic class (DSCP 0 → tc 0 ecmp, 8 → tc 1
//! flowlet, 16 → tc 2 adaptive, 24 → tc 3 spray round-robin, 32 → tc 4 spray random), with a
//! flowlet gap of 50 µs at time dilation 2: δ is 100 µs on the wall clock.
//!
//! The clock: `bpf_ktime_get_ns` cannot be set by a test, so the program reads
//! `PARAMS[0].clock_override_ns` instead when it is non-zero, and each test places every packet
//! in time with [`XdpSwitch::set_clock_override`]. Queue depths for `adaptive` are published
//! through the same mmap of `DEPTHS` the daemon's data-plane thread uses. The per-CPU
//! round-robin sequence and random generator are per CPU, so the test thread is pinned to one.
//!
//! Run as root: `cargo test -p rocefab-tests --test xdp_lb_test_run -- --test-threads=1`.
use std::net::{IpAddr, Ipv4Addr};

use dataplane_common::lb::FlowKey;
use dataplane_common::{counter, ecmp_index, flow_hash};
use etherparse::{IpDscp, IpNumber, Ipv4Header, PacketBuilder};
use rocefab_contracts::config::{LbMode, Mac, NextHopConfig, PortConfig, RouteConfig, SwitchConfig};
use rocefab_plumbing::loader::{load_for_test, xdp_action::XDP_REDIRECT, XdpSwitch};
use rocefab_tests::xdp::{ifindex, VethPair, XskSocket};

/// The lookup3 reference vectors of `flow_hash`, computed outside the crate (set `xdp_lb`: this
/// file's SEED, SRC, DST2 and DST3).
#[path = "../../dataplane-common/tests/vectors/mod.rs"]
mod vectors;

const SEED: u32 = 0x1b5eed;
const SRC: Ipv4Addr = Ipv4Addr::new(10, 0, 1, 1);
/// 10.0.2.0/24 → group 0: next hops on ports 2 and 3.
const DST2: Ipv4Addr = Ipv4Addr::new(10, 0, 2, 7);
/// 10.0.3.0/24 → group 1: next hops on ports 1, 2 and 3.
const DST3: Ipv4Addr = Ipv4Addr::new(10, 0, 3, 7);
/// δ on the wall clock: 50 µs emulated × D = 2.
const GAP_NS: u64 = 100_000;
/// Ports 2 and 3 never receive, so their ifindexes need not exist.
const FAKE: [u32; 2] = [0x7fff_0102, 0x7fff_0103];

const DSCP_ECMP: u8 = 0;
const DSCP_FLOWLET: u8 = 8;
const DSCP_ADAPTIVE: u8 = 16;
const DSCP_SPRAY_RR: u8 = 24;
const DSCP_SPRAY_RANDOM: u8 = 32;

fn config(tag: &str) -> SwitchConfig {
    let port = |name: String, mac: u8| PortConfig {
        name,
        mac: Mac([0x02, 0, 0, 0, 1, mac]),
        line_rate_bps: 1_000_000_000,
        addresses: vec![],
        peer: String::new(),
        tx_delay_ns: 0,
        rx_delay_ns: 0,
    };
    let nh = |port: u32| NextHopConfig { port, mac: Mac([0x02, 0, 0, 0, 0x21, port as u8]) };
    let route = |a: Ipv4Addr, group| RouteConfig { prefix: IpAddr::V4(a), len: 24, group: Some(group) };
    let mut dscp_to_tc = vec![0u8; 64];
    for (i, d) in [DSCP_ECMP, DSCP_FLOWLET, DSCP_ADAPTIVE, DSCP_SPRAY_RR, DSCP_SPRAY_RANDOM].into_iter().enumerate() {
        dscp_to_tc[d as usize] = i as u8;
    }
    let mut cfg = SwitchConfig {
        name: format!("rf-lb-{tag}"),
        role: "rail".into(),
        netns: None,
        hash_seed: SEED,
        metrics_listen: "127.0.0.1:0".parse().unwrap(),
        dscp_to_tc,
        queue_limit_bytes: 1 << 20,
        xdp_mode: "skb".into(),
        ports: vec![
            port(format!("rf-lb-{tag}a"), 0),
            port(format!("rf-lb-{tag}b"), 1),
            port("rf-lb-fake2".into(), 2),
            port("rf-lb-fake3".into(), 3),
        ],
        nexthops: vec![nh(1), nh(2), nh(3)],
        groups: vec![vec![1, 2], vec![0, 1, 2]],
        routes: vec![route(Ipv4Addr::new(10, 0, 2, 0), 0), route(Ipv4Addr::new(10, 0, 3, 0), 1)],
        qos: Default::default(),
        lldp: Default::default(),
        chassis_mac: None,
        time_dilation: 2.0,
        load_balance: Default::default(),
        fib: false,
    };
    let lb = &mut cfg.load_balance;
    lb.modes[1] = LbMode::Flowlet;
    lb.modes[2] = LbMode::Adaptive;
    lb.modes[3] = LbMode::SprayRoundRobin;
    lb.modes[4] = LbMode::SprayRandom;
    lb.flowlet_gap_us = 50;
    cfg
}

/// The program loaded on a fresh veth pair (port 0 = `a`, where frames arrive, with an AF_XDP
/// socket so the redirect succeeds), the test thread pinned to CPU 0.
struct Fixture {
    sw: XdpSwitch,
    cfg: SwitchConfig,
    if0: u32,
    // Field order = drop order: socket and program before the interfaces.
    _xsk: XskSocket,
    _veth: VethPair,
}

impl Fixture {
    fn new(tag: &str) -> Fixture {
        let mut cpus = nix::sched::CpuSet::new();
        cpus.set(0).unwrap();
        nix::sched::sched_setaffinity(nix::unistd::Pid::from_raw(0), &cpus).expect("pin the test thread to CPU 0");
        let cfg = config(tag);
        cfg.validate().expect("test config is valid");
        let veth = VethPair::new(&format!("rf-lb-{tag}a"), &format!("rf-lb-{tag}b")).expect("create veth pair (root?)");
        let if0 = ifindex(&veth.a).unwrap();
        let if1 = ifindex(&veth.b).unwrap();
        let mut sw = load_for_test(&cfg, &[if0, if1, FAKE[0], FAKE[1]]).expect("load rocefab_xdp (verifier)");
        let xsk = XskSocket::bind(&veth.a).expect("bind AF_XDP socket");
        sw.register_xsk(0, xsk.fd()).expect("register socket in XSKS");
        Fixture { sw, cfg, if0, _xsk: xsk, _veth: veth }
    }

    /// Runs a UDP frame `SRC:sport → dst:4791` with `dscp` at clock `now_ns`; returns the
    /// egress port the program chose.
    fn send(&mut self, dst: Ipv4Addr, dscp: u8, sport: u16, now_ns: u64) -> u8 {
        self.send_frame(udp4(dst, dscp, sport), now_ns)
    }

    /// Runs `frame` at clock `now_ns`; returns the egress port the program chose.
    fn send_frame(&mut self, frame: Vec<u8>, now_ns: u64) -> u8 {
        self.sw.set_clock_override(now_ns).expect("set the test clock");
        let out = self.sw.test_run(&frame, self.if0).expect("BPF_PROG_TEST_RUN");
        assert_eq!(out.action, XDP_REDIRECT, "action");
        let d = out.decision().expect("Decision in the XDP metadata");
        assert_eq!(out.data, frame, "frame unchanged");
        d.egress_port
    }

    fn counter(&self, id: u32) -> u64 {
        self.sw.counters().expect("read COUNTERS")[0][id as usize]
    }

    /// Egress port of group `group`'s member `idx`.
    fn member_port(&self, group: usize, idx: u32) -> u8 {
        self.cfg.nexthops[self.cfg.groups[group][idx as usize] as usize].port as u8
    }

    /// The ECMP member's egress port of a flow to `dst`.
    fn ecmp_port(&self, group: usize, dst: Ipv4Addr, sport: u16) -> u8 {
        let h = flow_hash([u32::from(SRC), 0, 0, 0], [u32::from(dst), 0, 0, 0], 17, sport, 4791, SEED);
        self.member_port(group, ecmp_index(h, self.cfg.groups[group].len() as u32))
    }
}

fn udp4(dst: Ipv4Addr, dscp: u8, sport: u16) -> Vec<u8> {
    udp4_to(dst, dscp, sport, 4791)
}

fn udp4_to(dst: Ipv4Addr, dscp: u8, sport: u16, dport: u16) -> Vec<u8> {
    let mut h = Ipv4Header::new(0, 64, IpNumber::UDP, SRC.octets(), dst.octets()).unwrap();
    h.dscp = IpDscp::try_new(dscp).unwrap();
    let mut out = Vec::new();
    PacketBuilder::ethernet2([2, 0, 0, 0, 0x10, 1], [2, 0, 0, 0, 1, 0])
        .ip(etherparse::IpHeaders::Ipv4(h, Default::default()))
        .udp(sport, dport)
        .write(&mut out, &[0x5a; 32])
        .expect("build frame");
    out
}

/// UET's native encapsulation (uet-ref-prov `uet_pkt_hdr.h`: IP protocol 253, then the 4-byte
/// entropy header: entropy, reserved; docs/research/uet-wire-formats.md §1), then 12 bytes
/// standing for a PDS request.
fn uet4(dst: Ipv4Addr, entropy: u16) -> Vec<u8> {
    let mut payload = Vec::from(entropy.to_be_bytes());
    payload.extend_from_slice(&[0, 0]);
    payload.extend_from_slice(&[0x11; 12]);
    let mut h = Ipv4Header::new(payload.len() as u16, 64, IpNumber(253), SRC.octets(), dst.octets()).unwrap();
    h.header_checksum = h.calc_header_checksum();
    let mut out = vec![2, 0, 0, 0, 1, 0, 2, 0, 0, 0, 0x10, 1, 0x08, 0x00];
    out.extend_from_slice(&h.to_bytes());
    out.extend_from_slice(&payload);
    out
}

fn key(dst: Ipv4Addr, sport: u16) -> FlowKey {
    FlowKey {
        src: [u32::from(SRC), 0, 0, 0],
        dst: [u32::from(dst), 0, 0, 0],
        sport,
        dport: 4791,
        proto: 17,
        _pad: [0; 3],
    }
}

/// ECMP (tc 0) follows the flow hash for every source port and keeps no flowlet state. 64 flows
/// on 2 members: each member's count is binomial(64, 1/2), mean 32, sigma 4, so each gets
/// 32 +- 3 sigma = 20..=44.
#[test]
fn ecmp_class_follows_the_flow_hash() {
    let mut f = Fixture::new("e");
    let mut used = [0u32; 4];
    for sport in 49152..49152 + 64 {
        let port = f.send(DST2, DSCP_ECMP, sport, 1 + u64::from(sport) * 10 * GAP_NS);
        assert_eq!(port, f.ecmp_port(0, DST2, sport), "sport {sport}");
        used[port as usize] += 1;
        assert_eq!(f.sw.flowlet(&key(DST2, sport)).unwrap(), None, "ecmp stores no flowlet");
    }
    assert_eq!(used[0] + used[1], 0, "only group 0's ports 2 and 3: {used:?}");
    assert!((20..=44).contains(&used[2]) && (20..=44).contains(&used[3]), "each member 20..=44 of 64: {used:?}");
    assert_eq!((f.counter(counter::FLOWLET_PATH_CHANGES), f.counter(counter::SPRAYED)), (0, 0));
}

/// UET spreads by its per-packet entropy under plain ECMP (issue 42, "The switch"): over IP
/// protocol 253 the entropy header stands in the source port's place in the 5-tuple hash
/// (destination port 0), over UDP 4793 the entropy is the UDP source port, hashed as any. One
/// pair of endpoints, 64 entropies: every choice is the hash's, and each member gets 20..=44
/// (binomial(64, 1/2) ± 3σ) on both encapsulations. Before the entropy header was read, protocol
/// 253 hashed with zero ports: all 64 on one member.
#[test]
fn uet_entropy_spreads_ecmp_on_both_encapsulations() {
    let mut f = Fixture::new("u");
    let mut used = [[0u32; 4]; 2];
    let mut t = 1_000_000;
    for i in 0..64u16 {
        let entropy = 0x8000u16.wrapping_add(i.wrapping_mul(977));
        t += 10 * GAP_NS;
        let port = f.send_frame(uet4(DST2, entropy), t);
        let h = flow_hash([u32::from(SRC), 0, 0, 0], [u32::from(DST2), 0, 0, 0], 253, entropy, 0, SEED);
        assert_eq!(port, f.member_port(0, ecmp_index(h, 2)), "IP protocol 253, entropy {entropy:#06x}");
        used[0][port as usize] += 1;
        let port = f.send_frame(udp4_to(DST2, DSCP_ECMP, entropy, dataplane_common::uet::UDP_PORT), t);
        let h = flow_hash([u32::from(SRC), 0, 0, 0], [u32::from(DST2), 0, 0, 0], 17, entropy, 4793, SEED);
        assert_eq!(port, f.member_port(0, ecmp_index(h, 2)), "UDP 4793, source port {entropy:#06x}");
        used[1][port as usize] += 1;
    }
    for (u, what) in used.iter().zip(["IP protocol 253", "UDP 4793"]) {
        assert!((20..=44).contains(&u[2]) && (20..=44).contains(&u[3]), "{what}: each member 20..=44 of 64: {u:?}");
    }
}

/// The program's ECMP choice is the member `hash % members` of the lookup3 reference vectors
/// (computed by `dataplane-common/tests/vectors/flow_hash.py` outside the crate), on the
/// 2-member group (DST2) and the 3-member group (DST3): the XDP program's hash, not only the
/// userspace copy, is pinned.
#[test]
fn ecmp_choice_matches_the_lookup3_reference_vectors() {
    let mut f = Fixture::new("v");
    let v: Vec<vectors::Vector> = vectors::vectors().into_iter().filter(|v| v.set == "xdp_lb").collect();
    assert_eq!(v.len(), 32, "vectors of set xdp_lb");
    let mut t = 1_000_000;
    for x in &v {
        assert_eq!(
            (x.src, x.proto, x.dport, x.seed),
            ([u32::from(SRC), 0, 0, 0], 17, 4791, SEED),
            "the xdp_lb vectors describe this file's frames"
        );
        let (dst, group) = match Ipv4Addr::from(x.dst[0]) {
            d if d == DST2 => (d, 0),
            d if d == DST3 => (d, 1),
            d => panic!("xdp_lb vector to {d}: not a route of this switch"),
        };
        t += 10 * GAP_NS;
        let port = f.send(dst, DSCP_ECMP, x.sport, t);
        let members = f.cfg.groups[group].len() as u32;
        assert_eq!(
            port,
            f.member_port(group, x.hash % members),
            "{dst} sport {}: lookup3 hash {:#010x} % {members}",
            x.sport,
            x.hash
        );
    }
}

/// Flowlet (tc 1): a flow with gaps of exactly δ never moves; one ns more and it moves to the
/// other member, counted once per move; the table holds the test clock.
#[test]
fn flowlet_moves_only_after_a_gap_longer_than_delta() {
    let mut f = Fixture::new("f");
    let sport = 50_000;
    let mut now = 5_000_000;
    let first = f.send(DST2, DSCP_FLOWLET, sport, now);
    assert_eq!(first, f.ecmp_port(0, DST2, sport), "the first flowlet takes the ECMP member");
    for _ in 0..50 {
        now += GAP_NS;
        assert_eq!(f.send(DST2, DSCP_FLOWLET, sport, now), first, "continuous flow at t={now}");
    }
    assert_eq!(f.counter(counter::FLOWLET_PATH_CHANGES), 0);
    let mut port = first;
    for moves in 1..=4u64 {
        now += GAP_NS + 1;
        let next = f.send(DST2, DSCP_FLOWLET, sport, now);
        assert_ne!(next, port, "gap of δ + 1 ns at t={now}: a new flowlet on the other member");
        port = next;
        assert_eq!(f.counter(counter::FLOWLET_PATH_CHANGES), moves);
        let entry = f.sw.flowlet(&key(DST2, sport)).unwrap().expect("flowlet entry");
        assert_eq!(entry.last_ns, now);
        assert_eq!(f.member_port(0, entry.member), port);
    }
    // Another flow has its own flowlet: its first packet is no change.
    f.send(DST2, DSCP_FLOWLET, sport + 1, now);
    assert_eq!(f.counter(counter::FLOWLET_PATH_CHANGES), 4);
    assert_eq!(f.counter(counter::SPRAYED), 0);
}

/// Adaptive (tc 2): flowlets start on the member whose egress queue 2 is shallower, stay put
/// within a flowlet whatever the depths do, and move off a queue that became deep after a gap.
#[test]
fn adaptive_new_flowlets_avoid_the_deep_queue() {
    let mut f = Fixture::new("a");
    let board = dataplane_user::dataplane::depth_board(&f.sw).expect("mmap DEPTHS");
    // Find a flow whose ECMP member is port 2, then make port 2's queue 2 the deep one.
    let sport = (40_000..).find(|&s| f.ecmp_port(0, DST2, s) == 2).unwrap();
    board.publish(2, 2, 2_000_000);
    board.publish(3, 2, 1_500);
    // Queue 2 of the other ports is what counts: a deep queue 3 of port 3 is another class.
    board.publish(3, 3, 9_000_000);
    let mut now = 1_000_000;
    assert_eq!(f.send(DST2, DSCP_ADAPTIVE, sport, now), 3, "first flowlet: the shallow queue, not the ECMP member");
    // Port 3 congests; the flowlet stays (no reordering) while packets keep coming within δ.
    board.publish(3, 2, 4_000_000);
    for _ in 0..10 {
        now += GAP_NS / 2;
        assert_eq!(f.send(DST2, DSCP_ADAPTIVE, sport, now), 3);
    }
    assert_eq!(f.counter(counter::FLOWLET_PATH_CHANGES), 0);
    // After a gap the new flowlet moves off to port 2, now the shallower.
    now += 3 * GAP_NS;
    assert_eq!(f.send(DST2, DSCP_ADAPTIVE, sport, now), 2);
    assert_eq!(f.counter(counter::FLOWLET_PATH_CHANGES), 1);
    // Still the shallower one at the next gap: a new flowlet, but no move.
    now += 3 * GAP_NS;
    assert_eq!(f.send(DST2, DSCP_ADAPTIVE, sport, now), 2);
    assert_eq!(f.counter(counter::FLOWLET_PATH_CHANGES), 1);
}

/// Spray round-robin (tc 3): one flow's consecutive packets take the members in turn.
#[test]
fn spray_round_robin_cycles_through_the_members() {
    let mut f = Fixture::new("r");
    let ports: Vec<u8> = (0..9).map(|i| f.send(DST3, DSCP_SPRAY_RR, 50_000, 1 + i)).collect();
    let cycle = &ports[..3];
    let mut sorted = cycle.to_vec();
    sorted.sort_unstable();
    assert_eq!(sorted, [1, 2, 3], "three consecutive packets use the three members: {ports:?}");
    assert_eq!(&ports[3..6], cycle, "{ports:?}");
    assert_eq!(&ports[6..9], cycle, "{ports:?}");
    assert_eq!(f.counter(counter::SPRAYED), 9);
    assert_eq!(f.sw.flowlet(&key(DST3, 50_000)).unwrap(), None, "spraying keeps no flowlet");
}

/// Spray random (tc 4): one flow spreads over both members at about half each (binomial,
/// n = 2000, σ ≈ 22: ±5σ), and the choice does not follow a fixed cycle.
#[test]
fn spray_random_spreads_one_flow_over_both_members() {
    let mut f = Fixture::new("x");
    let mut hits = [0u32; 4];
    let mut repeats = 0;
    let mut last = 0;
    for i in 0..2000u64 {
        let p = f.send(DST2, DSCP_SPRAY_RANDOM, 50_000, 1 + i);
        hits[p as usize] += 1;
        repeats += u32::from(p == last);
        last = p;
    }
    assert_eq!(hits[0] + hits[1], 0);
    assert!((hits[2] as i64 - 1000).abs() < 110, "{hits:?}");
    // Round robin would never repeat, a fixed hash always would: random repeats about half the time.
    assert!((repeats as i64 - 1000).abs() < 110, "{repeats} repeats");
    assert_eq!(f.counter(counter::SPRAYED), 2000);
}
