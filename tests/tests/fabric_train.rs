//! Privileged: `rocefab train` (book ch. 14) on rail-spine (4 hosts x 2 GPUs, 1 Gbit/s, time
//! dilation 100 so the debug hosts keep up).
//!
//! * The rendezvous is TCP on the frontend: tcpdump on the frontend bridge sees one connection to
//!   rank 0's `172.31.0.1:29500` from each rank on another host (6; host1's second rank connects
//!   inside host1), their hello lines, and the master's answer carrying the unique ID the log
//!   reports.
//! * The parameter broadcast is RoCEv2 on the backend: the tree's edge from rank 0 (host1 gpu0)
//!   to rank 2 (host2 gpu0), which no ring hop uses, carries exactly the parameters' bytes as
//!   RDMA WRITE payload (rail1's port to host2:gpu0, captured and decoded by tshark).
//! * 3 iterations verify on every rank; each ran its compute gap, with an exposed part of its
//!   communication no longer than the step; each iteration's NICs sent at least the ring's
//!   bytes. The same job also runs without DCQCN and with the chain broadcast.
//! * With NVLink and rings that keep hops between hosts on one rail, the spines carry no
//!   RoCEv2 data at all; rings in rank order cross them.
//!
//! Run as root, serially, after `cargo build -p control -p dataplane-user -p host-daemons`.
use std::collections::BTreeSet;
use std::time::Duration;

use rocefab_tests::capture::{start_capture_in, start_rocefab_capture, stop_rocefab_capture, stop_tcpdump};
use rocefab_tests::fabric::{failure, rocefab, stdout, Fabric};
use rocefab_tests::scratch::{file, temp_dir};
use rocefab_tests::tshark::fields as tshark;
use serde_json::Value;

/// `--model-params 256K`: 256,000 parameters (SI, as model sizes are counted).
const PARAMS: u64 = 256_000;

fn train(f: &Fabric, extra: &[&str]) -> Value {
    let mut args = vec![
        "train",
        &f.name,
        "--model-params",
        "256K",
        "--iterations",
        "3",
        "--compute",
        "5ms",
        "--bucket",
        "256KiB",
        "--json",
        "--timeout",
        "300",
    ];
    args.extend_from_slice(extra);
    let o = rocefab(&args);
    assert!(o.status.success(), "rocefab train: {}", failure(&o));
    let r: Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(r["ok"], true, "{r:#}");
    assert_eq!(r["network"]["verified_ranks"], 8, "{r:#}");
    r
}

fn u(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not a number: {v}"))
}

