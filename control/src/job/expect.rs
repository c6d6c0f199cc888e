//! What the model says a collective takes (issue 41): the job's completion time if the machine
//! kept up, from the transfers the hosts were given and the fabric's plan, so that `rocefab run`
//! prints it beside the measured JCT and can tell a machine-bound result from a model result.
//!
//! Two lower bounds, the expectation being the larger:
//!
//! * **the critical path**: every transfer starts once the transfers it depends on have arrived
//!   (the collective's own dependencies, [`CollectiveSpec`]) and its NIC has sent what it sent
//!   before (one NIC sends one frame at a time, at its line rate; a transfer that follows an
//!   arrival sends that arrival's ACK first, as the NIC puts ACKs ahead of data). Its frames then
//!   cross their path frame by frame: on a port without delay a switch hands a frame on when its
//!   egress lets it start, so it is at the next hop at its first bit (rocefab's semantics when a
//!   topology has no `delay`: docs/src/emulated-time.md); on a port with a delay the peer has it
//!   when its last bit is there plus the delay (store and forward). Each egress sends a frame
//!   no earlier than one serialisation after the previous one of the transfer. The job ends with
//!   the ACK of its last arrival back at its sender. Other transfers' frames on the same links
//!   are not in the way: the bound is exact for a job whose transfers never meet.
//! * **the busiest link**: every byte a link carries (frames and ACKs, on the wire) at its line
//!   rate, with nothing else in the way.
//!
//! The path of a transfer is traced through the switches' routes as planned (longest prefix),
//! each ECMP group's member chosen by the switch's own flow hash of the QP's 5-tuple (the same
//! function the XDP program runs, [`dataplane_common::flow_hash`]), so that flows that
//! share an uplink in the emulation share it here. (Flowlet switching and packet spraying move
//! a flow between members as it runs; the bound keeps it on its hash's member.) A fabric whose
//! routes come from BGP has none planned: no expectation then.
//!
//! Pure: plan and job specs in, nanoseconds (emulated) out.
use std::collections::{BinaryHeap, HashMap};
use std::net::IpAddr;

use rocefab_contracts::config::SwitchConfig;
use rocefab_contracts::job::Job;
use rocefab_wire::roce::udp_src_port_for_qp;

/// Bytes a RoCEv2 packet takes on the wire besides its payload (IPv4): Ethernet 14, IPv4 20,
/// UDP 8, BTH 12, ICRC 4, FCS 4, preamble and SFD 8, inter-frame gap 12.
const WIRE_OVERHEAD: u64 = 14 + 20 + 8 + 12 + 4 + 4 + 8 + 12;
/// The RETH of a WRITE First or Only packet.
const RETH: u64 = 16;
/// An ACK on the wire: the overhead above and an AETH (4), 86 bytes.
const ACK_WIRE: u64 = WIRE_OVERHEAD + 4;
/// Bytes a UET packet takes on the wire besides its payload (IPv4): Ethernet 14, IPv4 20, UDP 8,
/// PDS RUD request 12, SES standard request 44, FCS 4, preamble and SFD 8, inter-frame gap 12
/// (`rocefab_wire::uet`; no ICRC, no RETH).
const UET_WIRE_OVERHEAD: u64 = 14 + 20 + 8 + 12 + 44 + 4 + 8 + 12;
/// IPv6's header is 20 bytes longer than IPv4's.
const IPV6_EXTRA: u64 = 20;
/// The longest path traced (switches crossed).
const MAX_HOPS: usize = 16;

/// One link of a path, in the direction of travel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Link {
    /// Emulated line rate, bit/s.
    pub rate_bps: u64,
    /// Emulated delay, ns; 0: the peer has a frame at its first bit.
    pub delay_ns: u64,
    /// Which link (for the busiest-link bound).
    pub id: LinkId,
}

/// A link by its sending end.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum LinkId {
    /// A switch port: (switch index, port index). (First: of links equally busy, a switch port
    /// is named.)
    Port(usize, usize),
    /// A host's NIC: (host index, NIC index).
    Nic(usize, usize),
}

