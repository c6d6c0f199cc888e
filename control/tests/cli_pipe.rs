//! Every `rocefab` command ends quietly on a closed output pipe (`rocefab plan ... | head`):
//! exit 0, nothing on stderr. The pipe's read end is closed before rocefab writes anything, so
//! the first write meets EPIPE deterministically.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use rocefab_test_support::tshark;

const BIN: &str = env!("CARGO_BIN_EXE_rocefab");

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

/// Runs rocefab with its stdout's reader already gone; returns (exit code, stderr).
fn with_closed_stdout(args: &[&str]) -> (Option<i32>, String) {
    let mut child =
        Command::new(BIN).args(args).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("spawn rocefab");
    drop(child.stdout.take());
    let mut err = String::new();
    child.stderr.take().unwrap().read_to_string(&mut err).unwrap();
    (child.wait().unwrap().code(), err)
}

#[test]
fn plan_into_a_closed_pipe_ends_quietly() {
    let topo = workspace().join("topologies/pod-64gpu.yaml");
    let (code, err) = with_closed_stdout(&["plan", topo.to_str().unwrap()]);
    assert_eq!((code, err.as_str()), (Some(0), ""), "rocefab plan into a closed pipe");
}

#[test]
fn pcap_show_and_frame_into_a_closed_pipe_end_quietly() {
    let dir = std::env::temp_dir().join(format!("rf-cli-pipe-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let pcap = dir.join("pfc.pcap");
    let o =
        Command::new(BIN).args(["frame", "pfc", "--priorities", "3", "-w", pcap.to_str().unwrap()]).output().unwrap();
    assert!(o.status.success(), "rocefab frame: {}", String::from_utf8_lossy(&o.stderr));
    let (code, err) = with_closed_stdout(&["pcap", "show", pcap.to_str().unwrap()]);
    assert_eq!((code, err.as_str()), (Some(0), ""), "rocefab pcap show into a closed pipe");
    let (code, err) = with_closed_stdout(&["pcap", "show", "--json", pcap.to_str().unwrap()]);
    assert_eq!((code, err.as_str()), (Some(0), ""), "rocefab pcap show --json into a closed pipe");
    // UET frames (xdp2's sample capture) take the same path.
    let uet = Path::new(env!("CARGO_MANIFEST_DIR")).join("../wire/tests/data/xdp2/uet_ses.pcap");
    let (code, err) = with_closed_stdout(&["pcap", "show", uet.to_str().unwrap()]);
    assert_eq!((code, err.as_str()), (Some(0), ""), "rocefab pcap show of UET frames into a closed pipe");
    // A frame written to stdout (`-w -`) meets the closed pipe in the pcap writer.
    let (code, err) = with_closed_stdout(&["frame", "pfc", "--priorities", "3", "-w", "-"]);
    assert_eq!((code, err.as_str()), (Some(0), ""), "rocefab frame -w - into a closed pipe");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn help_into_a_closed_pipe_ends_quietly() {
    let (code, err) = with_closed_stdout(&["--help"]);
    assert_eq!((code, err.as_str()), (Some(0), ""));
}

#[test]
fn an_error_still_fails_loudly() {
    // The quiet path is only for a closed pipe: a bad file is still an error with exit 1.
    let (code, err) = with_closed_stdout(&["plan", "/nonexistent/topology.yaml"]);
    assert_eq!(code, Some(1));
    assert!(err.starts_with("rocefab: ") && err.contains("/nonexistent/topology.yaml"), "{err}");
}

#[test]
fn frame_to_stdout_is_a_pcap_tshark_reads() {
    // `-w -` is standard output (not a file named "-"), readable by `tshark -r -`.
    let mut gen = Command::new(BIN)
        .args(["frame", "pfc", "--priorities", "3", "--count", "2", "-w", "-"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let rows = tshark::read_stdin(gen.stdout.take().unwrap()).first(&["macc.opcode", "macc.cbfc.enbv"]);
    assert!(gen.wait().unwrap().success());
    assert_eq!(rows, vec![vec!["0x0101", "0x0008"]; 2]);
    assert!(!Path::new("-").exists(), "no file named '-' was written");
}
