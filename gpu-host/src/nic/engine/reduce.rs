//! The collective on one host: the rank buffers, the transfers of its [`CollectiveSpec`] queued
//! per QP in id order, and the reduction that runs them forward (ring AllReduce = ReduceScatter
//! then AllGather, incast, all-to-all, broadcast; [`super::super::collective_job`] builds the
//! spec). A received transfer is applied (u32 wrapping sum or copy) the moment its whole PSN
//! range completed; a send is posted once the transfers it depends on are done; the final
//! buffers are verified against the closed-form expectation of every rank.
use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

use super::index::IndexTable;
use super::Qp;
use crate::nic::job::{self, CollOp, CollectiveSpec};
use crate::nic::pattern;
use crate::segment::{packet_count, WriteMessage};

/// Errors in a job's collective section.
#[derive(Debug, thiserror::Error)]
pub enum CollectiveSpecError {
    #[error("collective: rank {0} listed twice")]
    RankListedTwice(u32),
    #[error("collective: transfer ids must be below {MAX_TRANSFER_ID}")]
    TransferIdTooLarge,
    #[error("collective: rank {0} is not one of this host's ranks")]
    ForeignRank(u32),
    #[error("qp {0}: collective QP missing")]
    QpMissing(u32),
}

/// it is posted (so a retransmission sends what was posted, whatever the rank buffer holds
/// later) and are free again once it completed; RC completes in posting order. A transfer
/// never straddles the end. Sized like the responders' staging rings (two transfers and two
/// windows), it keeps a 64-rank AllReduce's requesters at 1.5 MiB each instead of the
/// 31.5 MiB that appending every transfer needs.
#[derive(Debug)]
pub(super) struct SendRing {
    /// Ring size in bytes (the length of the QP's `send_buf`).
    pub(super) cap: u64,
    /// (start, len) of the posted transfers that have not completed, oldest first.
    pub(super) posted: VecDeque<(u64, u64)>,
}

impl SendRing {
    /// Where a transfer of `len` bytes fits now, if anywhere.
    pub(super) fn place(&self, len: u64) -> Option<u64> {
        let (Some(&(tail, _)), Some(&(start, l))) = (self.posted.front(), self.posted.back()) else {
            return (len <= self.cap).then_some(0);
        };
        let head = start + l;
        if head > tail {
            // In use: tail..head.
            if head + len <= self.cap {
                Some(head)
            } else {
                (len <= tail).then_some(0)
            }
        } else {
            // In use: tail..cap and 0..head.
            (head + len <= tail).then_some(head)
        }
    }
}

/// Collective state: rank buffers and the progress of the transfers (see
/// [`CollectiveSpec`]).
///
/// Progress is incremental: a frame makes only its own QP's queues "dirty" (a received
/// message may complete that QP's next transfer; an ACK may free room in its send ring), a
/// completed transfer makes dirty the send queues that wait for it, and only dirty queues are
/// looked at. A host of a 512-rank all-to-all has 8,176 of them: walking all on every frame
/// took most of a loaded host's CPU.
pub(super) struct Coll {
    pub(super) spec: CollectiveSpec,
    pub(super) bufs: Vec<Vec<u8>>,
    pub(super) rank_idx: IndexTable,
    /// Completed transfers, by transfer id.
    pub(super) done: Vec<bool>,
    /// (qp index, indices into `spec.sends` in id order, next to post).
    pub(super) sendq: Vec<(usize, Vec<usize>, usize)>,
    /// (qp index, transfers in id order, applied so far).
    pub(super) recvq: Vec<(usize, Vec<RecvStep>, usize)>,
    /// Per QP index, its entry in `sendq` / `recvq` ([`NONE`] if none).
    send_of_qp: Vec<u32>,
    recv_of_qp: Vec<u32>,
    /// Per transfer id, the `sendq` entries with a send that depends on it, and the local
    /// transfers (indices into `spec.locals`) that do.
    dependents: Vec<Vec<u32>>,
    local_dependents: Vec<Vec<u32>>,
    /// Queues to look at, each at most once (`*_queued`); capacity for all, so marking never
    /// allocates.
    dirty_send: Vec<u32>,
    send_queued: Vec<bool>,
    dirty_recv: Vec<u32>,
    recv_queued: Vec<bool>,
    dirty_local: Vec<u32>,
    local_queued: Vec<bool>,
    /// Queues and local transfers not yet through.
    sends_left: usize,
    recvs_left: usize,
    locals_left: usize,
    /// The host's NVLink on the wall clock: (bandwidth bit/s, latency ns).
    nvlink: Option<(u64, u64)>,
    /// Per local rank (by `rank_idx`), when its NVLink is free again (wall ns).
    nvlink_free: Vec<u64>,
    /// NVLink transfers under way, earliest landing first: (when they land, index into
    /// `spec.locals`).
    nvlink_pending: BinaryHeap<Reverse<(u64, usize)>>,
    locals_started: Vec<bool>,
    /// Bytes moved over NVLink.
    pub(super) nvlink_bytes: u64,
    /// When the last NVLink transfer landed (wall ns): the collective's end if no QP ends later.
    pub(super) nvlink_last: u64,
    /// Per local transfer, its hold on the wall clock (a compute gap × D).
    hold_wall: Vec<u64>,
    /// Milestone locals completed since the engine last took them: (transfer id, wall ns).
    pub(super) milestones_hit: Vec<(usize, u64)>,
}

