//! The RDMA vocabulary a job file is written in (IBTA Vol. 1): PSN widths, path MTUs and how a
//! message is cut into WRITE opcodes. The NIC model (`gpu-host`) computes with them.

/// Number of bits in a PSN.
pub const PSN_BITS: u32 = 24;
/// Mask of the valid PSN bits.
pub const PSN_MASK: u32 = (1 << PSN_BITS) - 1;
/// Half the PSN space: a PSN less than this far forward is "ahead".
pub const PSN_HALF: u32 = 1 << (PSN_BITS - 1);

/// A path MTU that is not one of 256, 512, 1024, 2048 or 4096 bytes.
#[derive(Clone, Copy, Debug, thiserror::Error, PartialEq, Eq)]
#[error("invalid path MTU {0}: must be 256, 512, 1024, 2048 or 4096")]
pub struct InvalidMtu(pub u32);

/// InfiniBand path MTU (IBTA Vol. 1 §7.7.8: 256, 512, 1024, 2048 or 4096 bytes of payload).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PathMtu {
    /// 256 bytes.
    Mtu256,
    /// 512 bytes.
    Mtu512,
    /// 1024 bytes.
    Mtu1024,
    /// 2048 bytes.
    Mtu2048,
    /// 4096 bytes.
    Mtu4096,
}

impl PathMtu {
    /// Payload bytes per packet.
    pub const fn bytes(self) -> u32 {
        match self {
            PathMtu::Mtu256 => 256,
            PathMtu::Mtu512 => 512,
            PathMtu::Mtu1024 => 1024,
            PathMtu::Mtu2048 => 2048,
            PathMtu::Mtu4096 => 4096,
        }
    }

    /// Parses a byte count.
    pub const fn from_bytes(b: u32) -> Result<PathMtu, InvalidMtu> {
        match b {
            256 => Ok(PathMtu::Mtu256),
            512 => Ok(PathMtu::Mtu512),
            1024 => Ok(PathMtu::Mtu1024),
            2048 => Ok(PathMtu::Mtu2048),
            4096 => Ok(PathMtu::Mtu4096),
            other => Err(InvalidMtu(other)),
        }
    }
}

/// How a message is cut into opcodes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum SegmentMode {
    /// Standard RC: First / Middle… / Last, or Only for a single packet.
    #[default]
    FirstMiddleLast,
    /// Every packet is a WRITE Only with its own RETH (spray-safe).
    WriteOnlyPerPacket,
}
