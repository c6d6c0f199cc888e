//! The `qos:` section of a topology file: traffic classes, egress scheduling, the shared buffer,
//! PFC thresholds and the PFC watchdog, at fabric level with per-switch overrides (book ch. 11,
//! the NX-OS example; docs/src/lossless-qos.md).
//!
//! ```yaml
//! qos:                        # every key optional; the defaults are shown
//!   classes: { 24: 3, 48: 7 } # DSCP → priority (traffic class); every other DSCP → 0
//!   pfc: [3]                  # lossless priorities; [] turns PFC off (every class lossy)
//!   strict: [7]               # strict-priority queues (CNPs), served first
//!   ets: { 0: 50, 3: 50 }     # queue → bandwidth remaining percent (DWRR among the others)
//!   buffer: 16MiB             # the switch's shared buffer
//!   cell: 256                 # accounting cell in bytes; 0 counts frame bytes
//!   xoff: 3200000             # per ingress priority group (port, lossless priority)
//!   xon: 120000
//!   headroom: 512000          # reserved per (port, lossless priority); `auto`: what the links
//!                             # need in flight while a pause takes effect ([`headroom_needed`])
//!   queue_limit: 1MiB         # egress limit of a lossy queue
//!   pause_quanta: 65535       # quanta of the PFC frames the switch sends
//!   watchdog: { action: drop, detect: 200ms, restore: 200ms, poll: 10ms }   # or `watchdog: off`
//!   wred: { queues: [3], min: 150KB, max: 3000KB, probability: 7, seed: 24301, at: enqueue }   # or `wred: off`
//!   trim: off                 # or `on`, or { queues: [0], size: 128, dscp: 48, queue: 7, strict: true }
//!   switches:                 # per-switch overrides of any key above
//!     spine1: { xoff: 1MB }
//! ```
//!
//! Sizes are bytes, or a number with B, KB, MB, GB (powers of 1000) or KiB, MiB, GiB (powers of
//! 1024). Times are a number with us, ms or s. The effective settings of every switch are checked
//! against its port count at load ([`QosConfig::check`]): xON below xOFF, the headroom and
//! thresholds inside the buffer, ETS shares of 1..=100 % on non-strict queues summing to 100,
//! WRED min at most max (equal: a marking step). Thresholds outside the rule of thumb
//! xON < WRED min < WRED max < xOFF are allowed and reported as warnings
//! ([`QosConfig::warnings`], [`SwitchQos::warnings`]).
//!
//! `wred.at` is where packets are marked: `enqueue` (the XDP program, on the depth a packet
//! finds) or `dequeue` (the data-plane thread, on the depth it leaves behind, as ns-3 and htsim
//! mark).
//!
//! `ets` is NX-OS's "bandwidth remaining percent": what the strict queues leave is shared by
//! deficit-weighted round robin in these proportions; a queue neither strict nor listed gets
//! nothing while a listed queue has frames to send. An override's `ets` (like `classes`)
//! replaces the whole table.
//!
//! `trim` is packet trimming (OCP SAI PR #2077's `SAI_BUFFER_PROFILE_PACKET_ADMISSION_FAIL_ACTION_DROP_AND_TRIM`;
//! [`rocefab_contracts::config::TrimConfig`], `switch_model::trim`): an IP/UDP frame longer than
//! `size` bytes (Ethernet header included; SAI's `SAI_SWITCH_ATTR_PACKET_TRIM_SIZE`, default
//! 128) that admission would drop on one of `queues` (default: every lossy queue but the trim
//! queue) is cut to `size`, remarked to `dscp` (default 48) and queued on `queue` (default 7) of
//! the same egress port, which `strict: true` (the default) makes a strict-priority queue.
//! Lossless queues never trim. Off by default.
//!
//! `rocefab qos import` writes this section from an NX-OS configuration ([`crate::qos_import`]).
use std::collections::BTreeMap;
use std::fmt;

use rocefab_contracts::config::{QosConfig, WatchdogAction};
use serde::de::{self, Deserializer, Visitor};
use serde::Deserialize;

/// Default egress limit of a lossy queue.
pub const DEFAULT_QUEUE_LIMIT: u64 = 1 << 20;

/// The fabric-level `qos:` section; the same keys, without `switches`, override it per switch.
pub type RawQos = RawQosFields;

/// The keys a fabric or one switch may set.
#[derive(Debug, Deserialize, Default, Clone, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawQosFields {
    /// Per-switch overrides (fabric level only).
    #[serde(default)]
    switches: BTreeMap<String, RawQosFields>,
    #[serde(default)]
    classes: Option<BTreeMap<u8, u8>>,
    #[serde(default)]
    pfc: Option<Vec<u8>>,
    #[serde(default)]
    strict: Option<Vec<u8>>,
    /// Queue → bandwidth remaining percent.
    #[serde(default)]
    ets: Option<BTreeMap<u8, u32>>,
    #[serde(default)]
    buffer: Option<ByteSize>,
    #[serde(default)]
    cell: Option<ByteSize>,
    #[serde(default)]
    xoff: Option<ByteSize>,
    #[serde(default)]
    xon: Option<ByteSize>,
    #[serde(default)]
    headroom: Option<Headroom>,
    #[serde(default)]
    queue_limit: Option<ByteSize>,
    #[serde(default)]
    pause_quanta: Option<u16>,
    #[serde(default)]
    watchdog: Option<OffOr<RawWatchdogFields>>,
    #[serde(default)]
    wred: Option<OffOr<RawWredFields>>,
    /// Packet trimming on lossy queues (OCP SAI PR #2077); off by default.
    #[serde(default)]
    trim: Option<OffOr<RawTrimFields>>,
}

/// `trim:` settings (SAI `SAI_BUFFER_PROFILE_PACKET_ADMISSION_FAIL_ACTION_DROP_AND_TRIM` per
/// queue; `SAI_SWITCH_ATTR_PACKET_TRIM_SIZE`, `_DSCP_VALUE`, `_QUEUE_INDEX`).
#[derive(Debug, Deserialize, Default, Clone, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
struct RawTrimFields {
    /// Lossy egress queues that trim what admission would drop (default: every lossy queue but
    /// the trim queue).
    #[serde(default)]
    queues: Option<Vec<u8>>,
    /// Length of a trimmed frame in bytes, Ethernet header included (64..=1024; default 128).
    #[serde(default)]
    #[schemars(range(min = 64, max = 1024))]
    size: Option<u32>,
    /// DSCP of trimmed packets (0..=63; default 48).
    #[serde(default)]
    #[schemars(range(max = 63))]
    dscp: Option<u8>,
    /// Egress queue of trimmed packets (0..=7, lossy; default 7).
    #[serde(default)]
    #[schemars(range(max = 7))]
    queue: Option<u8>,
    /// The trim queue is served at strict priority (default true).
    #[serde(default)]
    strict: Option<bool>,
}

