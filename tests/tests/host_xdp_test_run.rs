//! The GPU-host NIC programs `rocefab_host_xdp` and `rocefab_test_drop_nth` on crafted frames,
//! through `BPF_PROG_TEST_RUN` (needs root). Loading them at all proves the verifier accepts them.
//!
//! Each test uses its own veth pair `rf-h-x<tag>a`/`rf-h-x<tag>b` (removed on drop): the kernel
//! wants a real ingress device. Slot 0 gets a bound AF_XDP socket so redirects succeed.
//!
//! Run as root: `cargo test -p rocefab-tests --test host_xdp_test_run -- --test-threads=1`.
use std::net::Ipv4Addr;

use etherparse::PacketBuilder;
use rocefab_plumbing::host_loader::{counter, load_for_test, DROP_NTH_PROGRAM_NAME, PROGRAM_NAME};
use rocefab_plumbing::loader::xdp_action::{XDP_DROP, XDP_PASS, XDP_REDIRECT};
use rocefab_tests::xdp::{ifindex, VethPair, XskSocket};

const SRC_MAC: [u8; 6] = [0x02, 0, 0, 0, 0x01, 0x01];
const DST_MAC: [u8; 6] = [0x02, 0, 0, 0, 0x02, 0x01];

fn udp_v4(dport: u16, payload_len: usize) -> Vec<u8> {
    let b = PacketBuilder::ethernet2(SRC_MAC, DST_MAC)
        .ipv4(Ipv4Addr::new(10, 0, 0, 1).octets(), Ipv4Addr::new(10, 0, 0, 2).octets(), 64)
        .udp(0xc001, dport);
    let payload = vec![0x5au8; payload_len];
    let mut v = Vec::new();
    b.write(&mut v, &payload).unwrap();
    v
}

fn udp_v6(dport: u16) -> Vec<u8> {
    let mut s = [0u8; 16];
    s[0] = 0xfd;
    s[15] = 1;
    let mut d = s;
    d[15] = 2;
    let b = PacketBuilder::ethernet2(SRC_MAC, DST_MAC).ipv6(s, d, 64).udp(0xc001, dport);
    let mut v = Vec::new();
    b.write(&mut v, &[0u8; 40]).unwrap();
    v
}

/// A UET frame over IP protocol `proto` (253: the native encapsulation) with its entropy header.
fn ip_proto_v4(proto: u8) -> Vec<u8> {
    let b = PacketBuilder::ethernet2(SRC_MAC, DST_MAC).ipv4([10, 0, 0, 1], [10, 0, 0, 2], 64);
    let mut v = Vec::new();
    b.write(&mut v, etherparse::IpNumber(proto), &[0xc1, 0x23, 0, 0, 0x10, 0x00]).unwrap();
    v
}

fn ip_proto_v6(proto: u8) -> Vec<u8> {
    let (mut s, mut d) = ([0u8; 16], [0u8; 16]);
    (s[0], s[15], d[0], d[15]) = (0xfd, 1, 0xfd, 2);
    let b = PacketBuilder::ethernet2(SRC_MAC, DST_MAC).ipv6(s, d, 64);
    let mut v = Vec::new();
    b.write(&mut v, etherparse::IpNumber(proto), &[0xc1, 0x23, 0, 0, 0x10, 0x00]).unwrap();
    v
}

fn pfc_frame() -> Vec<u8> {
    let mut f = vec![0u8; 60];
    f[..6].copy_from_slice(&[0x01, 0x80, 0xc2, 0, 0, 1]);
    f[6..12].copy_from_slice(&SRC_MAC);
    f[12..14].copy_from_slice(&0x8808u16.to_be_bytes());
    f[14..16].copy_from_slice(&0x0101u16.to_be_bytes());
    f[16..18].copy_from_slice(&0x0008u16.to_be_bytes());
    f[18 + 6..18 + 8].copy_from_slice(&0xffffu16.to_be_bytes());
    f
}

fn arp_frame() -> Vec<u8> {
    let mut f = vec![0u8; 60];
    f[..6].copy_from_slice(&[0xff; 6]);
    f[6..12].copy_from_slice(&SRC_MAC);
    f[12..14].copy_from_slice(&0x0806u16.to_be_bytes());
    f[14..22].copy_from_slice(&[0, 1, 8, 0, 6, 4, 0, 1]);
    f
}

fn icmp_v4() -> Vec<u8> {
    let b = PacketBuilder::ethernet2(SRC_MAC, DST_MAC).ipv4([10, 0, 0, 1], [10, 0, 0, 2], 64).icmpv4_echo_request(1, 1);
    let mut v = Vec::new();
    b.write(&mut v, &[0u8; 16]).unwrap();
    v
}

/// CLOCK_MONOTONIC in ns (the clock of `bpf_ktime_get_ns`).
fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes one timespec into the live local.
    assert_eq!(unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) }, 0);
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

