//! Privileged: RoCE at path MTU 4096 over 9216-byte links (issue 23, "RoCE at 4096").
//!
//! rail-spine.yaml with `mtu: 9216`: the switch and host XDP programs are `xdp.frags`, every
//! AF_XDP socket is bound with `XDP_USE_SG`, and a 4154/4170-byte RoCEv2 frame crosses the
//! fabric as a chain of two 4 KiB UMEM chunks at each hop. A ring AllReduce is run and verified;
//! `rocefab capture` records the receiving NIC (host2:gpu0, the NIC mirror gathers the chain)
//! and a switch port (rail1 to host1:gpu0, the switch mirror gathers it); tshark decodes the BTH
//! and the 4096-byte payloads, scapy recomputes every ICRC.
//!
//! Run as root, serially, after `cargo build -p control -p dataplane-user -p host-daemons`.
use std::process::Command;

use rocefab_tests::capture::{lost_frames_in, start_rocefab_capture, stop_rocefab_capture};
use rocefab_tests::fabric::{
    allreduce_in_order, delayed_rail_spine, failure, metric, rocefab, rocefab_bin, series, stderr, stdout, Fabric,
};
use rocefab_tests::scratch::{file, temp_dir};
use rocefab_tests::tshark::fields as tshark;
use serde_json::Value;

/// The link MTU of a node's interface, from `ip -o link show`.
fn mtu_of(f: &Fabric, node: &str, dev: &str) -> u32 {
    let o = f.exec(node, &["ip", "-o", "link", "show", dev]);
    assert!(o.status.success(), "ip link show {dev} in {node}: {}", stderr(&o));
    let s = stdout(&o);
    let at = s.find(" mtu ").unwrap_or_else(|| panic!("no mtu in {s:?}")) + 5;
    s[at..].split_whitespace().next().unwrap().parse().unwrap()
}

