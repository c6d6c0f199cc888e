//! The hosts of a running fabric as a job sees them: GPUs, NIC classes (from each host's NIC
//! agent, or the topology), and the options and memory check of a job built on them.
use std::time::Duration;

use anyhow::{anyhow, bail};
use gpu_host::nic::agent::classes_from;
use gpu_host::nic::collective_job::{BuildOptions, HostDesc, HostNic};
use gpu_host::nic::engine::path_mtu_for_link;
use lldp_agent::NodeReport;
use rocefab_contracts::agent::AgentConfig;
use rocefab_contracts::job::{default_retransmit_timeout_for, window_packets_for, NicClasses, DEFAULT_WINDOW_PACKETS};
use rocefab_contracts::time::Dilation;

use crate::fabric::daemon_http::scrape;
use crate::fabric::rundir::State;
use crate::job::JobArgs;
use crate::plan::HostPlan;
use crate::topology::Topology;

/// What a job needs to know of the running fabric's hosts.
pub(crate) struct FabricHosts {
    /// In topology order (= torchrun node rank).
    pub hosts: Vec<HostDesc>,
    /// Each host's network namespace, in the same order.
    pub netns: Vec<String>,
    /// The fabric's link MTU.
    pub mtu: u32,
    /// The time dilation the fabric came up with.
    pub dilation: Dilation,
    pub dcqcn: rocefab_contracts::dcqcn::DcqcnProfile,
    pub dcqcn_np: rocefab_contracts::dcqcn::NpSettings,
    /// The first switch's DSCP → traffic class map (a UET NIC's data priority follows it).
    pub dscp_to_tc: Vec<u8>,
    /// The DSCP the switches remark trimmed packets with, when any queue trims.
    pub trim_dscp: Option<u8>,
}

/// The hosts of a running fabric. Prints a warning for every host whose NIC agent does not
/// answer.
pub(crate) fn hosts_of(fabric: &str) -> anyhow::Result<FabricHosts> {
    let f = crate::fabric::Fabric::open(Some(fabric))?;
    let (st, topo, plan) = (&f.st, &f.topo, f.plan());
    let configured = topo.lldp.nic.classes();
    let hosts = host_descs(topo, plan, |h| {
        let (classes, warning) = host_classes(st, h, configured);
        if let Some(w) = warning {
            eprintln!("{w}");
        }
        classes
    })?;
    let netns = plan.hosts.iter().map(|h| h.netns.clone()).collect();
    if hosts.is_empty() {
        bail!("fabric {fabric} has no hosts");
    }
    // The switches run at the dilation of `up`, whatever the topology file says now.
    Ok(FabricHosts {
        hosts,
        netns,
        mtu: plan.mtu,
        dilation: st.clock()?.dilation(),
        dcqcn: topo.dcqcn,
        dcqcn_np: topo.dcqcn_np,
        dscp_to_tc: plan.switches.first().map_or_else(|| vec![0; 64], |s| s.config.dscp_to_tc.clone()),
        trim_dscp: plan.switches.iter().map(|s| &s.config.qos.trim).find(|t| t.queues != 0).map(|t| t.dscp),
    })
}

/// The jobs' view of the plan's hosts, in topology order (= torchrun node rank): NICs with their
/// link rates and `classes(host)` (one per NIC), GPUs, NVLink, PXN, ports per NIC.
pub fn host_descs(
    topo: &Topology,
    plan: &crate::plan::Plan,
    mut classes: impl FnMut(&HostPlan) -> Vec<NicClasses>,
) -> anyhow::Result<Vec<HostDesc>> {
    let mut hosts = Vec::new();
    for h in &plan.hosts {
        let nics = h
            .nics
            .iter()
            .zip(classes(h))
            .map(|(n, classes)| {
                let rate = plan
                    .links
                    .iter()
                    .find(|l| {
                        (l.a.netns == h.netns && l.a.ifname == n.ifname)
                            || (l.b.netns == h.netns && l.b.ifname == n.ifname)
                    })
                    .map(|l| l.line_rate_bps)
                    .ok_or_else(|| anyhow!("{}:{}: no link in the plan", h.name, n.ifname))?;
                Ok(HostNic {
                    name: n.ifname.clone(),
                    mac: n.mac.to_string(),
                    ip: n.addr.into(),
                    gateway_mac: n.gateway_mac.to_string(),
                    line_rate_bps: rate,
                    classes,
                })
            })
            .collect::<anyhow::Result<Vec<_>>>()?;
        hosts.push(HostDesc {
            name: h.name.clone(),
            gpus: topo.gpus_per_host,
            nics,
            nvlink: topo.nvlink,
            pxn: topo.pxn,
            ports: topo.nic_model.ports(),
        });
    }
    Ok(hosts)
}

