//! Topology files: the shipped topologies parse, and every validation error is one line naming
//! the file, the line and the field.
use std::path::{Path, PathBuf};

use control::topology::{Endpoint, HashSeed, LinkClass, Role, Topology};

fn shipped(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../topologies").join(name)
}

fn err(src: &str) -> String {
    let e = Topology::parse(src, Path::new("topologies/bad.yaml")).expect_err("must be rejected").to_string();
    assert!(!e.contains('\n'), "error is one line: {e}");
    e
}

const GOOD: &str = "\
fabric: t
hosts:
  count: 2
  gpus_per_host: 2
  nic: per-gpu
switches:
  rail:
    - name: rail1
      rails: [1]
    - name: rail2
      rails: [2]
  spine:
    - name: spine1
";

#[test]
fn rail_spine_parses() {
    let t = Topology::load(&shipped("rail-spine.yaml")).unwrap();
    assert_eq!(t.fabric, "rs");
    assert_eq!((t.hosts, t.gpus_per_host, t.mtu), (4, 2, 1500));
    assert_eq!(t.hash_seed, HashSeed::PerSwitch);
    let names: Vec<_> = t.switches.iter().map(|s| (s.name.as_str(), s.role)).collect();
    assert_eq!(names, [("rail1", Role::Rail), ("rail2", Role::Rail), ("spine1", Role::Spine), ("spine2", Role::Spine)]);
    assert_eq!(t.links.iter().filter(|l| l.class == LinkClass::HostRail).count(), 8);
    let fabric: Vec<_> =
        t.links.iter().filter(|l| l.class == LinkClass::RailSpine).map(|l| (l.a.clone(), l.b.clone())).collect();
    assert_eq!(
        fabric,
        [
            (Endpoint::Switch(0), Endpoint::Switch(2)),
            (Endpoint::Switch(0), Endpoint::Switch(3)),
            (Endpoint::Switch(1), Endpoint::Switch(2)),
            (Endpoint::Switch(1), Endpoint::Switch(3)),
        ]
    );
    assert!(t.links.iter().all(|l| l.line_rate.0 == 1_000_000_000));
    assert_eq!(t.rail_subnets[&2].to_string(), "10.0.2.0/24");
    // GPU 1 of host 3 sits on rail 2 → rail2.
    assert_eq!(t.rail_switch_for(2, 3), Some(1));
}

#[test]
fn single_rail_parses() {
    let t = Topology::load(&shipped("single-rail.yaml")).unwrap();
    assert_eq!((t.hosts, t.gpus_per_host), (3, 8));
    assert_eq!(t.switches.len(), 1);
    assert_eq!(t.switches[0].rails, (1..=8).collect::<Vec<_>>());
    assert_eq!(t.links.len(), 24);
    assert!(t.links.iter().all(|l| l.b == Endpoint::Switch(0)));
}

#[test]
fn multi_rail_spine_parses_with_override() {
    let t = Topology::load(&shipped("multi-rail-spine.yaml")).unwrap();
    assert_eq!(t.switches.len(), 4);
    let slow: Vec<_> = t.links.iter().filter(|l| l.line_rate.0 == 500_000_000).collect();
    assert_eq!(slow.len(), 1);
    assert_eq!(slow[0].a, Endpoint::Gpu { host: 2, gpu: 3 });
    assert!(t.links.iter().filter(|l| l.class == LinkClass::RailSpine).all(|l| l.line_rate.0 == 2_000_000_000));
}

#[test]
fn good_minimal_defaults() {
    let t = Topology::parse(GOOD, Path::new("x.yaml")).unwrap();
    assert_eq!(t.mtu, 1500);
    assert_eq!(t.p2p.to_string(), "10.255.0.0/16");
    assert_eq!(t.nic_name(1), "gpu1");
    assert_eq!(t.port_name(3), "eth3");
}

#[test]
fn type_error_names_file_line_field() {
    let e = err(&GOOD.replace("gpus_per_host: 2", "gpus_per_host: x"));
    assert!(e.starts_with("topologies/bad.yaml:4: hosts.gpus_per_host: "), "{e}");
    assert!(e.contains("expected an integer 1..=8"), "{e}");
    let e = err(&GOOD.replace("gpus_per_host: 2", "gpus_per_host: 9"));
    assert!(e.starts_with("topologies/bad.yaml:4: hosts.gpus_per_host: "), "{e}");
    assert!(e.contains("9"), "{e}");
}

#[test]
fn unknown_field_is_rejected() {
    let e = err(&GOOD.replace("  nic: per-gpu", "  nic: per-gpu\n  cpus: 4"));
    assert!(e.starts_with("topologies/bad.yaml:6: hosts: unknown field `cpus`"), "{e}");
}

