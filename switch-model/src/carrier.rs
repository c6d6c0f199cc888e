//! Static routing's answer to a failed link: an ECMP group keeps only the members whose egress
//! port has carrier. A cut cable (both veth ends down, `rocefab fail link`) takes the carrier
//! away at both switches; each removes the port from its groups as soon as the kernel tells it
//! (an RTM_NEWLINK notification, see `switchd`), and puts it back when the carrier returns. A
//! group with no live member is empty: its routes drop (counted as route misses) until a member
//! comes back, as a switch with no path does.
//!
//! A carrier loss counts once it has lasted [`DEBOUNCE_NS`] (wall clock), as a switch debounces
//! link-down (NX-OS `link debounce time`, 100 ms by default). A carrier that comes back counts at
//! once. The daemon reads the carrier itself (`IFLA_CARRIER`), not `IFF_RUNNING`: that follows
//! the operstate, which the kernel's linkwatch may update up to a second after the carrier
//! changed, and a port read through it was seen "down" for 26 to 490 ms after `rocefab up` and
//! as a job's host daemons started, long enough to empty a group and drop a job's frames.
//!
//! Pure: the daemon reads the ports' carrier and writes the groups [`Carrier::update`] returns
//! into the XDP program's `GROUPS` map, and looks again at [`Carrier::next_deadline`].
use rocefab_contracts::config::SwitchConfig;

/// How long a carrier loss must last before the port leaves its groups (wall clock).
pub const DEBOUNCE_NS: u64 = 100_000_000;

/// The ports' carrier as last seen, the groups as routed (the configuration's, or what the
/// fabric's route computation pushed since: [`Carrier::set_groups`]) and every group's live
/// members.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Carrier {
    /// Per port: up as far as the groups go (a loss counts after the debounce).
    up: Vec<bool>,
    /// Per port: since when (ns) it has been seen without carrier while still counted up.
    down_since: Vec<Option<u64>>,
    /// Egress port of every next hop.
    nexthop_port: Vec<u32>,
    base: Vec<Vec<u32>>,
    live: Vec<Vec<u32>>,
}

impl Carrier {
    /// Every port up, every group as configured (what the loader wrote).
    pub fn new(cfg: &SwitchConfig) -> Carrier {
        Carrier {
            up: vec![true; cfg.ports.len()],
            down_since: vec![None; cfg.ports.len()],
            nexthop_port: cfg.nexthops.iter().map(|n| n.port).collect(),
            base: cfg.groups.clone(),
            live: cfg.groups.clone(),
        }
    }

    /// Every group's live members, by group id.
    pub fn live(&self) -> &[Vec<u32>] {
        &self.live
    }

    /// Whether port `p` had carrier when last seen.
    pub fn is_up(&self, p: usize) -> bool {
        self.up.get(p).copied().unwrap_or(false)
    }

    /// The members of `members` whose port has carrier.
    fn alive(&self, members: &[u32]) -> Vec<u32> {
        members
            .iter()
            .copied()
            .filter(|&nh| self.nexthop_port.get(nh as usize).is_some_and(|&p| self.is_up(p as usize)))
            .collect()
    }

    /// When a carrier loss seen earlier will have lasted the debounce, if one is pending.
    pub fn next_deadline(&self) -> Option<u64> {
        self.down_since.iter().flatten().min().map(|t| t + DEBOUNCE_NS)
    }

