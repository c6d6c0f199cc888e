//! `rocefab replay [<fabric>] --from <host>:<gpu> capture.pcap[ng]`: injects the RoCEv2 frames
//! of a capture into a running fabric, from one GPU NIC, with the capture's timing.
//!
//! Steps, each a function below:
//! 1. **Read** the capture ([`rocefab_wire::pcap`]: pcap or pcapng; Ethernet, Linux cooked or
//!    raw-IP link types, whose missing Ethernet header is synthesised — the MACs are rewritten
//!    anyway).
//! 2. **Classify** every frame ([`prepare`]): a RoCEv2 frame is Ethernet (VLAN tags allowed) /
//!    IPv4 or IPv6 / UDP destination port 4791 / BTH ..., parsed by
//!    [`ParsedFrame::parse_captured`]. Anything else is skipped and counted with its reason.
//! 3. **Map** the capture's IP endpoints onto fabric GPUs ([`map_endpoints`]): the sending
//!    endpoint (`--sender`, else the address `--map`ped to the `--from` GPU, else the source of
//!    the first RoCEv2 frame) becomes the `--from` GPU; every other endpoint, in order of first
//!    appearance, the next GPU in torchrun order (node rank × GPUs per host + local rank),
//!    skipping `--from` and the GPUs `--map` took.
//! 4. **Rewrite** the frames the sender sent ([`rewrite`]): MACs of the `--from` NIC and its
//!    gateway (the rail switch port), mapped addresses, TTL / hop limit 64, IPv4 header checksum,
//!    UDP checksum 0 (IPv4; IPv6 recomputed when the capture had one), and the RoCEv2 ICRC (IBTA
//!    Annex A17.3.3), which covers the addresses — recomputed only when the captured ICRC was
//!    good, so a frame captured with a bad ICRC is injected with a bad one. DSCP/ECN, UDP ports
//!    and everything above UDP stay as captured. VLAN tags are stripped and reported per tag
//!    with the priority the frames take instead: the fabric's ports are untagged (the planner
//!    configures no VLANs, and this kernel has no 802.1Q devices for a host to terminate a tag)
//!    and its switches classify by DSCP (DSCP-based PFC, as SONiC's and NX-OS's RoCE
//!    configurations do), so a kept tag would carry a PCP nothing reads (the XDP program skips one
//!    tag and classifies by DSCP; a QinQ frame would not even be routed).
//! 5. **Schedule** ([`Schedule`]): the capture's timestamps relative to the first injected
//!    frame (default), divided by `--speed`, `--pps` evenly spaced, or `--topspeed` all at 0;
//!    `--loop N` repeats it with the capture's mean gap between loops. The schedule is in the
//!    fabric's emulated time (README "Emulated time"): a capture's timestamps are taken as
//!    the time of the network it models (a real fabric's, or a `rocefab capture`, which writes
//!    emulated time), and `--pps N` is N frames per emulated second. On a fabric at
//!    `time_dilation: D` every due time is multiplied by D where it meets the wall clock
//!    ([`Schedule::dilated`]), so a 10 µs gap is sent 80 ms apart at D 8000. A schedule whose
//!    wall-clock length exceeds `--max-duration` (a bound on how long the command runs, wall
//!    clock) is refused.
//! 6. **Send** ([`pace`]) from an `AF_PACKET` raw socket bound to the GPU's interface inside
//!    the host's namespace (a dedicated thread enters it with `setns`): every frame's due time
//!    is absolute from one monotonic start, the thread sleeps until ~200 µs before it and spins
//!    the rest, so errors never accumulate (with gaps of a millisecond or more the thread asks
//!    for `SCHED_FIFO`, best effort, so a loaded machine does not delay its wake-ups). Outside `rocefab run` jobs no XDP program runs on
//!    host NICs, so the frames go straight to the rail switch; during a job the host's XDP
//!    program hands RoCEv2 frames arriving at a NIC to its `rocefab-hostd`, which would see
//!    the replayed frames as traffic of its own QPs (replay is not refused then: do not).
//! 7. **Report** ([`Report`], text or `--json`), in emulated time (wall / D; the wall-clock
//!    duration and D are given too): frames and bytes sent, duration, rate, the
//!    timing error measured at the sender (send timestamps against the schedule: mean absolute
//!    inter-frame error as a share of the mean scheduled gap, and the largest) and beside it the
//!    timing error at the receiver (the destination NICs captured during the replay, kernel
//!    receive times, [`crate::replay_rx`]), the frames per traffic class at the first switch
//!    (by the fabric's DSCP map; every lossless class is listed, and a warning says when no
//!    frame is in one), the VLAN tags stripped, the frames whose ICRC was already bad in the
//!    capture, the padded frames, the skipped frames by reason, and warnings: among them the
//!    capture's gaps that the fabric cannot reproduce at its time dilation, with the D that
//!    would ([`crate::replay_rx::GapRule`]), also printed before sending.
//!
//! `--dry-run` needs no running fabric when given the topology (`--topology FILE`, or the file
//! in the fabric's place); its time dilation is the topology's.
//!
//! A frame the capture's snap length cut is refused (an error naming the file, the frame and
//! both lengths) unless `--pad` pads it with zeros to its original length; its ICRC, which was
//! not captured, is then computed over the padded frame.
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::net::{IpAddr, Ipv4Addr};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context};
use rocefab_contracts::time::Dilation;
use rocefab_wire::pcap::{self, as_ethernet, CapturedFrame};
use rocefab_wire::roce::{icrc, IcrcStatus, ParsedFrame};
use serde::Serialize;

use crate::plan::{compile, Plan};
use crate::rundir::{self, State};
use crate::topology::Topology;
use crate::units::fmt_ns;

/// Arguments of `rocefab replay`.
#[derive(Debug, Clone, clap::Args)]
pub struct ReplayArgs {
    /// `[FABRIC] CAPTURE`: the fabric (default: the only running fabric) and the pcap or pcapng
    /// file to replay.
    #[arg(value_name = "[FABRIC] CAPTURE", num_args = 1..=2, required = true)]
    pub positional: Vec<String>,
    /// The GPU NIC that sends the capture's frames, `host1:gpu0`.
    #[arg(long, value_name = "HOST:GPU")]
    pub from: String,
    /// Map a capture endpoint onto a fabric GPU, `10.1.1.2=host2:gpu1` (repeatable); overrides
    /// the default mapping.
    #[arg(long = "map", value_name = "CAPTURE_IP=HOST:GPU", value_parser = parse_map)]
    pub maps: Vec<(IpAddr, String)>,
    /// The capture endpoint whose frames are injected (default: the address mapped to --from,
    /// else the source of the first RoCEv2 frame).
    #[arg(long, value_name = "CAPTURE_IP")]
    pub sender: Option<IpAddr>,
    /// Pad frames the capture's snap length cut with zeros to their original length (their
    /// ICRC is computed over the padded frame) instead of refusing them.
    #[arg(long)]
    pub pad: bool,
    /// Print the mapping, the traffic classes and what would be skipped, send nothing. Works
    /// without a running fabric with --topology (or a topology file in the fabric's place).
    #[arg(long)]
    pub dry_run: bool,
    /// The topology file to plan a dry run with, instead of a running fabric's.
    #[arg(long, value_name = "FILE", requires = "dry_run")]
    pub topology: Option<PathBuf>,
    /// Do not capture the destination NICs to measure the timing at the receiver.
    #[arg(long)]
    pub no_receiver_timing: bool,
    /// Replay X times faster than captured (0.5 = half speed); the captured timing is taken
    /// as emulated time and stretched by the fabric's time dilation.
    #[arg(long, value_name = "X", value_parser = parse_speed_factor, conflicts_with_all = ["pps", "topspeed"])]
    pub speed: Option<f64>,
    /// Send N frames per second of emulated time (N / D per wall-clock second on a fabric at
    /// time dilation D), evenly spaced, instead of the captured timing.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=100_000_000), conflicts_with = "topspeed")]
    pub pps: Option<u64>,
    /// Send as fast as possible.
    #[arg(long)]
    pub topspeed: bool,
    /// Replay the capture N times; between loops the capture's mean inter-frame gap.
    #[arg(long = "loop", value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub loops: u32,
    /// Refuse a schedule longer than this on the wall clock, and stop sending after it (`90s`,
    /// `10m`, `500ms`): how long the command may run, whatever the fabric's time dilation.
    #[arg(long, value_name = "DURATION", default_value = "10m", value_parser = parse_duration)]
    pub max_duration: Duration,
    /// Print the report as JSON (the mapping goes to stderr as text).
    #[arg(long)]
    pub json: bool,
}

