//! The `load_balance:` section of a topology file: how each switch picks among the members of
//! an ECMP group, per traffic class (book ch. 10 and 12; docs/src/load-balancing.md).
//!
//! ```yaml
//! load_balance:               # every key optional; the defaults are shown
//!   mode: ecmp                # ecmp | flowlet | adaptive | spray
//!   spray: round-robin        # with mode: spray — round-robin | random
//!   flowlet_gap: 50us         # δ: a flow moves only after a gap longer than this (emulated)
//!   classes:                  # per traffic class (priority 0..=7 from qos.classes)
//!     3: { mode: spray, spray: random }
//!   switches:                 # per switch: mode, spray, flowlet_gap and classes
//!     spine1: { mode: adaptive, flowlet_gap: 100us }
//! ```
//!
//! - `ecmp`: the 5-tuple hash with the switch's `hash_seed`, one member per flow;
//! - `flowlet`: a flow keeps its member while its packets come closer than `flowlet_gap`; after
//!   a longer gap it moves to another member (no reordering: the old path has drained);
//! - `adaptive`: flowlets, and a new flowlet takes the member whose egress queue of the
//!   packet's class is the shallowest (the depths the data-plane thread publishes to XDP);
//! - `spray`: every packet on its own, `round-robin` over the members or `random`.
//!
//! The mode of class c on switch s is the first one set of: `switches.s.classes.c`,
//! `switches.s.mode`, `classes.c`, `mode`. So `spine1: { mode: adaptive }` makes every class
//! of spine1 adaptive, and only spine1's own `classes` refine that. `flowlet_gap` is in emulated
//! time like every timer of the file: the switch multiplies it by `time_dilation`.
use std::collections::BTreeMap;
use std::fmt;

use dataplane_common::limits::NUM_TC;
use rocefab_contracts::config::{LbConfig, LbMode, DEFAULT_FLOWLET_GAP_US};
use rocefab_contracts::time::Dilation;
use serde::de::{self, Deserializer, Visitor};
use serde::Deserialize;

/// The fabric-level `load_balance:` section; the same keys, without `switches`, override it
/// per switch.
#[derive(Debug, Deserialize, Default, Clone, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawLoadBalance {
    /// Per-switch overrides (fabric level only).
    #[serde(default)]
    switches: BTreeMap<String, RawLoadBalance>,
    #[serde(default)]
    mode: Option<RawMode>,
    #[serde(default)]
    spray: Option<Spray>,
    #[serde(default)]
    flowlet_gap: Option<Gap>,
    #[serde(default)]
    classes: BTreeMap<u8, RawClass>,
}

/// One class's choice: `{ mode: spray, spray: random }`.
#[derive(Debug, Deserialize, Clone, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
struct RawClass {
    mode: RawMode,
    #[serde(default)]
    spray: Option<Spray>,
}

/// A mode as written in the file.
#[derive(Debug, Deserialize, Clone, Copy, PartialEq, Eq, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
enum RawMode {
    Ecmp,
    Flowlet,
    Adaptive,
    Spray,
}

/// How `spray` picks.
#[derive(Debug, Deserialize, Clone, Copy, PartialEq, Eq, Default, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
enum Spray {
    #[default]
    RoundRobin,
    Random,
}

/// The longest flowlet gap, µs (emulated): a second is far beyond any flowlet.
const MAX_GAP_US: u64 = 1_000_000;

/// A flowlet gap in µs: `50us`, `1.5ms`, 1..=1 s.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Gap(u64);

impl schemars::JsonSchema for Gap {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Gap".into()
    }
    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        crate::schema::duration("a time in whole microseconds, more than 0, up to 1s")
    }
}

impl<'de> Deserialize<'de> for Gap {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Gap;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a time such as 50us or 1ms")
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Gap, E> {
                Err(E::custom(format!("{v}: a time needs a unit: us, ms or s")))
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<Gap, E> {
                let us = crate::qos::parse_duration_us_max(s, MAX_GAP_US, "1s").map_err(E::custom)?;
                if us == 0 {
                    return Err(E::custom(format!("{s:?}: the flowlet gap must be longer than 0")));
                }
                Ok(Gap(us))
            }
        }
        d.deserialize_any(V)
    }
}

