//! `rocefab_xdp`: the XDP program attached to every rocefab switch port.
//!
//! Per frame (all header access bounds-checked against `data_end` with [`ptr_at`]):
//!
//! 1. Ingress port index from `PORTS` (key: ingress ifindex). Unknown ifindex → `XDP_PASS`,
//!    uncounted (the frame is not on a switch port). Otherwise count `RX`. A port flagged
//!    `PortInfo::SILENT` (a link failing without losing carrier, `rocefab fail link --silent`)
//!    drops everything, counted `SILENT_DROPPED`.
//! 2. Ethernet (IEEE 802.3), skipping ONE 802.1Q tag (TPID 0x8100, or 0x88a8 as an outer 802.1ad
//!    tag; a routed frame keeps it). A second tag is treated as an unknown EtherType.
//! 3. EtherType (IEEE 802.3 clause 3.2.6; the ones the switch handles, everything else is what
//!    an ASIC port cannot forward):
//!    - 0x88cc LLDP (IEEE 802.1AB) → Decision kind `LLDP`, redirect to the port's AF_XDP socket;
//!    - 0x8808 MAC control (IEEE 802.3 Annex 31B PAUSE, IEEE 802.1Qbb PFC) → kind `MAC_CONTROL`;
//!    - 0x0800 IPv4 (RFC 791) / 0x86dd IPv6 (RFC 8200) → step 4;
//!    - 0x0806 ARP (RFC 826) → `XDP_PASS` to the switch namespace's kernel, counter `PASS`;
//!    - anything else (another EtherType, a second VLAN tag, an 802.3 length field with LLC) →
//!      drop, counter `UNKNOWN_ETHERTYPE` (the kernel of the switch namespace never sees it).
//! 4. IP: version, IHL ≥ 5 and total/payload length checked against the frame (all of its
//!    buffers: the program is `xdp.frags`, so a frame longer than a page — RoCE at path MTU 4096
//!    over a 9216-byte link MTU — arrives as a first buffer holding every header plus
//!    fragments; [`frame_len`]); DSCP (RFC 2474) →
//!    traffic class via `DSCP_TC`; L4 ports for UDP/TCP (0 for other protocols and fragments);
//!    for UET's native encapsulation (IP protocol 253, [`dataplane_common::uet`]) the entropy of
//!    the 4-byte entropy header after the IP header stands in the source port's place (the
//!    destination port 0), so the 5-tuple hash spreads a UET flow by its per-packet entropy as it
//!    does over UDP 4793, where the entropy is the UDP source port.
//!    Multicast / broadcast / IPv6 link-local destinations → `XDP_PASS` (ND, IGMP, … belong to
//!    the switch's own stack).
//! 5. Longest-prefix match in `ROUTES_V4` / `ROUTES_V6`: miss → drop `ROUTE_MISS`;
//!    `RouteValue::LOCAL` → `XDP_PASS` (`PASS`), whatever the TTL (a router only checks TTL on
//!    frames it forwards, RFC 1812 §5.3.1); TTL / hop limit ≤ 1 → drop `TTL_EXPIRED`.
//! 6. Egress choice in `GROUPS[route.group]` by the traffic class's mode in
//!    `PARAMS[0].lb_modes` ([`dataplane_common::lb::pick`] decides; `NEXTHOPS[member].port` is
//!    the egress port):
//!    - `ecmp`: member `ecmp_index(flow_hash(5-tuple, PARAMS[0].hash_seed))`;
//!    - `flowlet` / `adaptive`: the flow's last flowlet is in the LRU hash `FLOWLETS` (key: the
//!      5-tuple); a gap longer than `PARAMS[0].flowlet_gap_ns` starts a new flowlet on another
//!      member (`adaptive`: the member whose egress queue (port, tc) is shallowest in
//!      `DEPTHS`), counted `FLOWLET_PATH_CHANGES` when it moved. The clock is
//!      `bpf_ktime_get_ns`, or `PARAMS[0].clock_override_ns` when that is non-zero: a
//!      `BPF_PROG_TEST_RUN` test sets it, because it cannot set the kernel's clock;
//!    - `spray` round-robin / random: per packet, from the per-CPU sequence `LB_SEQ` / the
//!      per-CPU xorshift32 `RNG`; counted `SPRAYED`.
//! 7. WRED/ECN (book ch. 11) when the egress queue (port, tc) is in `WRED[0].queues`: the
//!    queue's depth is read from `DEPTHS` (an mmapable array the daemon's data-plane thread
//!    stores every queue's depth into as it changes), [`wred_probability`] gives the marking
//!    probability, a seeded per-CPU xorshift32 (`RNG`) draws. On a hit: ECT(0)/ECT(1) becomes CE
//!    (IPv4: TOS and an RFC 1624 incremental header-checksum update; IPv6: traffic class), count
//!    `ECN_MARKED`; a Not-ECT packet is dropped instead, count `WRED_DROPPED`; CE stays CE.
//! 8. Write the 16-byte [`XdpMeta`] into the XDP metadata in front of the frame
//!    (`bpf_xdp_adjust_meta(-16)`; the frame itself is not moved): the time the program ran
//!    (`bpf_ktime_get_ns`, or `PARAMS[0].clock_override_ns` when set; captures stamp received
//!    frames with it) and the 8-byte [`Decision`], which ends where the frame starts; then
//!    `bpf_redirect_map` into
//!    `XSKS` at the *ingress* port index (the daemon reads every port's socket and forwards).
//!    Copy-mode AF_XDP copies the metadata along, right in front of the frame in the UMEM
//!    chunk; the RX descriptor addresses the frame, so the daemon transmits it unmoved.
//!    The redirect flags are `XDP_DROP`: with no socket in the slot the helper returns `XDP_DROP`,
//!    counted `REDIRECT_FAILED`. Successful redirects count `FORWARDED` / `LLDP` / `MAC_CONTROL`.
//!    (A socket bound to another RX queue makes the kernel drop the frame after the program
//!    returned; that shows in the socket's `rx_dropped` statistics, not in our counters.)
//!
//! Truncated or invalid headers drop the frame and count `MALFORMED` (a frame too short for its
//! EtherType, or for the one behind its tag, included). The entry point maps the
//! error of [`try_rocefab_xdp`] to `XDP_DROP` (not `XDP_ABORTED` as aya-template does) so that
//! the drop is visible in our own per-port counters rather than only in a tracepoint.
//!
//! The same object also carries the host NIC programs `rocefab_host_xdp` and
//! `rocefab_test_drop_nth` (module `host`, own maps prefixed `HOST_`).
#![cfg_attr(target_arch = "bpf", no_std)]
#![cfg_attr(target_arch = "bpf", no_main)]
// On the host (`cargo clippy --workspace`) the program items are compiled but never called.
#![cfg_attr(not(target_arch = "bpf"), allow(dead_code))]

