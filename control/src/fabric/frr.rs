//! FRR configurations for `routing: bgp` (book ch. 13: eBGP in the fabric, rails advertised from
//! their switches and summarised toward the spines; RFC 7938's private ASNs).
//!
//! * **ASNs:** every rail switch its own, 65100 + its index among the rail switches; the spines of
//!   pod p share 65000 + p; the super-spines share 64900. Spines of one pod (and the super-spines)
//!   sharing an ASN keeps routes from bouncing between them (BGP's loop check).
//! * **Sessions:** eBGP on every switch-to-switch link over its /31, BFD on each with the
//!   topology's `bgp.bfd_interval` × D and `bfd_multiplier`.
//! * **ECMP:** `bgp bestpath as-path multipath-relax` and `maximum-paths 64`: equal-length paths
//!   through different ASNs (the spines toward another pod's rail switches) share the load.
//! * **What rail switches advertise:** the rail subnet (the summary /24 of a group of rails with
//!   per-switch subnets, Fig. 13-11) when the switch serves every host of it, else a /32 per
//!   attached GPU (a rail spread over pods). `no bgp network import-check`: the GPU-facing
//!   addresses carry no prefix route. A rail switch advertises only its own networks (an as-path
//!   filter): it never carries transit, as in the static plan.
//! * **router-id:** 10.254.(i / 256).(i % 256 + 1) for switch i, an identifier only.
//! * **zebra** installs ECMP routes with their next hops in the route, not as kernel nexthop
//!   objects (`no zebra nexthop kernel enable`): with objects, FRR 8.4 kept a group without the
//!   member whose link came back.
use std::fmt::Write as _;

use crate::plan::Plan;
use crate::topology::{BgpSettings, Role, Topology};

/// Switch `si`'s ASN.
pub fn asn(topo: &Topology, si: usize) -> u32 {
    let s = &topo.switches[si];
    match s.role {
        Role::Rail => 65100 + topo.switches[..si].iter().filter(|x| x.role == Role::Rail).count() as u32,
        Role::Spine => 65000 + s.pod.unwrap_or(0) as u32,
        Role::SuperSpine => 64900,
    }
}

/// The networks rail switch `si` originates (none for other switches).
pub fn networks(topo: &Topology, plan: &Plan, si: usize) -> Vec<String> {
    let s = &topo.switches[si];
    if s.role != Role::Rail {
        return Vec::new();
    }
    let mut v = Vec::new();
    for (rails, subnet) in topo.rail_groups.iter().filter(|(r, _)| s.rails.contains(&r[0])) {
        let all = (1..=topo.hosts).all(|h| topo.rail_switch_for(rails[0], h) == Some(si));
        if all {
            v.push(format!("{}/{}", subnet.addr, subnet.len));
        } else {
            let sw = &plan.switches[si];
            let inside = |a: std::net::Ipv4Addr| u32::from(a) & subnet.mask() == u32::from(subnet.network());
            for n in sw.neighbors.iter().filter(|n| n.host_route && inside(n.addr)) {
                v.push(format!("{}/32", n.addr));
            }
        }
    }
    v.sort();
    v.dedup();
    v
}

