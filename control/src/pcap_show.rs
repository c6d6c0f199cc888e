//! `rocefab pcap show`: decode every frame of a pcap/pcapng file.
//! placeholder (wire helper)

/// Arguments of `rocefab pcap show`.
#[derive(Debug, clap::Args)]
pub struct PcapShowArgs {}

pub fn run(_args: &PcapShowArgs) -> anyhow::Result<()> {
    anyhow::bail!("rocefab pcap show: not implemented yet")
}
