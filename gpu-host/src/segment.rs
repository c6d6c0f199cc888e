//! RDMA WRITE message segmentation at the path MTU (IBTA Vol. 1 §9.4.2 / §9.5: a message
//! longer than one PMTU is sent as First, Middle…, Last; First and Middle carry exactly
//! PMTU bytes; a message of at most one PMTU — including a zero-length one — is a single
//! Only packet; RETH rides on First and Only).
//!
//! [`SegmentMode::WriteOnlyPerPacket`] sends every packet as an independent RDMA WRITE
//! Only with its own RETH (VA advanced by the payload offset), which makes per-packet
//! spraying safe for placement (reference book ch. 12, "RDMA Write Only").

use crate::desc::{Opcode, Reth, WritePacket};
use crate::psn::{Psn, PSN_HALF};
pub use rocefab_contracts::rdma::{InvalidMtu, PathMtu, SegmentMode};

/// Errors building a segmenter.
#[derive(Clone, Debug, thiserror::Error, PartialEq, Eq)]
pub enum SegmentError {
    /// `remote_va + len` overflows the 64-bit address space.
    #[error("remote VA {va:#x} + length {len} overflows 64 bits")]
    VaOverflow {
        /// Remote start address.
        va: u64,
        /// Message length.
        len: u32,
    },
    /// The message needs more packets than half the PSN space.
    #[error("message of {len} bytes needs {packets} packets, more than 2^23 PSNs")]
    TooManyPackets {
        /// Message length.
        len: u32,
        /// Packets needed.
        packets: u32,
    },
}

/// The remote side of one RDMA WRITE work request.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct WriteMessage {
    /// Remote virtual address.
    pub remote_va: u64,
    /// Remote key.
    pub rkey: u32,
    /// Length in bytes.
    pub len: u32,
}

/// Cuts one message into packets; `packet(i)` is O(1) and allocation-free, so a requester
/// can regenerate any packet for go-back-N retransmission.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Segmenter {
    msg: WriteMessage,
    mtu: u32,
    mode: SegmentMode,
    first_psn: Psn,
    packets: u32,
}

impl Segmenter {
    /// Builds a segmenter for `msg` starting at `first_psn`.
    pub fn new(msg: WriteMessage, mtu: PathMtu, mode: SegmentMode, first_psn: Psn) -> Result<Segmenter, SegmentError> {
        if msg.remote_va.checked_add(u64::from(msg.len)).is_none() {
            return Err(SegmentError::VaOverflow { va: msg.remote_va, len: msg.len });
        }
        let mtu = mtu.bytes();
        let packets = packet_count(msg.len, mtu);
        if packets >= PSN_HALF {
            return Err(SegmentError::TooManyPackets { len: msg.len, packets });
        }
        Ok(Segmenter { msg, mtu, mode, first_psn, packets })
    }

    /// Number of packets (at least 1; a zero-length write is one Only packet).
    pub const fn num_packets(&self) -> u32 {
        self.packets
    }

    /// PSN of the first packet.
    pub const fn first_psn(&self) -> Psn {
        self.first_psn
    }

    /// PSN of the last packet.
    pub const fn last_psn(&self) -> Psn {
        self.first_psn.add(self.packets - 1)
    }

    /// The message being segmented.
    pub const fn message(&self) -> WriteMessage {
        self.msg
    }

    /// Packet `i` (`0..num_packets()`), or `None` past the end. AckReq is set on the last
    /// packet of the message.
    pub fn packet(&self, i: u32) -> Option<WritePacket> {
        if i >= self.packets {
            return None;
        }
        let offset = i * self.mtu;
        let payload_len = (self.msg.len - offset).min(self.mtu);
        let last = i + 1 == self.packets;
        let (opcode, reth) = match self.mode {
            SegmentMode::WriteOnlyPerPacket => (
                Opcode::WriteOnly,
                Some(Reth { va: self.msg.remote_va + u64::from(offset), rkey: self.msg.rkey, len: payload_len }),
            ),
            SegmentMode::FirstMiddleLast => {
                let whole = Some(Reth { va: self.msg.remote_va, rkey: self.msg.rkey, len: self.msg.len });
                if self.packets == 1 {
                    (Opcode::WriteOnly, whole)
                } else if i == 0 {
                    (Opcode::WriteFirst, whole)
                } else if last {
                    (Opcode::WriteLast, None)
                } else {
                    (Opcode::WriteMiddle, None)
                }
            }
        };
        Some(WritePacket {
            opcode,
            psn: self.first_psn.add(i),
            ack_req: last,
            reth,
            payload_offset: offset,
            payload_len,
        })
    }