use core::mem::size_of;
use core::ptr::read_volatile;

/// `rocefab_host_xdp` / `rocefab_test_drop_nth` for GPU-host NIC ports (same object).
mod host;

use aya_ebpf::{
    bindings::{
        xdp_action::{XDP_DROP, XDP_PASS},
        BPF_F_MMAPABLE,
    },
    helpers::{bpf_get_smp_processor_id, bpf_ktime_get_ns, bpf_xdp_adjust_meta, bpf_xdp_get_buff_len},
    macros::{map, xdp},
    maps::{lpm_trie::Key, Array, HashMap, LpmTrie, LruHashMap, PerCpuArray, XskMap},
    programs::XdpContext,
};
use dataplane_common::{
    counter, depth_index, ecn, ethertype, flow_hash, kind,
    lb::{self, FlowKey, Flowlet},
    limits::{MAX_FLOWLETS, MAX_GROUPS, MAX_GROUP_MEMBERS, MAX_NEXTHOPS, MAX_PORTS, MAX_ROUTES},
    uet, wred_hit, wred_probability, xorshift32, Decision, NextHop, NextHopGroup, PortInfo, RouteValue, SwitchParams,
    WredParams, XdpMeta, DEPTHS_LEN,
};

/// Ingress ifindex → port index.
#[map]
static PORTS: HashMap<u32, PortInfo> = HashMap::with_max_entries(MAX_PORTS, 0);

/// DSCP (0..=63) → traffic class.
#[map]
static DSCP_TC: Array<u8> = Array::with_max_entries(64, 0);

/// IPv4 routes, key data = address bytes in network order.
#[map]
static ROUTES_V4: LpmTrie<[u8; 4], RouteValue> = LpmTrie::with_max_entries(MAX_ROUTES, 0);

