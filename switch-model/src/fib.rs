//! The data path following the kernel's FIB (`routing: bgp`), as SONiC's fpmsyncd follows FRR:
//! zebra installs BGP's routes into the switch namespace's main table; the switch daemon reads
//! them (rtnetlink, on every route notification) and writes them, with the configuration's own
//! routes (its addresses, its attached GPUs), into the XDP program's routes and ECMP groups.
//!
//! Pure: [`merge`] turns the kernel's routes (prefix, outgoing interfaces) into groups and routes
//! over the configuration's next hops (one per port: a kernel next hop leaves by a port, the
//! configuration knows that port's neighbour MAC).
use rocefab_contracts::config::{RouteConfig, SwitchConfig};

/// A kernel route: prefix and the interface indices of its next hops.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KernelRoute {
    pub prefix: std::net::Ipv4Addr,
    pub len: u8,
    pub oifs: Vec<u32>,
}

/// The configuration's routes and groups plus `kernel`'s (`port_ifindex[p]` is port p's interface
/// index): a kernel route becomes a group of the next hops of its ports (a port without a next hop
/// in the configuration, or not one of the switch's ports, is left out; a route left with none is
/// dropped); a prefix the configuration routes itself keeps the configuration's route. Groups of
/// the configuration keep their ids; new ones follow, one per distinct member set.
pub fn merge(cfg: &SwitchConfig, port_ifindex: &[u32], kernel: &[KernelRoute]) -> (Vec<Vec<u32>>, Vec<RouteConfig>) {
    let mut groups = cfg.groups.clone();
    let mut routes = cfg.routes.clone();
    for k in kernel {
        let ip = std::net::IpAddr::V4(k.prefix);
        if routes.iter().any(|r| r.prefix == ip && r.len == k.len) {
            continue;
        }
        let mut members: Vec<u32> = k
            .oifs
            .iter()
            .filter_map(|oif| port_ifindex.iter().position(|i| i == oif))
            .filter_map(|p| cfg.nexthops.iter().position(|n| n.port as usize == p))
            .map(|n| n as u32)
            .collect();
        members.sort_unstable();
        members.dedup();
        members.truncate(dataplane_common::limits::MAX_GROUP_MEMBERS);
        if members.is_empty() {
            continue;
        }
        let g = match groups.iter().position(|m| *m == members) {
            Some(g) => g,
            None => {
                groups.push(members);
                groups.len() - 1
            }
        };
        routes.push(RouteConfig { prefix: ip, len: k.len, group: Some(g as u32) });
    }
    (groups, routes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_routes_become_groups_over_the_configured_next_hops() {
        let mut cfg: SwitchConfig = serde_json::from_value(serde_json::json!({
            "name": "rail1", "role": "rail", "hash_seed": 1, "metrics_listen": "127.0.0.1:9400",
            "ports": [], "nexthops": [], "groups": [[0]], "routes": [
                {"prefix": "10.0.1.1", "len": 32, "group": 0},
                {"prefix": "10.255.0.0", "len": 32, "group": null}
            ]
        }))
        .unwrap();
        cfg.nexthops = (0..3)
            .map(|p| serde_json::from_value(serde_json::json!({"port": p, "mac": "02:00:00:00:00:01"})).unwrap())
            .collect();
        let ifx = [11, 12, 13];
        let k = |p: &str, len, oifs: &[u32]| KernelRoute { prefix: p.parse().unwrap(), len, oifs: oifs.to_vec() };
        let (groups, routes) = merge(
            &cfg,
            &ifx,
            &[
                k("10.0.2.0", 24, &[13, 12]),
                k("10.0.3.0", 24, &[12, 13, 99]),
                k("10.0.4.0", 24, &[12]),
                k("10.0.1.1", 32, &[12]),
                k("10.0.9.0", 24, &[99]),
            ],
        );
        assert_eq!(groups, vec![vec![0], vec![1, 2], vec![1]], "the configuration's group keeps id 0");
        let got: Vec<(String, Option<u32>)> =
            routes.iter().map(|r| (format!("{}/{}", r.prefix, r.len), r.group)).collect();
        assert_eq!(
            got,
            [
                ("10.0.1.1/32".to_string(), Some(0)),
                ("10.255.0.0/32".into(), None),
                ("10.0.2.0/24".into(), Some(1)),
                ("10.0.3.0/24".into(), Some(1)),
                ("10.0.4.0/24".into(), Some(2)),
            ],
            "an attached GPU's /32 stays the configuration's; a route through no port of ours is dropped"
        );
    }
}
