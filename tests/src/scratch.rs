//! Scratch space of the tests (captures, job files, daemons' state), from the `tempfile` crate:
//! removed on drop, also when a test panics, and unique per run, so tests never meet a
//! leftover of an earlier one.
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

pub use tempfile::TempDir;

/// A new directory `<temp>/<prefix><random>`, removed with its contents on drop. Mode 0755, as a
/// directory made with the default umask: tcpdump and lldpd drop privileges after start-up.
pub fn temp_dir(prefix: &str) -> TempDir {
    let d = tempfile::Builder::new().prefix(prefix).tempdir().unwrap_or_else(|e| panic!("temp dir {prefix}*: {e}"));
    std::fs::set_permissions(d.path(), std::fs::Permissions::from_mode(0o755))
        .unwrap_or_else(|e| panic!("chmod {}: {e}", d.path().display()));
    d
}

/// The path of `name` in `dir`, as a string (for command lines).
pub fn file(dir: &TempDir, name: &str) -> String {
    dir.path().join(name).display().to_string()
}

/// A file name in a [`temp_dir`] of its own (not created: a capture or a job file is written
/// there), removed with the directory on drop.
pub struct TempFile {
    path: PathBuf,
    _dir: TempDir,
}

impl TempFile {
    pub fn new(name: &str) -> TempFile {
        let dir = temp_dir("rf-h-");
        TempFile { path: dir.path().join(name), _dir: dir }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl std::ops::Deref for TempFile {
    type Target = Path;
    fn deref(&self) -> &Path {
        &self.path
    }
}

impl AsRef<Path> for TempFile {
    fn as_ref(&self) -> &Path {
        &self.path
    }
}
