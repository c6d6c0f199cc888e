//! Issue 42 (Ultra Ethernet Transport on real frames), on the rail-spine fabric with its default
//! flow ECMP: the switches hash the UDP source port, and a UET NIC puts a different entropy
//! there per packet, so every packet of a PDC may take either spine.
//!
//! - `uet_alltoall_sprays_every_packet_by_entropy`: a UET all-to-all is verified with more
//!   than 10 % of its packets out of order, no retransmission, and each rail switch's two
//!   uplinks within 5 % of each other in bytes; then AllReduce, incast and broadcast over UET,
//!   all verified.
//! - `one_entropy_per_pdc_keeps_a_path_and_the_entropy_header_sprays_over_ip`: the same
//!   all-to-all with one entropy per PDC (`--uet-entropy pdc`) has nothing out of order, so the
//!   reordering above comes from the per-packet entropy, and so has ROD (`--uet-delivery rod`);
//!   natively over IP protocol 253
//!   (`--uet-encap ip`) the switches hash the entropy header instead and spray as much.
//!
//! - `uet_incast_with_trimming_nacks_every_trim_and_meets_the_ideal`: a 7:1 UET incast into
//!   rail-spine-incast's 100 Mbit/s link, lossy (DSCP 26, queue 0 of 64 KiB, no ECN), at time
//!   dilation 10 (the machine is not the bottleneck: the report carries no warning). With
//!   `qos.trim` on, the bottleneck trims, every trimmed packet is NACKed and sent again, nothing
//!   times out, and the job takes within 10 % of the model's busiest-link time (its bytes with
//!   every header, over 100 Mbit/s). With trimming off, the same incast needs timeouts and
//!   finishes later.
//!
//! - `uet_frames_captured_on_a_live_port_decode_in_scapy`: `rocefab capture` of rail1's port to
//!   host1:gpu0 during a UET all-to-all; every frame of the capture to or from UDP 4793 is read
//!   by scapy layers written from the sources (test-support/src/scapy_uet.py, not rocefab's
//!   code): RUD requests carrying an SES standard WRITE of the job's JobID whose lengths agree
//!   with the frame (payload_length, message offset and request length, IP and UDP lengths),
//!   ACK_CCs and nothing else; every PSN of a PDC once unless flagged RETX, each PDC's SYN only
//!   on its first packets, and the ACKs' cumulative PSNs never going back.
//!
//! The local ACK timeout is 2 s (as in fabric_spray_reorder): a busy 2-core machine can hold
//! an ACK back longer than hostd's 100 ms, and a timeout's retransmission would have nothing to
//! do with the transport. The fabric (`rf-huet*` namespaces) is brought down by its guard.
//!
//! Build first, then run as root:
//! `cargo build -p control -p dataplane-user -p host-daemons &&
//!  cargo test -p rocefab-tests --test fabric_uet -- --test-threads=1`
use rocefab_test_support::scapy::{run_python, UET_LAYERS};
use rocefab_tests::capture::{lost_frames_in, start_rocefab_capture, stop_rocefab_capture};
use rocefab_tests::fabric::{failure, metric, rocefab, stdout, Fabric};
use rocefab_tests::scratch::{file, temp_dir};
use serde_json::Value;

/// Runs `kind` of `size` per rank over UET with `extra` arguments; the JSON report, asserting
/// every rank verified.
fn run(f: &Fabric, kind: &str, size: &str, extra: &[&str]) -> Value {
    let mut args = vec![
        "run",
        &f.name,
        kind,
        "--size",
        size,
        "--transport",
        "uet",
        "--json",
        "--timeout",
        "120",
        "--metrics-port-base",
        "9830",
        "--retransmit-timeout-ms",
        "2000",
    ];
    args.extend_from_slice(extra);
    let o = rocefab(&args);
    assert!(o.status.success(), "rocefab run {kind} --transport uet failed: {}", failure(&o));
    let r: Value = serde_json::from_str(&stdout(&o)).unwrap_or_else(|e| panic!("JSON report: {e}\n{}", stdout(&o)));
    assert_eq!(
        (r["ok"].as_bool(), r["verified_ranks"].as_u64(), r["transport"].as_str()),
        (Some(true), Some(8), Some("uet")),
        "{kind}: every rank verified over UET: {r:#}"
    );
    r
}

/// Data packets of a report: every requester's bytes in packets of the 1024-byte path MTU.
fn packets(r: &Value) -> u64 {
    r["qps"].as_array().unwrap().iter().map(|q| q["bytes"].as_u64().unwrap().div_ceil(1024)).sum()
}

