//! Capture files: classic pcap (<https://www.tcpdump.org/manpages/pcap-savefile.5.html>,
//! IETF draft-ietf-opsawg-pcap) and pcapng (draft-ietf-opsawg-pcapng), through the
//! `pcap-file` crate.
//!
//! - [`PcapWriter`] writes Ethernet frames with timestamps, as pcap (nanosecond magic
//!   0xa1b23c4d) or pcapng (one interface, `if_tsresol` = 9 so timestamps are nanoseconds).
//! - [`CaptureReader`] detects pcap vs pcapng from the magic number and yields
//!   [`CapturedFrame`]s (timestamp, link type, bytes). Every error names the file.
//!
//! pcap-file 2.0 reads pcapng timestamps as raw units and calls them nanoseconds; this module
//! rescales them with the interface's `if_tsresol` option (default 10^-6 s).

use std::fs::File;
use std::io::{BufReader, BufWriter, Cursor, Read, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use pcap_file::pcap::{PcapHeader, PcapPacket, PcapReader};
use pcap_file::pcapng::blocks::enhanced_packet::EnhancedPacketBlock;
use pcap_file::pcapng::blocks::interface_description::{
    InterfaceDescriptionBlock, InterfaceDescriptionOption,
};
use pcap_file::pcapng::{Block, PcapNgReader, PcapNgWriter};
use pcap_file::{DataLink, PcapError, TsResolution};

/// Link type of Ethernet captures (LINKTYPE_ETHERNET).
pub const LINKTYPE_ETHERNET: u32 = 1;
/// Snap length written in headers.
pub const SNAPLEN: u32 = 65535;

const PCAPNG_MAGIC: [u8; 4] = [0x0a, 0x0d, 0x0d, 0x0a];
const PCAP_MAGICS: [[u8; 4]; 4] = [
    [0xa1, 0xb2, 0xc3, 0xd4],
    [0xd4, 0xc3, 0xb2, 0xa1],
    [0xa1, 0xb2, 0x3c, 0x4d],
    [0x4d, 0x3c, 0xb2, 0xa1],
];

/// Errors reading or writing capture files; each names the file (or stream) involved.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Opening, reading or writing failed.
    #[error("{path}: {source}")]
    Io {
        /// File name.
        path: PathBuf,
        /// Cause.
        #[source]
        source: std::io::Error,
    },
    /// The pcap / pcapng contents are malformed.
    #[error("{path}: {format} error: {source}")]
    Format {
        /// File name.
        path: PathBuf,
        /// "pcap" or "pcapng".
        format: &'static str,
        /// Cause.
        #[source]
        source: PcapError,
    },
    /// The file starts with neither a pcap nor a pcapng magic number.
    #[error("{path}: not a pcap or pcapng file (magic {magic:02x?})")]
    UnknownMagic {
        /// File name.
        path: PathBuf,
        /// The first bytes.
        magic: Vec<u8>,
    },
    /// A frame too large for the snap length.
    #[error("{path}: frame of {len} bytes exceeds snaplen {SNAPLEN}")]
    FrameTooLong {
        /// File name.
        path: PathBuf,
        /// Frame length.
        len: usize,
    },
}

/// Capture file format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Format {
    /// Classic libpcap format.
    Pcap,
    /// pcapng.
    PcapNg,
}

impl Format {
    /// Picks pcapng for a `.pcapng` extension, pcap otherwise.
    pub fn from_path(p: &Path) -> Format {
        match p.extension().and_then(|e| e.to_str()) {
            Some(e) if e.eq_ignore_ascii_case("pcapng") => Format::PcapNg,
            _ => Format::Pcap,
        }
    }
}

enum Inner<W: Write> {
    Pcap(pcap_file::pcap::PcapWriter<W>),
    PcapNg(PcapNgWriter<W>),
}

/// Writes Ethernet frames with timestamps to a pcap or pcapng stream.
pub struct PcapWriter<W: Write> {
    inner: Inner<W>,
    path: PathBuf,
}

impl PcapWriter<BufWriter<File>> {
    /// Creates (truncates) `path` and writes the file header.
    pub fn create(path: impl AsRef<Path>, format: Format) -> Result<Self, Error> {
        let path = path.as_ref();
        let f = File::create(path).map_err(|source| Error::Io {
            path: path.into(),
            source,
        })?;
        Self::new(BufWriter::new(f), format, path)
    }
}

