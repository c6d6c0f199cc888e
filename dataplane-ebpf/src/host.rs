//! `rocefab_host_xdp`: the XDP program on a GPU host's NIC veths (`gpu0`, `gpu1`, …), and
//! `rocefab_test_drop_nth`, the same program with a fault injector for tests.
//!
//! The emulated RDMA NIC (`rocefab-hostd`, crate `gpu-host`) owns every RoCEv2 and MAC control
//! frame that reaches a host port; the host's kernel stack keeps everything else (ARP, ICMP,
//! IPv6 ND, ...), so `ping` and neighbour resolution keep working on the same interface.
//!
//! Both are `xdp.frags` programs (`BPF_F_XDP_HAS_FRAGS`): veth refuses a link MTU above about
//! 3500 bytes to a program without it. A longer frame arrives with its headers in the first
//! buffer, which is all the program reads.
//!
//! Per frame (all header access bounds-checked against `data_end` with [`ptr_at`]):
//!
//! 1. Port slot from `HOST_PORTS` (key: ingress ifindex). Unknown ifindex → `XDP_PASS`.
//! 2. Ethernet II, skipping one 802.1Q / 802.1ad tag.
//! 3. EtherType 0x8808 (IEEE 802.3 Annex 31B PAUSE, IEEE 802.1Qbb PFC) → redirect.
//! 4. IPv4 (RFC 791, unfragmented, protocol 17) or IPv6 (RFC 8200, next header 17, no extension
//!    headers walked) with UDP (RFC 768) destination port 4791 (RoCEv2, IBTA Annex A17) or 4793
//!    (Ultra Ethernet Transport, the IANA port), or IP protocol 253 (UET's native encapsulation,
//!    `dataplane_common::uet::IPPROTO`) → redirect.
//! 5. Everything else, including truncated headers, → `XDP_PASS` (the kernel judges it).
//!
//! Redirect: `bpf_redirect_map(HOST_XSKS, slot, XDP_DROP)` — the frame is delivered unchanged,
//! with a [`XdpMeta`] as its XDP metadata: `bpf_ktime_get_ns()` (when the program saw it, the
//! time a capture stamps it with) and a Decision of kind `HOST`. With no socket in the slot the frame
//! is dropped and counted `REDIRECT_FAILED` (passing it would make the kernel answer RoCEv2 with
//! ICMP port-unreachable).
//!
//! `rocefab_test_drop_nth` additionally drops every `HOST_DROP_NTH[0]`-th RoCEv2 frame (0 = never)
//! counted per CPU, and counts the drops in `TEST_DROPPED`: a deterministic lossy link for the
//! go-back-N tests. Both programs share the maps, so a NIC daemon drives either unchanged.
//!
//! Counter ids (`HOST_COUNTERS` index `slot * host_counter::COUNT + id`) are
//! `dataplane_common::host_counter`, which the loader reads too.
use aya_ebpf::{
    bindings::xdp_action::{XDP_DROP, XDP_PASS},
    helpers::bpf_ktime_get_ns,
    macros::{map, xdp},
    maps::{Array, HashMap, PerCpuArray, XskMap},
    programs::XdpContext,
};
use dataplane_common::uet::{IPPROTO as UET_IPPROTO, UDP_PORT as UET_UDP_PORT};
use dataplane_common::{ethertype, host_counter, kind, limits::MAX_PORTS, Decision, XdpMeta};

use crate::{be16_at, ptr_at, ETH_HLEN, IPPROTO_UDP, IPV4_HLEN_MIN, IPV6_HLEN, UDP_HLEN, VLAN_HLEN};

/// RoCEv2 UDP destination port (IBTA Annex A17.2).
const ROCE_UDP_PORT: u16 = 4791;

/// Ingress ifindex → port slot (index into `HOST_XSKS` and `HOST_COUNTERS`).
#[map]
static HOST_PORTS: HashMap<u32, u32> = HashMap::with_max_entries(MAX_PORTS, 0);

/// AF_XDP sockets by port slot.
#[map]
static HOST_XSKS: XskMap = XskMap::with_max_entries(MAX_PORTS, 0);

/// Per-port counters: index `slot * host_counter::COUNT + id`.
#[map]
static HOST_COUNTERS: PerCpuArray<u64> = PerCpuArray::with_max_entries(MAX_PORTS * host_counter::COUNT, 0);

/// Entry 0: drop every N-th RoCEv2 frame in `rocefab_test_drop_nth` (0 = drop nothing).
#[map]
static HOST_DROP_NTH: Array<u32> = Array::with_max_entries(1, 0);

/// Adds one to counter `id` of `slot` and returns the new per-CPU value.
#[inline(always)]
fn count(slot: u32, id: u32) -> u64 {
    match HOST_COUNTERS.get_ptr_mut(slot * host_counter::COUNT + id) {
        Some(p) => {
            // SAFETY: this CPU's slot of a per-CPU array element returned by the lookup helper;
            // XDP runs with preemption off, so nothing else writes it concurrently.
            unsafe {
                *p += 1;
                *p
            }
        }
        None => 0,
    }
}

