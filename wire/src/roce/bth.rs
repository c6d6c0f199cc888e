//! InfiniBand Base Transport Header (BTH), IBTA Architecture Specification vol. 1, §9.2.
//!
//! ```text
//!  0                   1                   2                   3
//!  0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |    OpCode     |S|M|Pad|  TVer |            P_Key              |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |F|B|  resv6    |               Destination QP                  |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |A|   resv7     |               Packet Sequence Number          |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! ```
//!
//! S = Solicited Event, M = MigReq, Pad = pad count (bytes added to make the payload a
//! multiple of 4), TVer = transport header version (0), F/B = FECN/BECN (the former
//! "resv8a" byte; IBTA Annex A10 congestion control, set in RoCEv2 CNPs per Annex A17),
//! A = AckReq. DestQP and PSN are 24-bit fields.

use super::{Error, Layer, Opcode};

mod field {
    use core::ops::Range;
    pub const OPCODE: usize = 0;
    pub const FLAGS: usize = 1;
    pub const PKEY: Range<usize> = 2..4;
    pub const FB: usize = 4;
    pub const DEST_QP: Range<usize> = 5..8;
    pub const ACK: usize = 8;
    pub const PSN: Range<usize> = 9..12;
    pub const END: usize = 12;
}

/// Length of the BTH in bytes.
pub const LEN: usize = field::END;

/// Largest value of a 24-bit field (DestQP, PSN, MSN).
pub const MASK_24: u32 = 0x00ff_ffff;

const SE: u8 = 0x80;
const MIGREQ: u8 = 0x40;
const PADCNT_SHIFT: u8 = 4;
const PADCNT: u8 = 0x30;
const TVER: u8 = 0x0f;
const FECN: u8 = 0x80;
const BECN: u8 = 0x40;
const ACKREQ: u8 = 0x80;

fixed_len_packet!("BTH", Layer::Bth);

fn get24(b: &[u8]) -> u32 {
    u32::from_be_bytes([0, b[0], b[1], b[2]])
}

fn set24(b: &mut [u8], v: u32) {
    b.copy_from_slice(&(v & MASK_24).to_be_bytes()[1..]);
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// OpCode.
    pub fn opcode(&self) -> Opcode {
        Opcode::from(self.buffer.as_ref()[field::OPCODE])
    }
    /// Solicited Event bit.
    pub fn solicited(&self) -> bool {
        self.buffer.as_ref()[field::FLAGS] & SE != 0
    }
    /// MigReq bit.
    pub fn migreq(&self) -> bool {
        self.buffer.as_ref()[field::FLAGS] & MIGREQ != 0
    }
    /// Pad count (0..=3).
    pub fn pad_count(&self) -> u8 {
        (self.buffer.as_ref()[field::FLAGS] & PADCNT) >> PADCNT_SHIFT
    }
    /// Transport header version (0 for this version of the spec).
    pub fn tver(&self) -> u8 {
        self.buffer.as_ref()[field::FLAGS] & TVER
    }
    /// Partition key.
    pub fn pkey(&self) -> u16 {
        let b = &self.buffer.as_ref()[field::PKEY];
        u16::from_be_bytes([b[0], b[1]])
    }
    /// FECN bit.
    pub fn fecn(&self) -> bool {
        self.buffer.as_ref()[field::FB] & FECN != 0
    }
    /// BECN bit.
    pub fn becn(&self) -> bool {
        self.buffer.as_ref()[field::FB] & BECN != 0
    }
    /// The raw byte holding F, B and the 6 reserved bits.
    pub fn fb_byte(&self) -> u8 {
        self.buffer.as_ref()[field::FB]
    }
    /// Destination QP (24 bits).
    pub fn dest_qp(&self) -> u32 {
        get24(&self.buffer.as_ref()[field::DEST_QP])
    }
    /// AckReq bit.
    pub fn ack_req(&self) -> bool {
        self.buffer.as_ref()[field::ACK] & ACKREQ != 0
    }
    /// Packet sequence number (24 bits).
    pub fn psn(&self) -> u32 {
        get24(&self.buffer.as_ref()[field::PSN])
    }
}