/// Switch `si`'s `frr.conf` (zebra, bgpd and bfdd read the same file), logging to `log`.
pub fn config(topo: &Topology, plan: &Plan, si: usize, bgp: &BgpSettings, log: &str) -> String {
    let sw = &plan.switches[si];
    let me = asn(topo, si);
    let mut c = String::new();
    let _ = writeln!(c, "! rocefab: {} ({}), fabric {}", sw.name, topo.switches[si].role.as_str(), topo.fabric);
    c += "frr version 8.4\nfrr defaults datacenter\n";
    let _ = writeln!(c, "hostname {}", sw.name);
    let _ = writeln!(c, "log file {log}");
    // Routes with their next hops in the route (RTA_MULTIPATH), not kernel nexthop objects:
    // FRR 8.4 left a group without a member that came back, and the switch daemon's FIB watch
    // reads routes.
    c += "no zebra nexthop kernel enable\n!\n";
    // bfdd reads this file too and stops at the first top-level `exit` it meets (the others'
    // blocks are unknown to it, so it is at the top level there, and `exit` leaves configure
    // mode): its profile comes first. No `exit` in it either, which would take zebra and bgpd
    // out of configure mode; FRR finds a top-level command from inside a block by itself.
    let _ = writeln!(
        c,
        "bfd\n profile fabric\n  detect-multiplier {}\n  receive-interval {}\n  transmit-interval {}\n!",
        bgp.bfd_multiplier, bgp.bfd_interval_ms, bgp.bfd_interval_ms
    );
    let _ = writeln!(c, "router bgp {me}");
    let _ = writeln!(c, " bgp router-id 10.254.{}.{}", si / 256, si % 256 + 1);
    c += " no bgp ebgp-requires-policy\n no bgp network import-check\n bgp bestpath as-path multipath-relax\n";
    let rail = topo.switches[si].role == Role::Rail;
    let mut peers = Vec::new();
    for (p, n) in sw.config.ports.iter().zip(&sw.neighbors) {
        let Some(peer) = p.peer.split(':').next().and_then(|name| topo.switch_index(name)) else { continue };
        let _ = writeln!(c, " neighbor {} remote-as {}", n.addr, asn(topo, peer));
        let _ = writeln!(c, " neighbor {} description {}", n.addr, p.peer);
        let _ = writeln!(c, " neighbor {} bfd profile fabric", n.addr);
        peers.push(n.addr);
    }
    c += " !\n address-family ipv4 unicast\n";
    for n in networks(topo, plan, si) {
        let _ = writeln!(c, "  network {n}");
    }
    if rail {
        for a in &peers {
            let _ = writeln!(c, "  neighbor {a} route-map OWN-ONLY out");
        }
    }
    c += "  maximum-paths 64\n exit-address-family\nexit\n!\n";
    if rail {
        c += "bgp as-path access-list OWN seq 5 permit ^$\n!\nroute-map OWN-ONLY permit 10\n match as-path OWN\nexit\n!\n";
    }
    c
}

/// Every switch's configuration, in plan order, as (switch, text); empty for `routing: static`.
pub fn configs(topo: &Topology, plan: &Plan, log_dir: &str) -> Vec<(String, String)> {
    let Some(bgp) = topo.bgp else { return Vec::new() };
    (0..plan.switches.len())
        .map(|si| {
            let name = plan.switches[si].name.clone();
            let log = format!("{log_dir}/{name}/frr.log");
            (name, config(topo, plan, si, &bgp, &log))
        })
        .collect()
}

/// FRR's daemons, in start order (zebra first: the others connect to it).
pub const DAEMONS: [&str; 3] = ["zebra", "bgpd", "bfdd"];

/// Where switch `switch`'s FRR keeps its configuration, pid files, vty sockets and log.
pub fn dir(fabric: &str, switch: &str) -> std::path::PathBuf {
    crate::fabric::rundir::dir(fabric).join("frr").join(switch)
}

/// FRR's path space of a switch namespace (`-N`): its zserv socket lives in `/var/run/frr/<ns>`.
fn pathspace_dir(ns: &str) -> std::path::PathBuf {
    std::path::Path::new("/var/run/frr").join(ns)
}

/// The `vtysh` arguments that reach switch `switch` of `fabric`: its daemons' vty sockets and its
/// (empty) vtysh.conf, both in [`dir`] (no `-N`: vtysh would look below it).
pub fn vtysh_args(fabric: &str, switch: &str) -> Vec<String> {
    let d = dir(fabric, switch).display().to_string();
    vec!["--vty_socket".into(), d.clone(), "--config_dir".into(), d]
}

/// The directory `rocefab exec <switch>` puts first on the PATH: it holds a `vtysh` that
/// reaches that switch's daemons ([`vtysh_wrapper`]).
pub fn wrapper_dir(fabric: &str, switch: &str) -> std::path::PathBuf {
    dir(fabric, switch).join("bin")
}

/// The `vtysh` of switch `switch`: FRR's vtysh with [`vtysh_args`], so that `vtysh -c '...'`
/// inside `rocefab exec <switch>` works as `docker exec <node> vtysh` does in containerlab.
/// `real` is FRR's own vtysh (an absolute path).
pub fn vtysh_wrapper(fabric: &str, switch: &str, real: &std::path::Path) -> String {
    let args: Vec<String> = vtysh_args(fabric, switch).iter().map(|a| format!("'{a}'")).collect();
    format!(
        "#!/bin/sh\n# rocefab: vtysh on switch {switch} of fabric {fabric} (its FRR's vty sockets and vtysh.conf)\nexec '{}' {} \"$@\"\n",
        real.display(),
        args.join(" ")
    )
}