/// No queue.
const NONE: u32 = u32::MAX;

impl Coll {
    pub(super) fn complete(&self) -> bool {
        self.sends_left == 0 && self.recvs_left == 0 && self.locals_left == 0
    }

    /// Marks QP index `qi`'s receive queue (a message completed on it) and send queue (room
    /// may have been freed in its ring) to be looked at by the next [`Coll::progress`].
    pub(super) fn touch_qp(&mut self, qi: usize, received: bool, acked: bool) {
        if received {
            if let Some(&k) = self.recv_of_qp.get(qi).filter(|&&k| k != NONE) {
                mark(&mut self.dirty_recv, &mut self.recv_queued, k);
            }
        }
        if acked {
            if let Some(&k) = self.send_of_qp.get(qi).filter(|&&k| k != NONE) {
                mark(&mut self.dirty_send, &mut self.send_queued, k);
            }
        }
    }

    /// Marks every queue (at the start).
    fn touch_all(&mut self) {
        for k in 0..self.recvq.len() as u32 {
            mark(&mut self.dirty_recv, &mut self.recv_queued, k);
        }
        for k in 0..self.sendq.len() as u32 {
            mark(&mut self.dirty_send, &mut self.send_queued, k);
        }
        for k in 0..self.spec.locals.len() as u32 {
            mark(&mut self.dirty_local, &mut self.local_queued, k);
        }
    }

    /// Transfer `id` is done: the send queues and local transfers waiting for it are looked at
    /// again.
    fn transfer_done(&mut self, id: usize) {
        self.done[id] = true;
        for &k in &self.dependents[id] {
            mark(&mut self.dirty_send, &mut self.send_queued, k);
        }
        for &k in &self.local_dependents[id] {
            mark(&mut self.dirty_local, &mut self.local_queued, k);
        }
    }
}

/// Queues `k` on `dirty` unless `queued[k]`.
fn mark(dirty: &mut Vec<u32>, queued: &mut [bool], k: u32) {
    if !std::mem::replace(&mut queued[k as usize], true) {
        dirty.push(k);
    }
}

/// Whether transfer `id` completed (`done` indexed by transfer id).
pub(super) fn is_done(done: &[bool], id: usize) -> bool {
    done.get(id).copied().unwrap_or(false)
}

/// Largest transfer id a collective may use (its completion flags are a dense table).
const MAX_TRANSFER_ID: usize = 1 << 24;

