//! Loads the `rocefab_xdp` program (built from `dataplane-ebpf` by `build.rs` and embedded as
//! [`XDP_OBJECT`]), fills its maps from a [`SwitchConfig`], attaches it to every switch port,
//! and exposes the pieces the daemon and the tests need: AF_XDP socket registration, per-port
//! counters and `BPF_PROG_TEST_RUN` ([`XdpSwitch::test_run`]).
//!
//! Maps (names as in the object, value types from `dataplane-common`):
//!
//! | map         | type               | key → value                                   |
//! |-------------|--------------------|-----------------------------------------------|
//! | `PORTS`     | hash               | ingress ifindex `u32` → [`PortInfo`]          |
//! | `DSCP_TC`   | array (64)         | DSCP → traffic class `u8`                     |
//! | `ROUTES_V4` | LPM trie           | (prefix len, `[u8; 4]`) → [`RouteValue`]      |
//! | `ROUTES_V6` | LPM trie           | (prefix len, `[u8; 16]`) → [`RouteValue`]     |
//! | `GROUPS`    | array              | group id → [`NextHopGroup`]                   |
//! | `NEXTHOPS`  | array              | next-hop id → [`NextHop`]                     |
//! | `PARAMS`    | array (1)          | 0 → [`SwitchParams`]                          |
//! | `XSKS`      | XSK map            | port index → AF_XDP socket                    |
//! | `COUNTERS`  | per-CPU array      | `port * counter::COUNT + id` → `u64`          |
//! | `WRED`      | array (1)          | 0 → [`WredParams`]                            |
//! | `DEPTHS`    | array, mmapable    | `depth_index(port, tc)` → queue bytes `u64`   |
//! | `RNG`       | per-CPU array (1)  | 0 → xorshift32 state `u32` (0 = unseeded)     |
//! | `FLOWLETS`  | LRU hash           | [`FlowKey`] → [`Flowlet`] (flowlet modes)     |
//! | `LB_SEQ`    | per-CPU array (1)  | 0 → `spray: round-robin` sequence `u32`       |
use std::net::IpAddr;
use std::os::fd::RawFd;

use aya::maps::lpm_trie::{Key, LpmTrie};
use aya::maps::{Array, HashMap, MapData, MapError, PerCpuArray, XskMap};
use aya::programs::xdp::XdpLinkId;
use aya::programs::{ProgramError, TestRun, TestRunOptions, Xdp, XdpMode};
use aya::Ebpf;
use dataplane_common::lb::{FlowKey, Flowlet};
use dataplane_common::limits::MAX_GROUP_MEMBERS;
use dataplane_common::{
    counter, Decision, NextHop, NextHopGroup, PortInfo, RouteValue, SwitchParams, WredParams, XdpMeta,
};
use rocefab_contracts::config::{RouteConfig, SwitchConfig};

/// The XDP object built by `build.rs` (ELF, BTF included).
pub static XDP_OBJECT: &[u8] = aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/rocefab-xdp"));

/// Name of the XDP program in [`XDP_OBJECT`].
pub const PROGRAM_NAME: &str = "rocefab_xdp";

/// Map names in [`XDP_OBJECT`].
pub mod maps {
    pub const PORTS: &str = "PORTS";
    pub const DSCP_TC: &str = "DSCP_TC";
    pub const ROUTES_V4: &str = "ROUTES_V4";
    pub const ROUTES_V6: &str = "ROUTES_V6";
    pub const GROUPS: &str = "GROUPS";
    pub const NEXTHOPS: &str = "NEXTHOPS";
    pub const PARAMS: &str = "PARAMS";
    pub const XSKS: &str = "XSKS";
    pub const COUNTERS: &str = "COUNTERS";
    pub const WRED: &str = "WRED";
    pub const DEPTHS: &str = "DEPTHS";
    pub const RNG: &str = "RNG";
    pub const FLOWLETS: &str = "FLOWLETS";
    pub const LB_SEQ: &str = "LB_SEQ";
    /// Every map the loader expects.
    pub const ALL: [&str; 14] = [
        PORTS, DSCP_TC, ROUTES_V4, ROUTES_V6, GROUPS, NEXTHOPS, PARAMS, XSKS, COUNTERS, WRED, DEPTHS, RNG, FLOWLETS,
        LB_SEQ,
    ];
}

