//! Topology files: the YAML a network engineer writes to describe a fabric (book ch. 13 rail
//! designs: single rail switch with rails as port groups, rail-optimized leaf/spine pods).
//!
//! ```yaml
//! fabric: rs                  # [a-z0-9], 1..=12 chars; namespaces are rf-<fabric>-<node>
//! mtu: 1500                   # every link, 68..=9216; above 3822 (e.g. 9216, RoCE path MTU 4096)
//!                             # frames span UMEM chunks: XDP multi-buffer + AF_XDP XDP_USE_SG
//! hash_seed: per-switch       # per-switch (default) | shared | <u32> (one explicit shared seed)
//! hosts:
//!   count: 4                  # host1..host4
//!   gpus_per_host: 2          # gpu0..gpu1; local rank g is on rail g+1
//!   nic: per-gpu              # per-gpu: a single-port NIC per GPU (Fig. 13-2); shared: one NIC
//!                             # for all GPUs of a host, on rail 1, named nic0 (Fig. 13-1);
//!                             # dual-port: two ports per GPU NIC, gpu<g>p0/p1, to the first and
//!                             # second switch listing its rail, QPs alternating (Fig. 13-5)
//!   nvlink: { bandwidth: 3600Gbps, latency: 1us }   # optional: collectives move data between
//!                             # a host's GPUs over NVLink (per GPU, one direction; no frames)
//!   pxn: false                # true: a send to another rail crosses NVLink to the local GPU on
//!                             # the destination's rail, then its NIC (NCCL PXN; rail-only fabrics)
//! switches:
//!   rail:                     # leaves; a rail switch may serve several rails (port groups)
//!     - { name: rail1, rails: [1] }              # optional `hosts: 1-2` (default: all hosts)
//!     - { name: rail2, rails: [2] }
//!   spine:
//!     - { name: spine1 }
//!     - { name: spine2 }
//! links:
//!   line_rate: { host_rail: 1Gbps, rail_spine: 1Gbps }   # defaults per link class
//!   rail_spine: full-mesh     # or a list: [{ rail: rail1, spine: spine1, line_rate: 10Gbps }]
//!   delay: { host_rail: 1us, rail_spine: 200m }   # cable propagation per link class: a
//!                             # duration or a length in metres (5 ns/m); default none
//!   overrides:                # per-link line rates and delays; `hostN` or `hostN:gpuG`, switch names
//!     - { between: [rail1, spine2], line_rate: 100Mbps, delay: 2us }
//! addressing:                 # all optional
//!   rail_base: 10.0.0.0       # rail r → (rail_base + r·256)/24, GPU .<host>, gateway .254
//!   rails: { 2: 192.168.2.0/24 }   # per-rail subnet override (prefix length ≤ 24)
//!   rail_subnets: per-rail    # per-rail (default): a /24 per rail; per-switch: the rails a
//!                             # switch serves (rails: [1, 2]) share the k-th /24 from rail_base,
//!                             # a /25 each for two (book Fig. 13-11: 10.0.1.0/25, 10.0.1.128/25),
//!                             # /26 for up to four, /27 for eight, gateway the last address;
//!                             # the spines route the summary /24
//!   p2p: 10.255.0.0/16        # /31 per switch-to-switch link
//! naming: { host_nic: "gpu{gpu}", switch_port: "eth{port}" }   # ≤ 15 chars once expanded
//! metrics_port_base: 9400     # optional; default: first free block from 9400 (switches, then
//!                             # one per host NIC agent)
//! lldp: { tx_interval: 30s, nic: { willing: true } }   # LLDP/DCBX, see crate::lldp
//! time_dilation: 1            # D ≥ 1 (fractional allowed); rates and timers above are emulated
//! load_balance: { mode: ecmp, flowlet_gap: 50us }      # egress choice, see crate::lb
//! dcqcn: { profile: ns3-hpcc }  # GPU NICs' DCQCN parameters: ns3-hpcc (default) | connectx | dcqcn-paper | htsim | hpcc-dcqcn-paper | hpcc-dcqcn
//!                             # np: { cnp: immediate | deferred, scope: qp | ip_pair | port }: the
//!                             # notification point (default immediate per QP, the paper's)
//! latency: { switch: 600ns, nic: 100ns }   # forwarding latency of every switch, pipeline latency
//!                             # of every NIC each way (emulated; default none)
//! ```
//!
//! A multi-pod fabric (book Fig. 13-9: pods of rail switches and spines joined by super-spines,
//! 3 tiers, 5 stages) lists its pods under `switches.pods` instead of `rail`/`spine`:
//!
//! ```yaml
//! fabric: mp
//! hosts: { count: 4, gpus_per_host: 2 }
//! switches:
//!   pods:                     # pod p: its hosts, rail switches and spines
//!     - hosts: 1-2            # a rail switch's `hosts` (default: the pod's) stay in its pod
//!       rail: [{ name: p1rail1, rails: [1] }, { name: p1rail2, rails: [2] }]
//!       spine: [{ name: p1spine1 }, { name: p1spine2 }]
//!     - hosts: 3-4
//!       rail: [{ name: p2rail1, rails: [1] }, { name: p2rail2, rails: [2] }]
//!       spine: [{ name: p2spine1 }, { name: p2spine2 }]
//!   super-spine:
//!     - { name: ss1 }
//!     - { name: ss2 }
//! links:
//!   line_rate: { spine_super_spine: 1Gbps }
//!   rail_spine: full-mesh     # inside each pod (a list may only pair a pod's own switches)
//!   spine_super_spine: full-mesh   # or a list: [{ spine: p1spine1, super-spine: ss1 }]
//! ```
//!
//! Routes follow up/down paths (never through another rail switch): a GPU reaches its pod's
//! other rails through the pod's spines and other pods through the super-spines, with an ECMP
//! group wherever several neighbours are equally close (see [`crate::plan`]).
//!
//! `time_dilation: D` (docs/src/emulated-time.md): every line rate, threshold and timer in the
//! file is the real fabric's; the daemons divide rates by D and multiply durations by D where
//! they meet the wall clock, and report in emulated units. `400Gbps` at `time_dilation: 8000`
//! moves 50 Mbit/s on the wall clock.
//!
//! Errors are one line naming the file, the line and the field:
//! `topologies/bad.yaml:7: hosts.gpus_per_host: invalid type: string "x", expected an integer 1..=8`.
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};

use rocefab_contracts::time::Dilation;
use serde::de::{self, Deserializer, Visitor};
use serde::Deserialize;

/// A topology file that failed to load.
#[derive(Debug, thiserror::Error)]
pub enum TopologyError {
    #[error("{file}: {err}")]
    Io { file: String, err: std::io::Error },
    /// Syntax / schema error reported by the YAML parser (message already names the field).
    #[error("{file}:{line}: {msg}")]
    Parse { file: String, line: usize, msg: String },
    /// Semantic validation error.
    #[error("{file}:{line}: {field}: {msg}")]
    Invalid { file: String, line: usize, field: String, msg: String },
}

// ---------------------------------------------------------------------------------------------
// Raw schema (what serde reads)

#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
struct RawTopology {
    #[serde(deserialize_with = "de_text")]
    #[schemars(with = "String")]
    fabric: String,
    #[serde(default, deserialize_with = "de_opt_text")]
    #[schemars(with = "Option<String>")]
    description: Option<String>,
    #[serde(default = "default_mtu", deserialize_with = "de_mtu")]
    #[schemars(range(min = 68, max = 9216))]
    mtu: u32,
    #[serde(default)]
    hash_seed: HashSeed,
    hosts: RawHosts,
    switches: RawSwitches,
    #[serde(default)]
    links: RawLinks,
    #[serde(default)]
    addressing: RawAddressing,
    #[serde(default)]
    naming: RawNaming,
    #[serde(default)]
    metrics_port_base: Option<u16>,
    /// XDP attach mode for every switch: `driver` (default) or `skb`.
    #[serde(default = "default_xdp_mode")]
    xdp_mode: XdpMode,
    /// Per-queue buffer limit of lossy queues in bytes (older spelling of `qos.queue_limit`).
    #[serde(default)]
    queue_limit_bytes: Option<u64>,
    /// Traffic classes, shared buffer, PFC and watchdog (see [`crate::qos`]).
    #[serde(default)]
    qos: crate::qos::RawQos,
    /// LLDP timing and what the GPU NICs advertise in DCBX (see [`crate::lldp`]).
    #[serde(default)]
    lldp: crate::lldp::RawLldp,
    /// Time dilation D ≥ 1 (see the module docs); 1 = real time.
    #[serde(default = "default_time_dilation", deserialize_with = "de_time_dilation")]
    #[schemars(range(min = 1))]
    time_dilation: f64,
    /// Egress choice among ECMP members per switch and class (see [`crate::lb`]).
    #[serde(default)]
    load_balance: crate::lb::RawLoadBalance,
    /// The GPU NICs' DCQCN parameter set.
    #[serde(default)]
    dcqcn: RawDcqcn,
    /// Switch and NIC pipeline latencies (emulated).
    #[serde(default)]
    latency: RawLatency,
    /// Who computes the routes: `static` (the plan, default) or `bgp` (FRR on every switch).
    #[serde(default)]
    routing: Routing,
    /// BGP's settings with `routing: bgp`.
    #[serde(default)]
    bgp: RawBgp,
}

/// `routing:`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Routing {
    /// Routes computed by the plan and written by `rocefab up` (and `rocefab fail`).
    #[default]
    Static,
    /// eBGP by FRR on every switch; the data path follows the kernel's FIB.
    Bgp,
}

/// `bgp: { bfd_interval: 100ms, bfd_multiplier: 3 }` (emulated; FRR gets the interval × D).
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
struct RawBgp {
    #[serde(default = "default_bfd_interval")]
    bfd_interval: BfdInterval,
    #[serde(default = "default_bfd_multiplier")]
    bfd_multiplier: u8,
}

impl Default for RawBgp {
    fn default() -> Self {
        RawBgp { bfd_interval: default_bfd_interval(), bfd_multiplier: default_bfd_multiplier() }
    }
}

fn default_bfd_interval() -> BfdInterval {
    BfdInterval(100_000_000)
}

/// `bgp.bfd_interval`, ns: a duration with its unit. It read as a cable [`Delay`] once, which
/// stops at 10 ms, so the default 100 ms could not be written out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct BfdInterval(u64);

impl<'de> Deserialize<'de> for BfdInterval {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = de_text(d)?;
        let t = rocefab_units::parse_duration(&s, rocefab_units::Bare::Refuse).map_err(de::Error::custom)?;
        Ok(BfdInterval(u64::try_from(t.as_nanos()).unwrap_or(u64::MAX)))
    }
}

impl schemars::JsonSchema for BfdInterval {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "BfdInterval".into()
    }
    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        crate::schema::duration("the BFD transmit interval, emulated (× time_dilation on FRR's 10..60000 ms)")
    }
}

fn default_bfd_multiplier() -> u8 {
    3
}

/// BGP's settings on the wall clock (`bgp:` × D).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BgpSettings {
    /// BFD transmit and receive interval, wall-clock ms (FRR's unit).
    pub bfd_interval_ms: u64,
    pub bfd_multiplier: u8,
}