#[test]
fn a_shared_nic_is_one_nic_per_host_on_rail_1() {
    let t = Topology::load(&shipped("shared-nic.yaml")).unwrap();
    assert_eq!((t.hosts, t.gpus_per_host, t.nics_per_host()), (4, 8, 1));
    let host_links: Vec<_> =
        t.links.iter().filter(|l| l.class == LinkClass::HostRail).map(|l| (l.a.clone(), l.b.clone())).collect();
    assert_eq!(
        host_links,
        [
            (Endpoint::Gpu { host: 1, gpu: 0 }, Endpoint::Switch(0)),
            (Endpoint::Gpu { host: 2, gpu: 0 }, Endpoint::Switch(0)),
            (Endpoint::Gpu { host: 3, gpu: 0 }, Endpoint::Switch(1)),
            (Endpoint::Gpu { host: 4, gpu: 0 }, Endpoint::Switch(1)),
        ]
    );
    assert_eq!(t.nic_name(0), "nic0");
    assert_eq!(t.rail_subnets.keys().copied().collect::<Vec<_>>(), [1]);
}

#[test]
fn a_shared_nic_has_no_second_rail() {
    let e = err(&GOOD.replace("nic: per-gpu", "nic: shared"));
    assert!(e.starts_with("topologies/bad.yaml:11: switches.rail[1].rails: "), "{e}");
    assert!(e.contains("rail 2 does not exist (hosts have one NIC: rail 1 only)"), "{e}");
}

#[test]
fn super_spine_needs_pods() {
    let e = err(&format!("{GOOD}  super-spine:\n    - name: ss1\n"));
    assert!(e.starts_with("topologies/bad.yaml:14: switches.super-spine: "), "{e}");
    assert!(e.contains("switches.pods"), "{e}");
}

#[test]
fn multi_pod_parses() {
    let t = Topology::load(&shipped("multi-pod.yaml")).unwrap();
    assert_eq!(t.hash_seed, HashSeed::Shared);
    assert_eq!(t.pods.len(), 2);
    assert_eq!((t.pods[1].hosts.first, t.pods[1].hosts.last), (3, 4));
    let roles: Vec<_> = t.switches.iter().map(|s| (s.name.as_str(), s.role, s.pod)).collect();
    assert_eq!(
        roles,
        [
            ("p1rail1", Role::Rail, Some(0)),
            ("p1rail2", Role::Rail, Some(0)),
            ("p2rail1", Role::Rail, Some(1)),
            ("p2rail2", Role::Rail, Some(1)),
            ("p1spine1", Role::Spine, Some(0)),
            ("p1spine2", Role::Spine, Some(0)),
            ("p2spine1", Role::Spine, Some(1)),
            ("p2spine2", Role::Spine, Some(1)),
            ("ss1", Role::SuperSpine, None),
            ("ss2", Role::SuperSpine, None),
        ]
    );
    // Hosts 3-4 are served by pod 2's rail switches.
    assert_eq!(t.rail_switch_for(1, 3), Some(2));
    assert_eq!(t.rail_switch_for(2, 2), Some(1));
    let class =
        |c: LinkClass| t.links.iter().filter(|l| l.class == c).map(|l| (l.a.clone(), l.b.clone())).collect::<Vec<_>>();
    assert_eq!(class(LinkClass::HostRail).len(), 8);
    // Rail switches reach only their own pod's spines.
    let sw = |i: usize| Endpoint::Switch(i);
    assert_eq!(
        class(LinkClass::RailSpine),
        [
            (sw(0), sw(4)),
            (sw(0), sw(5)),
            (sw(1), sw(4)),
            (sw(1), sw(5)),
            (sw(2), sw(6)),
            (sw(2), sw(7)),
            (sw(3), sw(6)),
            (sw(3), sw(7))
        ]
    );
    let ss = class(LinkClass::SpineSuperSpine);
    assert_eq!(ss.len(), 8);
    assert!((4..8).all(|s| ss.contains(&(sw(s), sw(8))) && ss.contains(&(sw(s), sw(9)))), "{ss:?}");
}

#[test]
fn multi_pod_partial_cabling_parses() {
    let t = Topology::load(&shipped("multi-pod-partial.yaml")).unwrap();
    let ss: Vec<(String, String)> = t
        .links
        .iter()
        .filter(|l| l.class == LinkClass::SpineSuperSpine)
        .map(|l| (t.endpoint_name(&l.a), t.endpoint_name(&l.b)))
        .collect();
    assert_eq!(ss.len(), 12);
    // Every spine reaches a different subset of three of the four super-spines.
    for (spine, subset) in [("p1spine1", ["ss1", "ss2", "ss3"]), ("p1spine2", ["ss2", "ss3", "ss4"])] {
        let got: Vec<&str> = ss.iter().filter(|(s, _)| s == spine).map(|(_, x)| x.as_str()).collect();
        assert_eq!(got, subset, "{spine}");
    }
}