impl<'a, T: AsRef<[u8]> + ?Sized> Packet<&'a T> {
    /// Bytes after the BTH.
    pub fn payload(&self) -> &'a [u8] {
        &self.buffer.as_ref()[LEN..]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Set the OpCode.
    pub fn set_opcode(&mut self, v: Opcode) {
        self.buffer.as_mut()[field::OPCODE] = v.into();
    }
    /// Set the S/M/PadCnt/TVer byte from its parts (pad count and TVer are masked).
    pub fn set_flags(&mut self, se: bool, migreq: bool, pad_count: u8, tver: u8) {
        let mut b = (pad_count << PADCNT_SHIFT) & PADCNT | (tver & TVER);
        if se {
            b |= SE;
        }
        if migreq {
            b |= MIGREQ;
        }
        self.buffer.as_mut()[field::FLAGS] = b;
    }
    /// Set the pad count only.
    pub fn set_pad_count(&mut self, pad: u8) {
        let b = &mut self.buffer.as_mut()[field::FLAGS];
        *b = (*b & !PADCNT) | ((pad << PADCNT_SHIFT) & PADCNT);
    }
    /// Set the partition key.
    pub fn set_pkey(&mut self, v: u16) {
        self.buffer.as_mut()[field::PKEY].copy_from_slice(&v.to_be_bytes());
    }
    /// Set FECN/BECN; the 6 reserved bits are written as zero.
    pub fn set_fecn_becn(&mut self, fecn: bool, becn: bool) {
        self.buffer.as_mut()[field::FB] = if fecn { FECN } else { 0 } | if becn { BECN } else { 0 };
    }
    /// Set the destination QP (masked to 24 bits).
    pub fn set_dest_qp(&mut self, v: u32) {
        set24(&mut self.buffer.as_mut()[field::DEST_QP], v);
    }
    /// Set AckReq; the 7 reserved bits are written as zero.
    pub fn set_ack_req(&mut self, v: bool) {
        self.buffer.as_mut()[field::ACK] = if v { ACKREQ } else { 0 };
    }
    /// Set the PSN (masked to 24 bits).
    pub fn set_psn(&mut self, v: u32) {
        set24(&mut self.buffer.as_mut()[field::PSN], v);
    }
}

/// A high-level representation of a BTH.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Repr {
    pub opcode: Opcode,
    pub solicited: bool,
    pub migreq: bool,
    /// 0..=3; higher bits are dropped on emit.
    pub pad_count: u8,
    /// 0..=15; higher bits are dropped on emit.
    pub tver: u8,
    pub pkey: u16,
    pub fecn: bool,
    pub becn: bool,
    /// 24 bits; higher bits are dropped on emit.
    pub dest_qp: u32,
    pub ack_req: bool,
    /// 24 bits; higher bits are dropped on emit.
    pub psn: u32,
}

impl Repr {
    /// A BTH with the given opcode, QP and PSN, default P_Key 0xffff and all flags clear.
    pub fn new(opcode: Opcode, dest_qp: u32, psn: u32) -> Self {
        Repr {
            opcode,
            solicited: false,
            migreq: false,
            pad_count: 0,
            tver: 0,
            pkey: 0xffff,
            fecn: false,
            becn: false,
            dest_qp: dest_qp & MASK_24,
            ack_req: false,
            psn: psn & MASK_24,
        }
    }

    /// Parse a BTH view.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(p: &Packet<&T>) -> Result<Self, Error> {
        p.check_len()?;
        Ok(Repr {
            opcode: p.opcode(),
            solicited: p.solicited(),
            migreq: p.migreq(),
            pad_count: p.pad_count(),
            tver: p.tver(),
            pkey: p.pkey(),
            fecn: p.fecn(),
            becn: p.becn(),
            dest_qp: p.dest_qp(),
            ack_req: p.ack_req(),
            psn: p.psn(),
        })
    }

    /// Bytes needed to emit.
    pub const fn buffer_len(&self) -> usize {
        LEN
    }

    /// Write into a view whose length was checked.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, p: &mut Packet<T>) {
        p.set_opcode(self.opcode);
        p.set_flags(self.solicited, self.migreq, self.pad_count, self.tver);
        p.set_pkey(self.pkey);
        p.set_fecn_becn(self.fecn, self.becn);
        p.set_dest_qp(self.dest_qp);
        p.set_ack_req(self.ack_req);
        p.set_psn(self.psn);
    }
}