    /// Iterates over all packets in PSN order.
    pub fn iter(&self) -> impl Iterator<Item = WritePacket> + '_ {
        (0..self.packets).filter_map(move |i| self.packet(i))
    }
}

/// Packets needed for `len` bytes at `mtu` (a zero-length message still takes one).
pub const fn packet_count(len: u32, mtu: u32) -> u32 {
    if len == 0 {
        1
    } else {
        len.div_ceil(mtu)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const VA: u64 = 0x7f00_0000_1000;
    const RKEY: u32 = 0xabcd;

    fn seg(len: u32, mtu: PathMtu, mode: SegmentMode) -> Vec<WritePacket> {
        let s = Segmenter::new(WriteMessage { remote_va: VA, rkey: RKEY, len }, mtu, mode, Psn::new(100)).unwrap();
        s.iter().collect()
    }

    fn opcodes(p: &[WritePacket]) -> Vec<Opcode> {
        p.iter().map(|p| p.opcode).collect()
    }

    #[test]
    fn zero_length_is_one_only_packet() {
        let p = seg(0, PathMtu::Mtu1024, SegmentMode::FirstMiddleLast);
        assert_eq!(opcodes(&p), vec![Opcode::WriteOnly]);
        assert_eq!(p[0].payload_len, 0);
        assert_eq!(p[0].reth, Some(Reth { va: VA, rkey: RKEY, len: 0 }));
        assert!(p[0].ack_req);
    }

    #[test]
    fn one_byte_and_mtu_minus_one_and_mtu_are_only() {
        for mtu in [PathMtu::Mtu256, PathMtu::Mtu1024, PathMtu::Mtu4096] {
            let m = mtu.bytes();
            for len in [1, m - 1, m] {
                let p = seg(len, mtu, SegmentMode::FirstMiddleLast);
                assert_eq!(opcodes(&p), vec![Opcode::WriteOnly], "len {len} mtu {m}");
                assert_eq!(p[0].payload_len, len);
                assert_eq!(p[0].reth, Some(Reth { va: VA, rkey: RKEY, len }));
                assert_eq!(p[0].psn, Psn::new(100));
            }
        }
    }

    #[test]
    fn mtu_plus_one_is_first_last() {
        let m = 512;
        let p = seg(m + 1, PathMtu::Mtu512, SegmentMode::FirstMiddleLast);
        assert_eq!(opcodes(&p), vec![Opcode::WriteFirst, Opcode::WriteLast]);
        assert_eq!((p[0].payload_offset, p[0].payload_len), (0, m));
        assert_eq!((p[1].payload_offset, p[1].payload_len), (m, 1));
        assert_eq!(p[0].reth, Some(Reth { va: VA, rkey: RKEY, len: m + 1 }), "RETH carries the whole length");
        assert_eq!(p[1].reth, None);
        assert_eq!((p[0].ack_req, p[1].ack_req), (false, true));
        assert_eq!((p[0].psn, p[1].psn), (Psn::new(100), Psn::new(101)));
    }

    #[test]
    fn ten_mtu_is_first_eight_middle_last() {
        let m = 2048;
        let p = seg(10 * m, PathMtu::Mtu2048, SegmentMode::FirstMiddleLast);
        assert_eq!(p.len(), 10);
        assert_eq!(p[0].opcode, Opcode::WriteFirst);
        assert!(p[1..9].iter().all(|p| p.opcode == Opcode::WriteMiddle && p.reth.is_none()));
        assert_eq!(p[9].opcode, Opcode::WriteLast);
        assert!(p.iter().all(|p| p.payload_len == m));
        for (i, pk) in p.iter().enumerate() {
            assert_eq!(pk.payload_offset, i as u32 * m);
            assert_eq!(pk.psn, Psn::new(100 + i as u32));
            assert_eq!(pk.ack_req, i == 9);
        }
    }

    #[test]
    fn write_only_mode_has_reth_per_packet() {
        let m = 1024;
        let p = seg(3 * m + 10, PathMtu::Mtu1024, SegmentMode::WriteOnlyPerPacket);
        assert_eq!(opcodes(&p), vec![Opcode::WriteOnly; 4]);
        for (i, pk) in p.iter().enumerate() {
            let off = i as u32 * m;
            let len = if i == 3 { 10 } else { m };
            assert_eq!(pk.reth, Some(Reth { va: VA + u64::from(off), rkey: RKEY, len }));
            assert_eq!((pk.payload_offset, pk.payload_len), (off, len));
        }
        // Single packet in write-only mode is identical to standard Only.
        assert_eq!(
            seg(5, PathMtu::Mtu1024, SegmentMode::WriteOnlyPerPacket),
            seg(5, PathMtu::Mtu1024, SegmentMode::FirstMiddleLast)
        );
    }

    #[test]
    fn psns_wrap_inside_a_message() {
        let s = Segmenter::new(
            WriteMessage { remote_va: 0, rkey: 1, len: 4 * 256 },
            PathMtu::Mtu256,
            SegmentMode::FirstMiddleLast,
            Psn::new(0xFF_FFFE),
        )
        .unwrap();
        let psns: Vec<u32> = s.iter().map(|p| p.psn.value()).collect();
        assert_eq!(psns, vec![0xFF_FFFE, 0xFF_FFFF, 0, 1]);
        assert_eq!(s.last_psn(), Psn::new(1));
    }

    #[test]
    fn rejects_bad_inputs() {
        assert_eq!(PathMtu::from_bytes(1500), Err(InvalidMtu(1500)));
        assert_eq!(PathMtu::from_bytes(4096), Ok(PathMtu::Mtu4096));
        let e = Segmenter::new(
            WriteMessage { remote_va: u64::MAX - 10, rkey: 1, len: 11 },
            PathMtu::Mtu256,
            SegmentMode::FirstMiddleLast,
            Psn::ZERO,
        );
        assert!(matches!(e, Err(SegmentError::VaOverflow { .. })));
        let s = Segmenter::new(
            WriteMessage { remote_va: 0, rkey: 1, len: 1 },
            PathMtu::Mtu256,
            SegmentMode::FirstMiddleLast,
            Psn::ZERO,
        )
        .unwrap();
        assert_eq!(s.packet(1), None);
    }

    fn mtu_strategy() -> impl Strategy<Value = PathMtu> {
        prop_oneof![
            Just(PathMtu::Mtu256),
            Just(PathMtu::Mtu512),
            Just(PathMtu::Mtu1024),
            Just(PathMtu::Mtu2048),
            Just(PathMtu::Mtu4096),
        ]
    }

    proptest! {
        #[test]
        fn segmentation_covers_message(
            len in 0u32..200_000,
            mtu in mtu_strategy(),
            write_only in any::<bool>(),
            start in 0u32..=crate::psn::PSN_MASK,
        ) {
            let mode = if write_only { SegmentMode::WriteOnlyPerPacket } else { SegmentMode::FirstMiddleLast };
            let s = Segmenter::new(WriteMessage { remote_va: VA, rkey: RKEY, len }, mtu, mode, Psn::new(start)).unwrap();
            let p: Vec<_> = s.iter().collect();
            prop_assert_eq!(p.len() as u32, s.num_packets());
            prop_assert_eq!(p.iter().map(|p| u64::from(p.payload_len)).sum::<u64>(), u64::from(len));
            let mut off = 0;
            for (i, pk) in p.iter().enumerate() {
                prop_assert_eq!(pk.psn, Psn::new(start).add(i as u32), "PSNs consecutive");
                prop_assert_eq!(pk.payload_offset, off, "payloads contiguous");
                off += pk.payload_len;
                prop_assert!(pk.payload_len <= mtu.bytes());
                prop_assert_eq!(pk.reth.is_some(), pk.opcode.has_reth());
                prop_assert_eq!(pk.ack_req, i + 1 == p.len());
                if !pk.opcode.ends_message() {
                    prop_assert_eq!(pk.payload_len, mtu.bytes(), "First/Middle carry a full MTU");
                }
                if let Some(r) = pk.reth {
                    prop_assert_eq!(r.rkey, RKEY);
                    if write_only {
                        prop_assert_eq!(r.va, VA + u64::from(pk.payload_offset));
                        prop_assert_eq!(r.len, pk.payload_len);
                    } else {
                        prop_assert_eq!((r.va, r.len), (VA, len));
                    }
                }
            }
            prop_assert_eq!(s.last_psn(), p.last().unwrap().psn);
        }
    }
}
