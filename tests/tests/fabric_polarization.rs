//! Privileged: hash polarization on a live multi-pod fabric (issue 11, test 1; book ch. 10
//! Fig. 10-5, ch. 13 Fig. 13-9 and "Hash Polarization").
//!
//! `topologies/multi-pod.yaml`: two pods of 2 rail switches and 2 spines, joined by 2
//! super-spines. Two `rocefab send` runs cross the pods (host1:gpu0 → host3:gpu0 and
//! host2:gpu1 → host4:gpu1), each with 512 flows (distinct UDP source ports, 4 packets each).
//! The first ECMP stage (the rail switches' uplinks to the spines) is even in every case; the
//! second stage is the pod-1 spines' uplinks to the super-spines, read from the spines'
//! per-port tx counters:
//!
//! - `hash_seed: shared`: every switch computes the same hash % 2, so a spine only receives
//!   flows of one parity and sends them all up one uplink; the other carries ~0.
//! - `hash_seed: per-switch`: both uplinks of every spine carry a fair share.
//! - `topologies/multi-pod-partial.yaml` (each spine cabled to a different 3 of 4
//!   super-spines, as the book prescribes) with `hash_seed: shared`: all 3 uplinks of every spine
//!   carry a fair share.
//!
//! In every case each uplink carries exactly the packets that `flow_hash` + `ecmp_index` with
//! the switches' seeds send through it (walked hop by hop over the switch configs `rocefab up`
//! wrote), and `rocefab uplinks` prints the same counters.
//!
//! Run as root, serially, after `cargo build -p control -p dataplane-user -p host-daemons`.
use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr};

use dataplane_common::{ecmp_index, flow_hash};
use rocefab_contracts::config::SwitchConfig;
use rocefab_tests::fabric::{metric, rocefab, run_dir, stderr, stdout, Fabric};

/// Flows per sender (source ports 49152..49152+FLOWS) and packets per flow.
const FLOWS: u16 = 512;
const PER_FLOW: u64 = 4;
const DPORT: u16 = 9000;
/// The senders: (from, to, source address, destination address).
const SENDERS: [(&str, &str, [u8; 4], [u8; 4]); 2] = [
    ("host1:gpu0", "host3:gpu0", [10, 0, 1, 1], [10, 0, 1, 3]),
    ("host2:gpu1", "host4:gpu1", [10, 0, 2, 2], [10, 0, 2, 4]),
];
const POD1_RAILS: [&str; 2] = ["p1rail1", "p1rail2"];
const POD1_SPINES: [&str; 2] = ["p1spine1", "p1spine2"];
/// Every switch name of the two topologies (multi-pod.yaml has ss1 and ss2 only).
const SWITCHES: [&str; 12] = [
    "p1rail1", "p1rail2", "p2rail1", "p2rail2", "p1spine1", "p1spine2", "p2spine1", "p2spine2", "ss1", "ss2", "ss3",
    "ss4",
];

/// Brings up a renamed copy of `template`, with `hash_seed: shared` replaced by `seed`.
fn up(template: &str, name: &str, seed: &str) -> Fabric {
    Fabric::up_edited(template, name, |text| {
        assert!(text.contains("\nhash_seed: shared "), "{template} changed shape");
        text.replace("\nhash_seed: shared ", &format!("\nhash_seed: {seed} "))
    })
}

/// Ports of `switch` towards the next tier up (`switch:port` → peer node).
fn uplinks(cfg: &SwitchConfig, tier_up: &str) -> Vec<(String, String)> {
    cfg.ports
        .iter()
        .filter(|p| p.peer.starts_with(tier_up))
        .map(|p| (format!("{}:{}", cfg.name, p.name), p.peer.split(':').next().unwrap().to_string()))
        .collect()
}

/// The longest-prefix route of `cfg` for `dst` → the port `flow_hash` + `ecmp_index` pick.
fn egress(cfg: &SwitchConfig, src: Ipv4Addr, dst: Ipv4Addr, sport: u16) -> usize {
    let r = cfg
        .routes
        .iter()
        .filter(|r| match r.prefix {
            IpAddr::V4(p) => {
                let mask = if r.len == 0 { 0 } else { u32::MAX << (32 - r.len) };
                u32::from(dst) & mask == u32::from(p) & mask
            }
            IpAddr::V6(_) => false,
        })
        .max_by_key(|r| r.len)
        .unwrap_or_else(|| panic!("{}: no route to {dst}", cfg.name));
    let g = &cfg.groups[r.group.unwrap_or_else(|| panic!("{}: {dst} is local", cfg.name)) as usize];
    let h = flow_hash([u32::from(src), 0, 0, 0], [u32::from(dst), 0, 0, 0], 17, sport, DPORT, cfg.hash_seed);
    cfg.nexthops[g[ecmp_index(h, g.len() as u32) as usize] as usize].port as usize
}

