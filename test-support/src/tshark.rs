//! tshark (Debian package `tshark`) as the tests' decoding oracle, the one wrapper every test
//! uses: the fields of the frames of a capture ([`read`], [`read_stdin`], then
//! [`Tshark::first`] or [`Tshark::all`]; [`fields`] and [`occurrences`] for the common case), a
//! bounded live capture in a namespace ([`capture_in`]), and the number formats it prints
//! ([`num`], [`epoch_ns`]). A missing tshark or a failed run fails the test, naming the command.
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// Where tshark reads the capture from.
enum Input {
    File(PathBuf),
    Stdin(Stdio),
}

/// A `tshark -r ... -T fields` run being set up: [`read`] or [`read_stdin`], then
/// [`filter`](Tshark::filter) and [`disable`](Tshark::disable), then [`first`](Tshark::first) or
/// [`all`](Tshark::all).
pub struct Tshark {
    input: Input,
    filter: String,
    disabled: Vec<String>,
}

/// `tshark -r pcap` (pcap, pcapng, or anything tshark reads).
pub fn read(pcap: impl AsRef<Path>) -> Tshark {
    Tshark { input: Input::File(pcap.as_ref().to_path_buf()), filter: String::new(), disabled: Vec::new() }
}

/// `tshark -r -`: the capture comes on tshark's standard input (e.g. another process's stdout).
pub fn read_stdin(stdin: impl Into<Stdio>) -> Tshark {
    Tshark { input: Input::Stdin(stdin.into()), filter: String::new(), disabled: Vec::new() }
}

/// Per frame that `filter` (a display filter, "" for every frame) matches, the first occurrence
/// of each of `fields` ("" when the frame has none). RPC-over-RDMA is not dissected: its
/// heuristic takes RoCEv2 payloads for RPC records and then stops the dissection before the ICRC.
pub fn fields(pcap: impl AsRef<Path>, filter: &str, fields: &[&str]) -> Vec<Vec<String>> {
    read(pcap).disable("rpcordma").filter(filter).first(fields)
}

/// Like [`fields`], with every occurrence of each field in the frame (in the frame's order).
pub fn occurrences(pcap: impl AsRef<Path>, filter: &str, fields: &[&str]) -> Vec<Vec<Vec<String>>> {
    read(pcap).disable("rpcordma").filter(filter).all(fields)
}

impl Tshark {
    /// Only the frames this display filter matches (`-Y`; "" keeps every frame).
    pub fn filter(mut self, display_filter: &str) -> Tshark {
        self.filter = display_filter.to_string();
        self
    }

    /// Does not dissect `protocol` (`--disable-protocol`), e.g. a heuristic dissector that
    /// claims opaque payloads.
    pub fn disable(mut self, protocol: &str) -> Tshark {
        self.disabled.push(protocol.to_string());
        self
    }

    /// Per frame, the first occurrence of each of `fields` ("" when the frame has none).
    pub fn first(self, fields: &[&str]) -> Vec<Vec<String>> {
        parse_first(&self.run(&["-E", "separator=|", "-E", "occurrence=f"], fields))
    }

    /// Per frame, every occurrence of each of `fields`, in the frame's order (empty when none).
    pub fn all(self, fields: &[&str]) -> Vec<Vec<Vec<String>>> {
        let out = self.run(&["-E", "separator=\t", "-E", "occurrence=a", "-E", "aggregator=;"], fields);
        parse_all(&out, fields.len())
    }

