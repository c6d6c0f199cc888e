//! What a fabric's daemons will hold, before anything is created: `rocefab plan` prints it per
//! switch and per host, and `rocefab up` refuses a fabric that does not fit the machine's
//! available memory. The per-daemon figures are the functions the daemons size themselves with
//! ([`rocefab_contracts::memory::switch_memory`] in `rocefab-switchd`,
//! [`rocefab_contracts::memory::nic_memory`] in `rocefab-hostd`).
use std::fmt::Write as _;

use rocefab_contracts::memory::{
    human_bytes, nic_memory, switch_memory, NicMemory, SwitchMemory, HOSTD_BASE_BYTES, NIC_AGENT_BASE_BYTES,
    SWITCH_BPF_MAP_BYTES,
};
use rocefab_contracts::time::Dilation;

use crate::plan::Plan;

/// The memory of every daemon of a fabric.
#[derive(Debug, Clone)]
pub struct FabricMemory {
    /// Per switch daemon, in plan order.
    pub switches: Vec<(String, SwitchMemory)>,
    /// Per host: the UMEM of each of its NICs while a job runs (`rocefab-hostd`).
    pub hosts: Vec<(String, Vec<NicMemory>)>,
    /// NIC agents (`rocefab-nicd`) started by `up`: one per host when LLDP runs on the NICs.
    pub nic_agents: usize,
    /// Switches that run FRR (`routing: bgp`: every one).
    pub frr_switches: usize,
    /// veth ends `up` creates: both ends of every link, and each host's frontend pair.
    pub veth_ends: usize,
}

/// What the kernel holds per veth end `up` creates, its namespace's share included (slab):
/// measured on pod-64gpu (Linux 6.18, docs/src/memory.md), 16.2 MiB of slab for 15 namespaces
/// and 160 veth ends.
pub const VETH_END_KERNEL_BYTES: u64 = 104 << 10;

/// What one switch's FRR (zebra, bgpd and bfdd) holds, proportional set size: measured on the
/// 512-GPU fabric with `routing: bgp` (`cargo xtask bench --scale --scale-bgp`, docs/src/scale.md).
pub const FRR_BYTES_PER_SWITCH: u64 = 32 << 20;

impl FabricMemory {
    /// Of the fabric `plan` at time dilation `d`; `nic_agents`: `up` starts a NIC agent per host;
    /// `frr`: every switch runs FRR (`routing: bgp`).
    pub fn of(plan: &Plan, d: Dilation, nic_agents: bool, frr: bool) -> FabricMemory {
        let switches = plan.switches.iter().map(|s| (s.name.clone(), switch_memory(&s.config, plan.mtu))).collect();
        let hosts = plan
            .hosts
            .iter()
            .map(|h| {
                let nics = h
                    .nics
                    .iter()
                    .map(|n| {
                        let rate = plan
                            .links
                            .iter()
                            .find(|l| [&l.a, &l.b].iter().any(|e| e.node == h.name && e.ifname == n.ifname))
                            .map_or(0, |l| l.line_rate_bps);
                        nic_memory(d.rate(rate), plan.mtu)
                    })
                    .collect();
                (h.name.clone(), nics)
            })
            .collect();
        FabricMemory {
            switches,
            hosts,
            nic_agents: if nic_agents { plan.hosts.len() } else { 0 },
            frr_switches: if frr { plan.switches.len() } else { 0 },
            veth_ends: 2 * plan.links.len() + 2 * plan.hosts.len(),
        }
    }

    /// What the kernel holds at up, beside the daemons: every switch port's AF_XDP buffer pool
    /// (over its switch's whole UMEM), the switches' BPF maps, the veths and namespaces.
    pub fn kernel_up_bytes(&self) -> u64 {
        self.xsk_pool_bytes() + self.switches.len() as u64 * SWITCH_BPF_MAP_BYTES + self.veth_bytes()
    }

    /// The switch ports' AF_XDP buffer pools ([`SwitchMemory::xsk_pool_bytes`]).
    pub fn xsk_pool_bytes(&self) -> u64 {
        self.switches.iter().map(|(_, m)| m.xsk_pool_bytes()).sum()
    }

    /// The veths and their namespaces ([`VETH_END_KERNEL_BYTES`]).
    pub fn veth_bytes(&self) -> u64 {
        self.veth_ends as u64 * VETH_END_KERNEL_BYTES
    }

