//! The cabling check: every link of the topology against the LLDP neighbour tables its two ends
//! serve (IEEE 802.1AB neighbours, IEEE 802.1Qaz DCBX mismatches), the worst finding per link;
//! `rocefab lldp --check` prints it and `rocefab web` colours the links with it.
//!
//! A port keeps one neighbour per Chassis ID + Port ID, so a port can show several (lldpd
//! running beside rocefab-nicd on a NIC). A link end whose table holds the expected neighbour
//! passes, whatever else it holds, and every other entry is an "extra neighbour". Hosts that run
//! no rocefab NIC agent (`lldp.nic_agent: false`) are not asked; the switch end of their links
//! passes when it hears an LLDPDU whose Port ID or Chassis ID is the NIC's MAC (what lldpd sends
//! by default) or whose System Name and Port ID are the host and NIC names.

use lldp_agent::port::NeighbourReport;
use lldp_agent::{NodeReport, PortReport};
use serde::Serialize;

use crate::fabric::rundir::{self, State};

/// One end of a link: node and interface.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LinkEnd {
    pub node: String,
    pub port: String,
    /// Set for a host NIC that runs no rocefab agent (`lldp.nic_agent: false`): its MAC, which
    /// the user's own agent (lldpd) puts in the Port ID or Chassis ID.
    #[serde(skip)]
    pub no_agent_mac: Option<String>,
}

impl LinkEnd {
    pub fn new(node: &str, port: &str) -> LinkEnd {
        LinkEnd { node: node.into(), port: port.into(), no_agent_mac: None }
    }

    /// A host NIC with no rocefab agent, known by its MAC.
    pub fn without_agent(node: &str, port: &str, mac: &str) -> LinkEnd {
        LinkEnd { node: node.into(), port: port.into(), no_agent_mac: Some(mac.to_lowercase()) }
    }

    /// Whether neighbour `n` is this end: its System Name and Port ID are this node and
    /// interface (rocefab's agents), or, for a NIC without a rocefab agent, its Port ID or
    /// Chassis ID is the NIC's MAC.
    pub fn is(&self, n: &NeighbourReport) -> bool {
        let i = &n.info;
        let named = i.system_name.as_deref() == Some(self.node.as_str()) && i.port == self.port;
        let by_mac = self.no_agent_mac.as_deref().is_some_and(|m| {
            !m.is_empty()
                && (i.port.eq_ignore_ascii_case(m)
                    || i.chassis_mac.as_deref().is_some_and(|c| c.eq_ignore_ascii_case(m)))
        });
        named || by_mac
    }
}

impl std::fmt::Display for LinkEnd {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.node, self.port)
    }
}

/// What the check found on a link (the worst of its two ends).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum LinkStatus {
    Ok,
    /// An end has no neighbour (never heard, aged out, or removed by a shutdown LLDPDU); `also`
    /// says why the other end gave no data, if it did not (e.g. its agent is down).
    MissingNeighbour {
        at: Vec<String>,
        #[serde(skip_serializing_if = "Vec::is_empty")]
        also: Vec<String>,
    },
    /// An end hears another port than the topology cables it to.
    Miscabled {
        at: String,
        expected: String,
        found: String,
    },
    /// An end reports DCBX mismatches.
    DcbxMismatch {
        details: Vec<String>,
    },
    /// Both ends see each other, and an end also hears other LLDP agents (`at port: who`).
    ExtraNeighbour {
        details: Vec<String>,
    },
    /// An end's node did not answer, or has no such port.
    NoData {
        details: Vec<String>,
    },
    /// The link is cut (`rocefab fail link`, or a failed switch at one end): `since` says when;
    /// `listed` names the ends that still list the other (until the neighbour's TTL runs out,
    /// IEEE 802.1AB rxInfoAge); empty once both have aged it out.
    LinkDown {
        since: String,
        listed: Vec<String>,
    },
}

/// One link's result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LinkCheck {
    pub a: String,
    pub b: String,
    #[serde(flatten)]
    pub status: LinkStatus,
}