/// `off`, `on` (the defaults) or a mapping of settings (`watchdog:`, `wred:`).
#[derive(Debug, Clone)]
enum OffOr<T> {
    Off,
    On(T),
}

#[derive(Debug, Deserialize, Default, Clone, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
struct RawWatchdogFields {
    #[serde(default)]
    action: Option<WatchdogAction>,
    #[serde(default)]
    detect: Option<Micros>,
    #[serde(default)]
    restore: Option<Micros>,
    #[serde(default)]
    poll: Option<Micros>,
}

/// `wred:` settings (NX-OS `random-detect … ecn`).
#[derive(Debug, Deserialize, Default, Clone, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
struct RawWredFields {
    /// Egress queues that run WRED with ECN.
    #[serde(default)]
    queues: Option<Vec<u8>>,
    #[serde(default)]
    min: Option<ByteSize>,
    #[serde(default)]
    max: Option<ByteSize>,
    /// Marking probability at `max`, percent.
    #[serde(default)]
    probability: Option<u32>,
    #[serde(default)]
    seed: Option<u32>,
    /// `enqueue` or `dequeue`.
    #[serde(default)]
    at: Option<rocefab_contracts::config::WredAt>,
}

impl<T: schemars::JsonSchema> schemars::JsonSchema for OffOr<T> {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        format!("OffOr_{}", T::schema_name()).into()
    }
    fn json_schema(g: &mut schemars::SchemaGenerator) -> schemars::Schema {
        crate::schema::off_or(g.subschema_for::<T>())
    }
}

impl<'de, T: Deserialize<'de> + Default> Deserialize<'de> for OffOr<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<T>(std::marker::PhantomData<T>);
        impl<'de, T: Deserialize<'de> + Default> Visitor<'de> for V<T> {
            type Value = OffOr<T>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("off, on, or a mapping of settings")
            }
            fn visit_bool<E: de::Error>(self, v: bool) -> Result<OffOr<T>, E> {
                Ok(if v { OffOr::On(T::default()) } else { OffOr::Off })
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<OffOr<T>, E> {
                match s {
                    "off" => Ok(OffOr::Off),
                    "on" => Ok(OffOr::On(T::default())),
                    _ => Err(E::invalid_value(de::Unexpected::Str(s), &self)),
                }
            }
            fn visit_map<A: de::MapAccess<'de>>(self, m: A) -> Result<OffOr<T>, A::Error> {
                T::deserialize(de::value::MapAccessDeserializer::new(m)).map(OffOr::On)
            }
        }
        d.deserialize_any(V(std::marker::PhantomData))
    }
}

/// A size in bytes: an integer, or a number with a unit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ByteSize(pub u64);

/// Parses `3200000`, `3.2MB` (SI, 3,200,000), `512KiB` (IEC, 524,288), `16MiB`: see
/// [`rocefab_units::parse_bytes`], the one size parser of topology files and command lines.
pub fn parse_byte_size(s: &str) -> Result<u64, String> {
    rocefab_units::parse_bytes(s)
}

/// Parses `200ms`, `500us`, `1s`, `1.5ms` into microseconds (up to an hour).
pub fn parse_duration_us(s: &str) -> Result<u64, String> {
    parse_duration_us_max(s, 3_600_000_000, "an hour")
}

/// [`parse_duration_us`] with another upper bound (`max_us`, named `max_name` in errors).
pub fn parse_duration_us_max(s: &str, max_us: u64, max_name: &str) -> Result<u64, String> {
    let d = rocefab_units::parse_duration(s, rocefab_units::Bare::Refuse)?;
    let us = d.as_secs_f64() * 1e6;
    if us > max_us as f64 || d.subsec_nanos() % 1000 != 0 {
        return Err(format!("{:?}: expected a whole number of microseconds up to {max_name}", s.trim()));
    }
    Ok(us as u64)
}

/// `headroom: auto` or a size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Headroom {
    /// What the switch's links need ([`headroom_needed`]).
    Auto,
    Bytes(u64),
}

impl schemars::JsonSchema for Headroom {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Headroom".into()
    }
    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "anyOf": [
                { "const": "auto", "description": "what the switch's links need" },
                crate::schema::size("the PFC headroom")
            ]
        })
    }
}

impl<'de> Deserialize<'de> for Headroom {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Headroom;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("auto, or a size such as 512000 or 150KB")
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Headroom, E> {
                Ok(Headroom::Bytes(v))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Headroom, E> {
                Err(E::custom(format!("{v}: a size cannot be negative")))
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<Headroom, E> {
                if s == "auto" {
                    return Ok(Headroom::Auto);
                }
                parse_byte_size(s).map(Headroom::Bytes).map_err(|e| E::custom(format!("{e}, or auto")))
            }
        }
        d.deserialize_any(V)
    }
}

/// One switch port as PFC headroom sees it: the link's emulated rate and cable delay, and
/// whether a GPU NIC is at the other end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PortLink {
    pub rate_bps: u64,
    pub cable_ns: u64,
    pub peer_is_nic: bool,
}

/// The fabric-wide inputs of [`headroom_needed`]: the Ethernet MTU and the pipelines' latencies
/// (emulated ns).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Latencies {
    pub mtu: u32,
    pub switch_ns: u64,
    pub nic_ns: u64,
}