/// The mode a (`mode`, `spray`) pair selects; `spray` without `mode: spray` is an error (the
/// key it names is `spray`).
fn mode_of(mode: RawMode, spray: Option<Spray>) -> Result<LbMode, (&'static str, String)> {
    Ok(match (mode, spray) {
        (RawMode::Spray, s) => match s.unwrap_or_default() {
            Spray::RoundRobin => LbMode::SprayRoundRobin,
            Spray::Random => LbMode::SprayRandom,
        },
        (_, Some(_)) => return Err(("spray", "only with mode: spray".into())),
        (RawMode::Ecmp, None) => LbMode::Ecmp,
        (RawMode::Flowlet, None) => LbMode::Flowlet,
        (RawMode::Adaptive, None) => LbMode::Adaptive,
    })
}

impl RawLoadBalance {
    /// This level's default mode, if it sets one. Errors name the key under this level.
    fn default_mode(&self) -> Result<Option<LbMode>, (String, String)> {
        match (self.mode, self.spray) {
            (None, Some(_)) => Err(("spray".into(), "only with mode: spray".into())),
            (None, None) => Ok(None),
            (Some(m), s) => mode_of(m, s).map(Some).map_err(|(k, m)| (k.into(), m)),
        }
    }

    /// This level's per-class modes. Errors name the key under this level.
    fn class_modes(&self) -> Result<[Option<LbMode>; NUM_TC], (String, String)> {
        let mut out = [None; NUM_TC];
        for (&tc, c) in &self.classes {
            let Some(slot) = out.get_mut(tc as usize) else {
                return Err(("classes".into(), format!("class {tc} does not exist (traffic classes 0..=7)")));
            };
            *slot = Some(mode_of(c.mode, c.spray).map_err(|(k, m)| (format!("classes.{tc}.{k}"), m))?);
        }
        Ok(out)
    }
}

/// Resolves the effective load balancing of every switch (by name, in topology order).
/// Errors are (field path, message).
pub fn resolve(raw: &RawLoadBalance, switches: &[String]) -> Result<Vec<LbConfig>, (String, String)> {
    for (name, o) in &raw.switches {
        if !switches.iter().any(|n| n == name) {
            return Err((format!("load_balance.switches.{name}"), format!("no switch named {name:?}")));
        }
        if !o.switches.is_empty() {
            return Err((format!("load_balance.switches.{name}.switches"), "overrides do not nest".into()));
        }
    }
    let top = |(k, m): (String, String)| (format!("load_balance.{k}"), m);
    let fabric_mode = raw.default_mode().map_err(top)?.unwrap_or(LbMode::Ecmp);
    let fabric_classes = raw.class_modes().map_err(top)?;
    let fabric_gap = raw.flowlet_gap.map_or(DEFAULT_FLOWLET_GAP_US, |g| g.0);
    let mut out = Vec::with_capacity(switches.len());
    for name in switches {
        let Some(o) = raw.switches.get(name) else {
            out.push(LbConfig { modes: fabric_classes.map(|c| c.unwrap_or(fabric_mode)), flowlet_gap_us: fabric_gap });
            continue;
        };
        let here = |(k, m): (String, String)| (format!("load_balance.switches.{name}.{k}"), m);
        let own_mode = o.default_mode().map_err(here)?;
        let own_classes = o.class_modes().map_err(here)?;
        let mut modes = [LbMode::Ecmp; NUM_TC];
        for (tc, m) in modes.iter_mut().enumerate() {
            *m = own_classes[tc].or(own_mode).or(fabric_classes[tc]).unwrap_or(fabric_mode);
        }
        out.push(LbConfig { modes, flowlet_gap_us: o.flowlet_gap.map_or(fabric_gap, |g| g.0) });
    }
    Ok(out)
}

