//! Issue 41: every host of a job in one `rocefab-hostd --hosts` (`rocefab run --host-workers N`).
//! On the rail-spine fabric (4 hosts), with the shared process:
//! - an AllReduce verifies on every rank; each host's lines are in its own log (its setup, its
//!   one verified report), the process's own in `hosts.log`; each host's metrics are served on
//!   its own port while the job runs (all from the process's one server thread); the XDP
//!   programs are gone from the hosts' NICs afterwards;
//! - the controller's deadline (SIGUSR1 to the one process) gets a report from every host saying
//!   what its QPs waited for;
//! - killing the shared process during a job fails the run at once, naming every host with the
//!   process and how it ended; nothing is left and the next run succeeds.
//!
//! The fabric (`rf-hsh`) is brought down by the guard, also on failure.
//!
//! Build first, then run as root: `cargo build -p control -p dataplane-user -p host-daemons &&
//!  cargo test -p rocefab-tests --test job_shared_hosts -- --test-threads=1`
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use rocefab_tests::fabric::{pids_with_cmdline, rocefab_bin, run_dir, run_json, stderr, stdout, Fabric};
use rocefab_tests::proc::Proc;
use serde_json::Value;

const FABRIC: &str = "hsh";
const METRICS_BASE: u16 = 9850;