/// Parses `CAPTURE_IP=HOST:GPU`.
pub fn parse_map(s: &str) -> Result<(IpAddr, String), String> {
    let (ip, gpu) =
        s.split_once('=').ok_or_else(|| format!("{s:?} is not CAPTURE_IP=HOST:GPU (e.g. 10.1.1.2=host2:gpu1)"))?;
    let ip: IpAddr = ip.trim().parse().map_err(|_| format!("{s:?}: {ip:?} is not an IP address"))?;
    let gpu = gpu.trim();
    match gpu.split_once(':') {
        Some((h, g)) if !h.is_empty() && !g.is_empty() => Ok((ip, gpu.to_string())),
        _ => Err(format!("{s:?}: {gpu:?} is not HOST:GPU (e.g. host2:gpu1)")),
    }
}

/// Parses a `--speed` factor: a finite number above 0 (at most 10^6).
pub fn parse_speed_factor(s: &str) -> Result<f64, String> {
    let v: f64 = s.trim().parse().map_err(|_| format!("{s:?} is not a number"))?;
    if !(v > 0.0 && v <= 1e6) {
        return Err(format!("{s}: the speed factor must be above 0 and at most 1000000"));
    }
    Ok(v)
}

/// Parses `500ms`, `90s`, `10m`, `1h` or a plain number of seconds (fractions allowed), with
/// [`rocefab_units::parse_duration`]; above 0 and at most 7 days.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let d = rocefab_units::parse_duration(s, rocefab_units::Bare::Seconds)?;
    if d.is_zero() || d > Duration::from_secs(7 * 86400) {
        return Err(format!("{s:?}: must be above 0 and at most 7 days"));
    }
    Ok(d)
}

// ---- the fabric's GPUs ----

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

// ---- classification ----

/// What a capture frame is, before the mapping decides about it.
#[derive(Debug, Clone)]
enum Kind {
    /// Not injectable whatever the mapping: the reason.
    Skip(String),
    /// A RoCEv2 frame: the Ethernet frame (header synthesised for cooked / raw-IP captures),
    /// its length on the wire, its addresses and ICRC status.
    Roce { eth: Vec<u8>, wire_len: usize, src: IpAddr, dst: IpAddr, icrc: IcrcStatus },
}

const ETHERTYPE_IPV4: u16 = 0x0800;
const ETHERTYPE_IPV6: u16 = 0x86dd;
const VLAN_TPIDS: [u16; 3] = [0x8100, 0x88a8, 0x9100];

fn be16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

/// The EtherType after any VLAN tags and the offset of what it announces; `None` when the
/// frame is too short for its Ethernet header or a tag.
fn l3(eth: &[u8]) -> Option<(u16, usize)> {
    if eth.len() < 14 {
        return None;
    }
    let (mut et, mut off) = (be16(eth, 12), 14);
    while VLAN_TPIDS.contains(&et) {
        if eth.len() < off + 4 {
            return None;
        }
        et = be16(eth, off + 2);
        off += 4;
    }
    Some((et, off))
}

/// Why a frame is not RoCEv2 at all (another EtherType, IP protocol or UDP port), judged from
/// as much as was captured; `None` for RoCEv2 candidates (UDP destination port 4791), whose
/// remaining problems the RoCEv2 parser names.
fn not_roce(eth: &[u8]) -> Option<String> {
    let Some((et, ip)) = l3(eth) else {
        return Some(format!("not RoCEv2 (runt frame of {} bytes)", eth.len()));
    };
    let udp = match et {
        ETHERTYPE_IPV4 => {
            let h = eth.get(ip..ip + 20)?;
            if h[9] != 17 {
                return Some(format!("not RoCEv2 (IP protocol {})", h[9]));
            }
            if be16(h, 6) & 0x1fff != 0 {
                return Some("not RoCEv2 (IP fragment)".into());
            }
            ip + usize::from(h[0] & 0x0f) * 4
        }
        ETHERTYPE_IPV6 => {
            let h = eth.get(ip..ip + 40)?;
            if h[6] != 17 {
                return Some(format!("not RoCEv2 (IPv6 next header {})", h[6]));
            }
            ip + 40
        }
        _ => return Some(format!("not RoCEv2 (ethertype 0x{et:04x})")),
    };
    let u = eth.get(udp..udp + 4)?;
    let (sport, dport) = (be16(u, 0), be16(u, 2));
    // The lower of the two ports names the service (DNS queries and answers alike say 53).
    (dport != rocefab_wire::roce::UDP_PORT).then(|| format!("not RoCEv2 (UDP port {})", sport.min(dport)))
}

fn classify(f: &CapturedFrame) -> Kind {
    let Some(eth) = as_ethernet(f.linktype, &f.data) else {
        return Kind::Skip(match f.linktype {
            pcap::LINKTYPE_LINUX_SLL | pcap::LINKTYPE_LINUX_SLL2 => {
                format!("not RoCEv2 (runt frame of {} bytes)", f.data.len())
            }
            t => format!("not RoCEv2 (link type {t})"),
        });
    };
    // The synthesised header changes the length; `orig_len` counts the captured link header.
    let wire_len = (f.orig_len as usize + eth.len()).saturating_sub(f.data.len());
    if let Some(reason) = not_roce(&eth) {
        return Kind::Skip(reason);
    }
    match ParsedFrame::parse_captured(&eth, wire_len) {
        Ok(p) => Kind::Roce { src: p.ip.src, dst: p.ip.dst, icrc: p.icrc, wire_len, eth: eth.to_vec() },
        Err(e) => Kind::Skip(format!("malformed RoCEv2: {e}")),
    }
}

