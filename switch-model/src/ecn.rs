//! WRED/ECN at dequeue (`qos.wred.at: dequeue`): the data-plane thread marks a frame as it
//! leaves its egress queue, on the depth it leaves behind, as ns-3's HPCC switch
//! (`SwitchNode::SwitchNotifyDequeue`: the egress bytes are released, then `ShouldSendCN`) and
//! htsim mark. The mark then reaches the receiver without the frame's queueing delay; marking at
//! enqueue (the XDP program, `dataplane-ebpf` step 7) delays it by that much.
//!
//! The same curve and draw as at enqueue ([`dataplane_common::wred_probability`],
//! [`dataplane_common::wred_hit`]): an ECT frame is marked CE (IPv4: header checksum updated
//! incrementally, RFC 1624 eqn. 3), a Not-ECT frame that would have been marked is dropped
//! (RFC 3168 §6.1.1), a CE frame stays CE.
//!
//! The frame is untrusted: every length is checked, nothing panics.
use dataplane_common::{ecn, ethertype, wred_hit, wred_probability, WredParams};

use crate::rewrite::incremental_checksum;

/// The XDP program's WRED parameters for `w` (the same curve at dequeue).
pub fn params_of(w: &rocefab_contracts::config::WredConfig) -> WredParams {
    WredParams {
        queues: u32::from(w.queues),
        min_bytes: w.min_bytes.min(u64::from(u32::MAX)) as u32,
        max_bytes: w.max_bytes.min(u64::from(u32::MAX)) as u32,
        pmax_q32: WredParams::pmax_from_percent(w.probability_percent),
        seed: w.seed,
        _pad: 0,
    }
}

/// What WRED does to a frame at dequeue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mark {
    /// Sent unchanged (below the curve's draw, already CE, or not IP).
    Pass,
    /// ECT → CE.
    Marked,
    /// Not-ECT where an ECT frame would have been marked: dropped.
    Drop,
}

/// WRED on a frame (Ethernet header first, no FCS) leaving a WRED queue `depth` bytes deep
/// after it: `rand` is a uniform draw. Marks in place.
#[inline]
pub fn mark_at_dequeue(frame: &mut [u8], depth: u64, p: &WredParams, rand: u32) -> Mark {
    let prob = wred_probability(depth, p);
    if prob == 0 || !wred_hit(prob, rand) {
        return Mark::Pass;
    }
    set_ce(frame)
}

/// Sets CE on an ECT frame (IPv4 with its checksum, or IPv6); [`Mark::Drop`] for Not-ECT,
/// [`Mark::Pass`] when already CE or not IP.
pub fn set_ce(frame: &mut [u8]) -> Mark {
    let Some((et, l3)) = l3_of(frame) else { return Mark::Pass };
    match et {
        ethertype::IPV4 => {
            let Some(ip) = frame.get_mut(l3..l3 + 20) else { return Mark::Pass };
            if ip[0] >> 4 != 4 {
                return Mark::Pass;
            }
            match ip[1] & 3 {
                ecn::NOT_ECT => return Mark::Drop,
                ecn::CE => return Mark::Pass,
                _ => {}
            }
            let old = u16::from_be_bytes([ip[0], ip[1]]);
            ip[1] |= ecn::CE;
            let new = u16::from_be_bytes([ip[0], ip[1]]);
            let hc = u16::from_be_bytes([ip[10], ip[11]]);
            ip[10..12].copy_from_slice(&incremental_checksum(hc, old, new).to_be_bytes());
            Mark::Marked
        }
        ethertype::IPV6 => {
            let Some(ip) = frame.get_mut(l3..l3 + 40) else { return Mark::Pass };
            if ip[0] >> 4 != 6 {
                return Mark::Pass;
            }
            match (ip[1] >> 4) & 3 {
                ecn::NOT_ECT => return Mark::Drop,
                ecn::CE => return Mark::Pass,
                _ => {}
            }
            ip[1] |= ecn::CE << 4;
            Mark::Marked
        }
        _ => Mark::Pass,
    }
}

/// The EtherType and L3 offset, past one 802.1Q/802.1ad tag.
fn l3_of(frame: &[u8]) -> Option<(u16, usize)> {
    let et = u16::from_be_bytes([*frame.get(12)?, *frame.get(13)?]);
    if et == ethertype::VLAN || et == ethertype::QINQ {
        return Some((u16::from_be_bytes([*frame.get(16)?, *frame.get(17)?]), 18));
    }
    Some((et, 14))
}

#[cfg(test)]
mod tests {
    use super::*;
    use etherparse::{PacketBuilder, SlicedPacket};

    fn params(min: u32, max: u32, percent: u8) -> WredParams {
        WredParams {
            queues: 1 << 3,
            min_bytes: min,
            max_bytes: max,
            pmax_q32: WredParams::pmax_from_percent(percent),
            seed: 1,
            _pad: 0,
        }
    }

    /// A RoCEv2-like frame (UDP 4791, DSCP 24) with ECN `ecn`, its IPv4 checksum written by
    /// etherparse.
    fn v4(ecn: u8, vlan: bool) -> Vec<u8> {
        let b = PacketBuilder::ethernet2([1; 6], [2; 6]);
        let mut out = Vec::new();
        if vlan {
            b.single_vlan(5u16.try_into().unwrap())
                .ipv4([10, 0, 1, 1], [10, 0, 2, 1], 63)
                .udp(49152, 4791)
                .write(&mut out, &[0x5a; 1000])
                .unwrap();
        } else {
            b.ipv4([10, 0, 1, 1], [10, 0, 2, 1], 63).udp(49152, 4791).write(&mut out, &[0x5a; 1000]).unwrap();
        }
        let l3 = if vlan { 18 } else { 14 };
        let (mut h, _) = etherparse::Ipv4Header::from_slice(&out[l3..]).unwrap();
        h.dscp = 24u8.try_into().unwrap();
        h.ecn = ecn.try_into().unwrap();
        h.header_checksum = h.calc_header_checksum();
        let mut hdr = Vec::new();
        h.write(&mut hdr).unwrap();
        out[l3..l3 + hdr.len()].copy_from_slice(&hdr);
        out
    }