/// What the model expects of a job, emulated ns.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Expectation {
    /// The larger bound: the JCT if the machine kept up and no two transfers met.
    pub completion_ns: u64,
    /// The critical path through the job's dependencies.
    pub critical_path_ns: u64,
    /// The busiest link's bytes at its line rate, and which link that is (`switch:port (to peer)`
    /// or `host:nic`).
    pub busiest_link_ns: u64,
    pub busiest_link: String,
}

/// The time `wire_bytes` take at `rate_bps`, ns (in u128: a link's bytes times 8e9 passes u64
/// beyond 2.3 GB, e.g. a 512 MiB incast into one NIC).
fn ser_ns(wire_bytes: u64, rate_bps: u64) -> u64 {
    let ns = (u128::from(wire_bytes) * 8 * 1_000_000_000).div_ceil(u128::from(rate_bps.max(1)));
    u64::try_from(ns).unwrap_or(u64::MAX)
}

fn prefix_matches(prefix: IpAddr, len: u8, dst: IpAddr) -> bool {
    match (prefix, dst) {
        (IpAddr::V4(p), IpAddr::V4(d)) => {
            let mask = if len == 0 { 0 } else { u32::MAX << (32 - u32::from(len.min(32))) };
            u32::from(p) & mask == u32::from(d) & mask
        }
        (IpAddr::V6(p), IpAddr::V6(d)) => {
            let mask = if len == 0 { 0 } else { u128::MAX << (128 - u32::from(len.min(128))) };
            u128::from(p) & mask == u128::from(d) & mask
        }
        _ => false,
    }
}

/// The links from host NIC `from` (`host:nic`, as a switch port names its peer; host and NIC
/// index `nic`) to the host that owns the flow's destination: the NIC's link, then every switch
/// egress on the way. `None` when a switch has no route (BGP fabrics) or the path does not end
/// at a host within [`MAX_HOPS`].
pub fn trace(switches: &[SwitchConfig], nic: (usize, usize), from: &str, flow: Flow) -> Option<Vec<Link>> {
    Fabric::new(switches).trace(nic, from, flow)
}

/// The switches, indexed by name and by what their ports face.
struct Fabric<'a> {
    switches: &'a [SwitchConfig],
    by_name: HashMap<&'a str, usize>,
    /// `host:nic` (or `switch:port`) → the switch port facing it.
    by_peer: HashMap<&'a str, (usize, usize)>,
}

impl<'a> Fabric<'a> {
    fn new(switches: &'a [SwitchConfig]) -> Fabric<'a> {
        let by_name = switches.iter().enumerate().map(|(i, s)| (s.name.as_str(), i)).collect();
        let by_peer = switches
            .iter()
            .enumerate()
            .flat_map(|(i, s)| s.ports.iter().enumerate().map(move |(p, c)| (c.peer.as_str(), (i, p))))
            .collect();
        Fabric { switches, by_name, by_peer }
    }

    /// [`trace`] on the indexed switches.
    fn trace(&self, nic: (usize, usize), from: &str, flow: Flow) -> Option<Vec<Link>> {
        let (mut sw, port) = *self.by_peer.get(from)?;
        let first = &self.switches[sw].ports[port];
        let mut path =
            vec![Link { rate_bps: first.line_rate_bps, delay_ns: first.rx_delay_ns, id: LinkId::Nic(nic.0, nic.1) }];
        for _ in 0..MAX_HOPS {
            let s = &self.switches[sw];
            let route = s.routes.iter().filter(|r| prefix_matches(r.prefix, r.len, flow.dst)).max_by_key(|r| r.len)?;
            let group = s.groups.get(route.group? as usize)?;
            let member = dataplane_common::ecmp_index(flow.hash(s.hash_seed), group.len() as u32) as usize;
            let hop = s.nexthops.get(*group.get(member)? as usize)?;
            let out = hop.port as usize;
            let p = s.ports.get(out)?;
            path.push(Link { rate_bps: p.line_rate_bps, delay_ns: p.tx_delay_ns, id: LinkId::Port(sw, out) });
            let (peer, _) = p.peer.split_once(':')?;
            match self.by_name.get(peer) {
                Some(&next) => sw = next,
                None => return Some(path),
            }
        }
        None
    }
}

/// A flow as a switch hashes it for ECMP: its addresses, IP protocol and ports (RoCEv2: UDP to
/// 4791; UET over UDP: to 4793, the entropy in the source port; UET over IP protocol 253: the
/// entropy header's entropy in the source port's place and 0, as the XDP program reads it).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Flow {
    pub src: IpAddr,
    pub dst: IpAddr,
    pub proto: u8,
    pub sport: u16,
    pub dport: u16,
}

