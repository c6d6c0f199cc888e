//! `rocefab frame`: build PFC / PAUSE / LLDP (with IEEE DCBX) / RoCEv2 / CNP frames from
//! command-line options and write them to a pcap or pcapng file (chosen by the extension).
//!
//! The frames come from `rocefab_wire` (IEEE 802.1Qbb / 802.3x MAC control, IEEE 802.1AB LLDP
//! with IEEE 802.1Qaz DCBX TLVs, IBTA Annex A17 RoCEv2). Numbers accept decimal or `0x` hex;
//! a bad value is reported by clap with the option's name.

use std::net::IpAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use rocefab_wire::dcbx::{AppEntry, AppPriority, AppSelector, DcbxTlv, EtsConfig, EtsTables, PfcConfig, Tsa};
use rocefab_wire::ethernet::{MacAddr, Priority, PrioritySet};
use rocefab_wire::lldp::{ChassisId, LldpduRepr, PortId, Tlv};
use rocefab_wire::mac_control::{MacControlRepr, PfcRepr};
use rocefab_wire::pcap::{Format, PcapWriter};
use rocefab_wire::roce::{self, aeth, atomic_ack_eth, atomic_eth, bth, deth, ieth, reth, Opcode, RoceFrame};

/// Arguments of `rocefab frame`.
#[derive(Debug, clap::Args)]
pub struct FrameArgs {
    #[command(subcommand)]
    pub kind: FrameKind,
}

/// The frame kinds `rocefab frame` builds.
#[derive(Debug, clap::Subcommand)]
pub enum FrameKind {
    /// IEEE 802.1Qbb priority-based flow control (EtherType 0x8808, opcode 0x0101).
    Pfc(PfcArgs),
    /// IEEE 802.3x PAUSE (EtherType 0x8808, opcode 0x0001).
    Pause(PauseArgs),
    /// LLDP (EtherType 0x88cc) with optional IEEE DCBX ETS / PFC / Application Priority TLVs.
    Lldp(LldpArgs),
    /// A RoCEv2 packet (UDP 4791) with BTH, the opcode's extension headers, payload and ICRC.
    Roce(RoceArgs),
    /// A RoCEv2 Congestion Notification Packet (opcode 0x81, DSCP 48).
    Cnp(CnpArgs),
}

/// Output options shared by every kind.
#[derive(Debug, clap::Args)]
pub struct Output {
    /// Output file; `.pcapng` writes pcapng, anything else classic pcap; `-` writes classic pcap
    /// to standard output.
    #[arg(short = 'w', long = "write", value_name = "FILE")]
    pub out: PathBuf,
    /// Number of frames to write (RoCEv2: the PSN increases by one per frame).
    #[arg(long, default_value_t = 1, value_parser = parse_count)]
    pub count: u32,
}

/// `rocefab frame pfc`.
#[derive(Debug, clap::Args)]
pub struct PfcArgs {
    /// Priorities to pause, e.g. `3` or `3,4`.
    #[arg(long, value_delimiter = ',', value_parser = parse_priority)]
    pub priorities: Vec<Priority>,
    /// Pause quanta: `V` for every priority in --priorities, or `P=V` for one priority (which is
    /// then enabled too); repeat or separate with commas.
    #[arg(long, value_delimiter = ',', default_value = "0xffff", value_parser = parse_quanta_spec)]
    pub quanta: Vec<QuantaSpec>,
    /// Source MAC (the sending port).
    #[arg(long, default_value = "02:00:00:00:00:01", value_parser = parse_mac)]
    pub src_mac: MacAddr,
    #[command(flatten)]
    pub output: Output,
}

/// One `--quanta` item.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QuantaSpec {
    /// Applies to every priority in `--priorities`.
    All(u16),
    /// Applies to one priority.
    One(Priority, u16),
}

/// `rocefab frame pause`.
#[derive(Debug, clap::Args)]
pub struct PauseArgs {
    /// Pause time in quanta (512 bit times each).
    #[arg(long, default_value = "0xffff", value_parser = parse_u16)]
    pub quanta: u16,
    /// Source MAC.
    #[arg(long, default_value = "02:00:00:00:00:01", value_parser = parse_mac)]
    pub src_mac: MacAddr,
    #[command(flatten)]
    pub output: Output,
}

