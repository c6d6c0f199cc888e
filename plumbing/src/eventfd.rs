//! A non-blocking eventfd(2): the doorbell between a data-plane thread and its control side.
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

/// A non-blocking eventfd used as a doorbell.
#[derive(Debug)]
pub struct EventFd(OwnedFd);

impl EventFd {
    pub fn new() -> std::io::Result<EventFd> {
        // SAFETY: plain eventfd(2) call; the returned descriptor is checked and then owned.
        let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: `fd` is a fresh descriptor nothing else owns.
        Ok(EventFd(unsafe { OwnedFd::from_raw_fd(fd) }))
    }
    /// Rings the bell (async-signal-safe; a full counter is as good as a ring).
    pub fn ring(&self) {
        let one = 1u64.to_ne_bytes();
        // SAFETY: writing 8 bytes from a live stack buffer to an eventfd we own.
        let _ = unsafe { libc::write(self.0.as_raw_fd(), one.as_ptr().cast(), 8) };
    }
    /// Resets the counter; true if the bell had rung.
    pub fn drain(&self) -> bool {
        let mut buf = [0u8; 8];
        // SAFETY: reading at most 8 bytes into a live stack buffer from an eventfd we own.
        let r = unsafe { libc::read(self.0.as_raw_fd(), buf.as_mut_ptr().cast(), 8) };
        r == 8
    }
}

impl AsFd for EventFd {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.0.as_fd()
    }
}
