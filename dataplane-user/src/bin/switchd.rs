//! `rocefab-switchd --config <switch.json> [--log-file <file>]`: one switch of the emulated
//! fabric. The daemon is the library's [`dataplane_user::switchd`]; this binary parses the
//! arguments and runs it under the daemons' common `main` (logging, exit status).
use std::process::ExitCode;

use clap::Parser;
use dataplane_user::switchd::{run, Args};

fn main() -> ExitCode {
    let args = Args::parse();
    rocefab_plumbing::daemon::main_with("rocefab-switchd", args.log_file.as_deref(), || run(&args))
}