impl Flow {
    /// A RoCEv2 flow from UDP source port `sport`.
    pub fn roce(src: IpAddr, dst: IpAddr, sport: u16) -> Flow {
        Flow { src, dst, proto: 17, sport, dport: ROCE_PORT }
    }

    /// A UET flow of NIC settings `u` carrying `entropy`.
    pub fn uet(u: &rocefab_contracts::job::UetSpec, src: IpAddr, dst: IpAddr, entropy: u16) -> Flow {
        match u.ip_protocol {
            Some(proto) => Flow { src, dst, proto, sport: entropy, dport: 0 },
            None => Flow { src, dst, proto: 17, sport: entropy, dport: u.udp_port },
        }
    }

    /// The XDP program's flow hash of this flow on a switch seeded `seed`
    /// ([`dataplane_common::flow_hash`]).
    fn hash(&self, seed: u32) -> u32 {
        let words = |a: IpAddr| match a {
            IpAddr::V4(v) => [u32::from(v), 0, 0, 0],
            IpAddr::V6(v) => {
                let o = v.octets();
                std::array::from_fn(|i| u32::from_be_bytes([o[4 * i], o[4 * i + 1], o[4 * i + 2], o[4 * i + 3]]))
            }
        };
        dataplane_common::flow_hash(words(self.src), words(self.dst), self.proto, self.sport, self.dport, seed)
    }
}

/// RoCEv2's UDP destination port.
const ROCE_PORT: u16 = 4791;

/// A sprayed UET PDC's entropies: 256 values from 0xC000, each as likely (`gpu_host`'s engine).
/// The model traces all of them, so each ECMP member's share is the hash's; beyond
/// [`SPRAY_EXACT_QPS`] sprayed QPs, every 16th (a 512-rank all-to-all has 261,632).
const SPRAY_BASE: u16 = 0xc000;
const SPRAY_PATHS: u16 = 256;
const SPRAY_EXACT_QPS: usize = 4096;

/// When each frame (`wire` bytes, leaving the NIC at `departs`) is at the far end of `path`.
fn cross(path: &[Link], wire: &[u64], departs: &mut [u64]) {
    for (j, l) in path.iter().enumerate() {
        let mut free = 0u64;
        for (i, t) in departs.iter_mut().enumerate() {
            let ser = ser_ns(wire[i], l.rate_bps);
            // The NIC's own link: its departures are the NIC's schedule already.
            let start = if j == 0 { *t } else { (*t).max(free) };
            free = start + ser;
            *t = if l.delay_ns > 0 { start + ser + l.delay_ns } else { start };
        }
    }
}

/// The wire bytes of a WRITE of `len` bytes at path MTU `mtu`: one entry per packet (UET: its
/// packets carry the SES header instead of BTH, RETH and ICRC).
fn write_frames(len: u64, mtu: u64, ipv6: bool, uet: bool) -> Vec<u64> {
    let extra = if ipv6 { IPV6_EXTRA } else { 0 };
    let n = len.div_ceil(mtu).max(1);
    (0..n)
        .map(|i| {
            let payload = if i + 1 == n { len - mtu * (n - 1) } else { mtu };
            if uet {
                payload + UET_WIRE_OVERHEAD + extra
            } else {
                payload + WIRE_OVERHEAD + extra + if i == 0 { RETH } else { 0 }
            }
        })
        .collect()
}

/// A transfer as the model sees it.
struct Xfer {
    deps: Vec<usize>,
    /// Sending host and NIC (job index, NIC index), and the path.
    nic: (usize, usize),
    path: usize,
    /// The paths its bytes load: its one path, or those a sprayed UET PDC's entropies hash to
    /// (all of them, or a sample: [`SPRAY_EXACT_QPS`]; a member's share follows the hash).
    spread: Vec<usize>,
    wire: Vec<u64>,
    /// Whether it follows an arrival (its NIC sends that arrival's ACK first).
    after_arrival: bool,
}

