//! Loads the GPU-host NIC XDP program (`rocefab_host_xdp`, or its fault-injecting twin
//! `rocefab_test_drop_nth`) from the embedded object [`XDP_OBJECT`](rocefab_plumbing::loader::XDP_OBJECT),
//! attaches it to a host's NIC veths and exposes AF_XDP socket registration, counters and
//! `BPF_PROG_TEST_RUN`.
//!
//! The program redirects RoCEv2 (UDP destination port 4791, IBTA Annex A17) and MAC control
//! (EtherType 0x8808, IEEE 802.3 Annex 31B / IEEE 802.1Qbb) frames, unchanged, to the port's
//! AF_XDP socket and passes everything else (ARP, ICMP, ND) to the kernel.
//!
//! | map             | type          | key → value                                          |
//! |-----------------|---------------|------------------------------------------------------|
//! | `HOST_PORTS`    | hash          | ingress ifindex `u32` → slot `u32`                   |
//! | `HOST_XSKS`     | XSK map       | slot → AF_XDP socket                                 |
//! | `HOST_COUNTERS` | per-CPU array | `slot * counter::COUNT + id` → `u64`                 |
//! | `HOST_DROP_NTH` | array (1)     | 0 → N: `rocefab_test_drop_nth` drops every N-th RoCEv2 frame |
use std::os::fd::RawFd;

use aya::maps::{Array, HashMap, MapData, MapError, PerCpuArray, XskMap};
use aya::programs::xdp::XdpLinkId;
use aya::programs::{ProgramError, Xdp, XdpMode};
use aya::Ebpf;

use rocefab_plumbing::loader::{TestRunOutput, XDP_OBJECT};

/// The production host program.
pub const PROGRAM_NAME: &str = "rocefab_host_xdp";
/// The host program that also drops every N-th RoCEv2 frame (tests, fault injection).
pub const DROP_NTH_PROGRAM_NAME: &str = "rocefab_test_drop_nth";

/// Map names in the object.
pub mod maps {
    pub const PORTS: &str = "HOST_PORTS";
    pub const XSKS: &str = "HOST_XSKS";
    pub const COUNTERS: &str = "HOST_COUNTERS";
    pub const DROP_NTH: &str = "HOST_DROP_NTH";
}

/// Per-port counter ids; mirror of `host_counter` in `dataplane-ebpf/src/host.rs`.
pub mod counter {
    pub const RX: u32 = 0;
    pub const ROCE: u32 = 1;
    pub const MAC_CONTROL: u32 = 2;
    pub const PASS: u32 = 3;
    pub const REDIRECT_FAILED: u32 = 4;
    pub const TEST_DROPPED: u32 = 5;
    pub const TEST_SEEN: u32 = 6;
    pub const COUNT: u32 = 7;
    /// Names by id (Prometheus label values, reports).
    pub const NAMES: [&str; COUNT as usize] =
        ["rx", "roce", "mac_control", "pass", "redirect_failed", "test_dropped", "test_seen"];
}

