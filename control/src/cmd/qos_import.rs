//! `rocefab qos import`: an NX-OS configuration's QoS as a topology's `qos:` section, printed
//! or merged into a topology file (the import itself is `rocefab_model::qos_import`).
use std::io::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use rocefab_model::qos_import::{entries, import, merge_into_topology, overridden, render, QosImport, KEYS};
use rocefab_model::topology::Topology;

/// Arguments of `rocefab qos import`.
#[derive(Debug, clap::Args)]
pub struct ImportArgs {
    /// NX-OS configuration: a `show running-config`, or its QoS part.
    pub file: PathBuf,
    /// Write the imported keys into this topology file's `qos:` section (every other line of the
    /// file kept) instead of printing the section.
    #[arg(long, value_name = "TOPOLOGY.yaml")]
    pub apply: Option<PathBuf>,
}

/// `rocefab qos import`.
pub fn run(a: &ImportArgs) -> anyhow::Result<()> {
    let file = a.file.display().to_string();
    let src = std::fs::read_to_string(&a.file).with_context(|| format!("reading {file}"))?;
    let imp = import(&src, &file)?;
    for n in &imp.notes {
        eprintln!("{}", n.show(&file));
    }
    match &a.apply {
        None => {
            let mut out = std::io::stdout().lock();
            out.write_all(render(&imp.qos, &file).as_bytes())?;
            out.flush()?;
        }
        Some(topo) => apply_file(topo, &imp.qos, &file)?,
    }
    Ok(())
}

/// `--apply TOPOLOGY`: merges, checks that the result loads, warns about per-switch overrides
/// that keep an imported key from a switch, and replaces the file.
fn apply_file(path: &Path, q: &QosImport, file: &str) -> anyhow::Result<()> {
    let shown = path.display().to_string();
    let e = entries(q);
    if e.is_empty() {
        println!("{shown}: {file} configures none of {}: not changed", KEYS.join(", "));
        return Ok(());
    }
    let text = std::fs::read_to_string(path).with_context(|| format!("reading {shown}"))?;
    let merged = merge_into_topology(&text, q, file).map_err(|m| anyhow::anyhow!("{shown}: {m}"))?;
    let topo = Topology::parse(&merged, path).map_err(|err| {
        anyhow::anyhow!("with the qos: imported from {file} the topology does not load, not written: {err}")
    })?;
    for w in topo.qos.iter().flat_map(|s| &s.warnings) {
        eprintln!("warning: {shown}: {w}");
    }
    for (s, eff) in topo.switches.iter().zip(&topo.qos) {
        for key in overridden(q, eff) {
            eprintln!(
                "warning: {shown}: qos.switches.{}.{key} is kept: {} does not get the imported {key}",
                s.name, s.name
            );
        }
    }
    let tmp = path.with_file_name(format!(
        ".{}.rocefab-qos-import",
        path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default()
    ));
    std::fs::write(&tmp, &merged).with_context(|| format!("writing {}", tmp.display()))?;
    if let Ok(meta) = std::fs::metadata(path) {
        let _ = std::fs::set_permissions(&tmp, meta.permissions());
    }
    if let Err(err) = std::fs::rename(&tmp, path) {
        let _ = std::fs::remove_file(&tmp);
        bail!("replacing {shown}: {err}");
    }
    let keys: Vec<&str> = e.iter().map(|(k, _)| *k).collect();
    println!("{shown}: qos {} imported from {file}", keys.join(", "));
    Ok(())
}