// ---- mapping ----

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
    fn line(&self, width: usize) -> String {
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
) -> anyhow::Result<Vec<MapEntry>> {
    let find = |name: &str, opt: String| {
        gpus.iter().find(|g| g.name == name).ok_or_else(|| anyhow!("{opt}: no such GPU (have {})", gpu_names(gpus)))
    };
    let from_gpu = find(from, format!("--from {from}"))?;
    let mut explicit: BTreeMap<IpAddr, &Gpu> = BTreeMap::new();
    for (ip, name) in maps {
        let g = find(name, format!("--map {ip}={name}"))?;
        if !endpoints.contains(ip) {
            bail!("--map {ip}={name}: {ip} is not an address of any RoCEv2 frame of the capture");
        }
        if let Some(prev) = explicit.insert(*ip, g) {
            if prev.name != g.name {
                bail!("--map {ip}: given twice ({} and {name})", prev.name);
            }
        }
        if *ip == sender && g.name != from_gpu.name {
            bail!("--map {ip}={name}: {ip} is the sending endpoint, which --from puts on {from}");
        }
        if *ip != sender && g.name == from_gpu.name {
            bail!("--map {ip}={name}: {name} is the --from GPU, which the sending endpoint {sender} takes");
        }
        if let Some((other, _)) = explicit.iter().find(|(o, og)| **o != *ip && og.name == g.name) {
            bail!("--map {ip}={name}: {other} is mapped to {name} too");
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

// ---- rewriting ----

/// Why a frame could not be rewritten.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RewriteError {
    #[error("frame truncated: need {needed} bytes, have {available}")]
    Truncated { needed: usize, available: usize },
    #[error("EtherType 0x{0:04x} is neither IPv4 nor IPv6")]
    NotIp(u16),
    #[error("the new addresses ({src}, {dst}) are not of the frame's IP family")]
    Family { src: IpAddr, dst: IpAddr },
    #[error("ICRC: {0}")]
    Icrc(#[from] rocefab_wire::roce::Error),
}

/// Minimum Ethernet frame without FCS; shorter frames are zero-padded as a NIC would.
use rocefab_wire::roce::frame::ETH_MIN_LEN;

/// The Internet checksum (RFC 1071) of `data`, folded; `init` carries a pseudo-header sum.
fn inet_checksum(init: u32, data: &[u8]) -> u16 {
    let mut sum = init;
    let mut chunks = data.chunks_exact(2);
    for c in &mut chunks {
        sum += u32::from(u16::from_be_bytes([c[0], c[1]]));
    }
    if let [b] = chunks.remainder() {
        sum += u32::from(*b) << 8;
    }
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

/// Rewrites a RoCEv2 Ethernet frame for injection: `dst_mac` / `src_mac`, EtherType of its IP
/// version (VLAN tags dropped), source and destination address, TTL / hop limit 64, the IPv4
/// header checksum, the UDP checksum (0 for IPv4; for IPv6 recomputed if the frame had one, else
/// 0), and the ICRC when `recompute_icrc` (else the captured one stays). Bytes after the IP
/// packet (Ethernet padding) are dropped, and a frame below 60 bytes is zero-padded.
pub fn rewrite(
    eth: &[u8],
    src_mac: [u8; 6],
    dst_mac: [u8; 6],
    src_ip: IpAddr,
    dst_ip: IpAddr,
    recompute_icrc: bool,
) -> Result<Vec<u8>, RewriteError> {
    let trunc = |needed: usize| RewriteError::Truncated { needed, available: eth.len() };
    let (et, ip) = l3(eth).ok_or(trunc(14))?;
    let ip_len = match et {
        ETHERTYPE_IPV4 => usize::from(be16(eth.get(ip..ip + 20).ok_or(trunc(ip + 20))?, 2)),
        ETHERTYPE_IPV6 => 40 + usize::from(be16(eth.get(ip..ip + 40).ok_or(trunc(ip + 40))?, 4)),
        other => return Err(RewriteError::NotIp(other)),
    };
    // IP header plus UDP header at least, whatever the length field says (0 in a TSO capture).
    let min = if et == ETHERTYPE_IPV4 { 28 } else { 48 };
    if ip_len < min {
        return Err(RewriteError::Truncated { needed: ip + min, available: ip + ip_len });
    }
    let packet = eth.get(ip..ip + ip_len).ok_or(trunc(ip + ip_len))?;
    let mut out = Vec::with_capacity(14 + ip_len.max(ETH_MIN_LEN));
    out.extend_from_slice(&dst_mac);
    out.extend_from_slice(&src_mac);
    out.extend_from_slice(&et.to_be_bytes());
    out.extend_from_slice(packet);
    let p = &mut out[14..];
    match (et, src_ip, dst_ip) {
        (ETHERTYPE_IPV4, IpAddr::V4(s), IpAddr::V4(d)) => {
            let ihl = usize::from(p[0] & 0x0f) * 4;
            if ihl < 20 || p.len() < ihl + 8 {
                return Err(trunc(ip + ihl.max(20) + 8));
            }
            p[12..16].copy_from_slice(&s.octets());
            p[16..20].copy_from_slice(&d.octets());
            p[8] = 64;
            p[10..12].copy_from_slice(&[0, 0]);
            let c = inet_checksum(0, &p[..ihl]);
            p[10..12].copy_from_slice(&c.to_be_bytes());
            p[ihl + 6..ihl + 8].copy_from_slice(&[0, 0]);
            if recompute_icrc {
                icrc::fill(p)?;
            }
        }
        (ETHERTYPE_IPV6, IpAddr::V6(s), IpAddr::V6(d)) => {
            if p.len() < 48 {
                return Err(trunc(ip + 48));
            }
            p[8..24].copy_from_slice(&s.octets());
            p[24..40].copy_from_slice(&d.octets());
            p[7] = 64;
            if recompute_icrc {
                icrc::fill(p)?;
            }
            if p[46..48] != [0, 0] {
                // RFC 8200 §8.1 pseudo-header: addresses, upper-layer length, next header 17.
                p[46..48].copy_from_slice(&[0, 0]);
                let udp_len = p.len() - 40;
                let mut sum = 0u32;
                for c in p[8..40].chunks_exact(2) {
                    sum += u32::from(u16::from_be_bytes([c[0], c[1]]));
                }
                sum += (udp_len as u32 >> 16) + (udp_len as u32 & 0xffff) + 17;
                let c = match inet_checksum(sum, &p[40..]) {
                    0 => 0xffff,
                    c => c,
                };
                p[46..48].copy_from_slice(&c.to_be_bytes());
            }
        }
        _ => return Err(RewriteError::Family { src: src_ip, dst: dst_ip }),
    }
    if out.len() < ETH_MIN_LEN {
        out.resize(ETH_MIN_LEN, 0);
    }
    Ok(out)
}

// ---- preparing a capture ----

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

/// A capture frame's outer 802.1Q / 802.1ad tag.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct VlanTag {
    pub vid: u16,
    /// Priority code point (IEEE 802.1Q PCP, 0..=7).
    pub pcp: u8,
    /// Tags on the frame (2 for QinQ).
    pub tags: u8,
}

/// The outer VLAN tag of an Ethernet frame and how many tags it has.
fn vlan_tag(eth: &[u8]) -> Option<VlanTag> {
    let (_, l3off) = l3(eth)?;
    if l3off == 14 {
        return None;
    }
    let tci = be16(eth, 14);
    Some(VlanTag { vid: tci & 0x0fff, pcp: (tci >> 13) as u8, tags: ((l3off - 14) / 4) as u8 })
}

/// The DSCP of an Ethernet frame's IPv4 / IPv6 header (0 when there is none).
fn dscp_of(eth: &[u8]) -> u8 {
    match l3(eth) {
        Some((ETHERTYPE_IPV4, o)) => eth.get(o + 1).map_or(0, |t| t >> 2),
        Some((ETHERTYPE_IPV6, o)) => match eth.get(o..o + 2) {
            Some(h) => (((h[0] & 0x0f) << 4) | (h[1] >> 4)) >> 2,
            None => 0,
        },
        _ => 0,
    }
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
pub fn prepare(frames: &[CapturedFrame], o: &Options<'_>) -> anyhow::Result<Prepared> {
    let kinds: Vec<Kind> = frames.iter().map(classify).collect();
    let same_family = |ip: &IpAddr| ip.is_ipv4() == FABRIC_IS_IPV4;
    // Every address of the capture's RoCEv2 frames (what --sender and --map may name).
    let mut all: Vec<IpAddr> = Vec::new();
    for k in &kinds {
        if let Kind::Roce { src, dst, .. } = k {
            for ip in [src, dst] {
                if same_family(ip) && !all.contains(ip) {
                    all.push(*ip);
                }
            }
        }
    }
    let file = o.file.display();
    let first_src = kinds.iter().find_map(|k| match k {
        Kind::Roce { src, .. } if same_family(src) => Some(*src),
        _ => None,
    });
    let to_from = o.maps.iter().find(|(_, g)| g == o.from).map(|(ip, _)| *ip);
    let sender = match (o.sender, to_from, first_src) {
        (Some(s), _, _) => {
            if !all.contains(&s) {
                bail!("--sender {s}: not an address of any RoCEv2 frame of {file}");
            }
            s
        }
        (None, Some(s), _) => s,
        (None, None, Some(s)) => s,
        (None, None, None) => {
            let v6 = kinds.iter().filter(|k| matches!(k, Kind::Roce { .. })).count();
            let why = if v6 > 0 { format!(" ({v6} of them IPv6 RoCEv2; the fabric is IPv4)") } else { String::new() };
            bail!("{file}: no IPv4 RoCEv2 frame to replay among its {}{why}", plural(frames.len() as u64, "frame"));
        }
    };
    // Only the sender, the addresses it sends to and those --map names take GPUs (in order of
    // first appearance): other conversations in the capture are skipped anyway.
    let sent_to =
        |ip: &IpAddr| kinds.iter().any(|k| matches!(k, Kind::Roce { src, dst, .. } if *src == sender && dst == ip));
    let endpoints: Vec<IpAddr> =
        all.iter().copied().filter(|ip| *ip == sender || sent_to(ip) || o.maps.iter().any(|(m, _)| m == ip)).collect();
    let mapping = map_endpoints(&endpoints, sender, o.gpus, o.from, o.maps)?;
    let from = o.gpus.iter().find(|g| g.name == o.from).expect("map_endpoints checked --from");
    let fabric_ip = |ip: &IpAddr| mapping.iter().find(|m| m.endpoint == *ip).and_then(|m| m.ip);

    let mut skipped: Vec<SkipCount> = Vec::new();
    let mut skip = |reason: String| match skipped.iter_mut().find(|s| s.reason == reason) {
        Some(s) => s.frames += 1,
        None => skipped.push(SkipCount { reason, frames: 1 }),
    };
    let mut out = Vec::new();
    let mut cut: Vec<(usize, usize, u32)> = Vec::new();
    for (i, (k, f)) in kinds.into_iter().zip(frames).enumerate() {
        let (eth, wire_len, src, dst, status) = match k {
            Kind::Skip(r) => {
                skip(r);
                continue;
            }
            Kind::Roce { eth, wire_len, src, dst, icrc } => (eth, wire_len, src, dst, icrc),
        };
        if !same_family(&src) {
            skip(format!(
                "{} capture into an {} fabric",
                ip_family(&src),
                if FABRIC_IS_IPV4 { "IPv4" } else { "IPv6" }
            ));
            continue;
        }
        if src != sender {
            skip(format!("sent by another endpoint ({src})"));
            continue;
        }
        let Some(new_dst) = fabric_ip(&dst) else {
            skip(format!("to {dst}, which no GPU was left for ({} GPUs)", o.gpus.len()));
            continue;
        };
        let ip_len = wire_len.saturating_sub(l3(&eth).map_or(14, |(_, off)| off));
        if ip_len > o.mtu as usize {
            skip(format!("IP packet larger than the fabric's MTU ({} bytes)", o.mtu));
            continue;
        }
        let was_cut = matches!(status, IcrcStatus::NotCaptured { .. });
        let mut eth = eth;
        if was_cut {
            cut.push((i + 1, f.data.len(), f.orig_len));
            if !o.pad {
                continue;
            }
            eth.resize(wire_len, 0);
        }
        let bad = !was_cut && !status.is_good();
        let (dscp, vlan) = (dscp_of(&eth), vlan_tag(&eth));
        let bytes = match rewrite(&eth, from.mac, from.gateway_mac, IpAddr::V4(from.ip), IpAddr::V4(new_dst), !bad) {
            Ok(b) => b,
            Err(e) => {
                skip(format!("cannot be rewritten: {e}"));
                continue;
            }
        };
        out.push(Outgoing {
            number: i + 1,
            timestamp: f.timestamp,
            bytes,
            icrc_bad_in_capture: bad,
            padded: was_cut,
            dscp,
            vlan,
        });
    }
    if !o.pad {
        if let Some(&(n, captured, orig)) = cut.first() {
            let more = match cut.len() {
                1 => String::new(),
                m => format!(" (and {} more such frames)", m - 1),
            };
            bail!(
                "{file}: frame {n}: captured {captured} of {orig} bytes (cut by the capture's snap length){more}; \
                 a cut frame cannot be injected: pass --pad to pad it with zeros to its original length"
            );
        }
    }
    Ok(Prepared { sender, mapping, frames: out, skipped, total: frames.len() })
}

fn ip_family(ip: &IpAddr) -> &'static str {
    if ip.is_ipv4() {
        "IPv4"
    } else {
        "IPv6"
    }
}

// ---- schedule ----

/// How to time the frames.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Pace {
    /// The capture's timing, divided by a factor (1 = as captured).
    Speed(f64),
    /// Evenly spaced at N frames per second.
    Pps(u64),
    /// As fast as possible.
    Topspeed,
}

impl Pace {
    /// `--speed` / `--pps` / `--topspeed` (conflicts are clap's business).
    pub fn from_args(a: &ReplayArgs) -> Pace {
        match (a.topspeed, a.pps, a.speed) {
            (true, _, _) => Pace::Topspeed,
            (_, Some(n), _) => Pace::Pps(n),
            (_, _, s) => Pace::Speed(s.unwrap_or(1.0)),
        }
    }

    fn describe(&self) -> String {
        match self {
            Pace::Speed(s) if *s == 1.0 => "original timing".into(),
            Pace::Speed(s) => format!("original timing x{s}"),
            Pace::Pps(n) => format!("{n} frames/s"),
            Pace::Topspeed => "top speed".into(),
        }
    }
}

/// When each frame is due, in nanoseconds from the start: one loop's offsets, repeated
/// `loops` times every `period_ns`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Schedule {
    /// Offsets of one loop's frames (non-decreasing).
    pub offsets_ns: Vec<u64>,
    /// Start of loop k = k × period: the loop's span plus its mean gap.
    pub period_ns: u64,
    pub loops: u32,
}

impl Schedule {
    /// The schedule of frames captured at `timestamps` (the first frame is due at 0; a
    /// timestamp earlier than its predecessor's counts as equal).
    pub fn new(timestamps: &[Duration], pace: Pace, loops: u32) -> Schedule {
        let t0 = timestamps.first().copied().unwrap_or_default();
        let mut offsets_ns: Vec<u64> = Vec::with_capacity(timestamps.len());
        let mut prev = 0u64;
        for (i, ts) in timestamps.iter().enumerate() {
            let captured = u64::try_from(ts.saturating_sub(t0).as_nanos()).unwrap_or(u64::MAX);
            let t = match pace {
                Pace::Speed(s) => (captured as f64 / s).round().min(u64::MAX as f64) as u64,
                Pace::Pps(n) => ((i as u128 * 1_000_000_000) / u128::from(n.max(1))) as u64,
                Pace::Topspeed => 0,
            };
            prev = prev.max(t);
            offsets_ns.push(prev);
        }
        let span = offsets_ns.last().copied().unwrap_or(0);
        let mean_gap = match (pace, offsets_ns.len()) {
            (Pace::Pps(n), _) => 1_000_000_000 / n.max(1),
            (_, n) if n > 1 => span / (n as u64 - 1),
            _ => 0,
        };
        Schedule { offsets_ns, period_ns: span.saturating_add(mean_gap), loops: loops.max(1) }
    }

    /// Frames to send over all loops.
    pub fn len(&self) -> u64 {
        self.offsets_ns.len() as u64 * u64::from(self.loops)
    }

    pub fn is_empty(&self) -> bool {
        self.offsets_ns.is_empty()
    }

    /// Index (into one loop's frames) of send number `k`.
    pub fn frame(&self, k: u64) -> usize {
        (k % self.offsets_ns.len() as u64) as usize
    }

    /// Due time of send number `k`, ns from the start.
    pub fn at(&self, k: u64) -> u64 {
        let n = self.offsets_ns.len() as u64;
        (k / n).saturating_mul(self.period_ns).saturating_add(self.offsets_ns[(k % n) as usize])
    }

    /// The same schedule on the wall clock of a fabric at time dilation `d`: every due time
    /// and the loop period multiplied by D.
    pub fn dilated(&self, d: Dilation) -> Schedule {
        Schedule {
            offsets_ns: self.offsets_ns.iter().map(|&t| d.duration(t)).collect(),
            period_ns: d.duration(self.period_ns),
            loops: self.loops,
        }
    }

    /// Due time of the last send: the schedule's length.
    pub fn duration_ns(&self) -> u64 {
        if self.is_empty() {
            0
        } else {
            self.at(self.len() - 1)
        }
    }
}

// ---- pacing ----

/// Inter-frame timing error of actual send times against the schedule, accumulated online.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TimingError {
    /// Gaps measured (sends − 1).
    pub gaps: u64,
    sum_abs_error_ns: f64,
    /// Largest |actual gap − scheduled gap|.
    pub max_abs_error_ns: u64,
    sum_scheduled_gap_ns: f64,
    prev: Option<(u64, u64)>,
}