/// Errors loading, attaching or using the host program.
#[derive(Debug, thiserror::Error)]
pub enum HostLoaderError {
    #[error("loading the rocefab XDP object: {0}")]
    Load(#[source] Box<aya::EbpfError>),
    #[error("unknown host XDP program {0:?} (expected {PROGRAM_NAME:?} or {DROP_NTH_PROGRAM_NAME:?})")]
    UnknownProgram(String),
    #[error("the XDP object has no XDP program {0:?}")]
    MissingProgram(&'static str),
    #[error("verifier/kernel rejected program {name:?}: {source}")]
    ProgramLoad { name: &'static str, source: Box<ProgramError> },
    #[error("the XDP object has no map {0:?}")]
    MissingMap(&'static str),
    #[error("map {map}: {what}: {source}")]
    Map { map: &'static str, what: String, source: Box<MapError> },
    #[error("port {slot} ({name:?}): interface not found in the current network namespace: {source}")]
    Interface { slot: u32, name: String, source: nix::Error },
    #[error("port {slot} ({name:?}, ifindex {ifindex}): attaching {program} in {mode} mode: {source}")]
    Attach { slot: u32, name: String, ifindex: u32, program: &'static str, mode: String, source: Box<ProgramError> },
    #[error("unknown xdp_mode {0:?} (expected \"driver\" or \"skb\")")]
    BadMode(String),
    #[error("port slot {slot} does not exist ({ports} ports)")]
    UnknownSlot { slot: u32, ports: usize },
    #[error("BPF_PROG_TEST_RUN with ingress ifindex {ifindex}: {source}")]
    TestRun { ifindex: u32, source: Box<ProgramError> },
}

/// The host program loaded, its maps filled and (unless loaded for tests) attached.
/// Dropping it detaches the program (aya detaches owned links on drop).
pub struct HostXdp {
    ebpf: Ebpf,
    program: &'static str,
    ifindexes: Vec<u32>,
    names: Vec<String>,
    links: Vec<XdpLinkId>,
}

impl std::fmt::Debug for HostXdp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HostXdp")
            .field("program", &self.program)
            .field("ports", &self.names)
            .field("ifindexes", &self.ifindexes)
            .field("attached", &self.links.len())
            .finish()
    }
}

fn program_name(name: &str) -> Result<&'static str, HostLoaderError> {
    match name {
        PROGRAM_NAME => Ok(PROGRAM_NAME),
        DROP_NTH_PROGRAM_NAME => Ok(DROP_NTH_PROGRAM_NAME),
        other => Err(HostLoaderError::UnknownProgram(other.to_string())),
    }
}

impl HostXdp {
    /// Loads `program` ([`PROGRAM_NAME`] or [`DROP_NTH_PROGRAM_NAME`]), maps `names[i]`
    /// (resolved in the current network namespace) to slot `i` and attaches to each in `mode`
    /// (`driver` or `skb`).
    pub fn load(names: &[String], program: &str, mode: &str) -> Result<Self, HostLoaderError> {
        let mut h = Self::load_detached(names, program)?;
        h.attach(mode)?;
        Ok(h)
    }

    /// Like [`HostXdp::load`] without attaching: register the AF_XDP sockets first, then
    /// [`HostXdp::attach`], so no frame the program would redirect arrives before its socket is
    /// there (it would be dropped as `redirect_failed`).
    pub fn load_detached(names: &[String], program: &str) -> Result<Self, HostLoaderError> {
        let ifindexes = names
            .iter()
            .enumerate()
            .map(|(i, n)| {
                nix::net::if_::if_nametoindex(n.as_str()).map_err(|source| HostLoaderError::Interface {
                    slot: i as u32,
                    name: n.clone(),
                    source,
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        Self::load_unattached(names, ifindexes, program)
    }

    /// Attaches the loaded program to every port in `mode` (`driver` or `skb`).
    pub fn attach(&mut self, mode: &str) -> Result<(), HostLoaderError> {
        let xdp_mode = match mode {
            "driver" => XdpMode::Driver,
            "skb" => XdpMode::Skb,
            other => return Err(HostLoaderError::BadMode(other.to_string())),
        };
        let program = self.program;
        let prog = prog_mut(&mut self.ebpf, program)?;
        for (i, (&ifindex, name)) in self.ifindexes.iter().zip(self.names.iter()).enumerate() {
            let link = prog.attach_to_if_index(ifindex, xdp_mode).map_err(|source| HostLoaderError::Attach {
                slot: i as u32,
                name: name.clone(),
                ifindex,
                program,
                mode: mode.to_string(),
                source: Box::new(source),
            })?;
            self.links.push(link);
            tracing::debug!(slot = i, %name, ifindex, mode, "attached {program}");
        }
        Ok(())
    }

    fn load_unattached(names: &[String], ifindexes: Vec<u32>, program: &str) -> Result<Self, HostLoaderError> {
        let program = program_name(program)?;
        let mut ebpf = Ebpf::load(XDP_OBJECT).map_err(|e| HostLoaderError::Load(Box::new(e)))?;
        prog_mut(&mut ebpf, program)?
            .load()
            .map_err(|e| HostLoaderError::ProgramLoad { name: program, source: Box::new(e) })?;
        let mut ports: HashMap<&mut MapData, u32, u32> = typed_map(&mut ebpf, maps::PORTS)?;
        for (i, &ifindex) in ifindexes.iter().enumerate() {
            ports.insert(ifindex, i as u32, 0).map_err(|source| HostLoaderError::Map {
                map: maps::PORTS,
                what: format!("slot {i} ({}, ifindex {ifindex})", names.get(i).map_or("?", |s| s.as_str())),
                source: Box::new(source),
            })?;
        }
        Ok(HostXdp { ebpf, program, ifindexes, names: names.to_vec(), links: Vec::new() })
    }

    /// The attached program's name.
    pub fn program(&self) -> &'static str {
        self.program
    }

    /// Port ifindexes by slot.
    pub fn ifindexes(&self) -> &[u32] {
        &self.ifindexes
    }

    /// Puts an AF_XDP socket into `HOST_XSKS` at `slot`.
    pub fn register_xsk(&mut self, slot: u32, fd: RawFd) -> Result<(), HostLoaderError> {
        if slot as usize >= self.ifindexes.len() {
            return Err(HostLoaderError::UnknownSlot { slot, ports: self.ifindexes.len() });
        }
        let mut xsks: XskMap<&mut MapData> = typed_map(&mut self.ebpf, maps::XSKS)?;
        xsks.set(slot, fd, 0).map_err(|source| HostLoaderError::Map {
            map: maps::XSKS,
            what: format!("slot {slot} ({}) socket fd {fd}", self.names[slot as usize]),
            source: Box::new(source),
        })
    }

    /// Sets N for `rocefab_test_drop_nth` (0 = drop nothing). Ignored by `rocefab_host_xdp`.
    pub fn set_drop_nth(&mut self, n: u32) -> Result<(), HostLoaderError> {
        let mut a: Array<&mut MapData, u32> = typed_map(&mut self.ebpf, maps::DROP_NTH)?;
        a.set(0, n, 0).map_err(|source| HostLoaderError::Map {
            map: maps::DROP_NTH,
            what: format!("N = {n}"),
            source: Box::new(source),
        })
    }

    /// Counters of every slot summed over CPUs: `result[slot][counter id]`.
    pub fn counters(&self) -> Result<Vec<[u64; counter::COUNT as usize]>, HostLoaderError> {
        let map = self.ebpf.map(maps::COUNTERS).ok_or(HostLoaderError::MissingMap(maps::COUNTERS))?;
        let err =
            |what: String| move |source| HostLoaderError::Map { map: maps::COUNTERS, what, source: Box::new(source) };
        let counters: PerCpuArray<&MapData, u64> = PerCpuArray::try_from(map).map_err(err("opening".into()))?;
        let mut out = vec![[0u64; counter::COUNT as usize]; self.ifindexes.len()];
        for (slot, row) in out.iter_mut().enumerate() {
            for (id, v) in row.iter_mut().enumerate() {
                let idx = slot as u32 * counter::COUNT + id as u32;
                let values =
                    counters.get(&idx, 0).map_err(err(format!("slot {slot} counter {}", counter::NAMES[id])))?;
                *v = values.iter().sum();
            }
        }
        Ok(out)
    }

    /// Runs the program once on `frame` with `BPF_PROG_TEST_RUN` as if it arrived on
    /// `ingress_ifindex` (a real device in the current netns). A returned `XDP_REDIRECT` is
    /// not carried out.
    pub fn test_run(&mut self, frame: &[u8], ingress_ifindex: u32) -> Result<TestRunOutput, HostLoaderError> {
        let prog = prog_mut(&mut self.ebpf, self.program)?;
        rocefab_plumbing::loader::xdp_test_run(prog, frame, ingress_ifindex)
            .map_err(|source| HostLoaderError::TestRun { ifindex: ingress_ifindex, source: Box::new(source) })
    }
}

/// Loads `program` for `BPF_PROG_TEST_RUN` without attaching; `ifindexes[i]` is slot `i`.
pub fn load_for_test(ifindexes: &[u32], program: &str) -> Result<HostXdp, HostLoaderError> {
    let names: Vec<String> = ifindexes.iter().map(|i| format!("ifindex{i}")).collect();
    HostXdp::load_unattached(&names, ifindexes.to_vec(), program)
}

fn prog_mut<'a>(ebpf: &'a mut Ebpf, name: &'static str) -> Result<&'a mut Xdp, HostLoaderError> {
    ebpf.program_mut(name)
        .ok_or(HostLoaderError::MissingProgram(name))?
        .try_into()
        .map_err(|_: ProgramError| HostLoaderError::MissingProgram(name))
}

fn typed_map<'a, T>(ebpf: &'a mut Ebpf, name: &'static str) -> Result<T, HostLoaderError>
where
    T: TryFrom<&'a mut aya::maps::Map, Error = MapError>,
{
    let map = ebpf.map_mut(name).ok_or(HostLoaderError::MissingMap(name))?;
    T::try_from(map).map_err(|source| HostLoaderError::Map {
        map: name,
        what: "opening".into(),
        source: Box::new(source),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn program_names_are_checked() {
        assert_eq!(program_name("rocefab_host_xdp").unwrap(), PROGRAM_NAME);
        assert_eq!(program_name("rocefab_test_drop_nth").unwrap(), DROP_NTH_PROGRAM_NAME);
        let e = program_name("rocefab_xdp").unwrap_err().to_string();
        assert!(e.contains("rocefab_xdp") && e.contains(PROGRAM_NAME), "{e}");
    }

    /// Crude but independent check that the embedded object carries both host programs and
    /// their maps (names appear in the ELF string table).
    #[test]
    fn embedded_object_names_host_programs_and_maps() {
        let has = |s: &str| XDP_OBJECT.windows(s.len()).any(|w| w == s.as_bytes());
        for s in [PROGRAM_NAME, DROP_NTH_PROGRAM_NAME, maps::PORTS, maps::XSKS, maps::COUNTERS, maps::DROP_NTH] {
            assert!(has(s), "{s} missing from the embedded XDP object");
        }
    }
}