/// IPv6 routes, key data = address bytes in network order.
#[map]
static ROUTES_V6: LpmTrie<[u8; 16], RouteValue> = LpmTrie::with_max_entries(MAX_ROUTES, 0);

/// ECMP groups by group id.
#[map]
static GROUPS: Array<NextHopGroup> = Array::with_max_entries(MAX_GROUPS, 0);

/// Next hops by next-hop id.
#[map]
static NEXTHOPS: Array<NextHop> = Array::with_max_entries(MAX_NEXTHOPS, 0);

/// Switch parameters, entry 0.
#[map]
static PARAMS: Array<SwitchParams> = Array::with_max_entries(1, 0);

/// WRED/ECN parameters, entry 0.
#[map]
static WRED: Array<WredParams> = Array::with_max_entries(1, 0);

/// Egress queue depths in bytes, index [`depth_index`]`(port, tc)`; the daemon's data-plane
/// thread stores into its mmap of this array, the program only reads it.
#[map]
static DEPTHS: Array<u64> = Array::with_max_entries(DEPTHS_LEN, BPF_F_MMAPABLE);

/// Per-CPU xorshift32 state of the WRED and load-balancing draws (0 = not seeded yet).
#[map]
static RNG: PerCpuArray<u32> = PerCpuArray::with_max_entries(1, 0);

/// Flowlet table of the `flowlet` and `adaptive` modes: 5-tuple → the flow's last flowlet.
#[map]
static FLOWLETS: LruHashMap<FlowKey, Flowlet> = LruHashMap::with_max_entries(MAX_FLOWLETS, 0);

/// Per-CPU packet sequence of `spray: round-robin`.
#[map]
static LB_SEQ: PerCpuArray<u32> = PerCpuArray::with_max_entries(1, 0);

/// AF_XDP sockets by port index.
#[map]
static XSKS: XskMap = XskMap::with_max_entries(MAX_PORTS, 0);

/// Per-port counters: index `port * counter::COUNT + id`.
#[map]
static COUNTERS: PerCpuArray<u64> = PerCpuArray::with_max_entries(MAX_PORTS * counter::COUNT, 0);

const ETH_HLEN: usize = 14;
const VLAN_HLEN: usize = 4;
const IPV4_HLEN_MIN: usize = 20;
const IPV6_HLEN: usize = 40;
const IPPROTO_TCP: u8 = 6;
const IPPROTO_UDP: u8 = 17;
const UDP_HLEN: usize = 8;
const TCP_HLEN_MIN: usize = 20;

/// Returns a pointer to a `T` at `offset` from the start of the frame if it lies entirely inside
/// the frame (the aya book's `ptr_at`); the verifier accepts the dereference after this check.
#[inline(always)]
fn ptr_at<T>(ctx: &XdpContext, offset: usize) -> Result<*const T, ()> {
    let start = ctx.data();
    let end = ctx.data_end();
    if start + offset + size_of::<T>() > end {
        return Err(());
    }
    Ok((start + offset) as *const T)
}

/// The frame's length in bytes, all of its buffers: a multi-buffer frame (`xdp.frags`, an
/// Ethernet MTU above what one page holds) has only its first buffer between `data` and
/// `data_end`, the rest in fragments the program never reads (`bpf_xdp_get_buff_len`, Linux
/// 5.18). Only lengths are checked against it; every header access stays in the first buffer
/// through [`ptr_at`].
#[inline(always)]
fn frame_len(ctx: &XdpContext) -> usize {
    // SAFETY: `ctx.ctx` is the program's `xdp_md`; the helper only reads the buffer's lengths.
    unsafe { bpf_xdp_get_buff_len(ctx.ctx) as usize }
}

/// Reads a big-endian u16 at `offset`.
#[inline(always)]
fn be16_at(ctx: &XdpContext, offset: usize) -> Result<u16, ()> {
    let p = ptr_at::<[u8; 2]>(ctx, offset)?;
    // SAFETY: `ptr_at` checked that the two bytes lie inside the frame; [u8; 2] has alignment 1.
    Ok(u16::from_be_bytes(unsafe { *p }))
}

/// Adds one to counter `id` of `port` (per-CPU slot, so a plain increment is race-free).
#[inline(always)]
fn count(port: u32, id: u32) {
    if let Some(p) = COUNTERS.get_ptr_mut(port * counter::COUNT + id) {
        // SAFETY: the pointer is this CPU's slot of a per-CPU array element returned by the map
        // lookup helper; no other context writes it concurrently (XDP runs with preemption off).
        unsafe { *p += 1 };
    }
}