impl TimingError {
    /// One send: when it was due and when it happened, both ns from the start.
    pub fn record(&mut self, scheduled_ns: u64, actual_ns: u64) {
        if let Some((ps, pa)) = self.prev {
            let want = scheduled_ns as i128 - ps as i128;
            let got = actual_ns as i128 - pa as i128;
            let err = (got - want).unsigned_abs() as u64;
            self.gaps += 1;
            self.sum_abs_error_ns += err as f64;
            self.sum_scheduled_gap_ns += want as f64;
            self.max_abs_error_ns = self.max_abs_error_ns.max(err);
        }
        self.prev = Some((scheduled_ns, actual_ns));
    }

    /// Adds `o`'s gaps (another stream of the same replay) to these.
    pub fn merge(&mut self, o: &TimingError) {
        self.gaps += o.gaps;
        self.sum_abs_error_ns += o.sum_abs_error_ns;
        self.sum_scheduled_gap_ns += o.sum_scheduled_gap_ns;
        self.max_abs_error_ns = self.max_abs_error_ns.max(o.max_abs_error_ns);
    }

    pub fn mean_abs_error_ns(&self) -> Option<f64> {
        (self.gaps > 0).then(|| self.sum_abs_error_ns / self.gaps as f64)
    }

    pub fn mean_scheduled_gap_ns(&self) -> Option<f64> {
        (self.gaps > 0).then(|| self.sum_scheduled_gap_ns / self.gaps as f64)
    }

    /// Mean absolute error as a percentage of the mean scheduled gap (`None` without gaps or
    /// when every frame was due at once).
    pub fn mean_abs_error_pct(&self) -> Option<f64> {
        (self.gaps > 0 && self.sum_scheduled_gap_ns > 0.0)
            .then(|| 100.0 * self.sum_abs_error_ns / self.sum_scheduled_gap_ns)
    }
}

/// What [`pace`] did.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SendLog {
    pub sent: u64,
    pub errors: u64,
    pub first_error: Option<String>,
    /// Bytes of the frames sent (Ethernet header included, FCS not).
    pub bytes: u64,
    /// Bytes of the first frame sent (rates count what followed it).
    pub first_len: u64,
    /// From the first send to the end of the last.
    pub duration: Duration,
    pub timing: TimingError,
    /// The run stopped at the deadline before the schedule's end.
    pub stopped_at_deadline: bool,
}

/// How long before a due time the sender stops sleeping and spins.
const SPIN_BEFORE: Duration = Duration::from_micros(200);

/// Waits until `due`: sleeps until [`SPIN_BEFORE`] ahead of it, then spins — at most
/// `SPIN_BEFORE` and a little, should the clock misbehave.
fn wait_until(due: Instant) {
    loop {
        let now = Instant::now();
        if now >= due {
            return;
        }
        let left = due - now;
        if left > SPIN_BEFORE {
            std::thread::sleep(left - SPIN_BEFORE);
            continue;
        }
        let bound = now + SPIN_BEFORE + Duration::from_micros(50);
        while Instant::now() < due && Instant::now() < bound {
            std::hint::spin_loop();
        }
        return;
    }
}

/// The clock [`pace_with`] keeps its schedule on: nanoseconds since the start, and a wait until
/// such a time. [`WallClock`] is the real one; tests drive a fake one.
pub trait PaceClock {
    fn now_ns(&mut self) -> u64;
    fn wait_until_ns(&mut self, t: u64);
}

/// The monotonic clock, from when it was made: sleeps until shortly before a due time, then spins.
#[derive(Debug, Clone, Copy)]
pub struct WallClock(Instant);

impl WallClock {
    pub fn start() -> WallClock {
        WallClock(Instant::now())
    }
}

