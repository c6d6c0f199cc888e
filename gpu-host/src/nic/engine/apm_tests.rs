//! Automatic path migration on two-port NICs (book Fig. 13-5, IBTA Vol. 1 17.2.8): two engines
//! with two ports each, port p of one wired to port p of the other, on an injected clock.
use std::collections::VecDeque;

use super::Engine;
use crate::nic::job::{Job, MigrationCause};
use crate::segment::PathMtu;
use rocefab_wire::roce::ParsedFrame;

const LEN: u64 = 400_000;
/// Local ACK timeout of the requester (ns) and its retry count (the default, 7).
const TIMEOUT_NS: u64 = 200_000;
const RETRIES: u64 = 7;

/// A's QP 17 writes `LEN` bytes to B's QP 33 over port 0; with `alt`, port 1 is loaded at both
/// ends as the alternate path.
fn engines(alt: bool) -> (Engine, Engine) {
    let nic = |name: &str, mac: &str, ip: &str| {
        format!(r#"{{"name":"{name}","mac":"{mac}","ip":"{ip}","line_rate_bps":10000000000,"dcqcn":false}}"#)
    };
    let alt_of = |peer_ip: &str, gw: &str| {
        if alt {
            format!(r#","alt":{{"nic":1,"peer_ip":"{peer_ip}","next_hop_mac":"{gw}"}}"#)
        } else {
            String::new()
        }
    };
    let a = format!(
        r#"{{"name":"a","nics":[{},{}],
           "qps":[{{"qpn":17,"nic":0,"peer_qpn":33,"peer_ip":"10.1.0.2","next_hop_mac":"02:00:00:00:01:fe"{},
                    "send":{{"psn":100,"remote_va":8192,"rkey":5,"len":{LEN},"seed":9,"window_packets":32,
                             "retransmit_timeout_ns":{TIMEOUT_NS}}}}}]}}"#,
        nic("a0", "02:00:00:00:01:01", "10.1.0.1"),
        nic("a1", "02:00:00:00:02:01", "10.2.0.1"),
        alt_of("10.2.0.2", "02:00:00:00:02:fe"),
    );
    let b = format!(
        r#"{{"name":"b","nics":[{},{}],
           "qps":[{{"qpn":33,"nic":0,"peer_qpn":17,"peer_ip":"10.1.0.1","next_hop_mac":"02:00:00:00:01:fe"{},
                    "recv":{{"psn":100,"va":8192,"rkey":5,"len":{LEN},"expect_seed":9}}}}]}}"#,
        nic("b0", "02:00:00:00:01:02", "10.1.0.2"),
        nic("b1", "02:00:00:00:02:02", "10.2.0.2"),
        alt_of("10.2.0.1", "02:00:00:00:02:fe"),
    );
    let (ja, jb): (Job, Job) = (serde_json::from_str(&a).unwrap(), serde_json::from_str(&b).unwrap());
    ja.validate().unwrap();
    jb.validate().unwrap();
    let mtus = [PathMtu::Mtu1024, PathMtu::Mtu1024];
    (Engine::from_job(&ja, &mtus, 0).unwrap(), Engine::from_job(&jb, &mtus, 0).unwrap())
}

/// What crossed each port's wire, by direction (0: A to B, 1: B to A).
#[derive(Default)]
struct Wires {
    /// Frames per port and direction.
    frames: [[u64; 2]; 2],
    /// Frames per port and direction with MigReq set.
    migreq: [[u64; 2]; 2],
    /// The last time a frame entered port 0's wire, by direction.
    last_on_port0: [u64; 2],
}

/// Runs both engines until both finished or `until`; `cut(now)` says whether port 0's wire
/// drops everything at `now`, `at(now, a, b)` may change the links.
fn drive(
    a: &mut Engine,
    b: &mut Engine,
    until: u64,
    cut: impl Fn(u64) -> bool,
    mut at: impl FnMut(u64, &mut Engine, &mut Engine),
) -> (u64, Wires) {
    const DELAY: u64 = 2_000;
    let mut w = Wires::default();
    let mut q: VecDeque<(u64, usize, usize, Vec<u8>)> = VecDeque::new();
    let mut buf = vec![0u8; 9000];
    let mut now = 0;
    while now < until && !(a.finished() && b.finished()) {
        at(now, a, b);
        for (dir, e) in [(0usize, &mut *a), (1, &mut *b)] {
            e.poll(now);
            for port in 0..2 {
                while let Some(n) = e.next_tx(port, &mut buf, now) {
                    let f = buf[..n].to_vec();
                    w.frames[port][dir] += 1;
                    if ParsedFrame::parse(&f).unwrap().bth().migreq {
                        w.migreq[port][dir] += 1;
                    }
                    if port == 0 {
                        w.last_on_port0[dir] = now;
                    }
                    if !(port == 0 && cut(now)) {
                        q.push_back((now + DELAY, dir, port, f));
                    }
                }
            }
        }
        while q.front().is_some_and(|x| x.0 <= now) {
            let (_, dir, port, f) = q.pop_front().unwrap();
            let to = if dir == 0 { &mut *b } else { &mut *a };
            to.on_frame(port, &f, now);
        }
        let next = [a.next_deadline(now), b.next_deadline(now), q.front().map(|x| x.0)]
            .into_iter()
            .flatten()
            .min()
            .unwrap_or(now + 1_000_000);
        now = next.clamp(now + 1, now + 1_000_000);
    }
    (now, w)
}

