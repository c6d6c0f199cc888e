//! `rocefab routes [FABRIC] [SWITCH] [--json]`: every switch's routes as its data path holds them
//! (`GET /routes` of its daemon: the XDP maps' routes and each ECMP group's live members), beside
//! what the fabric's routing says: static routing's computation for the fabric as it is now (the
//! plan without the cut links and failed switches, `plan::compile_without`), or with `routing:
//! bgp` the switch's own routes plus what FRR selected (`vtysh -c "show ip route bgp json"`), with
//! every difference marked. Members are shown as
//! the neighbours they lead to (`spine1:eth1`).
use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::{anyhow, Context};
use rocefab_contracts::config::{RouteConfig, SwitchConfig};
use serde::{Deserialize, Serialize};

use crate::fabric::rundir::State;

/// `rocefab routes`.
#[derive(clap::Args, Debug, Clone)]
pub struct RoutesArgs {
    /// `[FABRIC] [SWITCH]`: the fabric (optional when one is running) and one switch (default:
    /// every switch).
    #[arg(num_args = 0..=2)]
    pub args: Vec<String>,
    /// One JSON object per switch and line.
    #[arg(long)]
    pub json: bool,
}

/// What a switch daemon's `GET /routes` answers.
#[derive(Clone, Debug, Deserialize)]
struct Held {
    groups: Vec<Vec<u32>>,
    routes: Vec<RouteConfig>,
}

/// One route of one switch: its next hops in the data path and in the computation.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct RouteLine {
    pub prefix: String,
    /// `None`: the switch does not hold the route; `local`: delivered to the switch itself.
    pub data_path: Option<Vec<String>>,
    pub computed: Option<Vec<String>>,
}

impl RouteLine {
    pub fn differs(&self) -> bool {
        self.data_path != self.computed
    }
}

