//! The capture stream a daemon serves on `GET /capture?ports=a,b[&snaplen=N]` and `rocefab
//! capture` reads: one JSON line ([`StreamHeader`]) followed by records until the client closes
//! it.
//!
//! Record (little endian): timestamp ns since the Unix epoch (u64), port (u16), direction (u8:
//! [`DIR_IN`] / [`DIR_OUT`]), reserved (u8), original length (u32), captured length (u32),
//! reserved (u32), then the captured bytes. A record with port [`HEARTBEAT_PORT`] and no bytes is
//! a heartbeat (the stream sends one when idle, so a closed client is noticed).
use serde::{Deserialize, Serialize};

/// Frame received on the port.
pub const DIR_IN: u8 = 1;
/// Frame sent on the port.
pub const DIR_OUT: u8 = 2;
/// Bytes of a record header.
pub const RECORD_HEADER: usize = 24;
/// Port number of a heartbeat record.
pub const HEARTBEAT_PORT: u16 = u16::MAX;

/// One mirrored frame, decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record<'a> {
    pub ts_ns: u64,
    pub port: u16,
    pub dir: u8,
    pub orig_len: u32,
    pub data: &'a [u8],
}

impl Record<'_> {
    /// Writes the header for a frame of `orig_len` bytes of which `caplen` follow (on the data
    /// path's mirror for every captured frame: inlined across the crate boundary).
    #[inline]
    pub fn header(ts_ns: u64, port: u16, dir: u8, orig_len: u32, caplen: u32) -> [u8; RECORD_HEADER] {
        let mut h = [0u8; RECORD_HEADER];
        h[0..8].copy_from_slice(&ts_ns.to_le_bytes());
        h[8..10].copy_from_slice(&port.to_le_bytes());
        h[10] = dir;
        h[12..16].copy_from_slice(&orig_len.to_le_bytes());
        h[16..20].copy_from_slice(&caplen.to_le_bytes());
        h
    }

    /// Encodes a whole record into `out`.
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&Record::header(self.ts_ns, self.port, self.dir, self.orig_len, self.data.len() as u32));
        out.extend_from_slice(self.data);
    }

    /// Decodes the record at the start of `buf`: the record and its total length, `None` if
    /// `buf` does not hold a whole record yet.
    pub fn decode(buf: &[u8]) -> Option<(Record<'_>, usize)> {
        let h = buf.get(..RECORD_HEADER)?;
        let u32_at = |i: usize| u32::from_le_bytes([h[i], h[i + 1], h[i + 2], h[i + 3]]);
        let caplen = u32_at(16) as usize;
        let data = buf.get(RECORD_HEADER..RECORD_HEADER + caplen)?;
        let rec = Record {
            ts_ns: u64::from_le_bytes(h[0..8].try_into().ok()?),
            port: u16::from_le_bytes([h[8], h[9]]),
            dir: h[10],
            orig_len: u32_at(12),
            data,
        };
        Some((rec, RECORD_HEADER + caplen))
    }
}

/// The first line of a capture stream.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StreamHeader {
    /// Node (switch or host) name.
    pub node: String,
    /// Port names by port number (the record's `port` indexes this list).
    pub ports: Vec<String>,
    /// Captured bytes per frame at most.
    pub snaplen: u32,
    /// What the timestamps are: [`WALL_CLOCK`] (ns since the Unix epoch, not dilated; the
    /// reader converts them to the fabric's emulated time).
    pub clock: String,
}

/// [`StreamHeader::clock`] of records stamped with the wall clock's Unix time in ns.
pub const WALL_CLOCK: &str = "wall clock";

/// Where `rocefab-nicd` keeps the shared-memory ring through which `rocefab-hostd` mirrors the
/// frames of the host whose network namespace is `netns` (created by nicd, removed by `rocefab down`).
pub fn nic_mirror_shm_path(netns: &str) -> std::path::PathBuf {
    std::path::PathBuf::from(format!("/dev/shm/rocefab-{netns}-nicmirror"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_round_trips_and_a_partial_one_waits() {
        let r = Record { ts_ns: 0x0102_0304_0506_0708, port: 3, dir: DIR_OUT, orig_len: 1500, data: &[0xa5; 64] };
        let mut buf = Vec::new();
        r.encode(&mut buf);
        assert_eq!(buf.len(), RECORD_HEADER + 64);
        assert_eq!(&buf[..8], &0x0102_0304_0506_0708u64.to_le_bytes(), "timestamp first, little endian");
        assert_eq!(Record::decode(&buf), Some((r.clone(), RECORD_HEADER + 64)));
        for cut in 0..buf.len() {
            assert_eq!(Record::decode(&buf[..cut]), None, "{cut} bytes are not a whole record");
        }
        let hb = Record { ts_ns: 1, port: HEARTBEAT_PORT, dir: DIR_IN, orig_len: 0, data: &[] };
        let mut b = Vec::new();
        hb.encode(&mut b);
        assert_eq!(Record::decode(&b).map(|(r, n)| (r.port, n)), Some((HEARTBEAT_PORT, RECORD_HEADER)));
    }

    #[test]
    fn the_stream_header_is_one_json_line_with_no_unknown_fields() {
        let h =
            StreamHeader { node: "rail1".into(), ports: vec!["eth1".into()], snaplen: 128, clock: WALL_CLOCK.into() };
        let line = serde_json::to_string(&h).unwrap();
        assert!(!line.contains('\n'));
        assert_eq!(serde_json::from_str::<StreamHeader>(&line).unwrap(), h);
        assert!(serde_json::from_str::<StreamHeader>(r#"{"node":"a","ports":[],"snaplen":1,"clock":"x","extra":1}"#)
            .is_err());
    }
}