/// The PFC headroom one (port, lossless priority) needs, as switch vendors size it (NVIDIA's
/// and Arista's buffer guides after IEEE 802.1Qbb Annex N): what the link carries from the
/// moment the ingress group crosses xOFF until the peer's last frame arrives — twice the
/// cable's propagation delay (the pause goes, the data keeps coming) plus the pipelines the
/// pause and the data cross in rocefab's model ([`crate::plan::port_delays`]: this switch's
/// forwarding latency and the peer's response: its NIC pipelines, or its own forwarding
/// latency), times the line rate — plus two largest frames: the one this switch is sending
/// when the pause is ready (the PFC frame waits for it) and the one the peer has started when
/// the pause arrives. Frames are charged in whole cells, so the bytes in flight are counted as
/// frames rounded up to cells: full-size frames, or the NICs' RoCEv2 frames at their path MTU,
/// whichever wastes more. The most any port of the switch needs; 0 without lossless
/// ports. The daemons' own reaction (the PFC reaction histogram) comes on top: at D ≥ 1000 it is
/// tens of ns emulated.
pub fn headroom_needed(ports: &[PortLink], lat: &Latencies, cell_bytes: u32) -> u64 {
    // Ethernet header 14 + FCS 4 around the largest IP packet, and the RoCEv2 frames the NICs
    // send at their path MTU (a Middle packet: IP 20, UDP 8, BTH 12, ICRC 4): the smaller frame
    // may waste more of its last cell.
    let largest = lat.mtu as u64 + 18;
    let roce = gpu_host::nic::engine::path_mtu_for_link(lat.mtu, false).map(|m| m.bytes() as u64 + 62);
    let charged = |f: u64| if cell_bytes == 0 { f } else { f.div_ceil(cell_bytes as u64) * cell_bytes as u64 };
    ports
        .iter()
        .map(|p| {
            let response = if p.peer_is_nic { lat.switch_ns + 2 * lat.nic_ns } else { 2 * lat.switch_ns };
            let round_ns = 2 * p.cable_ns + response;
            let bytes = (p.rate_bps as u128 * round_ns as u128).div_ceil(8_000_000_000) as u64;
            let in_flight =
                [Some(largest), roce].into_iter().flatten().map(|f| bytes.div_ceil(f) * charged(f)).max().unwrap_or(0);
            in_flight + 2 * charged(largest)
        })
        .max()
        .unwrap_or(0)
}

impl schemars::JsonSchema for ByteSize {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "ByteSize".into()
    }
    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        crate::schema::size("a size")
    }
}

impl<'de> Deserialize<'de> for ByteSize {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = ByteSize;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a size such as 3200000, 3.2MB or 512KiB")
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<ByteSize, E> {
                Ok(ByteSize(v))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<ByteSize, E> {
                Err(E::custom(format!("{v}: a size cannot be negative")))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<ByteSize, E> {
                Err(E::custom(format!("{v}: not a whole number of bytes")))
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<ByteSize, E> {
                parse_byte_size(s).map(ByteSize).map_err(E::custom)
            }
        }
        d.deserialize_any(V)
    }
}

/// A time, kept in microseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Micros(u64);

impl schemars::JsonSchema for Micros {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Micros".into()
    }
    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        crate::schema::duration("a time in whole microseconds up to an hour")
    }
}

impl<'de> Deserialize<'de> for Micros {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Micros;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a time such as 200ms, 500us or 1s")
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Micros, E> {
                Err(E::custom(format!("{v}: a time needs a unit: us, ms or s")))
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<Micros, E> {
                parse_duration_us(s).map(Micros).map_err(E::custom)
            }
        }
        d.deserialize_any(V)
    }
}

/// The effective QoS of one switch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SwitchQos {
    pub qos: QosConfig,
    /// DSCP → traffic class, 64 entries.
    pub dscp_to_tc: Vec<u8>,
    pub queue_limit_bytes: u64,
    /// `headroom: auto`: the headroom is [`SwitchQos::headroom_needed`].
    pub headroom_auto: bool,
    /// What the switch's links need ([`headroom_needed`]).
    pub headroom_needed: u64,
    /// Settings that work but break a rule of thumb ([`QosConfig::warnings`]), as `field path:
    /// switch: why`, printed at load.
    pub warnings: Vec<String>,
    /// `trim` without `queues`: every lossy queue but the trim queue trims.
    pub trim_all_lossy: bool,
    /// `trim.strict`: the trim queue is a strict-priority queue (default).
    pub trim_strict: bool,
}

impl Default for SwitchQos {
    fn default() -> Self {
        SwitchQos {
            qos: QosConfig::default(),
            dscp_to_tc: dataplane_common::dscp::default_table().to_vec(),
            queue_limit_bytes: DEFAULT_QUEUE_LIMIT,
            headroom_auto: false,
            headroom_needed: 0,
            warnings: Vec::new(),
            trim_all_lossy: false,
            trim_strict: true,
        }
    }
}

/// A priority list (`[3, 4]`) as a bitmap; errors name `field`.
pub(crate) fn bitmap(list: &[u8], field: &'static str) -> Result<u8, (&'static str, String)> {
    let mut m = 0u8;
    for &p in list {
        if p > 7 {
            return Err((field, format!("priority {p} does not exist (0..=7)")));
        }
        if m & (1 << p) != 0 {
            return Err((field, format!("priority {p} listed twice")));
        }
        m |= 1 << p;
    }
    Ok(m)
}

