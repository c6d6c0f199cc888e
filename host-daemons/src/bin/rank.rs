//! `rocefab-rank`: one torchrun-style training process (see [`host_daemons::rank`]): TCP
//! rendezvous on the frontend network, one JSON line with the communicator's unique ID, then it
//! holds its connection until standard input closes.
use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    match host_daemons::rank::main(host_daemons::rank::Args::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("rocefab-rank: {e:#}");
            ExitCode::FAILURE
        }
    }
}