/// `switch`'s ports towards the spines.
fn uplinks(f: &Fabric, switch: &str) -> Vec<String> {
    let c = f.config(switch);
    let up: Vec<String> = c.ports.iter().filter(|p| p.peer.starts_with("spine")).map(|p| p.name.clone()).collect();
    assert_eq!(up.len(), 2, "{switch} has two uplinks: {up:?}");
    up
}

fn tx_bytes(f: &Fabric, switch: &str, ports: &[String]) -> Vec<f64> {
    let t = f.metrics(switch);
    ports.iter().map(|p| metric(&t, "rocefab_port_tx_bytes_total", &[("port", p)])).collect()
}

#[test]
fn uet_alltoall_sprays_every_packet_by_entropy() {
    let f = Fabric::up("rail-spine.yaml", "huet");
    let rails = ["rail1", "rail2"];
    let up: Vec<Vec<String>> = rails.iter().map(|s| uplinks(&f, s)).collect();
    let before: Vec<Vec<f64>> = rails.iter().zip(&up).map(|(s, u)| tx_bytes(&f, s, u)).collect();
    let r = run(&f, "alltoall", "4MiB", &[]);
    let (ooo, n) = (r["out_of_order_packets"].as_u64().unwrap(), packets(&r));
    eprintln!("UET all-to-all: {ooo} of {n} packets out of order");
    // Half the pairs cross the spines (rank 2h on rail1, 2h + 1 on rail2), and about half of
    // their packets overtake or are overtaken on the other spine.
    assert!(ooo * 10 > n, "only {ooo} of {n} packets out of order: {r:#}");
    assert_eq!(r["retransmitted_packets"], 0, "{r:#}");
    assert_eq!(r["uet"]["retransmitted_on_timeout"], 0, "{r:#}");
    for (i, s) in rails.iter().enumerate() {
        let after = tx_bytes(&f, s, &up[i]);
        let b: Vec<f64> = after.iter().zip(&before[i]).map(|(a, b)| a - b).collect();
        let spread = (b[0] - b[1]).abs() / b[0].max(b[1]);
        eprintln!("{s}: uplink bytes {b:?}, spread {:.2} %", spread * 100.0);
        // 4 MiB per rank: each rail sends 4 ranks x 4 peers on the other rail x 512 KiB.
        assert!(b.iter().sum::<f64>() >= 8.0 * 1024.0 * 1024.0, "{s}: uplinks carried only {b:?}");
        assert!(spread <= 0.05, "{s}: uplinks differ by {:.1} %: {b:?}", spread * 100.0);
    }
    for kind in ["allreduce", "incast", "broadcast"] {
        let r = run(&f, kind, "1MiB", &[]);
        eprintln!("UET {kind}: {} out of order", r["out_of_order_packets"]);
    }
}

#[test]
fn one_entropy_per_pdc_keeps_a_path_and_the_entropy_header_sprays_over_ip() {
    let f = Fabric::up("rail-spine.yaml", "huet2");
    let r = run(&f, "alltoall", "1MiB", &["--uet-entropy", "pdc"]);
    assert_eq!(r["out_of_order_packets"], 0, "one path per PDC: {r:#}");
    // ROD takes one path per PDC whatever --uet-entropy says: in order, nothing sent again.
    let r = run(&f, "alltoall", "1MiB", &["--uet-delivery", "rod"]);
    assert_eq!((&r["out_of_order_packets"], &r["retransmitted_packets"]), (&Value::from(0), &Value::from(0)), "{r:#}");
    // Natively over IP protocol 253: the switches hash the entropy header as they hash the UDP
    // source port.
    let up = uplinks(&f, "rail1");
    let before = tx_bytes(&f, "rail1", &up);
    let r = run(&f, "alltoall", "4MiB", &["--uet-encap", "ip"]);
    let (ooo, n) = (r["out_of_order_packets"].as_u64().unwrap(), packets(&r));
    let b: Vec<f64> = tx_bytes(&f, "rail1", &up).iter().zip(&before).map(|(a, b)| a - b).collect();
    let spread = (b[0] - b[1]).abs() / b[0].max(b[1]);
    eprintln!(
        "UET over IP 253: {ooo} of {n} packets out of order; rail1 uplink bytes {b:?}, spread {:.2} %",
        spread * 100.0
    );
    assert!(ooo * 10 > n, "only {ooo} of {n} packets out of order: {r:#}");
    assert!(spread <= 0.05, "rail1's uplinks differ by {:.1} %: {b:?}", spread * 100.0);
}

