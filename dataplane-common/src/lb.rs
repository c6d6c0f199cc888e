//! Egress choice among the members of a next-hop group (book ch. 10 and 12; docs/src/load-balancing.md): flow ECMP, flowlets, congestion-aware (adaptive) flowlets and per-packet
//! spraying. [`pick`] is the whole decision, with the clock, the random draw and the queue
//! depths given by the caller, so it is the same code in XDP and in unit tests.
use crate::{ecmp_index, limits::MAX_GROUP_MEMBERS};

/// Values of [`crate::SwitchParams::lb_modes`].
pub mod mode {
    /// Flow ECMP: the 5-tuple hash picks the member for the flow's lifetime.
    pub const ECMP: u8 = 0;
    /// A flow keeps its member while its packets come closer than δ; after a longer gap
    /// the next packet starts a new flowlet on another member.
    pub const FLOWLET: u8 = 1;
    /// Flowlets, and a new flowlet takes the member whose egress queue (port, tc) is the
    /// shallowest published one.
    pub const ADAPTIVE: u8 = 2;
    /// Per packet, members in turn.
    pub const SPRAY_ROUND_ROBIN: u8 = 3;
    /// Per packet, a uniformly random member.
    pub const SPRAY_RANDOM: u8 = 4;
    /// Largest valid mode.
    pub const MAX: u8 = SPRAY_RANDOM;
}

/// A flow's last flowlet: value of the `FLOWLETS` LRU hash map.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Flowlet {
    /// Clock (ns) of the flow's last packet.
    pub last_ns: u64,
    /// Index into the group's members of the flowlet's path.
    pub member: u32,
    pub _pad: u32,
}

/// Key of the `FLOWLETS` map: the 5-tuple (addresses as in [`crate::flow_hash`]).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct FlowKey {
    pub src: [u32; 4],
    pub dst: [u32; 4],
    pub sport: u16,
    pub dport: u16,
    pub proto: u8,
    pub _pad: [u8; 3],
}

/// What [`pick`] decided for one packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pick {
    /// Index into the group's members.
    pub member: u32,
    /// The flow's flowlet state to store (flowlet modes only).
    pub flowlet: Option<Flowlet>,
    /// A new flowlet left on another member than the previous one.
    pub path_changed: bool,
    /// The member was chosen per packet (spray modes).
    pub sprayed: bool,
}

/// `a mod b`, 0 for `b` = 0: no division-by-zero panic path, which the BPF verifier
/// would reject even where the divisor cannot be 0.
#[inline(always)]
fn rem(a: u32, b: u32) -> u32 {
    a.checked_rem(b).unwrap_or(0)
}

/// Whether a packet at `now_ns` continues the flowlet whose last packet was at `last_ns`:
/// the gap is at most `gap_ns` (a clock that went backwards counts as no gap).
#[inline(always)]
pub fn continues(last_ns: u64, now_ns: u64, gap_ns: u64) -> bool {
    now_ns.saturating_sub(last_ns) <= gap_ns
}

/// The member whose `depth` is smallest among the first `count`; ties go to the first one
/// found scanning from `start` (wrapping), so equal queues rotate instead of piling on 0.
#[inline(always)]
pub fn least_loaded(count: u32, start: u32, depth: impl Fn(u32) -> u64) -> u32 {
    // Not clamped to MAX_GROUP_MEMBERS: an upper bound here would let LLVM drop the XDP
    // program's index masks, and the verifier does not bound the result of a modulo.
    let count = count.max(1);
    let start = rem(start, count);
    let mut best = start;
    let mut best_depth = depth(start);
    for i in 1..MAX_GROUP_MEMBERS as u32 {
        if i >= count {
            break;
        }
        let m = rem(start + i, count);
        let d = depth(m);
        if d < best_depth {
            best = m;
            best_depth = d;
        }
    }
    best
}

/// The member for one packet of a group of `count` members (1..=16) under `mode`.
///
/// - `hash`: the flow's [`crate::flow_hash`]; ECMP uses it, and it places a flow's first
///   flowlet (and breaks adaptive ties) so that flows start spread.
/// - `prev`: the flow's stored [`Flowlet`], if any; `now_ns`, `gap_ns`: clock and δ.
/// - `rand`: a uniform random draw (a new `flowlet` member, `spray: random`);
///   `seq`: a per-packet sequence number (`spray: round-robin`).
/// - `depth(member)`: the published depth of the member's egress queue (adaptive only; it
///   is called only when a new flowlet starts).
///
/// A new flowlet in `flowlet` mode moves to another member, `(prev + 1 + rand % (count − 1))
/// mod count`: a gap longer than δ is the moment the flow can move without reordering, and
/// with two members it always does. In `adaptive` mode it takes the least-loaded member,
/// ties scanned from the one after the previous.
///
/// A `count` above 16 (no validated config has one) may yield a member index above 15,
/// which the caller's bounds check rejects.
#[expect(
    clippy::too_many_arguments,
    reason = "every input of the decision is an argument, so the caller (XDP) supplies clock, randomness and depths"
)]
#[inline(always)]
pub fn pick(
    mode: u8,
    count: u32,
    hash: u32,
    prev: Option<Flowlet>,
    now_ns: u64,
    gap_ns: u64,
    rand: u32,
    seq: u32,
    depth: impl Fn(u32) -> u64,
) -> Pick {
    let count = count.max(1);
    let ecmp = ecmp_index(hash, count);
    let fixed = |member| Pick { member, flowlet: None, path_changed: false, sprayed: false };
    match mode {
        mode::SPRAY_ROUND_ROBIN => Pick { sprayed: true, ..fixed(rem(seq, count)) },
        mode::SPRAY_RANDOM => Pick { sprayed: true, ..fixed(rem(rand, count)) },
        mode::FLOWLET | mode::ADAPTIVE => {
            // A stored member beyond the group (the group shrank) is no state at all.
            let prev = prev.filter(|p| p.member < count);
            let member = match prev {
                Some(p) if continues(p.last_ns, now_ns, gap_ns) => p.member,
                Some(p) if mode == mode::FLOWLET => {
                    if count == 1 {
                        0
                    } else {
                        rem(p.member + 1 + rem(rand, count - 1), count)
                    }
                }
                Some(p) => least_loaded(count, p.member + 1, &depth),
                None if mode == mode::FLOWLET => ecmp,
                None => least_loaded(count, ecmp, &depth),
            };
            let path_changed = prev.is_some_and(|p| p.member != member);
            Pick { member, flowlet: Some(Flowlet { last_ns: now_ns, member, _pad: 0 }), path_changed, sprayed: false }
        }
        _ => fixed(ecmp),
    }
}
