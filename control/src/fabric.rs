//! Fabric lifecycle: `up`, `down`, `status`, `exec`. placeholder (control helper)

/// Fabric subcommands, flattened into the top-level CLI.
#[derive(Debug, clap::Subcommand)]
pub enum FabricCmd {
    /// Bring a fabric up from a topology file.
    Up { topology: std::path::PathBuf },
}

pub fn run(_cmd: &FabricCmd) -> anyhow::Result<()> {
    anyhow::bail!("not implemented yet")
}
