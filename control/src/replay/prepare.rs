//! Preparing a capture: every frame classified ([`super::classify`]), the endpoints mapped
//! onto fabric GPUs ([`super::mapping`]) and the sender's frames rewritten
//! ([`super::rewrite`]); the rest counted by the reason it is skipped.

use std::net::IpAddr;
use std::path::Path;
use std::time::Duration;

use rocefab_wire::pcap::CapturedFrame;
use rocefab_wire::roce::IcrcStatus;
use serde::Serialize;

use super::classify::{classify, dscp_of, l3, vlan_tag, Kind, VlanTag};
use super::mapping::{map_endpoints, Gpu, MapEntry, MapError};
use super::rewrite::rewrite;
use crate::text::plural;

/// Why a capture cannot be replayed as the options say.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PrepareError {
    /// `--from` / `--map` do not fit the fabric or the capture.
    #[error(transparent)]
    Map(#[from] MapError),
    #[error("--sender {sender}: not an address of any RoCEv2 frame of {file}")]
    NoSuchSender { sender: IpAddr, file: String },
    /// No RoCEv2 frame of the fabric's family: the frames of the capture and why.
    #[error("{file}: no IPv4 RoCEv2 frame to replay among its {frames}{why}")]
    NothingToReplay { file: String, frames: String, why: String },
    /// A frame to inject was cut by the capture's snap length, and `--pad` was not given.
    #[error(
        "{file}: frame {number}: captured {captured} of {orig_len} bytes (cut by the capture's snap length){more}; \
         a cut frame cannot be injected: pass --pad to pad it with zeros to its original length"
    )]
    Cut { file: String, number: usize, captured: usize, orig_len: u32, more: String },
}

/// A frame ready to send.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outgoing {
    /// Frame number in the capture (1-based, as `rocefab pcap show` and Wireshark count).
    pub number: usize,
    /// Its capture timestamp.
    pub timestamp: Duration,
    /// The rewritten Ethernet frame.
    pub bytes: Vec<u8>,
    /// The captured ICRC was bad and was kept.
    pub icrc_bad_in_capture: bool,
    /// Padded to its original length (`--pad`).
    pub padded: bool,
    /// Its DSCP (kept as captured): what the fabric classifies it by.
    pub dscp: u8,
    /// The VLAN tag the capture had, stripped for the untagged fabric.
    pub vlan: Option<VlanTag>,
}

/// Skipped frames of one reason.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SkipCount {
    pub reason: String,
    pub frames: u64,
}

/// A capture classified, mapped and rewritten.
#[derive(Debug, Clone, PartialEq)]
pub struct Prepared {
    /// The capture endpoint whose frames are injected.
    pub sender: IpAddr,
    pub mapping: Vec<MapEntry>,
    pub frames: Vec<Outgoing>,
    /// In order of first occurrence.
    pub skipped: Vec<SkipCount>,
    /// Frames in the capture.
    pub total: usize,
}

/// What [`prepare`] needs besides the frames.
#[derive(Debug, Clone)]
pub struct Options<'a> {
    /// The capture's name, for errors.
    pub file: &'a Path,
    pub gpus: &'a [Gpu],
    pub from: &'a str,
    pub maps: &'a [(IpAddr, String)],
    pub sender: Option<IpAddr>,
    pub pad: bool,
    /// The fabric's MTU (largest IP packet).
    pub mtu: u32,
}

/// The fabric's address family: `rocefab` plans IPv4 fabrics.
const FABRIC_IS_IPV4: bool = true;

/// Classifies, maps and rewrites `frames`. Fails on a bad option, a capture without a RoCEv2
/// frame of the fabric's family, or (without `--pad`) a frame to inject that the capture cut.
pub fn prepare(frames: &[CapturedFrame], o: &Options<'_>) -> Result<Prepared, PrepareError> {
    let kinds: Vec<Kind> = frames.iter().map(classify).collect();
    let (sender, endpoints) = sender_and_endpoints(&kinds, o)?;
    let mapping = map_endpoints(&endpoints, sender, o.gpus, o.from, o.maps)?;
    let from = o.gpus.iter().find(|g| g.name == o.from).expect("map_endpoints checked --from");
    let mut skipped: Vec<SkipCount> = Vec::new();
    let mut out = Vec::new();
    let mut cut: Vec<(usize, usize, u32)> = Vec::new();
    for (i, (k, f)) in kinds.into_iter().zip(frames).enumerate() {
        match outgoing(i + 1, k, f, sender, &mapping, from, o) {
            Ok(frame) => out.push(frame),
            Err(NotSent::Skip(reason)) => match skipped.iter_mut().find(|s| s.reason == reason) {
                Some(s) => s.frames += 1,
                None => skipped.push(SkipCount { reason, frames: 1 }),
            },
            Err(NotSent::Cut) => cut.push((i + 1, f.data.len(), f.orig_len)),
        }
    }
    if !o.pad {
        if let Some(&(number, captured, orig_len)) = cut.first() {
            let more = match cut.len() {
                1 => String::new(),
                m => format!(" (and {} more such frames)", m - 1),
            };
            return Err(PrepareError::Cut { file: file_name(o), number, captured, orig_len, more });
        }
    }
    Ok(Prepared { sender, mapping, frames: out, skipped, total: frames.len() })
}

