//! Network namespaces: entering one (setns(2) with `CLONE_NEWNET` on an `ip netns` bind mount
//! under `/run/netns`). setns affects only the calling thread: daemons call [`enter`] before
//! they spawn threads, the CLI on a thread of its own.
use std::os::fd::AsFd;
use std::path::PathBuf;

use nix::sched::{setns, CloneFlags};

/// Errors entering a network namespace.
#[derive(Debug, thiserror::Error)]
pub enum NetnsError {
    #[error("network namespace {name:?}: opening {path}: {source}")]
    Open { name: String, path: PathBuf, source: std::io::Error },
    #[error("network namespace {name:?}: setns(CLONE_NEWNET): {source}")]
    Setns { name: String, source: nix::Error },
}

/// Where `ip netns add NAME` keeps the namespace.
pub fn netns_path(name: &str) -> PathBuf {
    PathBuf::from("/run/netns").join(name)
}

/// Moves the calling thread into network namespace `name`. Call it before spawning threads so
/// every later thread (and socket, and XDP attach) lives there.
pub fn enter(name: &str) -> Result<(), NetnsError> {
    let path = netns_path(name);
    let f = std::fs::File::open(&path).map_err(|source| NetnsError::Open { name: name.into(), path, source })?;
    setns(f.as_fd(), CloneFlags::CLONE_NEWNET).map_err(|source| NetnsError::Setns { name: name.into(), source })
}
