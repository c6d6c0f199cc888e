//! `rocefab frame`: build PFC / PAUSE / LLDP / RoCEv2 / CNP frames from options into a pcap.
//! placeholder (wire helper)

/// Arguments of `rocefab frame`.
#[derive(Debug, clap::Args)]
pub struct FrameArgs {}

pub fn run(_args: &FrameArgs) -> anyhow::Result<()> {
    anyhow::bail!("rocefab frame: not implemented yet")
}