/// `rocefab frame lldp`.
#[derive(Debug, clap::Args)]
pub struct LldpArgs {
    /// Chassis ID (MAC address subtype).
    #[arg(long, value_parser = parse_mac)]
    pub chassis_mac: MacAddr,
    /// Port ID (interface name subtype).
    #[arg(long)]
    pub port_id: String,
    /// Source MAC; defaults to the chassis MAC.
    #[arg(long, value_parser = parse_mac)]
    pub src_mac: Option<MacAddr>,
    /// Time to live in seconds.
    #[arg(long, default_value = "120", value_parser = parse_u16)]
    pub ttl: u16,
    /// System name TLV.
    #[arg(long)]
    pub system_name: Option<String>,
    /// PFC Configuration TLV: priorities with PFC enabled, e.g. `3` or `3,4`.
    #[arg(long, value_delimiter = ',', value_parser = parse_priority)]
    pub pfc_enable: Vec<Priority>,
    /// PFC Configuration TLV: set the willing bit.
    #[arg(long)]
    pub pfc_willing: bool,
    /// PFC Configuration TLV: PFC capability (priorities that can be enabled at once).
    #[arg(long, default_value = "8", value_parser = parse_pfc_cap)]
    pub pfc_cap: u8,
    /// Application Priority entries `SEL:PROTO=PRIO` with SEL one of udp, tcp, tcp-udp, dscp,
    /// ethertype, e.g. `udp:4791=3` or `dscp:24=3`. Repeat or separate with commas.
    #[arg(long, value_delimiter = ',', value_parser = parse_app)]
    pub app: Vec<AppEntry>,
    /// ETS Configuration TLV: bandwidth percent per traffic class, `TC:PCT,...`, e.g. `0:50,3:50`.
    /// Priority i maps to traffic class i unless --ets-prio-tc says otherwise.
    #[arg(long, value_delimiter = ',', value_parser = parse_tc_pct)]
    pub ets_bw: Vec<(u8, u8)>,
    /// ETS priority-to-TC assignment `PRIO:TC,...` (unlisted priorities: TC = priority).
    #[arg(long, value_delimiter = ',', value_parser = parse_prio_tc)]
    pub ets_prio_tc: Vec<(Priority, u8)>,
    /// ETS Configuration TLV: traffic classes using strict priority instead of ETS, e.g. `7`.
    #[arg(long, value_delimiter = ',', value_parser = parse_tc)]
    pub ets_strict: Vec<u8>,
    /// ETS Configuration TLV: set the willing bit.
    #[arg(long)]
    pub ets_willing: bool,
    #[command(flatten)]
    pub output: Output,
}

/// Addressing options of RoCEv2 frames.
#[derive(Debug, clap::Args)]
pub struct RoceAddr {
    /// Source IP (IPv4 or IPv6).
    #[arg(long, default_value = "10.0.0.1")]
    pub src_ip: IpAddr,
    /// Destination IP (same family as --src-ip).
    #[arg(long, default_value = "10.0.0.2")]
    pub dst_ip: IpAddr,
    /// Source MAC.
    #[arg(long, default_value = "02:00:00:00:00:01", value_parser = parse_mac)]
    pub src_mac: MacAddr,
    /// Destination MAC.
    #[arg(long, default_value = "02:00:00:00:00:02", value_parser = parse_mac)]
    pub dst_mac: MacAddr,
    /// UDP source port (default: derived from the QP like Linux `rdma_flow_label_to_udp_sport`).
    #[arg(long, value_parser = parse_u16)]
    pub udp_sport: Option<u16>,
    /// IPv4 TTL / IPv6 hop limit.
    #[arg(long, default_value = "64", value_parser = parse_u8)]
    pub ttl: u8,
}