/// The classes of each NIC of `nics` (by name): negotiated ([`classes_from`]) when the agent
/// config has the NIC and the report has its port, else `configured`.
pub fn classes_for(
    nics: &[String],
    agent: &AgentConfig,
    report: &NodeReport,
    configured: NicClasses,
) -> Vec<NicClasses> {
    nics.iter()
        .map(|name| {
            let nic = agent.nics.iter().find(|n| &n.name == name);
            let port = report.ports.iter().find(|p| &p.port == name);
            match (nic, port) {
                (Some(n), Some(p)) => classes_from(n, p),
                _ => configured,
            }
        })
        .collect()
}

/// The classes of every NIC of host `h`, from its NIC agent if `up` started one; a warning when
/// the agent is recorded but gives no answer.
fn host_classes(st: &State, h: &HostPlan, configured: NicClasses) -> (Vec<NicClasses>, Option<String>) {
    let fallback = vec![configured; h.nics.len()];
    let Some(d) = st.daemons.iter().find(|d| d.is_host() && d.node() == h.name) else {
        return (fallback, None);
    };
    let url = d.url("/lldp");
    let got = std::fs::read_to_string(&d.config)
        .map_err(|e| format!("reading {}: {e}", d.config.display()))
        .and_then(|t| serde_json::from_str::<AgentConfig>(&t).map_err(|e| format!("{}: {e}", d.config.display())))
        .and_then(|agent| {
            let body = scrape(&url, Duration::from_secs(2)).map_err(|e| format!("{e:#}"))?;
            let report =
                serde_json::from_str::<NodeReport>(&body).map_err(|e| format!("{url}: not a neighbour table: {e}"))?;
            Ok((agent, report))
        });
    match got {
        Ok((agent, report)) => {
            let names: Vec<String> = h.nics.iter().map(|n| n.ifname.clone()).collect();
            (classes_for(&names, &agent, &report, configured), None)
        }
        Err(e) => {
            let c = configured;
            let w = format!(
                "warning: {}: NIC agent did not answer ({e}); using the configured classes (data dscp {} prio {}, cnp dscp {} prio {})",
                h.name, c.data_dscp, c.data_priority, c.cnp_dscp, c.cnp_priority
            );
            (fallback, Some(w))
        }
    }
}

/// One line naming the classes of a host's NICs, if any differs from the default 24/3/48/7.
pub fn classes_line(h: &HostDesc) -> Option<String> {
    if h.nics.iter().all(|n| n.classes == NicClasses::default()) {
        return None;
    }
    let nics: Vec<String> = h
        .nics
        .iter()
        .map(|n| {
            let c = &n.classes;
            format!(
                "{} data dscp {} prio {}, cnp dscp {} prio {}",
                n.name, c.data_dscp, c.data_priority, c.cnp_dscp, c.cnp_priority
            )
        })
        .collect();
    Some(format!("{}: classes {}", h.name, nics.join("; ")))
}