impl RawQosFields {
    /// Applies the keys this level sets on top of `base`. Errors name the key.
    fn apply(&self, base: &mut SwitchQos) -> Result<(), (&'static str, String)> {
        if let Some(classes) = &self.classes {
            let mut t = vec![0u8; 64];
            for (&dscp, &prio) in classes {
                if dscp > 63 {
                    return Err(("classes", format!("DSCP {dscp} does not exist (0..=63)")));
                }
                if prio > 7 {
                    return Err(("classes", format!("DSCP {dscp}: priority {prio} does not exist (0..=7)")));
                }
                t[dscp as usize] = prio;
            }
            base.dscp_to_tc = t;
        }
        let q = &mut base.qos;
        if let Some(p) = &self.pfc {
            q.lossless_priorities = bitmap(p, "pfc")?;
        }
        if let Some(p) = &self.strict {
            q.strict_priorities = bitmap(p, "strict")?;
        }
        if let Some(ets) = &self.ets {
            let mut t = [0u8; 8];
            for (&queue, &pct) in ets {
                if queue > 7 {
                    return Err(("ets", format!("queue {queue} does not exist (0..=7)")));
                }
                if !(1..=100).contains(&pct) {
                    return Err((
                        "ets",
                        format!("queue {queue}: {pct} % (1..=100; leave a queue out to give it no share)"),
                    ));
                }
                t[queue as usize] = pct as u8;
            }
            q.ets_percent = t;
        }
        let set = |v: Option<ByteSize>, dst: &mut u64| {
            if let Some(ByteSize(b)) = v {
                *dst = b;
            }
        };
        set(self.buffer, &mut q.buffer_bytes);
        set(self.xoff, &mut q.xoff_bytes);
        set(self.xon, &mut q.xon_bytes);
        match self.headroom {
            Some(Headroom::Auto) => base.headroom_auto = true,
            Some(Headroom::Bytes(b)) => {
                q.headroom_bytes = b;
                base.headroom_auto = false;
            }
            None => {}
        }
        set(self.queue_limit, &mut base.queue_limit_bytes);
        if let Some(ByteSize(c)) = self.cell {
            base.qos.cell_bytes = u32::try_from(c).map_err(|_| ("cell", format!("{c} bytes is not a cell size")))?;
        }
        let q = &mut base.qos;
        if let Some(n) = self.pause_quanta {
            q.pause_quanta = n;
        }
        match &self.watchdog {
            None => {}
            Some(OffOr::Off) => q.watchdog.enabled = false,
            Some(OffOr::On(w)) => {
                let d = &mut q.watchdog;
                d.enabled = true;
                if let Some(a) = w.action {
                    d.action = a;
                }
                if let Some(Micros(v)) = w.detect {
                    d.detect_us = v;
                }
                if let Some(Micros(v)) = w.restore {
                    d.restore_us = v;
                }
                if let Some(Micros(v)) = w.poll {
                    d.poll_us = v;
                }
            }
        }
        match &self.wred {
            None => {}
            Some(OffOr::Off) => q.wred.queues = 0,
            Some(OffOr::On(w)) => {
                let d = &mut q.wred;
                if let Some(list) = &w.queues {
                    d.queues = bitmap(list, "wred.queues")?;
                } else if d.queues == 0 {
                    d.queues = rocefab_contracts::config::WredConfig::default().queues;
                }
                if let Some(ByteSize(v)) = w.min {
                    d.min_bytes = v;
                }
                if let Some(ByteSize(v)) = w.max {
                    d.max_bytes = v;
                }
                if let Some(p) = w.probability {
                    d.probability_percent = u8::try_from(p)
                        .ok()
                        .filter(|&p| p <= 100)
                        .ok_or(("wred.probability", format!("{p} %: must be 0..=100")))?;
                }
                if let Some(s) = w.seed {
                    d.seed = s;
                }
                if let Some(a) = w.at {
                    d.at = a;
                }
            }
        }
        match &self.trim {
            None => {}
            Some(OffOr::Off) => {
                q.trim.queues = 0;
                base.trim_all_lossy = false;
            }
            Some(OffOr::On(t)) => {
                let d = &mut q.trim;
                match &t.queues {
                    Some(list) => {
                        d.queues = bitmap(list, "trim.queues")?;
                        base.trim_all_lossy = false;
                    }
                    None if d.queues == 0 => base.trim_all_lossy = true,
                    None => {}
                }
                if let Some(v) = t.size {
                    d.size = v;
                }
                if let Some(v) = t.dscp {
                    d.dscp = v;
                }
                if let Some(v) = t.queue {
                    d.queue = v;
                }
                if let Some(v) = t.strict {
                    base.trim_strict = v;
                }
            }
        }
        Ok(())
    }
}

impl SwitchQos {
    /// Completes `trim` once every level is applied: the default queues (every lossy queue but
    /// the trim queue) and the trim queue's strict priority. Errors are (key, message).
    fn resolve_trim(&mut self) -> Result<(), (&'static str, String)> {
        let q = &mut self.qos;
        if self.trim_all_lossy {
            if q.trim.queue > 7 {
                return Err(("trim.queue", format!("queue {} does not exist (0..=7)", q.trim.queue)));
            }
            q.trim.queues = !q.lossless_priorities & !(1u8 << q.trim.queue);
        }
        // The settings themselves first (their own keys), then what strictness adds.
        q.check_trim().map_err(|p| (p.field, p.msg))?;
        let t = &q.trim;
        if t.queues == 0 || !self.trim_strict {
            return Ok(());
        }
        if q.ets_percent[usize::from(t.queue)] != 0 {
            return Err((
                "trim.queue",
                format!(
                    "queue {} has a bandwidth share (qos.ets) and the trim queue is strict (trim.strict, the default): \
                     leave it out of ets or set trim.strict: false",
                    t.queue
                ),
            ));
        }
        q.strict_priorities |= 1 << t.queue;
        Ok(())
    }
}

/// Where a problem with a switch's effective QoS is reported: the override's key if that switch
/// sets it, the fabric-level key otherwise.
fn field_path(raw: &RawQos, switch: &str, key: &str) -> String {
    let top = key.split('.').next().unwrap_or(key);
    let set_by_switch = raw.switches.get(switch).is_some_and(|o| o.sets(top));
    if set_by_switch {
        format!("qos.switches.{switch}.{key}")
    } else {
        format!("qos.{key}")
    }
}

impl RawQosFields {
    fn sets(&self, key: &str) -> bool {
        match key {
            "classes" => self.classes.is_some(),
            "pfc" => self.pfc.is_some(),
            "strict" => self.strict.is_some(),
            "ets" => self.ets.is_some(),
            "buffer" => self.buffer.is_some(),
            "cell" => self.cell.is_some(),
            "xoff" => self.xoff.is_some(),
            "xon" => self.xon.is_some(),
            "headroom" => self.headroom.is_some(),
            "queue_limit" => self.queue_limit.is_some(),
            "pause_quanta" => self.pause_quanta.is_some(),
            "watchdog" => self.watchdog.is_some(),
            "wred" => self.wred.is_some(),
            "trim" => self.trim.is_some(),
            _ => false,
        }
    }
}

/// Resolves the effective QoS of every switch (`switches[i]` = (name, port count)).
/// `legacy_queue_limit` is the top-level `queue_limit_bytes`. Errors are (field path, message).
pub fn resolve(
    raw: &RawQos,
    switches: &[(String, usize)],
    legacy_queue_limit: Option<u64>,
) -> Result<Vec<SwitchQos>, (String, String)> {
    resolve_with_links(raw, switches, legacy_queue_limit, &[], &Latencies::default())
}

