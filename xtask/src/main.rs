//! `cargo xtask <setup|test|demo|bench|fuzz|fidelity|docs>`: everything that runs the project.
use clap::{Parser, Subcommand};

mod bench;
mod demo;
mod docs;
mod fidelity;
mod fuzz;
mod setup;
mod test;
mod util;

#[derive(Parser)]
#[command(name = "xtask")]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Install whatever is missing (apt packages, the pinned eBPF nightly with rust-src,
    /// bpf-linker built against its LLVM, tshark, scapy, promtool); `--check` only reports.
    Setup(setup::SetupArgs),
    /// Run every test: unprivileged workspace tests, then the privileged ones (root), fuzzing.
    Test(test::TestArgs),
    /// Bring up the rail-spine fabric, send three traffic classes, print per-queue counters.
    Demo,
    /// Compare the rocefab switch with the Linux bridge and a minimal AF_XDP forwarder.
    Bench(bench::BenchArgs),
    /// Run every cargo-fuzz target for a bounded time.
    Fuzz(fuzz::FuzzArgs),
    /// Run the canonical single-switch N->1 incast (PFC-only, DCQCN+PFC) and print it beside
    /// the htsim results in sim/htsim/ (issue 23).
    Fidelity(fidelity::FidelityArgs),
    /// Build the book in docs/ (mdBook) and check it and the README: no warning, every
    /// relative link resolves, every quoted rocefab / cargo xtask command and option exists.
    Docs,
}

fn main() {
    let cli = Cli::parse();
    let res = match cli.cmd {
        Cmd::Setup(a) => setup::run(&a),
        Cmd::Test(a) => setup::run(&Default::default()).and_then(|_| test::run_all(&a)),
        Cmd::Demo => setup::run(&Default::default()).and_then(|_| demo::run_demo()),
        Cmd::Bench(a) => setup::run(&Default::default()).and_then(|_| bench::run(&a)),
        Cmd::Fuzz(a) => setup::run(&Default::default()).and_then(|_| fuzz::run(&a)),
        Cmd::Fidelity(a) => fidelity::run(&a),
        Cmd::Docs => setup::run(&Default::default()).and_then(|_| docs::run()).map(|s| eprintln!("xtask docs: {s}")),
    };
    if let Err(e) = res {
        eprintln!("xtask: {e:#}");
        std::process::exit(1);
    }
}
