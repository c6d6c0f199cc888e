//! End-to-end runs of the RC requester and responder state machines over an emulated
//! link (fixed one-way delay, loss and CE-marking injected by closures), driven by an
//! injected clock: go-back-N recovers every loss and the data placed in the responder's
//! memory region equals the sender's buffer byte for byte.

use std::collections::VecDeque;

use gpu_host::dcqcn::NotificationPoint;
use gpu_host::desc::AckPacket;
use gpu_host::psn::Psn;
use gpu_host::receiver::{MemoryRegion, Receiver, ReceiverConfig};
use gpu_host::segment::{PathMtu, SegmentMode, WriteMessage};
use gpu_host::sender::{Completion, Sender, SenderConfig, TxPacket};

const REMOTE_VA: u64 = 0x7f12_0000_0000;
const RKEY: u32 = 0x1234;
const ONE_WAY_NS: u64 = 2_000;

/// Deterministic pseudo-random bytes (xorshift64*).
fn pattern(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed | 1;
    let mut v = Vec::with_capacity(len + 8);
    while v.len() < len {
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        v.extend_from_slice(&x.wrapping_mul(0x2545_F491_4F6C_DD1D).to_le_bytes());
    }
    v.truncate(len);
    v
}

type DropData<'a> = Box<dyn FnMut(u64, &TxPacket) -> bool + 'a>;
type DropAck<'a> = Box<dyn FnMut(u64, &AckPacket) -> bool + 'a>;

struct Link<'a> {
    /// Drop this data packet? Argument: transmission number (0-based), packet.
    drop_data: DropData<'a>,
    /// Drop this ACK/NAK? Argument: ACK number (0-based), ack.
    drop_ack: DropAck<'a>,
    /// Mark this data packet CE? Argument: send time.
    ce: Box<dyn FnMut(u64) -> bool + 'a>,
}

impl<'a> Link<'a> {
    fn lossless() -> Link<'a> {
        Link { drop_data: Box::new(|_, _| false), drop_ack: Box::new(|_, _| false), ce: Box::new(|_| false) }
    }
}

struct RunResult {
    completions: Vec<Completion>,
    end_ns: u64,
    cnps: u64,
    data_dropped: u64,
    acks_dropped: u64,
}

/// Runs until the sender has completed everything (panics past `max_ns` of emulated time).
fn run(tx: &mut Sender, rx: &mut Receiver, src: &[u8], link: &mut Link<'_>, max_ns: u64) -> RunResult {
    let mut fwd: VecDeque<(u64, TxPacket, bool)> = VecDeque::new();
    let mut rev: VecDeque<(u64, AckPacket)> = VecDeque::new();
    let mut cnp_q: VecDeque<u64> = VecDeque::new();
    let mut np = NotificationPoint::default();
    let mut now = 0u64;
    let (mut n_tx, mut n_ack, mut data_dropped, mut acks_dropped, mut cnps) = (0u64, 0u64, 0u64, 0u64, 0u64);
    let mut completions = Vec::new();
    loop {
        // Deliver data packets due now.
        while fwd.front().is_some_and(|f| f.0 <= now) {
            let (_, p, ce) = fwd.pop_front().unwrap();
            let off = p.local_addr as usize;
            let out = rx.on_packet(&p.pkt, &src[off..off + p.pkt.payload_len as usize], ce, now);
            if let Some(a) = out.ack {
                if (link.drop_ack)(n_ack, &a) {
                    acks_dropped += 1;
                } else {
                    rev.push_back((now + ONE_WAY_NS, a));
                }
                n_ack += 1;
            }
            if ce && np.on_ce(now, 0) {
                cnps += 1;
                cnp_q.push_back(now + ONE_WAY_NS);
            }
        }
        while rev.front().is_some_and(|r| r.0 <= now) {
            let (_, a) = rev.pop_front().unwrap();
            tx.on_ack(&a, now).expect("ack processing");
        }
        while cnp_q.front().is_some_and(|&t| t <= now) {
            cnp_q.pop_front();
            tx.on_cnp(now);
        }
        if let Some(a) = rx.poll(now) {
            if (link.drop_ack)(n_ack, &a) {
                acks_dropped += 1;
            } else {
                rev.push_back((now + ONE_WAY_NS, a));
            }
            n_ack += 1;
        }
        tx.poll(now).expect("sender timers");
        while let Some(c) = tx.pop_completion() {
            completions.push(c);
        }
        if tx.is_idle() {
            return RunResult { completions, end_ns: now, cnps, data_dropped, acks_dropped };
        }
        while let Some(p) = tx.next_packet(now) {
            if (link.drop_data)(n_tx, &p) {
                data_dropped += 1;
            } else {
                let ce = (link.ce)(now);
                fwd.push_back((now + ONE_WAY_NS, p, ce));
            }
            n_tx += 1;
        }
        let next = [
            tx.next_event_time(now),
            fwd.front().map(|f| f.0),
            rev.front().map(|r| r.0),
            cnp_q.front().copied(),
            rx.next_deadline(),
        ]
        .into_iter()
        .flatten()
        .min()
        .expect("something must be pending while the sender is not idle");
        assert!(next >= now, "time must not go backwards");
        now = next.max(now);
        assert!(now <= max_ns, "transfer did not finish by {max_ns} ns: {:?}", tx.counters());
    }
}

