//! rocefab control plane: topology files, address plan and route compilation, network
//! namespaces and veths, switch daemons and host NIC agents, LLDP neighbour tables, frame
//! building and pcap decoding, the DCQCN timeline of a run, the arguments of `rocefab web` (whose
//! server is the `web` crate's `rocefab-web`).

// The fabric model, re-exported where the CLI's modules look for it (`crate::topology`, ...).
pub use rocefab_model::{lb, lldp, memory, plan, qos, qos_import, topology, units};

pub mod cmd;
pub mod fabric;
pub mod job;
pub mod pipe;
pub mod progress;
pub mod replay;
pub mod text;
pub mod workers;

/// The CLI's logging (`rocefab`, `rocefab-web`): the library's warnings (a daemon that ignored
/// SIGTERM, a namespace removed by name) on stderr; `RUST_LOG=debug` shows every command `rocefab
/// up`/`down` runs.
pub fn init_logging() {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .without_time()
        .init();
}
