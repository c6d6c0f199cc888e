//! The LLDP agent of one port (IEEE 802.1AB-2016 clause 9, simplified to what a DCBX peer
//! needs): transmit timer with fast start, a shutdown LLDPDU, receive with validation, and a
//! neighbour table with one entry per MSAP (Chassis ID, Port ID), each aged out at its TTL.
//!
//! - Transmit: every `tx_interval` (msgTxInterval, 30 s by default); after link up or a new
//!   neighbour, `fast_count` LLDPDUs `fast_interval` apart (txFastInit 4, msgFastTx 1 s).
//! - TTL: `ttl` seconds (msgTxInterval × msgTxHold = 120 s by default); 0 in the shutdown
//!   LLDPDU sent when the agent stops (9.2.7.7.2).
//! - Receive: an LLDPDU that does not parse (a TLV past the end, mandatory TLVs missing, out of
//!   order, malformed or repeated, End with a length) is counted in `rx_malformed` and discarded
//!   (9.2.7.7.1); the neighbour entry stays as it was. An optional TLV whose contents do not
//!   decode is dropped alone and counted in `rx_tlvs_discarded` (9.2.7.7.2). TTL 0 deletes the
//!   sender's entry at once.
//! - Neighbour table: one entry per MSAP identifier (Chassis ID + Port ID, IEEE 802.1AB),
//!   so two agents on one link (lldpd beside rocefab-nicd on a NIC) are two entries, each kept
//!   until its own TTL runs out. At most [`PortAgent::max_neighbours`] entries per port
//!   ([`MAX_NEIGHBOURS`] by default); the LLDPDU of a further MSAP is discarded and counted in
//!   `table_drops` (802.1AB tooManyNeighbors; LLDP-MIB lldpStatsRemTablesDrops).
//! - Which entry DCBX acts on (the *primary* neighbour, [`PortAgent::neighbour`]): the entry that
//!   matches the port's expected neighbour ([`PortAgent::expect`]: the System Name and Port ID
//!   the topology cables the port to) if there is one; otherwise the entry learned first (ties:
//!   the lower MSAP). A newcomer never takes DCBX over from an entry that is already there.
//!   The report lists every entry ordered by MSAP (Chassis ID, then Port ID, as text).
//!
//! Pure: every call takes the time `now` in nanoseconds of a monotonic clock.
use rocefab_wire::ethernet::MacAddr;
use rocefab_wire::lldp::{ChassisId, LldpduRepr, PortId, SystemCapabilities, Tlv};
use serde::{Deserialize, Serialize};

use crate::dcb::{negotiate, Dcb, DcbxTlvs, Mismatch, Oper, PeerDcb};

/// Longest Port ID, System Name or Port Description text (IEEE 802.1AB 8.5: 255 octets; the
/// Port ID's subtype octet is part of its 256).
pub const MAX_TEXT: usize = 255;

/// Cuts `s` to at most `max` bytes at a character boundary.
fn clip(s: &mut String, max: usize) {
    if s.len() > max {
        let mut end = max;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        s.truncate(end);
    }
}

/// Nanoseconds per second.
pub const NS: u64 = 1_000_000_000;

/// Entries a port's neighbour table holds by default: a link has one peer, a few more cover
/// extra agents on the peer (lldpd beside the NIC agent) and a hub or tap in between.
pub const MAX_NEIGHBOURS: usize = 8;

/// Timing of an agent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Timing {
    /// msgTxInterval, ns.
    pub tx_interval_ns: u64,
    /// TTL advertised, seconds.
    pub ttl_s: u16,
    /// msgFastTx, ns.
    pub fast_interval_ns: u64,
    /// txFastInit: LLDPDUs sent fast after link up or a new neighbour.
    pub fast_count: u32,
}

impl From<&rocefab_contracts::config::LldpConfig> for Timing {
    /// The timing a topology's `lldp:` section configures (ms and s to ns).
    fn from(c: &rocefab_contracts::config::LldpConfig) -> Self {
        Timing {
            tx_interval_ns: c.tx_interval_ms.saturating_mul(1_000_000),
            ttl_s: c.ttl_s,
            fast_interval_ns: c.fast_interval_ms.saturating_mul(1_000_000),
            fast_count: c.fast_count,
        }
    }
}

impl Default for Timing {
    fn default() -> Self {
        Timing { tx_interval_ns: 30 * NS, ttl_s: 120, fast_interval_ns: NS, fast_count: 4 }
    }
}

/// Who this port is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Identity {
    /// Chassis ID (MAC subtype): the switch's system MAC, or the NIC's own MAC.
    pub chassis_mac: [u8; 6],
    /// Source MAC of the LLDPDUs: the port's MAC.
    pub mac: [u8; 6],
    /// Port ID (interface name subtype).
    pub port: String,
    pub system_name: String,
    pub port_description: String,
    /// System Capabilities: true for a bridge/router, false for a station (a NIC).
    pub bridge: bool,
}