impl PaceClock for WallClock {
    fn now_ns(&mut self) -> u64 {
        self.0.elapsed().as_nanos() as u64
    }
    fn wait_until_ns(&mut self, t: u64) {
        wait_until(self.0 + Duration::from_nanos(t));
    }
}

/// [`pace_with`] on the wall clock.
pub fn pace(schedule: &Schedule, limit: Duration, send: impl FnMut(usize) -> std::io::Result<usize>) -> SendLog {
    pace_with(schedule, limit, &mut WallClock::start(), send)
}

/// Sends every frame of `schedule` on time: `send(i)` sends one loop's frame `i` and returns
/// its length. Due times are absolute from one start, so a late send never delays the
/// following ones. Stops after `limit`. The send time recorded is taken right before `send`.
pub fn pace_with<C: PaceClock>(
    schedule: &Schedule,
    limit: Duration,
    clock: &mut C,
    mut send: impl FnMut(usize) -> std::io::Result<usize>,
) -> SendLog {
    let mut log = SendLog::default();
    let limit_ns = limit.as_nanos() as u64;
    let mut first: Option<u64> = None;
    let mut last_end = 0;
    for k in 0..schedule.len() {
        let due_ns = schedule.at(k);
        if due_ns > limit_ns {
            log.stopped_at_deadline = true;
            break;
        }
        clock.wait_until_ns(due_ns);
        let t = clock.now_ns();
        if t > limit_ns {
            log.stopped_at_deadline = true;
            break;
        }
        first.get_or_insert(t);
        match send(schedule.frame(k)) {
            Ok(n) => {
                if log.sent == 0 {
                    log.first_len = n as u64;
                }
                log.sent += 1;
                log.bytes += n as u64;
            }
            Err(e) => {
                log.errors += 1;
                log.first_error.get_or_insert_with(|| e.to_string());
            }
        }
        last_end = clock.now_ns();
        log.timing.record(due_ns, t);
    }
    log.duration = first.map_or(Duration::ZERO, |f| Duration::from_nanos(last_end.saturating_sub(f)));
    log
}

// ---- the raw socket ----

/// A send-only `AF_PACKET` raw socket on one interface of the namespace it was opened in.
struct PacketSocket {
    fd: std::os::fd::OwnedFd,
    ifindex: i32,
}

impl PacketSocket {
    fn open(ifname: &str) -> anyhow::Result<PacketSocket> {
        use std::os::fd::FromRawFd;
        let name = std::ffi::CString::new(ifname).context("interface name")?;
        // SAFETY: `name` is a valid NUL-terminated string for the call.
        let ifindex = unsafe { libc::if_nametoindex(name.as_ptr()) };
        if ifindex == 0 {
            bail!("interface {ifname}: {}", std::io::Error::last_os_error());
        }
        // SAFETY: plain socket(2) call; protocol 0 = send only, receive nothing.
        let raw = unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) };
        if raw < 0 {
            bail!("socket(AF_PACKET): {}", std::io::Error::last_os_error());
        }
        // SAFETY: `raw` is a fresh descriptor nothing else owns.
        let fd = unsafe { std::os::fd::OwnedFd::from_raw_fd(raw) };
        Ok(PacketSocket { fd, ifindex: ifindex as i32 })
    }

    /// Sends one Ethernet frame; a full queue (ENOBUFS / EAGAIN) is retried for up to 10 ms.
    fn send(&self, frame: &[u8]) -> std::io::Result<usize> {
        use std::os::fd::AsRawFd;
        // SAFETY: sockaddr_ll is plain data; all-zero is a valid value.
        let mut sa: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        sa.sll_family = libc::AF_PACKET as u16;
        sa.sll_ifindex = self.ifindex;
        sa.sll_halen = 6;
        sa.sll_addr[..6].copy_from_slice(&frame[..6]);
        let give_up = Instant::now() + Duration::from_millis(10);
        loop {
            // SAFETY: `frame` and `sa` are live for the call and the lengths match them.
            let n = unsafe {
                libc::sendto(
                    self.fd.as_raw_fd(),
                    frame.as_ptr().cast(),
                    frame.len(),
                    0,
                    (&sa as *const libc::sockaddr_ll).cast(),
                    std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t,
                )
            };
            if n >= 0 {
                return Ok(n as usize);
            }
            let e = std::io::Error::last_os_error();
            let busy = matches!(e.raw_os_error(), Some(libc::ENOBUFS) | Some(libc::EAGAIN));
            if !busy || Instant::now() >= give_up {
                return Err(e);
            }
            std::thread::yield_now();
        }
    }
}

/// Mean scheduled gap from which the sending thread asks for real-time scheduling: it then
/// spins at most a fifth of the time, so it cannot starve the switch daemons.
const REALTIME_MIN_GAP_NS: u64 = 1_000_000;

/// Sends `frames` on `schedule` from `ifname` inside namespace `netns`, on a dedicated thread
/// that enters it (setns affects only the calling thread). When the frames are at least
/// [`REALTIME_MIN_GAP_NS`] apart on average the thread asks for `SCHED_FIFO` priority 1, so a
/// busy machine (a compiler on every core) does not delay its wake-ups by milliseconds; where
/// that is not permitted it runs as a normal thread.
fn send_from_netns(
    netns: &str,
    ifname: &str,
    frames: Vec<Vec<u8>>,
    schedule: Schedule,
    limit: Duration,
) -> anyhow::Result<SendLog> {
    let ns_path = format!("/run/netns/{netns}");
    let (netns, ifname) = (netns.to_string(), ifname.to_string());
    let realtime = schedule.len() > 1 && schedule.duration_ns() / (schedule.len() - 1) >= REALTIME_MIN_GAP_NS;
    std::thread::spawn(move || -> anyhow::Result<SendLog> {
        crate::netns::enter(&netns).with_context(|| format!("entering {ns_path}"))?;
        // SAFETY: prctl(PR_SET_TIMERSLACK) takes plain integer arguments; 1 µs of slack keeps
        // the sleeps close to the 200 µs spin window.
        unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1000 as libc::c_ulong, 0, 0, 0) };
        if realtime {
            let param = libc::sched_param { sched_priority: 1 };
            // SAFETY: pid 0 is the calling thread; `param` is live for the call.
            if unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) } != 0 {
                tracing::debug!("SCHED_FIFO for the replay thread: {}", std::io::Error::last_os_error());
            }
        }
        let sock = PacketSocket::open(&ifname).with_context(|| format!("in namespace {ns_path}"))?;
        Ok(pace(&schedule, limit, |i| sock.send(&frames[i])))
    })
    .join()
    .map_err(|_| anyhow!("sender thread panicked"))?
}

// ---- report ----

/// The timing part of the report, in emulated ns.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TimingReport {
    pub gaps: u64,
    pub mean_scheduled_gap_ns: f64,
    pub mean_abs_error_ns: f64,
    /// Of the mean scheduled gap; `None` at top speed (nothing to be late against).
    pub mean_abs_error_pct: Option<f64>,
    pub max_abs_error_ns: u64,
}

impl TimingReport {
    /// Wall-clock timing errors as the report gives them, in emulated time at `dilation`;
    /// `None` with fewer than two frames (no gap).
    fn emulated(t: &TimingError, dilation: Dilation) -> Option<TimingReport> {
        let emu = |wall_ns: f64| wall_ns / dilation.factor();
        Some(TimingReport {
            gaps: t.gaps,
            mean_scheduled_gap_ns: emu(t.mean_scheduled_gap_ns()?),
            mean_abs_error_ns: emu(t.mean_abs_error_ns()?),
            mean_abs_error_pct: t.mean_abs_error_pct(),
            max_abs_error_ns: dilation.to_emulated_ns(t.max_abs_error_ns),
        })
    }
}

/// How the first switch classifies frames: what the per-class counts are made with.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Classifier {
    /// The rail switch the `--from` NIC is cabled to.
    pub switch: String,
    /// DSCP → traffic class (queue and PFC priority), 64 entries.
    #[serde(skip)]
    pub dscp_to_tc: Vec<u8>,
    /// Bit p: priority p is lossless (PFC).
    pub lossless_priorities: u8,
}

impl Classifier {
    /// The traffic class of `dscp` (0 outside the map).
    pub fn tc(&self, dscp: u8) -> u8 {
        self.dscp_to_tc.get(usize::from(dscp)).copied().unwrap_or(0)
    }
    pub fn is_lossless(&self, tc: u8) -> bool {
        tc < 8 && self.lossless_priorities & (1 << tc) != 0
    }
}

/// Frames of one traffic class (queue and PFC priority) at the first switch.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ClassCount {
    pub tc: u8,
    pub lossless: bool,
    /// Frames of the schedule (every loop) in this class.
    pub frames: u64,
    /// The DSCPs of those frames.
    pub dscps: Vec<u8>,
    /// The DSCPs the fabric maps to this class.
    pub fabric_dscps: Vec<u8>,
    /// Frames the first switch enqueued in this class during the replay, on every port but the
    /// one to the `--from` NIC (its `rocefab_queue_enqueued_packets_total`; all traffic of the
    /// switch, so frames it sends itself count too). `None` in a dry run.
    pub enqueued_at_switch: Option<u64>,
}