#[test]
fn rendezvous_on_the_frontend_broadcast_over_roce_and_three_verified_iterations() {
    let f = Fabric::up_edited("rail-spine.yaml", "rftr", |t| t + "time_dilation: 100\n");
    let dir = temp_dir("rocefab-test-rftr-");
    let fe_pcap = file(&dir, "frontend.pcap");
    let fe = start_capture_in(&f.netns("frontend"), "br0", std::path::Path::new(&fe_pcap), "tcp", 0, 5000, 300);
    let be_pcap = file(&dir, "rail1.pcapng");
    let port = f.port_to("rail1", "host2:gpu0");
    let be = start_rocefab_capture(&be_pcap, &[&f.name, &format!("rail1:{port}")]);

    let r = train(&f, &[]);
    stop_rocefab_capture(be);
    stop_tcpdump(fe, Duration::from_secs(10));

    // The rendezvous: 6 connections across the bridge to rank 0's port, hellos, the unique ID.
    // (A rank that finds the master not yet listening retries: count the connections that carried
    // a hello.)
    let hellos: BTreeSet<(String, String)> =
        tshark(&fe_pcap, "tcp.dstport == 29500 && tcp.len > 0 && ip.dst == 172.31.0.1", &["ip.src", "tcp.srcport"])
            .into_iter()
            .map(|h| (h[0].clone(), h[1].clone()))
            .collect();
    assert_eq!(hellos.len(), 6, "{hellos:?}");
    let from: BTreeSet<&str> = hellos.iter().map(|h| h.0.as_str()).collect();
    assert_eq!(from, ["172.31.0.2", "172.31.0.3", "172.31.0.4"].into_iter().collect());
    let payload: String = tshark(&fe_pcap, "tcp.len > 0", &["tcp.payload"])
        .iter()
        .map(|p| {
            let hex = p[0].replace(':', "");
            (0..hex.len())
                .step_by(2)
                .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap() as char)
                .collect::<String>()
        })
        .collect();
    let id = r["rendezvous"]["unique_id"].as_str().unwrap();
    assert_eq!(id.len(), 256, "a 128-byte unique ID");
    assert_eq!(payload.matches(id).count(), 6, "the master sent the ID to each remote rank");
    for rank in 2..8 {
        assert!(payload.contains(&format!("{{\"rank\":{rank},")), "rank {rank}'s hello");
    }

    // The broadcast: rank 0 -> rank 2 carries the parameters once, as RDMA WRITE payload.
    let writes = tshark(
        &be_pcap,
        "ip.src == 10.0.1.1 && ip.dst == 10.0.1.2 && udp.dstport == 4791",
        &["infiniband.bth.opcode", "infiniband.bth.psn", "udp.length"],
    );
    assert!(!writes.is_empty(), "no RoCEv2 from rank 0 to rank 2 on rail1");
    let mut psns = BTreeSet::new();
    let mut bytes = 0u64;
    for w in &writes {
        let op: u64 = w[0].parse().unwrap();
        assert!((6..=10).contains(&op), "an RDMA WRITE: {w:?}");
        if psns.insert(w[1].clone()) {
            // UDP header 8, BTH 12, ICRC 4, and a RETH (16) on First (6) and Only (10).
            let reth = if op == 6 || op == 10 { 16 } else { 0 };
            bytes += w[2].parse::<u64>().unwrap() - 8 - 12 - 4 - reth;
        }
    }
    assert_eq!(bytes, PARAMS * 4, "the parameters, once");

    // The iterations.
    let its = r["iterations"].as_array().unwrap();
    assert_eq!(its.len(), 3);
    assert!(u(&r["broadcast_ns"]) > 0);
    assert!(u(&r["broadcast_counters"]["tx_bytes"]) >= 7 * PARAMS * 4, "{r:#}");
    for it in its {
        let (step, compute, comm, exposed) =
            (u(&it["step_ns"]), u(&it["compute_ns"]), u(&it["comm_ns"]), u(&it["exposed_comm_ns"]));
        assert!((5_000_000..5_250_000).contains(&compute), "the 5 ms gap as run: {it}");
        assert!(exposed > 0 && exposed <= comm && comm <= step && exposed + 5_000_000 <= step, "{it}");
        // Ring AllReduce: each of 8 ranks sends 2 x 7/8 of 1 MiB of payload, plus headers and ACKs.
        let ring = 8 * 2 * 7 * PARAMS * 4 / 8;
        let tx = u(&it["tx_bytes"]);
        assert!(tx >= ring && tx < ring * 115 / 100, "iteration {it}: {tx} bytes sent, the ring needs {ring}");
    }

    // Without DCQCN and with the chain broadcast it verifies too.
    let r = train(&f, &["--no-dcqcn", "--broadcast", "chain"]);
    assert_eq!((r["dcqcn"].as_bool(), r["broadcast_algo"].as_str()), (Some(false), Some("chain")));
}

#[test]
fn rail_aligned_rings_keep_the_training_off_the_spines() {
    let f = Fabric::up_edited("rail-spine.yaml", "rftr2", |t| {
        t.replace("  nic: per-gpu", "  nic: per-gpu\n  nvlink: { bandwidth: 3600Gbps, latency: 1us }")
            + "time_dilation: 100\n"
    });
    // What the spines received besides LLDP and MAC Control (PFC) frames.
    let spines = || {
        let sum = |m| f.metric_sum(&["spine1", "spine2"], m, &[]);
        sum("rocefab_port_rx_packets_total")
            - sum("rocefab_port_rx_lldp_total")
            - sum("rocefab_port_rx_mac_control_total")
    };
    let before = spines();
    train(&f, &["--ring", "rail-aligned"]);
    let aligned = spines() - before;
    let before = spines();
    train(&f, &["--ring", "ranks"]);
    let ranks = spines() - before;
    // Rank order crosses from gpu1 of a host to gpu0 of the next: 1 MiB x 2 x 3 iterations over
    // the spines, some 6,000 packets; the rail-aligned rings none.
    assert!(ranks > 4_000.0, "rings in rank order crossed the spines with only {ranks} packets");
    assert_eq!(aligned, 0.0, "rail-aligned rings sent {aligned} packets through the spines");
}
