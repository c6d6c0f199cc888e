//! tshark (Debian package `tshark`) as the tests' decoding oracle: the fields of the frames of a
//! capture file that match a display filter, every occurrence of them, a bounded live capture in
//! a namespace, and the number formats it prints.
use std::path::Path;
use std::process::Command;

/// `tshark -r pcap -T fields [-Y filter] -e f...`: per frame that `filter` (a display filter,
/// "" for every frame) matches, the first occurrence of each of `fields` ("" when the frame has
/// none). RPC-over-RDMA is not dissected (it would take RoCEv2 payloads for RPC records).
pub fn fields(pcap: impl AsRef<Path>, filter: &str, fields: &[&str]) -> Vec<Vec<String>> {
    let out = run(pcap.as_ref(), filter, &["-E", "separator=|", "-E", "occurrence=f"], fields);
    out.lines().map(|l| l.split('|').map(str::to_owned).collect()).collect()
}

/// Like [`fields`], with every occurrence of each field in the frame (in the frame's order).
pub fn occurrences(pcap: impl AsRef<Path>, filter: &str, fields: &[&str]) -> Vec<Vec<Vec<String>>> {
    let out = run(pcap.as_ref(), filter, &["-E", "separator=\t", "-E", "occurrence=a", "-E", "aggregator=;"], fields);
    out.lines()
        .map(|l| {
            let cols: Vec<&str> = l.split('\t').collect();
            assert_eq!(cols.len(), fields.len(), "tshark line {l:?}");
            cols.iter().map(|c| if c.is_empty() { vec![] } else { c.split(';').map(str::to_owned).collect() }).collect()
        })
        .collect()
}

fn run(pcap: &Path, filter: &str, format: &[&str], fields: &[&str]) -> String {
    let mut c = Command::new("tshark");
    c.arg("-r").arg(pcap).args(["-T", "fields"]).args(format);
    c.args(["--disable-protocol", "rpcordma"]);
    if !filter.is_empty() {
        c.args(["-Y", filter]);
    }
    for f in fields {
        c.args(["-e", f]);
    }
    let o = c.output().expect("run tshark (Debian package tshark)");
    assert!(o.status.success(), "tshark -r {} -Y {filter:?}: {}", pcap.display(), String::from_utf8_lossy(&o.stderr));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Captures on `iface` in namespace `ns` for `secs` seconds (capture filter `filter`, e.g.
/// `ether proto 0x88cc`) into `pcap`; bounded by `timeout secs + 20`.
pub fn capture_in(ns: &str, iface: &str, filter: &str, secs: u32, pcap: &Path) {
    let o = Command::new("ip")
        .args(["netns", "exec", ns, "timeout", &(secs + 20).to_string(), "tshark", "-q", "-i", iface])
        .args(["-f", filter, "-a", &format!("duration:{secs}"), "-w"])
        .arg(pcap)
        .output()
        .expect("run tshark");
    assert!(o.status.success(), "tshark capture on {ns}:{iface}: {}", String::from_utf8_lossy(&o.stderr));
}

/// A number as tshark prints it: decimal or 0x-hex depending on the field.
pub fn num(s: &str) -> u64 {
    match s.strip_prefix("0x") {
        Some(h) => u64::from_str_radix(h, 16).unwrap_or_else(|e| panic!("{s}: {e}")),
        None => s.parse().unwrap_or_else(|e| panic!("{s:?}: {e}")),
    }
}

/// Unix ns of `frame.time_epoch` (`1700000000.123456789`).
pub fn epoch_ns(s: &str) -> u64 {
    let (secs, frac) = s.split_once('.').unwrap_or((s, "0"));
    let frac = format!("{frac:0<9}");
    secs.parse::<u64>().unwrap_or_else(|e| panic!("{s:?}: {e}")) * 1_000_000_000
        + frac[..9].parse::<u64>().unwrap_or_else(|e| panic!("{s:?}: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_and_epochs() {
        assert_eq!((num("0x0101"), num("4791")), (0x101, 4791));
        assert_eq!(epoch_ns("1700000000.123456789"), 1_700_000_000_123_456_789);
        assert_eq!(epoch_ns("1700000000.5"), 1_700_000_000_500_000_000);
        assert_eq!(epoch_ns("17"), 17_000_000_000);
    }
}