/// A neighbour as its last LLDPDU described it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Neighbour {
    /// Chassis ID as text (the MAC, or the name for name subtypes).
    pub chassis: String,
    /// Chassis MAC when the Chassis ID is a MAC address.
    pub chassis_mac: Option<String>,
    /// Port ID as text.
    pub port: String,
    pub system_name: Option<String>,
    pub port_description: Option<String>,
    /// TTL the neighbour advertised, seconds.
    pub ttl_s: u16,
    /// What its DCBX TLVs said.
    pub dcb: PeerDcb,
    #[serde(skip)]
    pub(crate) mac: Option<[u8; 6]>,
    #[serde(skip)]
    pub(crate) expires_ns: u64,
    /// When the entry was created (agent clock): the primary neighbour is the oldest one.
    #[serde(skip)]
    pub(crate) since_ns: u64,
}

impl Neighbour {
    /// The MSAP identifier (Chassis ID, Port ID) as text: the table's key.
    pub fn msap(&self) -> (&str, &str) {
        (&self.chassis, &self.port)
    }
}

/// The neighbour the topology cables a port to, as our own agents identify themselves: System
/// Name (the node) and Port ID (the interface name).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Expected {
    pub system_name: String,
    pub port: String,
}

impl Expected {
    /// From a topology peer `node:ifname` (`host1:gpu0`); `None` without a colon.
    pub fn from_peer(peer: &str) -> Option<Expected> {
        let (node, port) = peer.split_once(':')?;
        (!node.is_empty() && !port.is_empty()).then(|| Expected { system_name: node.into(), port: port.into() })
    }

    /// Whether `n` is this neighbour.
    pub fn matches(&self, n: &Neighbour) -> bool {
        n.system_name.as_deref() == Some(self.system_name.as_str()) && n.port == self.port
    }
}

/// Counters of one port's agent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Counters {
    pub tx_frames: u64,
    pub rx_frames: u64,
    /// LLDPDUs discarded because they did not parse.
    pub rx_malformed: u64,
    /// Neighbours deleted because their TTL ran out.
    pub ageouts: u64,
    /// Shutdown LLDPDUs (TTL 0) received.
    pub rx_shutdown: u64,
    /// Times the primary neighbour (the one DCBX acts on) became a different one while the
    /// port had one.
    pub neighbour_changes: u64,
    /// Entries created in the neighbour table (lldpStatsRemTablesInserts).
    #[serde(default)]
    pub inserts: u64,
    /// Entries deleted by a shutdown LLDPDU (TTL 0).
    #[serde(default)]
    pub deletes: u64,
    /// LLDPDUs of a new MSAP discarded because the table was full (tooManyNeighbors,
    /// lldpStatsRemTablesDrops).
    #[serde(default)]
    pub table_drops: u64,
    /// Optional TLVs discarded from accepted LLDPDUs because their contents did not decode
    /// (statsTLVsDiscardedTotal).
    #[serde(default)]
    pub rx_tlvs_discarded: u64,
}

/// What a received frame did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Rx {
    /// A neighbour's LLDPDU; `new` when it created an entry (an MSAP not in the table).
    Neighbour { new: bool },
    /// A shutdown LLDPDU (its entry, if there was one, is gone).
    Shutdown,
    /// The LLDPDU of a new MSAP, discarded: the table is full (tooManyNeighbors).
    TableFull,
    /// Discarded: the reason.
    Malformed(String),
}

/// The agent of one port.
#[derive(Debug, Clone)]
pub struct PortAgent {
    timing: Timing,
    id: Identity,
    dcb: Dcb,
    next_tx_ns: u64,
    fast_left: u32,
    /// The neighbour table, sorted by MSAP.
    neighbours: Vec<Neighbour>,
    max_neighbours: usize,
    expected: Option<Expected>,
    counters: Counters,
    last_error: Option<String>,
}

impl PortAgent {
    /// A port that just came up: the first LLDPDU is due at once, then fast start.
    /// Names longer than an LLDP TLV holds (255 octets) are cut, so every LLDPDU emits.
    pub fn new(timing: Timing, mut id: Identity, dcb: Dcb, now: u64) -> PortAgent {
        for s in [&mut id.port, &mut id.system_name, &mut id.port_description] {
            clip(s, MAX_TEXT);
        }
        PortAgent {
            timing,
            id,
            dcb,
            next_tx_ns: now,
            fast_left: timing.fast_count,
            neighbours: Vec::new(),
            max_neighbours: MAX_NEIGHBOURS,
            expected: None,
            counters: Counters::default(),
            last_error: None,
        }
    }

    /// Sets the neighbour the port is cabled to: when its entry is in the table, DCBX acts on
    /// it whatever else the port hears.
    pub fn expect(&mut self, expected: Option<Expected>) {
        self.expected = expected;
    }

    /// Bounds the neighbour table (at least 1 entry).
    pub fn set_max_neighbours(&mut self, max: usize) {
        self.max_neighbours = max.max(1);
    }

    /// Most entries the neighbour table holds.
    pub fn max_neighbours(&self) -> usize {
        self.max_neighbours
    }

    /// Link up (again): fast start.
    pub fn link_up(&mut self, now: u64) {
        self.fast_left = self.timing.fast_count;
        self.next_tx_ns = now;
    }