/// A pod-form file with `pod2_hosts` for pod 2 and `extra` appended.
fn pods(pod2_hosts: &str, extra: &str) -> String {
    format!(
        "fabric: t
hosts: {{ count: 4, gpus_per_host: 1 }}
switches:
  pods:
    - hosts: 1-2
      rail:
        - {{ name: r1, rails: [1] }}
      spine:
        - {{ name: s1 }}
    - hosts: {pod2_hosts}
      rail:
        - {{ name: r2, rails: [1] }}
      spine:
        - {{ name: s2 }}
  super-spine:
    - {{ name: x1 }}
{extra}"
    )
}

#[test]
fn pod_errors_name_file_line_field() {
    assert!(Topology::parse(&pods("3-4", ""), Path::new("ok.yaml")).is_ok());
    let e = err(&pods("2-4", ""));
    assert_eq!(e, "topologies/bad.yaml:10: switches.pods[1].hosts: hosts 2-4 overlap pod 1's hosts");
    let e = err(&pods("3-3", ""));
    assert!(e.starts_with("topologies/bad.yaml:4: switches.pods: host4 is in no pod"), "{e}");
    let e = err(&pods("3-4", "links:\n  rail_spine:\n    - { rail: r1, spine: s2 }\n"));
    assert!(e.starts_with("topologies/bad.yaml:19: links.rail_spine[0]: r1 and s2 are in different pods"), "{e}");
    let e = err(&pods(
        "3-4",
        "links:\n  spine_super_spine:\n    - { spine: s1, super-spine: x1 }\n    - { spine: s2, super-spine: x9 }\n",
    ));
    assert_eq!(e, "topologies/bad.yaml:20: links.spine_super_spine[1].super-spine: unknown super-spine \"x9\"");
    let e = err(&pods("3-4", "").replace("{ name: r2, rails: [1] }", "{ name: r2, rails: [1], hosts: 2-4 }"));
    assert!(
        e.starts_with("topologies/bad.yaml:12: switches.pods[1].rail[0].hosts: hosts 2-4 are not all in pod 2"),
        "{e}"
    );
    let e = err(&pods("3-4", "").replace("  super-spine:\n    - { name: x1 }\n", ""));
    assert!(e.starts_with("topologies/bad.yaml:3: switches: several pods need super-spines"), "{e}");
    let e = err(&pods("3-4", "").replace("  pods:", "  rail:\n    - { name: r0, rails: [1] }\n  pods:"));
    assert!(e.starts_with("topologies/bad.yaml:6: switches.pods: "), "{e}");
    let e = err(&pods("3-4", "").replace("{ name: s2 }", "{ name: s1 }"));
    assert!(e.starts_with("topologies/bad.yaml:14: switches.pods[1].spine[0].name: duplicate switch name"), "{e}");
}

#[test]
fn duplicate_switch_name() {
    let e = err(&GOOD.replace("- name: spine1", "- name: rail2"));
    assert_eq!(e, "topologies/bad.yaml:13: switches.spine[0].name: duplicate switch name \"rail2\"");
}

#[test]
fn rail_without_switch() {
    let e = err(&GOOD.replace("gpus_per_host: 2", "gpus_per_host: 3"));
    assert_eq!(e, "topologies/bad.yaml:7: switches.rail: rail 3 has no switch (for host1)");
}

#[test]
fn rail_out_of_range() {
    let e = err(&GOOD.replace("rails: [2]", "rails: [2, 5]"));
    assert_eq!(
        e,
        "topologies/bad.yaml:11: switches.rail[1].rails: rail 5 does not exist (hosts have 2 GPUs: rails 1..=2)"
    );
}

#[test]
fn rail_served_twice() {
    let e = err(&GOOD.replace("rails: [2]", "rails: [2, 1]"));
    assert!(
        e.starts_with(
            "topologies/bad.yaml:11: switches.rail[1].rails: rail 1 of host1 is served by both rail1 and rail2"
        ),
        "{e}"
    );
}

#[test]
fn unknown_switch_in_link() {
    let src = format!(
        "{GOOD}links:\n  rail_spine:\n    - {{ rail: rail1, spine: spine1 }}\n    - {{ rail: rail2, spine: spine9 }}\n"
    );
    let e = err(&src);
    assert_eq!(e, "topologies/bad.yaml:17: links.rail_spine[1].spine: unknown spine \"spine9\"");
}

#[test]
fn duplicate_link() {
    let src = format!(
        "{GOOD}links:\n  rail_spine:\n    - {{ rail: rail1, spine: spine1 }}\n    - {{ rail: rail1, spine: spine1 }}\n"
    );
    let e = err(&src);
    assert_eq!(e, "topologies/bad.yaml:17: links.rail_spine[1]: duplicate link rail1 - spine1");
}

#[test]
fn bad_line_rate() {
    let src = format!("{GOOD}links:\n  line_rate:\n    host_rail: 1Gbs\n");
    let e = err(&src);
    assert!(e.starts_with("topologies/bad.yaml:16: links.line_rate.host_rail: line rate \"1Gbs\": expected a rate such as 400G, 1Gbps"), "{e}");
}

