//! The fabric's GPUs (from the plan, in torchrun order) and the mapping of the capture's IP
//! endpoints onto them: the sending endpoint onto the `--from` GPU, `--map` as given, every other
//! endpoint onto the next free GPU.

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr};

use serde::Serialize;

use crate::plan::Plan;

/// Why the capture's endpoints cannot be mapped as the options say; each names the option.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MapError {
    /// `--from` or `--map` names a GPU the fabric does not have.
    #[error("{option}: no such GPU (have {have})")]
    NoSuchGpu {
        /// The option as given (`--from host9:gpu0`).
        option: String,
        /// Every GPU of the fabric, comma-separated.
        have: String,
    },
    #[error("--map {ip}={gpu}: {ip} is not an address of any RoCEv2 frame of the capture")]
    NotInCapture { ip: IpAddr, gpu: String },
    #[error("--map {ip}: given twice ({first} and {second})")]
    GivenTwice { ip: IpAddr, first: String, second: String },
    #[error("--map {ip}={gpu}: {ip} is the sending endpoint, which --from puts on {from}")]
    SenderElsewhere { ip: IpAddr, gpu: String, from: String },
    #[error("--map {ip}={gpu}: {gpu} is the --from GPU, which the sending endpoint {sender} takes")]
    FromGpuTaken { ip: IpAddr, gpu: String, sender: IpAddr },
    #[error("--map {ip}={gpu}: {other} is mapped to {gpu} too")]
    GpuTaken { ip: IpAddr, gpu: String, other: IpAddr },
}

/// A GPU NIC of the fabric, as the plan addresses it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Gpu {
    /// `host1:gpu0`.
    pub name: String,
    pub netns: String,
    pub ifname: String,
    pub mac: [u8; 6],
    pub ip: Ipv4Addr,
    /// The MAC of the rail switch port the NIC is cabled to (its gateway).
    pub gateway_mac: [u8; 6],
}

/// Every GPU NIC of the plan in torchrun order: hosts in topology order, then local rank.
pub fn gpus_of(plan: &Plan) -> Vec<Gpu> {
    let mut v = Vec::new();
    for h in &plan.hosts {
        let mut nics: Vec<_> = h.nics.iter().collect();
        nics.sort_by_key(|n| n.gpu);
        for n in nics {
            v.push(Gpu {
                name: format!("{}:{}", h.name, n.ifname),
                netns: h.netns.clone(),
                ifname: n.ifname.clone(),
                mac: n.mac.0,
                ip: n.addr,
                gateway_mac: n.gateway_mac.0,
            });
        }
    }
    v
}

fn gpu_names(gpus: &[Gpu]) -> String {
    gpus.iter().map(|g| g.name.as_str()).collect::<Vec<_>>().join(", ")
}

/// The rail switch a host NIC is cabled to, and the link's line rate.
pub(crate) fn switch_of(plan: &Plan, host: &str, nic: &str) -> Option<(String, u64)> {
    plan.links.iter().find_map(|l| {
        if l.a.node == host && l.a.ifname == nic {
            Some((l.b.node.clone(), l.line_rate_bps))
        } else if l.b.node == host && l.b.ifname == nic {
            Some((l.a.node.clone(), l.line_rate_bps))
        } else {
            None
        }
    })
}

/// How an endpoint got its GPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum MapHow {
    /// The sending endpoint, mapped to `--from`.
    Sender,
    /// An explicit `--map`.
    Map,
    /// The next free GPU in torchrun order.
    Auto,
    /// No GPU was left for it; frames to it are skipped.
    Unmapped,
}

/// One line of the mapping.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MapEntry {
    /// The address in the capture.
    pub endpoint: IpAddr,
    /// `host2:gpu1`, or `None` when no GPU was left.
    pub gpu: Option<String>,
    /// The GPU's fabric address.
    pub ip: Option<Ipv4Addr>,
    pub how: MapHow,
}

impl MapEntry {
    pub(crate) fn line(&self, width: usize) -> String {
        match (&self.gpu, self.ip) {
            (Some(g), Some(ip)) => {
                let how = match self.how {
                    MapHow::Sender => "sender, --from",
                    MapHow::Map => "--map",
                    _ => "next GPU in rank order",
                };
                format!("  {:<width$} -> {g} {ip} ({how})", self.endpoint.to_string())
            }
            _ => format!("  {:<width$} -> no GPU left (frames to it are skipped)", self.endpoint.to_string()),
        }
    }
}

/// Maps `endpoints` (in order of first appearance) onto `gpus` (torchrun order): `sender` →
/// the `from` GPU, `maps` as given, the rest onto the free GPUs in order. Errors name the
/// option at fault.
pub fn map_endpoints(
    endpoints: &[IpAddr],
    sender: IpAddr,
    gpus: &[Gpu],
    from: &str,
    maps: &[(IpAddr, String)],
) -> Result<Vec<MapEntry>, MapError> {
    let find = |name: &str, opt: String| {
        gpus.iter().find(|g| g.name == name).ok_or_else(|| MapError::NoSuchGpu { option: opt, have: gpu_names(gpus) })
    };
    let from_gpu = find(from, format!("--from {from}"))?;
    let mut explicit: BTreeMap<IpAddr, &Gpu> = BTreeMap::new();
    for (ip, name) in maps {
        let g = find(name, format!("--map {ip}={name}"))?;
        if !endpoints.contains(ip) {
            return Err(MapError::NotInCapture { ip: *ip, gpu: name.clone() });
        }
        if let Some(prev) = explicit.insert(*ip, g) {
            if prev.name != g.name {
                return Err(MapError::GivenTwice { ip: *ip, first: prev.name.clone(), second: name.clone() });
            }
        }
        if *ip == sender && g.name != from_gpu.name {
            return Err(MapError::SenderElsewhere { ip: *ip, gpu: name.clone(), from: from.into() });
        }
        if *ip != sender && g.name == from_gpu.name {
            return Err(MapError::FromGpuTaken { ip: *ip, gpu: name.clone(), sender });
        }
        if let Some((other, _)) = explicit.iter().find(|(o, og)| **o != *ip && og.name == g.name) {
            return Err(MapError::GpuTaken { ip: *ip, gpu: name.clone(), other: *other });
        }
    }
    let mut free = gpus.iter().filter(|g| g.name != from_gpu.name && !explicit.values().any(|e| e.name == g.name));
    Ok(endpoints
        .iter()
        .map(|&ep| {
            let (g, how) = if ep == sender {
                (Some(from_gpu), MapHow::Sender)
            } else if let Some(g) = explicit.get(&ep) {
                (Some(*g), MapHow::Map)
            } else {
                match free.next() {
                    Some(g) => (Some(g), MapHow::Auto),
                    None => (None, MapHow::Unmapped),
                }
            };
            MapEntry { endpoint: ep, gpu: g.map(|g| g.name.clone()), ip: g.map(|g| g.ip), how }
        })
        .collect())
}