/// `rocefab frame roce`.
#[derive(Debug, clap::Args)]
pub struct RoceArgs {
    /// BTH opcode: RC send-first, send-middle, send-last, send-last-imm, send-only,
    /// send-only-imm, write-first ... write-only-imm, read-request, read-response-first ...
    /// read-response-only, ack, atomic-ack, compare-swap, fetch-add, send-last-inv,
    /// send-only-inv; UC uc-send-first ... uc-write-only-imm; UD ud-send-only,
    /// ud-send-only-imm; cnp; or a number. The extension headers the opcode needs (IBTA vol. 1
    /// Table 38) are built from the options below.
    #[arg(long, default_value = "write-only", value_parser = parse_opcode)]
    pub opcode: Opcode,
    /// Destination QP (24 bits).
    #[arg(long, default_value = "0x12", value_parser = parse_u24)]
    pub qp: u32,
    /// Packet sequence number (24 bits) of the first frame.
    #[arg(long, default_value = "0", value_parser = parse_u24)]
    pub psn: u32,
    /// Partition key.
    #[arg(long, default_value = "0xffff", value_parser = parse_u16)]
    pub pkey: u16,
    /// Set the BTH AckReq bit.
    #[arg(long)]
    pub ack_req: bool,
    /// Set the BTH Solicited Event bit.
    #[arg(long)]
    pub se: bool,
    /// DSCP (0..=63).
    #[arg(long, default_value = "24", value_parser = parse_dscp)]
    pub dscp: u8,
    /// ECN codepoint: not-ect, ect1, ect0, ce (or 0..=3).
    #[arg(long, default_value = "ect0", value_parser = parse_ecn)]
    pub ecn: roce::IpEcn,
    /// Payload length in bytes (pattern 0,1,2,...), padded to 4 bytes per the BTH pad count.
    /// Default: 256 for SEND / WRITE / READ response opcodes, 0 for others (ACK, READ request,
    /// atomics).
    #[arg(long, value_parser = parse_len)]
    pub len: Option<usize>,
    /// RETH / AtomicETH virtual address (opcodes with RETH or AtomicETH).
    #[arg(long, default_value = "0x10000", value_parser = parse_u64)]
    pub va: u64,
    /// RETH / AtomicETH R_Key.
    #[arg(long, default_value = "0x1234", value_parser = parse_u32)]
    pub rkey: u32,
    /// RETH DMA length (default: --len).
    #[arg(long, value_parser = parse_u32)]
    pub dma_len: Option<u32>,
    /// AETH syndrome (ack, atomic-ack, read responses): ack, nak-psn, nak-inv, nak-access,
    /// nak-op, rnr, or a byte.
    #[arg(long, default_value = "ack", value_parser = parse_syndrome)]
    pub syndrome: aeth::Syndrome,
    /// AETH message sequence number (24 bits).
    #[arg(long, default_value = "0", value_parser = parse_u24)]
    pub msn: u32,
    /// Immediate data (opcodes with ImmDt).
    #[arg(long, default_value = "0", value_parser = parse_u32)]
    pub imm: u32,
    /// DETH Q_Key (UD opcodes).
    #[arg(long, default_value = "0x11111111", value_parser = parse_u32)]
    pub qkey: u32,
    /// DETH source QP (UD opcodes, 24 bits).
    #[arg(long, default_value = "0x1", value_parser = parse_u24)]
    pub src_qp: u32,
    /// AtomicETH swap data (compare-swap) or add data (fetch-add).
    #[arg(long, visible_alias = "add", default_value = "1", value_parser = parse_u64)]
    pub swap: u64,
    /// AtomicETH compare data (compare-swap).
    #[arg(long, default_value = "0", value_parser = parse_u64)]
    pub compare: u64,
    /// AtomicAckETH original remote data (atomic-ack).
    #[arg(long, default_value = "0", value_parser = parse_u64)]
    pub orig: u64,
    /// IETH R_Key to invalidate (send-last-inv, send-only-inv; default: --rkey).
    #[arg(long, value_parser = parse_u32)]
    pub invalidate_rkey: Option<u32>,
    /// Corrupt the ICRC (to test receivers).
    #[arg(long)]
    pub bad_icrc: bool,
    #[command(flatten)]
    pub addr: RoceAddr,
    #[command(flatten)]
    pub output: Output,
}

