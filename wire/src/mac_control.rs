//! MAC control frames (EtherType 0x8808): IEEE 802.3x PAUSE (IEEE Std 802.3-2018 clause 31 and
//! annex 31B) and IEEE 802.1Qbb Priority-based Flow Control (IEEE Std 802.1Q-2018 clause 36,
//! frame format in IEEE Std 802.3-2018 annex 31D).
//!
//! The MAC control payload follows the Ethernet header:
//!
//! ```text
//! PAUSE (opcode 0x0001)              PFC (opcode 0x0101)
//!  0       2       4                  0       2       4       6           18      20
//! +-------+-------+                  +-------+-------+-------+-- ... --+-------+
//! |opcode | quanta|                  |opcode | CEV   |time[0]|   ...   |time[7]|
//! +-------+-------+                  +-------+-------+-------+-- ... --+-------+
//! ```
//!
//! CEV is the class-enable vector: the high octet is reserved (0), bit `i` of the low octet
//! enables `time[i]` for priority `i`. A quanta is 512 bit times at the port speed; a quanta of
//! 0 resumes the priority at once. Frames go to 01:80:c2:00:00:01 and are padded to 60 bytes
//! (64 with the FCS, which captures do not contain).

use core::fmt;
use core::time::Duration;

use crate::ethernet::{self, EthernetRepr, MacAddr, Priority, PrioritySet, ETHERTYPE_MAC_CONTROL};

/// Bit times per pause quanta (IEEE 802.3 31B.2).
pub const BIT_TIMES_PER_QUANTA: u64 = 512;
/// Length of a PAUSE payload (opcode + quanta).
pub const PAUSE_LEN: usize = field::PAUSE_QUANTA.end;
/// Length of a PFC payload (opcode + class-enable vector + 8 quanta).
pub const PFC_LEN: usize = field::PFC_TIME_END;
/// Length of every MAC control frame without FCS (the payload is padded).
pub const FRAME_LEN: usize = ethernet::MIN_FRAME_LEN;

mod field {
    use core::ops::Range;
    pub const OPCODE: Range<usize> = 0..2;
    pub const PAUSE_QUANTA: Range<usize> = 2..4;
    pub const PFC_CEV: Range<usize> = 2..4;
    pub const PFC_TIME_START: usize = 4;
    pub const PFC_TIME_END: usize = PFC_TIME_START + 16;
    pub const fn pfc_time(prio: u8) -> Range<usize> {
        let s = PFC_TIME_START + 2 * prio as usize;
        s..s + 2
    }
}

/// Errors decoding or encoding MAC control frames.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// The payload is shorter than its opcode requires.
    #[error("MAC control payload truncated: {len} bytes, opcode {opcode} needs {need}")]
    Truncated {
        /// Bytes available.
        len: usize,
        /// Bytes the opcode needs.
        need: usize,
        /// Decoded opcode (or "none" when even the opcode is missing).
        opcode: String,
    },
    /// The output buffer is too small.
    #[error("buffer too small: need {need} bytes, have {have}")]
    BufferTooSmall {
        /// Bytes needed.
        need: usize,
        /// Bytes available.
        have: usize,
    },
    /// Ethernet framing problem (short frame, wrong EtherType).
    #[error(transparent)]
    Ethernet(#[from] ethernet::Error),
}

/// MAC control opcode. Unknown values are kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
pub enum Opcode {
    /// 0x0001, IEEE 802.3x PAUSE.
    Pause,
    /// 0x0101, IEEE 802.1Qbb priority-based flow control.
    Pfc,
    /// Any other opcode (GATE, REPORT, ... or garbage).
    Unknown(u16),
}

impl From<u16> for Opcode {
    fn from(v: u16) -> Self {
        match v {
            0x0001 => Opcode::Pause,
            0x0101 => Opcode::Pfc,
            o => Opcode::Unknown(o),
        }
    }
}

impl From<Opcode> for u16 {
    fn from(o: Opcode) -> u16 {
        match o {
            Opcode::Pause => 0x0001,
            Opcode::Pfc => 0x0101,
            Opcode::Unknown(v) => v,
        }
    }
}

