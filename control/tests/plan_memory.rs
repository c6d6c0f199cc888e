//! `rocefab plan` prints what every daemon will pin, computed by the function the daemons size
//! themselves with, and `rocefab up` refuses a fabric that does not fit the memory available.
use std::path::Path;

use control::cmd::plan::render_plan;
use control::memory::{check_fits, Available, FabricMemory};
use control::plan::compile;
use control::topology::Topology;
use rocefab_contracts::memory::{human_bytes, switch_memory};

fn load(name: &str) -> Topology {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../topologies").join(name);
    Topology::load(&path).unwrap()
}

#[test]
fn plan_prints_each_switchs_memory_from_the_daemons_function() {
    let t = load("pod-64gpu.yaml");
    let p = compile(&t, 9400);
    let out = render_plan(&t, &p);
    let f = FabricMemory::of(&p, t.time_dilation, t.lldp.nic_agents(), false);
    assert_eq!(f.switches.len(), 6);
    for (s, (name, m)) in p.switches.iter().zip(&f.switches) {
        assert_eq!(&s.name, name);
        // The very function `rocefab-switchd` calls (DataPlaneConfig::from_switch).
        assert_eq!(*m, switch_memory(&s.config, p.mtu));
        let line = format!("memory {} pinned: {} UMEM chunks of 2048 B", human_bytes(m.umem_bytes()), m.umem_chunks);
        assert!(out.contains(&line), "{line} not in the plan:\n{out}");
    }
    // A rail switch: 18 ports at 1 and 8 Gbit/s in real time keep 2048/1024-entry rings, in
    // 2 KiB chunks (MTU 1500); the 16 MiB buffer at the frame mix, not at one chunk a cell.
    let rail = &f.switches[0].1;
    assert_eq!((rail.ports, rail.chunk_bytes, rail.rx_ring, rail.tx_ring), (18, 2048, 2048, 1024));
    assert!(rail.umem_bytes() < 250 << 20, "{}", rail.umem_bytes());
    // It pinned 616 MiB before (18 × 5120 ring frames + 65 536 buffer frames + 576, × 4 KiB).
    assert!(rail.umem_bytes() * 2 < (18 * 5120 + 65_536 + 576) * 4096);
    assert!(out.contains("memory of the fabric: 6 switch daemons"), "{out}");
    assert!(out.contains(&format!("= {} at up", human_bytes(f.up_bytes()))), "{out}");
    assert!(out.contains("memory per host during a job (rocefab-hostd, every host): 8 NIC UMEMs of 4.0 MiB"), "{out}");
}

#[test]
fn a_dilated_fabric_pins_rings_of_its_wall_clock_rate() {
    let mut t = load("pod-64gpu.yaml");
    t.time_dilation = rocefab_contracts::time::Dilation::new(1000.0).unwrap();
    let p = compile(&t, 9400);
    let f = FabricMemory::of(&p, t.time_dilation, true, false);
    // 8 Gbit/s at D 1000 is 8 Mbit/s of wall clock: the smallest rings.
    assert!(f.switches.iter().all(|(_, m)| (m.rx_ring, m.tx_ring) == (256, 256)));
    // NICs keep 1024-entry rings in 2 KiB chunks (contracts::memory::nic_memory says why).
    assert!(f.hosts.iter().flat_map(|h| &h.1).all(|n| n.umem_bytes() == 2048 * 2048));
    let real = FabricMemory::of(&compile(&load("pod-64gpu.yaml"), 9400), t.time_dilation, true, false);
    assert!(f.up_bytes() < real.up_bytes());
}

#[test]
fn up_refuses_a_fabric_the_machine_cannot_hold() {
    let t = load("pod-64gpu.yaml");
    let p = compile(&t, 9400);
    let f = FabricMemory::of(&p, t.time_dilation, true, false);
    let largest = f.switches.iter().map(|(_, m)| m.umem_bytes()).max().unwrap();
    let plenty = Available { mem_available: 24 << 30, memlock: None };
    assert_eq!(check_fits("pod", f.need_bytes(), largest, plenty), Ok(()));
    let tight = Available { mem_available: f.need_bytes() - 1, memlock: None };
    let e = check_fits("pod", f.need_bytes(), largest, tight).unwrap_err();
    assert!(!e.contains('\n'), "{e}");
    assert!(e.contains(&format!("fabric pod needs {} of memory", human_bytes(f.need_bytes()))), "{e}");
    assert!(e.contains("is available (MemAvailable in /proc/meminfo)"), "{e}");
}

#[test]
fn a_bgp_fabric_counts_frr_on_every_switch() {
    let mut t = load("pod-64gpu.yaml");
    let p = compile(&t, 9400);
    let plain = FabricMemory::of(&p, t.time_dilation, true, false);
    let bgp = FabricMemory::of(&p, t.time_dilation, true, true);
    assert_eq!(bgp.up_bytes() - plain.up_bytes(), 6 * control::memory::FRR_BYTES_PER_SWITCH);
    t.routing = control::topology::Routing::Bgp;
    let out = render_plan(&t, &p);
    assert!(out.contains("+ FRR on 6 switches 192.0 MiB"), "{out}");
}

/// Issue 41: the plan states what the machine loses, the kernel's share included: every switch
/// port's AF_XDP buffer pool spans its switch's whole UMEM (133 B a chunk), and `up` checks the
/// total against MemAvailable.
#[test]
fn plan_counts_the_kernels_buffer_pool_of_every_port_over_its_switchs_whole_umem() {
    use rocefab_contracts::memory::XSK_POOL_BYTES_PER_CHUNK;
    let t = load("pod-64gpu.yaml");
    let p = compile(&t, 9400);
    let f = FabricMemory::of(&p, t.time_dilation, true, false);
    let rail = &f.switches[0].1;
    assert_eq!((XSK_POOL_BYTES_PER_CHUNK, rail.xsk_pool_bytes()), (133, 18 * rail.umem_chunks * 133));
    let pools: u64 = f.switches.iter().map(|(_, m)| m.ports as u64 * m.umem_chunks * 133).sum();
    assert_eq!(f.xsk_pool_bytes(), pools);
    // Measured (docs/src/memory.md): 1058.7 MiB of pools; the maps and veths add tens of MiB.
    assert!((1000 << 20..1100 << 20).contains(&pools), "{pools}");
    assert!(f.kernel_up_bytes() > pools && f.kernel_up_bytes() < pools + (64 << 20), "{}", f.kernel_up_bytes());
    assert_eq!(f.veth_ends, 2 * p.links.len() + 2 * 8);
    assert_eq!(f.up_bytes(), f.switch_bytes() + 8 * (8 << 20) + f.kernel_up_bytes());
    let nic_pools: u64 = f.hosts.iter().flat_map(|h| &h.1).map(|n| n.umem_chunks() * 133).sum();
    assert!(f.job_bytes() > nic_pools && nic_pools == 64 * 2048 * 133, "{nic_pools}");
    let out = render_plan(&t, &p);
    let line = format!("+ the kernel {} (AF_XDP buffer pools {}", human_bytes(f.kernel_up_bytes()), human_bytes(pools));
    assert!(out.contains(&line) && out.contains("(what MemAvailable loses)"), "{line} not in\n{out}");
    // `up` refuses a machine that holds the daemons but not the kernel's share.
    let largest = f.switches.iter().map(|(_, m)| m.umem_bytes()).max().unwrap();
    let without_kernel = Available { mem_available: f.need_bytes() - f.kernel_up_bytes(), memlock: None };
    assert!(check_fits("pod", f.need_bytes(), largest, without_kernel).is_err());
}