/// `dcqcn: { profile: ns3-hpcc | connectx | dcqcn-paper | htsim | hpcc-dcqcn-paper | hpcc-dcqcn,
/// np: { cnp: immediate | deferred, scope: qp | ip_pair | port } }`.
#[derive(Debug, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
struct RawDcqcn {
    #[serde(default)]
    profile: rocefab_contracts::dcqcn::DcqcnProfile,
    /// The notification point (gpu-host `dcqcn` module docs, "The notification point").
    #[serde(default)]
    np: rocefab_contracts::dcqcn::NpSettings,
}

/// The JSON Schema of what [`Topology::parse`] reads, as published in
/// `topologies/topology.schema.json` (see [`crate::schema`]).
pub fn json_schema() -> schemars::Schema {
    let mut s = schemars::schema_for!(RawTopology);
    s.insert("$id".into(), "https://rocefab.dev/schema/topology.schema.json".into());
    s.insert("title".into(), "rocefab topology".into());
    s.insert(
        "description".into(),
        "A rocefab fabric: hosts with GPUs and NICs, rail, spine and super-spine switches, links, QoS, load balancing, LLDP, DCQCN and routing (model/src/topology.rs has every field's meaning)".into(),
    );
    s
}

/// [`json_schema`] as the published file's text.
pub fn json_schema_text() -> String {
    let mut t = serde_json::to_string_pretty(&json_schema()).expect("a schema is JSON");
    t.push('\n');
    t
}

fn default_time_dilation() -> f64 {
    1.0
}

/// A YAML number (integer or float); the range is checked in [`validate`] so the error names
/// the field with its line.
fn de_time_dilation<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    struct V;
    impl Visitor<'_> for V {
        type Value = f64;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("a number ≥ 1 (e.g. 8000 or 2.5)")
        }
        fn visit_u64<E: de::Error>(self, v: u64) -> Result<f64, E> {
            Ok(v as f64)
        }
        fn visit_i64<E: de::Error>(self, v: i64) -> Result<f64, E> {
            Ok(v as f64)
        }
        fn visit_f64<E: de::Error>(self, v: f64) -> Result<f64, E> {
            Ok(v)
        }
    }
    d.deserialize_any(V)
}

fn default_mtu() -> u32 {
    1500
}
fn default_xdp_mode() -> XdpMode {
    XdpMode::Driver
}

#[derive(Debug, Deserialize, Clone, Copy, PartialEq, Eq, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum XdpMode {
    Driver,
    Skb,
}

impl XdpMode {
    pub fn as_str(self) -> &'static str {
        match self {
            XdpMode::Driver => "driver",
            XdpMode::Skb => "skb",
        }
    }
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
struct RawHosts {
    #[serde(deserialize_with = "de_host_count")]
    #[schemars(range(min = 1, max = 253))]
    count: u32,
    #[serde(deserialize_with = "de_gpus")]
    #[schemars(range(min = 1, max = 8))]
    gpus_per_host: u32,
    #[serde(default)]
    nic: NicModel,
    /// The GPUs' NVLink (emulated): transfers between two GPUs of a host take it.
    #[serde(default)]
    nvlink: Option<RawNvlink>,
    /// PXN: a send to another rail crosses NVLink to the local GPU on that rail first.
    #[serde(default)]
    pxn: bool,
}

/// `hosts.nvlink`: each GPU's NVLink bandwidth (one direction) and its latency.
#[derive(Debug, Deserialize, Clone, Copy, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
struct RawNvlink {
    bandwidth: LineRate,
    #[serde(default)]
    latency: Delay,
}

/// How rail subnets are laid out (`addressing.rail_subnets`).
#[derive(Debug, Deserialize, Clone, Copy, PartialEq, Eq, Default, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum RailSubnets {
    /// Rail r is (rail_base + r·256)/24.
    #[default]
    PerRail,
    /// The k-th group of rails served together (`rails: [1, 2]`) is (rail_base + k·256)/24, split
    /// evenly among its rails; routes toward it are that /24 (the summary).
    PerSwitch,
}

/// How GPUs reach the network.
#[derive(Debug, Deserialize, Clone, Copy, PartialEq, Eq, Default, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum NicModel {
    /// One single-port NIC per GPU (book Fig. 13-2).
    #[default]
    PerGpu,
    /// All GPUs share one single-port NIC on rail 1 (book Fig. 13-1: one NIC behind a PCIe
    /// switch): its line rate, pacer, PFC pause and DCQCN serve every GPU's QPs.
    Shared,
    /// A dual-port NIC per GPU (book Fig. 13-5, dual-rail): port 0 to the first switch listing
    /// the GPU's rail, port 1 to the second, each port its own interface and subnet; a GPU's
    /// QPs alternate between the ports.
    DualPort,
}

impl NicModel {
    /// NIC ports per host for `gpus` GPUs (each an interface, a link and a "rail side").
    pub fn nics(self, gpus: u32) -> u32 {
        match self {
            NicModel::PerGpu => gpus,
            NicModel::Shared => 1,
            NicModel::DualPort => 2 * gpus,
        }
    }
    /// Ports per NIC.
    pub fn ports(self) -> u32 {
        match self {
            NicModel::DualPort => 2,
            _ => 1,
        }
    }
    /// The name of NIC port `n` of a host from the pattern (`{gpu}`, `{rail}`, `{port}`).
    pub fn nic_name(self, pattern: &str, n: u32) -> String {
        let (gpu, port) = (n / self.ports(), n % self.ports());
        pattern
            .replace("{gpu}", &gpu.to_string())
            .replace("{rail}", &(gpu + 1).to_string())
            .replace("{port}", &port.to_string())
    }
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
struct RawSwitches {
    /// Rail switches of a single-pod fabric.
    #[serde(default)]
    rail: Vec<RawRailSwitch>,
    /// Spines of a single-pod fabric.
    #[serde(default)]
    spine: Vec<RawSpine>,
    /// Pods of a multi-pod fabric (instead of `rail` and `spine`).
    #[serde(default)]
    pods: Vec<RawPod>,
    /// Super-spines joining the pods' spines.
    #[serde(default, rename = "super-spine")]
    super_spine: Vec<RawSpine>,
}

/// One pod: its hosts, its rail switches (leaves) and its spines.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
struct RawPod {
    hosts: HostRange,
    #[serde(default)]
    rail: Vec<RawRailSwitch>,
    #[serde(default)]
    spine: Vec<RawSpine>,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
struct RawRailSwitch {
    #[serde(deserialize_with = "de_text")]
    #[schemars(with = "String")]
    name: String,
    rails: Vec<u32>,
    #[serde(default)]
    hosts: Option<HostRange>,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
struct RawSpine {
    #[serde(deserialize_with = "de_text")]
    #[schemars(with = "String")]
    name: String,
}

#[derive(Debug, Deserialize, Default, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
struct RawLinks {
    #[serde(default)]
    line_rate: RawLineRates,
    #[serde(default)]
    delay: RawDelays,
    #[serde(default)]
    rail_spine: RailSpineCabling,
    #[serde(default)]
    spine_super_spine: SuperSpineCabling,
    #[serde(default)]
    overrides: Vec<RawOverride>,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
struct RawLineRates {
    #[serde(default = "default_rate")]
    host_rail: LineRate,
    #[serde(default = "default_rate")]
    rail_spine: LineRate,
    #[serde(default = "default_rate")]
    spine_super_spine: LineRate,
}

impl Default for RawLineRates {
    fn default() -> Self {
        RawLineRates { host_rail: default_rate(), rail_spine: default_rate(), spine_super_spine: default_rate() }
    }
}

fn default_rate() -> LineRate {
    LineRate(1_000_000_000)
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(untagged)]
enum RailSpineCabling {
    Keyword(CablingKeyword),
    List(Vec<RawRailSpineLink>),
}

impl Default for RailSpineCabling {
    fn default() -> Self {
        RailSpineCabling::Keyword(CablingKeyword::FullMesh)
    }
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
enum CablingKeyword {
    FullMesh,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
struct RawRailSpineLink {
    #[serde(deserialize_with = "de_text")]
    #[schemars(with = "String")]
    rail: String,
    #[serde(deserialize_with = "de_text")]
    #[schemars(with = "String")]
    spine: String,
    #[serde(default)]
    line_rate: Option<LineRate>,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(untagged)]
enum SuperSpineCabling {
    Keyword(CablingKeyword),
    List(Vec<RawSpineSuperSpineLink>),
}

impl Default for SuperSpineCabling {
    fn default() -> Self {
        SuperSpineCabling::Keyword(CablingKeyword::FullMesh)
    }
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
struct RawSpineSuperSpineLink {
    #[serde(deserialize_with = "de_text")]
    #[schemars(with = "String")]
    spine: String,
    #[serde(rename = "super-spine", deserialize_with = "de_text")]
    #[schemars(with = "String")]
    super_spine: String,
    #[serde(default)]
    line_rate: Option<LineRate>,
}

/// `links.delay`: the cables' propagation delay per link class (default: none).
#[derive(Debug, Deserialize, Default, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
struct RawDelays {
    #[serde(default)]
    host_rail: Delay,
    #[serde(default)]
    rail_spine: Delay,
    #[serde(default)]
    spine_super_spine: Delay,
}

impl RawDelays {
    fn of(&self, class: LinkClass) -> Delay {
        match class {
            LinkClass::HostRail => self.host_rail,
            LinkClass::RailSpine => self.rail_spine,
            LinkClass::SpineSuperSpine => self.spine_super_spine,
        }
    }
}

/// `latency:` the pipelines a frame crosses besides the cables (emulated, default none).
#[derive(Debug, Deserialize, Default, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
struct RawLatency {
    /// Every switch's forwarding latency (ingress to egress, e.g. 600ns cut-through).
    #[serde(default)]
    switch: Delay,
    /// Every GPU NIC's pipeline latency, each way (transmit and receive).
    #[serde(default)]
    nic: Delay,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
struct RawOverride {
    between: [String; 2],
    #[serde(default)]
    line_rate: Option<LineRate>,
    #[serde(default)]
    delay: Option<Delay>,
}

#[derive(Debug, Deserialize, Default, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
struct RawAddressing {
    #[serde(default)]
    rail_base: Option<Ipv4Addr>,
    /// `per-rail` (default): a /24 per rail. `per-switch`: the rails a rail switch serves share
    /// one /24, split evenly (book Fig. 13-11: two rails, a /25 each), advertised toward the
    /// spines as that /24.
    #[serde(default)]
    rail_subnets: RailSubnets,
    #[serde(default)]
    rails: BTreeMap<u32, Ipv4Net>,
    #[serde(default)]
    p2p: Option<Ipv4Net>,
}

#[derive(Debug, Deserialize, Default, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
struct RawNaming {
    #[serde(default, deserialize_with = "de_opt_text")]
    #[schemars(with = "Option<String>")]
    host_nic: Option<String>,
    #[serde(default, deserialize_with = "de_opt_text")]
    #[schemars(with = "Option<String>")]
    switch_port: Option<String>,
}

// ---------------------------------------------------------------------------------------------
// Value types with their own parsers

/// A delay in emulated ns: a duration (`1us`, `600ns`, `1.5us`) or a cable length in metres
/// (`200m`: light in fibre, 5 ns/m).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Delay(pub u64);

/// Propagation delay of light in fibre, ns per metre (refractive index ~1.5).
pub const FIBRE_NS_PER_M: u64 = 5;

impl Delay {
    pub fn parse(s: &str) -> Result<Self, String> {
        let t = s.trim();
        // `m` alone is metres here (a link delay of minutes is not a thing), `ms` milliseconds.
        if let Some(num) = t.strip_suffix('m').filter(|n| !n.ends_with('m')) {
            if let Ok(m) = num.trim().parse::<f64>() {
                if !(0.0..=2_000_000.0).contains(&m) {
                    return Err(format!("{s:?}: a cable of 0..=2000 km, in metres"));
                }
                return Ok(Delay((m * FIBRE_NS_PER_M as f64).round() as u64));
            }
        }
        let d = rocefab_units::parse_duration(t, rocefab_units::Bare::Refuse)
            .map_err(|e| format!("{e} (a delay is a duration such as 1us or 600ns, or a cable length such as 200m)"))?;
        let ns = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        if ns > rocefab_contracts::config::MAX_PORT_DELAY_NS {
            return Err(format!("{s:?}: at most 10ms"));
        }
        Ok(Delay(ns))
    }
}

impl fmt::Display for Delay {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&rocefab_units::fmt_ns(self.0 as f64))
    }
}

impl schemars::JsonSchema for Delay {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Delay".into()
    }
    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        crate::schema::delay()
    }
}

impl<'de> Deserialize<'de> for Delay {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Delay;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a delay such as 1us or 600ns, or a cable length such as 200m")
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Delay, E> {
                if v == 0 {
                    return Ok(Delay(0));
                }
                Err(E::custom(format!("{v}: a delay needs a unit (ns, us, ms) or m for a cable length")))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Delay, E> {
                Delay::parse(v).map_err(E::custom)
            }
        }
        d.deserialize_any(V)
    }
}

/// A line rate in bits per second; written `1Gbps`, `100Mbps`, `2.5Gbps`, `400G` or an integer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LineRate(pub u64);

impl LineRate {
    pub fn parse(s: &str) -> Result<Self, String> {
        rocefab_units::parse_rate(s).map(LineRate).map_err(|e| format!("line rate {e}"))
    }
}

impl fmt::Display for LineRate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let b = self.0;
        for (div, unit) in [(1_000_000_000_000, "Tbps"), (1_000_000_000, "Gbps"), (1_000_000, "Mbps"), (1_000, "Kbps")]
        {
            if b >= div && b.is_multiple_of(div / 1000) {
                let v = b as f64 / div as f64;
                return write!(f, "{v}{unit}");
            }
        }
        write!(f, "{b}bps")
    }
}

impl schemars::JsonSchema for LineRate {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "LineRate".into()
    }
    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        crate::schema::rate("a line rate")
    }
}