impl fmt::Display for Opcode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Opcode::Pause => f.write_str("PAUSE(0x0001)"),
            Opcode::Pfc => f.write_str("PFC(0x0101)"),
            Opcode::Unknown(v) => write!(f, "unknown({v:#06x})"),
        }
    }
}

impl Opcode {
    /// Payload bytes this opcode needs (2 for unknown opcodes: only the opcode is interpreted).
    pub const fn payload_len(self) -> usize {
        match self {
            Opcode::Pause => PAUSE_LEN,
            Opcode::Pfc => PFC_LEN,
            Opcode::Unknown(_) => field::OPCODE.end,
        }
    }
}

/// Zero-copy view of a MAC control payload (the bytes after the Ethernet header).
#[derive(Debug, Clone)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// Wraps `buffer` without checking its length; getters may panic on short buffers.
    pub const fn new_unchecked(buffer: T) -> Packet<T> {
        Packet { buffer }
    }

    /// Wraps `buffer` after [`Packet::check_len`]; use this for untrusted input.
    pub fn new_checked(buffer: T) -> Result<Packet<T>, Error> {
        let p = Self::new_unchecked(buffer);
        p.check_len()?;
        Ok(p)
    }

    /// Checks the buffer holds the opcode and every field that opcode has. After `Ok`, no
    /// getter matching the opcode panics.
    pub fn check_len(&self) -> Result<(), Error> {
        let b = self.buffer.as_ref();
        if b.len() < field::OPCODE.end {
            return Err(Error::Truncated { len: b.len(), need: field::OPCODE.end, opcode: "none".into() });
        }
        let op = self.opcode();
        if b.len() < op.payload_len() {
            return Err(Error::Truncated { len: b.len(), need: op.payload_len(), opcode: op.to_string() });
        }
        Ok(())
    }

    /// Returns the wrapped buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// The opcode.
    pub fn opcode(&self) -> Opcode {
        let b = &self.buffer.as_ref()[field::OPCODE];
        Opcode::from(u16::from_be_bytes([b[0], b[1]]))
    }

    /// PAUSE: the pause time in quanta.
    pub fn pause_quanta(&self) -> u16 {
        let b = &self.buffer.as_ref()[field::PAUSE_QUANTA];
        u16::from_be_bytes([b[0], b[1]])
    }

    /// PFC: the whole 16-bit class-enable vector (high octet reserved).
    pub fn class_enable_vector(&self) -> u16 {
        let b = &self.buffer.as_ref()[field::PFC_CEV];
        u16::from_be_bytes([b[0], b[1]])
    }

    /// PFC: the priorities enabled by the class-enable vector (low octet).
    pub fn enabled(&self) -> PrioritySet {
        PrioritySet(self.class_enable_vector() as u8)
    }

    /// PFC: the time[] quanta for `prio` (meaningful only when `prio` is enabled).
    pub fn pfc_quanta(&self, prio: Priority) -> u16 {
        let b = &self.buffer.as_ref()[field::pfc_time(prio.value())];
        u16::from_be_bytes([b[0], b[1]])
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Sets the opcode.
    pub fn set_opcode(&mut self, op: Opcode) {
        self.buffer.as_mut()[field::OPCODE].copy_from_slice(&u16::from(op).to_be_bytes());
    }

    /// PAUSE: sets the quanta.
    pub fn set_pause_quanta(&mut self, q: u16) {
        self.buffer.as_mut()[field::PAUSE_QUANTA].copy_from_slice(&q.to_be_bytes());
    }

    /// PFC: sets the raw class-enable vector.
    pub fn set_class_enable_vector(&mut self, v: u16) {
        self.buffer.as_mut()[field::PFC_CEV].copy_from_slice(&v.to_be_bytes());
    }

    /// PFC: sets time[prio].
    pub fn set_pfc_quanta(&mut self, prio: Priority, q: u16) {
        self.buffer.as_mut()[field::pfc_time(prio.value())].copy_from_slice(&q.to_be_bytes());
    }
}