#[xdp(frags)]
pub fn rocefab_xdp(ctx: XdpContext) -> u32 {
    // SAFETY: `ctx.ctx` is the `xdp_md` the kernel passed to the program, valid for the call.
    let ifindex = unsafe { (*ctx.ctx).ingress_ifindex };
    let (port, flags) = match PORTS.get_ptr(ifindex) {
        // SAFETY: pointer returned by the map lookup helper, valid for the program run.
        Some(p) => unsafe { ((*p).index, (*p).flags) },
        None => return XDP_PASS,
    };
    if port >= MAX_PORTS {
        return XDP_PASS;
    }
    count(port, counter::RX);
    if flags & PortInfo::SILENT != 0 {
        return drop_as(port, counter::SILENT_DROPPED);
    }
    match try_rocefab_xdp(&ctx, port) {
        Ok(action) => action,
        Err(()) => {
            count(port, counter::MALFORMED);
            XDP_DROP
        }
    }
}

/// What to do with a parsed IP frame.
struct Flow {
    src: [u32; 4],
    dst: [u32; 4],
    proto: u8,
    sport: u16,
    dport: u16,
    tc: u8,
    /// Offset of the IP header.
    l3: usize,
    v6: bool,
}

/// Classifies, routes and redirects one frame; `Err(())` means truncated/invalid headers.
#[inline(always)]
fn try_rocefab_xdp(ctx: &XdpContext, port: u32) -> Result<u32, ()> {
    let mut l3 = ETH_HLEN;
    let mut ety = be16_at(ctx, 12)?;
    if ety == ethertype::VLAN || ety == ethertype::QINQ {
        ety = be16_at(ctx, ETH_HLEN + 2)?;
        l3 += VLAN_HLEN;
    }
    match ety {
        ethertype::LLDP => Ok(to_userspace(ctx, port, kind::LLDP, 0, 0, 0, counter::LLDP)),
        ethertype::MAC_CONTROL => Ok(to_userspace(ctx, port, kind::MAC_CONTROL, 0, 0, 0, counter::MAC_CONTROL)),
        ethertype::IPV4 => ipv4(ctx, port, l3),
        ethertype::IPV6 => ipv6(ctx, port, l3),
        ethertype::ARP => Ok(pass(port)),
        _ => Ok(drop_as(port, counter::UNKNOWN_ETHERTYPE)),
    }
}

#[inline(always)]
fn pass(port: u32) -> u32 {
    count(port, counter::PASS);
    XDP_PASS
}

#[inline(always)]
fn drop_as(port: u32, id: u32) -> u32 {
    count(port, id);
    XDP_DROP
}

#[inline(always)]
fn dscp_tc(dscp: u8) -> u8 {
    // Mask to 0..=63 for the verifier; values ≥ 8 cannot come from a validated config.
    DSCP_TC.get((dscp & 0x3f) as u32).map_or(0, |tc| *tc & 0x07)
}

/// Source and destination ports of a UDP/TCP header at `l4`; for UET's native encapsulation the
/// entropy of its entropy header (xdp2 `struct uet_entropy_hdr`: entropy, reserved) as the
/// source port and 0; zeros for other protocols.
///
/// The ports are read through the very pointer that was bounds-checked: re-deriving a pointer
/// after a wider check lets LLVM drop the (implied) narrower check, and the verifier then
/// rejects the access as "outside of the packet".
#[inline(always)]
fn l4_ports(ctx: &XdpContext, l4: usize, proto: u8) -> Result<(u16, u16), ()> {
    let h: [u8; 4] = match proto {
        IPPROTO_UDP => {
            let p = ptr_at::<[u8; UDP_HLEN]>(ctx, l4)?;
            // SAFETY: `ptr_at` checked the UDP header lies inside the frame; alignment 1.
            let h = unsafe { &*p };
            [h[0], h[1], h[2], h[3]]
        }
        IPPROTO_TCP => {
            let p = ptr_at::<[u8; TCP_HLEN_MIN]>(ctx, l4)?;
            // SAFETY: `ptr_at` checked the fixed TCP header lies inside the frame; alignment 1.
            let h = unsafe { &*p };
            [h[0], h[1], h[2], h[3]]
        }
        uet::IPPROTO => {
            let p = ptr_at::<[u8; uet::ENTROPY_HLEN]>(ctx, l4)?;
            // SAFETY: `ptr_at` checked the entropy header lies inside the frame; alignment 1.
            let h = unsafe { &*p };
            [h[0], h[1], 0, 0]
        }
        _ => return Ok((0, 0)),
    };
    Ok((u16::from_be_bytes([h[0], h[1]]), u16::from_be_bytes([h[2], h[3]])))
}