    pub fn identity(&self) -> &Identity {
        &self.id
    }
    pub fn dcb(&self) -> &Dcb {
        &self.dcb
    }
    pub fn counters(&self) -> Counters {
        self.counters
    }
    /// The primary neighbour: the one DCBX acts on (see the module docs).
    pub fn neighbour(&self) -> Option<&Neighbour> {
        self.primary().map(|i| &self.neighbours[i])
    }
    /// Every entry of the neighbour table, ordered by MSAP.
    pub fn neighbours(&self) -> &[Neighbour] {
        &self.neighbours
    }

    /// Index of the primary neighbour: the expected one, else the oldest (ties: lower MSAP,
    /// which comes first in the sorted table).
    fn primary(&self) -> Option<usize> {
        if let Some(e) = &self.expected {
            if let Some(i) = self.neighbours.iter().position(|n| e.matches(n)) {
                return Some(i);
            }
        }
        self.neighbours.iter().enumerate().min_by_key(|(_, n)| n.since_ns).map(|(i, _)| i)
    }

    fn primary_msap(&self) -> Option<(String, String)> {
        self.neighbour().map(|n| (n.chassis.clone(), n.port.clone()))
    }

    /// Counts a change of primary neighbour (from one to a different one).
    fn note_primary(&mut self, before: Option<(String, String)>) {
        if let (Some(b), Some(a)) = (before, self.primary_msap()) {
            if a != b {
                self.counters.neighbour_changes += 1;
            }
        }
    }
    /// Reason the last discarded LLDPDU was discarded.
    pub fn last_error(&self) -> Option<&str> {
        self.last_error.as_deref()
    }

    /// The LLDPDU this port sends with TTL `ttl`.
    pub fn lldpdu(&self, ttl: u16) -> LldpduRepr {
        let mut tlvs = vec![
            Tlv::PortDescription { text: self.id.port_description.clone() },
            Tlv::SystemName { text: self.id.system_name.clone() },
        ];
        // Capabilities bits (IEEE 802.1AB table 8-4): 0x0004 bridge, 0x0010 router, 0x0080 station only.
        let caps = if self.id.bridge { 0x0014 } else { 0x0080 };
        tlvs.push(Tlv::SystemCapabilities(SystemCapabilities { capabilities: caps, enabled: caps }));
        // A port advertises what it runs: a willing port that adopted its peer's settings
        // sends those (with willing still set), as lldpad does.
        let (oper, _) = self.negotiate();
        let advertised = Dcb {
            willing: self.dcb.willing,
            ets: oper.ets,
            pfc_enable: oper.pfc_enable,
            pfc_cap: self.dcb.pfc_cap,
            app: oper.app,
        };
        tlvs.extend(advertised.tlvs().into_iter().map(|t| t.into()));
        LldpduRepr {
            chassis_id: ChassisId::MacAddress(MacAddr(self.id.chassis_mac)),
            port_id: PortId::InterfaceName(self.id.port.clone()),
            ttl,
            tlvs,
        }
    }

    /// The frame this port sends with TTL `ttl` (source MAC = the port's MAC).
    pub fn frame(&self, ttl: u16) -> Vec<u8> {
        // Every part fits its TLV (names are cut in `new`, the DCBX TLVs have fixed sizes and at
        // most 64 APP entries), so emitting cannot fail; an empty frame would be caught by the
        // test below, never sent silently in production.
        self.lldpdu(ttl).to_frame(MacAddr(self.id.mac)).unwrap_or_default()
    }

    /// The shutdown frame (TTL 0).
    pub fn shutdown_frame(&self) -> Vec<u8> {
        self.frame(0)
    }

    /// When [`PortAgent::poll`] next has something to do.
    pub fn next_deadline(&self) -> u64 {
        self.neighbours.iter().map(|n| n.expires_ns).fold(self.next_tx_ns, u64::min)
    }

    /// Deletes the entries whose TTL ran out at `now`.
    fn age(&mut self, now: u64) {
        let before = self.primary_msap();
        let n = self.neighbours.len();
        self.neighbours.retain(|x| now < x.expires_ns);
        self.counters.ageouts += (n - self.neighbours.len()) as u64;
        self.note_primary(before);
    }

    /// Ages neighbours out and returns the frame to send, if one is due.
    pub fn poll(&mut self, now: u64) -> Option<Vec<u8>> {
        self.age(now);
        if now < self.next_tx_ns {
            return None;
        }
        let interval = if self.fast_left > 0 {
            self.fast_left -= 1;
            self.timing.fast_interval_ns
        } else {
            self.timing.tx_interval_ns
        };
        self.next_tx_ns = now.saturating_add(interval);
        self.counters.tx_frames += 1;
        Some(self.frame(self.timing.ttl_s))
    }