/// The expectation for the jobs the hosts were given (`jobs[i]` is host `hosts[i]`), on a fabric
/// whose switches are `switches`. `None` when a transfer's path cannot be traced, or the jobs
/// hold no collective.
pub fn expect(switches: &[SwitchConfig], hosts: &[String], jobs: &[Job]) -> Option<Expectation> {
    let fabric = Fabric::new(switches);
    let mut paths: Vec<Vec<Link>> = Vec::new();
    let mut path_of: HashMap<Flow, usize> = HashMap::new();
    let mut xfers: HashMap<usize, Xfer> = HashMap::new();
    let mut locals: HashMap<usize, (Vec<usize>, u64)> = HashMap::new();
    let mut recv_ids = std::collections::HashSet::new();
    // Every NIC by address: (host, NIC index, `host:nic`), for the ACKs' paths back.
    let mut nic_at: HashMap<IpAddr, (usize, usize, String)> = HashMap::new();
    for (h, j) in jobs.iter().enumerate() {
        if let Some(c) = &j.collective {
            recv_ids.extend(c.recvs.iter().map(|r| r.id));
        }
        for (i, n) in j.nics.iter().enumerate() {
            nic_at.insert(n.ip, (h, i, format!("{}:{}", hosts.get(h)?, n.name)));
        }
    }
    let mut ack_flows: Vec<Flow> = Vec::new();
    let sprayed_qps: usize = jobs
        .iter()
        .map(|j| {
            j.qps
                .iter()
                .filter(|q| q.send.is_some() && j.nics.get(q.nic).and_then(|n| n.uet).is_some_and(|u| u.spray))
                .count()
        })
        .sum();
    let step = if sprayed_qps <= SPRAY_EXACT_QPS { 1 } else { 16 };
    for (h, j) in jobs.iter().enumerate() {
        let c = j.collective.as_ref()?;
        for l in &c.locals {
            // NVLink copies and compute gaps: their time is the job's, not the fabric's.
            let nv = match (&j.nvlink, l.dst_rank) {
                (Some(n), Some(_)) => n.latency_ns + ser_ns(l.len, n.bandwidth_bps),
                _ => 0,
            };
            locals.insert(l.id, (l.deps.clone(), nv + l.hold_ns));
        }
        for s in &c.sends {
            let qp = j.qps.iter().find(|q| q.qpn == s.qpn)?;
            let nic = j.nics.get(qp.nic)?;
            let sport = udp_src_port_for_qp(qp.qpn, qp.peer_qpn);
            let flows: Vec<Flow> = match &nic.uet {
                None => vec![Flow::roce(nic.ip, qp.peer_ip, sport)],
                Some(u) if u.spray && !u.ordered => {
                    (0..SPRAY_PATHS).step_by(step).map(|k| Flow::uet(u, nic.ip, qp.peer_ip, SPRAY_BASE + k)).collect()
                }
                Some(u) => vec![Flow::uet(u, nic.ip, qp.peer_ip, sport)],
            };
            let mut spread = Vec::with_capacity(flows.len());
            for flow in flows {
                let p = match path_of.get(&flow) {
                    Some(&p) => p,
                    None => {
                        let p = fabric.trace((h, qp.nic), &format!("{}:{}", hosts.get(h)?, nic.name), flow)?;
                        paths.push(p);
                        path_of.insert(flow, paths.len() - 1);
                        paths.len() - 1
                    }
                };
                spread.push(p);
            }
            let path = spread[0];
            // Its ACKs come back from the responder QP (a UET PDC's on the QP's one entropy).
            let back_sport = udp_src_port_for_qp(qp.peer_qpn, qp.qpn);
            ack_flows.push(match &nic.uet {
                Some(u) => Flow::uet(u, qp.peer_ip, nic.ip, back_sport),
                None => Flow::roce(qp.peer_ip, nic.ip, back_sport),
            });
            let mtu = u64::from(nic.path_mtu.unwrap_or(1024));
            xfers.insert(
                s.id,
                Xfer {
                    deps: s.deps.clone(),
                    nic: (h, qp.nic),
                    path,
                    spread,
                    wire: write_frames(s.len, mtu, qp.peer_ip.is_ipv6(), nic.uet.is_some()),
                    after_arrival: s.deps.iter().any(|d| recv_ids.contains(d)),
                },
            );
        }
    }
    if xfers.is_empty() {
        return None;
    }
    // Busiest link: every frame, and the ACK each transfer draws back on the path from its
    // receiver to its sender.
    let mut load: HashMap<LinkId, (u64, u64)> = HashMap::new();
    for x in xfers.values() {
        let bytes: u64 = x.wire.iter().sum();
        let k = x.spread.len() as u64;
        for (i, &p) in x.spread.iter().enumerate() {
            // An equal share per sampled entropy (the remainder on the first).
            let share = bytes / k + if i == 0 { bytes % k } else { 0 };
            for l in &paths[p] {
                load.entry(l.id).or_insert((0, l.rate_bps)).0 += share;
            }
        }
    }
    let mut ack_paths: HashMap<Flow, Option<Vec<Link>>> = HashMap::new();
    for f in ack_flows {
        let back = ack_paths.entry(f).or_insert_with(|| {
            let (h, i, name) = nic_at.get(&f.src)?;
            fabric.trace((*h, *i), name, f)
        });
        for l in back.as_ref()? {
            load.entry(l.id).or_insert((0, l.rate_bps)).0 += ACK_WIRE + if f.src.is_ipv6() { IPV6_EXTRA } else { 0 };
        }
    }
    let (busiest, busiest_ns) = load
        .iter()
        .map(|(&id, &(b, r))| (id, ser_ns(b, r)))
        .max_by_key(|&(id, t)| (t, std::cmp::Reverse(id)))
        .unwrap_or((LinkId::Nic(0, 0), 0));
    let busiest_link = match busiest {
        LinkId::Nic(h, n) => format!("{}:{}", hosts[h], jobs[h].nics.get(n).map_or("?", |n| n.name.as_str())),
        LinkId::Port(sw, p) => {
            let p = &switches[sw].ports[p];
            format!("{}:{} (to {})", switches[sw].name, p.name, p.peer)
        }
    };

    // Critical path: transfers in the order they become ready; each NIC sends in that order.
    let mut done: HashMap<usize, u64> = HashMap::new();
    let mut nic_free: HashMap<(usize, usize), u64> = HashMap::new();
    let mut waiting: HashMap<usize, usize> = HashMap::new(); // id -> deps not done
    let mut dependents: HashMap<usize, Vec<usize>> = HashMap::new();
    let mut ready: BinaryHeap<std::cmp::Reverse<(u64, usize)>> = BinaryHeap::new();
    let all_deps =
        |id: &usize| -> Option<&Vec<usize>> { xfers.get(id).map(|x| &x.deps).or(locals.get(id).map(|l| &l.0)) };
    for id in xfers.keys().chain(locals.keys()) {
        let deps = all_deps(id)?;
        let n = deps.iter().filter(|d| xfers.contains_key(d) || locals.contains_key(d)).count();
        for d in deps {
            dependents.entry(*d).or_default().push(*id);
        }
        if n == 0 {
            ready.push(std::cmp::Reverse((0, *id)));
        } else {
            waiting.insert(*id, n);
        }
    }
    let mut end = 0u64;
    let mut scratch: Vec<u64> = Vec::new();
    while let Some(std::cmp::Reverse((at, id))) = ready.pop() {
        let finished = if let Some(x) = xfers.get(&id) {
            let path = &paths[x.path];
            let nic_rate = path[0].rate_bps;
            let free = nic_free.entry(x.nic).or_insert(0);
            let mut t = at.max(*free);
            if x.after_arrival {
                t += ser_ns(ACK_WIRE, nic_rate);
            }
            scratch.clear();
            for &w in &x.wire {
                scratch.push(t);
                t += ser_ns(w, nic_rate);
            }
            *free = t;
            cross(path, &x.wire, &mut scratch);
            let arrived = *scratch.last().unwrap_or(&t);
            // Its ACK back to the sender: one ACK's serialisation and the path's delays.
            let back = ser_ns(ACK_WIRE, nic_rate)
                + path
                    .iter()
                    .map(|l| l.delay_ns + if l.delay_ns > 0 { ser_ns(ACK_WIRE, l.rate_bps) } else { 0 })
                    .sum::<u64>();
            end = end.max(arrived + back);
            arrived
        } else {
            let t = at + locals.get(&id).map_or(0, |l| l.1);
            end = end.max(t);
            t
        };
        done.insert(id, finished);
        for d in dependents.get(&id).into_iter().flatten() {
            if let Some(n) = waiting.get_mut(d) {
                *n -= 1;
                if *n == 0 {
                    waiting.remove(d);
                    let deps = all_deps(d)?;
                    let at = deps.iter().filter_map(|x| done.get(x)).copied().max().unwrap_or(0);
                    ready.push(std::cmp::Reverse((at, *d)));
                }
            }
        }
    }
    if !waiting.is_empty() {
        return None; // a dependency cycle, or on a transfer nobody sends
    }
    Some(Expectation {
        completion_ns: end.max(busiest_ns),
        critical_path_ns: end,
        busiest_link_ns: busiest_ns,
        busiest_link,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A busiest link of several GB (a 512 MiB incast of 7 senders into one NIC) neither
    /// overflows nor wraps.
    #[test]
    fn serialisation_of_gigabytes_does_not_overflow() {
        assert_eq!(ser_ns(7 * (512 << 20), 1_000_000_000), 30_064_771_072);
        assert_eq!(ser_ns(1500, 400_000_000_000), 30);
        assert_eq!(ser_ns(u64::MAX, 1), u64::MAX);
    }
    use gpu_host::nic::collective_job::{build, BuildOptions, Kind};

    /// The plan's switch configurations, host names and a 1 MiB ring AllReduce's jobs on
    /// topology `file` (in `topologies/`), `edit`ed first.
    fn allreduce(
        file: &str,
        edit: impl Fn(&mut crate::topology::Topology),
    ) -> (Vec<SwitchConfig>, Vec<String>, Vec<Job>) {
        allreduce_with(file, edit, &BuildOptions::default())
    }

    fn allreduce_with(
        file: &str,
        edit: impl Fn(&mut crate::topology::Topology),
        opts: &BuildOptions,
    ) -> (Vec<SwitchConfig>, Vec<String>, Vec<Job>) {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../topologies").join(file);
        let mut topo = crate::topology::Topology::load(&path).unwrap();
        edit(&mut topo);
        let plan = crate::plan::compile(&topo, 0);
        let hosts = crate::job::hosts::host_descs(&topo, &plan, |h| vec![Default::default(); h.nics.len()]).unwrap();
        let built = build(Kind::AllReduce, &hosts, 1 << 20, opts).unwrap();
        let switches = plan.switches.iter().map(|s| s.config.clone()).collect();
        (switches, hosts.iter().map(|h| h.name.clone()).collect(), built.jobs)
    }

    /// multi-pod-512gpu as written (no delay: a frame is at the next hop at its first bit). Every
    /// NIC sends back to back at 1 Gbit/s: step 0 its WRITE First and Last (1122 + 1106 B on
    /// the wire, 17.824 us), each of the 1021 others the ACK of the arrival before them too
    /// (86 B: 18.512 us); an arrival is there when its Last starts (8.848 us before the NIC is
    /// done with it), and the job ends with the last arrival's ACK back (0.688 us):
    /// 17824 + 1021 × 18512 − 8848 + 688 ns. (`sim/htsim/ring_chain_model.py`'s first-bit line,
    /// 9.877 ms, leaves out that a NIC sends one frame at a time.)
    #[test]
    fn the_512_rank_allreduce_as_written_is_its_nics_sending_back_to_back() {
        let (switches, hosts, jobs) = allreduce("multi-pod-512gpu.yaml", |_| {});
        let e = expect(&switches, &hosts, &jobs).unwrap();
        assert_eq!(e.critical_path_ns, 17_824 + 1021 * 18_512 - 8_848 + 688, "{e:?}");
        // The busiest links are the NICs': 1022 steps' frames out and 1022 ACKs, 18.512 us a
        // step. The last ACK leaves after the NIC's own last Last: the bound the JCT takes.
        assert_eq!(e.busiest_link_ns, 1022 * 18_512, "{e:?}");
        assert_eq!(e.completion_ns, e.busiest_link_ns);
    }

    /// Store and forward on delayed ports: a frame is at the next hop its serialisation and
    /// the delay after it started, and an egress starts it once it is all there and the
    /// previous frame has left.
    /// On rail-spine every edge of the rank-order ring crosses the rails, four a rail over two
    /// 1 Gbit/s uplinks. One entropy per PDC hashes three of rail1's onto one spine (49.3 ms of
    /// bytes); a sprayed PDC's 256 entropies split each transfer over both, so the busiest uplink
    /// carries about half of its rail's 4 x 1792 packets of 1146 bytes: within the 256-value
    /// hash's unevenness (3.2 % here) of the even split, and never less.
    #[test]
    fn a_sprayed_uet_transfer_loads_every_ecmp_member() {
        use gpu_host::nic::collective_job::UetOptions;
        let uet = |spray| BuildOptions {
            uet: Some(UetOptions { spray, trim_dscp: None, dscp: 26, priority: 0, ip_protocol: None, ordered: false }),
            ..Default::default()
        };
        let (sw, hosts, jobs) = allreduce_with("rail-spine.yaml", |_| {}, &uet(true));
        let sprayed = expect(&sw, &hosts, &jobs).unwrap();
        let (sw, hosts, jobs) = allreduce_with("rail-spine.yaml", |_| {}, &uet(false));
        let one_path = expect(&sw, &hosts, &jobs).unwrap();
        let even = ser_ns(4 * 1792 * 1146 / 2, 1_000_000_000);
        assert!(sprayed.busiest_link.contains("(to spine"), "{sprayed:?}");
        assert!(
            sprayed.busiest_link_ns >= even && sprayed.busiest_link_ns * 100 <= even * 105,
            "{sprayed:?}: even split {even} ns"
        );
        assert!(one_path.busiest_link_ns * 10 >= even * 14, "one entropy per PDC collides: {one_path:?}");
    }

    #[test]
    fn uet_packets_carry_the_ses_header_instead_of_bth_reth_and_icrc() {
        // 14 + 20 + 8 + 12 (PDS) + 44 (SES) + 4 + 8 + 12 = 122 bytes besides the payload.
        assert_eq!(write_frames(2500, 1024, false, true), vec![1146, 1146, 574]);
        assert_eq!(write_frames(2500, 1024, true, true), vec![1166, 1166, 594]);
        // RoCEv2: 82 bytes, and the RETH (16) on the first packet.
        assert_eq!(write_frames(2500, 1024, false, false), vec![1122, 1106, 534]);
    }

    #[test]
    fn frames_cross_delayed_ports_store_and_forward_and_undelayed_ones_at_their_first_bit() {
        let l = |delay_ns| Link { rate_bps: 1_000_000_000, delay_ns, id: LinkId::Port(0, 0) };
        let wire = [1122, 1106];
        let mut t = [0, 8_976];
        cross(&[l(0), l(1_000), l(1_000)], &wire, &mut t);
        // Hop 1: 0 + 8976 + 1000; 8976 + 8848 + 1000. Hop 2: 9976 + 8976 + 1000; the second
        // waits for the first to leave (18952), + 8848 + 1000.
        assert_eq!(t, [19_952, 28_800]);
        let mut t = [0, 8_976];
        cross(&[l(0), l(0), l(0)], &wire, &mut t);
        assert_eq!(t, [0, 8_976]);
    }

    #[test]
    fn a_path_is_traced_through_the_planned_routes_to_the_host() {
        let (switches, _, jobs) = allreduce("multi-pod-512gpu.yaml", |_| {});
        // host8 gpu7 (rank 63, pod 1) -> host9 gpu0 (rank 64, pod 2): rail, spine, super-spine,
        // spine, rail: the NIC's link and five switch egresses.
        let qp = jobs[7].qps.iter().find(|q| q.label == "rank 63 -> rank 64").unwrap();
        let src = jobs[7].nics[qp.nic].ip;
        let flow = Flow::roce(src, qp.peer_ip, udp_src_port_for_qp(qp.qpn, qp.peer_qpn));
        let p = trace(&switches, (7, qp.nic), "host8:gpu7", flow).unwrap();
        let rates: Vec<u64> = p.iter().map(|l| l.rate_bps / 1_000_000_000).collect();
        assert_eq!(rates, [1, 8, 8, 8, 8, 1]);
        assert!(p.iter().all(|l| l.delay_ns == 0));
    }
}
