//! Process plumbing shared by the subcommands: entering a network namespace, a stop flag set by
//! SIGINT/SIGTERM, duration parsing and interface counters.
use std::io;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::Context;

/// Enters the named network namespace (`/run/netns/<name>`, as `ip netns add` creates it).
/// Call on the main thread before creating sockets or threads: setns changes only the caller.
pub fn enter_netns(name: &str) -> anyhow::Result<()> {
    let path = format!("/run/netns/{name}");
    let f = std::fs::File::open(&path).with_context(|| format!("opening network namespace {path}"))?;
    // SAFETY: `f` is an open namespace file descriptor; CLONE_NEWNET checks its type.
    let ret = unsafe { libc::setns(f.as_raw_fd(), libc::CLONE_NEWNET) };
    if ret != 0 {
        return Err(io::Error::last_os_error()).with_context(|| format!("setns into {name}"));
    }
    Ok(())
}

static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_sig: libc::c_int) {
    STOP.store(true, Ordering::Relaxed);
}

/// Installs SIGINT and SIGTERM handlers that set the stop flag.
pub fn install_stop_handler() -> anyhow::Result<()> {
    for sig in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: the handler only stores to an atomic, which is async-signal-safe.
        let prev = unsafe { libc::signal(sig, on_signal as *const () as libc::sighandler_t) };
        if prev == libc::SIG_ERR {
            return Err(io::Error::last_os_error()).context("installing a signal handler");
        }
    }
    Ok(())
}

/// True once SIGINT or SIGTERM arrived.
pub fn stop_requested() -> bool {
    STOP.load(Ordering::Relaxed)
}

/// Retries `f` for up to two seconds: binding an AF_XDP socket fails with EBUSY for a moment
/// after the previous socket on the same queue was closed (the kernel releases it after RCU).
pub fn retry_busy<T, E>(mut f: impl FnMut() -> Result<T, E>) -> Result<T, E> {
    let deadline = std::time::Instant::now() + Duration::from_secs(2);
    loop {
        match f() {
            Err(_) if std::time::Instant::now() < deadline => std::thread::sleep(Duration::from_millis(50)),
            r => return r,
        }
    }
}

/// Parses `5s`, `500ms`, `2m` or a bare number of seconds (`5`, `0.5`).
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    // The one duration parser (rocefab-units); a bare number is seconds, as on rocefab's options.
    let d = rocefab_units::parse_duration(s, rocefab_units::Bare::Seconds)?;
    if d.is_zero() {
        return Err(format!("{s:?}: a duration must be above 0"));
    }
    Ok(d)
}

/// Received-packet counter of `iface` from `/proc/self/net/dev`, which (unlike /sys after setns)
/// describes the namespace the process is in now.
pub fn rx_packets(iface: &str) -> anyhow::Result<u64> {
    let text = std::fs::read_to_string("/proc/self/net/dev").context("reading /proc/self/net/dev")?;
    parse_net_dev_rx_packets(&text, iface).with_context(|| format!("interface {iface:?} not in /proc/self/net/dev"))
}

/// Extracts the rx packets column for `iface` from `/proc/net/dev` text.
pub fn parse_net_dev_rx_packets(text: &str, iface: &str) -> Option<u64> {
    text.lines().skip(2).find_map(|l| {
        let (name, rest) = l.split_once(':')?;
        if name.trim() != iface {
            return None;
        }
        rest.split_whitespace().nth(1)?.parse().ok()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("5s").unwrap(), Duration::from_secs(5));
        assert_eq!(parse_duration("250ms").unwrap(), Duration::from_millis(250));
        assert_eq!(parse_duration("2m").unwrap(), Duration::from_secs(120));
        assert_eq!(parse_duration("1.5").unwrap(), Duration::from_millis(1500));
        assert!(parse_duration("0s").is_err());
        assert!(parse_duration("fast").is_err());
        assert!(parse_duration("-1s").is_err());
    }

    #[test]
    fn net_dev_parsing() {
        let text = "Inter-|   Receive                                                |  Transmit\n \
 face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed\n    \
lo:     100       2    0    0    0     0          0         0      100       2    0    0    0     0       0          0\n\
rfb-sink0: 6000000 100000    0    0    0     0          0         0        0       0    0    0    0     0       0          0\n";
        assert_eq!(parse_net_dev_rx_packets(text, "rfb-sink0"), Some(100_000));
        assert_eq!(parse_net_dev_rx_packets(text, "lo"), Some(2));
        assert_eq!(parse_net_dev_rx_packets(text, "rfb-sink"), None);
    }
}