fn file_name(o: &Options<'_>) -> String {
    o.file.display().to_string()
}

fn same_family(ip: &IpAddr) -> bool {
    ip.is_ipv4() == FABRIC_IS_IPV4
}

/// The sending endpoint (`--sender`, else the address `--map`ped to `--from`, else the source
/// of the first RoCEv2 frame of the fabric's family) and the endpoints that take GPUs: the
/// sender, the addresses it sends to and those `--map` names, in order of first appearance
/// (other conversations in the capture are skipped anyway).
fn sender_and_endpoints(kinds: &[Kind], o: &Options<'_>) -> Result<(IpAddr, Vec<IpAddr>), PrepareError> {
    // Every address of the capture's RoCEv2 frames (what --sender and --map may name).
    let mut all: Vec<IpAddr> = Vec::new();
    for k in kinds {
        if let Kind::Roce { src, dst, .. } = k {
            for ip in [src, dst] {
                if same_family(ip) && !all.contains(ip) {
                    all.push(*ip);
                }
            }
        }
    }
    let first_src = kinds.iter().find_map(|k| match k {
        Kind::Roce { src, .. } if same_family(src) => Some(*src),
        _ => None,
    });
    let to_from = o.maps.iter().find(|(_, g)| g == o.from).map(|(ip, _)| *ip);
    let sender = match (o.sender, to_from, first_src) {
        (Some(s), _, _) => {
            if !all.contains(&s) {
                return Err(PrepareError::NoSuchSender { sender: s, file: file_name(o) });
            }
            s
        }
        (None, Some(s), _) => s,
        (None, None, Some(s)) => s,
        (None, None, None) => {
            let v6 = kinds.iter().filter(|k| matches!(k, Kind::Roce { .. })).count();
            let why = if v6 > 0 { format!(" ({v6} of them IPv6 RoCEv2; the fabric is IPv4)") } else { String::new() };
            let frames = plural(kinds.len() as u64, "frame");
            return Err(PrepareError::NothingToReplay { file: file_name(o), frames, why });
        }
    };
    let sent_to =
        |ip: &IpAddr| kinds.iter().any(|k| matches!(k, Kind::Roce { src, dst, .. } if *src == sender && dst == ip));
    let endpoints: Vec<IpAddr> =
        all.iter().copied().filter(|ip| *ip == sender || sent_to(ip) || o.maps.iter().any(|(m, _)| m == ip)).collect();
    Ok((sender, endpoints))
}

/// Why a frame is not sent.
enum NotSent {
    /// Skipped, counted under this reason.
    Skip(String),
    /// Cut by the snap length, without `--pad`: refused (the error names the first).
    Cut,
}

/// Frame `number` (1-based) of the capture, of kind `k`, rewritten to be sent from `from`.
fn outgoing(
    number: usize,
    k: Kind,
    f: &CapturedFrame,
    sender: IpAddr,
    mapping: &[MapEntry],
    from: &Gpu,
    o: &Options<'_>,
) -> Result<Outgoing, NotSent> {
    let (mut eth, wire_len, src, dst, status) = match k {
        Kind::Skip(r) => return Err(NotSent::Skip(r)),
        Kind::Roce { eth, wire_len, src, dst, icrc } => (eth, wire_len, src, dst, icrc),
    };
    if !same_family(&src) {
        let fabric = if FABRIC_IS_IPV4 { "IPv4" } else { "IPv6" };
        return Err(NotSent::Skip(format!("{} capture into an {fabric} fabric", ip_family(&src))));
    }
    if src != sender {
        return Err(NotSent::Skip(format!("sent by another endpoint ({src})")));
    }
    let Some(new_dst) = mapping.iter().find(|m| m.endpoint == dst).and_then(|m| m.ip) else {
        return Err(NotSent::Skip(format!("to {dst}, which no GPU was left for ({} GPUs)", o.gpus.len())));
    };
    let ip_len = wire_len.saturating_sub(l3(&eth).map_or(14, |w| w.payload_offset));
    if ip_len > o.mtu as usize {
        return Err(NotSent::Skip(format!("IP packet larger than the fabric's MTU ({} bytes)", o.mtu)));
    }
    let was_cut = matches!(status, IcrcStatus::NotCaptured { .. });
    if was_cut {
        if !o.pad {
            return Err(NotSent::Cut);
        }
        eth.resize(wire_len, 0);
    }
    let bad = !was_cut && !status.is_good();
    let (dscp, vlan) = (dscp_of(&eth), vlan_tag(&eth));
    let bytes = rewrite(&eth, from.mac, from.gateway_mac, IpAddr::V4(from.ip), IpAddr::V4(new_dst), !bad)
        .map_err(|e| NotSent::Skip(format!("cannot be rewritten: {e}")))?;
    Ok(Outgoing { number, timestamp: f.timestamp, bytes, icrc_bad_in_capture: bad, padded: was_cut, dscp, vlan })
}

fn ip_family(ip: &IpAddr) -> &'static str {
    if ip.is_ipv4() {
        "IPv4"
    } else {
        "IPv6"
    }
}