/// XDP return codes (`enum xdp_action`, include/uapi/linux/bpf.h).
pub mod xdp_action {
    pub const XDP_ABORTED: u32 = 0;
    pub const XDP_DROP: u32 = 1;
    pub const XDP_PASS: u32 = 2;
    pub const XDP_TX: u32 = 3;
    pub const XDP_REDIRECT: u32 = 4;
}

/// Errors loading, configuring, attaching or test-running the XDP program.
#[derive(Debug, thiserror::Error)]
pub enum LoaderError {
    #[error("loading the rocefab XDP object: {0}")]
    Load(#[source] Box<aya::EbpfError>),
    #[error("the XDP object has no program {PROGRAM_NAME:?} of type XDP")]
    MissingProgram,
    #[error("verifier/kernel rejected program {PROGRAM_NAME:?}: {0}")]
    ProgramLoad(#[source] Box<ProgramError>),
    #[error("the XDP object has no map {0:?}")]
    MissingMap(&'static str),
    #[error("map {map}: {what}: {source}")]
    Map { map: &'static str, what: String, source: Box<MapError> },
    #[error("port {port} ({name:?}): interface not found in the current network namespace: {source}")]
    Interface { port: u32, name: String, source: nix::Error },
    #[error("port {port} ({name:?}, ifindex {ifindex}): attaching XDP in {mode} mode: {source}")]
    Attach { port: u32, name: String, ifindex: u32, mode: String, source: Box<ProgramError> },
    #[error("unknown xdp_mode {0:?} (expected \"driver\" or \"skb\")")]
    BadMode(String),
    #[error("port {port} does not exist (the switch has {ports} ports)")]
    UnknownPort { port: u32, ports: usize },
    #[error("{got} ifindexes given for {expected} ports")]
    IfindexCount { expected: usize, got: usize },
    #[error("route {prefix}/{len}: {why}")]
    BadRoute { prefix: IpAddr, len: u8, why: &'static str },
    #[error("group {group}: {members} members (1..={MAX_GROUP_MEMBERS} allowed)")]
    BadGroup { group: usize, members: usize },
    #[error("mapping the DEPTHS map (BPF_F_MMAPABLE) into memory: {0}")]
    MapDepths(#[source] std::io::Error),
    #[error("BPF_PROG_TEST_RUN with ingress ifindex {ifindex}: {source}")]
    TestRun { ifindex: u32, source: Box<ProgramError> },
}

/// Result of [`XdpSwitch::test_run`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TestRunOutput {
    /// The program's return code (`xdp_action::XDP_*`).
    pub action: u32,
    /// The frame after the program ran (the kernel does not perform the redirect in a
    /// non-live test run).
    pub data: Vec<u8>,
    /// The XDP metadata the program left in front of the frame (empty if none).
    pub meta: Vec<u8>,
}

impl TestRunOutput {
    /// The [`XdpMeta`] in the metadata, if there is one.
    pub fn xdp_meta(&self) -> Option<XdpMeta> {
        if self.meta.len() != XdpMeta::LEN {
            return None;
        }
        XdpMeta::from_bytes(&self.meta)
    }

    /// The [`Decision`] in the metadata, if there is one.
    pub fn decision(&self) -> Option<Decision> {
        self.xdp_meta().map(|m| m.decision)
    }
}

/// Runs an XDP program once on `frame` with `BPF_PROG_TEST_RUN`, as if it arrived on
/// `ingress_ifindex` (shared by the switch and host loaders). The kernel requires that ifindex
/// to be a real device in the current network namespace, and frames of at least 14 bytes
/// (ETH_HLEN). A returned `XDP_REDIRECT` is not carried out (no `BPF_F_TEST_XDP_LIVE_FRAMES`).
pub(crate) fn xdp_test_run(prog: &mut Xdp, frame: &[u8], ingress_ifindex: u32) -> Result<TestRunOutput, ProgramError> {
    // struct xdp_md: data, data_end, data_meta, ingress_ifindex, rx_queue_index,
    // egress_ifindex (all u32). The kernel requires data_meta = 0 and data_end = frame size.
    let mut ctx = [0u8; 24];
    ctx[4..8].copy_from_slice(&(frame.len() as u32).to_ne_bytes());
    ctx[12..16].copy_from_slice(&ingress_ifindex.to_ne_bytes());
    // Room for headers the program may prepend (bpf_xdp_adjust_head).
    // The kernel writes the output from `data_meta` on, and in the output context `data` is
    // the frame's offset from it: the metadata's length.
    let mut out = vec![0u8; frame.len() + 256];
    let mut ctx_out = [0u8; 24];
    let mut opts = TestRunOptions::new();
    opts.data_in = Some(frame);
    opts.data_out = Some(&mut out);
    opts.ctx_in = Some(&ctx);
    opts.ctx_out = Some(&mut ctx_out);
    let res = prog.test_run(opts)?;
    out.truncate(res.data_size_out as usize);
    let meta_len = (u32::from_ne_bytes([ctx_out[0], ctx_out[1], ctx_out[2], ctx_out[3]]) as usize).min(out.len());
    let data = out.split_off(meta_len);
    Ok(TestRunOutput { action: res.return_value, data, meta: out })
}

/// The XDP program loaded, configured and (unless loaded for tests) attached to the ports.
///
/// Dropping it detaches the program from every port (aya detaches owned links on drop).
pub struct XdpSwitch {
    ebpf: Ebpf,
    ifindexes: Vec<u32>,
    names: Vec<String>,
    links: Vec<XdpLinkId>,
}

impl std::fmt::Debug for XdpSwitch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("XdpSwitch")
            .field("ports", &self.names)
            .field("ifindexes", &self.ifindexes)
            .field("attached", &self.links.len())
            .finish()
    }
}

impl XdpSwitch {
    /// Loads the object, fills `PORTS`/`DSCP_TC`/`ROUTES_V4`/`ROUTES_V6`/`GROUPS`/`NEXTHOPS`/
    /// `PARAMS` from `cfg` (ifindex of each `cfg.ports[i].name` resolved in the CURRENT network
    /// namespace) and attaches the program to every port in `cfg.xdp_mode`
    /// (`driver` → native mode, `skb` → generic mode).
    pub fn load(cfg: &SwitchConfig) -> Result<Self, LoaderError> {
        let mode = match cfg.xdp_mode.as_str() {
            "driver" => XdpMode::Driver,
            "skb" => XdpMode::Skb,
            other => return Err(LoaderError::BadMode(other.to_string())),
        };
        let ifindexes = cfg
            .ports
            .iter()
            .enumerate()
            .map(|(i, p)| {
                nix::net::if_::if_nametoindex(p.name.as_str()).map_err(|source| LoaderError::Interface {
                    port: i as u32,
                    name: p.name.clone(),
                    source,
                })
            })
            .collect::<Result<Vec<u32>, _>>()?;
        let mut sw = Self::load_unattached(cfg, ifindexes)?;
        let XdpSwitch { ebpf, ifindexes, names, links } = &mut sw;
        let prog = program_mut(ebpf)?;
        for (i, (&ifindex, name)) in ifindexes.iter().zip(names.iter()).enumerate() {
            let link = prog.attach_to_if_index(ifindex, mode).map_err(|source| LoaderError::Attach {
                port: i as u32,
                name: name.clone(),
                ifindex,
                mode: cfg.xdp_mode.clone(),
                source: Box::new(source),
            })?;
            links.push(link);
            tracing::debug!(port = i, %name, ifindex, mode = %cfg.xdp_mode, "attached {PROGRAM_NAME}");
        }
        Ok(sw)
    }

    /// Loads the program and fills the maps with `ifindexes[i]` as the ifindex of port `i`,
    /// without attaching it anywhere.
    fn load_unattached(cfg: &SwitchConfig, ifindexes: Vec<u32>) -> Result<Self, LoaderError> {
        if ifindexes.len() != cfg.ports.len() {
            return Err(LoaderError::IfindexCount { expected: cfg.ports.len(), got: ifindexes.len() });
        }
        let mut ebpf = Ebpf::load(XDP_OBJECT).map_err(|e| LoaderError::Load(Box::new(e)))?;
        program_mut(&mut ebpf)?.load().map_err(|e| LoaderError::ProgramLoad(Box::new(e)))?;
        let mut sw =
            XdpSwitch { ebpf, ifindexes, names: cfg.ports.iter().map(|p| p.name.clone()).collect(), links: Vec::new() };
        sw.fill_maps(cfg)?;
        Ok(sw)
    }

    fn fill_maps(&mut self, cfg: &SwitchConfig) -> Result<(), LoaderError> {
        let err =
            |map: &'static str, what: String| move |source| LoaderError::Map { map, what, source: Box::new(source) };

        let mut ports: HashMap<&mut MapData, u32, PortInfo> = typed_map(&mut self.ebpf, maps::PORTS)?;
        for (i, &ifindex) in self.ifindexes.iter().enumerate() {
            ports
                .insert(ifindex, PortInfo { index: i as u32, flags: 0 }, 0)
                .map_err(err(maps::PORTS, format!("port {i} ({}, ifindex {ifindex})", self.names[i])))?;
        }

        let mut dscp: Array<&mut MapData, u8> = typed_map(&mut self.ebpf, maps::DSCP_TC)?;
        for (d, &tc) in cfg.dscp_to_tc.iter().enumerate().take(64) {
            dscp.set(d as u32, tc, 0).map_err(err(maps::DSCP_TC, format!("DSCP {d} → TC {tc}")))?;
        }

        let mut nexthops: Array<&mut MapData, NextHop> = typed_map(&mut self.ebpf, maps::NEXTHOPS)?;
        for (i, nh) in cfg.nexthops.iter().enumerate() {
            nexthops
                .set(i as u32, NextHop { port: nh.port }, 0)
                .map_err(err(maps::NEXTHOPS, format!("next hop {i} (port {})", nh.port)))?;
        }

        let mut groups: Array<&mut MapData, NextHopGroup> = typed_map(&mut self.ebpf, maps::GROUPS)?;
        for (g, members) in cfg.groups.iter().enumerate() {
            if members.is_empty() || members.len() > MAX_GROUP_MEMBERS {
                return Err(LoaderError::BadGroup { group: g, members: members.len() });
            }
            let mut v = NextHopGroup { count: members.len() as u32, ..Default::default() };
            v.members[..members.len()].copy_from_slice(members);
            groups.set(g as u32, v, 0).map_err(err(maps::GROUPS, format!("group {g} {members:?}")))?;
        }

        let params = switch_params(cfg);
        let mut map: Array<&mut MapData, SwitchParams> = typed_map(&mut self.ebpf, maps::PARAMS)?;
        map.set(0, params, 0).map_err(err(maps::PARAMS, format!("{params:?}")))?;

        let w = &cfg.qos.wred;
        // `wred.at: dequeue`: the data-plane thread marks; the XDP program marks nothing.
        let at_enqueue = w.at == rocefab_contracts::config::WredAt::Enqueue;
        let wred = WredParams {
            queues: if at_enqueue { u32::from(w.queues) } else { 0 },
            min_bytes: w.min_bytes.min(u64::from(u32::MAX)) as u32,
            max_bytes: w.max_bytes.min(u64::from(u32::MAX)) as u32,
            pmax_q32: WredParams::pmax_from_percent(w.probability_percent),
            seed: w.seed,
            _pad: 0,
        };
        let mut wred_map: Array<&mut MapData, WredParams> = typed_map(&mut self.ebpf, maps::WRED)?;
        wred_map.set(0, wred, 0).map_err(err(maps::WRED, format!("{wred:?}")))?;

        for r in &cfg.routes {
            self.route(r, true)?;
        }
        Ok(())
    }

    /// Inserts (`add`) or deletes route `r` in the LPM tries.
    fn route(&mut self, r: &RouteConfig, add: bool) -> Result<(), LoaderError> {
        let value = RouteValue { group: r.group.unwrap_or(RouteValue::LOCAL) };
        let what = || format!("route {}/{}", r.prefix, r.len);
        let map_err =
            |map: &'static str| move |source| LoaderError::Map { map, what: what(), source: Box::new(source) };
        match r.prefix {
            IpAddr::V4(a) => {
                if r.len > 32 {
                    return Err(LoaderError::BadRoute { prefix: r.prefix, len: r.len, why: "prefix length > 32" });
                }
                let key = Key::new(r.len.into(), mask(a.octets(), r.len));
                let mut t: LpmTrie<&mut MapData, [u8; 4], RouteValue> = typed_map(&mut self.ebpf, maps::ROUTES_V4)?;
                if add { t.insert(&key, value, 0) } else { t.remove(&key) }.map_err(map_err(maps::ROUTES_V4))
            }
            IpAddr::V6(a) => {
                if r.len > 128 {
                    return Err(LoaderError::BadRoute { prefix: r.prefix, len: r.len, why: "prefix length > 128" });
                }
                let key = Key::new(r.len.into(), mask(a.octets(), r.len));
                let mut t: LpmTrie<&mut MapData, [u8; 16], RouteValue> = typed_map(&mut self.ebpf, maps::ROUTES_V6)?;
                if add { t.insert(&key, value, 0) } else { t.remove(&key) }.map_err(map_err(maps::ROUTES_V6))
            }
        }
    }

    /// Replaces the routes `old` (what the maps hold) with `new`: first every new route is
    /// written (a prefix in both takes its new group at once), then the old prefixes that are not
    /// in `new` go. The groups `new` names must be written first ([`XdpSwitch::set_group`]).
    pub fn replace_routes(&mut self, old: &[RouteConfig], new: &[RouteConfig]) -> Result<(), LoaderError> {
        for r in new {
            self.route(r, true)?;
        }
        for r in old.iter().filter(|o| !new.iter().any(|n| n.prefix == o.prefix && n.len == o.len)) {
            self.route(r, false)?;
        }
        Ok(())
    }

    /// Sets the clock the flowlet modes and the metadata's `rx_ns` read instead of `bpf_ktime_get_ns` (0: the kernel's
    /// clock again), for `BPF_PROG_TEST_RUN` tests that need to place packets in time.
    pub fn set_clock_override(&mut self, now_ns: u64) -> Result<(), LoaderError> {
        let mut map: Array<&mut MapData, SwitchParams> = typed_map(&mut self.ebpf, maps::PARAMS)?;
        let err = |what: &str| {
            let what = what.to_string();
            move |source| LoaderError::Map { map: maps::PARAMS, what, source: Box::new(source) }
        };
        let mut p = map.get(&0, 0).map_err(err("reading entry 0"))?;
        p.clock_override_ns = now_ns;
        map.set(0, p, 0).map_err(err("clock override"))
    }

    /// The flowlet table's entry of a flow, if it has one.
    pub fn flowlet(&self, key: &FlowKey) -> Result<Option<Flowlet>, LoaderError> {
        let map = self.ebpf.map(maps::FLOWLETS).ok_or(LoaderError::MissingMap(maps::FLOWLETS))?;
        let table: HashMap<&MapData, FlowKey, Flowlet> = HashMap::try_from(map).map_err(|source| LoaderError::Map {
            map: maps::FLOWLETS,
            what: "opening".into(),
            source: Box::new(source),
        })?;
        match table.get(key, 0) {
            Ok(f) => Ok(Some(f)),
            Err(MapError::KeyNotFound) => Ok(None),
            Err(source) => {
                Err(LoaderError::Map { map: maps::FLOWLETS, what: format!("{key:?}"), source: Box::new(source) })
            }
        }
    }

    /// Rewrites ECMP group `g` with `members` (next-hop ids; none: the group's routes drop as
    /// route misses). A packet the program is forwarding meanwhile sees the old or the new group.
    pub fn set_group(&mut self, g: u32, members: &[u32]) -> Result<(), LoaderError> {
        if members.len() > MAX_GROUP_MEMBERS {
            return Err(LoaderError::BadGroup { group: g as usize, members: members.len() });
        }
        let mut groups: Array<&mut MapData, NextHopGroup> = typed_map(&mut self.ebpf, maps::GROUPS)?;
        let mut v = NextHopGroup { count: members.len() as u32, ..Default::default() };
        v.members[..members.len()].copy_from_slice(members);
        groups.set(g, v, 0).map_err(|source| LoaderError::Map {
            map: maps::GROUPS,
            what: format!("group {g} {members:?}"),
            source: Box::new(source),
        })
    }

    /// Makes port `port` fail silently (drop every frame it receives, carrier up) or work again.
    pub fn set_port_silent(&mut self, port: u32, silent: bool) -> Result<(), LoaderError> {
        self.check_port(port)?;
        let ifindex = self.ifindexes[port as usize];
        let flags = if silent { PortInfo::SILENT } else { 0 };
        let mut ports: HashMap<&mut MapData, u32, PortInfo> = typed_map(&mut self.ebpf, maps::PORTS)?;
        ports.insert(ifindex, PortInfo { index: port, flags }, 0).map_err(|source| LoaderError::Map {
            map: maps::PORTS,
            what: format!("port {port} ({}, ifindex {ifindex}) silent {silent}", self.names[port as usize]),
            source: Box::new(source),
        })
    }

    /// Puts an AF_XDP socket fd into `XSKS` at the port's index.
    pub fn register_xsk(&mut self, port: u32, fd: RawFd) -> Result<(), LoaderError> {
        self.check_port(port)?;
        let mut xsks: XskMap<&mut MapData> = typed_map(&mut self.ebpf, maps::XSKS)?;
        xsks.set(port, fd, 0).map_err(|source| LoaderError::Map {
            map: maps::XSKS,
            what: format!("port {port} ({}) socket fd {fd}", self.names[port as usize]),
            source: Box::new(source),
        })
    }

    /// Per-port counters summed over CPUs: `result[port][counter id]`.
    pub fn counters(&self) -> Result<Vec<[u64; counter::COUNT as usize]>, LoaderError> {
        let map = self.ebpf.map(maps::COUNTERS).ok_or(LoaderError::MissingMap(maps::COUNTERS))?;
        let counters: PerCpuArray<&MapData, u64> = PerCpuArray::try_from(map).map_err(|source| LoaderError::Map {
            map: maps::COUNTERS,
            what: "opening".into(),
            source: Box::new(source),
        })?;
        let mut out = vec![[0u64; counter::COUNT as usize]; self.ifindexes.len()];
        for (port, row) in out.iter_mut().enumerate() {
            for (id, slot) in row.iter_mut().enumerate() {
                let idx = port as u32 * counter::COUNT + id as u32;
                let values = counters.get(&idx, 0).map_err(|source| LoaderError::Map {
                    map: maps::COUNTERS,
                    what: format!("port {port} counter {}", counter::NAMES[id]),
                    source: Box::new(source),
                })?;
                *slot = values.iter().sum();
            }
        }
        Ok(out)
    }

    /// A shared mapping of the `DEPTHS` map, where the data-plane thread publishes queue depths
    /// for the program's WRED ([`crate::depths`]).
    pub fn depths_map(&self) -> Result<crate::depths::DepthsMap, LoaderError> {
        use std::os::fd::AsFd;
        let map = self.ebpf.map(maps::DEPTHS).ok_or(LoaderError::MissingMap(maps::DEPTHS))?;
        let data = match map {
            aya::maps::Map::Array(d) => d,
            _ => return Err(LoaderError::MissingMap(maps::DEPTHS)),
        };
        crate::depths::DepthsMap::map(data.fd().as_fd()).map_err(LoaderError::MapDepths)
    }

    /// Port ifindexes in config order.
    pub fn ifindexes(&self) -> &[u32] {
        &self.ifindexes
    }

    /// The loaded object, for maps this API does not wrap (e.g. to attach an aya-log logger).
    pub fn ebpf_mut(&mut self) -> &mut Ebpf {
        &mut self.ebpf
    }

    /// Detaches from all ports (also done on drop). Failures are logged, not returned: the
    /// interface may already be gone when a fabric is torn down.
    pub fn detach(mut self) {
        self.detach_ports();
    }

    /// [`XdpSwitch::detach`] in place (the maps stay readable); a second call does nothing.
    pub fn detach_ports(&mut self) {
        let links = std::mem::take(&mut self.links);
        if links.is_empty() {
            return;
        }
        match program_mut(&mut self.ebpf) {
            Ok(prog) => {
                for (i, link) in links.into_iter().enumerate() {
                    if let Err(e) = prog.detach(link) {
                        tracing::warn!(port = i, name = %self.names[i], "detaching {PROGRAM_NAME}: {e}");
                    }
                }
            }
            Err(e) => tracing::warn!("detaching {PROGRAM_NAME}: {e}"),
        }
    }

    /// Runs the program once on `frame` with `BPF_PROG_TEST_RUN`, as if it arrived on
    /// `ingress_ifindex`. The kernel requires that ifindex to be a real device in the current
    /// network namespace, and frames of at least 14 bytes (ETH_HLEN). A returned
    /// `XDP_REDIRECT` is not carried out (no `BPF_F_TEST_XDP_LIVE_FRAMES`).
    pub fn test_run(&mut self, frame: &[u8], ingress_ifindex: u32) -> Result<TestRunOutput, LoaderError> {
        let prog = program_mut(&mut self.ebpf)?;
        xdp_test_run(prog, frame, ingress_ifindex)
            .map_err(|source| LoaderError::TestRun { ifindex: ingress_ifindex, source: Box::new(source) })
    }

    fn check_port(&self, port: u32) -> Result<(), LoaderError> {
        if port as usize >= self.ifindexes.len() {
            return Err(LoaderError::UnknownPort { port, ports: self.ifindexes.len() });
        }
        Ok(())
    }
}

/// The `PARAMS` entry of a switch: hash seed, the load-balancing mode of every traffic class,
/// and the flowlet gap δ on the wall clock (emulated µs × time dilation, in ns).
pub fn switch_params(cfg: &SwitchConfig) -> SwitchParams {
    let lb = &cfg.load_balance;
    let dilation = cfg.dilation().unwrap_or_default();
    SwitchParams {
        hash_seed: cfg.hash_seed,
        lb_modes: lb.modes.map(|m| m.code()),
        _pad: 0,
        flowlet_gap_ns: dilation.duration(lb.flowlet_gap_us.saturating_mul(1_000)),
        clock_override_ns: 0,
    }
}

/// Loads the program for `BPF_PROG_TEST_RUN` without attaching it: fills the maps from `cfg`,
/// using `ifindexes[i]` (need not be real, except the ones passed to
/// [`XdpSwitch::test_run`]) as the ifindex of port `i`.
pub fn load_for_test(cfg: &SwitchConfig, ifindexes: &[u32]) -> Result<XdpSwitch, LoaderError> {
    XdpSwitch::load_unattached(cfg, ifindexes.to_vec())
}

fn program_mut(ebpf: &mut Ebpf) -> Result<&mut Xdp, LoaderError> {
    ebpf.program_mut(PROGRAM_NAME)
        .ok_or(LoaderError::MissingProgram)?
        .try_into()
        .map_err(|_: ProgramError| LoaderError::MissingProgram)
}

fn typed_map<'a, T>(ebpf: &'a mut Ebpf, name: &'static str) -> Result<T, LoaderError>
where
    T: TryFrom<&'a mut aya::maps::Map, Error = MapError>,
{
    let map = ebpf.map_mut(name).ok_or(LoaderError::MissingMap(name))?;
    T::try_from(map).map_err(|source| LoaderError::Map { map: name, what: "opening".into(), source: Box::new(source) })
}

/// Clears the host bits beyond `len` (LPM keys are stored as network prefixes).
fn mask<const N: usize>(mut addr: [u8; N], len: u8) -> [u8; N] {
    for (i, b) in addr.iter_mut().enumerate() {
        let bits = (len as usize).saturating_sub(i * 8).min(8);
        *b &= if bits == 0 { 0 } else { 0xffu8 << (8 - bits) };
    }
    addr
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn params_carry_modes_and_the_dilated_gap() {
        use dataplane_common::lb::mode;
        use rocefab_contracts::config::LbMode;
        let mut cfg: SwitchConfig = serde_json::from_str(
            r#"{"name":"s","role":"spine","netns":null,"hash_seed":9,"metrics_listen":"127.0.0.1:1",
                "ports":[],"nexthops":[],"groups":[],"routes":[],"time_dilation":8000}"#,
        )
        .unwrap();
        cfg.load_balance.modes[3] = LbMode::Adaptive;
        cfg.load_balance.modes[5] = LbMode::SprayRandom;
        cfg.load_balance.flowlet_gap_us = 50;
        let p = switch_params(&cfg);
        assert_eq!(p.hash_seed, 9);
        assert_eq!(p.lb_modes, [mode::ECMP, 0, 0, mode::ADAPTIVE, 0, mode::SPRAY_RANDOM, 0, 0]);
        // 50 µs emulated at D = 8000 is 400 ms on the wall clock.
        assert_eq!(p.flowlet_gap_ns, 400_000_000);
        assert_eq!(p.clock_override_ns, 0);
    }

    #[test]
    fn mask_clears_host_bits() {
        assert_eq!(mask([10, 0, 1, 77], 24), [10, 0, 1, 0]);
        assert_eq!(mask([10, 0, 1, 77], 32), [10, 0, 1, 77]);
        assert_eq!(mask([10, 255, 1, 77], 9), [10, 128, 0, 0]);
        assert_eq!(mask([10, 0, 1, 77], 0), [0, 0, 0, 0]);
    }

    /// Minimal ELF64 little-endian reader (the crate has no ELF parser dependency): section
    /// names and the symbols defined in each section.
    struct Elf<'a> {
        data: &'a [u8],
        sections: Vec<(String, u32, usize, usize, u32)>, // name, type, offset, size, link
    }

    impl<'a> Elf<'a> {
        fn u16(d: &[u8], o: usize) -> u16 {
            u16::from_le_bytes(d[o..o + 2].try_into().unwrap())
        }
        fn u32(d: &[u8], o: usize) -> u32 {
            u32::from_le_bytes(d[o..o + 4].try_into().unwrap())
        }
        fn u64(d: &[u8], o: usize) -> usize {
            u64::from_le_bytes(d[o..o + 8].try_into().unwrap()) as usize
        }
        fn cstr(d: &[u8], o: usize) -> String {
            let end = d[o..].iter().position(|&b| b == 0).unwrap();
            String::from_utf8_lossy(&d[o..o + end]).into_owned()
        }

        fn parse(data: &'a [u8]) -> Self {
            assert!(data.len() > 64, "object is {} bytes", data.len());
            assert_eq!(&data[..4], b"\x7fELF", "ELF magic");
            assert_eq!(data[4], 2, "ELFCLASS64");
            assert_eq!(data[5], 1, "little-endian (bpfel)");
            assert_eq!(Self::u16(data, 0x12), 247, "e_machine EM_BPF");
            let (shoff, shentsize) = (Self::u64(data, 0x28), Self::u16(data, 0x3a) as usize);
            let (shnum, shstrndx) = (Self::u16(data, 0x3c) as usize, Self::u16(data, 0x3e) as usize);
            let hdr = |i: usize| &data[shoff + i * shentsize..shoff + (i + 1) * shentsize];
            let strtab = Self::u64(hdr(shstrndx), 0x18);
            let sections = (0..shnum)
                .map(|i| {
                    let h = hdr(i);
                    (
                        Self::cstr(data, strtab + Self::u32(h, 0) as usize),
                        Self::u32(h, 4),
                        Self::u64(h, 0x18),
                        Self::u64(h, 0x20),
                        Self::u32(h, 0x28),
                    )
                })
                .collect();
            Elf { data, sections }
        }

        fn has_section(&self, name: &str) -> bool {
            self.sections.iter().any(|s| s.0 == name)
        }

        /// Names of the symbols defined in section `section`.
        fn symbols_in(&self, section: &str) -> Vec<String> {
            const SHT_SYMTAB: u32 = 2;
            let idx = self.sections.iter().position(|s| s.0 == section).expect("section exists");
            let (_, _, off, size, link) = self.sections.iter().find(|s| s.1 == SHT_SYMTAB).expect(".symtab").clone();
            let strtab = self.sections[link as usize].2;
            (off..off + size)
                .step_by(24)
                .filter(|&o| Self::u16(self.data, o + 6) as usize == idx)
                .map(|o| Self::cstr(self.data, strtab + Self::u32(self.data, o) as usize))
                .collect()
        }
    }

    /// The embedded object is the real program: a BPF ELF with the multi-buffer XDP section
    /// (`xdp.frags`: jumbo frames arrive in several buffers) holding `rocefab_xdp`, BTF, and every
    /// map the loader opens. Catches a broken or placeholder build.
    #[test]
    fn embedded_object_has_program_and_maps() {
        let elf = Elf::parse(XDP_OBJECT);
        assert!(!elf.has_section("xdp"), "a program without frags support refuses jumbo frames");
        assert!(
            elf.symbols_in("xdp.frags").iter().any(|s| s == PROGRAM_NAME),
            "{PROGRAM_NAME} not in section xdp.frags"
        );
        let map_syms = elf.symbols_in("maps");
        for m in maps::ALL {
            assert!(map_syms.iter().any(|s| s == m), "map {m} missing; maps section has {map_syms:?}");
        }
        assert!(elf.has_section(".BTF") && elf.has_section(".BTF.ext"), "BTF (-C debuginfo=2 -C link-arg=--btf)");
        assert!(elf.has_section("license"), "license section");
    }
}