#[inline(always)]
fn ipv4(ctx: &XdpContext, port: u32, l3: usize) -> Result<u32, ()> {
    let h = ptr_at::<[u8; IPV4_HLEN_MIN]>(ctx, l3)?;
    // SAFETY: `ptr_at` checked the 20 bytes lie inside the frame; alignment 1.
    let h = unsafe { &*h };
    if h[0] >> 4 != 4 {
        return Err(());
    }
    let ihl = ((h[0] & 0x0f) as usize) * 4;
    if ihl < IPV4_HLEN_MIN {
        return Err(());
    }
    let total_len = u16::from_be_bytes([h[2], h[3]]) as usize;
    // The whole datagram must be in the frame (trailing Ethernet padding is allowed).
    if total_len < ihl || l3 + total_len > frame_len(ctx) {
        return Err(());
    }
    // The options, if any, must be present too (covered by total_len ≥ ihl, checked again for
    // the verifier by the L4 access below).
    let frag = u16::from_be_bytes([h[6], h[7]]) & 0x3fff; // MF flag + fragment offset
    let ttl = h[8];
    let proto = h[9];
    let src = [h[12], h[13], h[14], h[15]];
    let dst = [h[16], h[17], h[18], h[19]];
    let tc = dscp_tc(h[1] >> 2);
    let (sport, dport) = if frag == 0 { l4_ports(ctx, l3 + ihl, proto)? } else { (0, 0) };

    // Multicast (224.0.0.0/4) and limited broadcast go to the switch's own stack.
    if dst[0] & 0xf0 == 0xe0 || dst == [0xff; 4] {
        return Ok(pass(port));
    }
    let route = match ROUTES_V4.get(Key::new(32, dst)) {
        Some(r) => r.group,
        None => return Ok(drop_as(port, counter::ROUTE_MISS)),
    };
    let flow = Flow {
        src: [u32::from_be_bytes(src), 0, 0, 0],
        dst: [u32::from_be_bytes(dst), 0, 0, 0],
        proto,
        sport,
        dport,
        tc,
        l3,
        v6: false,
    };
    Ok(forward(ctx, port, route, ttl, &flow))
}

#[inline(always)]
fn ipv6(ctx: &XdpContext, port: u32, l3: usize) -> Result<u32, ()> {
    let h = ptr_at::<[u8; IPV6_HLEN]>(ctx, l3)?;
    // SAFETY: `ptr_at` checked the 40 bytes lie inside the frame; alignment 1.
    let h = unsafe { &*h };
    if h[0] >> 4 != 6 {
        return Err(());
    }
    let payload_len = u16::from_be_bytes([h[4], h[5]]) as usize;
    if l3 + IPV6_HLEN + payload_len > frame_len(ctx) {
        return Err(());
    }
    let traffic_class = (h[0] << 4) | (h[1] >> 4);
    let proto = h[6];
    let hop_limit = h[7];
    let mut src = [0u8; 16];
    let mut dst = [0u8; 16];
    src.copy_from_slice(&h[8..24]);
    dst.copy_from_slice(&h[24..40]);
    let tc = dscp_tc(traffic_class >> 2);
    // Extension headers are not walked: their next header is hashed with zero ports.
    let (sport, dport) = l4_ports(ctx, l3 + IPV6_HLEN, proto)?;

    // Multicast (ff00::/8, ND included) and link-local (fe80::/10) go to the switch's own stack.
    if dst[0] == 0xff || (dst[0] == 0xfe && dst[1] & 0xc0 == 0x80) {
        return Ok(pass(port));
    }
    let route = match ROUTES_V6.get(Key::new(128, dst)) {
        Some(r) => r.group,
        None => return Ok(drop_as(port, counter::ROUTE_MISS)),
    };
    let w = |a: &[u8; 16], i: usize| u32::from_be_bytes([a[i], a[i + 1], a[i + 2], a[i + 3]]);
    let flow = Flow {
        src: [w(&src, 0), w(&src, 4), w(&src, 8), w(&src, 12)],
        dst: [w(&dst, 0), w(&dst, 4), w(&dst, 8), w(&dst, 12)],
        proto,
        sport,
        dport,
        tc,
        l3,
        v6: true,
    };
    Ok(forward(ctx, port, route, hop_limit, &flow))
}