#[test]
fn roce_4096_frames_cross_a_jumbo_fabric_end_to_end() {
    let f = Fabric::up_replacing("rail-spine.yaml", "rfjm", "mtu: 1500", "mtu: 9216");
    // `rocefab plan` names the path MTU the NICs will use.
    let plan = rocefab(&["plan", f.topology.to_str().unwrap()]);
    assert!(plan.status.success(), "{}", stderr(&plan));
    assert!(stdout(&plan).contains("mtu 9216, RoCE path mtu 4096"), "{}", stdout(&plan));
    assert_eq!(mtu_of(&f, "host2", "gpu0"), 9216);
    let rail1_port = f.port_to("rail1", "host1:gpu0");
    assert_eq!(mtu_of(&f, "rail1", &rail1_port), 9216);

    let dir = temp_dir("rocefab-test-rfjm-capture-");
    let out = file(&dir, "jumbo.pcapng");
    let cap = start_rocefab_capture(&out, &[&f.name, &format!("host2:gpu0,rail1:{rail1_port}")]);
    let before = f.metrics("rail1");
    // A 2 s retransmit timeout (as fabric_capture.rs): a loaded 2-core machine may stall a
    // hop longer than the default; what is tested is the frames, not recovery.
    let run = Command::new(rocefab_bin())
        .args([
            "run",
            &f.name,
            "allreduce",
            "--size",
            "1MiB",
            "--json",
            "--timeout",
            "90",
            "--retransmit-timeout-ms",
            "2000",
        ])
        .output()
        .unwrap();
    assert!(run.status.success(), "rocefab run: {}", failure(&run));
    // Counters settle once the shapers drained: two scrapes in a row agree.
    let after = f.settled("rail1", &["rocefab_port_rx_packets_total", "rocefab_port_tx_packets_total"]);
    let summary = stop_rocefab_capture(cap);
    assert_eq!(lost_frames_in(&summary), 0, "the mirror lost frames: {summary}");

    let r: Value = serde_json::from_str(&stdout(&run)).unwrap_or_else(|e| panic!("JSON report: {e}\n{}", stdout(&run)));
    assert_eq!(r["ok"], true, "{r:#}");
    assert_eq!(r["verified_ranks"], 8, "every rank holds the element-wise sum");
    assert_eq!(r["nics"].as_array().unwrap().len(), 8);
    // The path MTU the NICs chose shows in the frames below (4096-byte payloads).
    // Nothing malformed or too long at the switch.
    let d =
        |name: &str| metric(&after, name, &[("port", &rail1_port)]) - metric(&before, name, &[("port", &rail1_port)]);
    assert_eq!(d("rocefab_port_rx_invalid_total"), 0.0);
    series(&after, "rocefab_port_rx_invalid_total", &[("port", &rail1_port)]);
    assert!(d("rocefab_port_rx_packets_total") > 30.0, "the job did not cross rail1:{rail1_port}");

    // tshark: RDMA WRITE First (6) / Middle (7) carry a full 4096-byte payload; the frame is
    // 14 + 20 + 8 + 12 (BTH) [+ 16 RETH] + 4096 + 4 (ICRC) bytes.
    let rows = tshark(
        &out,
        "infiniband && udp.dstport == 4791",
        &["frame.interface_name", "frame.p2p_dir", "infiniband.bth.opcode", "frame.len", "udp.length"],
    );
    // Data frames (WRITE First 6, Middle 7, Last 8, Only 10) and their payload bytes.
    let data: Vec<(&Vec<String>, u32)> = rows
        .iter()
        .filter(|r| ["6", "7", "8", "10"].contains(&r[2].as_str()))
        .map(|r| {
            let (frame_len, udp_len) = (r[3].parse::<u32>().unwrap(), r[4].parse::<u32>().unwrap());
            assert_eq!(frame_len, 14 + 20 + udp_len, "{r:?}");
            let reth = if r[2] == "6" || r[2] == "10" { 16 } else { 0 };
            (r, udp_len - 8 - 12 - reth - 4)
        })
        .collect();
    for (r, payload) in &data {
        assert!(*payload <= 4096, "{r:?}");
        if r[2] == "6" || r[2] == "7" {
            assert_eq!(*payload, 4096, "WRITE First/Middle carry a full path MTU: {r:?}");
        }
    }
    let port = format!("rail1:{rail1_port}");
    for (iface, dir) in [("host2:gpu0", "1"), (port.as_str(), "1"), (port.as_str(), "0")] {
        let n = data.iter().filter(|(r, p)| r[0] == iface && r[1] == dir && *p == 4096).count();
        // 14 ring steps of 1 MiB / 8 = 128 KiB = 32 full-MTU frames into each rank, out of each.
        assert!(n >= 14 * 32, "{iface} dir {dir}: {n} full-MTU data frames (of {} RoCE rows)", rows.len());
    }
    // tshark's own payload length (the bytes after the BTH, before the ICRC) agrees.
    let by_len = tshark(&out, "infiniband.bth.opcode == 7 && data.len == 4096", &["frame.len"]);
    assert_eq!(by_len.len(), data.iter().filter(|(r, _)| r[2] == "7").count(), "tshark's payload length");
    assert!(by_len.iter().all(|r| r[0] == "4154"), "{by_len:?}");

    // scapy recomputes each ICRC over the whole (gathered) frame.
    let icrc = rocefab_tests::scapy::icrc(std::path::Path::new(&out));
    assert!(icrc.len() >= rows.len(), "scapy saw {} BTH frames, tshark {}", icrc.len(), rows.len());
    let bad = icrc.iter().filter(|(stored, computed)| stored != computed).count();
    assert_eq!(bad, 0, "frames with a wrong ICRC, of {}", icrc.len());
}

