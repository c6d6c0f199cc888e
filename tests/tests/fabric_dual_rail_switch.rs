//! Privileged: dual-rail-per-switch addressing (book ch. 13, Fig. 13-11) on a live fabric,
//! `topologies/dual-rail-switch.yaml`: each rail switch serves two rails as two /25 subnets of
//! one /24, and the spines route that /24.
//!
//! - The kernel addresses are the plan's: host3's GPU NICs are 10.0.1.3/25 (gateway .126) and
//!   10.0.1.131/25 (gateway .254); the switch ports facing them carry the two gateways.
//! - A GPU reaches its gateway and a GPU of the other /25 of the same switch (one routed hop:
//!   TTL 63), and a GPU behind the other switch through a spine (TTL 61) whose only routes to
//!   the GPUs are the two summaries.
//! - A 16-rank ring AllReduce verifies.
//!
//! Run as root, serially, after `cargo build -p control -p dataplane-user -p host-daemons`.
use serde_json::Value;

use rocefab_tests::fabric::*;

#[test]
fn two_rails_share_a_summarised_24_and_carry_a_verified_allreduce() {
    let f = Fabric::up("dual-rail-switch.yaml", "rfdr");
    let addr = |node: &str, dev: &str| {
        let o = f.exec(node, &["ip", "-o", "-4", "addr", "show", "dev", dev]);
        assert!(o.status.success(), "{node} {dev}: {}", stderr(&o));
        stdout(&o).split_whitespace().skip_while(|w| *w != "inet").nth(1).unwrap().to_string()
    };
    assert_eq!(addr("host3", "gpu0"), "10.0.1.3/25");
    assert_eq!(addr("host3", "gpu1"), "10.0.1.131/25");
    let p0 = f.port_to("railsw1", "host3:gpu0");
    let p1 = f.port_to("railsw1", "host3:gpu1");
    assert_eq!(addr("railsw1", &p0), "10.0.1.126/25");
    assert_eq!(addr("railsw1", &p1), "10.0.1.254/25");

    // The spine's data-path routes toward the GPUs are the two summaries.
    let spine = f.config("spine1");
    let remote: Vec<String> =
        spine.routes.iter().filter(|r| r.group.is_some()).map(|r| format!("{}/{}", r.prefix, r.len)).collect();
    assert_eq!(remote, ["10.0.1.0/24", "10.0.2.0/24"]);

    let ping = |from: &str, src: &str, dst: &str, ttl: &str| {
        let o = f.exec(from, &["ping", "-c", "2", "-i", "0.2", "-W", "2", "-I", src, dst]);
        let out = stdout(&o);
        assert!(o.status.success() && out.contains(&format!("ttl={ttl}")), "{src} -> {dst}: {out}{}", stderr(&o));
    };
    // The gateway of each /25, answered by railsw1 itself.
    ping("host3", "10.0.1.3", "10.0.1.126", "64");
    ping("host3", "10.0.1.131", "10.0.1.254", "64");
    // The other /25 of the same switch: one routed hop.
    ping("host1", "10.0.1.1", "10.0.1.132", "63");
    // Behind railsw2, through a spine.
    ping("host1", "10.0.1.1", "10.0.2.132", "61");

    let o = rocefab(&["run", &f.name, "allreduce", "--size", "1MiB", "--json", "--timeout", "120"]);
    assert!(o.status.success(), "rocefab run: {}", failure(&o));
    let r: Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!((r["ok"].as_bool(), r["verified_ranks"].as_u64()), (Some(true), Some(16)), "{r:#}");
    // Every rank's NIC sent through its own /25: the report's NICs carry both subnets.
    assert_eq!(r["nics"].as_array().unwrap().len(), 16);
}