impl<'de> Deserialize<'de> for LineRate {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = LineRate;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a line rate such as 1Gbps or 100Mbps")
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<LineRate, E> {
                if v == 0 {
                    return Err(E::custom("line rate must be > 0"));
                }
                Ok(LineRate(v))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<LineRate, E> {
                LineRate::parse(v).map_err(E::custom)
            }
        }
        d.deserialize_any(V)
    }
}

/// An IPv4 prefix `a.b.c.d/len`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Ipv4Net {
    pub addr: Ipv4Addr,
    pub len: u8,
}

impl Ipv4Net {
    pub fn parse(s: &str) -> Result<Self, String> {
        let (a, l) = s.split_once('/').ok_or_else(|| format!("{s:?} is not a prefix (expected a.b.c.d/len)"))?;
        let addr: Ipv4Addr = a.parse().map_err(|_| format!("{a:?} is not an IPv4 address"))?;
        let len: u8 =
            l.parse().ok().filter(|&l| l <= 32).ok_or_else(|| format!("{l:?} is not a prefix length 0..=32"))?;
        let net = Ipv4Net { addr, len };
        if net.network() != addr {
            return Err(format!("{s} has host bits set (network is {}/{len})", net.network()));
        }
        Ok(net)
    }
    pub fn mask(&self) -> u32 {
        if self.len == 0 {
            0
        } else {
            u32::MAX << (32 - self.len)
        }
    }
    pub fn network(&self) -> Ipv4Addr {
        Ipv4Addr::from(u32::from(self.addr) & self.mask())
    }
    pub fn size(&self) -> u64 {
        1u64 << (32 - self.len)
    }
    /// The rail switch's address in a rail subnet: the last usable one (.254 of a /24, .126
    /// of 10.0.1.0/25, .254 of 10.0.1.128/25).
    pub fn gateway(&self) -> Ipv4Addr {
        self.nth((self.size() - 2) as u32)
    }
    /// The address at `offset` inside the prefix.
    pub fn nth(&self, offset: u32) -> Ipv4Addr {
        Ipv4Addr::from(u32::from(self.addr).wrapping_add(offset))
    }
    pub fn overlaps(&self, o: &Ipv4Net) -> bool {
        let m = self.mask() & o.mask();
        u32::from(self.addr) & m == u32::from(o.addr) & m
    }
}

impl fmt::Display for Ipv4Net {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.addr, self.len)
    }
}

impl schemars::JsonSchema for Ipv4Net {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Ipv4Net".into()
    }
    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "description": "an IPv4 prefix a.b.c.d/len without host bits",
            "type": "string",
            "pattern": r"^[0-9]{1,3}(?:\.[0-9]{1,3}){3}/[0-9]{1,2}$"
        })
    }
}

impl<'de> Deserialize<'de> for Ipv4Net {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        Ipv4Net::parse(&s).map_err(de::Error::custom)
    }
}

/// An inclusive host range `1-4` (or a single host `3`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HostRange {
    pub first: u32,
    pub last: u32,
}

impl HostRange {
    pub fn contains(&self, h: u32) -> bool {
        (self.first..=self.last).contains(&h)
    }
}

impl schemars::JsonSchema for HostRange {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "HostRange".into()
    }
    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "description": "a host number, or an inclusive range first-last from host 1 (1-4)",
            "anyOf": [
                { "type": "integer", "minimum": 0, "maximum": u32::MAX },
                { "type": "string", "pattern": r"^\s*[0-9]+\s*-\s*[0-9]+\s*$" }
            ]
        })
    }
}

impl<'de> Deserialize<'de> for HostRange {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = HostRange;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a host range such as 1-4")
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<HostRange, E> {
                let v = u32::try_from(v).map_err(|_| E::custom("host number too large"))?;
                Ok(HostRange { first: v, last: v })
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<HostRange, E> {
                let bad = || E::custom(format!("{s:?} is not a host range (expected e.g. 1-4)"));
                let (a, b) = s.split_once('-').ok_or_else(bad)?;
                let first: u32 = a.trim().parse().map_err(|_| bad())?;
                let last: u32 = b.trim().parse().map_err(|_| bad())?;
                if first == 0 || last < first {
                    return Err(bad());
                }
                Ok(HostRange { first, last })
            }
        }
        d.deserialize_any(V)
    }
}

/// Hash seed policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum HashSeed {
    /// A distinct seed per switch, derived from the fabric and switch names (default).
    #[default]
    PerSwitch,
    /// One seed for every switch (reproduces hash polarization); derived from the fabric name.
    Shared,
    /// One explicit seed for every switch.
    Fixed(u32),
}

impl schemars::JsonSchema for HashSeed {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "HashSeed".into()
    }
    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "description": "per-switch (a seed per switch, the default), shared (one seed, hash polarization) or one explicit 32-bit seed",
            "anyOf": [
                { "enum": ["per-switch", "shared"] },
                { "type": "integer", "minimum": 0, "maximum": u32::MAX }
            ]
        })
    }
}

impl<'de> Deserialize<'de> for HashSeed {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = HashSeed;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("per-switch, shared or an integer seed")
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<HashSeed, E> {
                u32::try_from(v).map(HashSeed::Fixed).map_err(|_| E::custom("hash seed must fit in 32 bits"))
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<HashSeed, E> {
                match s {
                    "per-switch" => Ok(HashSeed::PerSwitch),
                    "shared" => Ok(HashSeed::Shared),
                    _ => Err(E::custom(format!("{s:?}: expected per-switch, shared or an integer seed"))),
                }
            }
        }
        d.deserialize_any(V)
    }
}

fn bounded<'de, D: Deserializer<'de>>(d: D, lo: u64, hi: u64) -> Result<u32, D::Error> {
    struct V(u64, u64);
    impl Visitor<'_> for V {
        type Value = u32;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            write!(f, "an integer {}..={}", self.0, self.1)
        }
        fn visit_u64<E: de::Error>(self, v: u64) -> Result<u32, E> {
            if v < self.0 || v > self.1 {
                return Err(E::invalid_value(de::Unexpected::Unsigned(v), &self));
            }
            Ok(v as u32)
        }
        fn visit_i64<E: de::Error>(self, v: i64) -> Result<u32, E> {
            Err(E::invalid_value(de::Unexpected::Signed(v), &self))
        }
    }
    d.deserialize_any(V(lo, hi))
}

fn de_gpus<'de, D: Deserializer<'de>>(d: D) -> Result<u32, D::Error> {
    bounded(d, 1, 8)
}
fn de_host_count<'de, D: Deserializer<'de>>(d: D) -> Result<u32, D::Error> {
    bounded(d, 1, 253)
}
/// The largest link MTU: the lossless class's 9216-byte jumbo MTU (the book's fabric, ch. 11),
/// which carries RoCE at path MTU 4096. The daemons move a frame of it as three 4 KiB UMEM
/// chunks (`afxdp::chain::MAX_LINK_MTU`, the same number).
pub const MAX_MTU: u64 = 9216;

fn de_mtu<'de, D: Deserializer<'de>>(d: D) -> Result<u32, D::Error> {
    bounded(d, 68, MAX_MTU)
}

/// A text field (a name, a description): a YAML string. YAML resolves a plain `null`, `true`
/// or `42` to null, a boolean or a number, which a field that takes text would otherwise read as
/// the words "null", "true" or "42"; those are refused, naming what was found (quoted, they are
/// text).
fn de_text<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    struct V;
    impl<'de> Visitor<'de> for V {
        type Value = String;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("a string")
        }
        fn visit_str<E: de::Error>(self, v: &str) -> Result<String, E> {
            Ok(v.to_string())
        }
        fn visit_string<E: de::Error>(self, v: String) -> Result<String, E> {
            Ok(v)
        }
        fn visit_unit<E: de::Error>(self) -> Result<String, E> {
            Err(E::custom("expected a string, found null (write it in quotes if you mean the word)"))
        }
        fn visit_none<E: de::Error>(self) -> Result<String, E> {
            self.visit_unit()
        }
        fn visit_bool<E: de::Error>(self, v: bool) -> Result<String, E> {
            Err(E::custom(format!(
                "expected a string, found the boolean {v} (write it in quotes if you mean the word)"
            )))
        }
        fn visit_u64<E: de::Error>(self, v: u64) -> Result<String, E> {
            Err(E::custom(format!("expected a string, found the number {v} (write it in quotes if you mean the text)")))
        }
        fn visit_i64<E: de::Error>(self, v: i64) -> Result<String, E> {
            Err(E::custom(format!("expected a string, found the number {v} (write it in quotes if you mean the text)")))
        }
        fn visit_f64<E: de::Error>(self, v: f64) -> Result<String, E> {
            Err(E::custom(format!("expected a string, found the number {v} (write it in quotes if you mean the text)")))
        }
    }
    d.deserialize_any(V)
}