impl Coll {
    /// The state of `spec` on a host whose `qps` QPs `by_qpn` indexes, with NVLink `nvlink`
    /// (wall-clock bandwidth bit/s and latency ns); `path_mtu_of(qp)` is the path
    /// MTU (bytes) of QP index `qp`'s NIC. Rank buffers hold their input pattern.
    pub(super) fn new(
        spec: &CollectiveSpec,
        by_qpn: &IndexTable,
        qps: usize,
        nvlink: Option<(u64, u64)>,
        hold_wall: impl Fn(u64) -> u64,
        path_mtu_of: impl Fn(usize) -> u32,
    ) -> Result<Coll, CollectiveSpecError> {
        let bufs = spec
            .ranks
            .iter()
            .map(|r| {
                let mut b = pattern::generate(r.input_bytes as usize, r.seed);
                b.resize(r.bytes as usize, 0);
                b
            })
            .collect();
        let rank_idx = IndexTable::new(&spec.ranks.iter().map(|r| r.rank).collect::<Vec<_>>())
            .map_err(CollectiveSpecError::RankListedTwice)?;
        let max_id = check_transfers(spec, &rank_idx)?;
        let recvq = recv_steps(spec, by_qpn, path_mtu_of)?;
        let sendq = queue_by_qp(by_qpn, spec.sends.iter().enumerate().map(|(i, x)| (x.qpn, x.id, i)))?;
        let ids = max_id.map_or(0, |m| m + 1);
        let mut send_of_qp = vec![NONE; qps];
        let mut dependents: Vec<Vec<u32>> = vec![Vec::new(); ids];
        for (k, (qi, list, _)) in sendq.iter().enumerate() {
            send_of_qp[*qi] = k as u32;
            for &si in list {
                for &d in &spec.sends[si].deps {
                    if let Some(v) = dependents.get_mut(d) {
                        if v.last() != Some(&(k as u32)) {
                            v.push(k as u32);
                        }
                    }
                }
            }
        }
        let mut local_dependents: Vec<Vec<u32>> = vec![Vec::new(); ids];
        for (i, l) in spec.locals.iter().enumerate() {
            for &d in &l.deps {
                if let Some(v) = local_dependents.get_mut(d) {
                    v.push(i as u32);
                }
            }
        }
        let mut recv_of_qp = vec![NONE; qps];
        for (k, (qi, _, _)) in recvq.iter().enumerate() {
            recv_of_qp[*qi] = k as u32;
        }
        let mut c = Coll {
            dirty_send: Vec::with_capacity(sendq.len()),
            send_queued: vec![false; sendq.len()],
            dirty_recv: Vec::with_capacity(recvq.len()),
            recv_queued: vec![false; recvq.len()],
            sends_left: sendq.iter().filter(|(_, l, _)| !l.is_empty()).count(),
            recvs_left: recvq.iter().filter(|(_, l, _)| !l.is_empty()).count(),
            locals_left: spec.locals.len(),
            dirty_local: Vec::with_capacity(spec.locals.len()),
            local_queued: vec![false; spec.locals.len()],
            send_of_qp,
            recv_of_qp,
            dependents,
            local_dependents,
            sendq,
            recvq,
            nvlink,
            nvlink_free: vec![0; spec.ranks.len()],
            nvlink_pending: BinaryHeap::with_capacity(spec.locals.len()),
            locals_started: vec![false; spec.locals.len()],
            nvlink_bytes: 0,
            nvlink_last: 0,
            hold_wall: spec.locals.iter().map(|l| hold_wall(l.hold_ns)).collect(),
            milestones_hit: Vec::with_capacity(spec.locals.iter().filter(|l| l.milestone).count()),
            spec: spec.clone(),
            bufs,
            rank_idx,
            done: vec![false; ids],
        };
        c.touch_all();
        Ok(c)
    }

    /// Runs the collective forward from the queues marked since the last call
    /// ([`Coll::touch_qp`]): applies every completed incoming write to its rank buffer, runs
    /// ready local transfers and posts every send whose dependencies are done. Allocates only
    /// when a send is posted (its data is copied into the QP's send buffer, so later changes to
    /// the rank buffer cannot alter a retransmission).
    pub(super) fn progress(&mut self, qps: &mut [Qp], now: u64) {
        loop {
            let mut changed = self.land_nvlink(now);
            while let Some(k) = self.dirty_recv.pop() {
                self.recv_queued[k as usize] = false;
                changed |= self.apply_received(qps, k as usize);
            }
            while let Some(k) = self.dirty_local.pop() {
                self.local_queued[k as usize] = false;
                changed |= self.run_local(k as usize, now);
            }
            while let Some(k) = self.dirty_send.pop() {
                self.send_queued[k as usize] = false;
                changed |= self.post_sends(qps, k as usize);
            }
            if !changed && self.dirty_recv.is_empty() && self.dirty_send.is_empty() && self.dirty_local.is_empty() {
                break;
            }
        }
    }