/// [`resolve`] for switches whose ports are `links` (by switch, in port order): `headroom: auto`
/// takes [`headroom_needed`] of them.
pub fn resolve_with_links(
    raw: &RawQos,
    switches: &[(String, usize)],
    legacy_queue_limit: Option<u64>,
    links: &[Vec<PortLink>],
    lat: &Latencies,
) -> Result<Vec<SwitchQos>, (String, String)> {
    for (name, o) in &raw.switches {
        if !switches.iter().any(|(n, _)| n == name) {
            return Err((format!("qos.switches.{name}"), format!("no switch named {name:?}")));
        }
        if !o.switches.is_empty() {
            return Err((format!("qos.switches.{name}.switches"), "overrides do not nest".into()));
        }
    }
    let mut fabric =
        SwitchQos { queue_limit_bytes: legacy_queue_limit.unwrap_or(DEFAULT_QUEUE_LIMIT), ..Default::default() };
    raw.apply(&mut fabric).map_err(|(k, m)| (format!("qos.{k}"), m))?;
    let mut out = Vec::with_capacity(switches.len());
    for (i, (name, ports)) in switches.iter().enumerate() {
        let mut eff = fabric.clone();
        if let Some(o) = raw.switches.get(name) {
            o.apply(&mut eff).map_err(|(k, m)| (format!("qos.switches.{name}.{k}"), m))?;
        }
        if eff.qos.lossless_priorities != 0 {
            eff.headroom_needed = headroom_needed(links.get(i).map_or(&[], |l| l.as_slice()), lat, eff.qos.cell_bytes);
        }
        if eff.headroom_auto {
            eff.qos.headroom_bytes = eff.headroom_needed;
        }
        eff.resolve_trim().map_err(|(k, m)| (field_path(raw, name, k), format!("{name}: {m}")))?;
        eff.qos
            .check(*ports, eff.queue_limit_bytes)
            .map_err(|p| (field_path(raw, name, p.field), format!("{name}: {}", p.msg)))?;
        eff.warnings = eff
            .qos
            .warnings()
            .iter()
            .map(|p| format!("{}: {name}: {}", field_path(raw, name, p.field), p.msg))
            .collect();
        let t = &eff.qos.trim;
        if t.queues != 0 && eff.dscp_to_tc.get(usize::from(t.dscp)).is_some_and(|&tc| tc != t.queue) {
            eff.warnings.push(format!(
                "{}: {name}: DSCP {} is classified into queue {} (qos.classes), not the trim queue {}: \
                 the next switch queues trimmed packets there",
                field_path(raw, name, "trim.dscp"),
                t.dscp,
                eff.dscp_to_tc[usize::from(t.dscp)],
                t.queue
            ));
        }
        if !eff.headroom_auto && eff.qos.headroom_bytes < eff.headroom_needed {
            eff.warnings.push(format!(
                "{}: {name}: {} B is below the {} B its links need in flight while a pause takes effect \
                 (headroom: auto); lossless frames may be lost as headroom overflows",
                field_path(raw, name, "headroom"),
                eff.qos.headroom_bytes,
                eff.headroom_needed
            ));
        }
        out.push(eff);
    }
    Ok(out)
}