/// [`de_text`] for an optional field (absent: `None`; present, it must be a string).
fn de_opt_text<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    de_text(d).map(Some)
}

// ---------------------------------------------------------------------------------------------
// Validated model

/// Switch role.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Role {
    Rail,
    Spine,
    /// Joins the spines of several pods (book Fig. 13-9: 3-tier, 5-stage).
    SuperSpine,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Rail => "rail",
            Role::Spine => "spine",
            Role::SuperSpine => "super-spine",
        }
    }
}

/// A switch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Switch {
    pub name: String,
    pub role: Role,
    /// Rails served (rail switches only), in file order.
    pub rails: Vec<u32>,
    /// Hosts served (rail switches only).
    pub hosts: HostRange,
    /// Pod (index into [`Topology::pods`]) of a rail switch or spine; `None` for super-spines.
    pub pod: Option<usize>,
}

/// A pod: a group of hosts with their rail switches and spines (book ch. 13). A file without
/// `switches.pods` is one pod of every host.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pod {
    pub hosts: HostRange,
}

/// One end of a link.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Endpoint {
    /// GPU NIC `gpu` (local rank, 0-based) of host `host` (1-based).
    Gpu { host: u32, gpu: u32 },
    /// A switch, by index into [`Topology::switches`].
    Switch(usize),
}

/// Link class (selects the default line rate).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkClass {
    HostRail,
    RailSpine,
    SpineSuperSpine,
}

impl LinkClass {
    /// `host-rail`, `rail-spine` or `spine-super-spine`.
    pub fn as_str(self) -> &'static str {
        match self {
            LinkClass::HostRail => "host-rail",
            LinkClass::RailSpine => "rail-spine",
            LinkClass::SpineSuperSpine => "spine-super-spine",
        }
    }
}

/// A link between a GPU NIC and a rail switch, a rail switch and a spine, or a spine and a
/// super-spine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Link {
    pub a: Endpoint,
    pub b: Endpoint,
    pub class: LinkClass,
    pub line_rate: LineRate,
    /// Propagation delay of the cable in emulated ns (`links.delay`, docs/src/emulated-time.md).
    pub delay_ns: u64,
}

/// A validated topology.
#[derive(Debug, Clone)]
pub struct Topology {
    pub file: PathBuf,
    pub fabric: String,
    pub description: Option<String>,
    pub mtu: u32,
    pub hash_seed: HashSeed,
    pub hosts: u32,
    pub gpus_per_host: u32,
    /// How GPUs reach the network; [`Topology::nics_per_host`] NICs per host.
    pub nic_model: NicModel,
    /// The GPUs' NVLink inside each host, if any (emulated).
    pub nvlink: Option<rocefab_contracts::job::NvlinkSpec>,
    /// PXN (`hosts.pxn`): cross-rail sends relay over NVLink to the GPU on the destination's rail.
    pub pxn: bool,
    /// Rail switches first (file order, pod by pod), then spines (likewise), then super-spines.
    pub switches: Vec<Switch>,
    /// Pods in file order (one for a file without `switches.pods`).
    pub pods: Vec<Pod>,
    /// Host links (host-major, GPU order), then rail↔spine links, then spine↔super-spine links.
    pub links: Vec<Link>,
    /// Subnet of rail r at key r (1-based).
    pub rail_subnets: BTreeMap<u32, Ipv4Net>,
    /// The rail subnets as the fabric routes them: each rail and its subnet, or with
    /// `addressing.rail_subnets: per-switch` each group of rails served together and the /24
    /// that summarises their subnets.
    pub rail_groups: Vec<(Vec<u32>, Ipv4Net)>,
    pub p2p: Ipv4Net,
    pub host_nic_pattern: String,
    pub switch_port_pattern: String,
    pub metrics_port_base: Option<u16>,
    pub xdp_mode: XdpMode,
    /// Effective QoS of every switch, by index into `switches`.
    pub qos: Vec<crate::qos::SwitchQos>,
    /// LLDP/DCBX settings of the fabric.
    pub lldp: crate::lldp::LldpSettings,
    /// Time dilation D: line rates, thresholds and timers above are emulated.
    pub time_dilation: Dilation,
    /// Effective load balancing of every switch, by index into `switches`.
    pub load_balance: Vec<rocefab_contracts::config::LbConfig>,
    /// The DCQCN parameter set of every GPU NIC (reaction and notification point).
    pub dcqcn: rocefab_contracts::dcqcn::DcqcnProfile,
    /// What the GPU NICs' notification points do with marks within the CNP interval, and what
    /// shares one.
    pub dcqcn_np: rocefab_contracts::dcqcn::NpSettings,
    /// Every switch's forwarding latency and every NIC's pipeline latency (each way), emulated ns.
    pub switch_latency_ns: u64,
    pub nic_latency_ns: u64,
    pub routing: Routing,
    /// With `routing: bgp`.
    pub bgp: Option<BgpSettings>,
}

impl Topology {
    /// Host node name, 1-based.
    pub fn host_name(h: u32) -> String {
        format!("host{h}")
    }
    /// NIC name of GPU `g` (0-based local rank) inside its host namespace.
    /// NICs per host (NIC `g` on rail `g + 1`).
    pub fn nics_per_host(&self) -> u32 {
        self.nic_model.nics(self.gpus_per_host)
    }
    pub fn nic_name(&self, g: u32) -> String {
        self.nic_model.nic_name(&self.host_nic_pattern, g)
    }
    /// Port name `n` (1-based) inside a switch namespace.
    pub fn port_name(&self, n: usize) -> String {
        self.switch_port_pattern.replace("{port}", &n.to_string())
    }
    /// The switch serving `rail` for host `h`.
    pub fn rail_switch_for(&self, rail: u32, h: u32) -> Option<usize> {
        self.switches.iter().position(|s| s.role == Role::Rail && s.rails.contains(&rail) && s.hosts.contains(h))
    }
    pub fn switch_index(&self, name: &str) -> Option<usize> {
        self.switches.iter().position(|s| s.name == name)
    }
    pub fn spines(&self) -> impl Iterator<Item = (usize, &Switch)> {
        self.switches.iter().enumerate().filter(|(_, s)| s.role == Role::Spine)
    }
    /// Switch-to-switch hops from every switch to rail switch `d` (by index into `switches`),
    /// `None` where `d` is unreachable. Paths go up and down the tiers: only spines and
    /// super-spines carry transit traffic, never another rail switch. Next hops towards `d`
    /// are the neighbours one hop closer (the ECMP group).
    pub fn hops_to(&self, d: usize) -> Vec<Option<u32>> {
        self.hops_to_without(d, &std::collections::BTreeSet::new())
    }

    /// [`Topology::hops_to`] with the links whose indices are in `failed` cut.
    pub fn hops_to_without(&self, d: usize, failed: &std::collections::BTreeSet<usize>) -> Vec<Option<u32>> {
        let mut dist = vec![None; self.switches.len()];
        dist[d] = Some(0);
        let mut queue = std::collections::VecDeque::from([d]);
        while let Some(n) = queue.pop_front() {
            if n != d && self.switches[n].role == Role::Rail {
                continue;
            }
            let here = dist[n].expect("queued nodes have a distance");
            for (_, l) in self.links.iter().enumerate().filter(|(i, _)| !failed.contains(i)) {
                let m = match (&l.a, &l.b) {
                    (Endpoint::Switch(a), Endpoint::Switch(b)) if *a == n => *b,
                    (Endpoint::Switch(a), Endpoint::Switch(b)) if *b == n => *a,
                    _ => continue,
                };
                if dist[m].is_none() {
                    dist[m] = Some(here + 1);
                    queue.push_back(m);
                }
            }
        }
        dist
    }

    /// Human-readable endpoint name (`host1:gpu0`, `rail1`).
    pub fn endpoint_name(&self, e: &Endpoint) -> String {
        match e {
            Endpoint::Gpu { host, gpu } => format!("{}:{}", Self::host_name(*host), self.nic_name(*gpu)),
            Endpoint::Switch(i) => self.switches[*i].name.clone(),
        }
    }

    /// Reads and validates a topology file.
    pub fn load(path: &Path) -> Result<Topology, TopologyError> {
        let file = path.display().to_string();
        let bytes = std::fs::read(path).map_err(|err| TopologyError::Io { file: file.clone(), err })?;
        let src = String::from_utf8(bytes).map_err(|e| not_utf8(&file, e.as_bytes(), e.utf8_error()))?;
        Self::parse(&src, path)
    }

    /// Parses and validates topology text; `path` is used in error messages.
    pub fn parse(src: &str, path: &Path) -> Result<Topology, TopologyError> {
        let file = path.display().to_string();
        let raw: RawTopology = yaml_serde::from_str(src).map_err(|e| {
            // The end of the stream (a missing field, an unclosed quote) can lie past the last
            // line; name the last line then, which an editor can jump to.
            let line = e.location().map(|l| l.line()).unwrap_or(1).min(yaml_lines(src));
            let mut msg = e.to_string();
            if let Some(i) = msg.rfind(" at line ") {
                if msg[i + 9..].split(' ').next().is_some_and(|n| n.parse::<usize>().is_ok())
                    && msg[i..].contains("column")
                {
                    msg.truncate(i);
                }
            }
            TopologyError::Parse { file: file.clone(), line, msg }
        })?;
        let err = |field: &str, msg: String| TopologyError::Invalid {
            file: file.clone(),
            line: line_of(src, field),
            field: field.to_string(),
            msg,
        };
        validate(raw, path, &err)
    }
}

/// How many lines YAML sees in `src` (1.2, 5.4: CR LF, CR or LF end a line; libyaml also breaks
/// on NEL, LS and PS): the line numbers its errors give are in these terms.
fn yaml_lines(src: &str) -> usize {
    let mut n = 1;
    let mut chars = src.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\r' => {
                if chars.peek() == Some(&'\n') {
                    chars.next();
                }
                n += 1;
            }
            '\n' | '\u{85}' | '\u{2028}' | '\u{2029}' => n += 1,
            _ => {}
        }
    }
    n
}

/// A file that is not UTF-8 (YAML 1.2, 5.2): where its first invalid byte is, as an editor counts
/// lines and columns (columns in characters of the valid text before it).
fn not_utf8(file: &str, bytes: &[u8], e: std::str::Utf8Error) -> TopologyError {
    let at = e.valid_up_to();
    let valid = std::str::from_utf8(&bytes[..at]).expect("valid up to here");
    let line = valid.matches('\n').count() + 1;
    let column = valid.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    TopologyError::Parse {
        file: file.to_string(),
        line,
        msg: format!(
            "not UTF-8: byte 0x{:02x} at column {column} (byte offset {at}); a topology file is UTF-8 text",
            bytes[at]
        ),
    }
}

fn valid_name(s: &str) -> bool {
    !s.is_empty()
        && s.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
        && s.as_bytes()[0].is_ascii_lowercase()
}

/// Reports an invalid field: its path in the file (`switches.rail[1].rails`) and the message.
type ErrAt<'a> = &'a dyn Fn(&str, String) -> TopologyError;

/// A pod as the file lists it: its hosts, rail switches, spines and the path of its fields
/// (`switches` for a flat file, else `switches.pods[i]`).
type PodRef<'r> = (HostRange, &'r [RawRailSwitch], &'r [RawSpine], String);

