//! `rocefab-bench`: the traffic tools behind `cargo xtask bench`.
//!
//! - `gen`: AF_XDP UDP generator (prebuilt Eth/IPv4/UDP frames of 64..=4100 bytes, batch TX);
//! - `sink`: counts delivered frames behind an `XDP_DROP` program;
//! - `l2fwd`: the minimal AF_XDP L2 forwarder the rocefab switch is compared with.
//!
//! Each prints one JSON line with its result on stdout; logs go to stderr (`RUST_LOG`).
use clap::{Parser, Subcommand};

mod frame;
mod gen;
mod l2fwd;
mod sink;
mod sys;
mod xdp;

#[derive(Parser)]
#[command(name = "rocefab-bench", about = "AF_XDP generator, sink and minimal L2 forwarder for cargo xtask bench")]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Send prebuilt UDP frames from an AF_XDP socket for a fixed time.
    Gen(gen::GenArgs),
    /// Count frames arriving on an interface (XDP drop + rx counter).
    Sink(sink::SinkArgs),
    /// Minimal AF_XDP L2 forwarder: everything from --in goes out of --out unchanged.
    L2fwd(l2fwd::L2fwdArgs),
}

fn main() {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .init();
    let cli = Cli::parse();
    let res = match &cli.cmd {
        Cmd::Gen(a) => gen::run(a),
        Cmd::Sink(a) => sink::run(a),
        Cmd::L2fwd(a) => l2fwd::run(a),
    };
    if let Err(e) = res {
        eprintln!("rocefab-bench: {e:#}");
        std::process::exit(1);
    }
}