    /// Applies every transfer of receive queue `k` whose PSN range completed; whether any was.
    fn apply_received(&mut self, qps: &[Qp], k: usize) -> bool {
        let mut changed = false;
        let (qi, ref list, applied) = self.recvq[k];
        let qp = &qps[qi];
        let Some(spec) = qp.spec.recv.as_ref().filter(|_| qp.has_responder()) else { return false };
        // Completion by PSN range: with out-of-order placement a transfer's packets may all be
        // placed while an earlier one still misses some.
        let completed = qp.rx_packets_completed();
        let mut next = applied;
        while next < list.len() && list[next].1 <= completed {
            let r = &self.spec.recvs[list[next].0];
            let Some(region) = qp.rx_region(spec.rkey) else { break };
            let src = &region.data[r.staging_offset as usize..(r.staging_offset + r.len) as usize];
            let b = &mut self.bufs[self.rank_idx.get(r.rank).expect("collective rank")];
            apply_op(r.op, src, &mut b[r.dst_offset as usize..(r.dst_offset + r.len) as usize]);
            next += 1;
        }
        if next > applied {
            let len = list.len();
            for i in applied..next {
                let id = self.spec.recvs[self.recvq[k].1[i].0].id;
                self.transfer_done(id);
            }
            self.recvq[k].2 = next;
            if next == len {
                self.recvs_left -= 1;
            }
            changed = true;
        }
        changed
    }

    /// Runs local transfer `i` if its dependencies are done and it has not run: one within a
    /// rank at once, one to another rank onto its source GPU's NVLink; whether it completed.
    fn run_local(&mut self, i: usize, now: u64) -> bool {
        let l = &self.spec.locals[i];
        if self.locals_started[i] || !l.deps.iter().all(|&d| is_done(&self.done, d)) {
            return false;
        }
        self.locals_started[i] = true;
        let a = self.rank_idx.get(l.rank).expect("collective rank");
        let Some(dst) = l.dst_rank.filter(|&d| d != l.rank) else {
            let b = &mut self.bufs[a];
            if l.len > 0 {
                let src = b[l.src_offset as usize..(l.src_offset + l.len) as usize].to_vec();
                apply_op(l.op, &src, &mut b[l.dst_offset as usize..(l.dst_offset + l.len) as usize]);
            }
            if self.hold_wall[i] > 0 {
                // A compute gap: the rank is busy until it ends.
                self.nvlink_pending.push(Reverse((now + self.hold_wall[i], i)));
                return false;
            }
            self.local_done(i, now);
            return true;
        };
        // The bytes are read now (as a network send copies them when it is posted) and written
        // to the destination, which no transfer reads before this one is done.
        let (bw, latency) = self.nvlink.expect("validated: NVLink transfers need the job's nvlink");
        let b = self.rank_idx.get(dst).expect("collective rank");
        let (src, dstb) = if a < b {
            let (x, y) = self.bufs.split_at_mut(b);
            (&x[a], &mut y[0])
        } else {
            let (x, y) = self.bufs.split_at_mut(a);
            (&y[0], &mut x[b])
        };
        apply_op(
            l.op,
            &src[l.src_offset as usize..(l.src_offset + l.len) as usize],
            &mut dstb[l.dst_offset as usize..(l.dst_offset + l.len) as usize],
        );
        let start = now.max(self.nvlink_free[a]);
        let busy = (u128::from(l.len) * 8 * 1_000_000_000).div_ceil(u128::from(bw)) as u64;
        self.nvlink_free[a] = start + busy;
        self.nvlink_pending.push(Reverse((start + busy + latency, i)));
        false
    }