#[test]
fn override_without_link() {
    let src = format!("{GOOD}links:\n  overrides:\n    - {{ between: [host1:gpu0, rail2], line_rate: 10Mbps }}\n");
    let e = err(&src);
    assert_eq!(e, "topologies/bad.yaml:16: links.overrides[0].between: no link between host1:gpu0 and rail2");
}

#[test]
fn ifname_too_long() {
    let src = format!("{GOOD}naming:\n  host_nic: \"averyveryverylongnic{{gpu}}\"\n");
    let e = err(&src);
    assert_eq!(e, "topologies/bad.yaml:15: naming.host_nic: interface name \"averyveryverylongnic0\" is longer than 15 characters");
}

#[test]
fn bad_fabric_name() {
    let e = err(&GOOD.replace("fabric: t", "fabric: Rail-Spine"));
    assert!(e.starts_with("topologies/bad.yaml:1: fabric: \"Rail-Spine\""), "{e}");
}

#[test]
fn mtu_above_the_jumbo_mtu_is_rejected() {
    // Up to 3500 one UMEM chunk per frame, above it XDP multi-buffer and AF_XDP XDP_USE_SG, up
    // to the lossless class's jumbo 9216 (three chunks a frame); nothing longer.
    let e = err(&format!("mtu: 9217\n{GOOD}"));
    assert!(e.starts_with("topologies/bad.yaml:1: mtu: "), "{e}");
    assert!(e.contains("68..=9216"), "{e}");
    for mtu in [68, 3500, 9000, 9216] {
        let t = Topology::parse(&format!("mtu: {mtu}\n{GOOD}"), Path::new("t.yaml")).unwrap();
        assert_eq!(t.mtu, mtu);
    }
}

#[test]
fn overlapping_subnets() {
    let e = err(&format!("{GOOD}addressing:\n  p2p: 10.0.0.0/16\n"));
    assert_eq!(e, "topologies/bad.yaml:14: addressing: rail 1 subnet 10.0.1.0/24 overlaps p2p subnet 10.0.0.0/16");
}

#[test]
fn yaml_syntax_error_has_line() {
    let e = err("fabric: t\nhosts: [1,\n");
    assert!(e.starts_with("topologies/bad.yaml:"), "{e}");
}

#[test]
fn missing_file_names_it() {
    let e = Topology::load(Path::new("/nonexistent/x.yaml")).unwrap_err().to_string();
    assert!(e.starts_with("/nonexistent/x.yaml: "), "{e}");
}

/// The schema example in the `topology` module docs parses and means what it says.
#[test]
fn module_doc_example_parses() {
    let src = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../model/src/topology.rs")).unwrap();
    let mut yaml = String::new();
    let mut inside = false;
    for l in src.lines().filter_map(|l| l.strip_prefix("//!")) {
        let l = l.strip_prefix(' ').unwrap_or(l);
        if l.starts_with("```yaml") {
            inside = true;
        } else if inside && l.starts_with("```") {
            break;
        } else if inside {
            yaml.push_str(l);
            yaml.push('\n');
        }
    }
    assert!(yaml.contains("fabric: rs"), "{yaml}");
    let t = Topology::parse(&yaml, Path::new("doc.yaml")).unwrap();
    assert_eq!(t.rail_subnets[&2].to_string(), "192.168.2.0/24");
    assert_eq!(t.metrics_port_base, Some(9400));
    let slow: Vec<_> = t.links.iter().filter(|l| l.line_rate.0 == 100_000_000).collect();
    assert_eq!(slow.len(), 1);
    assert_eq!((slow[0].a.clone(), slow[0].b.clone()), (Endpoint::Switch(0), Endpoint::Switch(3)));
}

/// The multi-pod example in the `topology` module docs parses into two pods and a super-spine
/// tier fully meshed with the spines.
#[test]
fn module_doc_multi_pod_example_parses() {
    let src = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../model/src/topology.rs")).unwrap();
    let blocks: Vec<&str> = src.split("//! ```yaml\n").skip(1).map(|b| b.split("//! ```\n").next().unwrap()).collect();
    assert_eq!(blocks.len(), 2, "two yaml examples");
    let yaml: String = blocks[1].lines().map(|l| format!("{}\n", l.strip_prefix("//! ").unwrap_or(""))).collect();
    let t = Topology::parse(&yaml, Path::new("doc.yaml")).unwrap();
    assert_eq!(t.fabric, "mp");
    assert_eq!(t.pods.len(), 2);
    assert_eq!(t.switches.iter().filter(|s| s.role == Role::SuperSpine).count(), 2);
    assert_eq!(t.links.iter().filter(|l| l.class == LinkClass::SpineSuperSpine).count(), 8);
}

