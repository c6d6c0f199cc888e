//! `cargo xtask bench`. placeholder (bench helper)

#[derive(Debug, clap::Args)]
pub struct BenchArgs {}

pub fn run(_a: &BenchArgs) -> anyhow::Result<()> {
    anyhow::bail!("bench: not implemented yet")
}