    /// Completes every NVLink transfer that has landed by `now` (its bytes are in place since it
    /// started); whether any.
    fn land_nvlink(&mut self, now: u64) -> bool {
        let mut changed = false;
        while let Some(&Reverse((at, i))) = self.nvlink_pending.peek().filter(|Reverse((at, _))| *at <= now) {
            self.nvlink_pending.pop();
            let l = &self.spec.locals[i];
            if l.dst_rank.is_some_and(|d| d != l.rank) {
                self.nvlink_bytes += l.len;
            }
            self.nvlink_last = self.nvlink_last.max(at);
            self.local_done(i, at);
            changed = true;
        }
        changed
    }

    /// Local transfer `i` completed at `at` (wall ns).
    fn local_done(&mut self, i: usize, at: u64) {
        let l = &self.spec.locals[i];
        let id = l.id;
        if l.milestone {
            self.milestones_hit.push((id, at));
        }
        self.locals_left -= 1;
        self.transfer_done(id);
    }

    /// When the next NVLink transfer or compute hold ends (wall ns), if one is under way.
    pub(super) fn next_nvlink(&self) -> Option<u64> {
        self.nvlink_pending.peek().map(|Reverse((at, _))| *at)
    }

    /// Posts every send of send queue `k` whose dependencies are done (and that fits its send
    /// ring), in order; whether any was posted.
    fn post_sends(&mut self, qps: &mut [Qp], k: usize) -> bool {
        let mut changed = false;
        let (qi, ref list, mut next) = self.sendq[k];
        while next < list.len() {
            let x = &self.spec.sends[list[next]];
            if !x.deps.iter().all(|&d| is_done(&self.done, d)) {
                break;
            }
            let qp = &mut qps[qi];
            let b = &self.bufs[self.rank_idx.get(x.rank).expect("collective rank")];
            let src = &b[x.src_offset as usize..(x.src_offset + x.len) as usize];
            let off = match qp.send_ring.as_mut() {
                Some(ring) => {
                    // Posted once earlier transfers complete and free their bytes.
                    let Some(at) = ring.place(x.len) else { break };
                    ring.posted.push_back((at, x.len));
                    qp.send_buf[at as usize..(at + x.len) as usize].copy_from_slice(src);
                    at
                }
                None => {
                    let off = qp.send_buf.len() as u64;
                    qp.send_buf.extend_from_slice(src);
                    off
                }
            };
            let rkey = qp.spec.send.as_ref().map_or(0, |s| s.rkey);
            let msg = WriteMessage { remote_va: x.remote_va, rkey, len: x.len as u32 };
            if let Some(s) = qp.sender.as_mut() {
                if let Err(e) = s.post_write(x.id as u64, off, msg) {
                    qp.error.get_or_insert_with(|| format!("posting collective transfer {}: {e}", x.id));
                }
            } else if let Some(t) = qp.pdc.as_mut().and_then(|p| p.tx.as_mut()) {
                if let Err(e) = t.post_write(x.id as u64, off, x.remote_va, x.len) {
                    qp.error.get_or_insert_with(|| format!("posting collective transfer {}: {e}", x.id));
                }
            }
            next += 1;
            changed = true;
        }
        if changed {
            if next == list.len() {
                self.sends_left -= 1;
            }
            self.sendq[k].2 = next;
        }
        changed
    }
}

/// The largest transfer id of `spec`, after checking that ids fit the dense completion table
/// and that every transfer and expectation names one of the host's ranks (`rank_idx`).
fn check_transfers(spec: &CollectiveSpec, rank_idx: &IndexTable) -> Result<Option<usize>, CollectiveSpecError> {
    let c = spec;
    let max_id =
        c.sends.iter().map(|x| x.id).chain(c.recvs.iter().map(|x| x.id)).chain(c.locals.iter().map(|x| x.id)).max();
    if max_id.is_some_and(|m| m >= MAX_TRANSFER_ID) {
        return Err(CollectiveSpecError::TransferIdTooLarge);
    }
    let used =
        c.sends.iter().map(|x| x.rank).chain(c.recvs.iter().map(|x| x.rank)).chain(c.locals.iter().map(|x| x.rank));
    if let Some(r) = used.chain(c.expect.iter().map(|e| e.rank)).find(|&r| rank_idx.get(r).is_none()) {
        return Err(CollectiveSpecError::ForeignRank(r));
    }
    Ok(max_id)
}