/// The default window in packets for a fabric whose links have `link_mtu`: 128 KiB of
/// payload at the path MTU the hosts will use ([`rocefab_contracts::job::DEFAULT_WINDOW_BYTES`]).
pub fn default_window_packets(link_mtu: u32, ipv6: bool) -> u32 {
    path_mtu_for_link(link_mtu, ipv6).map_or(DEFAULT_WINDOW_PACKETS, window_packets_for)
}

/// The build options of job `name` on the fabric `f` with `s`, a `timeout` (s) and DCQCN on or off.
pub(crate) fn build_options(name: &str, f: &FabricHosts, s: &JobArgs, timeout: u64, dcqcn_on: bool) -> BuildOptions {
    let ipv6 = f.hosts.iter().flat_map(|h| h.nics.iter()).any(|n| n.ip.is_ipv6());
    let window_packets = s.window_packets.unwrap_or_else(|| default_window_packets(f.mtu, ipv6));
    let path_mtu = path_mtu_for_link(f.mtu, ipv6).map_or(1024, |m| m.bytes() as u64);
    let slowest = f.hosts.iter().flat_map(|h| h.nics.iter()).map(|n| n.line_rate_bps).min().unwrap_or(1);
    BuildOptions {
        job_name: name.into(),
        timeout_ms: timeout.saturating_mul(1000),
        seed_base: s.seed,
        metrics_port_base: Some(s.metrics_port_base),
        window_packets,
        retransmit_timeout_ns: s.retransmit_timeout_ms.map_or_else(
            || default_retransmit_timeout_for(f.dilation, u64::from(window_packets) * path_mtu, slowest),
            |ms| ms.saturating_mul(1_000_000),
        ),
        time_dilation: f.dilation.factor(),
        segment: s.segment.mode(),
        dcqcn: f.dcqcn,
        dcqcn_np: f.dcqcn_np,
        dcqcn_on,
        uet: (s.transport == super::Transport::Uet).then_some(gpu_host::nic::collective_job::UetOptions {
            spray: s.uet_entropy == super::UetEntropy::Spray,
            trim_dscp: f.trim_dscp,
            dscp: s.uet_dscp,
            priority: f.dscp_to_tc.get(usize::from(s.uet_dscp)).copied().unwrap_or(0),
            ip_protocol: (s.uet_encap == super::UetEncap::Ip).then_some(rocefab_wire::uet::IP_PROTOCOL),
            ordered: s.uet_delivery == super::UetDelivery::Rod,
        }),
    }
}

/// Refuses a job whose processes would not fit the machine before starting any of them (an
/// all-to-all over 512 ranks has 523,264 QP ends: the OOM killer would pick for us).
pub(crate) fn check_memory(what: &str, f: &FabricHosts, jobs: &[rocefab_contracts::job::Job]) -> anyhow::Result<()> {
    let ipv6 = f.hosts.iter().flat_map(|h| h.nics.iter()).any(|n| n.ip.is_ipv6());
    // A NIC's UMEM depends on the MTU only (its rings are fixed: `nic_memory`).
    let nic_umem = rocefab_contracts::memory::nic_memory(0, f.mtu).umem_bytes();
    let path_mtu = gpu_host::nic::engine::path_mtu_for_link(f.mtu, ipv6).map_or(f.mtu, |m| m.bytes());
    let need = crate::memory::job_need(jobs, nic_umem, path_mtu);
    let qp_ends = jobs.iter().map(|j| j.qps.len()).sum();
    let available = crate::memory::available()?.mem_available;
    crate::memory::check_job_fits(what, qp_ends, need, available).map_err(anyhow::Error::msg)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_window_is_128_kib_of_payload_at_the_fabric_path_mtu() {
        assert_eq!(default_window_packets(1500, false), 128); // path MTU 1024
        assert_eq!(default_window_packets(3500, false), 64); // path MTU 2048
        assert_eq!(default_window_packets(2107, false), 128); // 2048 needs 2108 with IPv4
        assert_eq!(default_window_packets(2108, true), 128); // IPv6 headers: path MTU 1024
        assert_eq!(default_window_packets(600, false), 256); // path MTU 512
    }
}
