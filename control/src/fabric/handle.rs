//! The handle of a running fabric: its state (the run directory `rocefab up` wrote) and its
//! topology, each loaded once, for the commands that act on the fabric.
use anyhow::{bail, Context};

use std::cell::OnceCell;

use crate::fabric::rundir::{EmulatedClock, State};
use crate::plan::Plan;
use crate::topology::{Routing, Topology};

/// The single running fabric, or the named one.
pub fn pick_fabric(name: Option<&str>) -> anyhow::Result<String> {
    if let Some(n) = name {
        return Ok(n.to_string());
    }
    let all = crate::fabric::rundir::fabrics();
    match all.len() {
        1 => Ok(all[0].clone()),
        0 => bail!("no fabric is running (run directories under {})", crate::fabric::rundir::base().display()),
        _ => bail!("several fabrics are running ({}); name one", all.join(", ")),
    }
}

/// A fabric that is up: its state and its topology, loaded once; its plan, compiled from the
/// topology when first asked for; its clock.
#[derive(Debug)]
pub struct Fabric {
    pub st: State,
    pub topo: Topology,
    plan: OnceCell<Plan>,
}

impl Fabric {
    /// The fabric `name` (or the only one up, when `None`, as [`pick_fabric`] picks it).
    pub fn open(name: Option<&str>) -> anyhow::Result<Fabric> {
        let fabric = pick_fabric(name)?;
        Fabric::with_state(load_state(&fabric)?)
    }

    /// The fabric of `st`, its topology loaded from the file `up` recorded.
    pub fn with_state(st: State) -> anyhow::Result<Fabric> {
        let topo = Topology::load(&st.topology)?;
        Ok(Fabric { st, topo, plan: OnceCell::new() })
    }

    /// The fabric's plan (addresses, routes, ECMP groups, every switch's and host's
    /// configuration) as `up` compiled it from the topology; compiled once.
    pub fn plan(&self) -> &Plan {
        self.plan.get_or_init(|| crate::plan::compile(&self.topo, 0))
    }

    /// The fabric's emulated clock (zero when `rocefab up` began, its time dilation).
    pub fn clock(&self) -> anyhow::Result<EmulatedClock> {
        Ok(self.st.clock()?)
    }

    /// Whether FRR routes it (`routing: bgp`), else static routing.
    pub fn bgp(&self) -> bool {
        self.topo.routing == Routing::Bgp
    }
}

/// The state of fabric `fabric`: "fabric "x" is not up (no /run/rocefab/x/state.json)" when it
/// has none, else what made it unreadable, naming the file.
pub fn load_state(fabric: &str) -> anyhow::Result<State> {
    let path = crate::fabric::rundir::state_path(fabric);
    if !path.exists() {
        anyhow::bail!("fabric {fabric:?} is not up (no {})", path.display());
    }
    State::load(fabric).with_context(|| format!("fabric {fabric:?}: reading {}", path.display()))
}