/// One line per setting, for `rocefab plan`.
pub fn describe(q: &SwitchQos) -> String {
    let prios = |m: u8| {
        let v: Vec<String> = (0..8).filter(|p| m & (1 << p) != 0).map(|p| p.to_string()).collect();
        if v.is_empty() {
            "none".to_string()
        } else {
            v.join(",")
        }
    };
    let classes: Vec<String> =
        q.dscp_to_tc.iter().enumerate().filter(|(_, &tc)| tc != 0).map(|(d, tc)| format!("dscp {d}→{tc}")).collect();
    let c = &q.qos;
    let w = &c.watchdog;
    let wd = if w.enabled {
        format!(
            "{} after {} ms paused, restore after {} ms, poll {} ms",
            match w.action {
                WatchdogAction::Drop => "drop",
                WatchdogAction::Forward => "forward",
                WatchdogAction::Alert => "alert",
            },
            w.detect_us as f64 / 1e3,
            w.restore_us as f64 / 1e3,
            w.poll_us as f64 / 1e3
        )
    } else {
        "off".to_string()
    };
    let ets: Vec<String> =
        (0..8).filter(|&tc| c.ets_percent[tc] != 0).map(|tc| format!("{tc}:{}%", c.ets_percent[tc])).collect();
    let cell = if c.cell_bytes == 0 { "frame bytes".to_string() } else { format!("{}-byte cells", c.cell_bytes) };
    let r = &c.wred;
    let wred = if r.queues == 0 {
        "off".to_string()
    } else {
        format!(
            "queues {}: min {} B, max {} B, {} % at max, seed {}, marked at {}",
            prios(r.queues),
            r.min_bytes,
            r.max_bytes,
            r.probability_percent,
            r.seed,
            match r.at {
                rocefab_contracts::config::WredAt::Enqueue => "enqueue",
                rocefab_contracts::config::WredAt::Dequeue => "dequeue",
            }
        )
    };
    let t = &c.trim;
    let trim = if t.queues == 0 {
        "off".to_string()
    } else {
        format!(
            "queues {} cut to {} B, DSCP {}, to queue {}{}",
            prios(t.queues),
            t.size,
            t.dscp,
            t.queue,
            if c.strict_priorities & (1 << (t.queue & 7)) != 0 { " (strict)" } else { "" }
        )
    };
    let headroom = if q.headroom_auto {
        format!("{} B (auto: what the links need in flight)", c.headroom_bytes)
    } else if c.lossless_priorities != 0 {
        format!("{} B (the links need {} B)", c.headroom_bytes, q.headroom_needed)
    } else {
        format!("{} B", c.headroom_bytes)
    };
    format!(
        "classes {} (rest→0); pfc {}; strict {}; ets {}; buffer {} B in {cell}; xoff {} B, xon {} B, headroom {headroom}; lossy queue limit {} B; pause quanta {}; watchdog {wd}; wred/ecn {wred}; trim {trim}",
        if classes.is_empty() { "none".to_string() } else { classes.join(", ") },
        prios(c.lossless_priorities),
        prios(c.strict_priorities),
        if ets.is_empty() { "none".to_string() } else { ets.join(" ") },
        c.buffer_bytes,
        c.xoff_bytes,
        c.xon_bytes,
        q.queue_limit_bytes,
        c.pause_quanta,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headroom_is_twice_the_cable_plus_the_pipelines_at_line_rate_plus_two_frames_in_cells() {
        let lat = Latencies { mtu: 9000, switch_ns: 600, nic_ns: 100 };
        let nic = PortLink { rate_bps: 400_000_000_000, cable_ns: 1_000, peer_is_nic: true };
        // 400G x (2 x 1000 + 600 + 2 x 100) ns = 140,000 bytes: 16 frames of 9018 bytes (15.5)
        // charged 36 cells of 256 each (147,456), or 34 RoCE frames at path MTU 4096 (4158
        // bytes, 33.7) charged 17 cells each (147,968, the more); + 2 full frames.
        assert_eq!(headroom_needed(&[nic], &lat, 256), 34 * 17 * 256 + 2 * 9216);
        // Frame bytes when cells are off.
        assert_eq!(headroom_needed(&[nic], &lat, 0), 18 * 9018);
        // A switch peer: its forwarding latency instead of the NIC pipelines: 400G x 3200 ns =
        // 160,000 bytes = 39 RoCE frames (38.5) + 2 full frames.
        let sw = PortLink { rate_bps: 400_000_000_000, cable_ns: 1_000, peer_is_nic: false };
        assert_eq!(headroom_needed(&[sw], &lat, 256), 39 * 17 * 256 + 2 * 9216);
        // The switch needs what its most demanding port needs.
        assert_eq!(headroom_needed(&[nic, sw], &lat, 256), 39 * 17 * 256 + 2 * 9216);
        // No delay anywhere: the two frames at both ends only.
        let none = Latencies { mtu: 1500, ..Default::default() };
        let p = PortLink { cable_ns: 0, ..nic };
        assert_eq!(headroom_needed(&[p], &none, 256), 2 * 1536);
        assert_eq!(headroom_needed(&[], &lat, 256), 0);
    }

    #[test]
    fn headroom_auto_takes_what_the_links_need_and_a_size_overrides_it() {
        let sw = [("rail1".to_string(), 1usize), ("rail2".to_string(), 1)];
        let lat = Latencies { mtu: 1500, switch_ns: 1_000, nic_ns: 0 };
        let links = vec![
            vec![PortLink { rate_bps: 100_000_000_000, cable_ns: 5_000, peer_is_nic: true }],
            vec![PortLink { rate_bps: 100_000_000_000, cable_ns: 0, peer_is_nic: true }],
        ];
        // rail1: 100G x 11 us = 137,500 bytes = 127 RoCE frames at path MTU 1024 (1086 bytes,
        // 126.6) charged 5 cells each, + 2 full frames (1518 bytes, 6 cells).
        let q = resolve_with_links(&parse("headroom: auto\n"), &sw, None, &links, &lat).unwrap();
        assert_eq!((q[0].headroom_auto, q[0].qos.headroom_bytes), (true, 127 * 1280 + 2 * 1536));
        // rail2: 100G x 1 us (its forwarding latency) = 12,500 bytes = 12 RoCE frames (11.5) + 2.
        assert_eq!(q[1].qos.headroom_bytes, 12 * 1280 + 2 * 1536);
        let text = describe(&q[0]);
        assert!(text.contains("headroom 165632 B (auto: what the links need in flight)"), "{text}");
        // A per-switch size replaces auto; what the links need is still known (for the warning).
        let raw = parse("headroom: auto\nswitches:\n  rail2: { headroom: 4KB }\n");
        let q = resolve_with_links(&raw, &sw, None, &links, &lat).unwrap();
        assert_eq!(
            (q[1].headroom_auto, q[1].qos.headroom_bytes, q[1].headroom_needed),
            (false, 4000, 12 * 1280 + 2 * 1536)
        );
        assert!(describe(&q[1]).contains("headroom 4000 B (the links need"), "{}", describe(&q[1]));
        let e = yaml_serde::from_str::<RawQos>("headroom: lots\n").unwrap_err().to_string();
        assert!(e.contains("or auto"), "{e}");
    }

    fn parse(src: &str) -> RawQos {
        yaml_serde::from_str(src).unwrap()
    }

    #[test]
    fn sizes_and_times() {
        assert_eq!(parse_byte_size("3200000"), Ok(3_200_000));
        assert_eq!(parse_byte_size("3.2MB"), Ok(3_200_000));
        assert_eq!(parse_byte_size("512KiB"), Ok(524_288));
        assert_eq!(parse_byte_size("16MiB"), Ok(16 << 20));
        assert!(parse_byte_size("1.5B").unwrap_err().contains("whole number"));
        assert!(parse_byte_size("3Mb").unwrap_err().contains("unknown size unit"));
        assert_eq!(parse_duration_us("200ms"), Ok(200_000));
        assert_eq!(parse_duration_us("500us"), Ok(500));
        assert_eq!(parse_duration_us("1.5s"), Ok(1_500_000));
        assert!(parse_duration_us("200").unwrap_err().contains("needs a unit"));
    }

    #[test]
    fn defaults_are_the_book_example() {
        let q = resolve(&RawQos::default(), &[("rail1".into(), 4)], None).unwrap();
        let s = &q[0];
        assert_eq!(s.qos, QosConfig::default());
        assert_eq!(s.dscp_to_tc[24], 3);
        assert_eq!(s.dscp_to_tc[48], 7);
        assert_eq!(s.dscp_to_tc[0], 0);
        assert_eq!(s.queue_limit_bytes, DEFAULT_QUEUE_LIMIT);
    }

    #[test]
    fn switch_overrides_fabric() {
        let raw = parse(
            "pfc: [3, 4]\nxoff: 2MB\nwred: { max: 900KB }\nwatchdog: { action: alert, detect: 100ms }\nclasses: { 26: 4, 48: 7 }\nswitches:\n  spine1: { xoff: 1MB, watchdog: off }\n",
        );
        let sw = [("rail1".to_string(), 4), ("spine1".to_string(), 2)];
        let q = resolve(&raw, &sw, Some(4096)).unwrap();
        assert_eq!(q[0].qos.lossless_priorities, 0b1_1000);
        assert_eq!(q[0].qos.xoff_bytes, 2_000_000);
        assert_eq!(q[1].qos.xoff_bytes, 1_000_000);
        assert_eq!(q[0].qos.watchdog.action, WatchdogAction::Alert);
        assert_eq!(q[0].qos.watchdog.detect_us, 100_000);
        assert_eq!(q[0].qos.watchdog.restore_us, 200_000);
        assert!(q[0].qos.watchdog.enabled);
        assert!(!q[1].qos.watchdog.enabled);
        assert_eq!(q[1].dscp_to_tc[26], 4);
        assert_eq!(q[1].dscp_to_tc[24], 0);
        assert_eq!(q[0].queue_limit_bytes, 4096);
        assert!(describe(&q[0]).contains("pfc 3,4"), "{}", describe(&q[0]));
        assert!(describe(&q[0]).contains("strict 7; ets 0:50% 3:50%;"), "{}", describe(&q[0]));
    }

    #[test]
    fn wred_defaults_overrides_off_and_errors() {
        let d = &resolve(&RawQos::default(), &[("rail1".into(), 4)], None).unwrap()[0].qos.wred;
        assert_eq!((d.queues, d.min_bytes, d.max_bytes, d.probability_percent), (1 << 3, 150_000, 3_000_000, 7));
        let raw = parse("wred: { queues: [3, 4], min: 200KB, max: 1MB, probability: 10, seed: 9 }\nswitches:\n  spine1: { wred: off }\n");
        let sw = [("rail1".to_string(), 4), ("spine1".to_string(), 2)];
        let q = resolve(&raw, &sw, None).unwrap();
        let w = &q[0].qos.wred;
        assert_eq!(
            (w.queues, w.min_bytes, w.max_bytes, w.probability_percent, w.seed),
            (0b1_1000, 200_000, 1_000_000, 10, 9)
        );
        assert_eq!(q[1].qos.wred.queues, 0);
        assert!(
            describe(&q[0]).contains("wred/ecn queues 3,4: min 200000 B, max 1000000 B, 10 % at max"),
            "{}",
            describe(&q[0])
        );
        assert!(describe(&q[1]).contains("wred/ecn off"), "{}", describe(&q[1]));
        // xON < min < max < xOFF on a lossless queue is a rule of thumb: breaking it is a
        // warning at load, named by the key that broke it (it was an error before issue 23).
        let warned = |yaml: &str| resolve(&parse(yaml), &sw, None).unwrap();
        let q = warned("xoff: 2MB\n");
        assert_eq!(q[0].warnings.len(), 1, "{:?}", q[0].warnings);
        assert!(
            q[0].warnings[0].starts_with("qos.wred.max: rail1: 3000000 bytes is not below xoff (2000000 bytes)"),
            "{:?}",
            q[0].warnings
        );
        assert!(q[1].warnings[0].starts_with("qos.wred.max: spine1: "), "{:?}", q[1].warnings);
        let q = warned("xoff: 2MB\nswitches:\n  spine1: { wred: off }\n");
        assert_eq!(q[1].warnings, Vec::<String>::new(), "spine1 has wred off");
        let q = warned("wred: { min: 100KB }\n");
        assert!(
            q[0].warnings[0].starts_with("qos.wred.min: rail1: ")
                && q[0].warnings[0].contains("not above xon (120000 bytes)"),
            "{:?}",
            q[0].warnings
        );
        let q = warned("switches:\n  spine1: { xoff: 1MB, wred: { max: 2MB, at: dequeue } }\n");
        assert_eq!(q[0].warnings, Vec::<String>::new());
        assert_eq!(q[1].qos.wred.at, rocefab_contracts::config::WredAt::Dequeue);
        assert_eq!(q[0].qos.wred.at, rocefab_contracts::config::WredAt::Enqueue);
        assert!(describe(&q[1]).contains("marked at dequeue"), "{}", describe(&q[1]));
        assert!(
            q[1].warnings[0]
                .starts_with("qos.switches.spine1.wred.max: spine1: 2000000 bytes is not below xoff (1000000 bytes)"),
            "{:?}",
            q[1].warnings
        );
        // An ECN step (min = max) is consistent.
        assert_eq!(warned("wred: { min: 1MB, max: 1MB }\n")[0].warnings, Vec::<String>::new());
        let e = yaml_serde::from_str::<RawQos>("wred: { at: ingress }\n").unwrap_err().to_string();
        assert!(e.contains("unknown variant `ingress`, expected `enqueue` or `dequeue`"), "{e}");
        let err = |yaml: &str| resolve(&parse(yaml), &sw, None).unwrap_err();
        let (f, _) = err("wred: { min: 2MB, max: 1MB }\n");
        assert_eq!(f, "qos.wred.min");
        let (f, m) = err("wred: { probability: 101 }\n");
        assert_eq!(f, "qos.wred.probability");
        assert!(m.contains("101 %"), "{m}");
        let (f, _) = err("wred: { queues: [8] }\n");
        assert_eq!(f, "qos.wred.queues");
        let q = warned("switches:\n  spine1: { xoff: 1MB }\n");
        assert!(
            q[1].warnings[0].starts_with("qos.wred.max: spine1: "),
            "the fabric-level key, not set by spine1: {:?}",
            q[1].warnings
        );
        // A lossy WRED queue needs no PFC thresholds.
        assert!(resolve(&parse("pfc: []\nxoff: 64KB\n"), &sw, None).is_ok());
    }

    #[test]
    fn trim_defaults_overrides_off_and_strictness() {
        let sw = [("rail1".to_string(), 4), ("spine1".to_string(), 2)];
        // Off unless asked for.
        let q = resolve(&RawQos::default(), &sw, None).unwrap();
        assert_eq!(q[0].qos.trim.queues, 0);
        assert!(describe(&q[0]).contains("; trim off"), "{}", describe(&q[0]));
        // `on`: SAI's size, DSCP 48 to strict queue 7, every lossy queue but the trim queue
        // (queue 3 is lossless by default).
        let q = resolve(&parse("trim: on\n"), &sw, None).unwrap();
        let t = &q[0].qos.trim;
        assert_eq!((t.queues, t.size, t.dscp, t.queue), (0b0111_0111, 128, 48, 7));
        assert_eq!(q[0].qos.strict_priorities, 1 << 7);
        assert_eq!(q[0].warnings, Vec::<String>::new(), "DSCP 48 is queue 7 in the default map");
        assert!(
            describe(&q[0]).contains("; trim queues 0,1,2,4,5,6 cut to 128 B, DSCP 48, to queue 7 (strict)"),
            "{}",
            describe(&q[0])
        );
        // A trim queue of its own is made strict; the per-switch override turns it off; queues
        // follow the lossless set once every level is applied.
        let raw = parse(
            "trim: { size: 256, dscp: 46, queue: 6 }\nclasses: { 24: 3, 46: 6, 48: 7 }\nswitches:\n  spine1: { trim: off }\n  rail1: { pfc: [3, 4] }\n",
        );
        let q = resolve(&raw, &sw, None).unwrap();
        let t = &q[0].qos.trim;
        assert_eq!((t.queues, t.size, t.dscp, t.queue), (0b1010_0111, 256, 46, 6));
        assert_eq!(q[0].qos.strict_priorities, 0b1100_0000);
        assert_eq!(q[1].qos.trim.queues, 0);
        assert_eq!(q[1].qos.strict_priorities, 1 << 7, "no trim queue made strict where trim is off");
        // strict: false leaves the scheduler as configured; a trim queue with a share is then fine.
        let raw = parse("trim: { queues: [0], queue: 1, dscp: 8, strict: false }\nets: { 0: 50, 1: 10, 3: 40 }\n");
        let q = resolve(&raw, &sw, None).unwrap();
        assert_eq!((q[0].qos.trim.queues, q[0].qos.strict_priorities), (1, 1 << 7));
        // The next hop classifies DSCP 8 into queue 0: a warning naming the key.
        assert!(
            q[0].warnings.iter().any(|w| w.starts_with("qos.trim.dscp: rail1: DSCP 8 is classified into queue 0")),
            "{:?}",
            q[0].warnings
        );
    }

    #[test]
    fn trim_errors_name_the_key() {
        let sw = [("rail1".to_string(), 4), ("spine1".to_string(), 2)];
        let e = |src: &str| resolve(&parse(src), &sw, None).unwrap_err();
        let (f, m) = e("trim: { size: 32 }\n");
        assert_eq!(f, "qos.trim.size");
        assert!(m.contains("rail1: 32 bytes: a trimmed frame is 64..=1024 bytes"), "{m}");
        assert_eq!(e("trim: { dscp: 64 }\n").0, "qos.trim.dscp");
        assert_eq!(e("trim: { queue: 8 }\n").0, "qos.trim.queue");
        let (f, m) = e("trim: { queue: 3 }\n");
        assert_eq!(f, "qos.trim.queue");
        assert!(m.contains("queue 3 is lossless (qos.pfc): the trim queue must be lossy"), "{m}");
        let (f, m) = e("trim: { queues: [0, 3] }\n");
        assert_eq!(f, "qos.trim.queues");
        assert!(m.contains("queue 3 is lossless"), "{m}");
        let (f, m) = e("trim: { queues: [0, 7] }\n");
        assert_eq!(f, "qos.trim.queues");
        assert!(m.contains("queue 7 is the trim queue"), "{m}");
        assert_eq!(e("trim: { queues: [9] }\n").0, "qos.trim.queues");
        // A strict trim queue with an ETS share.
        let (f, m) = e("trim: { queue: 0, queues: [1] }\n");
        assert_eq!(f, "qos.trim.queue");
        assert!(m.contains("queue 0 has a bandwidth share (qos.ets)"), "{m}");
        // Per switch: the override's key.
        assert_eq!(e("switches:\n  spine1: { trim: { size: 2000 } }\n").0, "qos.switches.spine1.trim.size");
        // Unknown keys and values of the wrong type are the YAML reader's.
        let e = yaml_serde::from_str::<RawQos>("trim: { sise: 128 }\n").unwrap_err().to_string();
        assert!(e.contains("unknown field `sise`"), "{e}");
        let e = yaml_serde::from_str::<RawQos>("trim: { dscp: 300 }\n").unwrap_err().to_string();
        assert!(e.contains("300"), "{e}");
        assert!(yaml_serde::from_str::<RawQos>("trim: sometimes\n").is_err());
    }

    #[test]
    fn ets_shares_with_a_switch_override() {
        let raw = parse("ets: { 0: 70, 3: 30 }\nswitches:\n  spine1: { strict: [3, 7], ets: { 0: 100 } }\n");
        let sw = [("rail1".to_string(), 4), ("spine1".to_string(), 2)];
        let q = resolve(&raw, &sw, None).unwrap();
        assert_eq!(q[0].qos.ets_percent, [70, 0, 0, 30, 0, 0, 0, 0]);
        assert_eq!(q[0].qos.strict_priorities, 1 << 7);
        assert_eq!(q[1].qos.ets_percent, [100, 0, 0, 0, 0, 0, 0, 0]);
        assert_eq!(q[1].qos.strict_priorities, 0b1000_1000);
        assert!(describe(&q[1]).contains("strict 3,7; ets 0:100%;"), "{}", describe(&q[1]));
        assert_eq!(resolve(&RawQos::default(), &sw, None).unwrap()[0].qos.ets_percent, [50, 0, 0, 50, 0, 0, 0, 0]);
    }

    #[test]
    fn ets_errors_name_the_key() {
        let sw = [("rail1".to_string(), 4), ("spine1".to_string(), 2)];
        let e = |src: &str| resolve(&parse(src), &sw, None).unwrap_err();
        let (f, m) = e("ets: { 0: 60, 3: 50 }\n");
        assert_eq!(f, "qos.ets");
        assert!(m.contains("rail1: the shares add up to 110 %"), "{m}");
        let (f, m) = e("ets: { 8: 100 }\n");
        assert_eq!(f, "qos.ets");
        assert!(m.contains("queue 8 does not exist"), "{m}");
        assert!(e("ets: { 0: 0, 3: 100 }\n").1.contains("queue 0: 0 %"));
        assert!(e("ets: { 0: 101 }\n").1.contains("1..=100"));
        // Queue 3 made strict while the default shares still give it 50 %.
        let (f, m) = e("strict: [3, 7]\n");
        assert_eq!(f, "qos.ets");
        assert!(m.contains("queue 3 is strict"), "{m}");
        let (f, m) = e("switches:\n  spine1: { ets: { 0: 20, 3: 20 } }\n");
        assert_eq!(f, "qos.switches.spine1.ets");
        assert!(m.starts_with("spine1: the shares add up to 40 %"), "{m}");
        assert_eq!(e("switches:\n  spine1: { ets: { 9: 100 } }\n").0, "qos.switches.spine1.ets");
        // Every queue strict: no shares is fine.
        assert!(resolve(&parse("strict: [0, 1, 2, 3, 4, 5, 6, 7]\nets: {}\n"), &sw, None).is_ok());
    }

    #[test]
    fn errors_name_the_key_that_is_wrong() {
        let sw = [("rail1".to_string(), 4), ("spine1".to_string(), 2)];
        let e = resolve(&parse("xon: 4MB\n"), &sw, None).unwrap_err();
        assert_eq!(e.0, "qos.xon");
        assert!(e.1.contains("not below xoff"), "{}", e.1);
        let e = resolve(&parse("switches:\n  spine1: { xon: 4MB }\n"), &sw, None).unwrap_err();
        assert_eq!(e.0, "qos.switches.spine1.xon");
        assert!(e.1.starts_with("spine1: "), "{}", e.1);
        let e = resolve(&parse("switches:\n  spine9: { xon: 1 }\n"), &sw, None).unwrap_err();
        assert_eq!(e.0, "qos.switches.spine9");
        assert_eq!(resolve(&parse("pfc: [8]\n"), &sw, None).unwrap_err().0, "qos.pfc");
        assert_eq!(resolve(&parse("classes: { 64: 3 }\n"), &sw, None).unwrap_err().0, "qos.classes");
        assert_eq!(resolve(&parse("headroom: 5MB\n"), &sw, None).unwrap_err().0, "qos.headroom");
        assert_eq!(resolve(&parse("xoff: 20MB\n"), &sw, None).unwrap_err().0, "qos.xoff");
        assert!(yaml_serde::from_str::<RawQos>("xof: 1\n").is_err());
        assert!(yaml_serde::from_str::<RawQos>("watchdog: { action: reboot }\n").is_err());
    }
}