#[test]
fn qos_errors_name_file_line_field() {
    let with = |q: &str| format!("{GOOD}qos:\n{q}");
    let e = err(&with("  xoff: 1MB\n  xon: 2MB\n"));
    assert!(e.starts_with("topologies/bad.yaml:16: qos.xon: rail1: 2000000 bytes is not below xoff"), "{e}");
    let e = err(&with("  xoff: 1MB\n  wred: { max: 900KB }\n  switches:\n    spine1:\n      xon: 1MB\n"));
    assert!(e.starts_with("topologies/bad.yaml:19: qos.switches.spine1.xon: spine1: "), "{e}");
    // WRED max above xOFF breaks the rule of thumb: a warning, not an error (issue 23).
    let t = Topology::parse(&with("  xoff: 1MB\n"), Path::new("topologies/bad.yaml")).unwrap();
    assert!(
        t.qos[0].warnings[0].starts_with("qos.wred.max: rail1: 3000000 bytes is not below xoff (1000000 bytes)"),
        "{:?}",
        t.qos[0].warnings
    );
    let e = err(&with("  wred: { min: 2MB, max: 1MB }\n"));
    assert!(
        e.starts_with(
            "topologies/bad.yaml:15: qos.wred.min: rail1: 2000000 bytes: must be above 0 and at most wred.max"
        ),
        "{e}"
    );
    let e = err(&with("  headroom: 8MiB\n"));
    assert!(e.starts_with("topologies/bad.yaml:15: qos.headroom: rail1: "), "{e}");
    assert!(e.contains("not less than the 16777216-byte buffer"), "{e}");
    let e = err(&with("  watchdog: { action: reboot }\n"));
    assert!(e.starts_with("topologies/bad.yaml:15: qos.watchdog.action: unknown variant `reboot`"), "{e}");
    let e = err(&with("  pfc: [3]\n  buffer: 2GiB\n"));
    assert!(e.starts_with("topologies/bad.yaml:16: qos.buffer: "), "{e}");
}

#[test]
fn trim_errors_name_file_line_field_and_trim_reaches_the_switch_configs() {
    let with = |q: &str| format!("{GOOD}qos:\n{q}");
    let e = err(&with("  pfc: [3]\n  trim:\n    size: 32\n"));
    assert!(
        e.starts_with("topologies/bad.yaml:17: qos.trim.size: rail1: 32 bytes: a trimmed frame is 64..=1024 bytes"),
        "{e}"
    );
    let e = err(&with("  trim: { queues: [0, 3] }\n"));
    assert!(e.starts_with("topologies/bad.yaml:15: qos.trim.queues: rail1: queue 3 is lossless"), "{e}");
    let e = err(&with("  trim: { dscp: 300 }\n"));
    assert!(e.starts_with("topologies/bad.yaml:15: qos.trim.dscp: "), "{e}");
    let e = err(&with("  trim: { size: 128, quue: 6 }\n"));
    assert!(e.starts_with("topologies/bad.yaml:15: qos.trim: unknown field `quue`"), "{e}");
    let t = Topology::parse(&with("  trim: { queues: [0], queue: 6, dscp: 46 }\n"), Path::new("t.yaml")).unwrap();
    let p = control::plan::compile(&t, 9400);
    let rail1 = &p.switches[0].config;
    assert_eq!(rail1.name, "rail1");
    rail1.validate().unwrap();
    let tr = &rail1.qos.trim;
    assert_eq!((tr.queues, tr.size, tr.dscp, tr.queue), (1, 128, 46, 6));
    assert_eq!(rail1.qos.strict_priorities, 0b1100_0000, "the trim queue is strict by default");
}

#[test]
fn qos_reaches_the_switch_configs() {
    let src = format!("{GOOD}qos:\n  pfc: []\n  queue_limit: 64KiB\n  switches:\n    spine1: {{ pfc: [3], xoff: 1MB, watchdog: off, wred: {{ max: 900KB }} }}\n");
    let t = Topology::parse(&src, Path::new("t.yaml")).unwrap();
    let p = control::plan::compile(&t, 9400);
    let rail1 = &p.switches[0].config;
    let spine1 = &p.switches[2].config;
    assert_eq!((rail1.name.as_str(), spine1.name.as_str()), ("rail1", "spine1"));
    assert_eq!(rail1.qos.lossless_priorities, 0);
    assert_eq!(rail1.queue_limit_bytes, 64 << 10);
    assert_eq!(spine1.qos.lossless_priorities, 1 << 3);
    assert_eq!(spine1.qos.xoff_bytes, 1_000_000);
    assert_eq!(spine1.qos.wred.max_bytes, 900_000);
    assert_eq!(rail1.qos.wred.max_bytes, 3_000_000);
    assert!(!spine1.qos.watchdog.enabled);
    assert!(rail1.qos.watchdog.enabled);
    rail1.validate().unwrap();
    spine1.validate().unwrap();
}

#[test]
fn time_dilation_defaults_to_real_time_and_reaches_the_switch_configs() {
    let t = Topology::parse(GOOD, Path::new("x.yaml")).unwrap();
    assert!(t.time_dilation.is_real_time());
    let t = Topology::parse(&format!("{GOOD}time_dilation: 2.5\n"), Path::new("x.yaml")).unwrap();
    assert_eq!(t.time_dilation.factor(), 2.5);
    let plan = control::plan::compile(&t, 9400);
    assert!(plan.switches.iter().all(|s| s.config.time_dilation == 2.5));
    plan.switches.iter().for_each(|s| s.config.validate().unwrap());
}