/// `e`'s report, data verified.
fn rep(e: &Engine) -> crate::nic::job::Report {
    e.report("apm", 100_000_000)
}

/// The one QP's migration in `e`'s report.
fn migration(e: &Engine) -> Option<(String, MigrationCause)> {
    let r = rep(e);
    r.qps[0].migration.as_ref().map(|m| (r.qps[0].nic.clone(), m.cause))
}

const CUT_AT: u64 = 100_000;

/// Which engine sees port 0 lose carrier at [`CUT_AT`]; the wire of port 0 drops every frame
/// from then on in any case.
#[derive(Clone, Copy, PartialEq)]
enum Cut {
    /// Nobody: the link keeps carrier (a dead optic, `--silent`).
    Silent,
    A,
    B,
}

/// Runs the transfer with port 0 cut at [`CUT_AT`] as `cut` says; the engines, what crossed the
/// wires, and how many QPs the carrier loss moved.
fn run_cut(alt: bool, cut: Cut) -> (Engine, Engine, Wires, usize) {
    run_cut_with(alt, cut, |_, _| {})
}

/// [`run_cut`], with `on_a(now, a)` called at every step before the cut is applied.
fn run_cut_with(alt: bool, cut: Cut, mut on_a: impl FnMut(u64, &mut Engine)) -> (Engine, Engine, Wires, usize) {
    let (mut a, mut b) = engines(alt);
    let mut moved = 0;
    let (_, w) = drive(
        &mut a,
        &mut b,
        100_000_000,
        |now| now >= CUT_AT,
        |now, a, b| {
            on_a(now, a);
            let e = match cut {
                Cut::Silent => return,
                Cut::A => a,
                Cut::B => b,
            };
            if now >= CUT_AT && e.link_up(0) {
                moved = e.set_link(0, false, now);
            }
        },
    );
    (a, b, w, moved)
}

/// Both reports, after checking that the data arrived whole.
fn verified(a: &Engine, b: &Engine) -> (crate::nic::job::Report, crate::nic::job::Report) {
    let (ra, rb) = (rep(a), rep(b));
    assert!(ra.ok && rb.ok, "{:?} / {:?}", ra.error, rb.error);
    assert_eq!(rb.qps[0].verified, Some(true));
    (ra, rb)
}

#[test]
fn the_requesters_port_going_down_moves_both_ends_to_port_1_and_the_data_verifies() {
    let (a, b, w, moved) = run_cut(true, Cut::A);
    assert_eq!(moved, 1, "the one QP on port 0 migrates");
    let (ra, rb) = verified(&a, &b);
    assert!(w.frames[0][0] > 0 && w.frames[1][0] > 0, "data crossed both ports: {:?}", w.frames);
    assert_eq!(migration(&a), Some(("a1".into(), MigrationCause::LinkDown)));
    assert_eq!(migration(&b), Some(("b1".into(), MigrationCause::PeerMigrated)));
    let b_moved = rb.qps[0].migration.as_ref().unwrap().at_ns;
    assert!(w.last_on_port0[0] < CUT_AT, "A sent nothing on port 0 after the cut: {:?}", w.last_on_port0);
    assert!(w.last_on_port0[1] < b_moved, "B nothing after it migrated at {b_moved} ns: {:?}", w.last_on_port0);
    assert_eq!(w.migreq[0], [0, 0], "MigReq is clear while the alternate path is armed");
    assert_eq!(w.migreq[1], w.frames[1], "every frame on the alternate path carries MigReq");
    assert_eq!(ra.qps[0].timeouts, 0, "the local link loss needs no timeout");
    assert!(ra.qps[0].retransmitted_packets > 0, "what was in flight on port 0 went again");
    let m = ra.qps[0].migration.as_ref().unwrap();
    assert_eq!(m.from_nic, "a0");
    assert!((CUT_AT..CUT_AT + 1_000).contains(&m.at_ns), "at the cut: {} ns", m.at_ns);
    assert!((m.at_ns..m.at_ns + 10_000).contains(&b_moved), "B follows one frame later: {b_moved} ns");
}

