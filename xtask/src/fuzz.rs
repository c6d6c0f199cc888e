//! `cargo xtask fuzz`. placeholder (wire helper)

#[derive(Debug, clap::Args)]
pub struct FuzzArgs {
    /// Seconds per target.
    #[arg(long, default_value_t = 20)]
    pub seconds: u64,
}

impl FuzzArgs {
    pub fn with_seconds(seconds: u64) -> Self {
        FuzzArgs { seconds }
    }
}

pub fn run(_a: &FuzzArgs) -> anyhow::Result<()> {
    anyhow::bail!("fuzz: not implemented yet")
}