/// `rocefab frame cnp`.
#[derive(Debug, clap::Args)]
pub struct CnpArgs {
    /// The QP being notified (DestQP of the CNP, 24 bits).
    #[arg(long, default_value = "0x12", value_parser = parse_u24)]
    pub qp: u32,
    /// DSCP (0..=63).
    #[arg(long, default_value = "48", value_parser = parse_dscp)]
    pub dscp: u8,
    #[command(flatten)]
    pub addr: RoceAddr,
    #[command(flatten)]
    pub output: Output,
}

// ---- value parsers (clap prefixes their errors with the option name) ----

/// Parses decimal or `0x` hexadecimal.
pub fn parse_u64(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let r = if let Some(h) = t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        u64::from_str_radix(&h.replace('_', ""), 16)
    } else {
        t.replace('_', "").parse::<u64>()
    };
    r.map_err(|e| format!("{s:?} is not a number (decimal or 0x hex): {e}"))
}

fn parse_bounded(s: &str, max: u64) -> Result<u64, String> {
    let v = parse_u64(s)?;
    if v > max {
        return Err(format!("{s} is larger than the maximum {max:#x}"));
    }
    Ok(v)
}

fn parse_u8(s: &str) -> Result<u8, String> {
    parse_bounded(s, 0xff).map(|v| v as u8)
}
fn parse_u16(s: &str) -> Result<u16, String> {
    parse_bounded(s, 0xffff).map(|v| v as u16)
}
fn parse_u24(s: &str) -> Result<u32, String> {
    parse_bounded(s, 0xff_ffff).map(|v| v as u32)
}
fn parse_u32(s: &str) -> Result<u32, String> {
    parse_bounded(s, 0xffff_ffff).map(|v| v as u32)
}
fn parse_dscp(s: &str) -> Result<u8, String> {
    parse_bounded(s, 63).map(|v| v as u8)
}
fn parse_len(s: &str) -> Result<usize, String> {
    parse_bounded(s, 9000).map(|v| v as usize)
}
fn parse_count(s: &str) -> Result<u32, String> {
    match parse_bounded(s, 1_000_000)? {
        0 => Err("must be at least 1".into()),
        v => Ok(v as u32),
    }
}
fn parse_pfc_cap(s: &str) -> Result<u8, String> {
    parse_bounded(s, 15).map(|v| v as u8)
}
fn parse_tc(s: &str) -> Result<u8, String> {
    parse_bounded(s, 7).map(|v| v as u8)
}

fn parse_priority(s: &str) -> Result<Priority, String> {
    let v = parse_u64(s)?;
    u8::try_from(v).ok().and_then(|v| Priority::try_new(v).ok()).ok_or_else(|| format!("priority {s} is not in 0..=7"))
}

fn parse_mac(s: &str) -> Result<MacAddr, String> {
    s.parse::<MacAddr>().map_err(|e| e.to_string())
}

fn parse_quanta_spec(s: &str) -> Result<QuantaSpec, String> {
    match s.split_once('=') {
        Some((p, v)) => Ok(QuantaSpec::One(parse_priority(p)?, parse_u16(v)?)),
        None => Ok(QuantaSpec::All(parse_u16(s)?)),
    }
}

fn parse_opcode(s: &str) -> Result<Opcode, String> {
    Opcode::from_name(s).ok_or_else(|| {
        let names: Vec<&str> = Opcode::ALL.iter().map(|o| o.name()).collect();
        format!("unknown opcode {s:?}; use a number or one of {}", names.join(", "))
    })
}

fn parse_ecn(s: &str) -> Result<roce::IpEcn, String> {
    use roce::IpEcn;
    Ok(match s.to_ascii_lowercase().as_str() {
        "not-ect" | "notect" | "0" => IpEcn::NotEct,
        "ect1" | "ect(1)" | "1" => IpEcn::Ect1,
        "ect0" | "ect(0)" | "2" => IpEcn::Ect0,
        "ce" | "3" => IpEcn::CongestionExperienced,
        _ => return Err(format!("{s:?} is not an ECN codepoint (not-ect, ect1, ect0, ce, 0..=3)")),
    })
}

