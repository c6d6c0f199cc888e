//! The `lldp:` section of a topology file: LLDP timing (IEEE 802.1AB) for every switch port and
//! GPU NIC, and what every GPU NIC advertises in DCBX (IEEE 802.1Qaz) before it negotiates with
//! the switch port it is cabled to (docs/src/lldp-dcbx.md).
//!
//! ```yaml
//! lldp:                 # every key optional; the defaults are shown
//!   enabled: true       # false: no LLDP on the switches, no rocefab-nicd on the hosts
//!   nic_agent: true     # false: the switches keep their agents, the hosts run no rocefab-nicd
//!                       # (run your own LLDP/DCBX agent there, e.g. lldpd or lldpad)
//!   tx_interval: 30s    # msgTxInterval
//!   ttl: 120s           # TTL advertised, 1s..=65535s; longer than tx_interval
//!   fast_interval: 1s   # msgFastTx: fast start after link up or a new neighbour
//!   fast_count: 4       # txFastInit, 0..=8 (0: no fast start)
//!   nic:                # what every GPU NIC advertises before negotiation
//!     willing: true     # take the switch port's PFC/APP/ETS settings
//!     pfc: [3]          # PFC enable priorities
//!     roce_dscp: 24     # RoCEv2 (UDP 4791) DSCP → priority
//!     roce_priority: 3
//!     cnp_dscp: 48      # CNP DSCP → priority
//!     cnp_priority: 7
//! ```
//!
//! Times are a number with us, ms or s (as in `qos.watchdog`); the intervals are kept in whole
//! milliseconds and the TTL in whole seconds. Errors name the key (`lldp.nic.roce_dscp`).
use std::fmt;

use lldp_agent::dcb::prio_list;
use lldp_agent::Dcb;
use rocefab_contracts::config::LldpConfig;
use rocefab_contracts::job::NicClasses;
use serde::de::{self, Deserializer, Visitor};
use serde::Deserialize;

use crate::qos::{bitmap, parse_duration_us_max};

/// Longest time any `lldp` key takes: the largest TTL an LLDPDU can carry.
const MAX_US: u64 = 65_535 * 1_000_000;

/// The `lldp:` section as written.
#[derive(Debug, Deserialize, Default, Clone, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawLldp {
    #[serde(default)]
    enabled: Option<bool>,
    #[serde(default)]
    nic_agent: Option<bool>,
    #[serde(default)]
    tx_interval: Option<Time>,
    #[serde(default)]
    ttl: Option<Time>,
    #[serde(default)]
    fast_interval: Option<Time>,
    #[serde(default)]
    fast_count: Option<u32>,
    #[serde(default)]
    nic: RawNic,
}

/// `lldp.nic` as written.
#[derive(Debug, Deserialize, Default, Clone, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
struct RawNic {
    #[serde(default)]
    willing: Option<bool>,
    #[serde(default)]
    pfc: Option<Vec<u8>>,
    #[serde(default)]
    roce_dscp: Option<u8>,
    #[serde(default)]
    roce_priority: Option<u8>,
    #[serde(default)]
    cnp_dscp: Option<u8>,
    #[serde(default)]
    cnp_priority: Option<u8>,
}

/// A time in microseconds, written with a unit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Time(u64);

impl schemars::JsonSchema for Time {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Time".into()
    }
    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        crate::schema::duration("a time in whole microseconds up to 65535s")
    }
}

impl<'de> Deserialize<'de> for Time {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Time;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a time such as 30s or 500ms")
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Time, E> {
                Err(E::custom(format!("{v}: a time needs a unit: us, ms or s")))
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<Time, E> {
                parse_duration_us_max(s, MAX_US, "65535s").map(Time).map_err(E::custom)
            }
        }
        d.deserialize_any(V)
    }
}

/// What every GPU NIC advertises before negotiation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NicSettings {
    pub willing: bool,
    /// Bit p: PFC enabled on priority p.
    pub pfc_enable: u8,
    pub roce_dscp: u8,
    pub roce_priority: u8,
    pub cnp_dscp: u8,
    pub cnp_priority: u8,
}