/// What one end sees.
enum EndStatus {
    Ok,
    Missing,
    Miscabled(String),
    Mismatch(Vec<String>),
    NoData(String),
    /// The expected neighbour and others (their descriptions).
    Extra(Vec<String>),
    /// A host NIC without a rocefab agent: nothing to ask, the other end decides.
    NoAgent,
}

/// `name:port` of a neighbour.
fn who(n: &NeighbourReport) -> String {
    format!("{}:{}", n.info.system_name.as_deref().unwrap_or(&n.info.chassis), n.info.port)
}

/// Every entry of a port's neighbour table (reports of agents that kept one neighbour carry
/// only `neighbour`).
pub fn entries(p: &PortReport) -> Vec<&NeighbourReport> {
    if p.neighbours.is_empty() {
        p.neighbour.iter().collect()
    } else {
        p.neighbours.iter().collect()
    }
}

pub fn same_msap(a: &NeighbourReport, b: &NeighbourReport) -> bool {
    a.info.chassis == b.info.chassis && a.info.port == b.info.port
}

fn end_status(me: &LinkEnd, peer: &LinkEnd, reports: &[NodeReport]) -> EndStatus {
    if me.no_agent_mac.is_some() {
        return EndStatus::NoAgent;
    }
    let Some(r) = reports.iter().find(|r| r.node == me.node) else {
        return EndStatus::NoData(format!("{} did not answer", me.node));
    };
    let Some(p) = r.ports.iter().find(|p| p.port == me.port) else {
        return EndStatus::NoData(format!("{} reports no port {}", me.node, me.port));
    };
    let all = entries(p);
    let Some(n) = all.iter().find(|n| peer.is(n)) else {
        return match p.neighbour.as_ref().or(all.first().copied()) {
            Some(n) => EndStatus::Miscabled(who(n)),
            None => EndStatus::Missing,
        };
    };
    // DCBX mismatches count when the port negotiates with the expected neighbour.
    if !p.mismatches.is_empty() && p.neighbour.as_ref().is_none_or(|x| same_msap(x, n)) {
        return EndStatus::Mismatch(p.mismatches.iter().map(|m| format!("{me}: {m}")).collect());
    }
    let extra: Vec<String> = all
        .iter()
        .filter(|o| !same_msap(o, n))
        .map(|o| format!("{me} also hears {} (chassis {})", who(o), o.info.chassis))
        .collect();
    if !extra.is_empty() {
        return EndStatus::Extra(extra);
    }
    EndStatus::Ok
}

/// Compares every link `a <-> b` with the neighbour tables: port `a` must see `b` (System Name
/// and Port ID) and `b` must see `a`, with no DCBX mismatch on either side. The worst finding
/// wins: miscabled, missing neighbour (with the other end's lack of data, if any: a dead agent
/// whose neighbour aged it out), no data, DCBX mismatch.
pub fn check_links(links: &[(LinkEnd, LinkEnd)], reports: &[NodeReport]) -> Vec<LinkCheck> {
    links
        .iter()
        .map(|(a, b)| {
            let ends = [(a, b, end_status(a, b, reports)), (b, a, end_status(b, a, reports))];
            let no_data: Vec<String> = ends
                .iter()
                .filter_map(|(_, _, e)| if let EndStatus::NoData(d) = e { Some(d.clone()) } else { None })
                .collect();
            let miscabled = ends.iter().find_map(|(me, peer, e)| match e {
                EndStatus::Miscabled(found) => Some((me.to_string(), peer.to_string(), found.clone())),
                _ => None,
            });
            let missing: Vec<String> = ends
                .iter()
                .filter(|(_, _, e)| matches!(e, EndStatus::Missing))
                .map(|(me, ..)| me.to_string())
                .collect();
            let mismatch: Vec<String> = ends
                .iter()
                .flat_map(|(_, _, e)| if let EndStatus::Mismatch(m) = e { m.clone() } else { Vec::new() })
                .collect();
            let extra: Vec<String> = ends
                .iter()
                .flat_map(|(_, _, e)| if let EndStatus::Extra(m) = e { m.clone() } else { Vec::new() })
                .collect();
            let no_agent =
                ends.iter().filter(|(_, _, e)| matches!(e, EndStatus::NoAgent)).map(|(me, ..)| me.node.clone());
            let mut no_data = no_data;
            if !missing.is_empty() {
                // The silent side is the user's own agent: say so beside the missing neighbour.
                no_data.extend(no_agent.map(|h| {
                    format!("{h} runs no rocefab NIC agent (lldp.nic_agent: false): is its own LLDP agent running?")
                }));
            }
            let status = if let Some((at, expected, found)) = miscabled {
                LinkStatus::Miscabled { at, expected, found }
            } else if !missing.is_empty() {
                LinkStatus::MissingNeighbour { at: missing, also: no_data }
            } else if !no_data.is_empty() {
                LinkStatus::NoData { details: no_data }
            } else if !mismatch.is_empty() {
                LinkStatus::DcbxMismatch { details: mismatch }
            } else if !extra.is_empty() {
                LinkStatus::ExtraNeighbour { details: extra }
            } else {
                LinkStatus::Ok
            };
            LinkCheck { a: a.to_string(), b: b.to_string(), status }
        })
        .collect()
}

