//! Abstract packet descriptors exchanged by the RC requester, the responder and the wire glue.
//!
//! These are the transport-level facts of an InfiniBand RC RDMA WRITE exchange (IBTA Vol. 1,
//! §9.2 BTH, §9.3.1 RETH, §9.3.5 AETH; RoCEv2 Annex A17), without any byte layout: the
//! RoCEv2 wire format (`rocefab_wire::roce`) turns them into frames and back.

use crate::psn::Psn;

/// RC RDMA WRITE opcodes (BTH.OpCode, IBTA Vol. 1 Table 35, RC transport `000xxxxx`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Opcode {
    /// RDMA WRITE First (0x06): carries RETH, payload exactly one path MTU.
    WriteFirst,
    /// RDMA WRITE Middle (0x07): no RETH, payload exactly one path MTU.
    WriteMiddle,
    /// RDMA WRITE Last (0x08): no RETH, payload 1..=path MTU.
    WriteLast,
    /// RDMA WRITE Only (0x0a): carries RETH, payload 0..=path MTU.
    WriteOnly,
}

impl Opcode {
    /// The BTH opcode byte.
    pub const fn code(self) -> u8 {
        match self {
            Opcode::WriteFirst => 0x06,
            Opcode::WriteMiddle => 0x07,
            Opcode::WriteLast => 0x08,
            Opcode::WriteOnly => 0x0a,
        }
    }

    /// Maps a BTH opcode byte back; `None` for anything that is not an RC RDMA WRITE
    /// (e.g. 0x09 Last-with-Immediate is not produced or consumed here).
    pub const fn from_code(code: u8) -> Option<Opcode> {
        match code {
            0x06 => Some(Opcode::WriteFirst),
            0x07 => Some(Opcode::WriteMiddle),
            0x08 => Some(Opcode::WriteLast),
            0x0a => Some(Opcode::WriteOnly),
            _ => None,
        }
    }

    /// First and Only carry a RETH.
    pub const fn has_reth(self) -> bool {
        matches!(self, Opcode::WriteFirst | Opcode::WriteOnly)
    }

    /// Last and Only end a message (the responder's MSN advances).
    pub const fn ends_message(self) -> bool {
        matches!(self, Opcode::WriteLast | Opcode::WriteOnly)
    }

    /// First and Only start a message.
    pub const fn starts_message(self) -> bool {
        self.has_reth()
    }
}

/// RDMA Extended Transport Header contents (IBTA Vol. 1 §9.3.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Reth {
    /// Remote virtual address where this packet's (First: the message's) data starts.
    pub va: u64,
    /// Remote key of the target memory region.
    pub rkey: u32,
    /// DMA length: bytes of the whole message (First) or of this packet (Only).
    pub len: u32,
}

/// One RDMA WRITE request packet, as produced by segmentation and the requester.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct WritePacket {
    /// BTH opcode.
    pub opcode: Opcode,
    /// BTH PSN.
    pub psn: Psn,
    /// BTH AckReq bit.
    pub ack_req: bool,
    /// RETH, present exactly on First and Only.
    pub reth: Option<Reth>,
    /// Offset of this packet's payload inside the message (local buffer offset).
    pub payload_offset: u32,
    /// Payload length in bytes.
    pub payload_len: u32,
}

/// AETH syndrome classes used here (IBTA Vol. 1 §9.7.5.2.x, Table 43/44).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AckSyndrome {
    /// Positive acknowledgement.
    Ack,
    /// NAK code 0: PSN sequence error; the PSN is the responder's expected PSN.
    NakPsnSequenceError,
    /// NAK code 1: invalid request (opcode sequence, length).
    NakInvalidRequest,
    /// NAK code 2: remote access error (R_Key, bounds).
    NakRemoteAccessError,
}

impl AckSyndrome {
    /// The AETH syndrome byte. ACKs carry credit count 0b11111 ("invalid credit"
    /// / not flow-controlled); NAKs are `011` + 5-bit NAK code.
    pub const fn aeth_syndrome(self) -> u8 {
        match self {
            AckSyndrome::Ack => 0x1f,
            AckSyndrome::NakPsnSequenceError => 0x60,
            AckSyndrome::NakInvalidRequest => 0x61,
            AckSyndrome::NakRemoteAccessError => 0x62,
        }
    }

    /// Parses an AETH syndrome byte. `None` for RNR NAKs, reserved codes and other NAK codes
    /// this emulator does not generate.
    pub const fn from_aeth_syndrome(b: u8) -> Option<AckSyndrome> {
        match b >> 5 {
            0b000 => Some(AckSyndrome::Ack),
            0b011 => match b & 0x1f {
                0 => Some(AckSyndrome::NakPsnSequenceError),
                1 => Some(AckSyndrome::NakInvalidRequest),
                2 => Some(AckSyndrome::NakRemoteAccessError),
                _ => None,
            },
            _ => None,
        }
    }

    /// Is this a NAK?
    pub const fn is_nak(self) -> bool {
        !matches!(self, AckSyndrome::Ack)
    }
}

/// An Acknowledge packet (BTH opcode 0x11 + AETH).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct AckPacket {
    /// ACK/NAK class.
    pub syndrome: AckSyndrome,
    /// BTH PSN: for an ACK the last PSN acknowledged (cumulative); for a NAK the PSN that
    /// caused it (for a sequence error: the responder's expected PSN).
    pub psn: Psn,
    /// AETH MSN: the responder's count of completed messages (24 bits).
    pub msn: u32,
}

/// BTH opcode of Acknowledge.
pub const OPCODE_ACKNOWLEDGE: u8 = 0x11;
/// BTH opcode of a RoCEv2 Congestion Notification Packet (Annex A17.9.3).
pub const OPCODE_CNP: u8 = 0x81;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn opcode_codes_roundtrip() {
        for op in [Opcode::WriteFirst, Opcode::WriteMiddle, Opcode::WriteLast, Opcode::WriteOnly] {
            assert_eq!(Opcode::from_code(op.code()), Some(op));
        }
        assert_eq!(Opcode::WriteFirst.code(), 0x06);
        assert_eq!(Opcode::WriteOnly.code(), 0x0a);
        assert_eq!(Opcode::from_code(0x09), None);
        assert_eq!(Opcode::from_code(OPCODE_ACKNOWLEDGE), None);
        assert!(Opcode::WriteFirst.has_reth() && Opcode::WriteOnly.has_reth());
        assert!(!Opcode::WriteMiddle.has_reth() && !Opcode::WriteLast.has_reth());
        assert!(Opcode::WriteLast.ends_message() && !Opcode::WriteFirst.ends_message());
    }

    #[test]
    fn aeth_syndrome_roundtrip() {
        for s in [
            AckSyndrome::Ack,
            AckSyndrome::NakPsnSequenceError,
            AckSyndrome::NakInvalidRequest,
            AckSyndrome::NakRemoteAccessError,
        ] {
            assert_eq!(AckSyndrome::from_aeth_syndrome(s.aeth_syndrome()), Some(s));
        }
        // ACK with any credit count is an ACK; RNR NAK (001) is not handled.
        assert_eq!(AckSyndrome::from_aeth_syndrome(0x05), Some(AckSyndrome::Ack));
        assert_eq!(AckSyndrome::from_aeth_syndrome(0x21), None);
        assert_eq!(AckSyndrome::from_aeth_syndrome(0x63), None);
    }
}