/// The neighbours the members of `group` lead to (sorted), or `["local"]`.
fn hops(cfg: &SwitchConfig, groups: &[Vec<u32>], group: Option<u32>) -> Vec<String> {
    let Some(g) = group else { return vec!["local".into()] };
    let mut v: Vec<String> = groups
        .get(g as usize)
        .map(|m| {
            m.iter()
                .filter_map(|&nh| cfg.nexthops.get(nh as usize))
                .map(|nh| {
                    cfg.ports.get(nh.port as usize).map_or_else(|| format!("port {}", nh.port), |p| p.peer.clone())
                })
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

/// Lines for one switch: every prefix either side holds, by prefix; FRR's routes (`routing:
/// bgp`: prefix, the ports they leave by) count on the computed side too.
pub fn compare(
    cfg: &SwitchConfig,
    held: (&[Vec<u32>], &[RouteConfig]),
    computed: (&[Vec<u32>], &[RouteConfig]),
    frr: &[(String, Vec<String>)],
) -> Vec<RouteLine> {
    let mut by: BTreeMap<(std::net::IpAddr, u8), RouteLine> = BTreeMap::new();
    fn entry(
        by: &mut BTreeMap<(std::net::IpAddr, u8), RouteLine>,
        prefix: std::net::IpAddr,
        len: u8,
    ) -> &mut RouteLine {
        by.entry((prefix, len)).or_insert_with(|| RouteLine {
            prefix: format!("{prefix}/{len}"),
            data_path: None,
            computed: None,
        })
    }
    for (side, (groups, routes)) in [(0, held), (1, computed)] {
        for r in routes {
            let h = Some(hops(cfg, groups, r.group));
            let l = entry(&mut by, r.prefix, r.len);
            if side == 0 {
                l.data_path = h;
            } else {
                l.computed = h;
            }
        }
    }
    for (prefix, ports) in frr {
        let Some((a, len)) = prefix.split_once('/').and_then(|(a, l)| Some((a.parse().ok()?, l.parse().ok()?))) else {
            continue;
        };
        let l = entry(&mut by, a, len);
        if l.computed.is_none() {
            let mut peers: Vec<String> = ports
                .iter()
                .map(|p| cfg.ports.iter().find(|x| x.name == *p).map_or_else(|| p.clone(), |x| x.peer.clone()))
                .collect();
            peers.sort();
            l.computed = Some(peers);
        }
    }
    by.into_values().collect()
}

/// The text for one switch.
pub fn render(switch: &str, lines: &[RouteLine]) -> String {
    let show = |h: &Option<Vec<String>>| {
        h.as_ref().map_or_else(|| "-".to_string(), |v| if v.is_empty() { "(none)".into() } else { v.join(", ") })
    };
    let diff = lines.iter().filter(|l| l.differs()).count();
    let mut s = format!(
        "{switch}: {} routes, {}\n",
        lines.len(),
        if diff == 0 { "data path = computed".to_string() } else { format!("{diff} differ (marked !=)") }
    );
    let w = lines.iter().map(|l| l.prefix.len()).max().unwrap_or(0);
    for l in lines {
        let mark = if l.differs() { "!=" } else { "  " };
        s += &format!(
            "  {mark} {:<w$}  data path: {:<40}  computed: {}\n",
            l.prefix,
            show(&l.data_path),
            show(&l.computed)
        );
    }
    s
}

/// Runs `rocefab routes`.
pub fn run(a: &RoutesArgs) -> anyhow::Result<()> {
    let (fabric, only) = match a.args.as_slice() {
        [] => (crate::fabric::pick_fabric(None)?, None),
        [x] => match crate::fabric::pick_fabric(Some(x)).ok().filter(|f| State::load(f).is_ok()) {
            Some(f) => (f, None),
            None => (crate::fabric::pick_fabric(None)?, Some(x.clone())),
        },
        [f, s] => (f.clone(), Some(s.clone())),
        _ => unreachable!("clap: at most 2"),
    };
    let crate::fabric::Fabric { st, topo, .. } = crate::fabric::Fabric::open(Some(&fabric))?;
    let plan = crate::plan::compile_without(&topo, 0, &crate::fabric::routing::cut_links(&st));
    if let Some(o) = &only {
        if plan.switch(o).is_none() {
            let all: Vec<&str> = plan.switches.iter().map(|s| s.name.as_str()).collect();
            anyhow::bail!("fabric {fabric} has no switch {o:?} (switches: {})", all.join(", "));
        }
    }
    let mut out = String::new();
    let mut differ = 0;
    for sw in plan.switches.iter().filter(|s| only.as_ref().is_none_or(|o| *o == s.name)) {
        let cfg = &sw.config;
        if st.failed_switches.contains(&sw.name) {
            if a.json {
                out += &serde_json::to_string(&serde_json::json!({ "switch": sw.name, "failed": true, "routes": [] }))?;
                out.push('\n');
            } else {
                out += &format!("{}: failed (`rocefab restore switch {}`)\n", sw.name, sw.name);
            }
            continue;
        }
        let d = st
            .daemons
            .iter()
            .find(|d| !d.is_host() && d.node() == sw.name)
            .ok_or_else(|| anyhow!("no daemon for switch {}", sw.name))?;
        let text = crate::fabric::daemon_http::scrape(&d.url("/routes"), Duration::from_secs(5))?;
        let held: Held = serde_json::from_str(&text).with_context(|| format!("{}: GET /routes", sw.name))?;
        // `routing: bgp`: what FRR selected, beside the configuration's own routes.
        let frr = if topo.routing == crate::topology::Routing::Bgp {
            let json = crate::fabric::frr::vtysh(&fabric, &sw.name, "show ip route bgp json")?;
            crate::fabric::frr::bgp_routes(&json).with_context(|| format!("{}: FRR's routes", sw.name))?
        } else {
            Vec::new()
        };
        let lines = compare(cfg, (&held.groups, &held.routes), (&cfg.groups, &cfg.routes), &frr);
        differ += lines.iter().filter(|l| l.differs()).count();
        if a.json {
            out += &serde_json::to_string(&serde_json::json!({ "switch": sw.name, "routes": lines }))?;
            out.push('\n');
        } else {
            out += &render(&sw.name, &lines);
        }
    }
    use std::io::Write;
    std::io::stdout().lock().write_all(out.as_bytes())?;
    if differ > 0 && !a.json {
        eprintln!("{differ} routes differ between the data path and static routing's computation");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_member_the_data_path_lost_is_marked() {
        let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../topologies/rail-spine.yaml");
        let plan = crate::plan::compile(&crate::topology::Topology::load(&p).unwrap(), 9400);
        let cfg = &plan.switch("rail1").unwrap().config;
        let same = compare(cfg, (&cfg.groups, &cfg.routes), (&cfg.groups, &cfg.routes), &[]);
        assert!(same.iter().all(|l| !l.differs()) && !same.is_empty());
        let up = same.iter().find(|l| l.prefix == "10.0.2.0/24").unwrap();
        assert_eq!(up.data_path.as_deref(), Some(&["spine1:eth1".to_string(), "spine2:eth1".to_string()][..]));
        // The data path dropped spine1 from the uplink group.
        let g = cfg.routes.iter().find(|r| r.prefix.to_string() == "10.0.2.0").unwrap().group.unwrap() as usize;
        let mut held = cfg.groups.clone();
        held[g].retain(|&nh| cfg.ports[cfg.nexthops[nh as usize].port as usize].peer != "spine1:eth1");
        let lines = compare(cfg, (&held, &cfg.routes), (&cfg.groups, &cfg.routes), &[]);
        let diff: Vec<_> = lines.iter().filter(|l| l.differs()).map(|l| l.prefix.as_str()).collect();
        assert_eq!(diff, ["10.0.2.0/24"]);
        let text = render("rail1", &lines);
        assert!(text.contains("1 differ (marked !=)") && text.contains("!= 10.0.2.0/24"), "{text}");
        assert!(text.contains("local"), "own addresses are local routes: {text}");
    }
}
