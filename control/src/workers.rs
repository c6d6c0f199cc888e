//! How a fabric's switches (`rocefab up --switch-workers`) and a job's hosts (`rocefab run
//! --host-workers`, `rocefab train --host-workers`) are laid out over processes and threads.

/// A layout: data-plane worker threads in one shared process, or a process per unit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Workers {
    /// One worker per two cores, at least one.
    Auto,
    /// A process per unit (`per-switch`, `per-host`).
    Separate,
    /// Every unit in one process with this many worker threads.
    Shared(u16),
}

impl Workers {
    /// Parses `auto`, `N` (1 to 65535) or `separate` (the word for a process per unit).
    pub fn parse(s: &str, separate: &str) -> Result<Self, String> {
        match s {
            "auto" => Ok(Self::Auto),
            s if s == separate => Ok(Self::Separate),
            n => match n.parse::<u16>() {
                Ok(0) | Err(_) => Err(format!("{n:?} is not a worker count (1 to 65535), `{separate}` or `auto`")),
                Ok(n) => Ok(Self::Shared(n)),
            },
        }
    }

    /// The hosts' layout for a job of `hosts`, the busiest with `qps` QPs, on a machine of
    /// `cores` (`None`: a process per host). `auto` shares one process with a thread per core
    /// once there are more than [`HOSTS_PER_CORE_SHARED`] hosts per core, unless a host has more
    /// than [`QPS_PER_HOST_SHARED`] QPs; otherwise each host gets its own process.
    pub fn resolve_hosts(self, cores: usize, hosts: usize, qps: usize) -> Option<u16> {
        match self {
            Self::Auto if hosts > HOSTS_PER_CORE_SHARED * cores.max(1) && qps <= QPS_PER_HOST_SHARED => {
                Some(cores.clamp(1, u16::MAX as usize) as u16)
            }
            Self::Auto => None,
            other => other.resolve(cores),
        }
    }

    /// The worker count on a machine of `cores` (`None`: a process per unit).
    pub fn resolve(self, cores: usize) -> Option<u16> {
        match self {
            Self::Auto => Some((cores / 2).clamp(1, u16::MAX as usize) as u16),
            Self::Separate => None,
            Self::Shared(n) => Some(n),
        }
    }
}

/// Above this many hosts per core, `--host-workers auto` runs every host in one process. Measured
/// on the 2-core machine (docs/src/scale.md, "The hosts in one process"): the pod (8 hosts, 4 a
/// core) ran its 16 MiB AllReduce in 11.1-11.2 s with a process per host and 11.5-13.0 s shared
/// over two threads; the 512-GPU fabric (64 hosts, 32 a core) ran its 1 MiB AllReduce to a JCT
/// of 293-331 ms emulated in 38-45 s per host and 211-262 ms in 30-41 s shared.
pub const HOSTS_PER_CORE_SHARED: usize = 4;

/// Above this many QPs on a host, `--host-workers auto` keeps a process per host: a NIC engine's
/// pass looks at each of its QPs (DCQCN timers, senders, snapshots), so a shared thread's round
/// costs the sum over its hosts, while processes of their own get the CPU the scheduler gives
/// each. Measured on the 512-GPU fabric (docs/src/scale.md): the 1 MiB AllReduce (16 QPs a host)
/// faster shared, the 64 KiB all-to-all (4,088 QPs a host) 55.8 s per host against 87.8-90.3 s
/// shared over two threads.
pub const QPS_PER_HOST_SHARED: usize = 256;

/// `--switch-workers`: `auto`, `N` or `per-switch`.
pub fn switch_workers(s: &str) -> Result<Workers, String> {
    Workers::parse(s, "per-switch")
}

/// `--host-workers`: `auto`, `N` or `per-host`.
pub fn host_workers(s: &str) -> Result<Workers, String> {
    Workers::parse(s, "per-host")
}

/// The cores this process may run on (1 if the kernel does not say).
pub fn available_cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layouts_parse_and_resolve() {
        assert_eq!(host_workers("per-host"), Ok(Workers::Separate));
        assert!(host_workers("per-switch").unwrap_err().contains("`per-host` or `auto`"));
        assert_eq!(switch_workers("3"), Ok(Workers::Shared(3)));
        assert_eq!(Workers::Auto.resolve(1), Some(1));
        assert_eq!(Workers::Auto.resolve(2), Some(1));
        assert_eq!(Workers::Auto.resolve(5), Some(2));
        assert_eq!(Workers::Separate.resolve(8), None);
        // Hosts: a process each up to four a core, then one process with a thread per core...
        assert_eq!(Workers::Auto.resolve_hosts(2, 8, 16), None);
        assert_eq!(Workers::Auto.resolve_hosts(2, 9, 16), Some(2));
        assert_eq!(Workers::Auto.resolve_hosts(2, 64, 256), Some(2));
        assert_eq!(Workers::Auto.resolve_hosts(1, 5, 16), Some(1));
        // ... unless a host has many QPs (an all-to-all's 4,088 on the 512-GPU fabric).
        assert_eq!(Workers::Auto.resolve_hosts(2, 64, 257), None);
        assert_eq!(Workers::Shared(1).resolve_hosts(2, 4, 4088), Some(1));
        assert_eq!(Workers::Separate.resolve_hosts(2, 64, 16), None);
    }
}