/// The pid of the shared `rocefab-hostd --hosts` of job `kind` once it runs (by `until`).
fn shared_hostd(kind: &str, until: Instant) -> u32 {
    let hosts = format!("{}/jobs/{kind}/hosts.json", run_dir(FABRIC).display());
    loop {
        let pids = pids_with_cmdline(&format!("--hosts {hosts}"));
        if let [pid] = pids[..] {
            return pid;
        }
        assert!(pids.len() <= 1, "one shared hostd: {pids:?}");
        assert!(Instant::now() < until, "no `rocefab-hostd --hosts {hosts}` started");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn log(kind: &str, name: &str) -> String {
    let p = run_dir(FABRIC).join("jobs").join(kind).join(name);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// `GET /metrics` of the host on `port`, if it answers.
fn host_metrics(port: u16) -> Option<String> {
    rocefab_tests::http::get(([127, 0, 0, 1], port).into(), "/metrics").ok()
}

#[test]
fn every_host_in_one_hostd_runs_verifies_and_keeps_its_own_log_and_metrics() {
    let f = Fabric::up("rail-spine.yaml", FABRIC);
    let jobs = format!("{}/jobs/", run_dir(FABRIC).display());
    let started = Instant::now();
    let mut run = Proc::drained(
        "rocefab run allreduce",
        Command::new(rocefab_bin())
            .args(["run", FABRIC, "allreduce", "--size", "16MiB", "--json", "--host-workers", "2", "--timeout", "300"])
            .args(["--metrics-port-base", &METRICS_BASE.to_string()])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped()),
    );
    let pid = shared_hostd("allreduce", started + Duration::from_secs(60));
    // Every host's metrics answer on its own port while the job runs, from the one process.
    let mut seen = [false; 4];
    while !seen.iter().all(|s| *s) {
        assert!(started.elapsed() < Duration::from_secs(120), "metrics seen on {seen:?} only");
        for (h, s) in seen.iter_mut().enumerate() {
            if !*s {
                *s = host_metrics(METRICS_BASE + h as u16)
                    .is_some_and(|m| m.lines().any(|l| l.starts_with("rocefab_host_qp_placed_bytes_total{")));
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(pids_with_cmdline(&jobs), [pid], "the shared hostd is the job's only process");
    let o = run.output();
    let (out, err) = (stdout(&o), stderr(&o));
    assert!(o.status.success(), "{out}\n{err}");
    let r: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("JSON report: {e}\n{out}\n{err}"));
    assert_eq!(
        (r["ok"].as_bool(), r["verified_ranks"].as_u64(), r["hosts_reported"].as_u64()),
        (Some(true), Some(8), Some(4))
    );
    let process = log("allreduce", "hosts.log");
    assert!(process.contains("every host set up"), "{process}");
    assert!(process.contains("every host's XDP program detached and sockets closed"), "{process}");
    assert!(!process.contains("report verified"), "no host's line in the process's log: {process}");
    for h in 1..=4 {
        let l = log("allreduce", &format!("host{h}.log"));
        assert_eq!(l.matches("QPs and buffers set up").count(), 1, "host{h}.log: {l}");
        assert_eq!(l.matches("report verified").count(), 1, "its own report only: host{h}.log: {l}");
    }
    assert!(pids_with_cmdline(&jobs).is_empty(), "hostd left: {:?}", pids_with_cmdline(&jobs));
    for h in 1..=4 {
        let o = f.exec(&format!("host{h}"), &["ip", "-d", "link", "show", "gpu0"]);
        assert!(!stdout(&o).contains("prog/xdp"), "host{h}'s gpu0 keeps an XDP program: {}", stdout(&o));
    }
    drop(f);
}

/// Time dilation of the fabric whose jobs must outlast a deadline or a kill: 7 x 8 MiB into
/// one 1 Gbit/s NIC take 470 ms emulated, 23 s of wall clock.
const SLOW: &str = "time_dilation: 50\n";

#[test]
fn the_shared_hostd_reports_every_hosts_stalls_at_the_deadline() {
    let f = Fabric::up_with("rail-spine.yaml", FABRIC, SLOW);
    let started = Instant::now();
    let o = Command::new(rocefab_bin())
        .args(["run", FABRIC, "incast", "--size", "8MiB", "--json", "--host-workers", "1", "--timeout", "8"])
        .output()
        .unwrap();
    let took = started.elapsed();
    let (out, err) = (stdout(&o), stderr(&o));
    assert!(!o.status.success(), "{out}\n{err}");
    // The deadline, then the report grace (3 s): every host answered well within it.
    assert!(took < Duration::from_secs(8 + 3 + 2), "took {took:?}: {err}");
    assert!(err.contains("incast timed out after 8 s (--timeout)"), "{err}");
    let r: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("JSON report: {e}\n{out}\n{err}"));
    assert_eq!((r["timed_out"].as_bool(), r["hosts_reported"].as_u64()), (Some(true), Some(4)), "{r:#}");
    let stalls = r["stalls"].as_array().unwrap();
    let mut hosts: Vec<&str> =
        stalls.iter().filter(|s| s["role"] == "requester").filter_map(|s| s["host"].as_str()).collect();
    hosts.sort();
    hosts.dedup();
    // Rank 0 (host1:gpu0) is the destination; ranks 1..7 (host1:gpu1, host2..host4) write to it,
    // and every host's report says what its writers waited for.
    assert_eq!(hosts, ["host1", "host2", "host3", "host4"], "{stalls:#?}");
    drop(f);
}

#[test]
fn killing_the_shared_hostd_fails_the_job_naming_its_hosts() {
    let f = Fabric::up_with("rail-spine.yaml", FABRIC, SLOW);
    let jobs = format!("{}/jobs/", run_dir(FABRIC).display());
    let started = Instant::now();
    let mut run = Proc::drained(
        "rocefab run incast",
        Command::new(rocefab_bin())
            .args(["run", FABRIC, "incast", "--size", "8MiB", "--json", "--host-workers", "1", "--timeout", "120"])
            .args(["--metrics-port-base", &METRICS_BASE.to_string()])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped()),
    );
    let pid = shared_hostd("incast", started + Duration::from_secs(60));
    // Killed once data flows (host1, the destination, has placed some).
    loop {
        assert!(started.elapsed() < Duration::from_secs(60), "no data placed on host1");
        let placed = host_metrics(METRICS_BASE).is_some_and(|m| {
            m.lines().any(|l| l.starts_with("rocefab_host_qp_placed_bytes_total{") && !l.ends_with(" 0"))
        });
        if placed {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let killed = Instant::now();
    // SAFETY: kill(2) with SIGKILL on the hostd this test's run started.
    assert_eq!(unsafe { libc::kill(pid as i32, libc::SIGKILL) }, 0);
    let o = run.output();
    let after = killed.elapsed();
    let (out, err) = (stdout(&o), stderr(&o));
    assert!(!o.status.success(), "{out}\n{err}");
    assert!(after < Duration::from_secs(10), "the run went on {after:?} after the kill: {err}");
    let r: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("JSON report: {e}\n{out}\n{err}"));
    let errors: Vec<&str> = r["errors"].as_array().unwrap().iter().filter_map(Value::as_str).collect();
    for h in 1..=4 {
        let want = format!("host{h}: rocefab-hostd (shared by 4 hosts, pid {pid}) was killed by signal 9 (SIGKILL)");
        assert!(errors.iter().any(|e| e.starts_with(&want)), "{want}: {errors:#?}");
    }
    assert!(pids_with_cmdline(&jobs).is_empty(), "hostd left: {:?}", pids_with_cmdline(&jobs));
    // The fabric still works, with the shared process again.
    run_json(&[FABRIC, "allreduce", "--size", "1MiB", "--host-workers", "1", "--timeout", "120"], 8);
    drop(f);
}