impl<W: Write> PcapWriter<W> {
    /// Writes the header of `format` to `w`; `name` is used in error messages.
    pub fn new(w: W, format: Format, name: impl AsRef<Path>) -> Result<Self, Error> {
        let path = name.as_ref().to_path_buf();
        let inner = match format {
            Format::Pcap => {
                let header = PcapHeader {
                    snaplen: SNAPLEN,
                    datalink: DataLink::ETHERNET,
                    ts_resolution: TsResolution::NanoSecond,
                    ..Default::default()
                };
                Inner::Pcap(pcap_file::pcap::PcapWriter::with_header(w, header).map_err(
                    |source| Error::Format {
                        path: path.clone(),
                        format: "pcap",
                        source,
                    },
                )?)
            }
            Format::PcapNg => {
                let fmt_err = |source| Error::Format {
                    path: path.clone(),
                    format: "pcapng",
                    source,
                };
                let mut wr = PcapNgWriter::new(w).map_err(fmt_err)?;
                let mut idb = InterfaceDescriptionBlock::new(DataLink::ETHERNET, SNAPLEN);
                idb.options.push(InterfaceDescriptionOption::IfTsResol(9));
                wr.write_pcapng_block(idb).map_err(fmt_err)?;
                Inner::PcapNg(wr)
            }
        };
        Ok(PcapWriter { inner, path })
    }

    /// Appends one frame captured at `timestamp` (since the Unix epoch).
    pub fn write_frame(&mut self, timestamp: Duration, frame: &[u8]) -> Result<(), Error> {
        let len = u32::try_from(frame.len())
            .ok()
            .filter(|&l| l <= SNAPLEN)
            .ok_or(Error::FrameTooLong {
                path: self.path.clone(),
                len: frame.len(),
            })?;
        match &mut self.inner {
            Inner::Pcap(w) => w
                .write_packet(&PcapPacket::new(timestamp, len, frame))
                .map(drop)
                .map_err(|source| Error::Format {
                    path: self.path.clone(),
                    format: "pcap",
                    source,
                }),
            Inner::PcapNg(w) => {
                let epb = EnhancedPacketBlock {
                    interface_id: 0,
                    timestamp,
                    original_len: len,
                    data: frame.into(),
                    options: vec![],
                };
                w.write_pcapng_block(epb)
                    .map(drop)
                    .map_err(|source| Error::Format {
                        path: self.path.clone(),
                        format: "pcapng",
                        source,
                    })
            }
        }
    }

    /// Flushes and returns the underlying writer.
    pub fn finish(self) -> Result<W, Error> {
        let mut w = match self.inner {
            Inner::Pcap(w) => w.into_writer(),
            Inner::PcapNg(w) => w.into_inner(),
        };
        w.flush().map_err(|source| Error::Io {
            path: self.path.clone(),
            source,
        })?;
        Ok(w)
    }
}

/// One frame read from a capture file.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct CapturedFrame {
    /// Capture time since the Unix epoch.
    pub timestamp: Duration,
    /// Link type (1 = Ethernet).
    pub linktype: u32,
    /// Length of the frame on the wire (may exceed `data.len()` if truncated by snaplen).
    pub orig_len: u32,
    /// Captured bytes.
    #[serde(serialize_with = "crate::lldp::hex_bytes")]
    pub data: Vec<u8>,
}

type Source = std::io::Chain<Cursor<[u8; 4]>, Box<dyn Read>>;

enum ReaderInner {
    Pcap(PcapReader<Source>, u32),
    PcapNg(PcapNgReader<Source>),
}

/// Reads pcap or pcapng files, detected by magic. Iterate to get frames; the first error
/// ends the iteration.
pub struct CaptureReader {
    inner: ReaderInner,
    path: PathBuf,
    done: bool,
}

impl std::fmt::Debug for CaptureReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CaptureReader")
            .field("path", &self.path)
            .field("format", &self.format())
            .finish()
    }
}