    /// The IPv4 header of `frame` as etherparse reads it, with its checksum recomputed from the
    /// header's fields (the oracle the incremental update is checked against).
    fn ipv4_of(frame: &[u8]) -> (etherparse::Ipv4Header, u16) {
        let s = SlicedPacket::from_ethernet(frame).unwrap();
        let Some(etherparse::NetSlice::Ipv4(ip)) = s.net else { panic!("not IPv4") };
        let h = ip.header().to_header();
        let sum = h.calc_header_checksum();
        (h, sum)
    }

    #[test]
    fn ect_frames_are_marked_ce_with_a_correct_checksum() {
        for (ecn, vlan) in [(0b10, false), (0b01, false), (0b10, true)] {
            let mut f = v4(ecn, vlan);
            let before = f.clone();
            let (h0, sum0) = ipv4_of(&f);
            assert_eq!(h0.header_checksum, sum0, "etherparse wrote a valid header");
            assert_eq!(set_ce(&mut f), Mark::Marked);
            let (h, sum) = ipv4_of(&f);
            assert_eq!(u8::from(h.ecn), 0b11, "CE");
            assert_eq!(u8::from(h.dscp), 24, "DSCP kept");
            assert_eq!(h.header_checksum, sum, "incremental checksum equals a full recomputation");
            assert_ne!(h.header_checksum, h0.header_checksum);
            // Only the TOS byte and the checksum changed.
            let l3 = if vlan { 18 } else { 14 };
            let changed: Vec<usize> = (0..f.len()).filter(|&i| f[i] != before[i]).collect();
            assert!(changed.iter().all(|&i| [l3 + 1, l3 + 10, l3 + 11].contains(&i)), "{changed:?}");
            // CE stays CE, unchanged.
            let marked = f.clone();
            assert_eq!(set_ce(&mut f), Mark::Pass);
            assert_eq!(f, marked);
        }
    }

    #[test]
    fn not_ect_is_dropped_ipv6_marked_and_garbage_passes() {
        let mut f = v4(0, false);
        let before = f.clone();
        assert_eq!(set_ce(&mut f), Mark::Drop);
        assert_eq!(f, before, "a dropped frame is not written");
        let mut out = Vec::new();
        PacketBuilder::ethernet2([1; 6], [2; 6])
            .ipv6([1; 16], [2; 16], 64)
            .udp(1, 4791)
            .write(&mut out, &[0; 64])
            .unwrap();
        out[15] = (out[15] & 0x0f) | (0b10 << 4); // traffic class low nibble: ECT(0)
        assert_eq!(set_ce(&mut out), Mark::Marked);
        let s = SlicedPacket::from_ethernet(&out).unwrap();
        let Some(etherparse::NetSlice::Ipv6(ip)) = s.net else { panic!() };
        assert_eq!(ip.header().traffic_class() & 3, 0b11);
        // Truncated at every length, ARP, an IPv4 EtherType with a v6 header: never a panic.
        let full = v4(0b10, false);
        for n in 0..34 {
            assert_eq!(set_ce(&mut full[..n].to_vec()), Mark::Pass, "length {n}");
        }
        let mut arp = full.clone();
        arp[12..14].copy_from_slice(&0x0806u16.to_be_bytes());
        assert_eq!(set_ce(&mut arp), Mark::Pass);
        let mut bad = full.clone();
        bad[14] = 0x65;
        assert_eq!(set_ce(&mut bad), Mark::Pass);
    }

    #[test]
    fn the_decision_follows_the_curve_on_the_depth_left_behind() {
        let p = params(100_000, 200_000, 10);
        let frame = v4(0b10, false);
        let run = |depth: u64, rand: u32| {
            let mut f = frame.clone();
            (mark_at_dequeue(&mut f, depth, &p, rand), f)
        };
        // Below min: never, whatever the draw.
        assert_eq!(run(99_999, 0).0, Mark::Pass);
        assert_eq!(run(99_999, 0).1, frame);
        // Half way: 5 % of 2^32; a draw below marks, one at or above does not.
        let half = (WredParams::pmax_from_percent(10) as u64 * 50_000 / 100_000) as u32;
        assert_eq!(run(150_000, half - 1).0, Mark::Marked);
        assert_eq!(run(150_000, half).0, Mark::Pass);
        // At and above max: always, even with the largest draw.
        assert_eq!(run(200_000, u32::MAX).0, Mark::Marked);
        let (m, f) = run(5_000_000, u32::MAX);
        assert_eq!((m, u8::from(ipv4_of(&f).0.ecn)), (Mark::Marked, 3));
        // A step (min = max): nothing below, everything from it on.
        let step = params(100_000, 100_000, 100);
        assert_eq!(mark_at_dequeue(&mut frame.clone(), 99_999, &step, 0), Mark::Pass);
        assert_eq!(mark_at_dequeue(&mut frame.clone(), 100_000, &step, u32::MAX), Mark::Marked);
        // Not-ECT that would have been marked: drop.
        assert_eq!(mark_at_dequeue(&mut v4(0, false), 300_000, &p, 0), Mark::Drop);
    }
}
