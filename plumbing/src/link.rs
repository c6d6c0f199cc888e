//! Link queries on the calling thread's network namespace (ioctls, not sysfs: /sys shows the
//! namespace it was mounted in, not the one the process entered).

/// An `ifreq` ioctl (`SIOCGIF*`) on interface `name` of the calling thread's network namespace
/// (sysfs would show the namespace /sys was mounted in, not the one the process entered).
fn ifreq_get(name: &str, request: libc::c_ulong) -> std::io::Result<libc::ifreq> {
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
    if name.len() >= libc::IFNAMSIZ {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("interface name {name:?} is too long"),
        ));
    }
    // SAFETY: plain socket(2) call; the descriptor is checked and then owned.
    let raw = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if raw < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: `raw` is a fresh descriptor nobody else owns.
    let fd = unsafe { OwnedFd::from_raw_fd(raw) };
    // SAFETY: ifreq is plain data; all-zero is valid.
    let mut ifr: libc::ifreq = unsafe { std::mem::zeroed() };
    for (d, s) in ifr.ifr_name.iter_mut().zip(name.bytes()) {
        *d = s as libc::c_char;
    }
    // SAFETY: the SIOCGIF* requests read ifr_name and write one member of the ifreq we pass.
    if unsafe { libc::ioctl(fd.as_raw_fd(), request as _, &mut ifr) } < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(ifr)
}

/// The MTU of interface `name` (`SIOCGIFMTU`).
pub fn link_mtu(name: &str) -> std::io::Result<u32> {
    let ifr = ifreq_get(name, libc::SIOCGIFMTU)?;
    // SAFETY: the kernel filled the mtu member of the union.
    Ok(unsafe { ifr.ifr_ifru.ifru_mtu } as u32)
}

/// Whether interface `name` is up with carrier (`IFF_UP` and `IFF_RUNNING`, `SIOCGIFFLAGS`);
/// `None` if it does not exist.
pub fn link_running(name: &str) -> Option<bool> {
    let ifr = ifreq_get(name, libc::SIOCGIFFLAGS).ok()?;
    // SAFETY: the kernel filled the flags member of the union.
    let flags = i32::from(unsafe { ifr.ifr_ifru.ifru_flags });
    Some(flags & libc::IFF_UP != 0 && flags & libc::IFF_RUNNING != 0)
}
