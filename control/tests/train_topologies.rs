//! `rocefab train` builds on every shipped topology (host models, rail designs, NVLink, PXN,
//! dual-port NICs), with both broadcasts and both ring orders where the world is small enough to
//! build quickly, and every topology has room for the frontend network.
use std::path::Path;

use control::plan::compile;
use control::topology::Topology;
use gpu_host::collective::RankLayout;
use gpu_host::nic::collective_job::{build_training, BuildOptions};
use gpu_host::training::{BroadcastAlgo, RingOrder, TrainingSpec};

#[test]
fn a_training_job_builds_on_every_shipped_topology() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../topologies");
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.ends_with(".yaml"))
        .collect();
    names.sort();
    assert!(names.len() >= 10, "{names:?}");
    for name in &names {
        let topo = Topology::load(&dir.join(name)).unwrap();
        let plan = compile(&topo, 9400);
        let configured = topo.lldp.nic.classes();
        let hosts = control::run::host_descs(&topo, &plan, |h| vec![configured; h.nics.len()]).unwrap();
        let nodes: Vec<String> =
            plan.hosts.iter().map(|h| h.name.clone()).chain(plan.switches.iter().map(|s| s.name.clone())).collect();
        let backend: Vec<std::net::IpAddr> = hosts.iter().flat_map(|h| h.nics.iter().map(|n| n.ip)).collect();
        control::frontend::check(&topo.fabric, &nodes, &backend).unwrap_or_else(|e| panic!("{name}: {e}"));
        let layout = RankLayout::new(hosts.len() as u32, topo.gpus_per_host).unwrap();
        let small = layout.world_size() <= 64;
        let variants: &[(BroadcastAlgo, RingOrder)] = if small {
            &[(BroadcastAlgo::Tree, RingOrder::Ranks), (BroadcastAlgo::Chain, RingOrder::RailAligned)]
        } else {
            &[(BroadcastAlgo::Tree, RingOrder::Ranks)]
        };
        for &(broadcast, rings) in variants {
            let spec = TrainingSpec {
                layout,
                params: 8192,
                iterations: if small { 2 } else { 1 },
                bucket: if small { 2048 } else { 8192 },
                compute_ns: 1_000_000,
                broadcast,
                rings,
            };
            let (built, tr) = build_training(&spec, &hosts, &BuildOptions::default())
                .unwrap_or_else(|e| panic!("{name} {broadcast:?} {rings:?}: {e}"));
            assert_eq!(built.jobs.len(), hosts.len());
            let marked: usize = built
                .jobs
                .iter()
                .map(|j| j.collective.as_ref().unwrap().locals.iter().filter(|l| l.milestone).count())
                .sum();
            assert_eq!(marked, tr.milestones.len(), "{name}: every milestone marked once");
        }
    }
}