#[test]
fn time_dilation_errors_name_file_line_field() {
    for (v, want) in
        [("0", "0 is below 1"), ("-2", "-2 is below 1"), ("0.5", "0.5 is below 1"), (".inf", "not a finite number")]
    {
        let e = err(&format!("{GOOD}time_dilation: {v}\n"));
        assert!(e.starts_with("topologies/bad.yaml:14: time_dilation: "), "{v}: {e}");
        assert!(e.contains(want), "{v}: {e}");
    }
    let e = err(&format!("{GOOD}time_dilation: slow\n"));
    assert!(e.starts_with("topologies/bad.yaml:14: time_dilation: "), "{e}");
    assert!(e.contains("a number ≥ 1"), "{e}");
}

#[test]
fn rail_spine_400g_is_the_real_fabric_at_d_8000() {
    let t = Topology::load(&shipped("rail-spine-400g.yaml")).unwrap();
    assert_eq!(t.time_dilation.factor(), 8000.0);
    let rate = |c: LinkClass| {
        t.links.iter().filter(|l| l.class == c).map(|l| l.line_rate.0).collect::<std::collections::BTreeSet<_>>()
    };
    assert_eq!(rate(LinkClass::HostRail).into_iter().collect::<Vec<_>>(), [400_000_000_000]);
    assert_eq!(rate(LinkClass::RailSpine).into_iter().collect::<Vec<_>>(), [800_000_000_000]);
    let plan = control::plan::compile(&t, 9400);
    let text = control::cmd::plan::render_plan(&t, &plan);
    assert!(text.contains("time dilation 8000: "), "{text}");
    assert!(text.contains("host-rail 400Gbps emulated = 50Mbps wall at D 8000"), "{text}");
    assert!(text.contains("rail-spine 800Gbps emulated = 100Mbps wall at D 8000"), "{text}");
    // The switch configs carry the emulated rates and D; the daemon applies D.
    let sw = &plan.switches[0].config;
    assert_eq!(sw.time_dilation, 8000.0);
    assert!(sw.ports.iter().all(|p| p.line_rate_bps >= 400_000_000_000));
}

#[test]
fn link_delays_come_per_class_from_cable_lengths_or_durations_and_overrides() {
    let src = format!(
        "{GOOD}links:\n  delay: {{ host_rail: 200m, rail_spine: 1.5us }}\n  overrides:\n    \
         - {{ between: [host2:gpu1, rail2], delay: 3us }}\n    - {{ between: [rail1, spine1], line_rate: 10Gbps }}\n\
         latency: {{ switch: 600ns, nic: 100ns }}\n"
    );
    let t = Topology::parse(&src, Path::new("t.yaml")).unwrap();
    let delay = |a: Endpoint, b: Endpoint| t.links.iter().find(|l| l.a == a && l.b == b).unwrap().delay_ns;
    // 200 m of fibre at 5 ns/m.
    assert_eq!(delay(Endpoint::Gpu { host: 1, gpu: 0 }, Endpoint::Switch(0)), 1_000);
    assert_eq!(delay(Endpoint::Gpu { host: 2, gpu: 1 }, Endpoint::Switch(1)), 3_000, "override");
    assert_eq!(delay(Endpoint::Switch(0), Endpoint::Switch(2)), 1_500, "a rate override keeps the class delay");
    assert_eq!((t.switch_latency_ns, t.nic_latency_ns), (600, 100));
    // Nothing stated: no delay anywhere.
    let t = Topology::parse(GOOD, Path::new("t.yaml")).unwrap();
    assert!(t.links.iter().all(|l| l.delay_ns == 0) && t.switch_latency_ns == 0 && t.nic_latency_ns == 0);
}

#[test]
fn bad_delays_are_named() {
    let e = err(&format!("{GOOD}links:\n  delay: {{ host_rail: 5 }}\n"));
    assert!(e.contains("bad.yaml:15: links.delay.host_rail") && e.contains("needs a unit"), "{e}");
    let e = err(&format!("{GOOD}links:\n  delay: {{ rail_spine: 1 parsec }}\n"));
    assert!(e.contains("links.delay.rail_spine") && e.contains("unknown time unit"), "{e}");
    let e = err(&format!("{GOOD}links:\n  delay: {{ rail_spine: 20ms }}\n"));
    assert!(e.contains("at most 10ms"), "{e}");
    let e = err(&format!("{GOOD}latency: {{ switch: fast }}\n"));
    assert!(e.contains("latency.switch"), "{e}");
    let e = err(&format!("{GOOD}links:\n  overrides:\n    - {{ between: [rail1, spine1] }}\n"));
    assert!(e.contains("links.overrides[0]") && e.contains("sets nothing"), "{e}");
}