    /// Pinned UMEM of every switch daemon.
    pub fn switch_umem_bytes(&self) -> u64 {
        self.switches.iter().map(|(_, m)| m.umem_bytes()).sum()
    }

    /// Everything the switch daemons hold ([`SwitchMemory::total_bytes`]).
    pub fn switch_bytes(&self) -> u64 {
        self.switches.iter().map(|(_, m)| m.total_bytes()).sum()
    }

    /// What the machine loses at `up`: the switch daemons, the NIC agents and FRR, and what the
    /// kernel holds for them ([`FabricMemory::kernel_up_bytes`]).
    pub fn up_bytes(&self) -> u64 {
        self.switch_bytes() + self.nic_agents as u64 * NIC_AGENT_BASE_BYTES + self.frr_bytes() + self.kernel_up_bytes()
    }

    /// FRR's daemons on every switch that runs it.
    pub fn frr_bytes(&self) -> u64 {
        self.frr_switches as u64 * FRR_BYTES_PER_SWITCH
    }

    /// What a job adds: one `rocefab-hostd` per host with its NICs' UMEMs and the kernel's
    /// buffer pool of each (the job's staging buffers, which depend on its size, not counted).
    pub fn job_bytes(&self) -> u64 {
        let nic = |n: &NicMemory| n.umem_bytes() + n.xsk_pool_bytes();
        self.hosts.iter().map(|(_, n)| HOSTD_BASE_BYTES + n.iter().map(nic).sum::<u64>()).sum()
    }

    /// What the fabric needs to come up and run a job.
    pub fn need_bytes(&self) -> u64 {
        self.up_bytes() + self.job_bytes()
    }
}

/// The `memory` line of one switch in `rocefab plan`.
pub fn describe_switch(m: &SwitchMemory) -> String {
    let chunks = if m.multi_buffer { " (multi-buffer)" } else { "" };
    format!(
        "memory {} pinned: {} UMEM chunks of {} B{chunks} = rings {} RX / {} TX x {} ports {} + buffer {} + headroom {} + own {} + delay lines {}; queues {}; {} with the daemon",
        human_bytes(m.umem_bytes()),
        m.umem_chunks,
        m.chunk_bytes,
        m.rx_ring,
        m.tx_ring,
        m.ports,
        m.ring_chunks,
        m.buffer.shared,
        m.buffer.headroom,
        m.own_chunks,
        m.delay_chunks,
        human_bytes(m.heap_bytes()),
        human_bytes(m.total_bytes()),
    )
}

/// The memory summary of `rocefab plan`: per host during a job, and the fabric's totals.
pub fn describe_fabric(f: &FabricMemory) -> String {
    let mut o = String::new();
    let mut hosts: Vec<(String, u64, NicMemory, usize)> = Vec::new();
    for (h, nics) in &f.hosts {
        let Some(first) = nics.first() else { continue };
        let umem: u64 = nics.iter().map(NicMemory::umem_bytes).sum();
        hosts.push((h.clone(), umem, *first, nics.len()));
    }
    if let Some((_, umem, n, count)) = hosts.first() {
        let same = hosts.iter().all(|h| h.1 == *umem);
        let per = if same { "every host".to_string() } else { format!("{} (others differ)", hosts[0].0) };
        let _ = writeln!(
            o,
            "memory per host during a job (rocefab-hostd, {per}): {count} NIC UMEMs of {} ({} chunks of {} B, rings {} RX / {} TX) = {} pinned, {} with the process (staging buffers not counted)",
            human_bytes(n.umem_bytes()),
            n.umem_chunks(),
            n.chunk_bytes,
            n.rx_ring,
            n.tx_ring,
            human_bytes(*umem),
            human_bytes(umem + HOSTD_BASE_BYTES),
        );
    }
    let agents = if f.nic_agents > 0 {
        format!(" + {} NIC agents {}", f.nic_agents, human_bytes(f.nic_agents as u64 * NIC_AGENT_BASE_BYTES))
    } else {
        String::new()
    };
    let frr = if f.frr_switches > 0 {
        format!(" + FRR on {} switches {}", f.frr_switches, human_bytes(f.frr_bytes()))
    } else {
        String::new()
    };
    let _ = writeln!(
        o,
        "memory of the fabric: {} switch daemons {} ({} pinned UMEM){agents}{frr} + the kernel {} (AF_XDP buffer pools {}, BPF maps {}, {} veth ends {}) = {} at up; a job adds {}: {} in all (what MemAvailable loses)",
        f.switches.len(),
        human_bytes(f.switch_bytes()),
        human_bytes(f.switch_umem_bytes()),
        human_bytes(f.kernel_up_bytes()),
        human_bytes(f.xsk_pool_bytes()),
        human_bytes(f.switches.len() as u64 * SWITCH_BPF_MAP_BYTES),
        f.veth_ends,
        human_bytes(f.veth_bytes()),
        human_bytes(f.up_bytes()),
        human_bytes(f.job_bytes()),
        human_bytes(f.need_bytes()),
    );
    o
}

