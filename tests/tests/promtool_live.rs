//! `promtool check metrics` (the Prometheus project's own linter) accepts what the live daemons
//! serve: every switch of a rail-spine fabric after traffic, and a running `rocefab-hostd`.
//! Needs root and promtool (Debian package `prometheus`).
use std::time::{Duration, Instant};

use rocefab_tests::fabric::{metric, promtool_check, scrape, Fabric};
use rocefab_tests::host::{hostd_bin, BackToBack};
use rocefab_tests::proc::Proc;
use rocefab_tests::scratch::TempFile;

#[test]
fn switch_metrics_pass_promtool() {
    let f = Fabric::up("rail-spine.yaml", "rfpm");
    for dscp in ["24", "48", "0"] {
        f.send(&["--from", "host1:gpu0", "--to", "host3:gpu1", "--dscp", dscp, "--count", "50", "--size", "256"]);
    }
    for sw in ["rail1", "rail2", "spine1", "spine2"] {
        let t = f.wait_metrics(sw, |t| metric(t, "rocefab_port_rx_packets_total", &[]) > 0.0);
        // The scrape is the real thing: it has the PFC and watchdog families with samples.
        assert!(t.contains("rocefab_pfc_tx_frames_total{"), "{sw}: no PFC family in\n{t}");
        promtool_check(&format!("{sw} /metrics"), &t);
    }
}

#[test]
fn host_metrics_pass_promtool() {
    let b = BackToBack::new("pm", 47, 1500);
    let mut job = b.receiver_job("pm-recv", 4096, 7, 1_000_000_000, 0, 3_000);
    job["metrics_listen"] = "127.0.0.1:19479".into();
    // Started in the root namespace with --netns, so its metrics bind to the root's loopback
    // before it enters the host namespace (as `rocefab run` starts it).
    let path = TempFile::new("rf-h-job-pm-recv.json");
    std::fs::write(&path, serde_json::to_vec_pretty(&job).unwrap()).unwrap();
    let mut recv = Proc::spawn(
        "rocefab-hostd pm-recv",
        std::process::Command::new(hostd_bin())
            .arg("--job")
            .arg(path.path())
            .args(["--netns", &b.b.0])
            .stdout(std::process::Stdio::piped()),
    );
    let ready = recv.line(Duration::from_secs(20));
    assert!(ready.contains("\"ready\":true"), "{ready}");
    let addr = "127.0.0.1:19479".parse().unwrap();
    let end = Instant::now() + Duration::from_secs(2);
    let t = loop {
        let t = scrape(addr);
        if metric(&t, "rocefab_host_snapshots_total", &[]) >= 1.0 || Instant::now() > end {
            break t;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(metric(&t, "rocefab_host_snapshots_total", &[]) >= 1.0, "no snapshot published within 2 s:\n{t}");
    assert!(t.contains("rocefab_host_qp_"), "no QP family in\n{t}");
    promtool_check("rocefab-hostd /metrics", &t);
}