    /// Takes a received LLDP frame (Ethernet header included).
    pub fn on_frame(&mut self, frame: &[u8], now: u64) -> Rx {
        let pdu = match LldpduRepr::parse_frame_discarding(frame) {
            Ok((_, pdu, discarded)) => {
                if let Some(e) = discarded.first() {
                    self.counters.rx_tlvs_discarded += discarded.len() as u64;
                    self.last_error = Some(format!("TLV discarded: {e}"));
                }
                pdu
            }
            Err(e) => {
                self.counters.rx_malformed += 1;
                let why = e.to_string();
                self.last_error = Some(why.clone());
                return Rx::Malformed(why);
            }
        };
        self.counters.rx_frames += 1;
        let mac = match &pdu.chassis_id {
            ChassisId::MacAddress(m) => Some(m.0),
            _ => None,
        };
        let chassis = chassis_text(&pdu.chassis_id);
        let port = port_text(&pdu.port_id);
        // Entries whose TTL ran out go first, so they neither fill the table nor count as known.
        self.age(now);
        let before = self.primary_msap();
        let found = self.neighbours.binary_search_by(|n| n.msap().cmp(&(chassis.as_str(), port.as_str())));
        if pdu.ttl == 0 {
            self.counters.rx_shutdown += 1;
            if let Ok(i) = found {
                self.neighbours.remove(i);
                self.counters.deletes += 1;
                self.note_primary(before);
            }
            return Rx::Shutdown;
        }
        if found.is_err() && self.neighbours.len() >= self.max_neighbours {
            self.counters.table_drops += 1;
            self.last_error = Some(format!(
                "neighbour table full ({} entries): LLDPDU of chassis {chassis} port {port} discarded (tooManyNeighbors)",
                self.max_neighbours
            ));
            return Rx::TableFull;
        }
        let mut system_name = None;
        let mut port_description = None;
        for t in &pdu.tlvs {
            match t {
                Tlv::SystemName { text } => system_name = Some(text.clone()),
                Tlv::PortDescription { text } => port_description = Some(text.clone()),
                _ => {}
            }
        }
        let entry = Neighbour {
            chassis,
            chassis_mac: mac.map(|m| MacAddr(m).to_string()),
            port,
            system_name,
            port_description,
            ttl_s: pdu.ttl,
            dcb: PeerDcb::from_tlvs(pdu.dcbx()),
            mac,
            expires_ns: now.saturating_add(u64::from(pdu.ttl) * NS),
            since_ns: now,
        };
        let new = match found {
            Ok(i) => {
                let since = self.neighbours[i].since_ns;
                self.neighbours[i] = Neighbour { since_ns: since, ..entry };
                false
            }
            Err(i) => {
                self.neighbours.insert(i, entry);
                self.counters.inserts += 1;
                true
            }
        };
        self.note_primary(before);
        if new {
            // A new neighbour gets our settings quickly (802.1AB 9.2.7.7.? newNeighbour → txFast).
            self.fast_left = self.timing.fast_count;
            self.next_tx_ns = self.next_tx_ns.min(now);
        }
        Rx::Neighbour { new }
    }

    /// Operational settings and mismatches with the primary neighbour.
    pub fn negotiate(&self) -> (Oper, Vec<Mismatch>) {
        let peer = self.neighbour().filter(|n| n.dcb.any()).map(|n| (&n.dcb, n.mac));
        negotiate(&self.dcb, self.id.chassis_mac, peer)
    }

    /// This port's row of the neighbour table.
    pub fn report(&self, now: u64) -> PortReport {
        let (oper, mismatches) = self.negotiate();
        PortReport {
            port: self.id.port.clone(),
            local: LocalReport {
                chassis: MacAddr(self.id.chassis_mac).to_string(),
                system_name: self.id.system_name.clone(),
                ttl_s: self.timing.ttl_s,
                tx_interval_ms: self.timing.tx_interval_ns / 1_000_000,
                dcb: self.dcb.clone(),
            },
            neighbour: self.neighbour().map(|n| NeighbourReport::new(n, now)),
            neighbours: self.neighbours.iter().map(|n| NeighbourReport::new(n, now)).collect(),
            max_neighbours: self.max_neighbours,
            expected: self.expected.clone(),
            oper,
            mismatches,
            counters: self.counters,
            last_error: self.last_error.clone(),
        }
    }
}

/// A Chassis ID as the neighbour table shows it: the MAC or the name itself, other subtypes
/// as decoded text.
fn chassis_text(c: &ChassisId) -> String {
    match c {
        ChassisId::MacAddress(m) => m.to_string(),
        ChassisId::InterfaceName(s) | ChassisId::LocallyAssigned(s) | ChassisId::ChassisComponent(s) => s.clone(),
        other => other.to_string(),
    }
}

/// A Port ID as the neighbour table shows it.
fn port_text(p: &PortId) -> String {
    match p {
        PortId::MacAddress(m) => m.to_string(),
        PortId::InterfaceName(s) | PortId::LocallyAssigned(s) | PortId::InterfaceAlias(s) => s.clone(),
        other => other.to_string(),
    }
}

/// What this side advertises.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LocalReport {
    pub chassis: String,
    pub system_name: String,
    pub ttl_s: u16,
    pub tx_interval_ms: u64,
    pub dcb: Dcb,
}