/// What the machine has for a new fabric.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Available {
    /// `MemAvailable` of `/proc/meminfo`, bytes.
    pub mem_available: u64,
    /// `RLIMIT_MEMLOCK` (soft), bytes, when it applies: without `CAP_IPC_LOCK` the kernel
    /// charges every UMEM against it. `None`: unlimited, or the caller may lock any amount.
    pub memlock: Option<u64>,
}

/// Checks that `need` bytes in all, of which `pinned` locked by the largest daemon, fit what is
/// `available`: `Err` is the one line `up` prints.
pub fn check_fits(fabric: &str, need: u64, pinned_per_daemon: u64, available: Available) -> Result<(), String> {
    if need > available.mem_available {
        return Err(format!(
            "fabric {fabric} needs {} of memory ({need} bytes: its daemons' UMEMs, rings, queues and processes and the kernel's AF_XDP buffer pools, `rocefab plan` itemises them) but only {} is available (MemAvailable in /proc/meminfo); shrink qos.buffer, raise time_dilation or use fewer switches",
            human_bytes(need),
            human_bytes(available.mem_available),
        ));
    }
    if let Some(limit) = available.memlock {
        if pinned_per_daemon > limit {
            return Err(format!(
                "fabric {fabric}: a switch daemon pins {} of UMEM but RLIMIT_MEMLOCK is {} and the daemons lack CAP_IPC_LOCK; raise it (ulimit -l) or run as root",
                human_bytes(pinned_per_daemon),
                human_bytes(limit),
            ));
        }
    }
    Ok(())
}

/// What one QP end costs a `rocefab-hostd` beyond its NICs' UMEMs and its data buffers
/// ([`gpu_host::nic::engine::data_bytes`]): its sender, receiver, DCQCN and index state, its
/// job spec, report snapshots and metric row. Measured: pod-64gpu's 64 KiB all-to-all (8 hosts,
/// 8,064 QP ends) took the 8 job processes from 384 MiB (themselves and their UMEMs) to a
/// 450 MiB peak, of which 16 MiB data: 6.6 KB an end.
pub const QP_END_BYTES: u64 = 8 << 10;

/// The memory a collective's job processes need: per host `rocefab-hostd` itself, its NICs'
/// UMEMs (`nic_umem_bytes` each), the data its engine allocates at path MTU `path_mtu` bytes
/// (send buffers, responder regions, rank buffers: [`gpu_host::nic::engine::data_bytes`]) and
/// [`QP_END_BYTES`] per QP end.
pub fn job_need(jobs: &[rocefab_contracts::job::Job], nic_umem_bytes: u64, path_mtu: u32) -> u64 {
    jobs.iter()
        .map(|j| {
            HOSTD_BASE_BYTES
                + j.nics.len() as u64 * nic_umem_bytes
                + gpu_host::nic::engine::data_bytes(j, path_mtu)
                + j.qps.len() as u64 * QP_END_BYTES
        })
        .sum()
}

/// `Err(one line)` when a job that needs `need` bytes does not fit `available` bytes.
pub fn check_job_fits(what: &str, qp_ends: usize, need: u64, available: u64) -> Result<(), String> {
    if need <= available {
        return Ok(());
    }
    Err(format!(
        "{what} needs about {} for its job processes ({qp_ends} QP ends at {} each, their buffers, NIC UMEMs) but only {} is available (MemAvailable in /proc/meminfo); use a smaller collective or fewer ranks",
        human_bytes(need),
        human_bytes(QP_END_BYTES),
        human_bytes(available)
    ))
}

