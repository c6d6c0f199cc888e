//! `rocefab-nicd --config <host.nicd.json> [--log-file <file>]`: the control plane of one GPU
//! host's NICs (LLDP/DCBX, captures). The agent is the library's [`host_daemons::nicd`]; this
//! binary parses the arguments and runs it under the daemons' common `main` (logging, exit
//! status).
use std::process::ExitCode;

use clap::Parser;
use host_daemons::nicd::{run, Args};

fn main() -> ExitCode {
    let args = Args::parse();
    rocefab_plumbing::daemon::main_with("rocefab-nicd", args.log_file.as_deref(), || run(&args))
}
