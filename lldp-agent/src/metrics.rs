//! Prometheus metrics of an LLDP/DCBX agent, shared by the switch daemon and the host agent.
use std::collections::HashMap;

use prometheus::{IntCounterVec, IntGaugeVec, Opts, Registry};

use crate::port::PortReport;

/// Mismatch kinds, so a cleared mismatch reads 0 instead of disappearing.
const KINDS: [&str; 4] = ["pfc", "app", "ets", "app_not_lossless"];

/// The agent's metric families, labelled by `port`.
#[derive(Debug, Clone)]
pub struct LldpMetrics {
    tx: IntCounterVec,
    rx: IntCounterVec,
    malformed: IntCounterVec,
    tlvs_discarded: IntCounterVec,
    ageouts: IntCounterVec,
    table_drops: IntCounterVec,
    neighbour: IntGaugeVec,
    mismatch: IntGaugeVec,
    oper_pfc: IntGaugeVec,
}

impl LldpMetrics {
    /// Registers the families in `registry` with `const_labels` (e.g. `switch`).
    pub fn new(registry: &Registry, const_labels: &HashMap<String, String>) -> prometheus::Result<LldpMetrics> {
        let opts = |name: &str, help: &str| Opts::new(name, help).const_labels(const_labels.clone());
        let counter = |name: &str, help: &str| -> prometheus::Result<IntCounterVec> {
            let c = IntCounterVec::new(opts(name, help), &["port"])?;
            registry.register(Box::new(c.clone()))?;
            Ok(c)
        };
        let gauge = |name: &str, help: &str, labels: &[&str]| -> prometheus::Result<IntGaugeVec> {
            let g = IntGaugeVec::new(opts(name, help), labels)?;
            registry.register(Box::new(g.clone()))?;
            Ok(g)
        };
        Ok(LldpMetrics {
            tx: counter("rocefab_lldp_tx_frames_total", "LLDPDUs sent")?,
            rx: counter("rocefab_lldp_rx_frames_total", "LLDPDUs received and accepted")?,
            malformed: counter("rocefab_lldp_rx_malformed_total", "received LLDPDUs discarded because they did not parse")?,
            tlvs_discarded: counter(
                "rocefab_lldp_rx_tlvs_discarded_total",
                "optional TLVs dropped from accepted LLDPDUs because their contents did not decode",
            )?,
            ageouts: counter("rocefab_lldp_ageouts_total", "neighbours deleted because their TTL ran out")?,
            table_drops: counter(
                "rocefab_lldp_table_drops_total",
                "LLDPDUs of a new neighbour discarded because the port's neighbour table was full (tooManyNeighbors)",
            )?,
            neighbour: gauge("rocefab_lldp_neighbors", "entries in the port's neighbour table (one per chassis ID + port ID)", &["port"])?,
            mismatch: gauge(
                "rocefab_dcbx_mismatch",
                "1 while the port's DCBX settings disagree with the neighbour's (kind pfc, app, ets) or RoCEv2's APP priority is not PFC-enabled",
                &["port", "kind"],
            )?,
            oper_pfc: gauge("rocefab_dcbx_oper_pfc_enabled", "1 if PFC is operationally enabled on the priority after negotiation", &["port", "priority"])?,
        })
    }

    /// Brings the families up to date with the agent's reports.
    pub fn update(&self, reports: &[PortReport]) {
        for r in reports {
            let p = r.port.as_str();
            let set = |c: &IntCounterVec, v: u64| {
                let c = c.with_label_values(&[p]);
                c.inc_by(v.saturating_sub(c.get()));
            };
            set(&self.tx, r.counters.tx_frames);
            set(&self.rx, r.counters.rx_frames);
            set(&self.malformed, r.counters.rx_malformed);
            set(&self.tlvs_discarded, r.counters.rx_tlvs_discarded);
            set(&self.ageouts, r.counters.ageouts);
            set(&self.table_drops, r.counters.table_drops);
            self.neighbour.with_label_values(&[p]).set(r.neighbours.len() as i64);
            for k in KINDS {
                self.mismatch.with_label_values(&[p, k]).set(i64::from(r.mismatches.iter().any(|m| m.kind() == k)));
            }
            for prio in 0..8u8 {
                let on = r.oper.pfc_enable & (1 << prio) != 0;
                self.oper_pfc.with_label_values(&[p, &prio.to_string()]).set(i64::from(on));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::port::{Identity, PortAgent, Timing, NS};
    use crate::Dcb;
    use rocefab_wire::ethernet::MacAddr;
    use rocefab_wire::lldp::{ChassisId, LldpduRepr, PortId};

    fn from(chassis: [u8; 6], port: &str) -> Vec<u8> {
        LldpduRepr {
            chassis_id: ChassisId::MacAddress(MacAddr(chassis)),
            port_id: PortId::InterfaceName(port.into()),
            ttl: 120,
            tlvs: vec![],
        }
        .to_frame(MacAddr(chassis))
        .unwrap()
    }

    #[test]
    fn the_neighbour_gauge_counts_the_table_and_drops_are_counted() {
        let id = Identity {
            chassis_mac: [2, 0, 0, 0, 1, 1],
            mac: [2, 0, 0, 0, 1, 1],
            port: "eth1".into(),
            system_name: "rail1".into(),
            port_description: String::new(),
            bridge: true,
        };
        let mut a = PortAgent::new(Timing::default(), id, Dcb::nic(false, 1 << 3, 24, 3, 48, 7), 0);
        a.set_max_neighbours(2);
        for (i, p) in ["gpu0", "02:00:00:00:0b:01", "x"].iter().enumerate() {
            a.on_frame(&from([2, 0, 0, 0, 11, i as u8], p), NS);
        }
        let reg = Registry::new();
        let m = LldpMetrics::new(&reg, &HashMap::from([("switch".to_string(), "rail1".to_string())])).unwrap();
        m.update(&[a.report(NS)]);
        assert_eq!(m.neighbour.with_label_values(&["eth1"]).get(), 2);
        assert_eq!(m.table_drops.with_label_values(&["eth1"]).get(), 1);
    }
}
