//! WRED with ECN marking: its parameters, the marking probability of a depth, the draw, and the
//! ECN codepoints (book ch. 11; docs/src/lossless-qos.md).

/// WRED with ECN on the egress queues (book ch. 11; docs/src/lossless-qos.md). `WRED` array map,
/// entry 0, written by the daemon at start. The XDP program reads the depth of the frame's
/// egress queue (port, tc) from the mmapable `DEPTHS` array the data-plane thread publishes,
/// asks [`wred_probability`] and marks with the seeded per-CPU [`xorshift32`] generator.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct WredParams {
    /// Bit tc set: egress queue tc runs WRED (default queue 3). 0 turns WRED off.
    pub queues: u32,
    /// Below this depth nothing is marked, bytes.
    pub min_bytes: u32,
    /// At and above this depth every ECT packet is marked, bytes.
    pub max_bytes: u32,
    /// Marking probability at `max_bytes`, as a fraction of 2^32 (7 % = 300 647 710).
    pub pmax_q32: u32,
    /// Seed of the per-CPU generators (CPU n starts from `seed ^ n`, never 0).
    pub seed: u32,
    pub _pad: u32,
}

impl WredParams {
    /// `percent` % as a fraction of 2^32 (100 % saturates at `u32::MAX`).
    pub const fn pmax_from_percent(percent: u8) -> u32 {
        let p = (percent as u64 * (1u64 << 32)) / 100;
        if p > u32::MAX as u64 {
            u32::MAX
        } else {
            p as u32
        }
    }
}

/// WRED marking probability of a packet that finds its queue `depth` bytes deep, as a fraction of
/// 2^32: 0 below `min_bytes`, rising linearly to `pmax_q32` at `max_bytes`, `u32::MAX` (always)
/// from `max_bytes` on. Weight 0: the instantaneous depth is the average.
#[inline(always)]
pub fn wred_probability(depth: u64, p: &WredParams) -> u32 {
    let (min, max) = (p.min_bytes as u64, p.max_bytes as u64);
    if depth < min {
        0
    } else if depth >= max || max <= min {
        u32::MAX
    } else {
        ((p.pmax_q32 as u64 * (depth - min)) / (max - min)) as u32
    }
}

/// Whether a packet with probability `prob` (from [`wred_probability`]) is marked, given a
/// uniform random `rand`: `rand < prob`, except that `u32::MAX` always marks.
#[inline(always)]
pub fn wred_hit(prob: u32, rand: u32) -> bool {
    prob == u32::MAX || rand < prob
}

/// Marsaglia's xorshift32 (13, 17, 5): the next state of a non-zero state.
#[inline(always)]
pub fn xorshift32(mut x: u32) -> u32 {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    x
}

/// ECN codepoints (RFC 3168) in the low two bits of the IPv4 TOS / IPv6 traffic class.
pub mod ecn {
    pub const NOT_ECT: u8 = 0b00;
    pub const ECT1: u8 = 0b01;
    pub const ECT0: u8 = 0b10;
    pub const CE: u8 = 0b11;
}