/// A PFC request: which priorities it addresses and their pause times.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
pub struct PfcRepr {
    /// Priorities whose time[] is valid (class-enable vector).
    pub enabled: PrioritySet,
    /// Pause quanta per priority 0..=7. Emitted as-is, also for priorities not enabled.
    pub quanta: [u16; 8],
}

impl PfcRepr {
    /// A PFC frame pausing the priorities in `prios` for `quanta` (0 = resume), others zero.
    pub fn pause(prios: PrioritySet, quanta: u16) -> PfcRepr {
        let mut q = [0u16; 8];
        for p in prios.iter() {
            q[p.value() as usize] = quanta;
        }
        PfcRepr { enabled: prios, quanta: q }
    }

    /// The quanta for `prio` if the frame addresses it.
    pub fn quanta_for(&self, prio: Priority) -> Option<u16> {
        self.enabled.contains(prio).then_some(self.quanta[prio.value() as usize])
    }
}

/// A decoded MAC control payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum MacControlRepr {
    /// IEEE 802.3x PAUSE of all traffic.
    Pause {
        /// Pause time in quanta.
        quanta: u16,
    },
    /// IEEE 802.1Qbb PFC.
    Pfc(PfcRepr),
    /// Another opcode; only the opcode is kept.
    Unknown {
        /// The opcode value.
        opcode: u16,
    },
}

impl MacControlRepr {
    /// Parses a checked packet. The reserved high octet of the PFC class-enable vector is
    /// ignored on receipt (IEEE 802.1Q 36.1.2 says receivers ignore it).
    pub fn parse<T: AsRef<[u8]>>(packet: &Packet<T>) -> Result<MacControlRepr, Error> {
        packet.check_len()?;
        Ok(match packet.opcode() {
            Opcode::Pause => MacControlRepr::Pause { quanta: packet.pause_quanta() },
            Opcode::Pfc => {
                let mut quanta = [0u16; 8];
                for p in Priority::all() {
                    quanta[p.value() as usize] = packet.pfc_quanta(p);
                }
                MacControlRepr::Pfc(PfcRepr { enabled: packet.enabled(), quanta })
            }
            Opcode::Unknown(opcode) => MacControlRepr::Unknown { opcode },
        })
    }

    /// The opcode of this payload.
    pub fn opcode(&self) -> Opcode {
        match self {
            MacControlRepr::Pause { .. } => Opcode::Pause,
            MacControlRepr::Pfc(_) => Opcode::Pfc,
            MacControlRepr::Unknown { opcode } => Opcode::from(*opcode),
        }
    }

    /// Payload bytes [`MacControlRepr::emit`] writes (without padding).
    pub fn buffer_len(&self) -> usize {
        self.opcode().payload_len()
    }

    /// Writes the payload into `packet`, which must hold [`MacControlRepr::buffer_len`] bytes.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) -> Result<(), Error> {
        let have = packet.buffer.as_ref().len();
        if have < self.buffer_len() {
            return Err(Error::BufferTooSmall { need: self.buffer_len(), have });
        }
        packet.set_opcode(self.opcode());
        match self {
            MacControlRepr::Pause { quanta } => packet.set_pause_quanta(*quanta),
            MacControlRepr::Pfc(pfc) => {
                packet.set_class_enable_vector(u16::from(pfc.enabled.bits()));
                for p in Priority::all() {
                    packet.set_pfc_quanta(p, pfc.quanta[p.value() as usize]);
                }
            }
            MacControlRepr::Unknown { .. } => {}
        }
        Ok(())
    }

    /// Writes a complete frame (dst 01:80:c2:00:00:01, `src`, EtherType 0x8808, payload, zero
    /// padding) into `buf` and returns its length, [`FRAME_LEN`].
    pub fn emit_frame(&self, src: MacAddr, buf: &mut [u8]) -> Result<usize, Error> {
        let eth = EthernetRepr { dst: MacAddr::MAC_CONTROL, src, ethertype: ETHERTYPE_MAC_CONTROL };
        let len = self.buffer_len();
        let mut res = Ok(());
        let n = ethernet::emit_padded(buf, &eth, len, |p| res = self.emit(&mut Packet::new_unchecked(p)))?;
        res.map(|_| n)
    }

    /// Builds the complete 60-byte frame without allocating.
    pub fn to_frame(&self, src: MacAddr) -> [u8; FRAME_LEN] {
        let mut f = [0u8; FRAME_LEN];
        // Cannot fail: every opcode's payload fits into a minimum-size frame.
        let _ = self.emit_frame(src, &mut f);
        f
    }

    /// Parses a complete Ethernet frame carrying a MAC control payload.
    pub fn parse_frame(frame: &[u8]) -> Result<(EthernetRepr, MacControlRepr), Error> {
        let (eth, payload) = EthernetRepr::parse_expect(frame, ETHERTYPE_MAC_CONTROL)?;
        let repr = MacControlRepr::parse(&Packet::new_checked(payload)?)?;
        Ok((eth, repr))
    }
}