fn parse_syndrome(s: &str) -> Result<aeth::Syndrome, String> {
    use aeth::{NakCode, Syndrome};
    Ok(match s.to_ascii_lowercase().as_str() {
        "ack" => Syndrome::Ack { credits: 0x1f },
        "nak-psn" | "nak-seq" => Syndrome::Nak(NakCode::PsnSequenceError),
        "nak-inv" => Syndrome::Nak(NakCode::InvalidRequest),
        "nak-access" => Syndrome::Nak(NakCode::RemoteAccessError),
        "nak-op" => Syndrome::Nak(NakCode::RemoteOperationalError),
        "rnr" => Syndrome::RnrNak { timer: 0 },
        _ => Syndrome::from(parse_u8(s).map_err(|_| {
            format!("{s:?} is not a syndrome (ack, nak-psn, nak-inv, nak-access, nak-op, rnr or a byte)")
        })?),
    })
}

fn parse_app(s: &str) -> Result<AppEntry, String> {
    let err = || format!("{s:?} is not SEL:PROTO=PRIO (e.g. udp:4791=3, dscp:24=3)");
    let (sel, rest) = s.split_once(':').ok_or_else(err)?;
    let (proto, prio) = rest.split_once('=').ok_or_else(err)?;
    let selector = match sel.to_ascii_lowercase().as_str() {
        "ethertype" => AppSelector::Ethertype,
        "tcp" => AppSelector::TcpSctpPort,
        "udp" => AppSelector::UdpDccpPort,
        "tcp-udp" => AppSelector::TcpSctpUdpDccpPort,
        "dscp" => AppSelector::Dscp,
        _ => return Err(format!("unknown selector {sel:?} in {s:?} (ethertype, tcp, udp, tcp-udp, dscp)")),
    };
    let protocol = if selector == AppSelector::Dscp { u16::from(parse_dscp(proto)?) } else { parse_u16(proto)? };
    Ok(AppEntry { priority: parse_priority(prio)?, selector, protocol })
}

fn parse_tc_pct(s: &str) -> Result<(u8, u8), String> {
    let (tc, pct) = s.split_once(':').ok_or_else(|| format!("{s:?} is not TC:PERCENT (e.g. 3:50)"))?;
    let pct = parse_bounded(pct, 100).map_err(|e| format!("bandwidth {e}"))? as u8;
    Ok((parse_tc(tc).map_err(|e| format!("traffic class {e}"))?, pct))
}

fn parse_prio_tc(s: &str) -> Result<(Priority, u8), String> {
    let (p, tc) = s.split_once(':').ok_or_else(|| format!("{s:?} is not PRIO:TC (e.g. 3:3)"))?;
    Ok((parse_priority(p)?, parse_tc(tc)?))
}

// ---- building ----

impl PfcArgs {
    /// The PFC payload these options describe.
    pub fn repr(&self) -> Result<PfcRepr> {
        let mut enabled: PrioritySet = self.priorities.iter().copied().collect();
        let mut quanta = [0u16; 8];
        for q in &self.quanta {
            if let QuantaSpec::All(v) = q {
                for p in enabled.iter() {
                    quanta[usize::from(p.value())] = *v;
                }
            }
        }
        for q in &self.quanta {
            if let QuantaSpec::One(p, v) = q {
                enabled.insert(*p);
                quanta[usize::from(p.value())] = *v;
            }
        }
        if enabled.bits() == 0 {
            bail!("--priorities: no priority given (use --priorities 3 or --quanta 3=0xffff)");
        }
        Ok(PfcRepr { enabled, quanta })
    }
}