fn validate(raw: RawTopology, path: &Path, err: ErrAt<'_>) -> Result<Topology, TopologyError> {
    check_fabric(&raw, err)?;
    let hosts = raw.hosts.count;
    let gpus_per_host = raw.hosts.gpus_per_host;
    // From here on `gpus` counts NICs (rails): one per GPU, or one for a shared NIC.
    let gpus = raw.hosts.nic.nics(gpus_per_host);
    // The rails the file names: a GPU's (or the shared NIC's, rail 1).
    let file_rails = if raw.hosts.nic == NicModel::Shared { 1 } else { gpus_per_host };
    let pods = pods_of(&raw.switches, hosts, err)?;
    let (mut switches, fields) = switches_of(&pods, &raw.switches.super_spine, hosts, file_rails, err)?;
    let nrail = switches.iter().filter(|s| s.role == Role::Rail).count();
    if raw.hosts.nic == NicModel::DualPort {
        // Each port is a rail of its own from here on: rail r's port p is rail 2(r-1)+p+1.
        dual_port_rails(&pods, &mut switches, &fields, nrail, hosts, file_rails, err)?;
    }
    check_rail_coverage(&pods, &switches, &fields, nrail, hosts, gpus, err)?;
    let (host_nic, switch_port) = naming_patterns(&raw.naming, raw.hosts.nic, err)?;
    let mut links = host_links(&switches, nrail, hosts, gpus, raw.links.line_rate.host_rail);
    rail_spine_links(&raw.links, &switches, &fields, &mut links, err)?;
    spine_super_spine_links(&raw.links, &switches, &fields, &mut links, err)?;
    for l in &mut links {
        l.delay_ns = raw.links.delay.of(l.class).0;
    }
    for (i, o) in raw.links.overrides.iter().enumerate() {
        apply_override(i, o, &switches, &host_nic, raw.hosts.nic, hosts, gpus, &mut links, err)?;
    }
    let port_counts = port_counts(&switches, &fields, &links, &switch_port, err)?;
    check_nic_names(&host_nic, raw.hosts.nic, gpus, err)?;
    let (rail_subnets, rail_groups, p2p) = addressing(&raw.addressing, gpus, hosts, &switches, &links, err)?;
    let lldp = crate::lldp::resolve(&raw.lldp).map_err(|(f, m)| err(&f, m))?;
    if let Some(p) = raw.metrics_port_base {
        // One port per switch daemon, then one per host NIC agent.
        let n = switches.len() + if lldp.nic_agents() { hosts as usize } else { 0 };
        if p as usize + n > 65535 || p < 1024 {
            return Err(err("metrics_port_base", format!("{p}: need {n} ports from it, within 1024..=65535")));
        }
    }

    let lat = crate::qos::Latencies { mtu: raw.mtu, switch_ns: raw.latency.switch.0, nic_ns: raw.latency.nic.0 };
    let qos = crate::qos::resolve_with_links(
        &raw.qos,
        &port_counts,
        raw.queue_limit_bytes,
        &port_links(switches.len(), &links),
        &lat,
    )
    .map_err(|(f, m)| err(&f, m))?;
    let time_dilation = Dilation::new(raw.time_dilation).map_err(|e| err("time_dilation", e.to_string()))?;
    let bgp = match raw.routing {
        Routing::Static => None,
        Routing::Bgp => {
            // FRR takes 10..=60000 ms and detect multipliers 2..=255.
            let ms = time_dilation.duration(raw.bgp.bfd_interval.0) / 1_000_000;
            if !(10..=60_000).contains(&ms) {
                return Err(err(
                    "bgp.bfd_interval",
                    format!(
                        "{ms} ms on the wall clock (× time_dilation {time_dilation}) is outside FRR's 10..60000 ms"
                    ),
                ));
            }
            if raw.bgp.bfd_multiplier < 2 {
                return Err(err("bgp.bfd_multiplier", "must be 2..=255".into()));
            }
            Some(BgpSettings { bfd_interval_ms: ms, bfd_multiplier: raw.bgp.bfd_multiplier })
        }
    };
    let names: Vec<String> = switches.iter().map(|s| s.name.clone()).collect();
    let load_balance = crate::lb::resolve(&raw.load_balance, &names).map_err(|(f, m)| err(&f, m))?;

    Ok(Topology {
        file: path.to_path_buf(),
        fabric: raw.fabric,
        description: raw.description,
        mtu: raw.mtu,
        hash_seed: raw.hash_seed,
        hosts,
        gpus_per_host,
        nic_model: raw.hosts.nic,
        pxn: raw.hosts.pxn,
        nvlink: raw
            .hosts
            .nvlink
            .map(|n| rocefab_contracts::job::NvlinkSpec { bandwidth_bps: n.bandwidth.0, latency_ns: n.latency.0 }),
        switches,
        pods: pods.iter().map(|(hosts, ..)| Pod { hosts: *hosts }).collect(),
        links,
        rail_subnets,
        rail_groups,
        p2p,
        host_nic_pattern: host_nic,
        switch_port_pattern: switch_port,
        metrics_port_base: raw.metrics_port_base,
        xdp_mode: raw.xdp_mode,
        qos,
        lldp,
        time_dilation,
        load_balance,
        dcqcn: raw.dcqcn.profile,
        dcqcn_np: raw.dcqcn.np,
        switch_latency_ns: raw.latency.switch.0,
        nic_latency_ns: raw.latency.nic.0,
        routing: raw.routing,
        bgp,
    })
}

/// The fabric name and the NIC model.
fn check_fabric(raw: &RawTopology, err: ErrAt<'_>) -> Result<(), TopologyError> {
    if raw.hosts.nvlink.is_some_and(|n| n.bandwidth.0 == 0) {
        return Err(err("hosts.nvlink.bandwidth", "must be above 0".into()));
    }
    if raw.hosts.pxn && raw.hosts.nvlink.is_none() {
        return Err(err(
            "hosts.pxn",
            "PXN relays a send over NVLink to the GPU on the destination's rail: set hosts.nvlink".into(),
        ));
    }
    if raw.hosts.pxn && raw.hosts.nic == NicModel::Shared {
        return Err(err("hosts.pxn", "PXN needs a NIC per GPU (hosts.nic: per-gpu), not a shared NIC".into()));
    }
    if !valid_name(&raw.fabric) || raw.fabric.len() > 12 {
        return Err(err(
            "fabric",
            format!("{:?}: expected 1..=12 lowercase letters/digits, starting with a letter", raw.fabric),
        ));
    }
    Ok(())
}

/// Every pod (a flat file is one pod of every host), checked: hosts that exist, no overlap,
/// a rail switch in each, spines where there are several pods, every host in a pod and
/// super-spines to join several pods.
fn pods_of<'r>(sw: &'r RawSwitches, hosts: u32, err: ErrAt<'_>) -> Result<Vec<PodRef<'r>>, TopologyError> {
    let flat = !sw.rail.is_empty() || !sw.spine.is_empty();
    if !sw.pods.is_empty() && flat {
        return Err(err(
            "switches.pods",
            "list rail switches and spines either under switches.pods or directly under switches, not both".into(),
        ));
    }
    if sw.pods.is_empty() && !sw.super_spine.is_empty() {
        return Err(err(
            "switches.super-spine",
            "super-spines join pods: list the rail switches and spines under switches.pods, one entry per pod".into(),
        ));
    }
    // Every pod as (hosts, rail switches, spines, field prefix); a flat file is one pod.
    let all_hosts = HostRange { first: 1, last: hosts };
    let pods: Vec<PodRef<'_>> = if sw.pods.is_empty() {
        vec![(all_hosts, &sw.rail, &sw.spine, "switches".to_string())]
    } else {
        sw.pods
            .iter()
            .enumerate()
            .map(|(i, p)| (p.hosts, &p.rail[..], &p.spine[..], format!("switches.pods[{i}]")))
            .collect()
    };
    if sw.pods.is_empty() && sw.rail.is_empty() {
        return Err(err("switches", "at least one rail switch is needed".into()));
    }
    for (pi, (hr, rails, spines, prefix)) in pods.iter().enumerate() {
        if hr.last > hosts {
            return Err(err(
                &format!("{prefix}.hosts"),
                format!("host {} does not exist (hosts 1..={hosts})", hr.last),
            ));
        }
        if let Some((pj, _)) =
            pods[..pi].iter().enumerate().find(|(_, (o, ..))| o.first <= hr.last && hr.first <= o.last)
        {
            return Err(err(
                &format!("{prefix}.hosts"),
                format!("hosts {}-{} overlap pod {}'s hosts", hr.first, hr.last, pj + 1),
            ));
        }
        if rails.is_empty() {
            return Err(err(prefix, format!("pod {} has no rail switch", pi + 1)));
        }
        if pods.len() > 1 && spines.is_empty() {
            return Err(err(prefix, format!("pod {} has no spine to reach the super-spines", pi + 1)));
        }
    }
    if let Some(h) = (1..=hosts).find(|&h| !pods.iter().any(|(hr, ..)| hr.contains(h))) {
        return Err(err("switches.pods", format!("host{h} is in no pod")));
    }
    if pods.len() > 1 && sw.super_spine.is_empty() {
        return Err(err(
            "switches",
            "several pods need super-spines (switches.super-spine) to reach each other".into(),
        ));
    }
    Ok(pods)
}

