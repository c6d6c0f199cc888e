//! pcap / pcapng writing and reading with format auto-detection.

#[path = "l2_fixtures.rs"]
mod fx;

use std::io::Cursor;
use std::time::Duration;

use fx::*;
use rocefab_wire::pcap::*;

fn tempdir() -> tempfile::TempDir {
    tempfile::Builder::new().prefix("rf-l2-").tempdir().unwrap()
}

fn frames() -> Vec<(Duration, Vec<u8>)> {
    vec![
        (Duration::new(1_700_000_000, 123_456_789), pfc_frame_bytes()),
        (Duration::new(1_700_000_001, 1), pause_frame_bytes()),
        (Duration::new(1_700_000_002, 999_999_999), lldp_frame(&lldpdu_dcbx_bytes())),
    ]
}

#[test]
fn pcap_and_pcapng_round_trip_with_nanoseconds() {
    let dir = tempdir();
    for (name, format) in [("a.pcap", Format::Pcap), ("b.pcapng", Format::PcapNg)] {
        let path = dir.path().join(name);
        assert_eq!(Format::from_path(&path), format);
        let fs = frames();
        write_all(&path, format, fs.iter().map(|(t, f)| (*t, &f[..]))).unwrap();
        let r = CaptureReader::open(&path).unwrap();
        assert_eq!(r.format(), format);
        let got: Vec<CapturedFrame> = r.collect::<Result<_, _>>().unwrap();
        assert_eq!(got.len(), fs.len());
        for (g, (t, f)) in got.iter().zip(&fs) {
            assert_eq!(g.timestamp, *t, "{name}");
            assert_eq!(g.linktype, LINKTYPE_ETHERNET);
            assert_eq!(g.orig_len as usize, f.len());
            assert_eq!(&g.data, f);
        }
    }
}

#[test]
fn detects_format_by_magic_not_extension() {
    let dir = tempdir();
    let path = dir.path().join("really-pcapng.pcap");
    write_all(&path, Format::PcapNg, [(Duration::from_secs(5), &pfc_frame_bytes()[..])]).unwrap();
    let r = CaptureReader::open(&path).unwrap();
    assert_eq!(r.format(), Format::PcapNg);
    let all = read_all(&path).unwrap();
    assert_eq!(all[0].timestamp, Duration::from_secs(5));
}

#[test]
fn in_memory_writer_and_reader() {
    let mut w = PcapWriter::new(Vec::new(), Format::Pcap, "mem").unwrap();
    w.write_frame(Duration::from_micros(1), &pause_frame_bytes()).unwrap();
    let bytes = w.finish().unwrap();
    assert_eq!(&bytes[..4], &[0xa1, 0xb2, 0x3c, 0x4d], "nanosecond pcap magic, big endian");
    let r = CaptureReader::from_reader(Box::new(Cursor::new(bytes)), "mem").unwrap();
    let v: Vec<_> = r.collect::<Result<_, _>>().unwrap();
    assert_eq!(v[0].data, pause_frame_bytes());
}

#[test]
fn errors_name_the_file() {
    let dir = tempdir();
    let missing = dir.path().join("nope.pcap");
    let e = CaptureReader::open(&missing).unwrap_err();
    assert!(e.to_string().contains("nope.pcap"), "{e}");

    let junk = dir.path().join("junk.pcap");
    std::fs::write(&junk, b"definitely not a capture").unwrap();
    let e = CaptureReader::open(&junk).unwrap_err();
    assert!(e.to_string().contains("junk.pcap") && e.to_string().contains("not pcap or pcapng"), "{e}");

    let short = dir.path().join("short.pcap");
    std::fs::write(&short, [0xa1, 0xb2]).unwrap();
    assert!(CaptureReader::open(&short).unwrap_err().to_string().contains("short.pcap"));

    // A valid header followed by a truncated record: the iterator yields one error, then stops.
    let cut = dir.path().join("cut.pcap");
    write_all(&cut, Format::Pcap, [(Duration::ZERO, &pfc_frame_bytes()[..])]).unwrap();
    let mut b = std::fs::read(&cut).unwrap();
    b.truncate(b.len() - 10);
    std::fs::write(&cut, b).unwrap();
    let mut r = CaptureReader::open(&cut).unwrap();
    let e = r.next().unwrap().unwrap_err();
    assert!(e.to_string().contains("cut.pcap"), "{e}");
    assert!(r.next().is_none());
}

#[test]
fn oversized_frame_is_rejected() {
    let mut w = PcapWriter::new(Vec::new(), Format::PcapNg, "big").unwrap();
    let e = w.write_frame(Duration::ZERO, &vec![0u8; 70_000]).unwrap_err();
    assert!(e.to_string().contains("70000"), "{e}");
}