impl LldpArgs {
    /// The LLDPDU these options describe.
    pub fn repr(&self) -> Result<LldpduRepr> {
        let mut tlvs = Vec::new();
        if let Some(n) = &self.system_name {
            tlvs.push(Tlv::SystemName { text: n.clone() });
        }
        if !self.ets_bw.is_empty() || !self.ets_prio_tc.is_empty() || !self.ets_strict.is_empty() {
            let mut tables = EtsTables::default();
            for (p, tc) in tables.prio_tc.iter_mut().enumerate() {
                *tc = p as u8;
            }
            for (p, tc) in &self.ets_prio_tc {
                tables.prio_tc[usize::from(p.value())] = *tc;
            }
            tables.tsa = [Tsa::Ets; 8];
            for (tc, pct) in &self.ets_bw {
                tables.tc_bandwidth[usize::from(*tc)] = *pct;
            }
            for tc in &self.ets_strict {
                tables.tsa[usize::from(*tc)] = Tsa::Strict;
                tables.tc_bandwidth[usize::from(*tc)] = 0;
            }
            let total: u32 = tables.tc_bandwidth.iter().map(|&b| u32::from(b)).sum();
            if total != 100 {
                bail!("--ets-bw: ETS bandwidths add up to {total}%, not 100% (IEEE 802.1Q D.2.9)");
            }
            let ets = EtsConfig { willing: self.ets_willing, cbs: false, max_tcs: 8, tables };
            tlvs.push(DcbxTlv::EtsConfiguration(ets).into());
        }
        if !self.pfc_enable.is_empty() || self.pfc_willing {
            let pfc = PfcConfig {
                willing: self.pfc_willing,
                mbc: false,
                pfc_cap: self.pfc_cap,
                enabled: self.pfc_enable.iter().copied().collect(),
            };
            tlvs.push(DcbxTlv::PfcConfiguration(pfc).into());
        }
        if !self.app.is_empty() {
            tlvs.push(DcbxTlv::ApplicationPriority(AppPriority { entries: self.app.clone() }).into());
        }
        if self.port_id.is_empty() || self.port_id.len() > 255 {
            bail!("--port-id: must be 1..=255 bytes, got {}", self.port_id.len());
        }
        Ok(LldpduRepr {
            chassis_id: ChassisId::MacAddress(self.chassis_mac),
            port_id: PortId::InterfaceName(self.port_id.clone()),
            ttl: self.ttl,
            tlvs,
        })
    }
}

fn roce_frame<'a>(
    addr: &RoceAddr,
    headers: roce::Repr,
    payload: &'a [u8],
    dscp: u8,
    ecn: roce::IpEcn,
) -> Result<RoceFrame<'a>> {
    if addr.src_ip.is_ipv4() != addr.dst_ip.is_ipv4() {
        bail!("--dst-ip: {} is not of the same family as --src-ip {}", addr.dst_ip, addr.src_ip);
    }
    let mut f = RoceFrame::new(addr.src_mac.0, addr.dst_mac.0, addr.src_ip, addr.dst_ip, headers, payload);
    f.dscp = dscp;
    f.ecn = ecn;
    f.ttl = addr.ttl;
    if let Some(p) = addr.udp_sport {
        f.udp_src_port = p;
    }
    Ok(f)
}

impl RoceArgs {
    /// The InfiniBand headers for the frame with index `i` (PSN = --psn + i).
    pub fn headers(&self, i: u32) -> roce::Repr {
        let mut b = bth::Repr::new(self.opcode, self.qp, self.psn.wrapping_add(i));
        b.pkey = self.pkey;
        b.ack_req = self.ack_req;
        b.solicited = self.se;
        if self.opcode == Opcode::Cnp {
            b.becn = true;
        }
        let l = self.opcode.layout();
        roce::Repr {
            bth: b,
            deth: l.deth.then_some(deth::Repr { q_key: self.qkey, src_qp: self.src_qp }),
            reth: l.reth.then(|| reth::Repr {
                va: self.va,
                r_key: self.rkey,
                dma_len: self.dma_len.unwrap_or(self.payload_len() as u32),
            }),
            atomic_eth: l.atomic_eth.then_some(atomic_eth::Repr {
                va: self.va,
                r_key: self.rkey,
                swap_add: self.swap,
                compare: self.compare,
            }),
            aeth: l.aeth.then_some(aeth::Repr { syndrome: self.syndrome, msn: self.msn }),
            atomic_ack_eth: l.atomic_ack_eth.then_some(atomic_ack_eth::Repr { orig_remote_data: self.orig }),
            immediate: l.immdt.then_some(self.imm),
            ieth: l.ieth.then_some(ieth::Repr { r_key: self.invalidate_rkey.unwrap_or(self.rkey) }),
        }
    }