/// Transfers `(qpn, id, index)` grouped by QP index: (qp index, indices in id order, 0).
fn queue_by_qp(
    by_qpn: &IndexTable,
    transfers: impl Iterator<Item = (u32, usize, usize)>,
) -> Result<Vec<(usize, Vec<usize>, usize)>, CollectiveSpecError> {
    let mut by: Vec<(usize, Vec<(usize, usize)>)> = Vec::new();
    for (qpn, id, idx) in transfers {
        let qi = by_qpn.get(qpn).ok_or(CollectiveSpecError::QpMissing(qpn))?;
        match by.iter_mut().find(|(q, _)| *q == qi) {
            Some((_, l)) => l.push((id, idx)),
            None => by.push((qi, vec![(id, idx)])),
        }
    }
    Ok(by
        .into_iter()
        .map(|(q, mut l)| {
            l.sort();
            (q, l.into_iter().map(|(_, i)| i).collect(), 0)
        })
        .collect())
}

/// The incoming transfers per responder QP with the packet count at which each completes.
/// A transfer is one message of len / PMTU packets in either segment mode, so the k-th
/// transfer on a responder QP ends where the packet counts of 1..=k add up.
fn recv_steps(
    spec: &CollectiveSpec,
    by_qpn: &IndexTable,
    path_mtu_of: impl Fn(usize) -> u32,
) -> Result<Vec<(usize, Vec<RecvStep>, usize)>, CollectiveSpecError> {
    let c = spec;
    Ok(queue_by_qp(by_qpn, c.recvs.iter().enumerate().map(|(i, x)| (x.qpn, x.id, i)))?
        .into_iter()
        .map(|(qi, list, n)| {
            let mtu = path_mtu_of(qi);
            let mut end = 0u64;
            let list = list
                .into_iter()
                .map(|i| {
                    end += u64::from(packet_count(c.recvs[i].len as u32, mtu));
                    (i, end)
                })
                .collect();
            (qi, list, n)
        })
        .collect())
}

/// An incoming collective transfer: its index into `spec.recvs`, and the number of packets its
/// responder QP has completed once the transfer's whole PSN range arrived.
type RecvStep = (usize, u64);

/// Applies `op` from `src` into `dst` (u32 little-endian elements; equal lengths).
fn apply_op(op: CollOp, src: &[u8], dst: &mut [u8]) {
    match op {
        CollOp::Copy => dst.copy_from_slice(src),
        CollOp::Sum => {
            for (d, s) in dst.chunks_exact_mut(4).zip(src.chunks_exact(4)) {
                let v = u32::from_le_bytes([d[0], d[1], d[2], d[3]])
                    .wrapping_add(u32::from_le_bytes([s[0], s[1], s[2], s[3]]));
                d.copy_from_slice(&v.to_le_bytes());
            }
        }
    }
}

/// Words per verification chunk: 64 KiB of expected sums, which stay in the L2 cache while
/// every rank that shares them is compared.
const VERIFY_CHUNK_WORDS: usize = 16 * 1024;

