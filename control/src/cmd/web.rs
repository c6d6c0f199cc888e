//! `rocefab web [FABRIC] [--listen 127.0.0.1:8080]`: the live view of a running fabric in the
//! browser. The server is its own binary, `rocefab-web` (crate `web`), beside `rocefab` as the
//! daemons are, so that the CLI links no async runtime (README "Architecture",
//! `tests/build_graph.rs`): this command checks its arguments and becomes that binary (exec), so
//! Ctrl-C and the exit status are the server's.
use std::os::unix::process::CommandExt;
use std::path::PathBuf;

use anyhow::Context;

/// Arguments of `rocefab web` (and of `rocefab-web`).
#[derive(clap::Args, Debug, Clone)]
pub struct WebArgs {
    /// The fabric (default: the only running fabric).
    pub fabric: Option<String>,
    /// Address to serve the page on.
    #[arg(long, default_value = "127.0.0.1:8080")]
    pub listen: std::net::SocketAddr,
    /// How often every switch daemon is sampled, wall clock (e.g. 200ms; 250ms at most).
    #[arg(long, default_value = "200ms")]
    pub interval: String,
    /// Longest capture the page's capture button may ask for, wall-clock seconds.
    #[arg(long, default_value_t = 10)]
    pub max_capture_seconds: u64,
}

impl WebArgs {
    /// The command line that gives these arguments back.
    pub fn to_args(&self) -> Vec<String> {
        let mut v: Vec<String> = self.fabric.iter().cloned().collect();
        v.extend(["--listen".into(), self.listen.to_string(), "--interval".into(), self.interval.clone()]);
        v.extend(["--max-capture-seconds".into(), self.max_capture_seconds.to_string()]);
        v
    }
}

/// `rocefab-web` beside this binary.
fn server_bin() -> anyhow::Result<PathBuf> {
    crate::fabric::process::sibling(
        "rocefab-web",
        None,
        "the web server",
        "build it beside rocefab: cargo build -p rocefab-web",
    )
}

/// Becomes `rocefab-web` with the same arguments; returns only on an error.
pub fn run(a: &WebArgs) -> anyhow::Result<()> {
    let bin = server_bin()?;
    let e = std::process::Command::new(&bin).args(a.to_args()).exec();
    Err(e).with_context(|| format!("starting {}", bin.display()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        a: WebArgs,
    }

    #[test]
    fn the_server_gets_the_arguments_it_was_given() {
        for line in [vec!["rfwb", "--listen", "127.0.0.1:9", "--interval", "100ms"], vec![]] {
            let a = Cli::try_parse_from(std::iter::once("rocefab-web").chain(line.iter().copied())).unwrap().a;
            let again = Cli::try_parse_from(std::iter::once("rocefab-web".to_string()).chain(a.to_args())).unwrap().a;
            assert_eq!(format!("{a:?}"), format!("{again:?}"));
        }
        let a = Cli::try_parse_from(["rocefab-web"]).unwrap().a;
        assert_eq!((a.fabric, a.listen.to_string(), a.interval.as_str()), (None, "127.0.0.1:8080".into(), "200ms"));
    }
}
