//! The fabric subcommands, flattened into the top-level CLI: `up`, `down`, `status`, `exec`,
//! `vtysh`, `send`, `uplinks`, `plan`; each runs from its own file of `cmd/`, over the
//! running-fabric layer (`crate::fabric`).
use std::path::PathBuf;
use std::time::Duration;

use crate::cmd::{
    exec::{exec, vtysh},
    plan::print_plan,
    send::SendArgs,
    status::status,
    uplinks::uplinks,
};
use crate::fabric::lifecycle::{down, up};
use crate::text::fabric_and_node;
use crate::workers::{available_cores, switch_workers, Workers};

/// Fabric subcommands, flattened into the top-level CLI.
#[derive(Debug, clap::Subcommand)]
pub enum FabricCmd {
    /// Bring a fabric up from a topology file (root).
    Up {
        topology: PathBuf,
        /// Seconds to wait for every switch daemon's metrics and every NIC agent's /lldp, from
        /// when the first daemon starts. Default: 20 s plus 1 s per daemon (they start at once
        /// and share the machine's cores).
        #[arg(long)]
        timeout: Option<u64>,
        /// How the switches' data planes run: `N` (>= 1) runs every switch in one
        /// `rocefab-switchd` process whose data planes share N worker threads, so a frame
        /// crossing switches of one worker goes from hop to hop without a thread waking up;
        /// `per-switch` runs a process per switch; `auto` is one worker per two cores (the
        /// hosts' NIC threads take the other half).
        #[arg(long, env = "ROCEFAB_SWITCH_WORKERS", default_value = "auto", value_parser = switch_workers)]
        switch_workers: Workers,
    },
    /// Tear a fabric down: daemons, namespaces, veths, run directory (root).
    Down {
        /// Fabric name (default: the only running fabric).
        fabric: Option<String>,
    },
    /// Show nodes, links, daemons and metrics URLs of a running fabric.
    Status {
        fabric: Option<String>,
        /// Print the state as JSON (with daemon liveness).
        #[arg(long)]
        json: bool,
    },
    /// Run a command inside a node's namespace: `rocefab exec rs host1 -- ping 10.0.2.3` (the
    /// fabric may be left out when one runs).
    #[command(override_usage = "rocefab exec [FABRIC] <NODE> -- <CMD>...")]
    Exec {
        /// `[FABRIC] NODE`: the fabric (default: the only running one) and the node (host1,
        /// rail1, spine1, ...).
        #[arg(value_names = ["FABRIC", "NODE"], num_args = 1..=2, required = true)]
        at: Vec<String>,
        /// The fabric, as the older `--fabric NAME` spelling (the positional is preferred).
        #[arg(long = "fabric", hide = true)]
        fabric_option: Option<String>,
        #[arg(last = true, required = true)]
        cmd: Vec<String>,
    },
    /// FRR's vtysh on a switch of a `routing: bgp` fabric, as `docker exec <node> vtysh` in
    /// containerlab: `rocefab vtysh rs rail1 -c 'show bgp summary'` (no command: interactive;
    /// the fabric may be left out when one runs). Inside `rocefab exec <switch>`, plain `vtysh`
    /// reaches the same daemons.
    #[command(override_usage = "rocefab vtysh [FABRIC] <SWITCH> [ARGS]...")]
    Vtysh {
        /// The fabric, as the older `--fabric NAME` spelling (the positional is preferred).
        #[arg(long = "fabric", hide = true)]
        fabric_option: Option<String>,
        /// `[FABRIC] SWITCH [ARGS]...`: the fabric (default: the only running one), the switch
        /// (rail1, spine1, ...), then vtysh's own arguments (-c COMMAND, repeatable; -C; ...).
        #[arg(value_name = "ARGS", trailing_var_arg = true, allow_hyphen_values = true, required = true)]
        args: Vec<String>,
    },
    /// Send UDP packets from a GPU NIC (inside its host namespace).
    Send(SendArgs),
    /// Per-uplink packets and bytes of every switch (the ECMP stages: rail and spine uplinks,
    /// super-spine downlinks), with each port's share of its switch's total: shows hash
    /// polarization.
    Uplinks { fabric: Option<String> },
    /// Validate a topology and print its address plan and switch configs (no root needed).
    Plan {
        topology: PathBuf,
        /// Print the switch configs as JSON.
        #[arg(long)]
        json: bool,
    },
}