/// For every expectation of `expect`, the first byte offset (4-aligned) in its rank's buffer
/// (`bufs`, indexed through `rank_idx`) whose u32 word differs from the expected sum of
/// patterns, `None` when every word matches. Each word is compared exactly (a single wrong
/// byte is found); what makes it cheap is computing the expected words once per distinct
/// (range, terms) — an AllReduce's ranks all expect the same sum — chunk by chunk with
/// [`pattern::add_words32`], and splitting the chunks over the machine's cores.
pub(super) fn verify_collective(
    expect: &[job::ExpectSpec],
    bufs: &[Vec<u8>],
    rank_idx: &IndexTable,
) -> Vec<Option<u64>> {
    let groups = expectation_groups(expect);
    let total: usize = groups.iter().map(|g| g.words().div_ceil(VERIFY_CHUNK_WORDS)).sum();
    let parts = std::thread::available_parallelism().map_or(1, |n| n.get()).clamp(1, 8).min(total.max(1));
    let run = |part: usize| verify_part(&groups, expect, bufs, rank_idx, part, parts);
    let mut first = run(0);
    std::thread::scope(|s| {
        let run = &run;
        let others: Vec<_> = (1..parts)
            .map(|p| {
                std::thread::Builder::new().name("rocefab-verify".into()).spawn_scoped(s, move || run(p)).map_err(|_| p)
            })
            .collect();
        for h in others {
            // A part whose thread could not start runs here.
            let theirs = match h {
                Ok(h) => h.join().unwrap_or_else(|e| std::panic::resume_unwind(e)),
                Err(p) => run(p),
            };
            merge_first_differences(&mut first, theirs);
        }
    });
    first
}

/// Expectations that expect the same words (same range, same terms), checked together: the
/// expected sums of a chunk are computed once for all of them.
struct ExpectGroup<'a> {
    spec: &'a job::ExpectSpec,
    /// Indices in `expect` of the expectations of this group.
    users: Vec<usize>,
}

impl ExpectGroup<'_> {
    fn words(&self) -> usize {
        usize::try_from(self.spec.len.div_ceil(4)).unwrap_or(usize::MAX)
    }
}

/// `expect` grouped by (offset, length, terms), in order of first appearance.
fn expectation_groups(expect: &[job::ExpectSpec]) -> Vec<ExpectGroup<'_>> {
    let mut groups: Vec<ExpectGroup<'_>> = Vec::new();
    for (i, e) in expect.iter().enumerate() {
        match groups.iter_mut().find(|g| g.spec.offset == e.offset && g.spec.len == e.len && g.spec.terms == e.terms) {
            Some(g) => g.users.push(i),
            None => groups.push(ExpectGroup { spec: e, users: vec![i] }),
        }
    }
    groups
}