/// A neighbour with its remaining TTL.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NeighbourReport {
    #[serde(flatten)]
    pub info: Neighbour,
    /// Seconds until it ages out.
    pub ttl_left_s: f64,
}

impl NeighbourReport {
    fn new(n: &Neighbour, now: u64) -> NeighbourReport {
        NeighbourReport { ttl_left_s: n.expires_ns.saturating_sub(now) as f64 / NS as f64, info: n.clone() }
    }
}

/// One port of the neighbour table.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PortReport {
    pub port: String,
    pub local: LocalReport,
    /// The primary neighbour: the one DCBX acts on (`oper`, `mismatches`).
    pub neighbour: Option<NeighbourReport>,
    /// Every entry of the neighbour table, ordered by MSAP (Chassis ID, Port ID).
    #[serde(default)]
    pub neighbours: Vec<NeighbourReport>,
    /// Most entries the table holds (more are counted in `counters.table_drops`).
    #[serde(default)]
    pub max_neighbours: usize,
    /// The neighbour the port expects (from the topology), if it was told.
    #[serde(default)]
    pub expected: Option<Expected>,
    pub oper: Oper,
    pub mismatches: Vec<Mismatch>,
    pub counters: Counters,
    pub last_error: Option<String>,
}

/// A node's neighbour table, as `GET /lldp` serves it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodeReport {
    pub node: String,
    /// `switch` or `host`.
    pub kind: String,
    pub ports: Vec<PortReport>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dcb::{App, Source};

    fn timing() -> Timing {
        Timing { tx_interval_ns: 30 * NS, ttl_s: 120, fast_interval_ns: NS, fast_count: 4 }
    }

    fn switch_port(now: u64) -> PortAgent {
        let dcb = Dcb::nic(false, 1 << 4, 26, 4, 48, 7);
        let id = Identity {
            chassis_mac: [2, 0, 0, 0, 1, 1],
            mac: [2, 0, 0, 0, 1, 1],
            port: "eth0".into(),
            system_name: "rail1".into(),
            port_description: "to host1:gpu0".into(),
            bridge: true,
        };
        PortAgent::new(timing(), id, dcb, now)
    }

    fn nic_port(now: u64) -> PortAgent {
        let dcb = Dcb::nic(true, 1 << 3, 24, 3, 48, 7);
        let id = Identity {
            chassis_mac: [2, 0, 0, 0, 2, 2],
            mac: [2, 0, 0, 0, 2, 2],
            port: "gpu0".into(),
            system_name: "host1".into(),
            port_description: "gpu0".into(),
            bridge: false,
        };
        PortAgent::new(timing(), id, dcb, now)
    }

    #[test]
    fn fast_start_then_the_interval() {
        let mut a = switch_port(0);
        let mut sent = vec![];
        let mut now = 0;
        while now <= 100 * NS {
            if a.poll(now).is_some() {
                sent.push(now / NS);
            }
            now += NS / 2;
        }
        assert_eq!(sent, vec![0, 1, 2, 3, 4, 34, 64, 94]);
        a.link_up(100 * NS);
        assert_eq!(a.next_deadline(), 100 * NS);
        assert_eq!(a.counters().tx_frames, 8);
    }

    #[test]
    fn names_too_long_for_a_tlv_are_cut_and_the_frame_still_emits() {
        let mut a = switch_port(0);
        let id = Identity { system_name: "é".repeat(200), port_description: "d".repeat(300), ..a.identity().clone() };
        a = PortAgent::new(timing(), id, a.dcb().clone(), 0);
        let (_, pdu) = LldpduRepr::parse_frame(&a.frame(120)).unwrap();
        let name = pdu
            .tlvs
            .iter()
            .find_map(|t| if let Tlv::SystemName { text } = t { Some(text.clone()) } else { None })
            .unwrap();
        assert_eq!(name.len(), 254, "cut at a character boundary below 255 bytes");
    }

    #[test]
    fn the_frame_is_a_valid_lldpdu_with_dcbx() {
        let a = switch_port(0);
        let f = a.frame(120);
        let (eth, pdu) = LldpduRepr::parse_frame(&f).unwrap();
        assert_eq!(eth.dst, MacAddr::LLDP_NEAREST_BRIDGE);
        assert_eq!(pdu.ttl, 120);
        assert_eq!(pdu.dcbx().count(), 4);
        assert_eq!(LldpduRepr::parse_frame(&a.shutdown_frame()).unwrap().1.ttl, 0);
    }

    #[test]
    fn neighbours_are_learned_negotiated_and_aged_out() {
        let sw = switch_port(0);
        let mut nic = nic_port(0);
        assert_eq!(nic.on_frame(&sw.frame(120), 5 * NS), Rx::Neighbour { new: true });
        assert_eq!(nic.on_frame(&sw.frame(120), 6 * NS), Rx::Neighbour { new: false });
        let r = nic.report(6 * NS);
        let n = r.neighbour.as_ref().unwrap();
        assert_eq!((n.info.system_name.as_deref(), n.info.port.as_str()), (Some("rail1"), "eth0"));
        assert_eq!(n.info.chassis, "02:00:00:00:01:01");
        assert_eq!(n.ttl_left_s, 120.0);
        assert_eq!((r.oper.pfc_enable, r.oper.pfc_from), (1 << 4, Source::Peer));
        assert!(r.oper.app.contains(&App::dscp(26, 4)));
        assert!(r.mismatches.is_empty(), "{:?}", r.mismatches);
        assert!(nic.poll(125 * NS).is_some());
        assert!(nic.neighbour().is_some(), "TTL counts from the last LLDPDU (6 s + 120 s)");
        nic.poll(126 * NS);
        assert!(nic.neighbour().is_none());
        assert_eq!(nic.counters().ageouts, 1);
        assert_eq!(nic.report(126 * NS).oper.pfc_from, Source::Local, "back to its own settings");
    }

    #[test]
    fn a_willing_port_advertises_what_it_adopted() {
        let sw = switch_port(0);
        let mut nic = nic_port(0);
        let before = PeerDcb::from_tlvs(nic.lldpdu(120).dcbx().collect::<Vec<_>>().into_iter());
        assert_eq!(before.pfc_enable, Some(1 << 3));
        nic.on_frame(&sw.frame(120), 0);
        let after = PeerDcb::from_tlvs(nic.lldpdu(120).dcbx().collect::<Vec<_>>().into_iter());
        assert_eq!((after.pfc_enable, after.pfc_willing), (Some(1 << 4), Some(true)));
        assert_eq!(after.app.as_ref().map(|a| a.contains(&App::dscp(26, 4))), Some(true));
    }

    #[test]
    fn shutdown_removes_the_neighbour() {
        let sw = switch_port(0);
        let mut nic = nic_port(0);
        nic.on_frame(&sw.frame(120), 0);
        assert_eq!(nic.on_frame(&sw.shutdown_frame(), NS), Rx::Shutdown);
        assert!(nic.neighbour().is_none());
        assert_eq!(nic.counters().rx_shutdown, 1);
    }

    #[test]
    fn malformed_frames_are_counted_and_the_neighbour_kept() {
        let sw = switch_port(0);
        let mut nic = nic_port(0);
        nic.on_frame(&sw.frame(120), 0);
        let good = sw.frame(120);
        // Every truncation of the LLDPDU inside a TLV (a cut at a TLV boundary after TTL is a
        // valid LLDPDU without End), a wrong TLV length, and a mandatory TLV out of place.
        let mut boundaries = vec![];
        let mut off = 14;
        while off + 2 <= good.len() {
            boundaries.push(off);
            let len = usize::from(u16::from_be_bytes([good[off], good[off + 1]]) & 0x1ff);
            if len == 0 {
                break;
            }
            off += 2 + len;
        }
        let mut bad: Vec<Vec<u8>> =
            (15..good.len()).filter(|n| !boundaries[3..].contains(n)).map(|n| good[..n].to_vec()).collect();
        assert!(bad.len() > 100);
        let mut wrong_len = good.clone();
        wrong_len[15] = 0xff; // Chassis ID length 255 > what is left
        bad.push(wrong_len);
        let mut order = good.clone();
        order.swap(14, 14 + 9); // break the first TLV's type
        bad.push(order);
        for f in &bad {
            assert!(matches!(nic.on_frame(f, NS), Rx::Malformed(_)), "{f:02x?}");
        }
        assert_eq!(nic.counters().rx_malformed, bad.len() as u64);
        assert!(nic.neighbour().is_some());
        assert!(nic.last_error().is_some());
    }

    #[test]
    fn a_bad_optional_tlv_is_dropped_and_the_lldpdu_kept() {
        let sw = switch_port(0);
        let mut f = sw.frame(120);
        // Cut the PFC Configuration TLV's information to one octet: find it (OUI 00-80-c2,
        // subtype 11) and shorten its length field, dropping one byte.
        let at = f.windows(4).position(|w| w == [0x00, 0x80, 0xc2, 11]).unwrap() - 2;
        let len = u16::from_be_bytes([f[at], f[at + 1]]);
        assert_eq!(len & 0x1ff, 6);
        f[at..at + 2].copy_from_slice(&(len - 1).to_be_bytes());
        f.remove(at + 2 + 5);
        let mut nic = nic_port(0);
        assert_eq!(nic.on_frame(&f, 0), Rx::Neighbour { new: true });
        let c = nic.counters();
        assert_eq!((c.rx_malformed, c.rx_tlvs_discarded), (0, 1));
        let n = nic.neighbour().unwrap();
        assert_eq!(n.dcb.pfc_enable, None, "the bad PFC TLV is gone");
        assert!(n.dcb.app.is_some(), "the TLVs after it are kept");
        assert!(nic.last_error().unwrap().contains("TLV discarded"));
    }

    /// An LLDPDU from chassis `chassis` port `port`, System Name `name`, without DCBX (as lldpd
    /// sends by default).
    fn plain(chassis: [u8; 6], port: &str, name: &str, ttl: u16) -> Vec<u8> {
        let pdu = LldpduRepr {
            chassis_id: ChassisId::MacAddress(MacAddr(chassis)),
            port_id: PortId::InterfaceName(port.into()),
            ttl,
            tlvs: vec![Tlv::SystemName { text: name.into() }],
        };
        pdu.to_frame(MacAddr(chassis)).unwrap()
    }

    fn msaps(a: &PortAgent) -> Vec<(String, String)> {
        a.neighbours().iter().map(|n| (n.chassis.clone(), n.port.clone())).collect()
    }

    #[test]
    fn the_table_keeps_one_entry_per_msap_ordered_by_msap() {
        let nic = nic_port(0);
        let mut sw = switch_port(0);
        // lldpd on the same NIC: same chassis MAC, Port ID the MAC (here another name), no DCBX.
        let lldpd = plain([2, 0, 0, 0, 2, 2], "02:00:00:00:02:02", "machine", 120);
        assert_eq!(sw.on_frame(&nic.frame(120), 0), Rx::Neighbour { new: true });
        assert_eq!(sw.on_frame(&lldpd, NS / 2), Rx::Neighbour { new: true });
        // Alternating transmit timers no longer replace one another.
        for t in 1..10 {
            assert_eq!(sw.on_frame(&nic.frame(120), t * NS), Rx::Neighbour { new: false });
            assert_eq!(sw.on_frame(&lldpd, t * NS + NS / 2), Rx::Neighbour { new: false });
        }
        assert_eq!(
            msaps(&sw),
            vec![("02:00:00:00:02:02".into(), "02:00:00:00:02:02".into()), ("02:00:00:00:02:02".into(), "gpu0".into())]
        );
        let c = sw.counters();
        assert_eq!((c.inserts, c.neighbour_changes, c.rx_frames), (2, 0, 20));
        let r = sw.report(10 * NS);
        assert_eq!(r.neighbours.len(), 2);
        assert_eq!(
            r.neighbours.iter().map(|n| n.info.port.as_str()).collect::<Vec<_>>(),
            vec!["02:00:00:00:02:02", "gpu0"]
        );
        assert_eq!(r.neighbour.as_ref().unwrap().info.port, "gpu0", "the oldest entry is the primary one");
        // A third sender with a lower MSAP sorts first.
        sw.on_frame(&plain([2, 0, 0, 0, 0, 1], "x", "tap", 120), 10 * NS);
        assert_eq!(sw.neighbours()[0].chassis, "02:00:00:00:00:01");
        assert_eq!(sw.neighbour().unwrap().port, "gpu0");
    }

    #[test]
    fn each_entry_ages_out_at_its_own_ttl() {
        let mut sw = switch_port(0);
        let nic = nic_port(0);
        sw.on_frame(&nic.frame(120), 0);
        sw.on_frame(&plain([2, 0, 0, 0, 9, 9], "eth9", "short", 4), 2 * NS);
        assert_eq!(sw.next_deadline(), 0, "the first LLDPDU is due");
        sw.poll(0);
        assert_eq!(sw.next_deadline(), NS, "fast start");
        for s in 1..=5 {
            sw.poll(s * NS);
        }
        assert_eq!(sw.next_deadline(), 6 * NS, "the short entry expires at 2 s + 4 s, before the next LLDPDU at 34 s");
        sw.poll(6 * NS - 1);
        assert_eq!(sw.neighbours().len(), 2, "alive until its TTL runs out");
        sw.poll(6 * NS);
        assert_eq!(msaps(&sw), vec![("02:00:00:00:02:02".into(), "gpu0".into())]);
        assert_eq!(sw.counters().ageouts, 1);
        assert_eq!(sw.report(6 * NS).neighbours.len(), 1);
        // A frame arriving after an entry's TTL sees it gone first (no poll in between).
        sw.on_frame(&plain([2, 0, 0, 0, 9, 9], "eth9", "short", 4), 7 * NS);
        assert_eq!(
            sw.on_frame(&nic.frame(120), 121 * NS),
            Rx::Neighbour { new: true },
            "gpu0's entry expired at 120 s"
        );
        assert_eq!(msaps(&sw), vec![("02:00:00:00:02:02".into(), "gpu0".into())], "eth9's expired at 11 s");
        assert_eq!(sw.counters().ageouts, 3);
    }

    #[test]
    fn a_shutdown_removes_only_its_senders_entry() {
        let mut sw = switch_port(0);
        let nic = nic_port(0);
        sw.on_frame(&nic.frame(120), 0);
        sw.on_frame(&plain([2, 0, 0, 0, 2, 2], "02:00:00:00:02:02", "machine", 120), 0);
        assert_eq!(sw.on_frame(&plain([2, 0, 0, 0, 2, 2], "02:00:00:00:02:02", "machine", 0), NS), Rx::Shutdown);
        assert_eq!(msaps(&sw), vec![("02:00:00:00:02:02".into(), "gpu0".into())]);
        // A shutdown of an unknown MSAP deletes nothing.
        assert_eq!(sw.on_frame(&plain([2, 0, 0, 0, 7, 7], "x", "y", 0), NS), Rx::Shutdown);
        assert_eq!(sw.neighbours().len(), 1);
        assert_eq!(sw.on_frame(&nic.shutdown_frame(), 2 * NS), Rx::Shutdown);
        assert!(sw.neighbours().is_empty());
        let c = sw.counters();
        assert_eq!((c.rx_shutdown, c.deletes, c.ageouts), (3, 2, 0));
    }

    #[test]
    fn a_full_table_refuses_new_msaps_and_counts_them() {
        let mut sw = switch_port(0);
        assert_eq!(sw.max_neighbours(), MAX_NEIGHBOURS);
        sw.set_max_neighbours(2);
        let a = plain([2, 0, 0, 0, 0, 1], "a", "a", 120);
        let b = plain([2, 0, 0, 0, 0, 2], "b", "b", 10);
        let c = plain([2, 0, 0, 0, 0, 3], "c", "c", 120);
        sw.on_frame(&a, 0);
        sw.on_frame(&b, 0);
        assert_eq!(sw.on_frame(&c, NS), Rx::TableFull);
        assert_eq!(sw.on_frame(&c, 2 * NS), Rx::TableFull);
        assert_eq!(sw.counters().table_drops, 2);
        assert!(sw.last_error().unwrap().contains("tooManyNeighbors"), "{:?}", sw.last_error());
        assert_eq!(sw.on_frame(&a, 3 * NS), Rx::Neighbour { new: false }, "known entries are still refreshed");
        assert_eq!(sw.report(3 * NS).neighbours.len(), 2);
        // Once b ages out there is room for c.
        assert_eq!(sw.on_frame(&c, 10 * NS), Rx::Neighbour { new: true });
        assert_eq!(
            msaps(&sw),
            vec![("02:00:00:00:00:01".into(), "a".into()), ("02:00:00:00:00:03".into(), "c".into())]
        );
        assert_eq!((sw.counters().table_drops, sw.counters().ageouts), (2, 1));
    }

    #[test]
    fn dcbx_acts_on_the_expected_neighbour_else_the_oldest() {
        let nic = nic_port(0);
        // Another DCBX agent on the link that disagrees with the switch: PFC {5}, not willing.
        let other = {
            let id = Identity {
                chassis_mac: [2, 0, 0, 0, 3, 3],
                mac: [2, 0, 0, 0, 3, 3],
                port: "eth0".into(),
                system_name: "intruder".into(),
                port_description: String::new(),
                bridge: false,
            };
            PortAgent::new(timing(), id, Dcb::nic(false, 1 << 5, 40, 5, 48, 7), 0)
        };
        // Without an expectation: the oldest entry, whichever order the timers bring.
        let mut sw = switch_port(0);
        sw.on_frame(&other.frame(120), 0);
        sw.on_frame(&nic.frame(120), NS);
        for t in 2..6 {
            sw.on_frame(&nic.frame(120), t * NS);
            sw.on_frame(&other.frame(120), t * NS);
            assert_eq!(sw.neighbour().unwrap().system_name.as_deref(), Some("intruder"));
        }
        // Told the topology's peer, the port acts on it, though it was learned later.
        sw.expect(Expected::from_peer("host1:gpu0"));
        assert_eq!(sw.neighbour().unwrap().system_name.as_deref(), Some("host1"));
        let r = sw.report(6 * NS);
        assert_eq!(r.neighbour.as_ref().unwrap().info.port, "gpu0");
        assert!(
            r.mismatches.iter().all(|m| !matches!(m, Mismatch::Pfc { peer, .. } if *peer == 1 << 5)),
            "{:?}",
            r.mismatches
        );
        assert_eq!(r.expected, Expected::from_peer("host1:gpu0"));
        // Stable while both keep sending.
        let changes = sw.counters().neighbour_changes;
        for t in 6..12 {
            sw.on_frame(&other.frame(120), t * NS);
            sw.on_frame(&nic.frame(120), t * NS);
            assert_eq!(sw.neighbour().unwrap().port, "gpu0");
        }
        assert_eq!(sw.counters().neighbour_changes, changes);
        // The expected one leaves (shutdown): the other becomes primary, counted as a change.
        sw.on_frame(&nic.shutdown_frame(), 12 * NS);
        assert_eq!(sw.neighbour().unwrap().system_name.as_deref(), Some("intruder"));
        assert_eq!(sw.counters().neighbour_changes, changes + 1);
        assert!(sw
            .report(12 * NS)
            .mismatches
            .iter()
            .any(|m| matches!(m, Mismatch::Pfc { peer, .. } if *peer == 1 << 5)));
        assert_eq!(Expected::from_peer("nocolon"), None);
    }

    #[test]
    fn a_new_neighbour_triggers_fast_start() {
        let sw = switch_port(0);
        let mut nic = nic_port(0);
        for s in 0..5 {
            nic.poll(s * NS);
        }
        assert_eq!(nic.next_deadline(), 34 * NS);
        nic.on_frame(&sw.frame(120), 10 * NS);
        assert_eq!(nic.next_deadline(), 10 * NS);
    }
}