/// The switches: rail switches (pod by pod), then spines, then super-spines, with each one's
/// path in the file for error messages.
fn switches_of(
    pods: &[PodRef<'_>],
    super_spines: &[RawSpine],
    hosts: u32,
    gpus: u32,
    err: ErrAt<'_>,
) -> Result<(Vec<Switch>, Vec<String>), TopologyError> {
    let mut names: BTreeSet<String> = BTreeSet::new();
    let mut switches = Vec::new();
    let mut fields: Vec<String> = Vec::new();
    for (pi, (pod_hosts, rails, _, prefix)) in pods.iter().enumerate() {
        for (i, r) in rails.iter().enumerate() {
            let at = format!("{prefix}.rail[{i}]");
            check_switch_name(&r.name, &format!("{at}.name"), &mut names, hosts, err)?;
            switches.push(rail_switch(r, &at, pi, *pod_hosts, hosts, gpus, err)?);
            fields.push(at);
        }
    }
    for (pi, (pod_hosts, _, spines, prefix)) in pods.iter().enumerate() {
        for (i, s) in spines.iter().enumerate() {
            let at = format!("{prefix}.spine[{i}]");
            check_switch_name(&s.name, &format!("{at}.name"), &mut names, hosts, err)?;
            switches.push(Switch {
                name: s.name.clone(),
                role: Role::Spine,
                rails: vec![],
                hosts: *pod_hosts,
                pod: Some(pi),
            });
            fields.push(at);
        }
    }
    let all_hosts = HostRange { first: 1, last: hosts };
    for (i, s) in super_spines.iter().enumerate() {
        let at = format!("switches.super-spine[{i}]");
        check_switch_name(&s.name, &format!("{at}.name"), &mut names, hosts, err)?;
        switches.push(Switch {
            name: s.name.clone(),
            role: Role::SuperSpine,
            rails: vec![],
            hosts: all_hosts,
            pod: None,
        });
        fields.push(at);
    }
    Ok((switches, fields))
}

/// Rail switch `r` of pod `pi` (index), listed at `at`: its hosts within the pod's and its
/// rails, each an existing rail listed once.
fn rail_switch(
    r: &RawRailSwitch,
    at: &str,
    pi: usize,
    pod_hosts: HostRange,
    hosts: u32,
    gpus: u32,
    err: ErrAt<'_>,
) -> Result<Switch, TopologyError> {
    let hr = r.hosts.unwrap_or(pod_hosts);
    if hr.last > hosts {
        return Err(err(&format!("{at}.hosts"), format!("host {} does not exist (hosts 1..={hosts})", hr.last)));
    }
    if !(pod_hosts.contains(hr.first) && pod_hosts.contains(hr.last)) {
        return Err(err(
            &format!("{at}.hosts"),
            format!(
                "hosts {}-{} are not all in pod {} (hosts {}-{})",
                hr.first,
                hr.last,
                pi + 1,
                pod_hosts.first,
                pod_hosts.last
            ),
        ));
    }
    if r.rails.is_empty() {
        return Err(err(&format!("{at}.rails"), format!("rail switch {} serves no rail", r.name)));
    }
    let mut seen = BTreeSet::new();
    for &rail in &r.rails {
        if rail == 0 || rail > gpus {
            return Err(err(
                &format!("{at}.rails"),
                if gpus == 1 {
                    format!("rail {rail} does not exist (hosts have one NIC: rail 1 only)")
                } else {
                    format!("rail {rail} does not exist (hosts have {gpus} GPUs: rails 1..={gpus})")
                },
            ));
        }
        if !seen.insert(rail) {
            return Err(err(&format!("{at}.rails"), format!("rail {rail} listed twice")));
        }
    }
    Ok(Switch { name: r.name.clone(), role: Role::Rail, rails: r.rails.clone(), hosts: hr, pod: Some(pi) })
}

/// The rail switches (of the first `nrail`) serving `rail` for host `h`, in file order.
fn serving(switches: &[Switch], nrail: usize, rail: u32, h: u32) -> Vec<usize> {
    (0..nrail).filter(|&i| switches[i].rails.contains(&rail) && switches[i].hosts.contains(h)).collect()
}

/// The field path of host `h`'s pod (`switches` or `switches.pods[i]`).
fn pod_field<'p>(pods: &'p [PodRef<'_>], h: u32) -> &'p str {
    &pods.iter().find(|(hr, ..)| hr.contains(h)).expect("every host is in a pod").3
}

/// With dual-port NICs: every (rail, host) is served by exactly two rail switches, the first
/// in file order on port 0 and the second on port 1 for all the hosts they serve; each
/// switch's rails become the port-rails it serves (rail r, port p: 2(r-1)+p+1).
fn dual_port_rails(
    pods: &[PodRef<'_>],
    switches: &mut [Switch],
    fields: &[String],
    nrail: usize,
    hosts: u32,
    rails: u32,
    err: ErrAt<'_>,
) -> Result<(), TopologyError> {
    let mut side: BTreeMap<(usize, u32), u32> = BTreeMap::new();
    for rail in 1..=rails {
        for h in 1..=hosts {
            let serving = serving(switches, nrail, rail, h);
            if serving.len() != 2 {
                return Err(err(
                    &format!("{}.rail", pod_field(pods, h)),
                    format!(
                        "rail {rail} of host{h} has {} switch{}; nic: dual-port cables each GPU's two ports to two switches of its rail",
                        serving.len(),
                        if serving.len() == 1 { "" } else { "es" }
                    ),
                ));
            }
            for (p, &i) in serving.iter().enumerate() {
                if let Some(&q) = side.get(&(i, rail)) {
                    if q != p as u32 {
                        return Err(err(
                            &format!("{}.rails", fields[i]),
                            format!("{} would take port {q} of rail {rail} for some hosts and port {p} for host{h}: list the switches of a rail in the same order for every host", switches[i].name),
                        ));
                    }
                }
                side.insert((i, rail), p as u32);
            }
        }
    }
    for (i, sw) in switches.iter_mut().enumerate().take(nrail) {
        sw.rails = sw.rails.iter().map(|&r| 2 * (r - 1) + side[&(i, r)] + 1).collect();
    }
    Ok(())
}

/// Every (rail, host) served by exactly one rail switch (the first `nrail` switches).
fn check_rail_coverage(
    pods: &[PodRef<'_>],
    switches: &[Switch],
    fields: &[String],
    nrail: usize,
    hosts: u32,
    gpus: u32,
    err: ErrAt<'_>,
) -> Result<(), TopologyError> {
    for rail in 1..=gpus {
        for h in 1..=hosts {
            let serving = serving(switches, nrail, rail, h);
            match serving.len() {
                0 => {
                    let at = format!("{}.rail", pod_field(pods, h));
                    return Err(err(&at, format!("rail {rail} has no switch (for host{h})")));
                }
                1 => {}
                _ => {
                    return Err(err(
                        &format!("{}.rails", fields[serving[1]]),
                        format!(
                            "rail {rail} of host{h} is served by both {} and {} (dual-homed NICs are not supported)",
                            switches[serving[0]].name, switches[serving[1]].name
                        ),
                    ))
                }
            }
        }
    }
    Ok(())
}

/// The host NIC and switch port name patterns, defaulted and checked for their placeholder.
fn naming_patterns(naming: &RawNaming, nic: NicModel, err: ErrAt<'_>) -> Result<(String, String), TopologyError> {
    let default = match nic {
        NicModel::PerGpu => "gpu{gpu}",
        NicModel::Shared => "nic{gpu}",
        NicModel::DualPort => "gpu{gpu}p{port}",
    };
    let host_nic = naming.host_nic.clone().unwrap_or_else(|| default.into());
    if nic == NicModel::DualPort && !host_nic.contains("{port}") {
        return Err(err("naming.host_nic", format!("{host_nic:?} must contain {{port}} with nic: dual-port")));
    }
    let switch_port = naming.switch_port.clone().unwrap_or_else(|| "eth{port}".into());
    if !host_nic.contains("{gpu}") && !host_nic.contains("{rail}") {
        return Err(err("naming.host_nic", format!("{host_nic:?} must contain {{gpu}} or {{rail}}")));
    }
    if !switch_port.contains("{port}") {
        return Err(err("naming.switch_port", format!("{switch_port:?} must contain {{port}}")));
    }
    Ok((host_nic, switch_port))
}

/// The switches of `role`, by index.
fn of_role(sws: &[Switch], role: Role) -> impl Iterator<Item = usize> + '_ {
    (0..sws.len()).filter(move |&i| sws[i].role == role)
}

/// The switch of `role` named `name`.
fn find_switch(sws: &[Switch], name: &str, role: Role) -> Option<usize> {
    of_role(sws, role).find(|&i| sws[i].name == name)
}

/// Host links, host-major in GPU order: every GPU NIC to the rail switch serving its rail.
fn host_links(switches: &[Switch], nrail: usize, hosts: u32, gpus: u32, rate_hr: LineRate) -> Vec<Link> {
    let mut links = Vec::new();
    for h in 1..=hosts {
        for g in 0..gpus {
            let sw = (0..nrail)
                .find(|&i| switches[i].rails.contains(&(g + 1)) && switches[i].hosts.contains(h))
                .expect("coverage checked above");
            links.push(Link {
                a: Endpoint::Gpu { host: h, gpu: g },
                b: Endpoint::Switch(sw),
                class: LinkClass::HostRail,
                line_rate: rate_hr,
                delay_ns: 0,
            });
        }
    }
    links
}

/// Rail↔spine links (a full mesh within each pod, or the listed ones); every spine needs one.
fn rail_spine_links(
    raw: &RawLinks,
    switches: &[Switch],
    fields: &[String],
    links: &mut Vec<Link>,
    err: ErrAt<'_>,
) -> Result<(), TopologyError> {
    let rate_rs = raw.line_rate.rail_spine;
    match &raw.rail_spine {
        RailSpineCabling::Keyword(CablingKeyword::FullMesh) => {
            for r in of_role(switches, Role::Rail) {
                for s in of_role(switches, Role::Spine).filter(|&s| switches[s].pod == switches[r].pod) {
                    links.push(Link {
                        a: Endpoint::Switch(r),
                        b: Endpoint::Switch(s),
                        class: LinkClass::RailSpine,
                        line_rate: rate_rs,
                        delay_ns: 0,
                    });
                }
            }
        }
        RailSpineCabling::List(list) => {
            for (i, l) in list.iter().enumerate() {
                let r = find_switch(switches, &l.rail, Role::Rail).ok_or_else(|| {
                    err(&format!("links.rail_spine[{i}].rail"), format!("unknown rail switch {:?}", l.rail))
                })?;
                let s = find_switch(switches, &l.spine, Role::Spine).ok_or_else(|| {
                    err(&format!("links.rail_spine[{i}].spine"), format!("unknown spine {:?}", l.spine))
                })?;
                if switches[r].pod != switches[s].pod {
                    return Err(err(
                        &format!("links.rail_spine[{i}]"),
                        format!(
                            "{} and {} are in different pods (rail switches connect to their own pod's spines)",
                            l.rail, l.spine
                        ),
                    ));
                }
                let a = Endpoint::Switch(r);
                let b = Endpoint::Switch(s);
                if links.iter().any(|x| x.a == a && x.b == b) {
                    return Err(err(
                        &format!("links.rail_spine[{i}]"),
                        format!("duplicate link {} - {}", l.rail, l.spine),
                    ));
                }
                links.push(Link {
                    a,
                    b,
                    class: LinkClass::RailSpine,
                    line_rate: l.line_rate.unwrap_or(rate_rs),
                    delay_ns: 0,
                });
            }
        }
    }
    for s in of_role(switches, Role::Spine) {
        if !links.iter().any(|l| l.b == Endpoint::Switch(s)) {
            return Err(err(&format!("{}.name", fields[s]), format!("spine {} has no links", switches[s].name)));
        }
    }
    Ok(())
}

/// Spine↔super-spine links (a full mesh, or the listed ones); every super-spine needs one.
fn spine_super_spine_links(
    raw: &RawLinks,
    switches: &[Switch],
    fields: &[String],
    links: &mut Vec<Link>,
    err: ErrAt<'_>,
) -> Result<(), TopologyError> {
    let rate_ss = raw.line_rate.spine_super_spine;
    match &raw.spine_super_spine {
        SuperSpineCabling::Keyword(CablingKeyword::FullMesh) => {
            for s in of_role(switches, Role::Spine) {
                for x in of_role(switches, Role::SuperSpine) {
                    links.push(Link {
                        a: Endpoint::Switch(s),
                        b: Endpoint::Switch(x),
                        class: LinkClass::SpineSuperSpine,
                        line_rate: rate_ss,
                        delay_ns: 0,
                    });
                }
            }
        }
        SuperSpineCabling::List(list) => {
            for (i, l) in list.iter().enumerate() {
                let s = find_switch(switches, &l.spine, Role::Spine).ok_or_else(|| {
                    err(&format!("links.spine_super_spine[{i}].spine"), format!("unknown spine {:?}", l.spine))
                })?;
                let x = find_switch(switches, &l.super_spine, Role::SuperSpine).ok_or_else(|| {
                    err(
                        &format!("links.spine_super_spine[{i}].super-spine"),
                        format!("unknown super-spine {:?}", l.super_spine),
                    )
                })?;
                let (a, b) = (Endpoint::Switch(s), Endpoint::Switch(x));
                if links.iter().any(|y| y.a == a && y.b == b) {
                    return Err(err(
                        &format!("links.spine_super_spine[{i}]"),
                        format!("duplicate link {} - {}", l.spine, l.super_spine),
                    ));
                }
                links.push(Link {
                    a,
                    b,
                    class: LinkClass::SpineSuperSpine,
                    line_rate: l.line_rate.unwrap_or(rate_ss),
                    delay_ns: 0,
                });
            }
        }
    }
    for x in of_role(switches, Role::SuperSpine) {
        if !links.iter().any(|l| l.b == Endpoint::Switch(x)) {
            return Err(err(&format!("{}.name", fields[x]), format!("super-spine {} has no links", switches[x].name)));
        }
    }
    Ok(())
}

/// `links.overrides[i]`: sets the line rate of every link between its two ends (at least one).
#[expect(clippy::too_many_arguments, reason = "the validation state an override is checked against")]
fn apply_override(
    i: usize,
    o: &RawOverride,
    switches: &[Switch],
    host_nic: &str,
    nic: NicModel,
    hosts: u32,
    gpus: u32,
    links: &mut [Link],
    err: ErrAt<'_>,
) -> Result<(), TopologyError> {
    if o.line_rate.is_none() && o.delay.is_none() {
        return Err(err(&format!("links.overrides[{i}]"), "sets nothing: give line_rate, delay or both".into()));
    }
    let field = format!("links.overrides[{i}].between");
    let parse_end = |s: &str| -> Result<EndSel, TopologyError> {
        if let Some(rest) = s.strip_prefix("host") {
            let (hs, gs) = match rest.split_once(':') {
                Some((h, g)) => (h, Some(g)),
                None => (rest, None),
            };
            if let Ok(h) = hs.parse::<u32>() {
                if h == 0 || h > hosts {
                    return Err(err(&field, format!("host{h} does not exist (hosts 1..={hosts})")));
                }
                let g = match gs {
                    None => None,
                    Some(g) => Some(
                        (0..gpus)
                            .find(|&x| nic.nic_name(host_nic, x) == g)
                            .ok_or_else(|| err(&field, format!("host{h} has no NIC {g:?}")))?,
                    ),
                };
                return Ok(EndSel::Host { host: h, gpu: g });
            }
        }
        let sw = switches.iter().position(|x| x.name == s).ok_or_else(|| err(&field, format!("unknown node {s:?}")))?;
        Ok(EndSel::Switch(sw))
    };
    let ea = parse_end(&o.between[0])?;
    let eb = parse_end(&o.between[1])?;
    let matches = |e: &EndSel, x: &Endpoint| match (e, x) {
        (EndSel::Host { host: h, gpu: g }, Endpoint::Gpu { host, gpu }) => h == host && g.is_none_or(|g| g == *gpu),
        (EndSel::Switch(s), Endpoint::Switch(i)) => s == i,
        _ => false,
    };
    let mut n = 0;
    for l in links.iter_mut() {
        if (matches(&ea, &l.a) && matches(&eb, &l.b)) || (matches(&eb, &l.a) && matches(&ea, &l.b)) {
            if let Some(r) = o.line_rate {
                l.line_rate = r;
            }
            if let Some(d) = o.delay {
                l.delay_ns = d.0;
            }
            n += 1;
        }
    }
    if n == 0 {
        return Err(err(&field, format!("no link between {} and {}", o.between[0], o.between[1])));
    }
    Ok(())
}

/// Ports per switch (within the data plane's limit) with its name, and switch port names of at
/// most 15 characters.
fn port_counts(
    switches: &[Switch],
    fields: &[String],
    links: &[Link],
    switch_port: &str,
    err: ErrAt<'_>,
) -> Result<Vec<(String, usize)>, TopologyError> {
    let mut port_counts = Vec::with_capacity(switches.len());
    for (si, s) in switches.iter().enumerate() {
        let n = links.iter().filter(|l| l.a == Endpoint::Switch(si) || l.b == Endpoint::Switch(si)).count();
        let max = dataplane_common::limits::MAX_PORTS as usize;
        if n > max {
            return Err(err(
                &format!("{}.name", fields[si]),
                format!("switch {} would have {n} ports (at most {max})", s.name),
            ));
        }
        port_counts.push((s.name.clone(), n));
        let longest = switch_port.replace("{port}", &n.max(1).to_string());
        if longest.len() > 15 {
            return Err(err("naming.switch_port", format!("interface name {longest:?} is longer than 15 characters")));
        }
    }
    Ok(port_counts)
}

/// Every switch's ports (in port order: the order of `links`) as PFC headroom sees them.
fn port_links(nswitches: usize, links: &[Link]) -> Vec<Vec<crate::qos::PortLink>> {
    (0..nswitches)
        .map(|si| {
            links
                .iter()
                .filter_map(|l| {
                    let peer = if l.a == Endpoint::Switch(si) {
                        &l.b
                    } else if l.b == Endpoint::Switch(si) {
                        &l.a
                    } else {
                        return None;
                    };
                    Some(crate::qos::PortLink {
                        rate_bps: l.line_rate.0,
                        cable_ns: l.delay_ns,
                        peer_is_nic: matches!(peer, Endpoint::Gpu { .. }),
                    })
                })
                .collect()
        })
        .collect()
}

/// Host NIC names of at most 15 characters.
fn check_nic_names(host_nic: &str, nic: NicModel, gpus: u32, err: ErrAt<'_>) -> Result<(), TopologyError> {
    for g in 0..gpus {
        let nm = nic.nic_name(host_nic, g);
        if nm.len() > 15 {
            return Err(err("naming.host_nic", format!("interface name {nm:?} is longer than 15 characters")));
        }
    }
    Ok(())
}

/// The rail subnets (given or from `rail_base`) and the point-to-point range, large enough for
/// the fabric links and overlapping nothing.
#[allow(clippy::type_complexity)]
fn addressing(
    a: &RawAddressing,
    gpus: u32,
    hosts: u32,
    switches: &[Switch],
    links: &[Link],
    err: ErrAt<'_>,
) -> Result<(BTreeMap<u32, Ipv4Net>, Vec<(Vec<u32>, Ipv4Net)>, Ipv4Net), TopologyError> {
    let base = a.rail_base.unwrap_or(Ipv4Addr::new(10, 0, 0, 0));
    if u32::from(base) & 0xff != 0 {
        return Err(err("addressing.rail_base", format!("{base} must end in .0")));
    }
    let mut rail_subnets = BTreeMap::new();
    for (&r, net) in &a.rails {
        if a.rail_subnets == RailSubnets::PerSwitch {
            return Err(err(
                "addressing.rails",
                "per-rail subnets cannot be given with rail_subnets: per-switch (it derives them)".into(),
            ));
        }
        if r == 0 || r > gpus {
            return Err(err("addressing.rails", format!("rail {r} does not exist (rails 1..={gpus})")));
        }
        if net.len > 24 {
            return Err(err(
                "addressing.rails",
                format!("rail {r}: {net} is smaller than a /24 (GPU .host, gateway .254)"),
            ));
        }
    }
    let mut rail_groups = Vec::new();
    if a.rail_subnets == RailSubnets::PerSwitch {
        // The groups of rails served together, ordered by their first rail.
        let mut groups: Vec<Vec<u32>> = Vec::new();
        for sw in switches.iter().filter(|s| s.role == Role::Rail) {
            let mut g = sw.rails.clone();
            g.sort_unstable();
            if groups.contains(&g) {
                continue;
            }
            if let Some(o) = groups.iter().find(|o| o.iter().any(|r| g.contains(r))) {
                return Err(err(
                    "addressing.rail_subnets",
                    format!(
                        "per-switch: {} serves rails {g:?} but another rail switch serves {o:?}; every switch serving a rail must serve the same rails",
                        sw.name
                    ),
                ));
            }
            groups.push(g);
        }
        groups.sort();
        for (k, g) in groups.iter().enumerate() {
            let summary = Ipv4Net { addr: Ipv4Addr::from(u32::from(base).wrapping_add((k as u32 + 1) << 8)), len: 24 };
            // 2 rails: /25, 3-4: /26, 5-8: /27.
            let bits = (g.len() as u32).next_power_of_two().trailing_zeros() as u8;
            let part = Ipv4Net { addr: summary.addr, len: 24 + bits };
            // Hosts at .1..=.hosts, the gateway and the broadcast address last.
            if u64::from(hosts) + 3 > part.size() {
                return Err(err(
                    "addressing.rail_subnets",
                    format!(
                        "per-switch: rails {g:?} share {summary} as /{} subnets of {} addresses: {hosts} hosts, the gateway and the broadcast address do not fit",
                        part.len,
                        part.size()
                    ),
                ));
            }
            for (i, &r) in g.iter().enumerate() {
                let addr = Ipv4Addr::from(u32::from(summary.addr) + i as u32 * part.size() as u32);
                rail_subnets.insert(r, Ipv4Net { addr, len: part.len });
            }
            rail_groups.push((g.clone(), summary));
        }
    }
    for r in 1..=gpus {
        if rail_subnets.contains_key(&r) {
            continue;
        }
        let net = a
            .rails
            .get(&r)
            .copied()
            .unwrap_or(Ipv4Net { addr: Ipv4Addr::from(u32::from(base).wrapping_add(r << 8)), len: 24 });
        rail_subnets.insert(r, net);
        rail_groups.push((vec![r], net));
    }
    let p2p = a.p2p.unwrap_or(Ipv4Net { addr: Ipv4Addr::new(10, 255, 0, 0), len: 16 });
    let nfabric = links.iter().filter(|l| l.class != LinkClass::HostRail).count() as u64;
    if p2p.size() < 2 * nfabric {
        return Err(err("addressing.p2p", format!("{p2p} is too small for {nfabric} /31 links")));
    }
    let nets: Vec<(String, Ipv4Net)> =
        rail_subnets.iter().map(|(r, n)| (format!("rail {r}"), *n)).chain([("p2p".to_string(), p2p)]).collect();
    for (i, (na, a)) in nets.iter().enumerate() {
        for (nb, b) in &nets[i + 1..] {
            if a.overlaps(b) {
                return Err(err("addressing", format!("{na} subnet {a} overlaps {nb} subnet {b}")));
            }
        }
    }
    Ok((rail_subnets, rail_groups, p2p))
}

/// One side of `links.overrides[].between`: `hostN`, `hostN:<nic>` or a switch.
enum EndSel {
    Host { host: u32, gpu: Option<u32> },
    Switch(usize),
}

fn check_switch_name(
    name: &str,
    field: &str,
    names: &mut BTreeSet<String>,
    hosts: u32,
    err: ErrAt<'_>,
) -> Result<(), TopologyError> {
    if !valid_name(name) || name.len() > 16 {
        return Err(err(field, format!("{name:?}: expected 1..=16 lowercase letters/digits, starting with a letter")));
    }
    if let Some(n) = name.strip_prefix("host").and_then(|n| n.parse::<u32>().ok()) {
        if (1..=hosts).contains(&n) {
            return Err(err(field, format!("{name:?} clashes with a host name")));
        }
    }
    if !names.insert(name.to_string()) {
        return Err(err(field, format!("duplicate switch name {name:?}")));
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Field path → line

#[derive(Debug, PartialEq)]
enum Seg<'a> {
    Key(&'a str),
    Index(usize),
}

fn segments(path: &str) -> Vec<Seg<'_>> {
    let mut out = Vec::new();
    for part in path.split('.') {
        let (key, rest) = match part.find('[') {
            Some(i) => (&part[..i], &part[i..]),
            None => (part, ""),
        };
        if !key.is_empty() {
            out.push(Seg::Key(key));
        }
        for idx in rest.split('[').filter(|s| !s.is_empty()) {
            if let Ok(n) = idx.trim_end_matches(']').parse() {
                out.push(Seg::Index(n));
            }
        }
    }
    out
}

/// The 1-based line of the field `path` (`switches.rail[1].rails`) in YAML block-style `src`:
/// the deepest path element that can be found; line 1 if none. Handles block mappings, block
/// sequences (`- key: v`) and keys inside one-line flow mappings (`- { rail: r1, spine: s1 }`).
pub fn line_of(src: &str, path: &str) -> usize {
    let lines: Vec<&str> = src.lines().collect();
    let mut at = YamlCursor { start: 0, parent: -1, item_line: None };
    let mut best = 0usize;
    for seg in segments(path) {
        let end = at.block_end(&lines, matches!(seg, Seg::Index(_)));
        let found = match seg {
            Seg::Key(k) => at.key(&lines, end, k),
            Seg::Index(n) => at.item(&lines, end, n),
        };
        // Not found (or a flow sequence: stay on the key's line).
        let Some(i) = found else { break };
        best = i;
    }
    best + 1
}

/// Where [`line_of`] stands in the YAML: the search window starts at line `start`, children of
/// the current node are indented deeper than `parent`, and when it stands on a sequence item
/// line, that line's keys after "- " are children too.
struct YamlCursor {
    start: usize,
    parent: isize,
    item_line: Option<usize>,
}

impl YamlCursor {
    /// The first line after `start` that leaves the current block (a sequence item at the
    /// parent's indentation stays in it when an index is looked for).
    fn block_end(&self, lines: &[&str], index_next: bool) -> usize {
        (self.start + 1..lines.len())
            .find(|&i| {
                let l = lines[i];
                let d = yaml_indent(l) as isize;
                yaml_content(l) && (d < self.parent || (d == self.parent && !(index_next && yaml_item(l))))
            })
            .unwrap_or(lines.len())
    }

    /// Moves to the line of key `k` in lines `start..end` (a block key that is a child of the
    /// current node, or a key inside a one-line flow mapping).
    fn key(&mut self, lines: &[&str], end: usize, k: &str) -> Option<usize> {
        let pat = format!("{k}:");
        let i = (self.start..end).find(|&i| {
            let l = lines[i];
            if !yaml_content(l) {
                return false;
            }
            let t = l.trim_start().trim_start_matches("- ").trim_start();
            if t.starts_with(&pat) && (Some(i) == self.item_line || yaml_indent(l) as isize > self.parent) {
                return true;
            }
            // A key inside a one-line flow mapping.
            l.contains('{')
                && [format!("{{ {pat}"), format!("{{{pat}"), format!(", {pat}")].iter().any(|p| l.contains(p.as_str()))
        })?;
        let l = lines[i];
        *self = YamlCursor { start: i, parent: l.find(&pat).unwrap_or(yaml_indent(l)) as isize, item_line: None };
        Some(i)
    }

    /// Moves to the line of the `n`th block sequence item in lines `start + 1..end`; `None` when
    /// there is none (e.g. a flow sequence).
    fn item(&mut self, lines: &[&str], end: usize, n: usize) -> Option<usize> {
        let first = (self.start + 1..end).find(|&i| yaml_content(lines[i]) && yaml_item(lines[i]))?;
        let col = yaml_indent(lines[first]);
        let i = (first..end)
            .filter(|&i| yaml_content(lines[i]) && yaml_indent(lines[i]) == col && yaml_item(lines[i]))
            .nth(n)?;
        *self = YamlCursor { start: i, parent: col as isize, item_line: Some(i) };
        Some(i)
    }
}

fn yaml_indent(l: &str) -> usize {
    l.len() - l.trim_start().len()
}

/// Not blank and not only a comment.
fn yaml_content(l: &str) -> bool {
    let t = l.split(" #").next().unwrap_or(l);
    !t.trim().is_empty() && !t.trim_start().starts_with('#')
}

/// A block sequence item (`- ...` or a lone `-`).
fn yaml_item(l: &str) -> bool {
    l.trim_start().starts_with("- ") || l.trim_start() == "-"
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Found by the `topology` fuzz target: errors at the end of the stream named a line past
    /// the file's last.
    #[test]
    fn an_error_at_the_end_of_the_file_names_a_line_inside_it() {
        let err = |src: &str| match Topology::parse(src, Path::new("t.yaml")).unwrap_err() {
            TopologyError::Parse { line, .. } => line,
            e => panic!("{e}"),
        };
        // a lone comment without a newline: `fabric` is missing "at line 2"
        assert_eq!(err("# a comment"), 1);
        // an unclosed quote; a lone CR ends a line for YAML (and the editor) too
        assert_eq!(err("fabric: x\rhosts: \"a\r  b"), 3);
        assert_eq!(yaml_lines("a\r\nb\rc\nd\u{85}e"), 5);
        assert_eq!(yaml_lines(""), 1);
    }

    #[test]
    fn every_dcqcn_profile_name_parses() {
        let src = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../topologies/fidelity-incast.yaml"))
            .unwrap();
        let line = src.lines().find(|l| l.starts_with("dcqcn:")).unwrap();
        for name in rocefab_contracts::dcqcn::DcqcnProfile::NAMES.split(", ") {
            let text = src.replace(line, &format!("dcqcn: {{ profile: {name} }}"));
            let topo = Topology::parse(&text, Path::new("t.yaml")).unwrap();
            assert_eq!(topo.dcqcn.to_string(), name);
        }
        let text = src.replace(line, "dcqcn: { profile: hpcc-dcqcn }");
        let topo = Topology::parse(&text, Path::new("t.yaml")).unwrap();
        assert_eq!(topo.dcqcn, rocefab_contracts::dcqcn::DcqcnProfile::HpccDcqcn);
    }

    #[test]
    fn dcqcn_np_settings_parse_and_bad_ones_name_file_line_and_field() {
        use rocefab_contracts::dcqcn::{CnpMode, CnpScope, DcqcnProfile, NpSettings};
        let src = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../topologies/fidelity-incast.yaml"))
            .unwrap();
        let line = src.lines().find(|l| l.starts_with("dcqcn:")).unwrap();
        let at = src.lines().position(|l| l.starts_with("dcqcn:")).unwrap() + 1;
        let parse = |dcqcn: &str| Topology::parse(&src.replace(line, dcqcn), Path::new("t.yaml"));
        assert_eq!(parse("dcqcn: { profile: htsim }").unwrap().dcqcn_np, NpSettings::default());
        assert_eq!(
            NpSettings::default(),
            NpSettings { cnp: CnpMode::Immediate, scope: CnpScope::Qp },
            "the paper's NP by default"
        );
        for (cnp, c) in [("immediate", CnpMode::Immediate), ("deferred", CnpMode::Deferred)] {
            for (scope, sc) in [("qp", CnpScope::Qp), ("ip_pair", CnpScope::IpPair), ("port", CnpScope::Port)] {
                let t = parse(&format!("dcqcn: {{ profile: htsim, np: {{ cnp: {cnp}, scope: {scope} }} }}")).unwrap();
                assert_eq!((t.dcqcn, t.dcqcn_np), (DcqcnProfile::Htsim, NpSettings { cnp: c, scope: sc }));
            }
        }
        assert_eq!(parse("dcqcn: { np: { cnp: deferred } }").unwrap().dcqcn_np.scope, CnpScope::Qp);
        for (bad, field, what) in [
            ("dcqcn: { np: { cnp: later } }", "dcqcn.np.cnp", "unknown variant `later`"),
            ("dcqcn: { np: { scope: flow } }", "dcqcn.np.scope", "unknown variant `flow`"),
            ("dcqcn: { np: { pacing: qp } }", "dcqcn.np", "unknown field `pacing`"),
            ("dcqcn: { np: deferred }", "dcqcn.np", "invalid type"),
        ] {
            let e = parse(bad).unwrap_err().to_string();
            assert!(e.starts_with(&format!("t.yaml:{at}: {field}")), "{bad}: {e}");
            assert!(e.contains(what), "{bad}: {e}");
        }
    }

    #[test]
    fn line_rate_parsing() {
        assert_eq!(LineRate::parse("1Gbps").unwrap().0, 1_000_000_000);
        assert_eq!(LineRate::parse("100Mbps").unwrap().0, 100_000_000);
        assert_eq!(LineRate::parse("2.5Gbps").unwrap().0, 2_500_000_000);
        assert_eq!(LineRate::parse("400G").unwrap().0, 400_000_000_000);
        assert_eq!(LineRate::parse("10 gbit/s").unwrap().0, 10_000_000_000);
        assert!(LineRate::parse("1Gbs").is_err());
        assert!(LineRate::parse("fast").is_err());
        assert!(LineRate::parse("0Mbps").is_err());
        assert_eq!(LineRate(1_000_000_000).to_string(), "1Gbps");
        assert_eq!(LineRate(2_500_000_000).to_string(), "2.5Gbps");
        assert_eq!(LineRate(100_000_000).to_string(), "100Mbps");
    }

    #[test]
    fn ipv4net() {
        let n = Ipv4Net::parse("10.0.1.0/24").unwrap();
        assert_eq!(n.nth(254), Ipv4Addr::new(10, 0, 1, 254));
        assert!(Ipv4Net::parse("10.0.1.1/24").is_err());
        assert!(Ipv4Net::parse("10.0.1.0/33").is_err());
        assert!(n.overlaps(&Ipv4Net::parse("10.0.0.0/16").unwrap()));
        assert!(!n.overlaps(&Ipv4Net::parse("10.0.2.0/24").unwrap()));
    }

    #[test]
    fn line_of_block_and_flow() {
        let src = "fabric: x\nhosts:\n  count: 2\n  gpus_per_host: 2\nswitches:\n  rail:\n    - name: r1\n      rails: [1]\n    - name: r2\n      rails: [2]\n  spine:\n    - { name: s1 }\nlinks:\n  rail_spine:\n    - { rail: r1, spine: s1 }\n    - { rail: r2, spine: s9 }\n";
        assert_eq!(line_of(src, "hosts.gpus_per_host"), 4);
        assert_eq!(line_of(src, "switches.rail[0].name"), 7);
        assert_eq!(line_of(src, "switches.rail[1].rails"), 10);
        assert_eq!(line_of(src, "switches.rail[1].name"), 9);
        assert_eq!(line_of(src, "switches.spine[0].name"), 12);
        assert_eq!(line_of(src, "links.rail_spine[1].spine"), 16);
        assert_eq!(line_of(src, "links.rail_spine[0]"), 15);
        assert_eq!(line_of(src, "switches.rail"), 6);
        assert_eq!(line_of(src, "nothing.here"), 1);
    }
}
