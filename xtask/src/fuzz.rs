//! `cargo xtask fuzz`. placeholder (wire helper)

#[derive(Debug, clap::Args)]
pub struct FuzzArgs {}

pub fn run(_a: &FuzzArgs) -> anyhow::Result<()> {
    anyhow::bail!("fuzz: not implemented yet")
}