/// FRR's vtysh on this machine's PATH (Debian: /usr/bin/vtysh).
fn real_vtysh() -> anyhow::Result<std::path::PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain([std::path::PathBuf::from("/usr/bin")])
        .map(|d| d.join("vtysh"))
        .find(|p| p.is_file())
        .ok_or_else(|| anyhow::anyhow!("routing: bgp needs FRR's vtysh (Debian package frr, `cargo xtask setup`)"))
}

/// `vtysh -c <command>` on switch `switch` of `fabric`: its output.
pub fn vtysh(fabric: &str, switch: &str, command: &str) -> anyhow::Result<String> {
    use anyhow::Context;
    let o = std::process::Command::new("vtysh")
        .args(vtysh_args(fabric, switch))
        .args(["-c", command])
        .output()
        .context("running vtysh (Debian package frr)")?;
    if !o.status.success() {
        anyhow::bail!(
            "{switch}: vtysh -c {command:?}: {}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
    }
    Ok(String::from_utf8_lossy(&o.stdout).into_owned())
}

/// FRR's BGP routes of a switch (`show ip route bgp json`): (prefix, the ports its selected
/// next hops leave by), sorted.
pub fn bgp_routes(json: &str) -> anyhow::Result<Vec<(String, Vec<String>)>> {
    let v: serde_json::Value = serde_json::from_str(json)?;
    let mut out = Vec::new();
    for (prefix, entries) in v.as_object().into_iter().flatten() {
        for e in entries.as_array().into_iter().flatten().filter(|e| e["selected"] == true) {
            let mut ports: Vec<String> = e["nexthops"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|n| n["active"] == true)
                .filter_map(|n| n["interfaceName"].as_str().map(String::from))
                .collect();
            ports.sort();
            out.push((prefix.clone(), ports));
        }
    }
    out.sort();
    Ok(out)
}

/// Where FRR's daemons are: `ROCEFAB_FRR_DIR`, else Debian's `/usr/lib/frr`.
fn bin_dir() -> std::path::PathBuf {
    std::env::var_os("ROCEFAB_FRR_DIR").map_or_else(|| "/usr/lib/frr".into(), std::path::PathBuf::from)
}

/// Starts zebra, bgpd and bfdd in every switch's namespace with its configuration
/// ([`configs`]), as the `frr` user; each daemonises once it is up.
pub fn start(topo: &Topology, plan: &Plan) -> anyhow::Result<()> {
    start_only(topo, plan, None)
}

/// [`start`] for one switch (`Some(name)`) or all.
pub fn start_only(topo: &Topology, plan: &Plan, only: Option<&str>) -> anyhow::Result<()> {
    use anyhow::Context;
    let user = nix::unistd::User::from_name("frr").ok().flatten().ok_or_else(|| {
        anyhow::anyhow!("routing: bgp needs FRR (Debian package frr, `cargo xtask setup`): no user frr")
    })?;
    let log_dir = crate::fabric::rundir::dir(&plan.fabric).join("frr");
    for (name, text) in configs(topo, plan, &log_dir.display().to_string()) {
        if only.is_some_and(|o| o != name) {
            continue;
        }
        let sw = plan.switch(&name).expect("configs follow the plan");
        let d = dir(&plan.fabric, &name);
        let ps = pathspace_dir(&sw.netns);
        for x in [&d, &ps] {
            std::fs::create_dir_all(x).with_context(|| format!("creating {}", x.display()))?;
            nix::unistd::chown(x, Some(user.uid), Some(user.gid)).with_context(|| format!("chown {}", x.display()))?;
        }
        let conf = d.join("frr.conf");
        std::fs::write(&conf, text).with_context(|| format!("writing {}", conf.display()))?;
        std::fs::write(d.join("vtysh.conf"), "").context("writing vtysh.conf")?;
        let bin = wrapper_dir(&plan.fabric, &name);
        std::fs::create_dir_all(&bin).with_context(|| format!("creating {}", bin.display()))?;
        let w = bin.join("vtysh");
        std::fs::write(&w, vtysh_wrapper(&plan.fabric, &name, &real_vtysh()?))
            .with_context(|| format!("writing {}", w.display()))?;
        std::fs::set_permissions(&w, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .with_context(|| format!("chmod {}", w.display()))?;
        for daemon in DAEMONS {
            let pid = d.join(format!("{daemon}.pid"));
            let o = std::process::Command::new("ip")
                .args(["netns", "exec", &sw.netns])
                .arg(bin_dir().join(daemon))
                .args(["-d", "-N", &sw.netns, "-f"])
                .arg(&conf)
                .arg("-i")
                .arg(&pid)
                .arg("--vty_socket")
                .arg(&d)
                .args(["-u", "frr", "-g", "frr"])
                .output()
                .with_context(|| format!("starting {daemon} for {name}"))?;
            if !o.status.success() {
                anyhow::bail!(
                    "{name}: {daemon} did not start ({}): {}{}",
                    o.status,
                    String::from_utf8_lossy(&o.stdout),
                    String::from_utf8_lossy(&o.stderr)
                );
            }
        }
    }
    Ok(())
}

/// Stops every FRR daemon of `fabric` (by the pid files under its run directory: SIGTERM, then
/// SIGKILL after 3 s) and removes their path spaces; what could not be done.
pub fn stop_all(fabric: &str, namespaces: &[String]) -> Vec<String> {
    stop_only(fabric, None, namespaces)
}

/// [`stop_all`] for one switch (`Some(name)`, whose namespace is in `namespaces`) or all.
pub fn stop_only(fabric: &str, only: Option<&str>, namespaces: &[String]) -> Vec<String> {
    use nix::sys::signal::{kill, Signal};
    use nix::unistd::Pid;
    let mut problems = Vec::new();
    let root = crate::fabric::rundir::dir(fabric).join("frr");
    let mut pids = Vec::new();
    for e in std::fs::read_dir(&root).into_iter().flatten().flatten() {
        if only.is_some_and(|o| e.file_name().to_str() != Some(o)) {
            continue;
        }
        for daemon in DAEMONS {
            let p = e.path().join(format!("{daemon}.pid"));
            if let Some(pid) = std::fs::read_to_string(&p).ok().and_then(|t| t.trim().parse::<i32>().ok()) {
                pids.push((pid, p.clone()));
                let _ = std::fs::remove_file(&p);
            }
        }
    }
    for (pid, _) in &pids {
        let _ = kill(Pid::from_raw(*pid), Signal::SIGTERM);
    }
    let end = std::time::Instant::now() + std::time::Duration::from_secs(3);
    let alive = |pid: i32| kill(Pid::from_raw(pid), None).is_ok();
    while pids.iter().any(|(p, _)| alive(*p)) && std::time::Instant::now() < end {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    for (pid, path) in pids.iter().filter(|(p, _)| alive(*p)) {
        if kill(Pid::from_raw(*pid), Signal::SIGKILL).is_err() && alive(*pid) {
            problems.push(format!("FRR pid {pid} ({}) would not stop", path.display()));
        }
    }
    for ns in namespaces {
        let ps = pathspace_dir(ns);
        if ps.exists() {
            if let Err(e) = std::fs::remove_dir_all(&ps) {
                problems.push(format!("remove {}: {e}", ps.display()));
            }
        }
    }
    problems
}

#[cfg(test)]
mod tests {
    use super::*;

    fn topo(file: &str, edit: impl Fn(String) -> String) -> Topology {
        let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../topologies").join(file);
        let text = edit(std::fs::read_to_string(&p).unwrap());
        Topology::parse(&text, &p).unwrap()
    }

    fn bgp(text: String) -> String {
        text + "routing: bgp\n"
    }

    #[test]
    fn rail_spine_peers_every_link_with_bfd_and_advertises_the_rails() {
        let t = topo("rail-spine.yaml", bgp);
        let plan = crate::plan::compile(&t, 9400);
        let cs = configs(&t, &plan, "/run/x");
        assert_eq!(cs.len(), 4);
        let rail1 = &cs.iter().find(|(n, _)| n == "rail1").unwrap().1;
        assert!(rail1.contains("router bgp 65100\n"), "{rail1}");
        assert!(rail1.contains("  network 10.0.1.0/24\n"), "{rail1}");
        assert_eq!(rail1.matches(" remote-as 65000\n").count(), 2, "both spines, one ASN: {rail1}");
        assert_eq!(rail1.matches(" bfd profile fabric\n").count(), 2);
        assert!(rail1.contains("route-map OWN-ONLY out"), "no transit through a rail switch");
        assert!(rail1.contains("  receive-interval 100\n") && rail1.contains("  detect-multiplier 3\n"));
        // bfdd must meet its profile before any top-level `exit` (it leaves configure mode).
        let bfd = rail1.find("\nbfd\n").expect("a bfd block");
        assert!(bfd < rail1.find("\nexit").unwrap_or(usize::MAX), "{rail1}");
        assert!(!rail1[bfd..rail1.find("router bgp").unwrap()].contains("exit"), "{rail1}");
        let spine1 = &cs.iter().find(|(n, _)| n == "spine1").unwrap().1;
        assert!(spine1.contains("router bgp 65000\n") && !spine1.contains("  network "), "{spine1}");
        assert!(spine1.contains(" remote-as 65100\n") && spine1.contains(" remote-as 65101\n"), "{spine1}");
        assert!(cs.iter().find(|(n, _)| n == "rail2").unwrap().1.contains("router bgp 65101\n"));
        // Static routing: nothing.
        let s = topo("rail-spine.yaml", |x| x);
        assert!(configs(&s, &crate::plan::compile(&s, 9400), "/run/x").is_empty());
    }

    #[test]
    fn bfd_timers_follow_the_time_dilation_within_frrs_range() {
        let t =
            topo("rail-spine.yaml", |x| bgp(x) + "time_dilation: 100\nbgp: { bfd_interval: 1ms, bfd_multiplier: 4 }\n");
        assert_eq!(t.bgp, Some(BgpSettings { bfd_interval_ms: 100, bfd_multiplier: 4 }));
        let p = std::path::Path::new("t.yaml");
        let base = std::fs::read_to_string(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../topologies/rail-spine.yaml"),
        )
        .unwrap();
        let e = Topology::parse(&(bgp(base.clone()) + "bgp: { bfd_interval: 1ms }\n"), p).unwrap_err().to_string();
        assert!(e.contains("bgp.bfd_interval") && e.contains("outside FRR's 10..60000 ms"), "{e}");
        let e = Topology::parse(&(bgp(base) + "bgp: { bfd_multiplier: 1 }\n"), p).unwrap_err().to_string();
        assert!(e.contains("bgp.bfd_multiplier"), "{e}");
    }

    #[test]
    fn multi_pod_spines_share_a_pod_asn_and_split_rails_advertise_their_gpus() {
        let t = topo("multi-pod-128gpu.yaml", bgp);
        let plan = crate::plan::compile(&t, 9400);
        let spines: Vec<u32> =
            (0..t.switches.len()).filter(|&i| t.switches[i].role == Role::Spine).map(|i| asn(&t, i)).collect();
        assert!(spines.contains(&65000) && spines.contains(&65001), "{spines:?}");
        let ss = (0..t.switches.len()).find(|&i| t.switches[i].role == Role::SuperSpine).unwrap();
        assert_eq!(asn(&t, ss), 64900);
        let r = (0..t.switches.len()).find(|&i| t.switches[i].role == Role::Rail).unwrap();
        let nets = networks(&t, &plan, r);
        assert!(!nets.is_empty() && nets.iter().all(|n| n.ends_with("/32")), "a rail spread over pods: {nets:?}");
    }

    /// FRR's own parser accepts every generated file (`vtysh --dryrun`, the oracle).
    #[test]
    fn vtysh_accepts_every_generated_configuration() {
        for (file, extra) in [("rail-spine.yaml", ""), ("multi-pod-128gpu.yaml", ""), ("dual-rail-switch.yaml", "")] {
            let t = topo(file, |x| bgp(x) + extra);
            let plan = crate::plan::compile(&t, 9400);
            for (name, text) in configs(&t, &plan, "/tmp") {
                let dir = std::env::temp_dir().join(format!("rocefab-frr-{}-{name}", std::process::id()));
                std::fs::create_dir_all(&dir).unwrap();
                let f = dir.join("frr.conf");
                std::fs::write(&f, &text).unwrap();
                let o = std::process::Command::new("vtysh")
                    .args(["--dryrun", "-f"])
                    .arg(&f)
                    .output()
                    .expect("vtysh (Debian package frr; `cargo xtask setup` installs it)");
                let out = format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
                assert!(o.status.success() && !out.contains("% "), "{file} {name}: {out}\n{text}");
                std::fs::remove_dir_all(&dir).unwrap();
            }
        }
    }
}