pub fn run(cmd: &FabricCmd) -> anyhow::Result<()> {
    match cmd {
        FabricCmd::Up { topology, timeout, switch_workers } => {
            up(topology, timeout.map(Duration::from_secs), switch_workers.resolve(available_cores()))
        }
        FabricCmd::Down { fabric } => down(fabric.as_deref()),
        FabricCmd::Status { fabric, json } => status(fabric.as_deref(), *json),
        FabricCmd::Exec { at, fabric_option, cmd } => {
            let (fabric, node) = fabric_and_node(at, fabric_option.as_deref(), "NODE")?;
            let code = exec(fabric, node, cmd)?;
            std::process::exit(code);
        }
        FabricCmd::Vtysh { fabric_option, args } => {
            // The leading words before vtysh's first option: `[FABRIC] SWITCH`.
            let words = args.iter().take_while(|a| !a.starts_with('-')).count().min(2);
            let (fabric, switch) = fabric_and_node(&args[..words], fabric_option.as_deref(), "SWITCH")?;
            let code = vtysh(fabric, switch, &args[words..])?;
            std::process::exit(code);
        }
        FabricCmd::Send(a) => crate::cmd::send::run(a),
        FabricCmd::Uplinks { fabric } => uplinks(fabric.as_deref()),
        FabricCmd::Plan { topology, json } => print_plan(topology, *json),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `rocefab <line>` parsed as a fabric subcommand.
    fn parse(line: &[&str]) -> Result<FabricCmd, clap::Error> {
        use clap::Parser;
        #[derive(Parser)]
        struct Cli {
            #[command(subcommand)]
            c: FabricCmd,
        }
        Cli::try_parse_from(std::iter::once("rocefab").chain(line.iter().copied())).map(|c| c.c)
    }

    /// Issue 40: exec, vtysh and send name the fabric as the other commands do, first and
    /// optional; `--fabric` still parses, but not beside a positional fabric.
    #[test]
    fn exec_vtysh_and_send_take_the_fabric_first_as_every_command_does() {
        let words = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let Ok(FabricCmd::Exec { at, fabric_option, cmd }) = parse(&["exec", "rs", "host1", "--", "ip", "-br", "a"])
        else {
            panic!("exec")
        };
        assert_eq!(
            (at.clone(), fabric_option.clone(), cmd),
            (words(&["rs", "host1"]), None, words(&["ip", "-br", "a"]))
        );
        assert_eq!(fabric_and_node(&at, None, "NODE").unwrap(), (Some("rs"), "host1"));
        let Ok(FabricCmd::Exec { at, fabric_option, .. }) = parse(&["exec", "host1", "--", "true"]) else { panic!() };
        assert_eq!(fabric_and_node(&at, fabric_option.as_deref(), "NODE").unwrap(), (None, "host1"));
        let Ok(FabricCmd::Exec { at, fabric_option, .. }) = parse(&["exec", "--fabric", "rs", "host1", "--", "true"])
        else {
            panic!()
        };
        assert_eq!(fabric_and_node(&at, fabric_option.as_deref(), "NODE").unwrap(), (Some("rs"), "host1"));
        let Ok(FabricCmd::Exec { at, fabric_option, .. }) =
            parse(&["exec", "--fabric", "rs", "rs", "host1", "--", "true"])
        else {
            panic!()
        };
        let e = fabric_and_node(&at, fabric_option.as_deref(), "NODE").unwrap_err().to_string();
        assert_eq!(e, "the fabric is named twice (\"rs\" and --fabric \"rs\"): give it once, first: [FABRIC] NODE");
        assert!(parse(&["exec", "rs", "host1", "x", "--", "true"]).is_err(), "three words before --");
        // vtysh: the words before vtysh's first option.
        let Ok(FabricCmd::Vtysh { args, .. }) = parse(&["vtysh", "rs", "rail1", "-c", "show bgp summary"]) else {
            panic!("vtysh")
        };
        assert_eq!(args, words(&["rs", "rail1", "-c", "show bgp summary"]));
        let Ok(FabricCmd::Send(a)) = parse(&["send", "rs", "--from", "host1:gpu0", "--to", "host2:gpu0"]) else {
            panic!("send")
        };
        assert_eq!((a.fabric.as_deref(), a.fabric_option.as_deref()), (Some("rs"), None));
        let Ok(FabricCmd::Send(a)) = parse(&["send", "--fabric", "rs", "--from", "host1:gpu0", "--to", "host2:gpu0"])
        else {
            panic!("send --fabric")
        };
        assert_eq!((a.fabric.as_deref(), a.fabric_option.as_deref()), (None, Some("rs")));
        assert!(parse(&["send", "rs", "--fabric", "rs", "--from", "h:g", "--to", "h:g"]).is_err(), "named twice");
    }

    /// Issue 41: `up --switch-workers N` (N >= 1) puts every switch in one process with N
    /// workers; `per-switch` gives each its own; the default is one worker per two cores.
    #[test]
    fn up_takes_the_switch_workers() {
        let workers = |args: &[&str]| {
            let Ok(FabricCmd::Up { switch_workers, .. }) = parse(args) else { panic!("{args:?}") };
            switch_workers
        };
        assert_eq!(workers(&["up", "t.yaml", "--switch-workers", "2"]), Workers::Shared(2));
        assert_eq!(workers(&["up", "t.yaml", "--switch-workers", "per-switch"]), Workers::Separate);
        assert_eq!(workers(&["up", "t.yaml"]), Workers::Auto);
        for bad in ["0", "1.5", "two", "65536"] {
            let e = parse(&["up", "t.yaml", "--switch-workers", bad]).expect_err(bad).to_string();
            assert!(e.contains("--switch-workers") && e.contains("is not a worker count"), "{e}");
        }
        assert_eq!(Workers::Auto.resolve(1), Some(1));
        assert_eq!(Workers::Auto.resolve(2), Some(1));
        assert_eq!(Workers::Auto.resolve(5), Some(2));
        assert_eq!(Workers::Auto.resolve(64), Some(32));
        assert_eq!(Workers::Separate.resolve(8), None);
        assert_eq!(Workers::Shared(3).resolve(2), Some(3));
    }
}
