//! Capture files: classic pcap (<https://www.tcpdump.org/manpages/pcap-savefile.5.html>,
//! IETF draft-ietf-opsawg-pcap) and pcapng (draft-ietf-opsawg-pcapng), through the
//! `pcap-file` crate.
//!
//! - [`PcapWriter`] writes Ethernet frames with timestamps, as pcap (nanosecond magic
//!   0xa1b23c4d) or pcapng (one interface, `if_tsresol` = 9 so timestamps are nanoseconds).
//! - [`CaptureReader`] detects pcap vs pcapng from the magic number and yields
//!   [`CapturedFrame`]s (timestamp, link type, bytes). A gzip'd pcap or pcapng (magic 1f 8b,
//!   what Wireshark writes as `.pcapng.gz`) is decompressed as it is read (`flate2`). Any other
//!   file is refused with the format its magic names (Sniffer, ERF, a text file, ...) and the
//!   conversion that works (`editcap -F pcapng`). Every error names the file, once.
//!
//! pcap-file 2.0 reads pcapng timestamps as raw units and calls them nanoseconds; this module
//! rescales them with the interface's `if_tsresol` option (default 10^-6 s).

use std::fs::File;
use std::io::{BufReader, BufWriter, Cursor, Read, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use pcap_file::pcap::{PcapHeader, PcapPacket, PcapReader};
use pcap_file::pcapng::blocks::enhanced_packet::EnhancedPacketBlock;
use pcap_file::pcapng::blocks::interface_description::{InterfaceDescriptionBlock, InterfaceDescriptionOption};
use pcap_file::pcapng::{Block, PcapNgReader, PcapNgWriter};
use pcap_file::{DataLink, PcapError, TsResolution};

/// Link type of Ethernet captures (LINKTYPE_ETHERNET).
pub const LINKTYPE_ETHERNET: u32 = 1;
/// Raw IPv4 or IPv6, no link header (LINKTYPE_RAW; DLT_RAW is 12 or 14 on some BSDs).
pub const LINKTYPE_RAW: u32 = 101;
/// Linux cooked capture v1, what `tcpdump -i any` writes (LINKTYPE_LINUX_SLL).
pub const LINKTYPE_LINUX_SLL: u32 = 113;
/// Raw IPv4 (LINKTYPE_IPV4).
pub const LINKTYPE_IPV4: u32 = 228;
/// Raw IPv6 (LINKTYPE_IPV6).
pub const LINKTYPE_IPV6: u32 = 229;
/// Linux cooked capture v2 (LINKTYPE_LINUX_SLL2).
pub const LINKTYPE_LINUX_SLL2: u32 = 276;
/// Snap length written in headers.
pub const SNAPLEN: u32 = 65535;

const PCAPNG_MAGIC: [u8; 4] = [0x0a, 0x0d, 0x0d, 0x0a];
/// gzip (RFC 1952 §2.3.1: ID1 ID2).
const GZIP_MAGIC: [u8; 2] = [0x1f, 0x8b];
const PCAP_MAGICS: [[u8; 4]; 4] =
    [[0xa1, 0xb2, 0xc3, 0xd4], [0xd4, 0xc3, 0xb2, 0xa1], [0xa1, 0xb2, 0x3c, 0x4d], [0x4d, 0x3c, 0xb2, 0xa1]];

/// What a file that is neither pcap nor pcapng is, from its first bytes (the magic numbers
/// libpcap, Wireshark's wiretap and file(1) know), and how to convert it.
fn describe_foreign(magic: &[u8], gzip: bool) -> String {
    let inside = if gzip { "a gzip'd file holding " } else { "" };
    let hex = magic.iter().map(|b| format!("{b:02x}")).collect::<Vec<_>>().join(" ");
    let what = match magic {
        [] => return format!("{inside}an empty file, not a pcap or pcapng capture"),
        b"TRSN" => "a Sniffer capture (NetXRay/DOS Sniffer, \"TRSNIFF data\" magic, .cap)",
        b"XCP\0" => "a NetXRay / Windows Sniffer capture (\"XCP\\0\" magic, .cap)",
        [0x52, 0x54, 0x53, 0x53] => "a Windows Sniffer Pro capture (\"RTSS\" magic)",
        [0x34, 0xcd, 0xb2, 0xa1] | [0xa1, 0xb2, 0xcd, 0x34] => "a modified (Alexey Kuznetsov) pcap capture",
        [b'S', b'n', b'o', b'o'] => "a snoop capture (RFC 1761)",
        [0x47, 0x4d, 0x42, 0x55] => "a Microsoft Network Monitor 2 capture (\"GMBU\" magic)",
        m if m.len() < 4 => "a file too short for any capture header",
        m if m.iter().all(|b| b.is_ascii_graphic() || b.is_ascii_whitespace()) => "a text file",
        _ => "neither a pcap nor a pcapng capture",
    };
    format!(
        "{inside}{what} (magic {hex}), not pcap or pcapng; rocefab reads pcap and pcapng, plain or gzip'd: \
         convert it with `editcap -F pcapng IN OUT.pcapng` (Wireshark's editcap reads every format it knows)"
    )
}

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
    /// A record after the header is malformed: which frame it is (1-based, as Wireshark numbers
    /// them: the frame after the last one read).
    #[error("{path}: frame {number}: {format} error: {source}")]
    Record {
        /// File name.
        path: PathBuf,
        /// Frame number, from 1.
        number: usize,
        /// "pcap" or "pcapng".
        format: &'static str,
        /// Cause.
        #[source]
        source: PcapError,
    },
    /// A pcap record whose timestamp fraction is 1 s or more (a corrupted timestamp).
    #[error("{path}: frame {number}: timestamp {sec} s + {frac} {unit}: the fraction is 1 s or more (a corrupted timestamp)")]
    Timestamp {
        /// File name.
        path: PathBuf,
        /// Frame number, from 1.
        number: usize,
        /// The record's seconds.
        sec: u32,
        /// The record's fraction.
        frac: u32,
        /// "µs" or "ns", as the file header says.
        unit: &'static str,
    },
    /// The file starts with neither a pcap nor a pcapng magic number (nor gzip).
    #[error("{path}: {}", describe_foreign(magic, *gzip))]
    UnknownMagic {
        /// File name.
        path: PathBuf,
        /// The first bytes (of the decompressed stream when `gzip`).
        magic: Vec<u8>,
        /// The file was gzip'd and the bytes are what it decompressed to.
        gzip: bool,
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
        let f = File::create(path).map_err(|source| Error::Io { path: path.into(), source })?;
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
                Inner::Pcap(pcap_file::pcap::PcapWriter::with_header(w, header).map_err(|source| Error::Format {
                    path: path.clone(),
                    format: "pcap",
                    source,
                })?)
            }
            Format::PcapNg => {
                let fmt_err = |source| Error::Format { path: path.clone(), format: "pcapng", source };
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
            .ok_or(Error::FrameTooLong { path: self.path.clone(), len: frame.len() })?;
        match &mut self.inner {
            Inner::Pcap(w) => w
                .write_packet(&PcapPacket::new(timestamp, len, frame))
                .map(drop)
                .map_err(|source| Error::Format { path: self.path.clone(), format: "pcap", source }),
            Inner::PcapNg(w) => {
                let epb = EnhancedPacketBlock {
                    interface_id: 0,
                    timestamp,
                    original_len: len,
                    data: frame.into(),
                    options: vec![],
                };
                w.write_pcapng_block(epb).map(drop).map_err(|source| Error::Format {
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
        w.flush().map_err(|source| Error::Io { path: self.path.clone(), source })?;
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
    #[serde(serialize_with = "crate::hex::hex_bytes")]
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
    /// Frames returned so far.
    frames: usize,
}

impl std::fmt::Debug for CaptureReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CaptureReader").field("path", &self.path).field("format", &self.format()).finish()
    }
}

impl CaptureReader {
    /// Opens `path`.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, Error> {
        let path = path.as_ref();
        let f = File::open(path).map_err(|source| Error::Io { path: path.into(), source })?;
        Self::from_reader(Box::new(BufReader::new(f)), path)
    }

    /// Reads from any stream; `name` is used in error messages. A gzip'd stream is
    /// decompressed.
    pub fn from_reader(r: Box<dyn Read>, name: impl AsRef<Path>) -> Result<Self, Error> {
        Self::detect(r, name.as_ref().to_path_buf(), false)
    }

    fn detect(mut r: Box<dyn Read>, path: PathBuf, gzip: bool) -> Result<Self, Error> {
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
        if got >= 2 && magic[..2] == GZIP_MAGIC && !gzip {
            let src: Box<dyn Read> = Box::new(Cursor::new(magic).take(got as u64).chain(r));
            let inflated = flate2::read::MultiGzDecoder::new(src);
            return Self::detect(Box::new(BufReader::new(inflated)), path, true);
        }
        if got < 4 {
            return Err(Error::UnknownMagic { path, magic: magic[..got].to_vec(), gzip });
        }
        let src: Source = Cursor::new(magic).chain(r);
        let inner = if magic == PCAPNG_MAGIC {
            ReaderInner::PcapNg(PcapNgReader::new(src).map_err(|source| Error::Format {
                path: path.clone(),
                format: "pcapng",
                source,
            })?)
        } else if PCAP_MAGICS.contains(&magic) {
            let r =
                PcapReader::new(src).map_err(|source| Error::Format { path: path.clone(), format: "pcap", source })?;
            let lt = u32::from(r.header().datalink);
            ReaderInner::Pcap(r, lt)
        } else {
            return Err(Error::UnknownMagic { path, magic: magic.to_vec(), gzip });
        };
        Ok(CaptureReader { inner, path, done: false, frames: 0 })
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
        let number = self.frames;
        match &mut self.inner {
            // Raw records, validated here rather than by pcap-file's `next_packet`: that one
            // rejects `orig_len > snaplen`, which is exactly what a snaplen-truncated capture
            // (`tcpdump -s 128`) contains. Like Wireshark, only the timestamp is checked; the
            // stored bytes are what the record holds.
            ReaderInner::Pcap(r, lt) => {
                let micro = r.header().ts_resolution == TsResolution::MicroSecond;
                r.next_raw_packet().map(|res| {
                    let fmt_err = |source| Error::Format { path: path.clone(), format: "pcap", source };
                    let p = res.map_err(fmt_err)?;
                    let nanos = if micro { u64::from(p.ts_frac) * 1000 } else { u64::from(p.ts_frac) };
                    if nanos >= 1_000_000_000 {
                        return Err(Error::Timestamp {
                            path: path.clone(),
                            number: number + 1,
                            sec: p.ts_sec,
                            frac: p.ts_frac,
                            unit: if micro { "µs" } else { "ns" },
                        });
                    }
                    Ok(CapturedFrame {
                        timestamp: Duration::new(u64::from(p.ts_sec), nanos as u32),
                        linktype: *lt,
                        orig_len: p.orig_len,
                        data: p.data.into_owned(),
                    })
                })
            }
            ReaderInner::PcapNg(r) => loop {
                let fmt_err = |source| Error::Format { path: path.clone(), format: "pcapng", source };
                let block = match r.next_block()? {
                    Ok(b) => b,
                    Err(e) => return Some(Err(fmt_err(e))),
                };
                // Copy what we need so the block's borrow of the reader ends here.
                let (iface, ts, orig_len, data) = match block {
                    Block::EnhancedPacket(epb) => {
                        (Some(epb.interface_id), epb.timestamp, epb.original_len, epb.data.into_owned())
                    }
                    Block::SimplePacket(spb) => (None, Duration::ZERO, spb.original_len, spb.data.into_owned()),
                    _ => continue,
                };
                let Some(id) = iface else {
                    let lt = r.interfaces().first().map(|i| u32::from(i.linktype)).unwrap_or(LINKTYPE_ETHERNET);
                    return Some(Ok(CapturedFrame { timestamp: ts, linktype: lt, orig_len, data }));
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
        let r = self.next_frame().map(|r| {
            r.map_err(|e| match e {
                // A record after the header: name the frame.
                Error::Format { path, format, source } => {
                    Error::Record { path, number: self.frames + 1, format, source }
                }
                e => e,
            })
        });
        match r {
            Some(Ok(_)) => self.frames += 1,
            _ => self.done = true,
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

/// A captured frame as an Ethernet frame, for decoders that start at the Ethernet header.
///
/// Ethernet captures are returned as they are. Linux cooked captures (SLL, SLL2 — `tcpdump -i
/// any`) and raw IP captures carry no Ethernet header, so one is synthesised: the EtherType from
/// the cooked header's protocol field (or the IP version), the source MAC from the cooked
/// header's link-layer address when it is a 6-byte address, zeros otherwise, and a zero
/// destination MAC (cooked captures do not record it). `None` for other link types or a frame
/// too short for its link header.
/// References: <https://www.tcpdump.org/linktypes/LINKTYPE_LINUX_SLL.html>,
/// <https://www.tcpdump.org/linktypes/LINKTYPE_LINUX_SLL2.html>.
pub fn as_ethernet(linktype: u32, data: &[u8]) -> Option<std::borrow::Cow<'_, [u8]>> {
    use std::borrow::Cow;
    let with_header = |src: [u8; 6], ethertype: u16, payload: &[u8]| {
        let mut f = Vec::with_capacity(14 + payload.len());
        f.extend_from_slice(&[0; 6]);
        f.extend_from_slice(&src);
        f.extend_from_slice(&ethertype.to_be_bytes());
        f.extend_from_slice(payload);
        Cow::Owned(f)
    };
    // (ARPHRD type, address length, address) → source MAC if it is an Ethernet address.
    let mac = |arphrd: u16, len: usize, addr: &[u8]| {
        let mut m = [0u8; 6];
        if arphrd == 1 && len == 6 {
            m.copy_from_slice(&addr[..6]);
        }
        m
    };
    let be16 = |b: &[u8], at: usize| u16::from_be_bytes([b[at], b[at + 1]]);
    match linktype {
        LINKTYPE_ETHERNET => Some(Cow::Borrowed(data)),
        LINKTYPE_LINUX_SLL if data.len() >= 16 => {
            // packet type 2, ARPHRD 2, address length 2, address 8, protocol 2.
            Some(with_header(mac(be16(data, 2), usize::from(be16(data, 4)), &data[6..14]), be16(data, 14), &data[16..]))
        }
        LINKTYPE_LINUX_SLL2 if data.len() >= 20 => {
            // protocol 2, reserved 2, ifindex 4, ARPHRD 2, packet type 1, address length 1, address 8.
            Some(with_header(mac(be16(data, 8), usize::from(data[11]), &data[12..20]), be16(data, 0), &data[20..]))
        }
        LINKTYPE_RAW | 12 | 14 | LINKTYPE_IPV4 | LINKTYPE_IPV6 if !data.is_empty() => match data[0] >> 4 {
            4 => Some(with_header([0; 6], 0x0800, data)),
            6 => Some(with_header([0; 6], 0x86dd, data)),
            _ => None,
        },
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn snaplen_truncated_records_are_read() {
        // Classic pcap, microseconds, snaplen 64: one record with 64 bytes stored of 558 on the
        // wire (what `tcpdump -s 64` writes), then one whose timestamp fraction is invalid.
        let mut f = Vec::new();
        f.extend_from_slice(&0xa1b2_c3d4u32.to_le_bytes());
        f.extend_from_slice(&2u16.to_le_bytes());
        f.extend_from_slice(&4u16.to_le_bytes());
        f.extend_from_slice(&[0; 8]);
        f.extend_from_slice(&64u32.to_le_bytes());
        f.extend_from_slice(&LINKTYPE_ETHERNET.to_le_bytes());
        let record = |f: &mut Vec<u8>, sec: u32, frac: u32| {
            for v in [sec, frac, 64, 558] {
                f.extend_from_slice(&v.to_le_bytes());
            }
            f.extend_from_slice(&[0xab; 64]);
        };
        record(&mut f, 7, 250_000);
        record(&mut f, 8, 1_000_000);
        let mut r = CaptureReader::from_reader(Box::new(std::io::Cursor::new(f)), "t.pcap").unwrap();
        let first = r.next().unwrap().unwrap();
        assert_eq!(first.orig_len, 558);
        assert_eq!(first.data, vec![0xab; 64]);
        assert_eq!(first.timestamp, Duration::new(7, 250_000_000));
        let e = r.next().unwrap().unwrap_err().to_string();
        assert_eq!(
            e,
            "t.pcap: frame 2: timestamp 8 s + 1000000 µs: the fraction is 1 s or more (a corrupted timestamp)"
        );
    }

    #[test]
    fn cooked_and_raw_captures_become_ethernet() {
        let ip = [0x45u8, 0, 0, 20, 0, 0, 0, 0, 64, 17, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2];
        // SLL: outgoing (4), ARPHRD_ETHER, 6-byte address 02:00:00:00:00:01 (+2 pad), IPv4.
        let mut sll = vec![0, 4, 0, 1, 0, 6, 2, 0, 0, 0, 0, 1, 0, 0, 0x08, 0x00];
        sll.extend_from_slice(&ip);
        let e = as_ethernet(LINKTYPE_LINUX_SLL, &sll).unwrap();
        assert_eq!(&e[..6], &[0; 6]);
        assert_eq!(&e[6..12], &[2, 0, 0, 0, 0, 1]);
        assert_eq!(&e[12..14], &[0x08, 0x00]);
        assert_eq!(&e[14..], &ip);
        // SLL2: protocol IPv4, ifindex 3, ARPHRD_ETHER, packet type 0, address length 6.
        let mut sll2 = vec![0x08, 0x00, 0, 0, 0, 0, 0, 3, 0, 1, 0, 6, 2, 0, 0, 0, 0, 9, 0, 0];
        sll2.extend_from_slice(&ip);
        let e = as_ethernet(LINKTYPE_LINUX_SLL2, &sll2).unwrap();
        assert_eq!(&e[6..12], &[2, 0, 0, 0, 0, 9]);
        assert_eq!(&e[12..14], &[0x08, 0x00]);
        assert_eq!(&e[14..], &ip);
        // A non-Ethernet link address is not taken as a MAC.
        sll[3] = 0x18; // ARPHRD 24 (FireWire-style), length still 6
        assert_eq!(&as_ethernet(LINKTYPE_LINUX_SLL, &sll).unwrap()[6..12], &[0; 6]);
        // Raw IP: the version nibble picks the EtherType.
        assert_eq!(&as_ethernet(LINKTYPE_RAW, &ip).unwrap()[12..14], &[0x08, 0x00]);
        let v6 = [0x60u8; 40];
        assert_eq!(&as_ethernet(LINKTYPE_IPV6, &v6).unwrap()[12..14], &[0x86, 0xdd]);
        // Ethernet is borrowed unchanged; short or unknown frames give None, never a panic.
        assert!(matches!(as_ethernet(LINKTYPE_ETHERNET, &ip), Some(std::borrow::Cow::Borrowed(_))));
        for n in 0..16 {
            assert!(as_ethernet(LINKTYPE_LINUX_SLL, &sll[..n]).is_none());
        }
        for n in 0..20 {
            assert!(as_ethernet(LINKTYPE_LINUX_SLL2, &sll2[..n]).is_none());
        }
        assert!(as_ethernet(LINKTYPE_RAW, &[]).is_none());
        assert!(as_ethernet(LINKTYPE_RAW, &[0x50]).is_none());
        assert!(as_ethernet(105, &ip).is_none());
    }

    use super::*;

    #[test]
    fn tsresol_scaling() {
        assert_eq!(scale_timestamp(1_500_000, 6), Duration::from_millis(1500));
        assert_eq!(scale_timestamp(7, 9), Duration::from_nanos(7));
        assert_eq!(scale_timestamp(1, 0x80 | 10), Duration::from_nanos(976_562));
        // 2^-10 s
    }

    #[test]
    fn gzipped_captures_read_as_the_plain_ones() {
        use std::io::Write as _;
        for format in [Format::Pcap, Format::PcapNg] {
            let mut w = PcapWriter::new(Vec::new(), format, "mem").unwrap();
            w.write_frame(Duration::from_nanos(1_000_000_123), &[0xab; 60]).unwrap();
            w.write_frame(Duration::from_nanos(1_000_000_456), &[0xcd; 61]).unwrap();
            let plain = w.finish().unwrap();
            let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
            gz.write_all(&plain).unwrap();
            let gz = gz.finish().unwrap();
            let read = |b: Vec<u8>| -> Vec<CapturedFrame> {
                CaptureReader::from_reader(Box::new(Cursor::new(b)), "c").unwrap().collect::<Result<_, _>>().unwrap()
            };
            let (a, b) = (read(plain), read(gz));
            assert_eq!(a.len(), 2);
            assert_eq!(a, b, "{format:?}");
        }
    }

    #[test]
    fn foreign_formats_are_named_with_the_conversion() {
        let err =
            |b: &[u8]| CaptureReader::from_reader(Box::new(Cursor::new(b.to_vec())), "in.cap").unwrap_err().to_string();
        let e = err(b"TRSNIFF data    \x1a\x01\x00\x12");
        assert_eq!(
            e,
            "in.cap: a Sniffer capture (NetXRay/DOS Sniffer, \"TRSNIFF data\" magic, .cap) (magic 54 52 53 4e), \
             not pcap or pcapng; rocefab reads pcap and pcapng, plain or gzip'd: convert it with \
             `editcap -F pcapng IN OUT.pcapng` (Wireshark's editcap reads every format it knows)"
        );
        assert_eq!(e.matches("in.cap").count(), 1);
        assert!(err(b"").contains("an empty file"));
        assert!(err(b"hello world").contains("a text file (magic 68 65 6c 6c)"));
        assert!(err(&[0x1f, 0x8b]).contains("in.cap: "), "a truncated gzip stream is an error, not a panic");
    }

    #[test]
    fn unknown_magic_names_the_stream() {
        let e = CaptureReader::from_reader(Box::new(Cursor::new(b"hello world".to_vec())), "x.bin").unwrap_err();
        let msg = e.to_string();
        assert!(msg.contains("x.bin") && msg.contains("not pcap or pcapng"), "{msg}");
    }
}