/// Frames whose VLAN tag was stripped, per tag and the class they took instead.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct VlanCount {
    pub vid: u16,
    pub pcp: u8,
    pub tags: u8,
    /// The frames' DSCP and the traffic class (priority) it gives them on the fabric.
    pub dscp: u8,
    pub tc: u8,
    pub frames: u64,
}

/// Frames per traffic class (every class with frames, and every lossless class).
pub fn classes(frames: &[Outgoing], loops: u32, c: &Classifier) -> Vec<ClassCount> {
    let mut v: Vec<ClassCount> = Vec::new();
    for tc in 0..8u8 {
        let mine: Vec<&Outgoing> = frames.iter().filter(|f| c.tc(f.dscp) == tc).collect();
        if mine.is_empty() && !c.is_lossless(tc) {
            continue;
        }
        let mut dscps: Vec<u8> = mine.iter().map(|f| f.dscp).collect();
        dscps.sort_unstable();
        dscps.dedup();
        let fabric_dscps = (0..64u8).filter(|&d| c.tc(d) == tc).collect();
        v.push(ClassCount {
            tc,
            lossless: c.is_lossless(tc),
            frames: mine.len() as u64 * u64::from(loops),
            dscps,
            fabric_dscps,
            enqueued_at_switch: None,
        });
    }
    v
}

/// Per queue (0..=7), the sum of `rocefab_queue_enqueued_packets_total` over every port but
/// `except` in a Prometheus text scrape.
pub fn enqueued_per_queue(text: &str, except: &str) -> [u64; 8] {
    let mut q = [0u64; 8];
    for s in rocefab_contracts::promtext::samples(text) {
        if s.name != "rocefab_queue_enqueued_packets_total" || s.label("port").as_deref() == Some(except) {
            continue;
        }
        if let Some(i) = s.label("queue").and_then(|v| v.parse::<usize>().ok()).filter(|&i| i < 8) {
            q[i] += s.value as u64;
        }
    }
    q
}

/// Frames whose VLAN tag was stripped, by (tag, DSCP).
pub fn vlan_counts(frames: &[Outgoing], loops: u32, c: &Classifier) -> Vec<VlanCount> {
    let mut m: BTreeMap<(VlanTag, u8), u64> = BTreeMap::new();
    for f in frames {
        if let Some(t) = f.vlan {
            *m.entry((t, f.dscp)).or_default() += u64::from(loops);
        }
    }
    m.into_iter()
        .map(|((t, dscp), frames)| VlanCount { vid: t.vid, pcp: t.pcp, tags: t.tags, dscp, tc: c.tc(dscp), frames })
        .collect()
}

/// The timing at the destination NICs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ReceiverReport {
    /// The NICs captured (`host2:gpu1`).
    pub ports: Vec<String>,
    /// Frames sent that were expected there, and those that arrived (matched by opcode, QP, PSN).
    pub frames_expected: u64,
    pub frames_received: u64,
    /// Arrival gaps against the schedule's gaps, emulated; `None` with fewer than two arrivals
    /// at one destination.
    pub timing: Option<TimingReport>,
}

/// What `rocefab replay` reports (`--json` prints it as is).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Report {
    pub fabric: String,
    pub file: PathBuf,
    pub from: String,
    pub sender: IpAddr,
    pub mapping: Vec<MapEntry>,
    pub dry_run: bool,
    pub pacing: String,
    pub loops: u32,
    pub frames_in_capture: usize,
    /// Frames of one loop that are injected.
    pub frames_to_inject: usize,
    /// The fabric's time dilation D: every time below is emulated (wall clock / D) and every
    /// rate per emulated second, except `wall_duration_s`.
    pub time_dilation: f64,
    pub scheduled_duration_s: f64,
    pub sent: u64,
    pub send_errors: u64,
    pub first_send_error: Option<String>,
    pub bytes: u64,
    /// From the first send to the end of the last.
    pub duration_s: f64,
    /// `duration_s` on the wall clock (× D).
    pub wall_duration_s: f64,
    /// Frames after the first per second of `duration_s` (so `--pps N` reports N).
    pub rate_pps: f64,
    /// Bits of the frames after the first per µs of `duration_s`.
    pub rate_mbps: f64,
    /// Measured at the sender: send timestamps against the schedule.
    pub timing: Option<TimingReport>,
    /// Measured at the destination NICs (kernel receive times): arrival gaps against the
    /// schedule. `None` in a dry run or when the destinations could not be captured (a warning
    /// says why).
    pub receiver: Option<ReceiverReport>,
    /// The first switch's classification of the frames.
    pub classifier: Classifier,
    /// Frames per traffic class at the first switch.
    pub traffic_classes: Vec<ClassCount>,
    /// Frames whose VLAN tag was stripped (the fabric is untagged), by tag.
    pub vlan_stripped: Vec<VlanCount>,
    /// The capture's gaps that the fabric cannot reproduce at its time dilation.
    pub gap_warning: Option<crate::replay_rx::GapWarning>,
    /// Everything worth a `warning:` line.
    pub warnings: Vec<String>,
    pub icrc_bad_in_capture: usize,
    pub padded: usize,
    pub stopped_at_max_duration: bool,
    pub skipped: Vec<SkipCount>,
}

/// What is replayed where: the fabric, the capture file and the sending GPU (`--from`).
#[derive(Debug, Clone, Copy)]
pub struct Origin<'a> {
    pub fabric: &'a str,
    pub file: &'a Path,
    pub from: &'a str,
}

impl Report {
    /// The report of a prepared capture, before (`log` = `None`: dry run) or after sending:
    /// `s` is the emulated schedule, `log` what [`pace`] did with `s.dilated(dilation)` on the
    /// wall clock.
    pub fn new(
        o: Origin,
        p: &Prepared,
        pace: Pace,
        s: &Schedule,
        dilation: Dilation,
        cls: &Classifier,
        log: Option<&SendLog>,
    ) -> Report {
        let wall = log.map_or(0.0, |l| l.duration.as_secs_f64());
        let d = dilation.to_emulated_secs(wall);
        // Rates between the first and the last send: the frames (and bits) after the first.
        let rate = |v: f64| if d > 0.0 { v / d } else { 0.0 };
        let (sent, bytes, first_len) = log.map_or((0, 0, 0), |l| (l.sent, l.bytes, l.first_len));
        let timing = log.and_then(|l| TimingReport::emulated(&l.timing, dilation));
        let mut r = Report {
            fabric: o.fabric.into(),
            file: o.file.into(),
            from: o.from.into(),
            sender: p.sender,
            mapping: p.mapping.clone(),
            dry_run: log.is_none(),
            pacing: pace.describe(),
            loops: s.loops,
            frames_in_capture: p.total,
            frames_to_inject: p.frames.len(),
            time_dilation: dilation.factor(),
            scheduled_duration_s: s.duration_ns() as f64 / 1e9,
            sent: log.map_or(0, |l| l.sent),
            send_errors: log.map_or(0, |l| l.errors),
            first_send_error: log.and_then(|l| l.first_error.clone()),
            bytes: log.map_or(0, |l| l.bytes),
            duration_s: d,
            wall_duration_s: wall,
            rate_pps: rate(sent.saturating_sub(1) as f64),
            rate_mbps: rate(bytes.saturating_sub(first_len) as f64 * 8.0 / 1e6),
            timing,
            receiver: None,
            classifier: cls.clone(),
            traffic_classes: classes(&p.frames, s.loops, cls),
            vlan_stripped: vlan_counts(&p.frames, s.loops, cls),
            gap_warning: None,
            warnings: Vec::new(),
            icrc_bad_in_capture: p.frames.iter().filter(|f| f.icrc_bad_in_capture).count(),
            padded: p.frames.iter().filter(|f| f.padded).count(),
            stopped_at_max_duration: log.is_some_and(|l| l.stopped_at_deadline),
            skipped: p.skipped.clone(),
        };
        r.warnings = r.class_warnings();
        r
    }

    /// Warnings about where the frames go: VLAN tags stripped, no lossless class used.
    fn class_warnings(&self) -> Vec<String> {
        let mut w = Vec::new();
        let vlan: u64 = self.vlan_stripped.iter().map(|v| v.frames).sum();
        if vlan > 0 {
            let tags: Vec<String> = self
                .vlan_stripped
                .iter()
                .map(|v| format!("vid {} pcp {} -> priority {} (DSCP {})", v.vid, v.pcp, v.tc, v.dscp))
                .collect();
            w.push(format!(
                "{vlan} frames had a VLAN tag, stripped: the fabric's ports are untagged and classify by DSCP, not PCP ({})",
                tags.join(", ")
            ));
        }
        let lossless: Vec<&ClassCount> = self.traffic_classes.iter().filter(|c| c.lossless).collect();
        let total: u64 = self.traffic_classes.iter().map(|c| c.frames).sum();
        if total > 0 && !lossless.is_empty() && lossless.iter().all(|c| c.frames == 0) {
            let how: Vec<String> =
                lossless.iter().map(|c| format!("priority {} = DSCP {}", c.tc, dscp_list(&c.fabric_dscps))).collect();
            w.push(format!(
                "no frame is in a lossless (PFC) class at {}: the capture's DSCPs ({}) map to lossy queues; the fabric's lossless classes are {}",
                self.classifier.switch,
                dscp_list(&self.traffic_classes.iter().flat_map(|c| c.dscps.clone()).collect::<Vec<_>>()),
                how.join(", ")
            ));
        }
        w
    }
}