/// rail-spine-incast at D 10 with queue 0 (UET's DSCP 26) lossy, 64 KiB, without ECN, and
/// `trim` as given (46 → strict queue 6 in the DSCP map, as SONiC's HLD does with its own
/// values).
fn incast_fabric(name: &str, trim: bool) -> Fabric {
    Fabric::up_edited("rail-spine-incast.yaml", name, |t| {
        let trim = if trim { "  trim: { size: 128, dscp: 46, queue: 6 }\n" } else { "" };
        let qos = format!("qos:\n{trim}  queue_limit: 64KiB\n  classes: {{ 24: 3, 46: 6, 48: 7 }}\n");
        assert!(t.contains("\nqos:\n") && t.contains("  wred: off"), "rail-spine-incast.yaml changed shape");
        t.replacen("\nqos:\n", &format!("\ntime_dilation: 10\n{qos}"), 1)
    })
}

/// The incast's JSON report (1 MiB from each of the seven other ranks into rank 0).
fn incast(f: &Fabric) -> Value {
    let o = rocefab(&[
        "run",
        &f.name,
        "incast",
        "--size",
        "1MiB",
        "--transport",
        "uet",
        "--json",
        "--timeout",
        "120",
        "--metrics-port-base",
        "9830",
    ]);
    assert!(o.status.success(), "rocefab run incast --transport uet failed: {}", failure(&o));
    let r: Value = serde_json::from_str(&stdout(&o)).unwrap_or_else(|e| panic!("JSON report: {e}\n{}", stdout(&o)));
    assert_eq!((r["ok"].as_bool(), r["verified_ranks"].as_u64()), (Some(true), Some(8)), "{r:#}");
    assert_eq!(r["warnings"].as_array().map(Vec::len), Some(0), "the machine limited the run at D 10: {r:#}");
    r
}

#[test]
fn uet_incast_with_trimming_nacks_every_trim_and_meets_the_ideal() {
    let (trimmed_jct, trims) = {
        let f = incast_fabric("huett", true);
        let before = f.metrics("rail1");
        let r = incast(&f);
        let after = f.metrics("rail1");
        let port = f.port_to("rail1", "host1:gpu0");
        let trimmed = |t: &str| metric(t, "rocefab_queue_trimmed_packets_total", &[("port", &port), ("queue", "0")]);
        let at_switch = (trimmed(&after) - trimmed(&before)) as u64;
        let u = &r["uet"];
        let n = |k: &str| u[k].as_u64().unwrap_or_else(|| panic!("uet.{k}: {r:#}"));
        let (jct, ideal) = (r["completion_ns"].as_u64().unwrap(), r["expected"]["busiest_link_ns"].as_u64().unwrap());
        eprintln!(
            "trim on: {at_switch} trims at rail1, {} NACKed, {} sent again on NACK, {} on timeout; JCT {jct} ns, ideal {ideal} ns ({:.3})",
            n("trimmed_received"),
            n("retransmitted_on_nack"),
            n("retransmitted_on_timeout"),
            jct as f64 / ideal as f64
        );
        assert!(at_switch > 0, "the bottleneck trimmed nothing: {r:#}");
        assert_eq!(n("trimmed_received"), at_switch, "every trimmed packet reached its receiver: {r:#}");
        assert_eq!(n("nacks_trimmed"), at_switch, "and was NACKed: {r:#}");
        assert_eq!(n("retransmitted_on_nack"), at_switch, "and sent again: {r:#}");
        assert_eq!(n("retransmitted_on_timeout"), 0, "no timeout: {r:#}");
        assert!(jct * 10 <= ideal * 11, "JCT {jct} ns more than 10 % over the ideal {ideal} ns: {r:#}");
        (jct, at_switch)
    };
    let f = incast_fabric("huetn", false);
    let r = incast(&f);
    let (jct, timeouts) =
        (r["completion_ns"].as_u64().unwrap(), r["uet"]["retransmitted_on_timeout"].as_u64().unwrap());
    eprintln!("trim off: {timeouts} sent again on timeout; JCT {jct} ns (trim on: {trimmed_jct} ns, {trims} trims)");
    assert_eq!(r["uet"]["trimmed_received"], 0, "{r:#}");
    assert!(timeouts > 0, "without trimming the losses need timeouts: {r:#}");
    assert!(jct > trimmed_jct, "without trimming the incast finishes later: {jct} ns against {trimmed_jct} ns");
}

/// Reads a capture with the scapy UET layers: one JSON line per UDP 4793 frame with the fields
/// the checks below use (from scapy's dissection only).
const READER: &str = r#"
import sys
from scapy.all import rdpcap, IP, UDP
for p in rdpcap(sys.argv[1]):
    if UDP not in p or p[UDP].dport != 4793:
        continue
    o = {"ip_len": p[IP].len, "udp_len": p[UDP].len, "src": p[IP].src, "dst": p[IP].dst,
         "dscp": p[IP].tos >> 2, "sport": p[UDP].sport}
    layers = []
    l = p[UDP].payload
    while l and l.name not in ("Raw", "Padding", "NoPayload"):
        layers.append({"name": l.name, "fields": every_field(l)})
        l = l.payload
    o["layers"] = layers
    o["payload_len"] = len(bytes(l.load)) if l and l.name == "Raw" else 0
    print(json.dumps(o))