impl Default for NicSettings {
    fn default() -> Self {
        NicSettings {
            willing: true,
            pfc_enable: 1 << 3,
            roce_dscp: 24,
            roce_priority: 3,
            cnp_dscp: 48,
            cnp_priority: 7,
        }
    }
}

impl NicSettings {
    /// The DCBX settings the NIC advertises.
    pub fn dcb(&self) -> Dcb {
        Dcb::nic(self.willing, self.pfc_enable, self.roce_dscp, self.roce_priority, self.cnp_dscp, self.cnp_priority)
    }

    /// The classes the NIC runs with when nothing was negotiated.
    pub fn classes(&self) -> NicClasses {
        NicClasses {
            data_dscp: self.roce_dscp,
            data_priority: self.roce_priority,
            cnp_dscp: self.cnp_dscp,
            cnp_priority: self.cnp_priority,
            pfc_enable: self.pfc_enable,
        }
    }
}

/// The effective `lldp:` settings of a fabric.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LldpSettings {
    /// Timing, as every switch config and NIC agent config carries it.
    pub config: LldpConfig,
    /// `lldp.nic_agent`: whether hosts run rocefab-nicd when LLDP is on (true by default).
    pub nic_agent: bool,
    pub nic: NicSettings,
}

impl Default for LldpSettings {
    fn default() -> Self {
        LldpSettings { config: LldpConfig::default(), nic_agent: true, nic: NicSettings::default() }
    }
}

impl LldpSettings {
    /// Whether every host runs a NIC agent (`rocefab-nicd`): LLDP on and `nic_agent` not false.
    pub fn nic_agents(&self) -> bool {
        self.config.enabled && self.nic_agent
    }
}

/// Whole milliseconds of a time, for `key`.
fn millis(t: Time, key: &str) -> Result<u64, (String, String)> {
    if t.0 < 1_000 || !t.0.is_multiple_of(1_000) {
        return Err((format!("lldp.{key}"), format!("{} us: expected whole milliseconds, at least 1ms", t.0)));
    }
    Ok(t.0 / 1_000)
}

/// Resolves the section against the defaults. Errors are (field path, message).
pub fn resolve(raw: &RawLldp) -> Result<LldpSettings, (String, String)> {
    let mut s = LldpSettings::default();
    let c = &mut s.config;
    if let Some(e) = raw.enabled {
        c.enabled = e;
    }
    match raw.nic_agent {
        Some(true) if !c.enabled => {
            return Err(("lldp.nic_agent".into(), "true needs LLDP on, but lldp.enabled is false".into()));
        }
        Some(a) => s.nic_agent = a,
        None => {}
    }
    let c = &mut s.config;
    if let Some(t) = raw.tx_interval {
        c.tx_interval_ms = millis(t, "tx_interval")?;
    }
    if let Some(t) = raw.fast_interval {
        c.fast_interval_ms = millis(t, "fast_interval")?;
    }
    if let Some(Time(us)) = raw.ttl {
        if !(1_000_000..=MAX_US).contains(&us) || !us.is_multiple_of(1_000_000) {
            return Err(("lldp.ttl".into(), format!("{us} us: expected whole seconds, 1s..=65535s")));
        }
        c.ttl_s = (us / 1_000_000) as u16;
    }
    if let Some(n) = raw.fast_count {
        if n > 8 {
            return Err((
                "lldp.fast_count".into(),
                format!("{n}: expected 0..=8 (txFastInit; 0 turns fast start off)"),
            ));
        }
        c.fast_count = n;
    }
    if u64::from(c.ttl_s) * 1_000 <= c.tx_interval_ms {
        let key = if raw.ttl.is_some() { "lldp.ttl" } else { "lldp.tx_interval" };
        return Err((
            key.into(),
            format!(
                "ttl {} is not longer than tx_interval {}: neighbours would age out between LLDPDUs",
                fmt_ms(u64::from(c.ttl_s) * 1_000),
                fmt_ms(c.tx_interval_ms)
            ),
        ));
    }
    let r = &raw.nic;
    let n = &mut s.nic;
    if let Some(w) = r.willing {
        n.willing = w;
    }
    if let Some(p) = &r.pfc {
        n.pfc_enable = bitmap(p, "pfc").map_err(|(k, m)| (format!("lldp.nic.{k}"), m))?;
    }
    let dscp = |v: Option<u8>, key: &str, dst: &mut u8| match v {
        Some(d) if d > 63 => Err((format!("lldp.nic.{key}"), format!("DSCP {d} does not exist (0..=63)"))),
        Some(d) => {
            *dst = d;
            Ok(())
        }
        None => Ok(()),
    };
    dscp(r.roce_dscp, "roce_dscp", &mut n.roce_dscp)?;
    dscp(r.cnp_dscp, "cnp_dscp", &mut n.cnp_dscp)?;
    let prio = |v: Option<u8>, key: &str, dst: &mut u8| match v {
        Some(p) if p > 7 => Err((format!("lldp.nic.{key}"), format!("priority {p} does not exist (0..=7)"))),
        Some(p) => {
            *dst = p;
            Ok(())
        }
        None => Ok(()),
    };
    prio(r.roce_priority, "roce_priority", &mut n.roce_priority)?;
    prio(r.cnp_priority, "cnp_priority", &mut n.cnp_priority)?;
    if n.roce_dscp == n.cnp_dscp {
        let key = if r.cnp_dscp.is_some() { "cnp_dscp" } else { "roce_dscp" };
        return Err((format!("lldp.nic.{key}"), format!("RoCEv2 and CNPs both use DSCP {}", n.roce_dscp)));
    }
    if n.pfc_enable != 0 && n.pfc_enable & (1 << n.roce_priority) == 0 {
        let key = if r.roce_priority.is_some() { "roce_priority" } else { "pfc" };
        return Err((
            format!("lldp.nic.{key}"),
            format!("RoCEv2 priority {} is not PFC-enabled (pfc {})", n.roce_priority, prio_list(n.pfc_enable)),
        ));
    }
    Ok(s)
}