#[xdp(frags)]
pub fn rocefab_host_xdp(ctx: XdpContext) -> u32 {
    host(&ctx, false)
}

#[xdp(frags)]
pub fn rocefab_test_drop_nth(ctx: XdpContext) -> u32 {
    host(&ctx, true)
}

#[inline(always)]
fn host(ctx: &XdpContext, inject_drops: bool) -> u32 {
    // SAFETY: `ctx.ctx` is the `xdp_md` the kernel passed to the program, valid for the call.
    let ifindex = unsafe { (*ctx.ctx).ingress_ifindex };
    let slot = match HOST_PORTS.get_ptr(ifindex) {
        // SAFETY: pointer returned by the map lookup helper, valid for the program run.
        Some(p) => unsafe { *p },
        None => return XDP_PASS,
    };
    if slot >= MAX_PORTS {
        return XDP_PASS;
    }
    count(slot, host_counter::RX);
    let class = classify(ctx).unwrap_or(Class::Other);
    let ok = match class {
        Class::Other => {
            count(slot, host_counter::PASS);
            return XDP_PASS;
        }
        Class::MacControl => host_counter::MAC_CONTROL,
        Class::Roce => {
            if inject_drops {
                let n = HOST_DROP_NTH.get(0).copied().unwrap_or(0);
                let seen = count(slot, host_counter::TEST_SEEN);
                if n != 0 && seen.is_multiple_of(u64::from(n)) {
                    count(slot, host_counter::TEST_DROPPED);
                    return XDP_DROP;
                }
            }
            host_counter::ROCE
        }
    };
    // The time the program saw the frame, for captures (`dataplane_common::XdpMeta`); a frame
    // without room for it is still delivered (the NIC emulator needs no metadata).
    let decision = Decision {
        magic: Decision::MAGIC,
        kind: kind::HOST,
        tc: 0,
        ingress_port: slot as u8,
        egress_port: 0,
        nexthop: 0,
    };
    // SAFETY: helper without arguments.
    let _ = crate::write_meta(ctx, &XdpMeta { rx_ns: unsafe { bpf_ktime_get_ns() }, decision });
    match HOST_XSKS.redirect(slot, XDP_DROP as u64) {
        Ok(action) => {
            count(slot, ok);
            action
        }
        Err(action) => {
            count(slot, host_counter::REDIRECT_FAILED);
            action
        }
    }
}

enum Class {
    Roce,
    MacControl,
    Other,
}

/// Classifies a frame; `Err(())` means truncated headers (passed to the kernel).
#[inline(always)]
fn classify(ctx: &XdpContext) -> Result<Class, ()> {
    let mut l3 = ETH_HLEN;
    let mut ety = be16_at(ctx, 12)?;
    if ety == ethertype::VLAN || ety == ethertype::QINQ {
        ety = be16_at(ctx, ETH_HLEN + 2)?;
        l3 += VLAN_HLEN;
    }
    match ety {
        ethertype::MAC_CONTROL => Ok(Class::MacControl),
        ethertype::IPV4 => {
            let h = ptr_at::<[u8; IPV4_HLEN_MIN]>(ctx, l3)?;
            // SAFETY: `ptr_at` checked the 20 bytes lie inside the frame; alignment 1.
            let h = unsafe { &*h };
            let ihl = ((h[0] & 0x0f) as usize) * 4;
            let frag = u16::from_be_bytes([h[6], h[7]]) & 0x3fff;
            if h[0] >> 4 != 4 || ihl < IPV4_HLEN_MIN || frag != 0 {
                return Ok(Class::Other);
            }
            if h[9] == UET_IPPROTO {
                return Ok(Class::Roce);
            }
            if h[9] != IPPROTO_UDP {
                return Ok(Class::Other);
            }
            udp_is_roce(ctx, l3 + (ihl & 0x3c))
        }
        ethertype::IPV6 => {
            let h = ptr_at::<[u8; IPV6_HLEN]>(ctx, l3)?;
            // SAFETY: `ptr_at` checked the 40 bytes lie inside the frame; alignment 1.
            let h = unsafe { &*h };
            if h[0] >> 4 == 6 && h[6] == UET_IPPROTO {
                return Ok(Class::Roce);
            }
            if h[0] >> 4 != 6 || h[6] != IPPROTO_UDP {
                return Ok(Class::Other);
            }
            udp_is_roce(ctx, l3 + IPV6_HLEN)
        }
        _ => Ok(Class::Other),
    }
}

#[inline(always)]
fn udp_is_roce(ctx: &XdpContext, l4: usize) -> Result<Class, ()> {
    let p = ptr_at::<[u8; UDP_HLEN]>(ctx, l4)?;
    // SAFETY: `ptr_at` checked the UDP header lies inside the frame; alignment 1.
    let u = unsafe { &*p };
    let port = u16::from_be_bytes([u[2], u[3]]);
    if port == ROCE_UDP_PORT || port == UET_UDP_PORT {
        Ok(Class::Roce)
    } else {
        Ok(Class::Other)
    }
}