fn endpoints(len: usize, mtu: PathMtu, mode: SegmentMode, initial_psn: Psn, dcqcn: bool) -> (Sender, Receiver) {
    let mut sc = SenderConfig::new(100_000_000_000);
    sc.mtu = mtu;
    sc.mode = mode;
    sc.initial_psn = initial_psn;
    sc.retransmit_timeout_ns = 100_000;
    if !dcqcn {
        sc.dcqcn = None;
    }
    let mut rc = ReceiverConfig::new(mtu);
    rc.initial_psn = initial_psn;
    rc.ack_every = 8;
    let tx = Sender::new(sc, 0).unwrap();
    let rx = Receiver::new(rc, vec![MemoryRegion { va: REMOTE_VA, rkey: RKEY, data: vec![0; len] }]).unwrap();
    (tx, rx)
}

#[test]
fn go_back_n_64mib_with_every_100th_packet_dropped() {
    let len = 64 << 20;
    let src = pattern(len, 0x5eed);
    // Start near the top of the PSN space so the transfer crosses 0xFFFFFF → 0.
    let (mut tx, mut rx) = endpoints(len, PathMtu::Mtu4096, SegmentMode::FirstMiddleLast, Psn::new(0xFF_F000), false);
    tx.post_write(7, 0, WriteMessage { remote_va: REMOTE_VA, rkey: RKEY, len: len as u32 }).unwrap();
    let mut link = Link::lossless();
    link.drop_data = Box::new(|n, _| n % 100 == 99);
    let r = run(&mut tx, &mut rx, &src, &mut link, 10_000_000_000);

    assert_eq!(r.completions, vec![Completion { wr_id: 7, len: len as u32 }]);
    assert!(rx.region(RKEY).unwrap().data == src, "placed data differs from the source");
    let c = *tx.counters();
    let packets = (len / 4096) as u64;
    assert!(r.data_dropped >= packets / 100, "dropped {}", r.data_dropped);
    assert!(c.retransmitted_packets > 0);
    assert!(c.naks_received > 0 && c.naks_received <= r.data_dropped);
    assert_eq!(c.packets_sent, packets + c.retransmitted_packets);
    assert_eq!(rx.counters().packets_placed, packets);
    assert_eq!(rx.counters().bytes_placed, len as u64);
    assert_eq!(rx.msn(), 1);
    assert_eq!(tx.snd_una(), Psn::new(0xFF_F000).add(packets as u32), "PSN wrapped past 0xFFFFFF");
    eprintln!(
        "64 MiB: {} packets sent, {} retransmitted, {} dropped, {} NAKs, {} timeouts, {} µs emulated",
        c.packets_sent,
        c.retransmitted_packets,
        r.data_dropped,
        c.naks_received,
        c.timeouts,
        r.end_ns / 1000
    );
}

#[test]
fn tail_loss_recovers_by_timeout() {
    // The last packet of each message is lost once: no later packet can reveal the gap,
    // so only the retransmit timeout recovers.
    let len = 100 * 1024;
    let src = pattern(len, 1);
    let (mut tx, mut rx) = endpoints(len, PathMtu::Mtu1024, SegmentMode::FirstMiddleLast, Psn::ZERO, false);
    tx.post_write(1, 0, WriteMessage { remote_va: REMOTE_VA, rkey: RKEY, len: len as u32 }).unwrap();
    let mut dropped_once = false;
    let mut link = Link::lossless();
    link.drop_data = Box::new(|_, p| {
        let last = p.pkt.psn == Psn::new(99);
        if last && !dropped_once {
            dropped_once = true;
            return true;
        }
        false
    });
    let r = run(&mut tx, &mut rx, &src, &mut link, 10_000_000);
    assert_eq!(r.completions.len(), 1);
    assert_eq!(tx.counters().timeouts, 1);
    assert_eq!(tx.counters().naks_received, 0);
    assert!(r.end_ns >= 100_000, "completion waited for the 100 µs timeout");
    assert_eq!(rx.region(RKEY).unwrap().data, src);
}

