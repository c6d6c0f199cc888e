//! Privileged: NVLink inside a host (`hosts.nvlink`, book ch. 13) on a live rail-spine fabric.
//!
//! rail-spine's 4 hosts x 2 GPUs with `nvlink: { bandwidth: 3600Gbps, latency: 1us }`: a
//! verified 8-rank all-to-all moves the chunks between the two GPUs of a host over NVLink (the
//! report's `nvlink_bytes` is exactly those chunks, and no QP joins two ranks of one host),
//! everything else over the network; the text report names the NVLink bytes.
//!
//! Run as root, serially, after `cargo build -p control -p dataplane-user -p host-daemons`.
use rocefab_tests::fabric::{failure, rocefab, stdout, Fabric};
use serde_json::Value;

#[test]
fn transfers_between_gpus_of_a_host_take_nvlink() {
    let f = Fabric::up_replacing(
        "rail-spine.yaml",
        "rfnv",
        "  nic: per-gpu",
        "  nic: per-gpu\n  nvlink: { bandwidth: 3600Gbps, latency: 1us }",
    );
    let o = rocefab(&["run", &f.name, "alltoall", "--size", "1MiB", "--json", "--timeout", "120"]);
    assert!(o.status.success(), "rocefab run: {}", failure(&o));
    let r: Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!((r["ok"].as_bool(), r["verified_ranks"].as_u64()), (Some(true), Some(8)), "{r:#}");
    // Each rank sends 1 MiB / 8 to its host's other GPU: 8 x 128 KiB over NVLink.
    assert_eq!(r["nvlink_bytes"].as_u64(), Some(8 * 131_072), "{r:#}");
    // 8 ranks x 6 peers on other hosts, each a QP; none between two ranks of a host (2h, 2h+1).
    let qps = r["qps"].as_array().unwrap();
    assert_eq!(qps.len(), 8 * 6);
    for q in qps {
        let l = q["label"].as_str().unwrap();
        let ranks: Vec<u32> = l.split(" -> ").map(|x| x.trim_start_matches("rank ").parse().unwrap()).collect();
        assert_ne!(ranks[0] / 2, ranks[1] / 2, "a QP inside a host: {l}");
    }
    let o = rocefab(&["run", &f.name, "alltoall", "--size", "1MiB", "--timeout", "120"]);
    assert!(o.status.success(), "rocefab run: {}", failure(&o));
    assert!(stdout(&o).contains("NVLink bytes 1MiB (inside the hosts, no network frames)"), "{}", stdout(&o));
}
