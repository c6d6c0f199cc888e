//! `rocefab-hostd --job <job.json> [--report <file>] [--netns <ns>] [--wait-go]`: the emulated
//! RDMA NICs of one GPU host running one job. The emulator is the library's
//! [`host_daemons::hostd`]; this binary parses the arguments and runs it (exit 0 when the
//! report says `ok`, 1 otherwise).
use std::process::ExitCode;

use clap::Parser;
use host_daemons::hostd::{main as hostd_main, Args};

fn main() -> ExitCode {
    hostd_main(Args::parse())
}