/// `30 s`, `500 ms`.
fn fmt_ms(ms: u64) -> String {
    if ms.is_multiple_of(1_000) {
        format!("{} s", ms / 1_000)
    } else {
        format!("{ms} ms")
    }
}

/// One line for `rocefab plan`.
pub fn describe(s: &LldpSettings) -> String {
    let c = &s.config;
    if !c.enabled {
        return "off (switches send no LLDP, hosts run no NIC agent; GPU NICs use the classes of lldp.nic)".into();
    }
    let n = &s.nic;
    if !s.nic_agent {
        return format!(
            "on at the switches only: tx every {}, ttl {} s, fast start {} x {}; hosts run no NIC agent (lldp.nic_agent: false; their own LLDP agent, if any, is what the switches hear); GPU NICs use the classes of lldp.nic",
            fmt_ms(c.tx_interval_ms),
            c.ttl_s,
            c.fast_count,
            fmt_ms(c.fast_interval_ms)
        );
    }
    format!(
        "on: tx every {}, ttl {} s, fast start {} x {}; GPU NICs advertise {}, pfc {}, RoCEv2 (udp 4791, dscp {}) -> priority {}, CNP dscp {} -> priority {}",
        fmt_ms(c.tx_interval_ms),
        c.ttl_s,
        c.fast_count,
        fmt_ms(c.fast_interval_ms),
        if n.willing { "willing" } else { "not willing" },
        prio_list(n.pfc_enable),
        n.roce_dscp,
        n.roce_priority,
        n.cnp_dscp,
        n.cnp_priority
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(src: &str) -> RawLldp {
        yaml_serde::from_str(src).unwrap()
    }

    #[test]
    fn defaults_are_ieee_802_1ab() {
        let s = resolve(&RawLldp::default()).unwrap();
        assert_eq!(s.config, LldpConfig::default());
        assert_eq!(s.nic, NicSettings::default());
        assert_eq!(s.nic.classes(), NicClasses::default());
        assert_eq!(s.nic.dcb(), Dcb::nic(true, 1 << 3, 24, 3, 48, 7));
    }

    #[test]
    fn every_key() {
        let s = resolve(&parse(
            "enabled: false\ntx_interval: 500ms\nttl: 2s\nfast_interval: 100ms\nfast_count: 2\nnic: { willing: false, pfc: [4], roce_dscp: 26, roce_priority: 4, cnp_dscp: 46, cnp_priority: 6 }\n",
        ))
        .unwrap();
        let want = LldpConfig { enabled: false, tx_interval_ms: 500, ttl_s: 2, fast_interval_ms: 100, fast_count: 2 };
        assert_eq!(s.config, want);
        assert_eq!(
            s.nic,
            NicSettings {
                willing: false,
                pfc_enable: 1 << 4,
                roce_dscp: 26,
                roce_priority: 4,
                cnp_dscp: 46,
                cnp_priority: 6
            }
        );
        assert!(describe(&s).starts_with("off"), "{}", describe(&s));
        let on = LldpSettings { config: LldpConfig { enabled: true, ..want }, ..s };
        assert_eq!(
            describe(&on),
            "on: tx every 500 ms, ttl 2 s, fast start 2 x 100 ms; GPU NICs advertise not willing, pfc {4}, RoCEv2 (udp 4791, dscp 26) -> priority 4, CNP dscp 46 -> priority 6"
        );
    }

    #[test]
    fn bad_values_name_the_key() {
        let e = |src: &str| resolve(&parse(src)).unwrap_err();
        assert_eq!(e("ttl: 0s\n").0, "lldp.ttl");
        assert_eq!(e("ttl: 1.5s\n").0, "lldp.ttl");
        assert_eq!(e("ttl: 10s\n").0, "lldp.ttl", "not longer than the 30 s interval");
        assert_eq!(e("tx_interval: 200s\n").0, "lldp.tx_interval");
        assert_eq!(e("tx_interval: 500us\n").0, "lldp.tx_interval");
        assert_eq!(e("fast_count: 9\n").0, "lldp.fast_count");
        assert_eq!(e("nic: { pfc: [8] }\n").0, "lldp.nic.pfc");
        assert_eq!(e("nic: { roce_dscp: 64 }\n").0, "lldp.nic.roce_dscp");
        assert_eq!(e("nic: { cnp_priority: 8 }\n").0, "lldp.nic.cnp_priority");
        assert_eq!(e("nic: { cnp_dscp: 24 }\n").0, "lldp.nic.cnp_dscp");
        assert_eq!(e("nic: { roce_priority: 4 }\n").0, "lldp.nic.roce_priority");
        assert!(e("nic: { roce_priority: 4 }\n").1.contains("not PFC-enabled (pfc {3})"));
        assert!(resolve(&parse("nic: { pfc: [], roce_priority: 4 }\n")).is_ok(), "PFC off: any priority");
        assert!(yaml_serde::from_str::<RawLldp>("ttl: 120\n").unwrap_err().to_string().contains("needs a unit"));
        assert!(yaml_serde::from_str::<RawLldp>("ttl: 65536s\n").is_err());
        assert!(yaml_serde::from_str::<RawLldp>("tx: 1s\n").is_err());
        assert!(yaml_serde::from_str::<RawLldp>("nic: { pfcs: [3] }\n").is_err());
        assert_eq!(resolve(&parse("ttl: 65535s\n")).unwrap().config.ttl_s, 65535);
        assert_eq!(e("enabled: false\nnic_agent: true\n").0, "lldp.nic_agent");
        assert!(yaml_serde::from_str::<RawLldp>("nic_agent: 0\n").is_err());
    }

    #[test]
    fn nic_agent_false_keeps_the_switch_agents() {
        let s = resolve(&RawLldp::default()).unwrap();
        assert!(s.nic_agent && s.nic_agents());
        let s = resolve(&parse("nic_agent: false\n")).unwrap();
        assert!(s.config.enabled, "the switches keep LLDP");
        assert!(!s.nic_agents());
        assert!(describe(&s).starts_with("on at the switches only: "), "{}", describe(&s));
        let off = resolve(&parse("enabled: false\nnic_agent: false\n")).unwrap();
        assert!(!off.config.enabled && !off.nic_agents());
    }
}