impl CaptureReader {
    /// Opens `path`.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, Error> {
        let path = path.as_ref();
        let f = File::open(path).map_err(|source| Error::Io {
            path: path.into(),
            source,
        })?;
        Self::from_reader(Box::new(BufReader::new(f)), path)
    }

    /// Reads from any stream; `name` is used in error messages.
    pub fn from_reader(mut r: Box<dyn Read>, name: impl AsRef<Path>) -> Result<Self, Error> {
        let path = name.as_ref().to_path_buf();
        let mut magic = [0u8; 4];
        let mut got = 0;
        while got < 4 {
            match r.read(&mut magic[got..]) {
                Ok(0) => break,
                Ok(n) => got += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(source) => return Err(Error::Io { path, source }),
            }
        }
        if got < 4 {
            return Err(Error::UnknownMagic {
                path,
                magic: magic[..got].to_vec(),
            });
        }
        let src: Source = Cursor::new(magic).chain(r);
        let inner = if magic == PCAPNG_MAGIC {
            ReaderInner::PcapNg(PcapNgReader::new(src).map_err(|source| Error::Format {
                path: path.clone(),
                format: "pcapng",
                source,
            })?)
        } else if PCAP_MAGICS.contains(&magic) {
            let r = PcapReader::new(src).map_err(|source| Error::Format {
                path: path.clone(),
                format: "pcap",
                source,
            })?;
            let lt = u32::from(r.header().datalink);
            ReaderInner::Pcap(r, lt)
        } else {
            return Err(Error::UnknownMagic {
                path,
                magic: magic.to_vec(),
            });
        };
        Ok(CaptureReader {
            inner,
            path,
            done: false,
        })
    }

    /// The detected format.
    pub fn format(&self) -> Format {
        match self.inner {
            ReaderInner::Pcap(..) => Format::Pcap,
            ReaderInner::PcapNg(_) => Format::PcapNg,
        }
    }

    /// The file name given at open.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn next_frame(&mut self) -> Option<Result<CapturedFrame, Error>> {
        let path = &self.path;
        match &mut self.inner {
            ReaderInner::Pcap(r, lt) => r.next_packet().map(|res| {
                res.map(|p| CapturedFrame {
                    timestamp: p.timestamp,
                    linktype: *lt,
                    orig_len: p.orig_len,
                    data: p.data.into_owned(),
                })
                .map_err(|source| Error::Format {
                    path: path.clone(),
                    format: "pcap",
                    source,
                })
            }),
            ReaderInner::PcapNg(r) => loop {
                let fmt_err = |source| Error::Format {
                    path: path.clone(),
                    format: "pcapng",
                    source,
                };
                let block = match r.next_block()? {
                    Ok(b) => b,
                    Err(e) => return Some(Err(fmt_err(e))),
                };
                // Copy what we need so the block's borrow of the reader ends here.
                let (iface, ts, orig_len, data) = match block {
                    Block::EnhancedPacket(epb) => (
                        Some(epb.interface_id),
                        epb.timestamp,
                        epb.original_len,
                        epb.data.into_owned(),
                    ),
                    Block::SimplePacket(spb) => (
                        None,
                        Duration::ZERO,
                        spb.original_len,
                        spb.data.into_owned(),
                    ),
                    _ => continue,
                };
                let Some(id) = iface else {
                    let lt = r
                        .interfaces()
                        .first()
                        .map(|i| u32::from(i.linktype))
                        .unwrap_or(LINKTYPE_ETHERNET);
                    return Some(Ok(CapturedFrame {
                        timestamp: ts,
                        linktype: lt,
                        orig_len,
                        data,
                    }));
                };
                let Some(idb) = r.interfaces().get(id as usize) else {
                    return Some(Err(fmt_err(PcapError::InvalidInterfaceId(id))));
                };
                return Some(Ok(CapturedFrame {
                    timestamp: scale_timestamp(ts.as_nanos(), tsresol(idb)),
                    linktype: u32::from(idb.linktype),
                    orig_len,
                    data,
                }));
            },
        }
    }
}

fn tsresol(idb: &InterfaceDescriptionBlock<'_>) -> u8 {
    idb.options
        .iter()
        .find_map(|o| match o {
            InterfaceDescriptionOption::IfTsResol(r) => Some(*r),
            _ => None,
        })
        .unwrap_or(6)
}

/// Converts `units` of the pcapng `if_tsresol` resolution `res` into a duration.
fn scale_timestamp(units: u128, res: u8) -> Duration {
    let nanos = if res & 0x80 == 0 {
        // 10^-res seconds per unit.
        let e = u32::from(res);
        if e <= 9 {
            units.saturating_mul(10u128.pow(9 - e))
        } else {
            units / 10u128.saturating_pow(e - 9)
        }
    } else {
        // 2^-(res & 0x7f) seconds per unit.
        let e = u32::from(res & 0x7f);
        (units.saturating_mul(1_000_000_000)) >> e.min(127)
    };
    Duration::from_nanos(u64::try_from(nanos).unwrap_or(u64::MAX))
}

impl Iterator for CaptureReader {
    type Item = Result<CapturedFrame, Error>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        let r = self.next_frame();
        if !matches!(r, Some(Ok(_))) {
            self.done = true;
        }
        r
    }
}

/// Reads every frame of `path`.
pub fn read_all(path: impl AsRef<Path>) -> Result<Vec<CapturedFrame>, Error> {
    CaptureReader::open(path)?.collect()
}

/// Writes `frames` (timestamp, bytes) to `path` in `format`.
pub fn write_all<'a>(
    path: impl AsRef<Path>,
    format: Format,
    frames: impl IntoIterator<Item = (Duration, &'a [u8])>,
) -> Result<(), Error> {
    let mut w = PcapWriter::create(path, format)?;
    for (ts, f) in frames {
        w.write_frame(ts, f)?;
    }
    w.finish().map(drop)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tsresol_scaling() {
        assert_eq!(scale_timestamp(1_500_000, 6), Duration::from_millis(1500));
        assert_eq!(scale_timestamp(7, 9), Duration::from_nanos(7));
        assert_eq!(scale_timestamp(1, 0x80 | 10), Duration::from_nanos(976_562));
        // 2^-10 s
    }

    #[test]
    fn unknown_magic_names_the_stream() {
        let e = CaptureReader::from_reader(Box::new(Cursor::new(b"hello world".to_vec())), "x.bin")
            .unwrap_err();
        let msg = e.to_string();
        assert!(msg.contains("x.bin") && msg.contains("not a pcap"), "{msg}");
    }
}
