//! `rocefab run --timeout` bounds every wait of the controller, whatever the hosts do. No
//! privileges: the fabric is a run directory as `rocefab up` writes it (rail-spine, no daemons)
//! and the GPU-host emulator is a shell script (`ROCEFAB_HOSTD`) that misbehaves on purpose:
//! never ready; ready but deaf to SIGUSR1 and SIGTERM and never reporting; answering the
//! timeout's SIGUSR1 with a report of what a QP was waiting for. Each case runs with a process
//! per host (`--host-workers per-host`) and with one process for all hosts (`--host-workers 1`:
//! the script then answers for every host, each line prefixed with the host's name and a tab,
//! as `rocefab-hostd --hosts` does).
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_rocefab");

/// A temporary directory (tempfile), removed on drop.
fn temp_dir(tag: &str) -> tempfile::TempDir {
    tempfile::Builder::new().prefix(&format!("rocefab-run-deadlines-{tag}-")).tempdir().unwrap()
}

/// Fabric `fr` (rail-spine.yaml: 4 hosts × 2 GPUs) in a run directory under `dir`, and a fake
/// hostd running `script`.
fn fake_fabric(dir: &tempfile::TempDir, script: &str) -> (PathBuf, PathBuf) {
    let run = dir.path().join("run");
    std::fs::create_dir_all(run.join("fr")).unwrap();
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../topologies/rail-spine.yaml");
    let topo = std::fs::read_to_string(src).unwrap().replace("fabric: rs", "fabric: fr");
    std::fs::write(dir.path().join("t.yaml"), topo).unwrap();
    let state = serde_json::json!({"fabric": "fr", "topology": dir.path().join("t.yaml"), "phase": "up",
                                   "namespaces": [], "links": [], "daemons": [],
                                   "clock": {"time_dilation": 1.0, "zero_unix_ns": 1_700_000_000_000_000_000u64}});
    std::fs::write(run.join("fr/state.json"), state.to_string()).unwrap();
    let hostd = dir.path().join("fake-hostd");
    std::fs::write(&hostd, format!("#!/bin/sh\n{script}\n")).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&hostd, std::fs::Permissions::from_mode(0o755)).unwrap();
    (run, hostd)
}

/// The two layouts of a job's hosts over processes.
const LAYOUTS: [&str; 2] = ["per-host", "1"];

/// Shell that prints `line` as the fake hostd must in `layout`: as it is for one host, once per
/// host prefixed with its name and a tab for all.
fn say(layout: &str, line: &str) -> String {
    if layout == "per-host" {
        format!("echo '{line}'")
    } else {
        format!("for h in host1 host2 host3 host4; do printf '%s\\t%s\\n' \"$h\" '{line}'; done")
    }
}

/// The error's name for host `h`'s process in `layout` (the shared one's pid is not known).
fn proc_of(layout: &str, h: u32) -> String {
    if layout == "per-host" {
        format!("host{h}: rocefab-hostd ")
    } else {
        format!("host{h}: rocefab-hostd (shared by 4 hosts, pid ")
    }
}

/// `rocefab run fr incast --size 1MiB --timeout 2 --host-workers LAYOUT [--json]`: its output
/// and how long it took.
fn run(run: &Path, hostd: &Path, json: bool, layout: &str) -> (Output, Duration) {
    let t = Instant::now();
    let mut c = Command::new(BIN);
    c.env("ROCEFAB_RUN_DIR", run).env("ROCEFAB_HOSTD", hostd).args([
        "run",
        "fr",
        "incast",
        "--size",
        "1MiB",
        "--timeout",
        "2",
        "--host-workers",
        layout,
    ]);
    if json {
        c.arg("--json");
    }
    let o = c.output().unwrap();
    (o, t.elapsed())
}

/// Processes whose command line names this run directory (the fake hostds get their job file).
fn left_over(run: &Path) -> Vec<String> {
    let needle = run.display().to_string();
    let mut v = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        if let Ok(c) = std::fs::read(e.path().join("cmdline")) {
            let c = String::from_utf8_lossy(&c).replace('\0', " ");
            if c.contains(&needle) {
                v.push(c);
            }
        }
    }
    v
}

