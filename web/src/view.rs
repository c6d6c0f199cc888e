//! The picture `rocefab web` draws: every node of the fabric placed in tiers as the book draws
//! a rail-optimized fabric (ch. 13, Fig. 13-8 and 13-9): super-spines on top, then spines, rail
//! switches (leaves), and the GPU hosts at the bottom with one port per NIC, each link from the
//! port of one end to the port of the other. Pure: computed once from the topology's plan, served
//! as JSON on `/api/view`, drawn by the page as SVG.
use std::collections::BTreeMap;

use serde::Serialize;

use control::plan::Plan;
use control::topology::{Role, Topology};

/// Margin around the drawing, px.
const MARGIN: f64 = 40.0;
/// Vertical distance between two tiers, px.
const ROW_GAP: f64 = 150.0;
/// Horizontal gap between two hosts (and extra between two pods), px.
const HOST_GAP: f64 = 20.0;
const POD_GAP: f64 = 40.0;
const SWITCH_W: f64 = 96.0;
const SWITCH_H: f64 = 34.0;
const HOST_H: f64 = 40.0;
/// Width a host box gives each NIC port, px.
const NIC_PITCH: f64 = 14.0;
/// Narrowest drawing (without margins), so that a small fabric is not blown up on a wide screen.
const MIN_WIDTH: f64 = 640.0;

/// One port where links attach.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PortView {
    /// Interface name (`eth1`, `gpu0`).
    pub name: String,
    /// `node:port` of the other end.
    pub peer: String,
    pub x: f64,
    pub y: f64,
    /// The rail of a host NIC (1-based).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rail: Option<u32>,
}

/// A node: a box at (x, y) (top left) of w × h.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NodeView {
    pub name: String,
    /// `host`, `rail`, `spine` or `super-spine`.
    pub kind: &'static str,
    /// Pod (index into the topology's pods) of hosts, rail switches and spines.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pod: Option<usize>,
    pub x: f64,
    pub y: f64,
    pub w: f64,
    pub h: f64,
    pub ports: Vec<PortView>,
}

/// A link: `a` (the lower tier: a host NIC, or the switch nearer the hosts) to `b`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LinkView {
    /// Index into the fabric's links (`state.json`, `rocefab fail link`).
    pub id: usize,
    /// `node:port` of each end.
    pub a: String,
    pub b: String,
    /// `host-rail`, `rail-spine` or `spine-super-spine`.
    pub class: &'static str,
    /// Line rate, emulated bit/s.
    pub line_rate_bps: u64,
    pub ax: f64,
    pub ay: f64,
    pub bx: f64,
    pub by: f64,
    /// The rail of a host link.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rail: Option<u32>,
}

/// The whole picture.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct View {
    pub fabric: String,
    /// Time dilation D: the page shows emulated times (wall ÷ D).
    pub time_dilation: f64,
    pub width: f64,
    pub height: f64,
    pub nodes: Vec<NodeView>,
    pub links: Vec<LinkView>,
}

impl View {
    pub fn node(&self, name: &str) -> Option<&NodeView> {
        self.nodes.iter().find(|n| n.name == name)
    }

    /// Whether `node:port` is a port of the picture.
    pub fn has_port(&self, spec: &str) -> bool {
        let Some((node, port)) = spec.split_once(':') else { return false };
        self.node(node).is_some_and(|n| n.ports.iter().any(|p| p.name == port))
    }
}

fn round(v: f64) -> f64 {
    (v * 10.0).round() / 10.0
}

/// Tier of a role: 0 hosts, 1 rail switches, 2 spines, 3 super-spines.
fn tier(role: Role) -> usize {
    match role {
        Role::Rail => 1,
        Role::Spine => 2,
        Role::SuperSpine => 3,
    }
}

