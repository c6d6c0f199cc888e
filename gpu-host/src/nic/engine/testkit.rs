//! Test helpers: two engines wired back to back over a simulated link, on an injected clock.
use std::collections::VecDeque;

use super::Engine;
use crate::nic::job::Job;
use crate::segment::PathMtu;

pub(super) const A_MAC: &str = "02:00:00:00:00:0a";
pub(super) const B_MAC: &str = "02:00:00:00:00:0b";

pub(super) fn jobs(len: u64, rate: u64, dcqcn: bool) -> (Job, Job) {
    let a = format!(
        r#"{{"name":"a","nics":[{{"name":"a0","mac":"{A_MAC}","ip":"10.9.0.1","line_rate_bps":{rate},"dcqcn":{dcqcn}}}],
           "qps":[{{"qpn":17,"nic":0,"peer_qpn":33,"peer_ip":"10.9.0.2","next_hop_mac":"{B_MAC}",
                    "send":{{"psn":16777000,"remote_va":8192,"rkey":5,"len":{len},"seed":9,"window_packets":32,
                             "retransmit_timeout_ns":2000000}}}}]}}"#
    );
    let b = format!(
        r#"{{"name":"b","nics":[{{"name":"b0","mac":"{B_MAC}","ip":"10.9.0.2","line_rate_bps":{rate}}}],
           "qps":[{{"qpn":33,"nic":0,"peer_qpn":17,"peer_ip":"10.9.0.1","next_hop_mac":"{A_MAC}",
                    "recv":{{"psn":16777000,"va":8192,"rkey":5,"len":{len},"expect_seed":9}}}}]}}"#
    );
    (serde_json::from_str(&a).unwrap(), serde_json::from_str(&b).unwrap())
}

/// A wire between two engines with a fixed one-way delay; `tamper` may drop (return
/// false) or modify a frame in flight.
struct Link {
    delay: u64,
    q: VecDeque<(u64, usize, Vec<u8>)>,
}

pub(super) fn run(
    a: &mut Engine,
    b: &mut Engine,
    now: u64,
    until: u64,
    tamper: impl FnMut(usize, &mut Vec<u8>, u64) -> bool,
    at_time: impl FnMut(u64, &mut Engine),
) -> u64 {
    run_with_delay(5_000, a, b, now, until, tamper, at_time)
}

pub(super) fn run_with_delay(
    delay: u64,
    a: &mut Engine,
    b: &mut Engine,
    now: u64,
    until: u64,
    tamper: impl FnMut(usize, &mut Vec<u8>, u64) -> bool,
    at_time: impl FnMut(u64, &mut Engine),
) -> u64 {
    drive(delay, false, a, b, now, until, tamper, at_time)
}

/// [`run_with_delay`]; with `serve`, a finished engine keeps running, as hostd's data
/// thread does while it lingers (`daemon::serve`), instead of exiting.
#[expect(clippy::too_many_arguments, reason = "run_with_delay's inputs and the mode")]
pub(super) fn drive(
    delay: u64,
    serve: bool,
    a: &mut Engine,
    b: &mut Engine,
    mut now: u64,
    until: u64,
    mut tamper: impl FnMut(usize, &mut Vec<u8>, u64) -> bool,
    mut at_time: impl FnMut(u64, &mut Engine),
) -> u64 {
    let mut link = Link { delay, q: VecDeque::new() };
    let mut buf = vec![0u8; 9000];
    while now < until && !(a.finished() && b.finished()) {
        at_time(now, a);
        for (dir, e) in [(0usize, &mut *a), (1, &mut *b)] {
            // A finished engine has exited, as hostd ends its data thread without linger: it
            // sends nothing more and what reaches it is lost.
            if e.finished() && !serve {
                continue;
            }
            e.poll(now);
            while let Some(n) = e.next_tx(0, &mut buf, now) {
                let mut f = buf[..n].to_vec();
                if tamper(dir, &mut f, now) {
                    link.q.push_back((now + link.delay, dir, f));
                }
            }
        }
        while link.q.front().is_some_and(|(t, _, _)| *t <= now) {
            let (_, dir, f) = link.q.pop_front().unwrap();
            let to = if dir == 0 { &mut *b } else { &mut *a };
            if serve || !to.finished() {
                to.on_frame(0, &f, now);
            }
        }
        let mut next = [a.next_deadline(now), b.next_deadline(now), link.q.front().map(|x| x.0)]
            .into_iter()
            .flatten()
            .min()
            .unwrap_or(now + 1_000_000);
        next = next.clamp(now + 1, now + 1_000_000);
        now = next;
    }
    now
}

pub(super) fn engines(len: u64, rate: u64, dcqcn: bool) -> (Engine, Engine) {
    let (ja, jb) = jobs(len, rate, dcqcn);
    (Engine::from_job(&ja, &[PathMtu::Mtu1024], 0).unwrap(), Engine::from_job(&jb, &[PathMtu::Mtu1024], 0).unwrap())
}
