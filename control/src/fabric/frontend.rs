//! The frontend (management) network of a fabric (book ch. 14, Fig. 14-2/14-3): every host
//! gets a second, ordinary Ethernet interface `fe0` on one Linux bridge, apart from the RoCE
//! backend. A training job's rendezvous (torchrun's store, NCCL's bootstrap) runs over it as
//! TCP; the backend carries only the collectives.
//!
//! The bridge `br0` lives in its own namespace `rf-<fabric>-frontend`, made by `rocefab up`
//! with the rest of the fabric and removed by `rocefab down`. Host `i` (0-based, topology order) is `172.31.0.0/16` + `i + 1` on `fe0`;
//! its peer in the bridge namespace is `fe<i+1>`.
use std::net::Ipv4Addr;

use anyhow::bail;

use crate::fabric::netns;
use crate::plan::netns_name;

/// The frontend subnet.
pub const SUBNET: (Ipv4Addr, u8) = (Ipv4Addr::new(172, 31, 0, 0), 16);

/// The node name of the bridge's namespace (`rf-<fabric>-frontend`).
pub const NODE: &str = "frontend";

/// Host `i`'s (0-based) frontend address.
pub fn host_addr(i: usize) -> Ipv4Addr {
    Ipv4Addr::from(u32::from(SUBNET.0) + i as u32 + 1)
}

/// The bridge's namespace of `fabric`.
pub fn netns(fabric: &str) -> String {
    netns_name(fabric, NODE)
}

/// Refuses a fabric whose frontend cannot be built: a node named like the bridge's namespace, a
/// backend address in the frontend subnet, more hosts than the subnet holds.
pub fn check(fabric: &str, nodes: &[String], backend: &[std::net::IpAddr]) -> anyhow::Result<()> {
    if nodes.iter().any(|n| n == NODE) {
        bail!("fabric {fabric}: a node is named {NODE:?}, the name of the frontend bridge's namespace");
    }
    if nodes.len() >= (1 << (32 - SUBNET.1)) - 2 {
        bail!("fabric {fabric}: {} nodes do not fit the frontend subnet {}/{}", nodes.len(), SUBNET.0, SUBNET.1);
    }
    let mask = u32::MAX << (32 - SUBNET.1);
    if let Some(a) = backend.iter().find(|a| match a {
        std::net::IpAddr::V4(v) => u32::from(*v) & mask == u32::from(SUBNET.0),
        _ => false,
    }) {
        bail!("fabric {fabric}: backend address {a} lies in the frontend subnet {}/{}", SUBNET.0, SUBNET.1);
    }
    Ok(())
}

/// The `ip -batch` lines (root namespace) of one veth per host: `fe0` in the host, `fe<i+1>` in
/// the bridge's namespace `ns`.
pub fn veth_lines(ns: &str, host_netns: &[String]) -> Vec<String> {
    host_netns
        .iter()
        .enumerate()
        .map(|(i, h)| format!("link add fe0 netns {h} type veth peer name fe{} netns {ns}", i + 1))
        .collect()
}

/// The bridge namespace's `ip -batch` lines for `hosts` hosts.
pub fn bridge_lines(hosts: usize) -> Vec<String> {
    let mut b = vec!["link set lo up".to_string(), "link add br0 type bridge".into()];
    for i in 1..=hosts {
        b.push(format!("link set fe{i} master br0"));
        b.push(format!("link set fe{i} up"));
    }
    b.push("link set br0 up".into());
    b
}

/// Host `i`'s (0-based) `ip -batch` lines for its `fe0`.
pub fn host_lines(i: usize) -> Vec<String> {
    vec![format!("addr add {}/{} dev fe0", host_addr(i), SUBNET.1), "link set fe0 up".into()]
}

/// The frontend addresses of `hosts` hosts of a running `fabric`, whose bridge must be there.
pub fn addresses(fabric: &str, hosts: usize) -> anyhow::Result<Vec<Ipv4Addr>> {
    let ns = netns(fabric);
    if !netns::exists(&ns) {
        bail!("fabric {fabric} has no frontend network ({ns} is missing): bring it up again with this rocefab");
    }
    Ok((0..hosts).map(host_addr).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_are_numbered_in_the_frontend_subnet_and_clashes_are_refused() {
        assert_eq!(host_addr(0), Ipv4Addr::new(172, 31, 0, 1));
        assert_eq!(host_addr(299), Ipv4Addr::new(172, 31, 1, 44));
        let nodes = vec!["host1".to_string(), "rail1".into()];
        assert!(check("f", &nodes, &["10.0.1.1".parse().unwrap()]).is_ok());
        let e = check("f", &nodes, &["172.31.9.9".parse().unwrap()]).unwrap_err();
        assert!(e.to_string().contains("backend address 172.31.9.9 lies in the frontend subnet"), "{e}");
        let e = check("f", &["frontend".to_string()], &[]).unwrap_err();
        assert!(e.to_string().contains("a node is named \"frontend\""), "{e}");
        assert_eq!(
            veth_lines("rf-f-frontend", &["rf-f-host1".into()]),
            vec!["link add fe0 netns rf-f-host1 type veth peer name fe1 netns rf-f-frontend".to_string()]
        );
        assert!(bridge_lines(2).contains(&"link set fe2 master br0".to_string()));
        assert_eq!(host_lines(1)[0], "addr add 172.31.0.2/16 dev fe0");
    }
}
