//! Bytes as lowercase hex without separators, for the formats' `Display` and serde output.
use core::fmt;

/// Formats bytes as lowercase hex without separators.
pub(crate) struct Hex<'a>(pub &'a [u8]);

impl fmt::Display for Hex<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for b in self.0 {
            write!(f, "{b:02x}")?;
        }
        Ok(())
    }
}

/// serde `serialize_with`: bytes as one hex string.
pub(crate) fn hex_bytes<S: serde::Serializer, B: AsRef<[u8]>>(b: &B, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(&Hex(b.as_ref()))
}