/// Local delivery, TTL check, ECMP member choice and redirect of a routed frame.
#[inline(always)]
fn forward(ctx: &XdpContext, port: u32, group: u32, ttl: u8, flow: &Flow) -> u32 {
    if group == RouteValue::LOCAL {
        return pass(port);
    }
    if ttl <= 1 {
        return drop_as(port, counter::TTL_EXPIRED);
    }
    let Some(g) = GROUPS.get(group) else {
        return drop_as(port, counter::ROUTE_MISS);
    };
    if g.count == 0 {
        // An empty group (not produced by a validated config) is a black hole.
        return drop_as(port, counter::ROUTE_MISS);
    }
    let Some(params) = PARAMS.get(0) else {
        return drop_as(port, counter::ROUTE_MISS);
    };
    let hash = flow_hash(flow.src, flow.dst, flow.proto, flow.sport, flow.dport, params.hash_seed);
    // Masked to the 16 members where it is used: a bounds check on a value LLVM spilled and
    // reloaded is lost on the verifier ("unbounded memory access").
    let idx = choose(port, g, params, hash, flow);
    let Some(&member) = g.members.get((idx & (MAX_GROUP_MEMBERS as u32 - 1)) as usize) else {
        return drop_as(port, counter::ROUTE_MISS);
    };
    let Some(nh) = NEXTHOPS.get(member) else {
        return drop_as(port, counter::ROUTE_MISS);
    };
    match wred(ctx, nh.port, flow) {
        Wred::Pass => {}
        Wred::Marked => count(port, counter::ECN_MARKED),
        Wred::Drop => return drop_as(port, counter::WRED_DROPPED),
    }
    to_userspace(ctx, port, kind::FORWARD, flow.tc, nh.port as u8, member as u16, counter::FORWARDED)
}

/// The index of the egress member in `g` for a frame of `flow` (step 6 of the crate docs):
/// gathers the mode's inputs, lets [`lb::pick`] decide, stores the flowlet and counts.
#[inline(always)]
fn choose(port: u32, g: &NextHopGroup, params: &SwitchParams, hash: u32, flow: &Flow) -> u32 {
    let tc = (flow.tc & 7) as usize;
    let mode = params.lb_modes.get(tc).copied().unwrap_or(lb::mode::ECMP);
    if mode == lb::mode::ECMP {
        return dataplane_common::ecmp_index(hash, g.count);
    }
    let flowlets = mode == lb::mode::FLOWLET || mode == lb::mode::ADAPTIVE;
    let key =
        FlowKey { src: flow.src, dst: flow.dst, sport: flow.sport, dport: flow.dport, proto: flow.proto, _pad: [0; 3] };
    let (prev, now) = if flowlets {
        // SAFETY: pointer returned by the lookup helper, valid for the program run; the value
        // is copied out at once. A concurrent update on another CPU can at worst yield a torn
        // entry, whose member `lb::pick` bounds by the group size.
        let prev = FLOWLETS.get_ptr(key).map(|p| unsafe { *p });
        (prev, clock_ns())
    } else {
        (None, 0)
    };
    let seq = if mode == lb::mode::SPRAY_ROUND_ROBIN { next_seq() } else { 0 };
    // The draw only where `lb::pick` uses it: every sprayed packet, and a flowlet that starts
    // after a gap (not every packet of a continuing one).
    let new_flowlet = prev.is_some_and(|p| !lb::continues(p.last_ns, now, params.flowlet_gap_ns));
    let rand = if mode == lb::mode::SPRAY_RANDOM || (mode == lb::mode::FLOWLET && new_flowlet) { draw() } else { 0 };
    let depth = |m: u32| -> u64 {
        let Some(&nh_id) = g.members.get((m & (MAX_GROUP_MEMBERS as u32 - 1)) as usize) else { return u64::MAX };
        let Some(nh) = NEXTHOPS.get(nh_id) else { return u64::MAX };
        if nh.port >= MAX_PORTS {
            return u64::MAX;
        }
        match DEPTHS.get_ptr(depth_index(nh.port, tc as u32)) {
            // SAFETY: pointer into the array map's value area; userspace stores whole aligned
            // u64s concurrently, so read it once, volatile.
            Some(d) => unsafe { read_volatile(d) },
            None => u64::MAX,
        }
    };
    let p = lb::pick(mode, g.count, hash, prev, now, params.flowlet_gap_ns, rand, seq, depth);
    if let Some(f) = p.flowlet {
        // A full LRU map evicts its oldest flow; an update can only fail for lack of memory,
        // and then the flow merely starts a new flowlet at its next packet.
        let _ = FLOWLETS.insert(key, f, 0);
    }
    if p.path_changed {
        count(port, counter::FLOWLET_PATH_CHANGES);
    }
    if p.sprayed {
        count(port, counter::SPRAYED);
    }
    p.member
}