/// `0-23,25,48`: sorted DSCPs with runs as ranges.
fn dscp_list(v: &[u8]) -> String {
    let mut v = v.to_vec();
    v.sort_unstable();
    v.dedup();
    if v.is_empty() {
        return "-".into();
    }
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < v.len() {
        let mut j = i;
        while j + 1 < v.len() && v[j + 1] == v[j] + 1 {
            j += 1;
        }
        out.push(if j > i { format!("{}-{}", v[i], v[j]) } else { v[i].to_string() });
        i = j + 1;
    }
    out.join(",")
}

/// The mapping, as printed before sending.
pub fn render_mapping(r: &Report) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "replaying {} ({}) from {} on fabric {}: capture endpoint -> fabric GPU",
        r.file.display(),
        plural(r.frames_in_capture as u64, "frame"),
        r.from,
        r.fabric
    );
    let width = r.mapping.iter().map(|m| m.endpoint.to_string().len()).max().unwrap_or(0);
    for m in &r.mapping {
        let _ = writeln!(o, "{}", m.line(width));
    }
    o
}

fn plural(n: u64, what: &str) -> String {
    if n == 1 {
        format!("1 {what}")
    } else {
        format!("{n} {what}s")
    }
}

/// The report after the mapping: what was sent (or would be), timing, ICRC, skip table.
pub fn render_report(r: &Report) -> String {
    let mut o = String::new();
    let loops = plural(u64::from(r.loops), "loop");
    let d = r.time_dilation;
    // At D = 1 emulated time is the wall clock and one duration says it all.
    let span = |emulated_s: f64| {
        if d == 1.0 {
            fmt_ns(emulated_s * 1e9)
        } else {
            format!(
                "{} emulated ({} wall clock at time_dilation {d})",
                fmt_ns(emulated_s * 1e9),
                fmt_ns(emulated_s * d * 1e9)
            )
        }
    };
    if r.dry_run {
        let _ = writeln!(
            o,
            "dry run: would send {} frames ({} per loop, {loops}) over {} ({})",
            r.frames_to_inject as u64 * u64::from(r.loops),
            r.frames_to_inject,
            span(r.scheduled_duration_s),
            r.pacing
        );
    } else {
        let per = if d == 1.0 { "" } else { " (emulated)" };
        let _ = writeln!(
            o,
            "sent {} frames ({} bytes) in {}: {:.1} frames/s, {:.3} Mbit/s{per} ({}, {loops})",
            r.sent,
            r.bytes,
            span(r.duration_s),
            r.rate_pps,
            r.rate_mbps,
            r.pacing
        );
        if r.send_errors > 0 {
            let _ =
                writeln!(o, "send errors: {} (first: {})", r.send_errors, r.first_send_error.as_deref().unwrap_or("?"));
        }
        if r.stopped_at_max_duration {
            let _ = writeln!(o, "stopped at --max-duration");
        }
        match &r.timing {
            Some(t) => {
                let pct = t.mean_abs_error_pct.map_or("-".to_string(), |p| format!("{p:.3} %"));
                let _ = writeln!(
                    o,
                    "timing error at the sender vs the schedule{}: mean {} per gap ({pct} of the mean scheduled gap {}), max {}",
                    if d == 1.0 { "" } else { " (emulated)" },
                    fmt_ns(t.mean_abs_error_ns),
                    fmt_ns(t.mean_scheduled_gap_ns),
                    fmt_ns(t.max_abs_error_ns as f64)
                );
            }
            None => {
                let _ = writeln!(o, "timing error: - (fewer than two frames sent)");
            }
        }
        if let Some(rx) = &r.receiver {
            let t = rx.timing.as_ref().map_or("- (fewer than two frames at one destination)".to_string(), |t| {
                let pct = t.mean_abs_error_pct.map_or("-".to_string(), |p| format!("{p:.3} %"));
                format!(
                    "mean {} per gap ({pct} of the mean scheduled gap {}), max {}",
                    fmt_ns(t.mean_abs_error_ns),
                    fmt_ns(t.mean_scheduled_gap_ns),
                    fmt_ns(t.max_abs_error_ns as f64)
                )
            });
            let _ = writeln!(
                o,
                "timing error at the receiver ({}, kernel receive times) vs the schedule{}: {t}; {} of {} frames arrived",
                rx.ports.join(", "),
                if d == 1.0 { "" } else { " (emulated)" },
                rx.frames_received,
                rx.frames_expected
            );
        }
    }
    let _ = writeln!(o, "frames by traffic class at {} (DSCP -> queue and PFC priority):", r.classifier.switch);
    for c in &r.traffic_classes {
        let measured =
            c.enqueued_at_switch.map_or(String::new(), |n| format!("; {} enqueued there during the replay", n));
        let _ = writeln!(
            o,
            "  {:>6}  queue {} {:<8}  capture DSCP {}, fabric DSCP {}{measured}",
            c.frames,
            c.tc,
            if c.lossless { "lossless" } else { "lossy" },
            dscp_list(&c.dscps),
            dscp_list(&c.fabric_dscps)
        );
    }
    for v in &r.vlan_stripped {
        let _ = writeln!(
            o,
            "  VLAN stripped: {:>6}  vid {} pcp {} -> queue {} by DSCP {}",
            v.frames, v.vid, v.pcp, v.tc, v.dscp
        );
    }
    let _ = writeln!(
        o,
        "ICRC was bad in the capture: {} (kept bad; every other ICRC recomputed after rewriting)",
        r.icrc_bad_in_capture
    );
    if r.padded > 0 {
        let _ =
            writeln!(o, "padded with zeros to the original length: {} (ICRC computed over the padded frame)", r.padded);
    }
    let skipped: u64 = r.skipped.iter().map(|s| s.frames).sum();
    let _ = writeln!(o, "skipped {skipped} of {} frames{}", r.frames_in_capture, if skipped > 0 { ":" } else { "" });
    for s in &r.skipped {
        let _ = writeln!(o, "  {:>6}  {}", s.frames, s.reason);
    }
    for w in &r.warnings {
        let _ = writeln!(o, "warning: {w}");
    }
    o
}

// ---- the command ----

/// Splits `[FABRIC] CAPTURE`.
fn split_positional(p: &[String]) -> anyhow::Result<(Option<&str>, PathBuf)> {
    match p {
        [file] => Ok((None, PathBuf::from(file))),
        [fabric, file] => Ok((Some(fabric.as_str()), PathBuf::from(file))),
        _ => bail!("expected [FABRIC] CAPTURE, got {} arguments: {}", p.len(), p.join(" ")),
    }
}

/// A topology file given where a fabric name goes (`rocefab replay topo.yaml --dry-run ...`).
fn is_topology_file(s: &str) -> bool {
    let p = Path::new(s);
    p.extension().is_some_and(|e| e == "yaml" || e == "yml") && p.is_file()
}

