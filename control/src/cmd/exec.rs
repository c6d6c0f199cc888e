//! `rocefab exec` and `rocefab vtysh`: a command, or FRR's shell, inside a node's namespace.
use std::os::unix::process::ExitStatusExt;
use std::process::Command;

use anyhow::{bail, Context};

use crate::fabric::netns;
use crate::fabric::pick_fabric;
use crate::plan::netns_name;

pub fn exec(name: Option<&str>, node: &str, cmd: &[String]) -> anyhow::Result<i32> {
    let fabric = pick_fabric(name)?;
    let ns = netns_name(&fabric, node);
    if !netns::exists(&ns) {
        bail!("fabric {fabric} has no node {node} (namespace {ns} does not exist)");
    }
    let mut c = Command::new("ip");
    c.args(["netns", "exec", &ns]).args(cmd);
    // On a switch that runs FRR, `vtysh` on the PATH is the one that reaches its daemons
    // ([`crate::fabric::frr::vtysh_wrapper`]).
    let wrapper = crate::fabric::frr::wrapper_dir(&fabric, node);
    if wrapper.join("vtysh").exists() {
        let path = std::env::var_os("PATH").unwrap_or_default();
        let mut dirs = vec![wrapper];
        dirs.extend(std::env::split_paths(&path));
        c.env("PATH", std::env::join_paths(dirs).context("PATH")?);
    }
    let status = c.status().with_context(|| format!("ip netns exec {ns} {}", cmd.join(" ")))?;
    Ok(status.code().unwrap_or_else(|| 128 + status.signal().unwrap_or(0)))
}

/// `rocefab vtysh`: vtysh inside switch `switch`'s namespace, on its own FRR daemons.
pub fn vtysh(name: Option<&str>, switch: &str, args: &[String]) -> anyhow::Result<i32> {
    let fabric = pick_fabric(name)?;
    let st = crate::fabric::load_state(&fabric)?;
    let switches: Vec<&str> = st.daemons.iter().filter(|d| !d.is_host()).map(|d| d.node()).collect();
    if !switches.contains(&switch) {
        bail!("fabric {fabric} has no switch {switch} (switches: {})", switches.join(", "));
    }
    if !crate::fabric::frr::dir(&fabric, switch).join("zebra.pid").exists() {
        bail!(
            "switch {switch} of fabric {fabric} runs no FRR: vtysh needs a fabric with `routing: bgp` \
             (this one routes statically; `rocefab routes {fabric} {switch}` shows its routes)"
        );
    }
    let mut cmd = vec!["vtysh".to_string()];
    cmd.extend(crate::fabric::frr::vtysh_args(&fabric, switch));
    cmd.extend(args.iter().cloned());
    exec(Some(&fabric), switch, &cmd)
}