/// The next value of this CPU's `LB_SEQ`.
#[inline(always)]
fn next_seq() -> u32 {
    let Some(s) = LB_SEQ.get_ptr_mut(0) else { return 0 };
    // SAFETY: this CPU's slot of a per-CPU array; XDP runs with preemption off.
    unsafe {
        let v = *s;
        *s = v.wrapping_add(1);
        v
    }
}

/// A draw from this CPU's xorshift32 `RNG`, seeded from the WRED seed on first use.
#[inline(always)]
fn draw() -> u32 {
    let Some(state) = RNG.get_ptr_mut(0) else { return 0 };
    // SAFETY: this CPU's slot of a per-CPU array; XDP runs with preemption off, so no one else
    // writes it during the program run.
    unsafe {
        let mut x = *state;
        if x == 0 {
            let seed = WRED.get(0).map_or(0, |p| p.seed);
            // SAFETY: helper without arguments.
            x = (seed ^ bpf_get_smp_processor_id()) | 1;
        }
        x = xorshift32(x);
        *state = x;
        x
    }
}

/// What WRED did to a frame.
enum Wred {
    /// Not marked (below the curve's draw, not a WRED queue, or already CE).
    Pass,
    /// ECT → CE.
    Marked,
    /// Not-ECT where an ECT packet would have been marked.
    Drop,
}

/// WRED/ECN on egress queue (`egress`, `flow.tc`): see step 7 of the crate docs. Marks in place;
/// `Wred::Drop` for a Not-ECT packet that would have been marked.
#[inline(always)]
fn wred(ctx: &XdpContext, egress: u32, flow: &Flow) -> Wred {
    let Some(p) = WRED.get(0) else { return Wred::Pass };
    let tc = (flow.tc & 7) as u32;
    if p.queues & (1 << tc) == 0 || egress >= MAX_PORTS {
        return Wred::Pass;
    }
    let Some(d) = DEPTHS.get_ptr(depth_index(egress, tc)) else { return Wred::Pass };
    // SAFETY: pointer into the array map's value area returned by the lookup helper; userspace
    // stores whole aligned u64s into it concurrently, so read it once, volatile.
    let depth = unsafe { read_volatile(d) };
    let prob = wred_probability(depth, p);
    if prob == 0 {
        return Wred::Pass;
    }
    if !wred_hit(prob, draw()) {
        return Wred::Pass;
    }
    if flow.v6 {
        mark_v6(ctx, flow.l3)
    } else {
        mark_v4(ctx, flow.l3)
    }
}

/// Sets CE in an IPv4 header at `l3` and updates its checksum incrementally (RFC 1624 eqn. 3:
/// HC' = ~(~HC + ~m + m'), over the 16-bit word version/IHL + TOS).
#[inline(always)]
fn mark_v4(ctx: &XdpContext, l3: usize) -> Wred {
    let Ok(h) = ptr_at::<[u8; IPV4_HLEN_MIN]>(ctx, l3) else { return Wred::Pass };
    let h = h as *mut [u8; IPV4_HLEN_MIN];
    // SAFETY: `ptr_at` checked the 20 bytes lie inside the frame; XDP frames are writable.
    let h = unsafe { &mut *h };
    match h[1] & 3 {
        ecn::NOT_ECT => return Wred::Drop,
        ecn::CE => return Wred::Pass,
        _ => {}
    }
    let old = u16::from_be_bytes([h[0], h[1]]);
    h[1] |= ecn::CE;
    let new = u16::from_be_bytes([h[0], h[1]]);
    let hc = u16::from_be_bytes([h[10], h[11]]);
    let mut sum = (!hc) as u32 + (!old) as u32 + new as u32;
    sum = (sum & 0xffff) + (sum >> 16);
    sum = (sum & 0xffff) + (sum >> 16);
    let c = (!(sum as u16)).to_be_bytes();
    h[10] = c[0];
    h[11] = c[1];
    Wred::Marked
}