impl fmt::Display for PfcRepr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "PFC enable={} (cev {:#06x})", self.enabled, self.enabled.bits())?;
        for p in self.enabled.iter() {
            write!(f, " p{}={}", p, self.quanta[p.value() as usize])?;
        }
        Ok(())
    }
}

impl fmt::Display for MacControlRepr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MacControlRepr::Pause { quanta } => write!(f, "PAUSE quanta={quanta}"),
            MacControlRepr::Pfc(p) => p.fmt(f),
            MacControlRepr::Unknown { opcode } => {
                write!(f, "MAC control opcode {opcode:#06x} (unknown)")
            }
        }
    }
}

/// Pause duration of `quanta` at a line rate of `rate_bps` bit/s (1 quanta = 512 bit times).
/// `rate_bps == 0` yields [`Duration::MAX`].
pub fn quanta_to_duration(quanta: u16, rate_bps: u64) -> Duration {
    if rate_bps == 0 {
        return Duration::MAX;
    }
    let bits = u128::from(quanta) * u128::from(BIT_TIMES_PER_QUANTA);
    let ns = (bits * 1_000_000_000).div_ceil(u128::from(rate_bps));
    Duration::from_nanos(u64::try_from(ns).unwrap_or(u64::MAX))
}

/// Smallest quanta covering `d` at `rate_bps` (rounded up), saturating at 0xffff.
pub fn duration_to_quanta(d: Duration, rate_bps: u64) -> u16 {
    let bits = d.as_nanos() * u128::from(rate_bps);
    let denom = 1_000_000_000u128 * u128::from(BIT_TIMES_PER_QUANTA);
    u16::try_from(bits.div_ceil(denom)).unwrap_or(u16::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quanta_at_400g_and_1g() {
        // 400 Gbit/s: one quanta is 1.28 ns; 0xffff quanta is about 83.9 us.
        assert_eq!(quanta_to_duration(1, 400_000_000_000), Duration::from_nanos(2)); // 1.28 rounded up
        assert_eq!(quanta_to_duration(100, 400_000_000_000), Duration::from_nanos(128));
        assert_eq!(quanta_to_duration(0xffff, 400_000_000_000), Duration::from_nanos(83_885));
        assert_eq!(quanta_to_duration(1, 1_000_000_000), Duration::from_nanos(512));
        assert_eq!(quanta_to_duration(0, 1_000_000_000), Duration::ZERO);
    }

    #[test]
    fn duration_to_quanta_rounds_up_and_saturates() {
        assert_eq!(duration_to_quanta(Duration::from_nanos(512), 1_000_000_000), 1);
        assert_eq!(duration_to_quanta(Duration::from_nanos(513), 1_000_000_000), 2);
        assert_eq!(duration_to_quanta(Duration::from_secs(1), 1_000_000_000), u16::MAX);
        assert_eq!(duration_to_quanta(Duration::ZERO, 1_000_000_000), 0);
    }
}