#[test]
fn lost_acks_recover_and_duplicates_are_counted() {
    // Drop the first 5 ACKs: the sender times out, resends, the responder sees duplicates
    // and re-ACKs them.
    let len = 64 * 1024;
    let src = pattern(len, 2);
    let (mut tx, mut rx) = endpoints(len, PathMtu::Mtu1024, SegmentMode::FirstMiddleLast, Psn::ZERO, false);
    tx.post_write(1, 0, WriteMessage { remote_va: REMOTE_VA, rkey: RKEY, len: len as u32 }).unwrap();
    let mut link = Link::lossless();
    link.drop_ack = Box::new(|n, _| n < 8);
    let r = run(&mut tx, &mut rx, &src, &mut link, 10_000_000);
    assert_eq!(r.acks_dropped, 8);
    assert_eq!(r.completions.len(), 1);
    assert!(tx.counters().timeouts >= 1);
    assert!(rx.counters().duplicates > 0);
    assert_eq!(rx.region(RKEY).unwrap().data, src);
}

#[test]
fn write_only_mode_with_losses_and_many_messages() {
    let len = 4 << 20;
    let src = pattern(len, 3);
    let (mut tx, mut rx) =
        endpoints(len, PathMtu::Mtu2048, SegmentMode::WriteOnlyPerPacket, Psn::new(0xFF_FF00), false);
    // 16 messages of 256 KiB into consecutive remote ranges.
    let chunk = len / 16;
    for i in 0..16 {
        let off = (i * chunk) as u64;
        tx.post_write(i as u64, off, WriteMessage { remote_va: REMOTE_VA + off, rkey: RKEY, len: chunk as u32 })
            .unwrap();
    }
    let mut link = Link::lossless();
    link.drop_data = Box::new(|n, _| n % 37 == 5);
    let r = run(&mut tx, &mut rx, &src, &mut link, 10_000_000_000);
    let ids: Vec<u64> = r.completions.iter().map(|c| c.wr_id).collect();
    assert_eq!(ids, (0..16).collect::<Vec<_>>(), "completions in posting order");
    assert_eq!(rx.region(RKEY).unwrap().data, src);
    assert_eq!(rx.msn(), (len / 2048) as u32, "every Write Only is its own message");
    assert!(tx.counters().retransmitted_packets > 0);
}

#[test]
fn ce_marking_triggers_paced_cnps_and_dcqcn_slows_the_sender() {
    let len = 8 << 20;
    let src = pattern(len, 4);
    // At the DCQCN minimum rate (100 Mb/s) eight coalesced 4 KiB packets take longer than
    // the 100 µs retransmit timeout: the responder's 10 µs coalescing delay keeps ACKs
    // flowing, so there are no spurious retransmissions.
    let (mut tx, mut rx) = endpoints(len, PathMtu::Mtu4096, SegmentMode::FirstMiddleLast, Psn::ZERO, true);
    tx.post_write(1, 0, WriteMessage { remote_va: REMOTE_VA, rkey: RKEY, len: len as u32 }).unwrap();
    let mut link = Link::lossless();
    link.ce = Box::new(|_| true);
    let r = run(&mut tx, &mut rx, &src, &mut link, 10_000_000_000);
    assert_eq!(rx.region(RKEY).unwrap().data, src);
    let packets = (len / 4096) as u64;
    assert_eq!(rx.counters().ce_marked, packets, "no retransmissions");
    assert_eq!(tx.counters().retransmitted_packets, 0);
    // At most one CNP per 50 µs of receive time.
    assert!(r.cnps >= 2, "cnps {}", r.cnps);
    assert!(r.cnps <= r.end_ns / 50_000 + 1, "cnps {} over {} ns", r.cnps, r.end_ns);
    assert_eq!(tx.counters().cnps_received, r.cnps);
    let rp = tx.reaction_point().unwrap();
    assert!(rp.rate() < 100_000_000_000 / 2, "rate {} after {} CNPs", rp.rate(), r.cnps);
    // A line-rate transfer of 8 MiB takes ~0.7 ms; throttled it takes much longer.
    assert!(r.end_ns > 2_000_000, "end {} ns", r.end_ns);

    // Same transfer without CE: no CNPs, runs at line rate.
    let (mut tx2, mut rx2) = endpoints(len, PathMtu::Mtu4096, SegmentMode::FirstMiddleLast, Psn::ZERO, true);
    tx2.post_write(1, 0, WriteMessage { remote_va: REMOTE_VA, rkey: RKEY, len: len as u32 }).unwrap();
    let r2 = run(&mut tx2, &mut rx2, &src, &mut Link::lossless(), 10_000_000_000);
    assert_eq!(r2.cnps, 0);
    assert_eq!(tx2.rate_bps(), 100_000_000_000);
    assert!(r2.end_ns < 1_000_000, "end {} ns", r2.end_ns);
}