/// Lays the plan of `topo` out.
pub fn build(topo: &Topology, plan: &Plan) -> View {
    // Rows from the top: the highest tier present first, hosts last.
    let top = topo.switches.iter().map(|s| tier(s.role)).max().unwrap_or(1);
    let row_y = |t: usize| MARGIN + (top - t) as f64 * ROW_GAP;

    // Hosts: packed left to right in topology order, pods apart.
    let mut nodes: Vec<NodeView> = Vec::new();
    let mut x = MARGIN;
    let pod_of_host = |h: u32| topo.pods.iter().position(|p| p.hosts.contains(h));
    let mut last_pod = None;
    for (i, hp) in plan.hosts.iter().enumerate() {
        let pod = pod_of_host(i as u32 + 1);
        if i > 0 {
            x += if pod != last_pod { POD_GAP } else { HOST_GAP };
        }
        last_pod = pod;
        let w = (hp.nics.len() as f64 * NIC_PITCH + 16.0).max(64.0);
        let y = row_y(0);
        let ports = hp
            .nics
            .iter()
            .enumerate()
            .map(|(k, n)| PortView {
                name: n.ifname.clone(),
                peer: String::new(),
                x: round(x + 8.0 + NIC_PITCH * (k as f64 + 0.5)),
                y,
                rail: Some(n.rail),
            })
            .collect();
        nodes.push(NodeView { name: hp.name.clone(), kind: "host", pod, x, y, w, h: HOST_H, ports });
        x += w;
    }
    // A hosts row narrower than the drawing is centred in it.
    let hosts_width = x - MARGIN;
    let widest_switch_row = topo
        .switches
        .iter()
        .fold(BTreeMap::<usize, f64>::new(), |mut m, s| {
            *m.entry(tier(s.role)).or_default() += SWITCH_W + 2.0 * HOST_GAP;
            m
        })
        .into_values()
        .fold(0.0, f64::max);
    let inner = hosts_width.max(widest_switch_row).max(MIN_WIDTH);
    let shift = round((inner - hosts_width) / 2.0);
    for n in &mut nodes {
        n.x = round(n.x + shift);
        for p in &mut n.ports {
            p.x = round(p.x + shift);
        }
    }

    // Switch rows: spread evenly over the widest row.
    let mut rows: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
    for (i, s) in topo.switches.iter().enumerate() {
        rows.entry(tier(s.role)).or_default().push(i);
    }
    for (&t, members) in &rows {
        let pitch = inner / members.len() as f64;
        for (k, &si) in members.iter().enumerate() {
            let s = &topo.switches[si];
            let cx = MARGIN + pitch * (k as f64 + 0.5);
            nodes.push(NodeView {
                name: s.name.clone(),
                kind: s.role.as_str(),
                pod: s.pod,
                x: round(cx - SWITCH_W / 2.0),
                y: row_y(t),
                w: SWITCH_W,
                h: SWITCH_H,
                ports: Vec::new(),
            });
        }
    }
    let center = |nodes: &[NodeView], name: &str| {
        nodes.iter().find(|n| n.name == name).map(|n| (n.x + n.w / 2.0, n.y)).unwrap_or((0.0, 0.0))
    };

    // Switch ports: uplinks on the top edge, downlinks on the bottom edge, each edge in the
    // order of the peers' positions (fewest crossings).
    // (switch, top edge) → (the peer's x, port, peer).
    type Edge = Vec<(f64, String, String)>;
    let mut edges: BTreeMap<(String, bool), Edge> = BTreeMap::new();
    for sp in &plan.switches {
        let (_, my_y) = center(&nodes, &sp.name);
        for p in &sp.config.ports {
            let peer_node = p.peer.split(':').next().unwrap_or_default();
            let (px, py) = center(&nodes, peer_node);
            let up = py < my_y;
            edges.entry((sp.name.clone(), up)).or_default().push((px, p.name.clone(), p.peer.clone()));
        }
    }
    for ((name, up), mut ports) in edges {
        ports.sort_by(|a, b| a.0.total_cmp(&b.0).then_with(|| a.1.cmp(&b.1)));
        let n = nodes.iter_mut().find(|n| n.name == name).expect("switch placed");
        let y = if up { n.y } else { n.y + n.h };
        let pitch = (n.w - 12.0) / ports.len() as f64;
        for (k, (_, port, peer)) in ports.into_iter().enumerate() {
            n.ports.push(PortView { name: port, peer, x: round(n.x + 6.0 + pitch * (k as f64 + 0.5)), y, rail: None });
        }
    }

    // Links, and the host ports' peers.
    let port_xy = |nodes: &[NodeView], node: &str, port: &str| {
        nodes
            .iter()
            .find(|n| n.name == node)
            .and_then(|n| n.ports.iter().find(|p| p.name == port))
            .map(|p| (p.x, p.y))
            .unwrap_or((0.0, 0.0))
    };
    let mut links = Vec::new();
    for (id, l) in plan.links.iter().enumerate() {
        let a = format!("{}:{}", l.a.node, l.a.ifname);
        let b = format!("{}:{}", l.b.node, l.b.ifname);
        if let Some(p) = nodes
            .iter_mut()
            .find(|n| n.name == l.a.node)
            .and_then(|n| n.ports.iter_mut().find(|p| p.name == l.a.ifname))
        {
            if p.peer.is_empty() {
                p.peer = b.clone();
            }
        }
        let (ax, ay) = port_xy(&nodes, &l.a.node, &l.a.ifname);
        let (bx, by) = port_xy(&nodes, &l.b.node, &l.b.ifname);
        let rail = nodes
            .iter()
            .find(|n| n.name == l.a.node && n.kind == "host")
            .and_then(|n| n.ports.iter().find(|p| p.name == l.a.ifname))
            .and_then(|p| p.rail);
        links.push(LinkView { id, a, b, class: l.class, line_rate_bps: l.line_rate_bps, ax, ay, bx, by, rail });
    }
    let width = round(2.0 * MARGIN + inner);
    let height = row_y(0) + HOST_H + MARGIN;
    View { fabric: topo.fabric.clone(), time_dilation: topo.time_dilation.factor(), width, height, nodes, links }
}