/// One line for `rocefab plan`: the effective mode of every class (grouped), and δ when a
/// class uses flowlets (with its wall-clock length when time is dilated).
pub fn describe(lb: &LbConfig, dilation: Dilation) -> String {
    let mut groups: Vec<(LbMode, Vec<usize>)> = Vec::new();
    for (tc, &m) in lb.modes.iter().enumerate() {
        match groups.iter_mut().find(|(g, _)| *g == m) {
            Some((_, tcs)) => tcs.push(tc),
            None => groups.push((m, vec![tc])),
        }
    }
    let mut s = if groups.len() == 1 {
        format!("{} (every class)", groups[0].0.as_str())
    } else {
        groups
            .iter()
            .map(|(m, tcs)| {
                let list: Vec<String> = tcs.iter().map(|t| t.to_string()).collect();
                format!("{} (class{} {})", m.as_str(), if tcs.len() == 1 { "" } else { "es" }, list.join(","))
            })
            .collect::<Vec<_>>()
            .join(", ")
    };
    if lb.modes.iter().any(|m| m.uses_flowlets()) {
        s += &format!("; flowlet gap {} µs", lb.flowlet_gap_us);
        if !dilation.is_real_time() {
            let wall_us = dilation.duration(lb.flowlet_gap_us);
            s += &format!(" ({} ms on the wall clock at D={dilation})", wall_us as f64 / 1e3);
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(src: &str) -> RawLoadBalance {
        yaml_serde::from_str(src).unwrap()
    }

    fn names() -> Vec<String> {
        ["rail1", "spine1", "spine2"].map(String::from).to_vec()
    }

    #[test]
    fn default_is_ecmp_everywhere() {
        let lb = resolve(&RawLoadBalance::default(), &names()).unwrap();
        assert_eq!(lb, vec![LbConfig::default(); 3]);
        assert_eq!(describe(&lb[0], Dilation::REAL_TIME), "ecmp (every class)");
    }

    #[test]
    fn precedence_switch_class_switch_mode_fabric_class_fabric_mode() {
        let raw = parse(
            "mode: flowlet\nflowlet_gap: 200us\nclasses: { 3: { mode: spray }, 5: { mode: spray, spray: random } }\n\
             switches:\n  spine1: { mode: adaptive, classes: { 5: { mode: ecmp } } }\n  spine2: { flowlet_gap: 1ms }\n",
        );
        let lb = resolve(&raw, &names()).unwrap();
        use LbMode::*;
        assert_eq!(lb[0].modes, [Flowlet, Flowlet, Flowlet, SprayRoundRobin, Flowlet, SprayRandom, Flowlet, Flowlet]);
        assert_eq!(lb[0].flowlet_gap_us, 200);
        // spine1's own mode beats the fabric's classes; its own class beats its mode.
        assert_eq!(lb[1].modes, [Adaptive, Adaptive, Adaptive, Adaptive, Adaptive, Ecmp, Adaptive, Adaptive]);
        assert_eq!(lb[1].flowlet_gap_us, 200);
        assert_eq!(lb[2].modes, lb[0].modes);
        assert_eq!(lb[2].flowlet_gap_us, 1000);
        assert_eq!(
            describe(&lb[0], Dilation::REAL_TIME),
            "flowlet (classes 0,1,2,4,6,7), spray round-robin (class 3), spray random (class 5); flowlet gap 200 µs"
        );
        assert_eq!(
            describe(&lb[1], Dilation::new(8000.0).unwrap()),
            "adaptive (classes 0,1,2,3,4,6,7), ecmp (class 5); flowlet gap 200 µs (1600 ms on the wall clock at D=8000)"
        );
        // No class uses flowlets: δ is not shown.
        let lb = resolve(&parse("mode: spray\nspray: random\n"), &names()).unwrap();
        assert_eq!(describe(&lb[0], Dilation::REAL_TIME), "spray random (every class)");
    }

    #[test]
    fn errors_name_the_key() {
        let e = |src: &str| resolve(&parse(src), &names()).unwrap_err();
        assert_eq!(e("spray: random\n").0, "load_balance.spray");
        assert_eq!(e("mode: flowlet\nspray: random\n"), ("load_balance.spray".into(), "only with mode: spray".into()));
        let (f, m) = e("classes: { 8: { mode: spray } }\n");
        assert_eq!(f, "load_balance.classes");
        assert!(m.contains("class 8 does not exist"), "{m}");
        assert_eq!(e("classes: { 3: { mode: ecmp, spray: random } }\n").0, "load_balance.classes.3.spray");
        assert_eq!(e("switches:\n  spine9: { mode: ecmp }\n").0, "load_balance.switches.spine9");
        assert_eq!(e("switches:\n  spine1: { spray: random }\n").0, "load_balance.switches.spine1.spray");
        assert_eq!(
            e("switches:\n  spine1: { classes: { 9: { mode: ecmp } } }\n").0,
            "load_balance.switches.spine1.classes"
        );
        assert_eq!(e("switches:\n  spine1: { switches: { rail1: {} } }\n").0, "load_balance.switches.spine1.switches");
        // Schema errors come from the parser (the topology loader adds file and line).
        let bad = |src: &str| yaml_serde::from_str::<RawLoadBalance>(src).unwrap_err().to_string();
        assert!(bad("mode: hash\n").contains("unknown variant `hash`"), "{}", bad("mode: hash\n"));
        assert!(bad("flowlet_gap: 0us\n").contains("longer than 0"));
        assert!(bad("flowlet_gap: 50\n").contains("needs a unit"));
        assert!(bad("flowlet_gap: 2s\n").contains("up to 1s"));
        assert!(bad("classes: { 3: { spray: random } }\n").contains("missing field `mode`"));
        assert!(bad("flowlet: 50us\n").contains("unknown field"));
    }
}