#[test]
fn a_responders_port_going_down_carries_the_requester_over_with_its_next_ack() {
    let (a, b, w, moved) = run_cut(true, Cut::B);
    assert_eq!(moved, 1);
    let (ra, _) = verified(&a, &b);
    assert_eq!(migration(&b), Some(("b1".into(), MigrationCause::LinkDown)));
    // The ACK B owed goes out on port 1 with MigReq: A follows without waiting for a timeout.
    assert_eq!(migration(&a), Some(("a1".into(), MigrationCause::PeerMigrated)));
    assert_eq!(ra.qps[0].timeouts, 0);
    assert!(w.migreq[1][1] > 0 && w.migreq[1][0] > 0);
}

#[test]
fn a_silent_failure_is_found_by_the_retries_and_both_ends_move() {
    let (a, b, w, _) = run_cut(true, Cut::Silent);
    let (ra, _) = verified(&a, &b);
    assert_eq!(migration(&a), Some(("a1".into(), MigrationCause::RetryExhausted)));
    assert_eq!(migration(&b), Some(("b1".into(), MigrationCause::PeerMigrated)));
    // Nobody sees the failure: the requester's first timeout (its timer restarted by the last
    // ACK, within a few µs of the cut) and its 7 retries, then it moves.
    assert_eq!(ra.qps[0].timeouts, RETRIES + 1);
    let at = ra.qps[0].migration.as_ref().unwrap().at_ns;
    let expect = CUT_AT + (RETRIES + 1) * TIMEOUT_NS;
    assert!((expect - 5_000..expect + 5_000).contains(&at), "migrated at {at} ns, expected about {expect}");
    assert!(w.migreq[1][0] > 0 && w.migreq[1][1] > 0);
}

#[test]
fn without_an_alternate_path_a_dead_port_ends_in_retry_exhaustion_and_the_stall_says_why() {
    let mut stall = None;
    let (a, _, w, moved) = run_cut_with(false, Cut::A, |now, a| {
        if now >= CUT_AT + 2 * TIMEOUT_NS && stall.is_none() {
            stall = a.stalls(now).into_iter().next();
        }
    });
    assert_eq!(moved, 0, "no QP has an alternate path");
    assert_eq!(w.frames[1], [0, 0], "nothing uses port 1");
    let ra = rep(&a);
    assert!(!ra.ok);
    assert!(ra.qps[0].error.as_deref().is_some_and(|e| e.contains("retry")), "{:?}", ra.qps[0].error);
    assert_eq!(ra.qps[0].migration, None);
    assert_eq!(ra.qps[0].timeouts, RETRIES + 1);
    assert!(w.last_on_port0[0] < CUT_AT, "a port without carrier sends nothing");
    let stall = stall.expect("a stall while the retries ran");
    assert!(stall.waiting_for.contains("no carrier"), "{}", stall.waiting_for);
}

#[test]
fn a_port_that_comes_back_takes_no_qp_back() {
    let (mut a, mut b) = engines(true);
    let (_, w) = drive(
        &mut a,
        &mut b,
        100_000_000,
        |now| (CUT_AT..2 * CUT_AT).contains(&now),
        |now, a, _| {
            if (CUT_AT..2 * CUT_AT).contains(&now) && a.link_up(0) {
                a.set_link(0, false, now);
            }
            if now >= 2 * CUT_AT && !a.link_up(0) {
                a.set_link(0, true, now);
            }
        },
    );
    assert!(rep(&a).ok && rep(&b).ok);
    assert!(w.last_on_port0[0] < CUT_AT, "the QP stays on port 1 after port 0 is back");
    assert!(w.frames[1][0] > 0);
    assert_eq!(migration(&a), Some(("a1".into(), MigrationCause::LinkDown)));
}

#[test]
fn no_qp_moves_to_a_port_without_carrier() {
    // The alternate port is down first: the primary's loss then moves nothing, and the silent
    // loss of the primary path ends in retry exhaustion as without an alternate path.
    let port1_down = |now: u64, a: &mut Engine| {
        if now == 0 {
            a.set_link(1, false, now);
        }
    };
    for cut in [Cut::A, Cut::Silent] {
        let (a, _, w, moved) = run_cut_with(true, cut, port1_down);
        assert_eq!((moved, w.frames[1]), (0, [0, 0]), "its alternate port has no carrier");
        let ra = rep(&a);
        assert_eq!(ra.qps[0].migration, None);
        assert!(ra.qps[0].error.as_deref().is_some_and(|e| e.contains("retry")), "{:?}", ra.qps[0].error);
        assert_eq!(ra.qps[0].timeouts, RETRIES + 1);
    }
}