#[cfg(test)]
mod tests {
    use super::*;
    use control::plan::compile;
    use std::path::Path;

    fn view_of(file: &str) -> View {
        let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../topologies").join(file);
        let topo = Topology::load(&p).unwrap_or_else(|e| panic!("{file}: {e}"));
        build(&topo, &compile(&topo, 0))
    }

    #[test]
    fn rail_spine_is_drawn_in_tiers_with_every_node_and_link() {
        let v = view_of("rail-spine.yaml");
        let names: Vec<&str> = v.nodes.iter().map(|n| n.name.as_str()).collect();
        for n in ["host1", "host2", "host3", "host4", "rail1", "rail2", "spine1", "spine2"] {
            assert!(names.contains(&n), "{n} missing from {names:?}");
        }
        let y = |n: &str| v.node(n).unwrap().y;
        assert!(y("spine1") < y("rail1") && y("rail1") < y("host1"), "tiers top-down: spines, rails, hosts");
        assert_eq!(y("spine1"), y("spine2"));
        assert_eq!(v.links.len(), 8 + 4);
        // Every link joins the ports of its two ends, inside the picture.
        for l in &v.links {
            for (end, x, y) in [(&l.a, l.ax, l.ay), (&l.b, l.bx, l.by)] {
                let (node, port) = end.split_once(':').unwrap();
                let p = v.node(node).unwrap().ports.iter().find(|p| p.name == port).unwrap();
                assert_eq!((p.x, p.y), (x, y), "{end}");
                assert!(x > 0.0 && x < v.width && y > 0.0 && y < v.height, "{end} at ({x}, {y})");
            }
            assert!(v.has_port(&l.a) && v.has_port(&l.b));
        }
        let h1 = &v.links[0];
        assert_eq!((h1.a.as_str(), h1.class, h1.rail), ("host1:gpu0", "host-rail", Some(1)));
        assert!(h1.b.starts_with("rail1:"), "{}", h1.b);
        // A rail switch's uplinks leave from its top edge, its host ports from its bottom edge.
        let r1 = v.node("rail1").unwrap();
        for p in &r1.ports {
            let up = p.peer.starts_with("spine");
            assert_eq!(p.y, if up { r1.y } else { r1.y + r1.h }, "{}", p.name);
        }
        assert!(!v.has_port("rail1:eth99") && !v.has_port("nonsense"));
    }

    #[test]
    fn multi_pod_puts_super_spines_on_top_and_pods_apart() {
        let v = view_of("multi-pod.yaml");
        let supers: Vec<&NodeView> = v.nodes.iter().filter(|n| n.kind == "super-spine").collect();
        assert!(!supers.is_empty());
        let spine_y = v.nodes.iter().find(|n| n.kind == "spine").unwrap().y;
        assert!(supers.iter().all(|s| s.y < spine_y));
        let hosts: Vec<&NodeView> = v.nodes.iter().filter(|n| n.kind == "host").collect();
        // The gap between the last host of pod 0 and the first of pod 1 is the wider one.
        let gaps: Vec<(f64, bool)> =
            hosts.windows(2).map(|w| (w[1].x - (w[0].x + w[0].w), w[0].pod != w[1].pod)).collect();
        assert!(gaps.iter().any(|g| g.1), "two pods");
        for (g, new_pod) in gaps {
            assert_eq!(g, if new_pod { POD_GAP } else { HOST_GAP });
        }
        assert!(v.links.iter().any(|l| l.class == "spine-super-spine"));
    }
}