    /// Takes the ports' carrier as seen at `now` (ns, by port index) and returns the groups whose
    /// live members changed, with their members now (configured order); empty when nothing
    /// changed. A port seen down leaves its groups once it has been down for [`DEBOUNCE_NS`].
    pub fn update(&mut self, seen: &[bool], now: u64) -> Vec<(u32, Vec<u32>)> {
        let mut up = self.up.clone();
        up.resize(seen.len(), true);
        self.down_since.resize(seen.len(), None);
        for (p, &s) in seen.iter().enumerate() {
            if s {
                up[p] = true;
                self.down_since[p] = None;
            } else if up[p] {
                let since = *self.down_since[p].get_or_insert(now);
                if now.saturating_sub(since) >= DEBOUNCE_NS {
                    up[p] = false;
                    self.down_since[p] = None;
                }
            }
        }
        if up == self.up {
            return Vec::new();
        }
        self.up = up;
        let mut changed = Vec::new();
        for g in 0..self.base.len() {
            let live = self.alive(&self.base[g]);
            if live != self.live[g] {
                self.live[g].clone_from(&live);
                changed.push((g as u32, live));
            }
        }
        changed
    }

    /// New groups as routed (next-hop ids, each below the configuration's next-hop count);
    /// returns every group with its live members, all to be written.
    pub fn set_groups(&mut self, groups: Vec<Vec<u32>>) -> Vec<(u32, Vec<u32>)> {
        self.base = groups;
        self.live = self.base.iter().map(|m| self.alive(m)).collect();
        self.live.iter().cloned().enumerate().map(|(g, m)| (g as u32, m)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rocefab_contracts::config::NextHopConfig;

    fn cfg() -> SwitchConfig {
        let mut c: SwitchConfig = serde_json::from_value(serde_json::json!({
            "name": "rail1", "role": "rail", "hash_seed": 1, "metrics_listen": "127.0.0.1:9400",
            "ports": [], "nexthops": [], "groups": [], "routes": []
        }))
        .unwrap();
        c.ports = (0..4)
            .map(|i| {
                serde_json::from_value(serde_json::json!({
                    "name": format!("eth{i}"), "mac": "02:00:00:00:00:01", "line_rate_bps": 1_000_000_000u64
                }))
                .unwrap()
            })
            .collect();
        let mac = c.ports[0].mac;
        c.nexthops = (0..4).map(|p| NextHopConfig { port: p, mac }).collect();
        // Group 0: the two uplinks (ports 2, 3); group 1: host port 0 alone.
        c.groups = vec![vec![2, 3], vec![0]];
        c
    }

    #[test]
    fn a_port_without_carrier_leaves_its_groups_and_returns_with_it() {
        let c = cfg();
        let d = DEBOUNCE_NS;
        let mut k = Carrier::new(&c);
        assert!(k.update(&[true; 4], 0).is_empty(), "as loaded");
        // A loss counts once it has lasted the debounce; a blip does not.
        assert!(k.update(&[true, true, true, false], 10).is_empty());
        assert_eq!(k.next_deadline(), Some(10 + d));
        assert!(k.update(&[true; 4], 20).is_empty() && k.next_deadline().is_none(), "a 10 ns blip");
        assert!(k.update(&[true, true, true, false], 30).is_empty());
        assert!(k.update(&[true, true, true, false], 29 + d).is_empty(), "not yet");
        assert_eq!(k.update(&[true, true, true, false], 30 + d), vec![(0, vec![2])]);
        assert!(!k.is_up(3) && k.is_up(2) && k.next_deadline().is_none());
        assert!(k.update(&[true, true, true, false], 40 + d).is_empty(), "no change, nothing to write");
        // The last member gone: an empty group (its routes drop).
        k.update(&[false, true, false, false], 50 + d);
        assert_eq!(k.update(&[false, true, false, false], 50 + 2 * d), vec![(0, vec![]), (1, vec![])]);
        // Back at once.
        assert_eq!(k.update(&[true; 4], 51 + 2 * d), vec![(0, vec![2, 3]), (1, vec![0])], "configured order again");
        // Groups pushed by the fabric's route computation keep the carrier filter.
        k.update(&[true, true, true, false], 0);
        k.update(&[true, true, true, false], d);
        assert_eq!(k.set_groups(vec![vec![3], vec![1, 2, 3]]), vec![(0, vec![]), (1, vec![1, 2])]);
        assert_eq!(k.update(&[true; 4], d + 1), vec![(0, vec![3]), (1, vec![1, 2, 3])]);
    }
}