#[test]
fn host_program_redirects_roce_uet_and_mac_control_and_passes_the_rest() {
    let veth = VethPair::new("rf-h-x1a", "rf-h-x1b").unwrap();
    let idx = ifindex(&veth.a).unwrap();
    let mut h = load_for_test(&[idx], PROGRAM_NAME).expect("rocefab_host_xdp must pass the verifier");
    let xsk = XskSocket::bind(&veth.a).unwrap();
    h.register_xsk(0, xsk.fd()).unwrap();

    let cases: [(&str, Vec<u8>, u32); 13] = [
        ("rocev2 ipv4", udp_v4(4791, 64), XDP_REDIRECT),
        ("rocev2 ipv6", udp_v6(4791), XDP_REDIRECT),
        ("uet udp ipv4", udp_v4(4793, 64), XDP_REDIRECT),
        ("uet udp ipv6", udp_v6(4793), XDP_REDIRECT),
        ("uet native ipv4", ip_proto_v4(253), XDP_REDIRECT),
        ("uet native ipv6", ip_proto_v6(253), XDP_REDIRECT),
        ("ip protocol 254", ip_proto_v4(254), XDP_PASS),
        ("pfc", pfc_frame(), XDP_REDIRECT),
        ("udp 4790", udp_v4(4790, 64), XDP_PASS),
        ("arp", arp_frame(), XDP_PASS),
        ("icmp echo", icmp_v4(), XDP_PASS),
        ("ipv6 udp 53", udp_v6(53), XDP_PASS),
        ("truncated ipv4", udp_v4(4791, 64)[..30].to_vec(), XDP_PASS),
    ];
    for (what, frame, want) in &cases {
        let before = monotonic_ns();
        let out = h.test_run(frame, idx).unwrap();
        assert_eq!(out.action, *want, "{what}");
        if *want == XDP_REDIRECT {
            assert_eq!(&out.data, frame, "{what}: redirected frames are not modified");
            // The time the program saw the frame (CLOCK_MONOTONIC, as bpf_ktime_get_ns), for
            // captures: between the clock readings around the run.
            let after = monotonic_ns();
            let m = out
                .xdp_meta()
                .unwrap_or_else(|| panic!("{what}: XdpMeta in front of the frame, got {:02x?}", out.meta));
            assert_eq!((m.decision.kind, m.decision.ingress_port), (dataplane_common::kind::HOST, 0), "{what}");
            assert!(m.rx_ns >= before && m.rx_ns <= after, "{what}: rx_ns {} outside [{before}, {after}]", m.rx_ns);
        } else {
            assert!(out.meta.is_empty(), "{what}: a passed frame gets no metadata");
        }
    }
    let c = h.counters().unwrap()[0];
    assert_eq!(c[counter::RX as usize], 13);
    assert_eq!(c[counter::ROCE as usize], 6, "RoCEv2 and UET");
    assert_eq!(c[counter::MAC_CONTROL as usize], 1);
    assert_eq!(c[counter::PASS as usize], 6);
    assert_eq!(c[counter::REDIRECT_FAILED as usize], 0);
}

#[test]
fn host_program_drops_roce_without_a_socket_and_ignores_unknown_ports() {
    let veth = VethPair::new("rf-h-x2a", "rf-h-x2b").unwrap();
    let (a, b) = (ifindex(&veth.a).unwrap(), ifindex(&veth.b).unwrap());
    // Only `a` is a host port; no socket is registered.
    let mut h = load_for_test(&[a], PROGRAM_NAME).unwrap();
    assert_eq!(h.test_run(&udp_v4(4791, 64), a).unwrap().action, XDP_DROP);
    assert_eq!(h.test_run(&udp_v4(4791, 64), b).unwrap().action, XDP_PASS, "not a host port");
    let c = h.counters().unwrap()[0];
    assert_eq!(c[counter::REDIRECT_FAILED as usize], 1);
    assert_eq!(c[counter::RX as usize], 1, "frames on unknown ports are not counted");
}

#[test]
fn drop_nth_program_drops_every_nth_roce_frame_only() {
    // The drop sequence is counted per CPU: keep every test run on one CPU.
    pin_to_cpu0();
    let veth = VethPair::new("rf-h-x3a", "rf-h-x3b").unwrap();
    let idx = ifindex(&veth.a).unwrap();
    let mut h = load_for_test(&[idx], DROP_NTH_PROGRAM_NAME).expect("rocefab_test_drop_nth must pass the verifier");
    let xsk = XskSocket::bind(&veth.a).unwrap();
    h.register_xsk(0, xsk.fd()).unwrap();

    // N = 0: nothing dropped.
    for _ in 0..5 {
        assert_eq!(h.test_run(&udp_v4(4791, 32), idx).unwrap().action, XDP_REDIRECT);
    }
    h.set_drop_nth(4).unwrap();
    let mut actions = Vec::new();
    for i in 0..16 {
        actions.push(h.test_run(&udp_v4(4791, 32), idx).unwrap().action);
        // Non-RoCE frames in between neither count nor get dropped.
        if i % 3 == 0 {
            assert_eq!(h.test_run(&arp_frame(), idx).unwrap().action, XDP_PASS);
            assert_eq!(h.test_run(&pfc_frame(), idx).unwrap().action, XDP_REDIRECT);
        }
    }
    // BPF_PROG_TEST_RUN runs on the calling CPU; the per-CPU sequence continues from 5 seen.
    let dropped: Vec<usize> = actions.iter().enumerate().filter(|(_, &a)| a == XDP_DROP).map(|(i, _)| i).collect();
    assert_eq!(dropped.len(), 4, "16 frames at N=4 drop 4: {actions:?}");
    assert!(dropped.windows(2).all(|w| w[1] - w[0] == 4), "every 4th: {dropped:?}");
    let c = h.counters().unwrap()[0];
    assert_eq!(c[counter::TEST_DROPPED as usize], 4);
    assert_eq!(c[counter::TEST_SEEN as usize], 21);
    assert_eq!(c[counter::ROCE as usize], 17);
}

fn pin_to_cpu0() {
    // SAFETY: cpu_set_t is plain data; CPU_ZERO/CPU_SET write inside it; pid 0 = this thread.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_ZERO(&mut set);
        libc::CPU_SET(0, &mut set);
        assert_eq!(libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set), 0, "sched_setaffinity");
    }
}
