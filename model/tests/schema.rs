//! The topology file's JSON Schema (`topologies/topology.schema.json`): published as generated,
//! named by every shipped topology, accepting each of them, and refusing what the loader
//! refuses field by field. The validator is the `jsonschema` crate, not rocefab's loader.
use std::path::{Path, PathBuf};

use rocefab_model::topology::Topology;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn published() -> PathBuf {
    repo().join("topologies/topology.schema.json")
}

/// The YAML as the JSON an editor's YAML language server validates (integer keys as strings).
fn as_json(yaml: &str) -> serde_json::Value {
    let v: yaml_serde::Value = yaml_serde::from_str(yaml).expect("YAML");
    serde_json::to_value(v).expect("YAML as JSON")
}

fn validator() -> jsonschema::Validator {
    let schema: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(published()).expect("the published schema")).unwrap();
    jsonschema::draft202012::new(&schema).expect("a valid JSON Schema 2020-12")
}

/// The schema's errors for `yaml`, one line each.
fn schema_errors(v: &jsonschema::Validator, yaml: &str) -> Vec<String> {
    v.iter_errors(&as_json(yaml)).map(|e| format!("{}: {e}", e.instance_path)).collect()
}

fn shipped() -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(repo().join("topologies"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .collect();
    v.sort();
    v
}

/// `ROCEFAB_BLESS=1 cargo test -p rocefab-model --test schema` writes it after a type changed.
#[test]
fn the_published_schema_is_the_one_the_types_generate() {
    let generated = rocefab_model::topology::json_schema_text();
    if std::env::var_os("ROCEFAB_BLESS").is_some() {
        std::fs::write(published(), &generated).unwrap();
    }
    let file = std::fs::read_to_string(published()).unwrap_or_default();
    assert!(
        file == generated,
        "{} is not what the topology types generate: run ROCEFAB_BLESS=1 cargo test -p rocefab-model --test schema",
        published().display()
    );
}

#[test]
fn every_shipped_topology_names_the_schema_and_passes_it_and_the_loader() {
    let v = validator();
    let files = shipped();
    assert!(files.len() >= 17, "{files:?}");
    for p in files {
        let text = std::fs::read_to_string(&p).unwrap();
        assert_eq!(
            text.lines().next(),
            Some("# yaml-language-server: $schema=./topology.schema.json"),
            "{}: the first line names the schema for editors",
            p.display()
        );
        let errors = schema_errors(&v, &text);
        assert!(errors.is_empty(), "{}: {errors:#?}", p.display());
        Topology::parse(&text, &p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    }
}

/// A small topology that sets only what it must.
const BASE: &str = "fabric: rs
hosts: { count: 4, gpus_per_host: 2 }
switches:
  rail: [{ name: rail1, rails: [1] }, { name: rail2, rails: [2] }]
  spine: [{ name: spine1 }, { name: spine2 }]
";

/// Each change to [`BASE`] is refused by the schema and by the loader alike.
#[test]
fn the_schema_refuses_what_the_loader_refuses() {
    let v = validator();
    let base = BASE;
    let p = Path::new("base.yaml");
    assert!(schema_errors(&v, base).is_empty());
    Topology::parse(base, p).unwrap();
    let cases: &[(&str, &str, &str)] = &[
        // (what, replaced, replacement)
        ("a misspelt key", "gpus_per_host:", "gpu_per_host:"),
        ("an unknown top-level key", "fabric: rs", "fabric: rs\nfabrik: rs"),
        ("a name that is a number", "fabric: rs", "fabric: 42"),
        ("an MTU above 9216", "fabric: rs", "fabric: rs\nmtu: 9217"),
        ("an MTU below 68", "fabric: rs", "fabric: rs\nmtu: 67"),
        ("9 GPUs per host", "gpus_per_host: 2", "gpus_per_host: 9"),
        ("no hosts", "count: 4", "count: 0"),
        ("an unknown routing", "fabric: rs", "fabric: rs\nrouting: ospf"),
        ("an unknown XDP mode", "fabric: rs", "fabric: rs\nxdp_mode: offload"),
        ("a size without B", "fabric: rs", "fabric: rs\nqos: { buffer: 64M }"),
        ("a size in megabits", "fabric: rs", "fabric: rs\nqos: { xoff: 2Mb }"),
        ("a negative size", "fabric: rs", "fabric: rs\nqos: { xon: -1 }"),
        ("headroom neither auto nor a size", "fabric: rs", "fabric: rs\nqos: { headroom: automatic }"),
        ("WRED neither off, on nor settings", "fabric: rs", "fabric: rs\nqos: { wred: sometimes }"),
        ("an unknown WRED key", "fabric: rs", "fabric: rs\nqos: { wred: { minimum: 100KB } }"),
        ("an unknown watchdog action", "fabric: rs", "fabric: rs\nqos: { watchdog: { action: reboot } }"),
        ("a watchdog time without a unit", "fabric: rs", "fabric: rs\nqos: { watchdog: { detect: 200 } }"),
        ("a rate with an unknown unit", "fabric: rs", "fabric: rs\nlinks: { line_rate: { host_rail: 10Gbaud } }"),
        ("a rate of 0", "fabric: rs", "fabric: rs\nlinks: { line_rate: { host_rail: 0 } }"),
        ("a delay without a unit", "fabric: rs", "fabric: rs\nlinks: { delay: { host_rail: 5 } }"),
        ("a delay in furlongs", "fabric: rs", "fabric: rs\nlinks: { delay: { host_rail: 2fur } }"),
        ("a cabling keyword other than full-mesh", "fabric: rs", "fabric: rs\nlinks: { rail_spine: partial }"),
        ("a time dilation below 1", "fabric: rs", "fabric: rs\ntime_dilation: 0.5"),
        ("an unknown hash seed policy", "fabric: rs", "fabric: rs\nhash_seed: random"),
        ("a prefix that is no prefix", "fabric: rs", "fabric: rs\naddressing: { p2p: 10.255.0.0 }"),
        ("an unknown DCQCN profile", "fabric: rs", "fabric: rs\ndcqcn: { profile: timely }"),
        ("an unknown CNP scope", "fabric: rs", "fabric: rs\ndcqcn: { np: { scope: flow } }"),
        ("an unknown load-balancing mode", "fabric: rs", "fabric: rs\nload_balance: { mode: random }"),
        ("a flowlet gap without a unit", "fabric: rs", "fabric: rs\nload_balance: { mode: flowlet, flowlet_gap: 50 }"),
        ("an LLDP interval without a unit", "fabric: rs", "fabric: rs\nlldp: { tx_interval: 30 }"),
        ("an unknown NIC model", "gpus_per_host: 2", "gpus_per_host: 2, nic: per-port"),
        ("a spine without a name", "{ name: spine2 }", "{ label: spine2 }"),
    ];
    for (what, from, to) in cases {
        assert!(base.contains(from), "{what}: {from:?} is not in the base topology");
        let text = base.replacen(from, to, 1);
        let errors = schema_errors(&v, &text);
        let loaded = Topology::parse(&text, p);
        assert!(loaded.is_err(), "{what}: the loader accepted it");
        assert!(!errors.is_empty(), "{what}: the schema accepted it; the loader said: {}", loaded.unwrap_err());
    }
}

/// What the schema must not refuse: each spelling the loader takes for the custom values.
#[test]
fn the_schema_accepts_every_spelling_the_loader_takes() {
    let v = validator();
    let (base, p) = (BASE, Path::new("base.yaml"));
    let extras = [
        "qos: { buffer: 6400000, xoff: 3.2MB, xon: 512KiB, cell: 256B, headroom: auto, queue_limit: 1 MiB }",
        "qos: { headroom: 150kB, wred: off, watchdog: on }",
        "qos: { wred: { queues: [3], min: 150KB, max: 1500KB, probability: 10, at: dequeue }, watchdog: { action: forward, detect: 200ms, restore: 1s, poll: 500us } }",
        "qos: { classes: { 24: 3, 48: 6 }, pfc: [3], strict: [6], ets: { 0: 50, 3: 50 } }",
        "links: { line_rate: { host_rail: 400G, rail_spine: 2.5 Gbit/s }, delay: { host_rail: 600ns, rail_spine: 200m } }",
        "links: { line_rate: { host_rail: 1000000000 }, delay: { host_rail: 0, rail_spine: 1.5us } }",
        "hash_seed: 7",
        "hash_seed: shared",
        "time_dilation: 2.5",
        "time_dilation: 8000",
        "mtu: 9216",
        "addressing: { rail_base: 10.0.0.0, rails: { 2: 192.168.2.0/24 }, p2p: 10.255.0.0/16 }",
        "lldp: { tx_interval: 30s }",
        "load_balance: { mode: flowlet, flowlet_gap: 50us }",
        "dcqcn: { profile: htsim, np: { cnp: deferred, scope: ip_pair } }",
        "routing: bgp\nbgp: { bfd_interval: 100ms, bfd_multiplier: 3 }",
        "latency: { switch: 600ns, nic: 100ns }",
    ];
    for extra in extras {
        let text = format!("{base}\n{extra}\n");
        Topology::parse(&text, p).unwrap_or_else(|e| panic!("{extra}: the loader refused it: {e}"));
        let errors = schema_errors(&v, &text);
        assert!(errors.is_empty(), "{extra}: {errors:#?}");
    }
}