#[test]
fn a_headroom_below_what_the_links_need_is_a_warning_and_auto_is_not() {
    let links = "links:\n  line_rate: { host_rail: 400Gbps, rail_spine: 400Gbps }\n  delay: { host_rail: 1us, rail_spine: 1us }\n";
    let warnings = |t: &Topology| t.qos.iter().flat_map(|q| q.warnings.clone()).collect::<Vec<_>>();
    let t = Topology::parse(&format!("{GOOD}{links}qos: {{ headroom: 20KB }}\n"), Path::new("t.yaml")).unwrap();
    assert_eq!(warnings(&t).len(), 3, "every switch: {:?}", warnings(&t));
    assert!(warnings(&t)[0].starts_with("qos.headroom: rail1: 20000 B is below the "), "{:?}", warnings(&t));
    let t = Topology::parse(&format!("{GOOD}{links}qos: {{ headroom: auto }}\n"), Path::new("t.yaml")).unwrap();
    assert!(warnings(&t).is_empty(), "{:?}", warnings(&t));
    assert!(t
        .qos
        .iter()
        .all(|q| q.headroom_auto && q.qos.headroom_bytes == q.headroom_needed && q.headroom_needed > 20_000));
    // The default headroom (512 KB) covers these links: no warning.
    assert!(warnings(&Topology::parse(&format!("{GOOD}{links}"), Path::new("t.yaml")).unwrap()).is_empty());
}

#[test]
fn per_switch_rail_subnets_need_whole_rail_groups_and_room_for_the_hosts() {
    // railsw1 serves rails 1 and 2 of hosts 1-2, but hosts 3-4 have a switch per rail.
    let mixed = "fabric: t\nhosts:\n  count: 4\n  gpus_per_host: 2\nswitches:\n  rail:\n    - { name: a, rails: [1, 2], hosts: 1-2 }\n    - { name: b, rails: [1], hosts: 3-4 }\n    - { name: c, rails: [2], hosts: 3-4 }\n  spine:\n    - { name: s1 }\naddressing:\n  rail_subnets: per-switch\n";
    let e = err(mixed);
    assert!(e.starts_with("topologies/bad.yaml:13: addressing.rail_subnets: per-switch: b serves rails [1] but another rail switch serves [1, 2]"), "{e}");
    assert!(e.contains("every switch serving a rail must serve the same rails"), "{e}");
    // 8 rails per switch: a /27 each (32 addresses): 30 hosts, a gateway and a broadcast address
    // do not fit.
    let many = "fabric: t\nhosts:\n  count: 30\n  gpus_per_host: 8\nswitches:\n  rail:\n    - { name: r1, rails: [1, 2, 3, 4, 5, 6, 7, 8], hosts: 1-7 }\n    - { name: r2, rails: [1, 2, 3, 4, 5, 6, 7, 8], hosts: 8-14 }\n    - { name: r3, rails: [1, 2, 3, 4, 5, 6, 7, 8], hosts: 15-21 }\n    - { name: r4, rails: [1, 2, 3, 4, 5, 6, 7, 8], hosts: 22-28 }\n    - { name: r5, rails: [1, 2, 3, 4, 5, 6, 7, 8], hosts: 29-30 }\n  spine:\n    - { name: s1 }\naddressing:\n  rail_subnets: per-switch\n";
    let e = err(many);
    assert!(e.starts_with("topologies/bad.yaml:15: addressing.rail_subnets: "), "{e}");
    assert!(
        e.contains("share 10.0.1.0/24 as /27 subnets of 32 addresses: 30 hosts, the gateway and the broadcast address do not fit"),
        "{e}"
    );
    let fits = many.replace("count: 30", "count: 29").replace("29-30", "29-29") + "qos: { buffer: 64MiB }\n";
    let t = Topology::parse(&fits, Path::new("t.yaml")).unwrap();
    assert_eq!(t.rail_subnets[&8].to_string(), "10.0.1.224/27");
    assert_eq!(t.rail_subnets[&8].gateway().to_string(), "10.0.1.254");
    let e = err(&format!("{}\n  rails: {{ 2: 192.168.2.0/24 }}\n", many.trim_end()));
    assert!(e.contains("cannot be given with rail_subnets: per-switch"), "{e}");
}

#[test]
fn pxn_needs_nvlink_and_a_nic_per_gpu() {
    let t = Topology::load(&shipped("rail-only-pxn.yaml")).unwrap();
    assert!(t.pxn);
    assert_eq!(t.nvlink.map(|n| (n.bandwidth_bps, n.latency_ns)), Some((3_600_000_000_000, 1_000)));
    let e = err(&GOOD.replace("  nic: per-gpu\n", "  nic: per-gpu\n  pxn: true\n"));
    assert!(e.starts_with("topologies/bad.yaml:6: hosts.pxn: "), "{e}");
    assert!(e.contains("set hosts.nvlink"), "{e}");
    let e = err(&GOOD.replace("  nic: per-gpu\n", "  nic: shared\n  nvlink: { bandwidth: 100Gbps }\n  pxn: true\n"));
    assert!(e.contains("hosts.pxn: PXN needs a NIC per GPU"), "{e}");
    let e = err(&GOOD.replace("  nic: per-gpu\n", "  nic: per-gpu\n  nvlink: { bandwidth: 0Gbps }\n"));
    assert!(e.contains("hosts.nvlink.bandwidth"), "{e}");
}