    fn run(self, format: &[&str], fields: &[&str]) -> String {
        let mut c = Command::new("tshark");
        let source = match self.input {
            Input::File(p) => {
                c.arg("-r").arg(&p);
                p.display().to_string()
            }
            Input::Stdin(s) => {
                c.args(["-r", "-"]).stdin(s);
                "-".to_string()
            }
        };
        c.args(["-T", "fields"]).args(format);
        for p in &self.disabled {
            c.args(["--disable-protocol", p]);
        }
        if !self.filter.is_empty() {
            c.args(["-Y", &self.filter]);
        }
        for f in fields {
            c.args(["-e", f]);
        }
        let o = c.output().unwrap_or_else(|e| {
            panic!("cannot run tshark ({e}): install the Debian package `tshark` (cargo xtask setup does)")
        });
        let filter = &self.filter;
        assert!(o.status.success(), "tshark -r {source} -Y {filter:?}: {}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8_lossy(&o.stdout).into_owned()
    }
}

/// Output of `-E separator=| -E occurrence=f`: one row per line, one column per field.
fn parse_first(out: &str) -> Vec<Vec<String>> {
    out.lines().map(|l| l.split('|').map(str::to_owned).collect()).collect()
}

/// Output of `-E separator=<tab> -E occurrence=a -E aggregator=;`: per line, per field, the
/// occurrences; a line without `fields` columns fails the test.
fn parse_all(out: &str, fields: usize) -> Vec<Vec<Vec<String>>> {
    out.lines()
        .map(|l| {
            let cols: Vec<&str> = l.split('\t').collect();
            assert_eq!(cols.len(), fields, "tshark line {l:?}");
            cols.iter().map(|c| if c.is_empty() { vec![] } else { c.split(';').map(str::to_owned).collect() }).collect()
        })
        .collect()
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

    #[test]
    #[should_panic(expected = "0x1g")]
    fn a_number_tshark_did_not_print_fails_the_test() {
        num("0x1g");
    }

    #[test]
    fn output_formats_split_into_rows_fields_and_occurrences() {
        assert_eq!(parse_first("0x0101|8\n0x0001|\n"), [vec!["0x0101", "8"], vec!["0x0001", ""]]);
        let all = parse_all("1;2\t\t7\n3\t4\t\n", 3);
        assert_eq!(all[0], [vec!["1", "2"], vec![], vec!["7"]]);
        assert_eq!(all[1], [vec!["3"], vec!["4"], vec![]]);
    }

    #[test]
    #[should_panic(expected = "tshark line")]
    fn a_line_with_missing_columns_fails_the_test() {
        parse_all("1\t2\n", 3);
    }

    /// A PFC frame (IEEE 802.1Qbb: priority 3 enabled, quanta 0xffff) written as a pcap file by
    /// hand, read back through both output formats and from standard input.
    #[test]
    fn tshark_reads_a_pfc_frame_from_a_file_and_from_stdin() {
        let mut frame = vec![0x01, 0x80, 0xc2, 0, 0, 0x01, 2, 0, 0, 0, 0, 1, 0x88, 0x08, 0x01, 0x01, 0x00, 0x08];
        frame.extend((0..8).flat_map(|p| if p == 3 { [0xff, 0xff] } else { [0, 0] }));
        frame.resize(60, 0);
        // pcap global header: magic, version 2.4, zone, sigfigs, snaplen, LINKTYPE_ETHERNET.
        let mut pcap = Vec::new();
        pcap.extend(0xa1b2_c3d4u32.to_le_bytes());
        pcap.extend(2u16.to_le_bytes());
        pcap.extend(4u16.to_le_bytes());
        for v in [0u32, 0, 65_535, 1] {
            pcap.extend(v.to_le_bytes());
        }
        for _ in 0..2 {
            for v in [1u32, 0, frame.len() as u32, frame.len() as u32] {
                pcap.extend(v.to_le_bytes());
            }
            pcap.extend(&frame);
        }
        let dir = std::env::temp_dir().join(format!("rf-test-support-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("pfc.pcap");
        std::fs::write(&path, &pcap).unwrap();
        let f = ["macc.opcode", "macc.cbfc.enbv", "macc.cbfc.pause_time.c3"];
        assert_eq!(fields(&path, "", &f), vec![vec!["0x0101", "0x0008", "65535"]; 2]);
        assert_eq!(occurrences(&path, "macc.cbfc.enbv == 8", &f[..1]), vec![vec![vec!["0x0101"]]; 2]);
        assert!(fields(&path, "udp", &f).is_empty());
        let stdin = std::fs::File::open(&path).unwrap();
        assert_eq!(read_stdin(stdin).first(&f[..2]), vec![vec!["0x0101", "0x0008"]; 2]);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