/// `MemAvailable` of a `/proc/meminfo` text, bytes.
pub fn parse_mem_available(meminfo: &str) -> Option<u64> {
    let line = meminfo.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let mut f = line.split_whitespace().skip(1);
    let v: u64 = f.next()?.parse().ok()?;
    match f.next() {
        Some("kB") => Some(v * 1024),
        None => Some(v),
        Some(_) => None,
    }
}

/// Whether a `/proc/self/status` text's effective capabilities hold `CAP_IPC_LOCK` (bit 14).
pub fn has_ipc_lock(status: &str) -> bool {
    status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
        .is_some_and(|caps| caps & (1 << 14) != 0)
}

/// What this machine has now: `/proc/meminfo`, and `RLIMIT_MEMLOCK` unless this process (whose
/// credentials the daemons inherit) has `CAP_IPC_LOCK`.
pub fn available() -> anyhow::Result<Available> {
    use anyhow::Context as _;
    let meminfo = std::fs::read_to_string("/proc/meminfo").context("reading /proc/meminfo")?;
    let mem_available =
        parse_mem_available(&meminfo).context("/proc/meminfo has no MemAvailable line (Linux >= 3.14 has one)")?;
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let memlock = if has_ipc_lock(&status) {
        None
    } else {
        let mut r = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
        // SAFETY: `r` is a live, writable rlimit; getrlimit only writes it.
        if unsafe { libc::getrlimit(libc::RLIMIT_MEMLOCK, &mut r) } != 0 {
            return Err(std::io::Error::last_os_error()).context("reading RLIMIT_MEMLOCK");
        }
        (r.rlim_cur != libc::RLIM_INFINITY).then_some(r.rlim_cur)
    };
    Ok(Available { mem_available, memlock })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_job_that_does_not_fit_is_refused_in_one_line() {
        assert_eq!(check_job_fits("alltoall", 10, 1 << 30, 2 << 30), Ok(()));
        let e = check_job_fits("alltoall on mp512", 523_264, 13 << 30, 9 << 30).unwrap_err();
        assert!(
            e.starts_with("alltoall on mp512 needs about 13.00 GiB for its job processes (523264 QP ends at 8"),
            "{e}"
        );
        assert!(e.contains("only 9.00 GiB is available") && !e.contains('\n'), "{e}");
    }

    #[test]
    fn mem_available_is_read_in_bytes() {
        let t = "MemTotal:       24684544 kB\nMemFree:        21331968 kB\nMemAvailable:   24147012 kB\n";
        assert_eq!(parse_mem_available(t), Some(24_147_012 * 1024));
        assert_eq!(parse_mem_available("MemTotal: 1 kB\n"), None);
    }

    #[test]
    fn ipc_lock_is_bit_14_of_the_effective_set() {
        assert!(has_ipc_lock("Name:\tx\nCapEff:\t000001ffffffffff\n"));
        assert!(!has_ipc_lock("CapEff:\t0000000000000000\n"));
        assert!(has_ipc_lock("CapEff:\t0000000000004000\n"));
        assert!(!has_ipc_lock(""));
    }

    #[test]
    fn a_fabric_that_does_not_fit_is_refused_in_one_line() {
        let avail = Available { mem_available: 4 << 30, memlock: None };
        assert_eq!(check_fits("pod", 3 << 30, 200 << 20, avail), Ok(()));
        let e = check_fits("big", 22 << 30, 600 << 20, avail).unwrap_err();
        assert!(!e.contains('\n'), "{e}");
        assert!(e.starts_with("fabric big needs 22.00 GiB of memory"), "{e}");
        assert!(e.contains("only 4.00 GiB is available (MemAvailable in /proc/meminfo)"), "{e}");
        let locked = Available { mem_available: 64 << 30, memlock: Some(8 << 20) };
        let e = check_fits("pod", 3 << 30, 200 << 20, locked).unwrap_err();
        assert!(e.contains("RLIMIT_MEMLOCK is 8.0 MiB"), "{e}");
        assert_eq!(check_fits("pod", 3 << 30, 4 << 20, locked), Ok(()));
    }
}