/// The rail switch a host NIC is cabled to, and the link's line rate.
fn switch_of(plan: &Plan, host: &str, nic: &str) -> Option<(String, u64)> {
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

/// The first switch's classifier for frames from `from` (`host:nic`).
pub fn classifier(plan: &Plan, from: &str) -> Classifier {
    let (host, nic) = from.split_once(':').unwrap_or((from, ""));
    let sw = switch_of(plan, host, nic).and_then(|(s, _)| plan.switch(&s).cloned());
    match sw {
        Some(s) => Classifier {
            switch: s.name.clone(),
            dscp_to_tc: s.config.dscp_to_tc.clone(),
            lossless_priorities: s.config.qos.lossless_priorities,
        },
        None => Classifier { switch: "?".into(), dscp_to_tc: vec![0; 64], lossless_priorities: 0 },
    }
}

/// The gap rule for frames from `from` to the GPUs `to`: switch hops (1 on one rail switch, 3
/// within a pod, 5 across pods) and the slowest host link on the way.
pub fn gap_rule(topo: &Topology, plan: &Plan, from: &str, to: &[&str], d: Dilation) -> crate::replay_rx::GapRule {
    let sw = |g: &str| {
        let (h, n) = g.split_once(':').unwrap_or((g, ""));
        switch_of(plan, h, n)
    };
    let pod = |name: &str| topo.switches.iter().find(|s| s.name == name).and_then(|s| s.pod);
    let src = sw(from);
    let mut hops = 1;
    let mut rate = src.as_ref().map_or(u64::MAX, |s| s.1);
    for t in to {
        if let (Some((a, _)), Some((b, r))) = (&src, sw(t)) {
            rate = rate.min(r);
            let h = if *a == b {
                1
            } else if pod(a) == pod(&b) {
                3
            } else {
                5
            };
            hops = hops.max(h);
        }
    }
    crate::replay_rx::GapRule {
        hops,
        cost_per_hop_wall_ns: crate::replay_rx::COST_PER_HOP_WALL_NS,
        line_rate_bps: if rate == u64::MAX { 0 } else { rate },
        time_dilation: d.factor(),
    }
}

/// Runs `rocefab replay`.
pub fn run(a: &ReplayArgs) -> anyhow::Result<()> {
    let (fabric, file) = split_positional(&a.positional)?;
    // A dry run needs the topology only: from --topology, a topology file in the fabric's
    // place, or the running fabric's state.
    let topo_file = a.topology.clone().or_else(|| fabric.filter(|f| is_topology_file(f)).map(PathBuf::from));
    let (fabric, st, topo, dilation) = match &topo_file {
        Some(t) => {
            if !a.dry_run {
                bail!("--topology {}: only a dry run works from a topology file; sending needs a running fabric (rocefab up {})", t.display(), t.display());
            }
            let topo = Topology::load(t)?;
            (topo.fabric.clone(), None, topo.clone(), topo.time_dilation)
        }
        None => {
            let fabric = match (fabric, a.dry_run) {
                (f, true) => crate::fabric::pick_fabric(f)
                    .map_err(|e| anyhow!("{e:#}; a dry run works from the topology file too: --topology FILE"))?,
                (f, false) => crate::fabric::pick_fabric(f)?,
            };
            let st = State::load(&fabric).with_context(|| {
                format!("fabric {fabric:?} is not up (no {})", rundir::state_path(&fabric).display())
            })?;
            let topo = Topology::load(&st.topology)?;
            let d = st.clock()?.dilation();
            (fabric, Some(st), topo, d)
        }
    };
    let plan = compile(&topo, 0);
    let gpus = gpus_of(&plan);
    // The error names the file (once) and what it is.
    let frames = pcap::read_all(&file)?;
    let opts =
        Options { file: &file, gpus: &gpus, from: &a.from, maps: &a.maps, sender: a.sender, pad: a.pad, mtu: plan.mtu };
    let prep = prepare(&frames, &opts)?;
    let pace = Pace::from_args(a);
    let ts: Vec<Duration> = prep.frames.iter().map(|f| f.timestamp).collect();
    let schedule = Schedule::new(&ts, pace, a.loops);
    let wall = schedule.dilated(dilation);
    let origin = Origin { fabric: &fabric, file: &file, from: &a.from };
    let cls = classifier(&plan, &a.from);
    let dests: Vec<&str> =
        prep.mapping.iter().filter(|m| m.how != MapHow::Sender).filter_map(|m| m.gpu.as_deref()).collect();
    let rule = gap_rule(&topo, &plan, &a.from, &dests, dilation);
    let lens: Vec<usize> = prep.frames.iter().map(|f| f.bytes.len()).collect();
    let gap_warning = rule.check(&schedule.offsets_ns, &lens);
    let mut dry = Report::new(origin, &prep, pace, &schedule, dilation, &cls, None);
    if let Some(w) = &gap_warning {
        dry.warnings.push(w.message.clone());
    }
    dry.gap_warning = gap_warning.clone();
    if a.json {
        eprint!("{}", render_mapping(&dry));
    } else {
        print!("{}", render_mapping(&dry));
    }
    if Duration::from_nanos(wall.duration_ns()) > a.max_duration {
        let emulated = if dilation.is_real_time() {
            String::new()
        } else {
            format!(
                " on the wall clock ({} emulated at time_dilation {dilation})",
                fmt_ns(schedule.duration_ns() as f64)
            )
        };
        bail!(
            "the schedule takes {:.3} s{emulated} ({} frames, {}, {}), longer than --max-duration {:.3} s",
            wall.duration_ns() as f64 / 1e9,
            schedule.len(),
            pace.describe(),
            plural(u64::from(a.loops), "loop"),
            a.max_duration.as_secs_f64()
        );
    }
    if a.dry_run {
        return print_report(&dry, a.json);
    }
    let st = st.expect("a run without --dry-run has a fabric");
    if prep.frames.is_empty() {
        print_report(&dry, a.json)?;
        bail!("nothing to send: no frame of the capture was sent by {}", prep.sender);
    }
    if !nix::unistd::geteuid().is_root() {
        bail!("sending into a fabric needs root (setns and AF_PACKET); --dry-run does not");
    }
    let gpu = gpus.iter().find(|g| g.name == a.from).expect("prepare checked --from");
    if !crate::netns::exists(&gpu.netns) {
        bail!("fabric {fabric}: namespace {} of {} does not exist", gpu.netns, gpu.name);
    }
    // Said before sending on stderr with --json (the text report ends with its warnings).
    if let (Some(w), true) = (&gap_warning, a.json) {
        eprintln!("warning: {}", w.message);
    }
    // Capture the destination NICs while sending (their agents' AF_PACKET sockets).
    let targets: Vec<(String, String)> =
        dests.iter().filter_map(|g| g.split_once(':')).map(|(h, n)| (h.to_string(), n.to_string())).collect();
    let idents: Vec<Option<crate::replay_rx::Ident>> =
        prep.frames.iter().map(|f| crate::replay_rx::ident(&f.bytes, gpu.ip)).collect();
    let mut warnings = Vec::new();
    let receivers = if a.no_receiver_timing || targets.is_empty() {
        None
    } else {
        match crate::replay_rx::Receivers::start(&crate::capture::daemon_urls(&st), &targets, gpu.ip) {
            Ok(r) => Some(r),
            Err(e) => {
                warnings.push(format!("receiver timing not measured: {e:#}"));
                None
            }
        }
    };
    // The first switch's queue counters before and after: where the frames went.
    let urls = crate::capture::daemon_urls(&st);
    let from_port = plan.links.iter().find_map(|l| {
        if l.a.node == cls.switch && l.b.node == gpu.name.split(':').next().unwrap_or("") && l.b.ifname == gpu.ifname {
            Some(l.a.ifname.clone())
        } else if l.b.node == cls.switch
            && l.a.node == gpu.name.split(':').next().unwrap_or("")
            && l.a.ifname == gpu.ifname
        {
            Some(l.b.ifname.clone())
        } else {
            None
        }
    });
    let queues = || -> Option<[u64; 8]> {
        let text =
            crate::fabric::scrape(&format!("{}/metrics", urls.get(&cls.switch)?), Duration::from_secs(2)).ok()?;
        Some(enqueued_per_queue(&text, from_port.as_deref()?))
    };
    let before = queues();
    let bytes: Vec<Vec<u8>> = prep.frames.iter().map(|f| f.bytes.clone()).collect();
    let log = send_from_netns(&gpu.netns, &gpu.ifname, bytes, wall.clone(), a.max_duration)?;
    let mut r = Report::new(origin, &prep, pace, &schedule, dilation, &cls, Some(&log));
    if let Some(rx) = receivers {
        // Frames sent (the pacer may have stopped at --max-duration) that the capture can match.
        let expected = (0..log.sent + log.errors).filter(|&k| idents[wall.frame(k)].is_some()).count() as u64;
        let ports = rx.ports.clone();
        let (arrivals, err) = rx.finish(expected, Duration::from_secs(2));
        if let Some(e) = err {
            warnings.push(format!("receiver capture: {e}"));
        }
        let (t, matched) = crate::replay_rx::match_arrivals(&wall, &idents, &arrivals);
        let timing = TimingReport::emulated(&t, dilation);
        if matched < expected {
            warnings.push(format!(
                "{} of {expected} frames did not arrive at {} within 2 s",
                expected - matched,
                ports.join(", ")
            ));
        }
        r.receiver = Some(ReceiverReport { ports, frames_expected: expected, frames_received: matched, timing });
    }
    match (before, queues()) {
        (Some(b), Some(a)) => {
            for c in &mut r.traffic_classes {
                c.enqueued_at_switch = Some(a[usize::from(c.tc)].saturating_sub(b[usize::from(c.tc)]));
            }
        }
        _ => warnings.push(format!(
            "the queue counters of {} could not be read: the traffic classes are by its DSCP map only",
            cls.switch
        )),
    }
    if let Some(w) = &gap_warning {
        r.warnings.push(w.message.clone());
    }
    r.gap_warning = gap_warning;
    r.warnings.extend(warnings);
    print_report(&r, a.json)?;
    if log.errors > 0 {
        bail!(
            "{} of {} frames could not be sent (first error: {})",
            log.errors,
            log.errors + log.sent,
            log.first_error.unwrap_or_default()
        );
    }
    Ok(())
}

fn print_report(r: &Report, json: bool) -> anyhow::Result<()> {
    if json {
        println!("{}", serde_json::to_string_pretty(r)?);
    } else {
        print!("{}", render_report(r));
    }
    Ok(())
}
