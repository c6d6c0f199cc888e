//! `cargo xtask setup --check` catches a toolchain that does not fit together, with one line
//! naming both versions and the fix, and installs nothing.
//!
//! The mismatched bpf-linker is a stand-in put first on PATH: a script that answers
//! `--version` like bpf-linker 0.13.0 and, not being an ELF, has no `libLLVM.so.N` for the check
//! to see, so the check reads the LLVM feature from the install record in `$CARGO_HOME`, which
//! the test writes with `llvm-21`. The pinned nightly (LLVM 22) is the real one.
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Output};

fn xtask_check(dir: &Path, toolchain_file: Option<&Path>, fake_linker_llvm: Option<u32>) -> Output {
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let mut path = std::env::var_os("PATH").unwrap_or_default();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_xtask"));
    cmd.args(["setup", "--check"]);
    if let Some(f) = toolchain_file {
        cmd.arg("--toolchain-file").arg(f);
    }
    if let Some(llvm) = fake_linker_llvm {
        let linker = bin.join("bpf-linker");
        std::fs::write(&linker, "#!/bin/sh\necho 'bpf-linker 0.13.0'\n").unwrap();
        std::fs::set_permissions(&linker, std::fs::Permissions::from_mode(0o755)).unwrap();
        let record = format!(
            r#"{{"installs":{{"bpf-linker 0.13.0 (registry+https://github.com/rust-lang/crates.io-index)":{{"features":["llvm-{llvm}"],"no_default_features":true}}}}}}"#
        );
        std::fs::write(dir.join(".crates2.json"), record).unwrap();
        let mut p = bin.into_os_string();
        p.push(":");
        p.push(&path);
        path = p;
        // rustup's proxies find their toolchains through RUSTUP_HOME, which stays.
        cmd.env("CARGO_HOME", dir);
    }
    cmd.env("PATH", path).output().expect("running xtask setup --check")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn mismatched_bpf_linker_is_one_line_with_both_versions_and_the_fix() {
    let dir = tempfile::tempdir().unwrap();
    let o = xtask_check(dir.path(), None, Some(21));
    let err = stderr(&o);
    assert!(!o.status.success(), "setup --check passed with a bpf-linker on LLVM 21:\n{err}");
    let line =
        err.lines().find(|l| l.contains("bpf-linker")).unwrap_or_else(|| panic!("no line about bpf-linker in:\n{err}"));
    for want in ["nightly-2026-05-19 has LLVM 22", "built against LLVM 21", "fix: cargo xtask setup"] {
        assert!(line.contains(want), "{want:?} not in {line:?}");
    }
    // --check installs nothing: the stand-in is still what PATH finds.
    assert_eq!(
        std::fs::read_to_string(dir.path().join("bin/bpf-linker")).unwrap(),
        "#!/bin/sh\necho 'bpf-linker 0.13.0'\n"
    );
}

#[test]
fn matching_bpf_linker_record_passes_the_linker_check() {
    let dir = tempfile::tempdir().unwrap();
    let o = xtask_check(dir.path(), None, Some(22));
    let err = stderr(&o);
    assert!(
        o.status.success(),
        "setup --check failed with a bpf-linker on LLVM 22 (run `cargo xtask setup` first):\n{err}"
    );
    assert!(err.contains("toolchain ok"), "{err}");
}

#[test]
fn floating_nightly_channel_is_rejected() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("rust-toolchain.toml");
    std::fs::write(&f, "[toolchain]\nchannel = \"nightly\"\ncomponents = [\"rust-src\"]\n").unwrap();
    let o = xtask_check(dir.path(), Some(&f), None);
    let err = stderr(&o);
    assert!(!o.status.success(), "setup --check accepted the floating nightly channel:\n{err}");
    assert!(
        err.lines()
            .any(|l| l.contains("channel \"nightly\" is not a dated nightly") && l.contains("nightly-2026-05-19")),
        "no clear line about the floating channel in:\n{err}"
    );
}

#[test]
fn the_repository_pins_a_dated_nightly() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let text = std::fs::read_to_string(root.join("dataplane-ebpf/rust-toolchain.toml")).unwrap();
    assert!(text.contains("channel = \"nightly-2026-05-19\""), "{text}");
}