impl std::fmt::Display for LinkStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LinkStatus::Ok => f.write_str("ok"),
            LinkStatus::MissingNeighbour { at, also } if also.is_empty() => {
                write!(f, "missing neighbour (at {})", at.join(" and "))
            }
            LinkStatus::MissingNeighbour { at, also } => {
                write!(f, "missing neighbour (at {}); {}", at.join(" and "), also.join("; "))
            }
            LinkStatus::Miscabled { at, expected, found } => {
                write!(f, "miscabled: expected {expected}, found {found} (seen from {at})")
            }
            LinkStatus::DcbxMismatch { details } => write!(f, "DCBX mismatch: {}", details.join("; ")),
            LinkStatus::NoData { details } => write!(f, "no LLDP data: {}", details.join("; ")),
            LinkStatus::ExtraNeighbour { details } => write!(f, "extra neighbour: {}", details.join("; ")),
            LinkStatus::LinkDown { since, listed } if listed.is_empty() => {
                write!(f, "link down {since}: the neighbour has aged out at both ends")
            }
            LinkStatus::LinkDown { since, listed } => {
                write!(f, "link down {since}: {} until the TTL runs out", listed.join(", "))
            }
        }
    }
}

/// Links the fabric has cut (failed links, links of failed switches) are `link down`, whatever
/// LLDP still shows: since when (the event log's last failure of the link or its switch) and
/// which ends still list their neighbour.
pub fn mark_failed(st: &State, results: &mut [LinkCheck]) {
    let cut: Vec<&rundir::LinkState> =
        crate::fabric::routing::cut_links(st).into_iter().filter_map(|i| st.links.get(i)).collect();
    let log = crate::fabric::events::read_log(&st.fabric).unwrap_or_default();
    for r in results.iter_mut() {
        let Some(l) = cut.iter().find(|l| (l.a == r.a && l.b == r.b) || (l.a == r.b && l.b == r.a)) else { continue };
        let target = format!("{} -- {}", l.a, l.b);
        let nodes = [l.a.split(':').next().unwrap_or_default(), l.b.split(':').next().unwrap_or_default()];
        let since = log
            .iter()
            .rev()
            .find(|e| {
                (e.event == "link down" && e.target == target)
                    || (e.event == "switch down" && nodes.contains(&e.target.as_str()))
            })
            .map_or_else(
                || "(cut)".to_string(),
                |e| format!("since {} emulated ({} {})", crate::text::duration(e.emulated_ns), e.event, e.target),
            );
        let listed = match &r.status {
            LinkStatus::Ok | LinkStatus::DcbxMismatch { .. } | LinkStatus::ExtraNeighbour { .. } => {
                vec![format!("{} and {} still list each other", r.a, r.b)]
            }
            LinkStatus::MissingNeighbour { at, .. } => [(&r.a, &r.b), (&r.b, &r.a)]
                .into_iter()
                .filter(|(me, _)| !at.contains(me))
                .map(|(me, peer)| format!("{me} still lists {peer}"))
                .collect(),
            _ => Vec::new(),
        };
        r.status = LinkStatus::LinkDown { since, listed };
    }
}