/// Part `part` of `parts` of [`verify_collective`]: that share of every group's chunks, each
/// chunk's expected words computed once and compared with every user's buffer that has not
/// already differed.
fn verify_part(
    groups: &[ExpectGroup<'_>],
    expect: &[job::ExpectSpec],
    bufs: &[Vec<u8>],
    rank_idx: &IndexTable,
    part: usize,
    parts: usize,
) -> Vec<Option<u64>> {
    let mut first = vec![None; expect.len()];
    let mut acc = vec![0u32; VERIFY_CHUNK_WORDS];
    for g in groups {
        let words = g.words();
        let chunks = words.div_ceil(VERIFY_CHUNK_WORDS);
        for k in chunks * part / parts..chunks * (part + 1) / parts {
            if g.users.iter().all(|&u| first[u].is_some()) {
                break;
            }
            let w0 = k * VERIFY_CHUNK_WORDS;
            let acc = &mut acc[..VERIFY_CHUNK_WORDS.min(words - w0)];
            acc.fill(0);
            for &(seed, po) in &g.spec.terms {
                pattern::add_words32(acc, seed, po + 4 * w0 as u64);
            }
            let start = g.spec.offset + 4 * w0 as u64;
            for &u in &g.users {
                if first[u].is_some() {
                    continue;
                }
                let buf = rank_idx.get(expect[u].rank).and_then(|i| bufs.get(i)).map_or(&[][..], |b| &b[..]);
                first[u] = first_difference(buf, start, acc);
            }
        }
    }
    first
}

/// Merges another part's first differences into `first`: the lower offset of the two.
fn merge_first_differences(first: &mut [Option<u64>], theirs: Vec<Option<u64>>) {
    for (m, t) in first.iter_mut().zip(theirs) {
        *m = match (*m, t) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
    }
}

/// The byte offset of the first u32 (little-endian) of `buf` from `start` on that differs from
/// `want`, or that `buf` does not hold.
fn first_difference(buf: &[u8], start: u64, want: &[u32]) -> Option<u64> {
    let s = usize::try_from(start).ok()?;
    let have = buf.get(s..).unwrap_or(&[]);
    let same =
        have.chunks_exact(4).zip(want).take_while(|(h, w)| u32::from_le_bytes([h[0], h[1], h[2], h[3]]) == **w).count();
    (same < want.len()).then(|| start + 4 * same as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn send_rings_place_transfers_without_overlap_or_straddling() {
        let mut r = SendRing { cap: 100, posted: VecDeque::new() };
        assert_eq!(r.place(101), None, "larger than the ring");
        let post = |r: &mut SendRing, len| {
            let at = r.place(len);
            if let Some(at) = at {
                r.posted.push_back((at, len));
            }
            at
        };
        assert_eq!(post(&mut r, 40), Some(0));
        assert_eq!(post(&mut r, 40), Some(40));
        assert_eq!(post(&mut r, 30), None, "20 bytes left at the end, 0 at the start");
        r.posted.pop_front();
        assert_eq!(post(&mut r, 30), Some(0), "wraps to the freed start");
        assert_eq!(post(&mut r, 11), None, "only 10 bytes between head 30 and tail 40");
        assert_eq!(post(&mut r, 10), Some(30));
        r.posted.pop_front();
        assert_eq!(post(&mut r, 60), Some(40), "tail 0..40 in use, 40..100 free");
        r.posted.clear();
        assert_eq!(post(&mut r, 100), Some(0), "an empty ring starts at 0");
    }

    /// Two ranks' buffers holding the sum of two patterns over 2.5 chunks (a partial last one)
    /// from byte 8, as an AllReduce's ranks do.
    fn summed(len: u64, terms: &[(u64, u64)]) -> Vec<u8> {
        let mut acc = vec![0u32; usize::try_from(len / 4).unwrap()];
        for &(seed, po) in terms {
            pattern::add_words32(&mut acc, seed, po);
        }
        let mut b = vec![0u8; 8];
        b.extend(acc.iter().flat_map(|w| w.to_le_bytes()));
        b
    }

    #[test]
    fn verification_finds_the_first_wrong_word_of_each_rank_in_any_part() {
        let len = (VERIFY_CHUNK_WORDS as u64 * 5 / 2) * 4;
        let terms = vec![(7, 0), (9, 64)];
        let e = |rank| job::ExpectSpec { rank, offset: 8, len, terms: terms.clone() };
        let expect = vec![e(0), e(1), job::ExpectSpec { rank: 2, offset: 8, len: 4, terms: vec![(1, 0)] }];
        let groups = expectation_groups(&expect);
        assert_eq!(groups.iter().map(|g| g.users.clone()).collect::<Vec<_>>(), [vec![0, 1], vec![2]]);
        assert_eq!(groups[0].words(), VERIFY_CHUNK_WORDS * 5 / 2);
        let good = summed(len, &terms);
        let mut bad = good.clone();
        // Rank 1: one byte wrong in the last (partial) chunk and one in the second.
        let late = 8 + 4 * (VERIFY_CHUNK_WORDS * 2 + 3) + 2;
        let early = 8 + 4 * (VERIFY_CHUNK_WORDS + 1);
        bad[late] ^= 1;
        bad[early] ^= 0x80;
        let rank2 = summed(4, &[(1, 0)]);
        let bufs = vec![good, bad, rank2[..10].to_vec()];
        let idx = IndexTable::new(&[0, 1, 2]).unwrap();
        let want = vec![None, Some(early as u64), Some(8)];
        assert_eq!(verify_collective(&expect, &bufs, &idx), want, "rank 2's buffer ends inside its word");
        // However the chunks are split, the merged parts find the same first differences.
        for parts in 1..=4 {
            let mut first = verify_part(&groups, &expect, &bufs, &idx, 0, parts);
            for p in 1..parts {
                merge_first_differences(&mut first, verify_part(&groups, &expect, &bufs, &idx, p, parts));
            }
            assert_eq!(first, want, "{parts} parts");
        }
        // A part that only sees the late chunk reports the late byte's word.
        assert_eq!(verify_part(&groups, &expect, &bufs, &idx, 2, 3)[1], Some((late & !3) as u64));
    }
}
