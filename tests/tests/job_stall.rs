//! A job that stalls on purpose ends at its `--timeout` with a report of what every stuck QP was
//! waiting for, and leaves the fabric usable: on the rail-spine fabric, rank 0's host (host1)
//! is frozen with SIGSTOP in the middle of a 7:1 incast, so its peers' writes are never
//! acknowledged again (a 60 s ACK timeout keeps them from giving up first). `rocefab run
//! --timeout 20` must end within the timeout plus the report grace, exit non-zero saying it
//! timed out, name the stuck requesters with their last acknowledged PSN, leave no hostd
//! behind, and the next run on the same fabric must succeed. The fabric (`rf-hst-*`) is brought
//! down by the guard, also on failure.
//!
//! Build first, then run as root (set `ROCEFAB_BIN_DIR` to this worktree's `target/debug` when
//! the test crate's build may come from another checkout):
//! `cargo build -p control -p dataplane-user -p host-daemons &&
//!  cargo test -p rocefab-tests --test job_stall -- --test-threads=1`
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use rocefab_tests::fabric::{metric, pids_with_cmdline, rocefab_bin, run_dir, run_json, stderr, stdout, Fabric};
use rocefab_tests::proc::Proc;
use serde_json::Value;

const FABRIC: &str = "hst";
const METRICS_BASE: u16 = 9830;
const TIMEOUT_S: u64 = 20;
/// `rocefab run`'s REPORT_GRACE (3 s) plus reaping and start-up slack.
const END_SLACK: Duration = Duration::from_secs(5);

/// Continues a hostd this test stopped, when the test ends: on the passing path `rocefab run`
/// has killed it by then; on a panic, the SIGTERM its dying run sent is pending and takes
/// effect (a stopped process acts on no signal but SIGKILL and SIGCONT).
struct Thaw(i32);

impl Drop for Thaw {
    fn drop(&mut self) {
        // SAFETY: kill(2) with SIGCONT on the hostd this test stopped (or on nothing: ESRCH).
        unsafe { libc::kill(self.0, libc::SIGCONT) };
    }
}

fn get(port: u16) -> Option<String> {
    rocefab_tests::http::get(([127, 0, 0, 1], port).into(), "/metrics").ok()
}