"#;

#[test]
fn uet_frames_captured_on_a_live_port_decode_in_scapy() {
    let f = Fabric::up("rail-spine.yaml", "huet3");
    let dir = temp_dir("rocefab-test-huet3-capture-");
    let out = file(&dir, "rail1.pcapng");
    let port = f.port_to("rail1", "host1:gpu0");
    let cap = start_rocefab_capture(&out, &[&f.name, &format!("rail1:{port}")]);
    let r = run(&f, "alltoall", "1MiB", &[]);
    let summary = stop_rocefab_capture(cap);
    assert_eq!(lost_frames_in(&summary), 0, "the mirror lost frames: {summary}");
    let job_id = gpu_host::nic::collective_job::uet_job_id(&format!("{}-alltoall", f.name));
    let script = format!("{UET_LAYERS}\n{READER}");
    let text = run_python(&script.replace("sys.argv[1]", &format!("{out:?}")), "");
    let frames: Vec<Value> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let (mut requests, mut acks) = (0u64, 0u64);
    let mut psns: std::collections::HashSet<((String, u64), u64)> = Default::default();
    let mut past_syn: std::collections::HashMap<(String, u64), bool> = Default::default();
    let mut cack: std::collections::HashMap<(String, u64), u64> = Default::default();
    for fr in &frames {
        let l = fr["layers"].as_array().unwrap();
        let n = |i: usize, k: &str| l[i]["fields"][k].as_u64().unwrap_or_else(|| panic!("{k} in {fr}"));
        assert_eq!(fr["udp_len"].as_u64().unwrap() + 20, fr["ip_len"].as_u64().unwrap(), "{fr}");
        match l[0]["name"].as_str().unwrap() {
            "UET PDS RUD/ROD request" => {
                requests += 1;
                assert_eq!((n(0, "type"), n(0, "next_hdr")), (2, 3), "a RUD request with a standard SES header: {fr}");
                assert_eq!(l[1]["name"], "UET SES standard request", "{fr}");
                assert_eq!((n(1, "opcode"), n(1, "job_id")), (1, u64::from(job_id)), "a WRITE of the job: {fr}");
                assert_eq!(fr["dscp"], 26, "{fr}");
                let len = fr["payload_len"].as_u64().unwrap();
                let (som, eom) = (n(1, "som") == 1, n(1, "eom") == 1);
                let (req_len, offset) = if som {
                    (n(1, "request_length"), 0)
                } else {
                    assert_eq!(n(1, "payload_length"), len, "payload_length says the payload: {fr}");
                    (n(1, "request_length"), n(1, "message_offset"))
                };
                assert!(len > 0 && len <= 1024 && offset + len <= req_len, "{fr}");
                assert_eq!(eom, offset + len == req_len, "EOM on the last packet only: {fr}");
                assert_eq!(fr["udp_len"].as_u64().unwrap(), 8 + 12 + 44 + len, "{fr}");
                let key = (fr["src"].as_str().unwrap().to_string(), n(0, "spdcid"));
                let (psn, retx, syn) = (n(0, "psn"), n(0, "retx") == 1, n(0, "syn") == 1);
                assert!(psns.insert((key.clone(), psn)) || retx, "PSN {psn} twice without RETX: {fr}");
                let established = past_syn.entry(key).or_insert(false);
                assert!(!(syn && *established), "SYN after the PDC's first packet without it: {fr}");
                *established |= !syn;
            }
            "UET PDS ACK_CC" => {
                acks += 1;
                assert_eq!(n(0, "cc_type"), 0, "NSCC state: {fr}");
                let key = (fr["src"].as_str().unwrap().to_string(), n(0, "spdcid"));
                let c = n(0, "cack_psn");
                if let Some(&prev) = cack.get(&key) {
                    assert!((c.wrapping_sub(prev) as u32) < 1 << 31, "CACK_PSN went back from {prev} to {c}: {fr}");
                }
                cack.insert(key, c);
            }
            other => panic!("unexpected UET frame {other}: {fr}"),
        }
    }
    // rank 0 (host1:gpu0) sends 7 x 128 KiB and receives as much: 896 requests each way.
    eprintln!("{requests} requests, {acks} ACK_CCs decoded in scapy ({} frames)", frames.len());
    assert_eq!(requests, 2 * 7 * 128, "every request crossed rail1:{port} once: {r:#}");
    assert!(acks > 0);
}