/// The 7:1 lossless incast of `fabric_pfc.rs` (rail-spine-incast.yaml) at MTU 9216: the
/// switches account 4154/4170-byte frames of two chunks each in their buffer (bytes and
/// cells), xOFF is crossed and PFC cascades back to the senders, nothing lossless is dropped
/// or retransmitted, and the job verifies.
#[test]
fn jumbo_incast_crosses_xoff_sends_pfc_and_loses_nothing() {
    let f = Fabric::up_replacing("rail-spine-incast.yaml", "rfjp", "mtu: 1500", "mtu: 9216");
    let (out, max_pg) = rocefab_tests::fabric::run_incast(&f, 3);
    let r: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("rocefab run --json: {e}: {out}"));
    assert_eq!(r["ok"], true, "{r}");
    assert_eq!(r["verified_ranks"], 8, "{r}");
    assert!(max_pg >= 64_000.0, "rail1's largest priority-3 ingress group held {max_pg} bytes (xOFF 64 kB)");
    let switches = ["rail1", "rail2", "spine1", "spine2"];
    assert!(f.metric_sum(&["rail1"], "rocefab_pfc_tx_frames_total", &[("priority", "3")]) >= 1.0, "rail1 sent no PFC");
    for h in 1..=4 {
        let port = f.port_to("rail2", &format!("host{h}:gpu1"));
        let m = metric(&f.metrics("rail2"), "rocefab_pfc_tx_frames_total", &[("port", &port), ("priority", "3")]);
        assert!(m >= 1.0, "rail2 sent no PFC to host{h}:gpu1 (the cascade did not reach the senders)");
    }
    assert_eq!(f.series_sum(&switches, "rocefab_headroom_overflow_total", &[]), 0.0);
    assert_eq!(f.series_sum(&switches, "rocefab_queue_dropped_packets_total", &[("queue", "3")]), 0.0);
    assert_eq!(f.series_sum(&switches, "rocefab_port_rx_invalid_total", &[]), 0.0);
    assert_eq!(r["retransmitted_packets"], 0, "{r}");
}

/// Why jumbo frames take descriptor chains (`XDP_USE_SG`) rather than bigger UMEM chunks: the
/// kernel refuses an `XDP_UMEM_REG` whose `chunk_size` exceeds a page (`EINVAL`), and takes a
/// 4096-byte one (measured on Linux 6.18; the same call on hugepage-backed memory was refused
/// as well when tried by hand).
#[test]
fn kernel_refuses_umem_chunks_larger_than_a_page() {
    fn umem_reg(chunk: u32) -> std::io::Result<()> {
        let len = 16 * chunk as usize;
        // Declared before the socket, so it outlives it (the kernel pins it on success).
        let mem = vec![0u8; len + 4096];
        // SAFETY: plain socket(2); the descriptor is checked and then owned.
        let fd = unsafe { libc::socket(libc::AF_XDP, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) };
        assert!(fd >= 0, "socket(AF_XDP): {}", std::io::Error::last_os_error());
        // SAFETY: `fd` is fresh and owned here.
        let _fd = unsafe { <std::os::fd::OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd) };
        let addr = (mem.as_ptr() as usize).next_multiple_of(4096);
        let reg = libc::xdp_umem_reg {
            addr: addr as u64,
            len: len as u64,
            chunk_size: chunk,
            headroom: 0,
            flags: 0,
            tx_metadata_len: 0,
        };
        // SAFETY: `reg` is a live xdp_umem_reg and its size is passed; the kernel pins `mem`
        // (alive until the socket closes at the end of this function).
        let r = unsafe {
            libc::setsockopt(
                fd,
                libc::SOL_XDP,
                libc::XDP_UMEM_REG,
                (&reg as *const libc::xdp_umem_reg).cast(),
                std::mem::size_of::<libc::xdp_umem_reg>() as libc::socklen_t,
            )
        };
        if r < 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(())
    }
    umem_reg(afxdp::FRAME_SIZE).expect("a 4096-byte chunk is accepted");
    for chunk in [8192, 16384] {
        let e = umem_reg(chunk).expect_err("chunks larger than a page are refused");
        assert_eq!(e.raw_os_error(), Some(libc::EINVAL), "chunk {chunk}: {e}");
    }
}

/// Jumbo frames over delayed links (the delay lines of `fabric_delay.rs` at MTU 9216): a
/// multi-buffer packet waits on the receive and transmit lines as its head and leaves as its
/// whole chain; a Write-Only ring AllReduce verifies with nothing out of order or lost.
#[test]
fn jumbo_frames_cross_delayed_links_in_order() {
    let f = Fabric::up_edited("rail-spine.yaml", "rfjd", |text| {
        assert!(text.contains("mtu: 1500\n"), "rail-spine.yaml changed");
        delayed_rail_spine(text.replace("mtu: 1500\n", "mtu: 9216\n"))
    });
    allreduce_in_order(&f, &[]);
    let switches = ["rail1", "rail2", "spine1", "spine2"];
    assert_eq!(f.series_sum(&switches, "rocefab_port_rx_invalid_total", &[]), 0.0);
}