/// Sets CE in the traffic class of an IPv6 header at `l3` (bits 4-5 of its second byte).
#[inline(always)]
fn mark_v6(ctx: &XdpContext, l3: usize) -> Wred {
    let Ok(h) = ptr_at::<[u8; 2]>(ctx, l3) else { return Wred::Pass };
    let h = h as *mut [u8; 2];
    // SAFETY: `ptr_at` checked the 2 bytes lie inside the frame; XDP frames are writable.
    let h = unsafe { &mut *h };
    match (h[1] >> 4) & 3 {
        ecn::NOT_ECT => return Wred::Drop,
        ecn::CE => return Wred::Pass,
        _ => {}
    }
    h[1] |= ecn::CE << 4;
    Wred::Marked
}

/// The program's clock: `bpf_ktime_get_ns` (CLOCK_MONOTONIC), or `PARAMS[0].clock_override_ns`
/// when a `BPF_PROG_TEST_RUN` test set it.
#[inline(always)]
fn clock_ns() -> u64 {
    match PARAMS.get(0).map_or(0, |p| p.clock_override_ns) {
        // SAFETY: helper without arguments.
        0 => unsafe { bpf_ktime_get_ns() },
        t => t,
    }
}

/// Writes `meta` as the frame's XDP metadata (`bpf_xdp_adjust_meta(-16)`; the frame itself is
/// not moved). False when the headroom has no room for it.
#[inline(always)]
pub(crate) fn write_meta(ctx: &XdpContext, meta: &XdpMeta) -> bool {
    // SAFETY: `ctx.ctx` is the program's `xdp_md`; the helper validates the delta itself and
    // fails without touching the frame when the headroom is too small.
    if unsafe { bpf_xdp_adjust_meta(ctx.ctx, -(XdpMeta::LEN as i32)) } != 0 {
        return false;
    }
    // The metadata ends where the frame starts; the verifier wants that checked against `data`.
    let (m, data) = (ctx.metadata(), ctx.data());
    if m + XdpMeta::LEN > data {
        return false;
    }
    // SAFETY: the 16 bytes at `m` lie inside the metadata area just grown (checked above);
    // alignment 1.
    unsafe { *(m as *mut [u8; XdpMeta::LEN]) = meta.to_bytes() };
    true
}

/// Puts the [`XdpMeta`] (when the program saw the frame, and the [`Decision`]) into the frame's
/// XDP metadata and redirects the frame to the ingress port's AF_XDP socket.
#[inline(always)]
fn to_userspace(ctx: &XdpContext, port: u32, kind: u8, tc: u8, egress_port: u8, nexthop: u16, ok_counter: u32) -> u32 {
    let decision = Decision { magic: Decision::MAGIC, kind, tc, ingress_port: port as u8, egress_port, nexthop };
    if !write_meta(ctx, &XdpMeta { rx_ns: clock_ns(), decision }) {
        return drop_as(port, counter::REDIRECT_FAILED);
    }
    match XSKS.redirect(port, XDP_DROP as u64) {
        Ok(action) => {
            count(port, ok_counter);
            action
        }
        Err(action) => {
            count(port, counter::REDIRECT_FAILED);
            action
        }
    }
}

#[cfg(target_arch = "bpf")]
#[panic_handler]
fn panic(_info: &core::panic::PanicInfo) -> ! {
    // The verifier rejects programs that can reach a panic; this is never linked in practice.
    loop {}
}

/// Kernel licence string: "Dual MIT/GPL" is GPL-compatible, as aya-template uses.
#[cfg(target_arch = "bpf")]
#[link_section = "license"]
#[no_mangle]
static LICENSE: [u8; 13] = *b"Dual MIT/GPL\0";

/// Host builds (`cargo clippy --workspace`) get an empty binary; the real object is built for
/// `bpfel-unknown-none` by `plumbing/build.rs`.
#[cfg(not(target_arch = "bpf"))]
fn main() {}