#[test]
fn a_job_whose_destination_freezes_ends_at_its_timeout_naming_the_stuck_qps() {
    let f = Fabric::up("rail-spine.yaml", FABRIC);
    let jobs = format!("{}/jobs/", run_dir(FABRIC).display());
    assert!(pids_with_cmdline(&jobs).is_empty(), "hostds of {FABRIC} before the test");

    let started = Instant::now();
    // Stopped if the test fails before it ends (its hostds end with it).
    let mut run = Proc::drained(
        "rocefab run incast",
        Command::new(rocefab_bin())
            .args(["run", FABRIC, "incast", "--size", "64MiB", "--json", "--retransmit-timeout-ms", "60000"])
            .args(["--timeout", &TIMEOUT_S.to_string(), "--metrics-port-base", &METRICS_BASE.to_string()])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped()),
    );

    // host1 (rank 0, metrics on the base port) has acknowledged data on all 7 of its responder
    // QPs: freeze it.
    let host1_job = format!("{jobs}incast/host1.json");
    let (frozen, _thaw) = loop {
        assert!(started.elapsed() < Duration::from_secs(TIMEOUT_S), "host1 never acknowledged data on all its QPs");
        if let Some(m) = get(METRICS_BASE) {
            let acking =
                m.lines().filter(|l| l.starts_with("rocefab_host_qp_acks_sent_total{") && !l.ends_with(" 0")).count();
            if acking == 7 && metric(&m, "rocefab_host_qp_placed_bytes_total", &[]) < 7.0 * 64.0 * 1048576.0 {
                let pids = pids_with_cmdline(&host1_job);
                assert_eq!(pids.len(), 1, "one hostd for host1: {pids:?}");
                // SAFETY: kill(2) with SIGSTOP on the hostd this test's run started.
                assert_eq!(unsafe { libc::kill(pids[0] as i32, libc::SIGSTOP) }, 0);
                break (pids[0], Thaw(pids[0] as i32));
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let o = run.output();
    let took = started.elapsed();
    let (out, err) = (stdout(&o), stderr(&o));
    eprintln!("the stalled run took {took:?}:\n{err}");
    assert!(!o.status.success(), "a stalled job must fail:\n{out}\n{err}");
    assert!(took >= Duration::from_secs(TIMEOUT_S), "ended before its timeout ({took:?}):\n{out}\n{err}");
    assert!(took < Duration::from_secs(TIMEOUT_S) + END_SLACK, "took {took:?}, timeout {TIMEOUT_S} s:\n{err}");
    assert!(err.contains(&format!("incast timed out after {TIMEOUT_S} s (--timeout)")), "{err}");

    let r: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("JSON report: {e}\n{out}\n{err}"));
    assert_eq!((r["ok"].as_bool(), r["timed_out"].as_bool()), (Some(false), Some(true)), "{r:#}");
    let errors: Vec<&str> = r["errors"].as_array().unwrap().iter().filter_map(Value::as_str).collect();
    assert!(
        errors.iter().any(|e| e
            .starts_with("host1: rocefab-hostd gave no answer without a report, also 3 s after it was asked for one")),
        "the frozen host is named: {errors:#?}"
    );
    // Ranks 2..7 on host2..host4 write to rank 0 and wait for its ACKs: each requester is stuck
    // with a full window outstanding, never timed out (60 s), its last ACK known.
    let stalls = r["stalls"].as_array().unwrap();
    let mut stuck = Vec::new();
    for s in stalls.iter().filter(|s| s["role"] == "requester") {
        let host = s["host"].as_str().unwrap();
        assert_ne!(host, "host1", "the frozen host reported nothing");
        let label = s["label"].as_str().unwrap();
        assert!(label.ends_with(" -> rank 0"), "{s:#}");
        let acked = s["last_acked_psn"].as_u64().unwrap_or_else(|| panic!("no acked PSN: {s:#}"));
        let (first, last) = (s["outstanding_psns"][0].as_u64().unwrap(), s["outstanding_psns"][1].as_u64().unwrap());
        assert_eq!(first, (acked + 1) % (1 << 24), "{s:#}");
        let n = s["outstanding_packets"].as_u64().unwrap();
        assert!(n > 0 && (last + (1 << 24) - first) % (1 << 24) + 1 == n, "{s:#}");
        assert_eq!((s["timeouts"].as_u64(), s["retries_left"].as_u64()), (Some(0), Some(7)), "{s:#}");
        assert_eq!(s["waiting_for"].as_str().unwrap().split(" (").next().unwrap(), format!("the ACK of PSN {first}"));
        assert!(s["last_progress_ns"].as_u64().unwrap() < s["at_ns"].as_u64().unwrap());
        stuck.push(label.to_string());
    }
    stuck.sort();
    let want: Vec<String> = (2..8).map(|k| format!("rank {k} -> rank 0")).collect();
    assert_eq!(stuck, want, "every writer on the hosts that answered: {stalls:#?}");
    assert_eq!(r["hosts"], 4);

    // Nothing is left: the frozen hostd was killed and reaped, the others stopped.
    assert!(!std::path::Path::new(&format!("/proc/{frozen}")).exists() || pids_with_cmdline(&host1_job).is_empty());
    assert!(pids_with_cmdline(&jobs).is_empty(), "hostds left: {:?}", pids_with_cmdline(&jobs));

    // The fabric still works (a 2 s ACK timeout: on a loaded 2-core machine at time dilation 1
    // the default 100 ms can run out of retries, which is not what this test is about).
    let r = run_json(&[FABRIC, "incast", "--size", "1MiB", "--timeout", "60", "--retransmit-timeout-ms", "2000"], 8);
    assert_eq!(r["timed_out"].as_bool(), Some(false), "{r:#}");
    assert!(r["stalls"].as_array().unwrap().is_empty());
    assert!(pids_with_cmdline(&jobs).is_empty());
    drop(f);
}