#[test]
fn hosts_that_never_get_ready_end_the_run_at_its_timeout() {
    for layout in LAYOUTS {
        let dir = temp_dir("ready");
        let (rundir, hostd) = fake_fabric(&dir, "exec sleep 30");
        let (o, took) = run(&rundir, &hostd, false, layout);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success());
        assert!(took >= Duration::from_secs(2) && took < Duration::from_secs(4), "{layout}: took {took:?}: {err}");
        let first = format!("incast timed out after 2 s (--timeout) before the job started: {}", proc_of(layout, 1));
        assert!(err.contains(&first), "{layout}: {err}");
        for h in 1..=4 {
            let what = "gave no answer before it was ready (waited 2.";
            let at = err.find(&proc_of(layout, h)).unwrap_or_else(|| panic!("{layout} host{h}: {err}"));
            assert!(err[at..].contains(what), "{layout} host{h}: {err}");
        }
        assert!(left_over(&rundir).is_empty(), "{layout}: {:?}", left_over(&rundir));
    }
}

#[test]
fn hosts_deaf_to_the_timeout_are_named_killed_and_reaped() {
    for layout in LAYOUTS {
        deaf(layout);
    }
}

fn deaf(layout: &str) {
    let dir = temp_dir("deaf");
    let script = format!("trap '' TERM USR1\n{}\nexec sleep 30", say(layout, r#"{"ready":true}"#));
    let (rundir, hostd) = fake_fabric(&dir, &script);
    let (o, took) = run(&rundir, &hostd, true, layout);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success());
    // The timeout, then 3 s for the reports nobody sends, then SIGKILL.
    assert!(took >= Duration::from_secs(5) && took < Duration::from_secs(7), "took {took:?}: {err}");
    assert!(
        err.contains(
            "incast timed out after 2 s (--timeout): 0 QPs on 0 hosts had not finished (0 of 4 hosts reported)"
        ),
        "{err}"
    );
    let r: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!((r["ok"].as_bool(), r["timed_out"].as_bool(), r["hosts"].as_u64()), (Some(false), Some(true), Some(4)));
    let errors: Vec<&str> = r["errors"].as_array().unwrap().iter().filter_map(|e| e.as_str()).collect();
    for h in 1..=4 {
        let want = "gave no answer without a report, also 3 s after it was asked for one";
        assert!(
            errors.iter().any(|e| e.starts_with(&proc_of(layout, h)) && e.contains(want)),
            "{layout} host{h}: {want}: {errors:#?}"
        );
    }
    assert!(left_over(&rundir).is_empty(), "{:?}", left_over(&rundir));
}

#[test]
fn hosts_answer_the_timeout_with_what_their_qps_waited_for() {
    for layout in LAYOUTS {
        stall(layout);
    }
}

fn stall(layout: &str) {
    let report = r#"{"job":"j","time_dilation":1.0,"ok":false,"error":"timed out (the controller's deadline passed)","elapsed_ns":1900000000,"qps":[],"nics":[],"ranks":[],"stalls":[{"qpn":257,"peer_qpn":256,"nic":"gpu0","label":"rank 2 -> rank 0","role":"requester","last_acked_psn":77,"outstanding_psns":[78,205],"outstanding_packets":128,"timeouts":0,"retries_left":7,"paused_now":false,"last_progress_ns":400000000,"at_ns":1900000000,"waiting_for":"the ACK of PSN 78"}]}"#;
    let dir = temp_dir("stall");
    let path = dir.path().join("report.json");
    std::fs::write(&path, format!("{report}\n")).unwrap();
    let answer = if layout == "per-host" {
        format!("cat {}", path.display())
    } else {
        format!("for h in host1 host2 host3 host4; do printf \"%s\\t\" \"$h\"; cat {}; done", path.display())
    };
    let script =
        format!("trap '{answer}; exit 1' USR1\n{}\nwhile :; do sleep 0.05; done", say(layout, r#"{"ready":true}"#));
    let (rundir, hostd) = fake_fabric(&dir, &script);
    let (o, took) = run(&rundir, &hostd, false, layout);
    let (out, err) = (String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    assert!(!o.status.success());
    assert!(took >= Duration::from_secs(2) && took < Duration::from_secs(4), "took {took:?}: {err}");
    assert!(out.starts_with("TIMED OUT incast on fabric fr"), "{out}");
    for h in 1..=4 {
        let line = format!(
            "host{h}: QP 0x101 requester (rank 2 -> rank 0) on gpu0: the ACK of PSN 78; last acked PSN 77, outstanding PSNs 78..=205 (128), 0 unsent, 0 timeouts (7 retries left), not paused, last progress at 400.000 ms (1500.000 ms before the report)\n"
        );
        assert!(out.contains(&line), "{line}\n{out}");
    }
    assert!(err.contains("incast timed out after 2 s (--timeout): 4 QPs on 4 hosts had not finished (4 of 4 hosts reported); what each was waiting for is listed above"), "{err}");
    assert!(left_over(&rundir).is_empty(), "{:?}", left_over(&rundir));
}