    /// Payload length: --len, or the opcode's default.
    pub fn payload_len(&self) -> usize {
        // SEND, RDMA WRITE and READ responses (RC, UC, UD) carry data by default.
        let data = !matches!(self.opcode, Opcode::Unknown(_) | Opcode::Cnp)
            && matches!(u8::from(self.opcode) & 0x1f, 0x00..=0x0b | 0x0d..=0x10 | 0x16 | 0x17);
        match self.len {
            _ if self.opcode.layout().cnp_pad => 0,
            Some(l) => l,
            None if data => 256,
            None => 0,
        }
    }

    /// The frames these options describe.
    pub fn frames(&self) -> Result<Vec<Vec<u8>>> {
        let len = self.payload_len();
        let payload: Vec<u8> = (0..len).map(|i| i as u8).collect();
        let mut out = Vec::new();
        for i in 0..self.output.count {
            let f = roce_frame(&self.addr, self.headers(i), &payload, self.dscp, self.ecn)?;
            let mut v = f.to_vec().context("building the RoCEv2 frame")?;
            if self.bad_icrc {
                // The ICRC ends the IP packet; Ethernet padding may follow short frames.
                v[natural_len(&f) - 1] ^= 0xff;
            }
            out.push(v);
        }
        Ok(out)
    }
}

fn natural_len(f: &RoceFrame<'_>) -> usize {
    let ip = if f.src_ip.is_ipv4() { 20 } else { 40 };
    14 + ip + 8 + f.headers.header_len() + f.payload.len() + usize::from(roce::pad_for(f.payload.len())) + 4
}

impl CnpArgs {
    /// The frames these options describe.
    pub fn frames(&self) -> Result<Vec<Vec<u8>>> {
        let a = &self.addr;
        let mut f = roce::cnp(a.src_mac.0, a.dst_mac.0, a.src_ip, a.dst_ip, self.qp);
        let headers = f.headers;
        let ecn = f.ecn;
        f = roce_frame(a, headers, &[], self.dscp, ecn)?;
        let v = f.to_vec().context("building the CNP")?;
        Ok((0..self.output.count).map(|_| v.clone()).collect())
    }
}

fn write(output: &Output, frames: &[Vec<u8>]) -> Result<()> {
    if output.out.as_os_str() == "-" {
        // Standard output, classic pcap (as `tcpdump -w -`), for `| tshark -r -`.
        let w = PcapWriter::new(std::io::stdout().lock(), Format::Pcap, "-").context("writing -")?;
        return write_frames(w, &output.out, frames);
    }
    let format = Format::from_path(&output.out);
    let w = PcapWriter::create(&output.out, format).with_context(|| format!("creating {}", output.out.display()))?;
    write_frames(w, &output.out, frames)
}

fn write_frames<W: std::io::Write>(mut w: PcapWriter<W>, out: &std::path::Path, frames: &[Vec<u8>]) -> Result<()> {
    for (i, f) in frames.iter().enumerate() {
        w.write_frame(Duration::from_micros(i as u64), f).with_context(|| format!("writing {}", out.display()))?;
    }
    w.finish().with_context(|| format!("finishing {}", out.display()))?;
    Ok(())
}

/// Runs `rocefab frame`.
pub fn run(args: &FrameArgs) -> Result<()> {
    let (output, frames) = match &args.kind {
        FrameKind::Pfc(a) => {
            let f = MacControlRepr::Pfc(a.repr()?).to_frame(a.src_mac);
            (&a.output, vec![f.to_vec(); a.output.count as usize])
        }
        FrameKind::Pause(a) => {
            let f = MacControlRepr::Pause { quanta: a.quanta }.to_frame(a.src_mac);
            (&a.output, vec![f.to_vec(); a.output.count as usize])
        }
        FrameKind::Lldp(a) => {
            let f = a.repr()?.to_frame(a.src_mac.unwrap_or(a.chassis_mac)).context("building the LLDP frame")?;
            (&a.output, vec![f; a.output.count as usize])
        }
        FrameKind::Roce(a) => (&a.output, a.frames()?),
        FrameKind::Cnp(a) => (&a.output, a.frames()?),
    };
    write(output, &frames)?;
    eprintln!("wrote {} frame(s) to {}", frames.len(), output.out.display());
    Ok(())
}