#[test]
fn a_dual_port_nic_has_a_port_on_each_switch_of_its_rail() {
    let t = Topology::load(&shipped("dual-port.yaml")).unwrap();
    assert_eq!((t.gpus_per_host, t.nics_per_host()), (2, 4));
    let names: Vec<String> = (0..4).map(|n| t.nic_name(n)).collect();
    assert_eq!(names, ["gpu0p0", "gpu0p1", "gpu1p0", "gpu1p1"]);
    // host2's four ports, to rail1a, rail1b, rail2a, rail2b.
    let ports: Vec<(Endpoint, Endpoint)> = t
        .links
        .iter()
        .filter(|l| l.class == LinkClass::HostRail && matches!(l.a, Endpoint::Gpu { host: 2, .. }))
        .map(|l| (l.a.clone(), l.b.clone()))
        .collect();
    assert_eq!(
        ports,
        (0..4).map(|n| (Endpoint::Gpu { host: 2, gpu: n }, Endpoint::Switch(n as usize))).collect::<Vec<_>>()
    );
    assert_eq!(
        t.rail_subnets.values().map(|n| n.to_string()).collect::<Vec<_>>(),
        ["10.0.1.0/24", "10.0.2.0/24", "10.0.3.0/24", "10.0.4.0/24"]
    );
    // A dual-port NIC with one switch on its rail.
    let src = std::fs::read_to_string(shipped("dual-port.yaml")).unwrap();
    let e = err(&src.replace("    - { name: rail1b, rails: [1] }\n", ""));
    assert!(e.contains("switches.rail: rail 1 of host1 has 1 switch; nic: dual-port cables each GPU's two ports to two switches of its rail"), "{e}");
    let e = err(&src.replace("fabric: dp\n", "fabric: dp\nnaming: { host_nic: \"g{gpu}\" }\n"));
    assert!(e.contains("naming.host_nic: \"g{gpu}\" must contain {port} with nic: dual-port"), "{e}");
}

/// Issue 38: a YAML null, boolean or number where the schema takes text is refused, naming what
/// was found and where (before, `fabric: null` made a fabric called "null").
#[test]
fn text_fields_refuse_null_booleans_and_numbers() {
    for (from, to, line, field, found) in [
        ("fabric: t", "fabric: null", 1, "fabric", "found null"),
        ("fabric: t", "fabric: true", 1, "fabric", "found the boolean true"),
        ("fabric: t", "fabric: ~", 1, "fabric", "found null"),
        ("    - name: rail1", "    - name: true", 8, "switches.rail[0].name", "found the boolean true"),
        ("    - name: spine1", "    - name: null", 13, "switches.spine[0].name", "found null"),
        ("    - name: rail2", "    - name: 7", 10, "switches.rail[1].name", "found the number 7"),
    ] {
        let e = err(&GOOD.replace(from, to));
        assert!(e.starts_with(&format!("topologies/bad.yaml:{line}: {field}: ")), "{to}: {e}");
        assert!(e.contains(&format!("expected a string, {found}")), "{to}: {e}");
    }
    // Quoted, they are text (and then the name rules apply).
    let t = Topology::parse(&GOOD.replace("fabric: t", "fabric: \"true\""), Path::new("x.yaml")).unwrap();
    assert_eq!(t.fabric, "true");
    let e = err(&GOOD.replace("    - name: rail2", "    - name: \"7\""));
    assert!(!e.contains("expected a string"), "{e}");
}

/// Issue 38: a file that is not UTF-8 is refused with the line and column of its first invalid
/// byte (before: "stream did not contain valid UTF-8" and no line).
#[test]
fn a_file_that_is_not_utf8_names_the_line_and_column() {
    let dir = std::env::temp_dir().join(format!("rocefab-utf8-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("bad.yaml");
    let mut bytes = GOOD.replace("  nic: per-gpu", "  nic: per-gpu # 25 °C").into_bytes();
    // Line 5 (hosts.nic), after "  nic: per-gpu # 25 " (20 characters): Latin-1 0xb0 where UTF-8
    // has 0xc2 0xb0.
    let at = bytes.windows(2).position(|w| w == [0xc2, 0xb0]).unwrap();
    bytes.remove(at);
    std::fs::write(&path, &bytes).unwrap();
    let e = Topology::load(&path).expect_err("not UTF-8").to_string();
    std::fs::remove_dir_all(&dir).unwrap();
    assert!(
        e.ends_with("bad.yaml:5: not UTF-8: byte 0xb0 at column 21 (byte offset 67); a topology file is UTF-8 text"),
        "{e}"
    );
}
