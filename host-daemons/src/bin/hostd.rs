//! `rocefab-hostd --job <job.json> [--report <file>] [--netns <ns>] [--wait-go]`: the emulated
//! RDMA NICs of one GPU host running one job ([`host_daemons::hostd`]); `rocefab-hostd --hosts
//! <hosts.json> [--wait-go]`: the NICs of many hosts in one process ([`host_daemons::hosts`]).
//! This binary parses the arguments and runs one or the other (exit 0 when every report says
//! `ok`, 1 otherwise).
use std::process::ExitCode;

use clap::Parser;
use host_daemons::{hostd, hosts};

fn main() -> ExitCode {
    let args = hostd::Args::parse();
    hostd::init_logging(args.hosts.is_some());
    hostd::exit(match &args.hosts {
        Some(file) => hosts::run(file, args.wait_go),
        None => hostd::run(args),
    })
}