/// Packets every switch port (`switch:port`) should send for the senders' flows, walking each
/// flow from its rail switch to the destination GPU through the switch configs.
fn predicted(configs: &BTreeMap<String, SwitchConfig>) -> BTreeMap<String, u64> {
    let mut n = BTreeMap::new();
    for (from, to, src, dst) in SENDERS {
        let (src, dst) = (Ipv4Addr::from(src), Ipv4Addr::from(dst));
        for sport in 49152..49152 + FLOWS {
            let mut at = configs.values().find(|c| c.ports.iter().any(|p| p.peer == from)).expect("source rail switch");
            for hop in 0.. {
                assert!(hop < 8, "{from} -> {to} sport {sport} does not arrive");
                let port = &at.ports[egress(at, src, dst, sport)];
                *n.entry(format!("{}:{}", at.name, port.name)).or_insert(0) += PER_FLOW;
                if port.peer == to {
                    break;
                }
                at = &configs[port.peer.split(':').next().unwrap()];
            }
        }
    }
    n
}

/// Runs both senders and returns the tx packets every listed port sent meanwhile, once the
/// pod-1 spines' uplinks have sent everything predicted (or 10 s passed).
fn send_and_count(f: &Fabric, ports: &[String], expect_total: u64) -> BTreeMap<String, f64> {
    let read = || -> BTreeMap<String, f64> {
        let mut scrapes: BTreeMap<String, String> = BTreeMap::new();
        ports
            .iter()
            .map(|sp| {
                let (sw, port) = sp.split_once(':').unwrap();
                let text = scrapes.entry(sw.to_string()).or_insert_with(|| f.metrics(sw));
                (sp.clone(), metric(text, "rocefab_port_tx_packets_total", &[("port", port)]))
            })
            .collect()
    };
    let before = read();
    let count = (FLOWS as u64 * PER_FLOW).to_string();
    let sports = format!("49152:{}", 49152 + FLOWS - 1);
    for (from, to, ..) in SENDERS {
        let out = f.send(&[
            "--from",
            from,
            "--to",
            to,
            "--count",
            &count,
            "--sport-range",
            &sports,
            "--dport",
            "9000",
            "--rate-pps",
            "4000",
        ]);
        assert!(out.contains(&format!("sent {count} packets (0 send errors)")), "{out}");
    }
    let delta = |now: &BTreeMap<String, f64>| -> BTreeMap<String, f64> {
        now.iter().map(|(k, v)| (k.clone(), v - before[k])).collect()
    };
    let spine_up =
        |d: &BTreeMap<String, f64>| -> f64 { d.iter().filter(|(k, _)| k.starts_with("p1spine")).map(|(_, v)| v).sum() };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let d = delta(&read());
        if spine_up(&d) >= expect_total as f64 || std::time::Instant::now() >= deadline {
            return d;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}

/// Per uplink of the pod-1 rail switches (stage 1) and spines (stage 2): packets sent during the
/// run, checked against the hash prediction. Returns stage 2 grouped by spine.
fn measure(f: &Fabric) -> BTreeMap<String, Vec<(String, f64)>> {
    let configs: BTreeMap<String, SwitchConfig> = SWITCHES
        .iter()
        .filter(|s| run_dir(&f.name).join(format!("{s}.json")).exists())
        .map(|s| (s.to_string(), f.config(s)))
        .collect();
    let stage1: Vec<(String, String)> = POD1_RAILS.iter().flat_map(|r| uplinks(&configs[*r], "p1spine")).collect();
    let stage2: Vec<(String, String)> = POD1_SPINES.iter().flat_map(|s| uplinks(&configs[*s], "ss")).collect();
    let want = predicted(&configs);
    let ports: Vec<String> = stage1.iter().chain(&stage2).map(|(p, _)| p.clone()).collect();
    let total: u64 = stage2.iter().map(|(p, _)| want.get(p).copied().unwrap_or(0)).sum();
    assert_eq!(total, 2 * FLOWS as u64 * PER_FLOW, "every flow crosses one pod-1 spine uplink: {want:?}");
    let got = send_and_count(f, &ports, total);
    for p in &ports {
        // Up to a few background frames (LLDP) on top of the flows' packets.
        let (g, w) = (got[p], want.get(p).copied().unwrap_or(0) as f64);
        assert!(
            g >= w && g <= w + 12.0,
            "{p}: sent {g} packets, flow_hash predicts {w} (all: {got:?}, predicted {want:?})"
        );
    }
    // Stage 1 is even in every case: both spines of pod 1 get a fair share from each rail switch.
    for r in POD1_RAILS {
        let v: Vec<f64> = stage1.iter().filter(|(p, _)| p.starts_with(&format!("{r}:"))).map(|(p, _)| got[p]).collect();
        assert!(even_within_3_sigma(&v), "stage 1 {r}: {v:?}");
    }
    let mut by_spine: BTreeMap<String, Vec<(String, f64)>> = BTreeMap::new();
    for (p, peer) in &stage2 {
        by_spine.entry(p.split(':').next().unwrap().to_string()).or_default().push((peer.clone(), got[p]));
    }
    // `rocefab uplinks` lists every one of these uplinks.
    let o = rocefab(&["uplinks", &f.name]);
    let table = stdout(&o);
    assert!(o.status.success(), "rocefab uplinks: {}", stderr(&o));
    for (p, peer) in &stage2 {
        let (sw, port) = p.split_once(':').unwrap();
        let row = |l: &str| {
            let c: Vec<&str> = l.split_whitespace().collect();
            c.len() == 6 && c[0] == sw && c[1] == port && c[2].starts_with(&format!("{peer}:"))
        };
        assert!(table.lines().any(row), "rocefab uplinks has no row for {p} -> {peer}:\n{table}");
    }
    eprintln!("{table}");
    by_spine
}

/// Whether packet counts `v` (one per uplink of a switch, `PER_FLOW` packets per flow) are an
/// even split: a switch hashing n flows over m uplinks gives each a binomial(n, 1/m) number of
/// flows, so a share of 1/m +- 3 sigma, sigma = sqrt((1/m)(1 - 1/m)/n) (for n = 512, m = 2:
/// 0.434..0.566). Up to 12 background frames (LLDP) per uplink widen it by 12/total.
fn even_within_3_sigma(v: &[f64]) -> bool {
    let total: f64 = v.iter().sum();
    let (m, n) = (v.len() as f64, total / PER_FLOW as f64);
    let p = 1.0 / m;
    let band = 3.0 * (p * (1.0 - p) / n).sqrt() + 12.0 / total;
    v.iter().all(|&x| (x / total - p).abs() <= band)
}

fn shares(v: &[(String, f64)]) -> Vec<f64> {
    let total: f64 = v.iter().map(|(_, x)| x).sum();
    v.iter().map(|(_, x)| x / total).collect()
}

#[test]
fn shared_seed_polarizes_the_spine_uplinks() {
    let f = up("multi-pod.yaml", "rfpol1", "shared");
    for (spine, v) in measure(&f) {
        let s = shares(&v);
        assert_eq!(s.len(), 2, "{spine}: {v:?}");
        let (lo, hi) = (s.iter().cloned().fold(1.0, f64::min), s.iter().cloned().fold(0.0, f64::max));
        assert!(lo < 0.02 && hi > 0.98, "{spine}: one uplink should carry ~0 with a shared seed: {v:?}");
    }
}

#[test]
fn per_switch_seeds_spread_the_spine_uplinks_evenly() {
    let f = up("multi-pod.yaml", "rfpol2", "per-switch");
    for (spine, v) in measure(&f) {
        let s = shares(&v);
        assert_eq!(s.len(), 2, "{spine}: {v:?}");
        let n: Vec<f64> = v.iter().map(|(_, x)| *x).collect();
        assert!(even_within_3_sigma(&n), "{spine}: uplinks uneven with per-switch seeds: {v:?} ({s:?})");
    }
}

#[test]
fn partial_cabling_spreads_a_shared_seed_evenly() {
    let f = up("multi-pod-partial.yaml", "rfpol3", "shared");
    for (spine, v) in measure(&f) {
        let s = shares(&v);
        assert_eq!(s.len(), 3, "{spine}: {v:?}");
        let n: Vec<f64> = v.iter().map(|(_, x)| *x).collect();
        assert!(even_within_3_sigma(&n), "{spine}: uplinks uneven with partial cabling: {v:?} ({s:?})");
    }
}
