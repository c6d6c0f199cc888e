//! Collective communication schedules (reference book ch. 14: ring AllReduce as
//! ReduceScatter followed by AllGather, N−1 steps each; torchrun rank numbering) plus
//! N:1 incast, all-to-all and a pipelined chain broadcast.
//!
//! A [`Schedule`] is a list of [`Transfer`]s (one RDMA WRITE each: which rank sends which
//! element range to which rank, and whether the receiver sums or copies it) with explicit
//! dependencies; [`Schedule::ready_sends`] returns the transfers whose inputs have arrived,
//! so a driver can issue sends as data becomes available. [`simulate`] executes a schedule
//! on in-memory buffers in any dependency-respecting order (seeded) and performs the
//! reductions, so the schedule's correctness is checked by arithmetic, not by inspection.
//!
//! Ring conventions follow the book's figures 14-6 … 14-16: with N ranks, in ReduceScatter
//! step `s` (0-based) rank `r` sends chunk `(r − s) mod N` to rank `(r + 1) mod N`, which
//! adds it to its own copy; after N−1 steps rank `r` holds the fully reduced chunk
//! `(r + 1) mod N`. In AllGather step `s` rank `r` forwards chunk `(r + 1 − s) mod N`,
//! which the receiver copies.

use core::ops::Range;

/// Collective errors.
#[derive(Clone, Debug, thiserror::Error, PartialEq, Eq)]
pub enum CollectiveError {
    /// A rank count of zero, or a rank outside the communicator.
    #[error("invalid rank {rank} for a communicator of {ranks} ranks")]
    InvalidRank {
        /// Offending rank.
        rank: u32,
        /// Communicator size.
        ranks: u32,
    },
    /// Layout with zero nodes or zero processes per node, or a local rank out of range.
    #[error("invalid layout: {0}")]
    InvalidLayout(&'static str),
    /// The collective requires the element count to divide evenly.
    #[error("{elems} elements cannot be split evenly across {ranks} ranks for {what}")]
    Uneven {
        /// Element count.
        elems: usize,
        /// Ranks.
        ranks: u32,
        /// Which collective.
        what: &'static str,
    },
    /// `simulate` was given the wrong number of buffers or buffers of the wrong size.
    #[error("expected {expected_ranks} input buffers of {expected_len} elements")]
    BadInputs {
        /// Ranks.
        expected_ranks: u32,
        /// Elements per buffer.
        expected_len: usize,
    },
    /// The schedule deadlocked (a dependency cycle or a dangling dependency).
    #[error("schedule stalled with {remaining} transfers not runnable")]
    Stalled {
        /// Transfers left.
        remaining: usize,
    },
}

/// torchrun's rank layout: global rank = node rank × processes per node + local rank
/// (book ch. 14, Figure 14-2).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RankLayout {
    /// Number of nodes (`--nnodes`).
    pub nodes: u32,
    /// Processes (GPUs) per node (`--nproc_per_node`).
    pub procs_per_node: u32,
}

impl RankLayout {
    /// Validated layout.
    pub fn new(nodes: u32, procs_per_node: u32) -> Result<RankLayout, CollectiveError> {
        if nodes == 0 || procs_per_node == 0 {
            return Err(CollectiveError::InvalidLayout("nodes and procs_per_node must be > 0"));
        }
        nodes.checked_mul(procs_per_node).ok_or(CollectiveError::InvalidLayout("world size overflows u32"))?;
        Ok(RankLayout { nodes, procs_per_node })
    }

    /// World size.
    pub fn world_size(&self) -> u32 {
        self.nodes * self.procs_per_node
    }

    /// Global rank of (`node_rank`, `local_rank`).
    pub fn global_rank(&self, node_rank: u32, local_rank: u32) -> Result<u32, CollectiveError> {
        if node_rank >= self.nodes || local_rank >= self.procs_per_node {
            return Err(CollectiveError::InvalidLayout("node or local rank out of range"));
        }
        Ok(node_rank * self.procs_per_node + local_rank)
    }

    /// (`node_rank`, `local_rank`) of a global rank.
    pub fn locate(&self, global: u32) -> Result<(u32, u32), CollectiveError> {
        if global >= self.world_size() {
            return Err(CollectiveError::InvalidRank { rank: global, ranks: self.world_size() });
        }
        Ok((global / self.procs_per_node, global % self.procs_per_node))
    }
}

/// Element range of chunk `c` when `elems` elements are split into `n` chunks: the first
/// `elems % n` chunks get one extra element.
pub fn chunk_range(elems: usize, n: u32, c: u32) -> Range<usize> {
    let n = n.max(1) as usize;
    let c = c as usize;
    let base = elems / n;
    let extra = elems % n;
    let start = c * base + c.min(extra);
    let len = base + usize::from(c < extra);
    start..start + len
}

/// What the receiver does with the data.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    /// Element-wise add into the destination range.
    Sum,
    /// Overwrite the destination range.
    Copy,
}

/// Which phase / collective a transfer belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// Ring ReduceScatter.
    ReduceScatter,
    /// Ring AllGather.
    AllGather,
    /// N:1 incast (reduce to root).
    Incast,
    /// All-to-all personalised exchange.
    AllToAll,
    /// Chain or tree broadcast.
    Broadcast,
    /// A training job's compute gap on one rank (a local hold, no data).
    Compute,
    /// A point a training job reports the time of (a local no-op after what it waits for).
    Milestone,
}

/// One send: `src_rank` writes its `src` element range into `dst_rank`'s `dst` range.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Transfer {
    /// Phase.
    pub phase: Phase,
    /// Step within the phase (0-based).
    pub step: u32,
    /// Sender.
    pub src_rank: u32,
    /// Receiver.
    pub dst_rank: u32,
    /// Chunk index (for ring collectives and broadcast; the destination slot for all-to-all).
    pub chunk: u32,
    /// Source element range.
    pub src: Range<usize>,
    /// Destination element range (same length).
    pub dst: Range<usize>,
    /// Receiver operation.
    pub op: Op,
    /// Transfers that must complete before this one may start.
    pub deps: Vec<usize>,
    /// Emulated ns a local transfer occupies its rank before it completes (a training job's
    /// compute gap, [`crate::training`]); 0 for data transfers.
    pub hold_ns: u64,
}

impl Transfer {
    /// Source and destination are the same rank (a local copy, no network transfer).
    pub fn is_local(&self) -> bool {
        self.src_rank == self.dst_rank
    }

    /// Elements moved.
    pub fn elems(&self) -> usize {
        self.src.len()
    }

    /// Byte offset and length for elements of `elem_size` bytes.
    pub fn byte_range(range: &Range<usize>, elem_size: usize) -> Range<usize> {
        range.start * elem_size..range.end * elem_size
    }
}

/// A dependency-driven schedule over `ranks` buffers of `elems` elements each.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Schedule {
    /// Communicator size.
    pub ranks: u32,
    /// Elements of input data per rank (the input occupies `0..elems` of the buffer).
    pub elems: usize,
    /// Elements of each rank's working buffer (≥ `elems`; larger for out-of-place
    /// collectives).
    pub buffer_elems: usize,
    /// Where the result lies in each rank's buffer.
    pub output: Range<usize>,
    /// Transfers; indices are transfer ids.
    pub transfers: Vec<Transfer>,
}

impl Schedule {
    /// Transfers not yet completed whose dependencies all are (`completed[i]` is transfer
    /// `i`'s state; missing entries count as not completed).
    pub fn ready_sends(&self, completed: &[bool]) -> Vec<usize> {
        let done = |i: usize| completed.get(i).copied().unwrap_or(false);
        (0..self.transfers.len()).filter(|&i| !done(i) && self.transfers[i].deps.iter().all(|&d| done(d))).collect()
    }

    /// Transfers of `phase` at `step`.
    pub fn step(&self, phase: Phase, step: u32) -> impl Iterator<Item = &Transfer> {
        self.transfers.iter().filter(move |t| t.phase == phase && t.step == step)
    }

    /// Ring AllReduce: ReduceScatter then AllGather, N−1 steps each.
    pub fn ring_allreduce(ranks: u32, elems: usize) -> Result<Schedule, CollectiveError> {
        check_ranks(ranks)?;
        let n = ranks;
        let steps = n - 1;
        let mut t: Vec<Transfer> = Vec::with_capacity(2 * (n * steps) as usize);
        // id of the transfer sent by rank r at global ring step k (0..2(N−1)).
        let id = |k: u32, r: u32| (k * n + r) as usize;
        for k in 0..2 * steps {
            let (phase, step, op) =
                if k < steps { (Phase::ReduceScatter, k, Op::Sum) } else { (Phase::AllGather, k - steps, Op::Copy) };
            for r in 0..n {
                let chunk = match phase {
                    Phase::ReduceScatter => (r + n - step % n) % n,
                    _ => (r + 1 + n - step % n) % n,
                };
                let range = chunk_range(elems, n, chunk);
                // The chunk this rank forwards was delivered to it by its ring predecessor
                // in the previous ring step.
                let deps = if k == 0 { vec![] } else { vec![id(k - 1, (r + n - 1) % n)] };
                t.push(Transfer {
                    phase,
                    step,
                    src_rank: r,
                    dst_rank: (r + 1) % n,
                    chunk,
                    src: range.clone(),
                    dst: range,
                    op,
                    deps,
                    hold_ns: 0,
                });
            }
        }
        Ok(Schedule { ranks, elems, buffer_elems: elems, output: 0..elems, transfers: t })
    }

    /// N:1 incast: every rank other than `root` writes its whole buffer to `root`, which
    /// sums them (a naive reduce; all senders start at once, hence the incast).
    pub fn incast(ranks: u32, root: u32, elems: usize) -> Result<Schedule, CollectiveError> {
        check_ranks(ranks)?;
        check_rank(root, ranks)?;
        let transfers = (0..ranks)
            .filter(|&r| r != root)
            .map(|r| Transfer {
                phase: Phase::Incast,
                step: 0,
                src_rank: r,
                dst_rank: root,
                chunk: 0,
                src: 0..elems,
                dst: 0..elems,
                op: Op::Sum,
                deps: vec![],
                hold_ns: 0,
            })
            .collect();
        Ok(Schedule { ranks, elems, buffer_elems: elems, output: 0..elems, transfers })
    }

    /// All-to-all, out of place: rank `i` sends input block `j` to rank `j`, which stores
    /// it as output block `i` (the output area follows the input: `elems..2·elems`; an
    /// in-place exchange would overwrite blocks before they are sent). Requires `elems`
    /// divisible by `ranks`. Step 0 is each rank's local copy of its own block
    /// ([`Transfer::is_local`], no network); in step `s ≥ 1` rank `i` sends to
    /// `(i + s) mod N`, staggered so every rank sends to and receives from one peer per
    /// step. No dependencies.
    pub fn all_to_all(ranks: u32, elems: usize) -> Result<Schedule, CollectiveError> {
        check_ranks(ranks)?;
        if !elems.is_multiple_of(ranks as usize) {
            return Err(CollectiveError::Uneven { elems, ranks, what: "all-to-all" });
        }
        let out = |r: Range<usize>| r.start + elems..r.end + elems;
        let mut transfers = Vec::new();
        for s in 0..ranks {
            for i in 0..ranks {
                let j = (i + s) % ranks;
                transfers.push(Transfer {
                    phase: Phase::AllToAll,
                    step: s,
                    src_rank: i,
                    dst_rank: j,
                    chunk: i,
                    src: chunk_range(elems, ranks, j),
                    dst: out(chunk_range(elems, ranks, i)),
                    op: Op::Copy,
                    deps: vec![],
                    hold_ns: 0,
                });
            }
        }
        Ok(Schedule { ranks, elems, buffer_elems: 2 * elems, output: elems..2 * elems, transfers })
    }

    /// Pipelined chain broadcast from `root`: the buffer is cut into N chunks; hop `h`
    /// (0..N−1) forwards chunk `c` from `root + h` to `root + h + 1`, after the previous
    /// hop of the same chunk delivered it. Hop `h` of chunk `c` is step `h + c`.
    pub fn broadcast(ranks: u32, root: u32, elems: usize) -> Result<Schedule, CollectiveError> {
        check_ranks(ranks)?;
        check_rank(root, ranks)?;
        let n = ranks;
        let mut transfers = Vec::new();
        let hops = n - 1;
        for c in 0..n {
            for h in 0..hops {
                let deps = if h == 0 { vec![] } else { vec![transfers.len() - 1] };
                let range = chunk_range(elems, n, c);
                transfers.push(Transfer {
                    phase: Phase::Broadcast,
                    step: h + c,
                    src_rank: (root + h) % n,
                    dst_rank: (root + h + 1) % n,
                    chunk: c,
                    src: range.clone(),
                    dst: range,
                    op: Op::Copy,
                    deps,
                    hold_ns: 0,
                });
            }
        }
        Ok(Schedule { ranks, elems, buffer_elems: elems, output: 0..elems, transfers })
    }
}

fn check_ranks(ranks: u32) -> Result<(), CollectiveError> {
    if ranks == 0 {
        Err(CollectiveError::InvalidRank { rank: 0, ranks: 0 })
    } else {
        Ok(())
    }
}

fn check_rank(rank: u32, ranks: u32) -> Result<(), CollectiveError> {
    if rank >= ranks {
        Err(CollectiveError::InvalidRank { rank, ranks })
    } else {
        Ok(())
    }
}

/// Element types `simulate` can reduce.
pub trait Element: Copy + PartialEq + core::fmt::Debug {
    /// Zero.
    const ZERO: Self;
    /// Reduction (sum; wrapping for integers).
    fn add(self, other: Self) -> Self;
}

impl Element for u32 {
    const ZERO: u32 = 0;
    fn add(self, other: u32) -> u32 {
        self.wrapping_add(other)
    }
}

impl Element for f32 {
    const ZERO: f32 = 0.0;
    fn add(self, other: f32) -> f32 {
        self + other
    }
}

/// Small deterministic PRNG (xorshift64*) for the execution order.
fn next_rand(state: &mut u64) -> u64 {
    let mut x = *state;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *state = x;
    x.wrapping_mul(0x2545_F491_4F6C_DD1D)
}

/// Executes `schedule` on copies of `inputs` (one buffer of `schedule.elems` elements per
/// rank, extended with zeros to `buffer_elems`), picking among the ready transfers in an
/// order drawn from `seed`; each transfer reads its source range at the moment it runs
/// (as an RDMA WRITE does) and sums or copies into the destination. Returns each rank's
/// `schedule.output` range.
pub fn simulate<T: Element>(schedule: &Schedule, inputs: &[Vec<T>], seed: u64) -> Result<Vec<Vec<T>>, CollectiveError> {
    if inputs.len() != schedule.ranks as usize || inputs.iter().any(|b| b.len() != schedule.elems) {
        return Err(CollectiveError::BadInputs { expected_ranks: schedule.ranks, expected_len: schedule.elems });
    }
    let mut bufs: Vec<Vec<T>> = inputs
        .iter()
        .map(|b| {
            let mut v = b.clone();
            v.resize(schedule.buffer_elems.max(schedule.elems), T::ZERO);
            v
        })
        .collect();
    let n = schedule.transfers.len();
    let mut completed = vec![false; n];
    let mut remaining_deps: Vec<usize> = schedule.transfers.iter().map(|t| t.deps.len()).collect();
    let mut dependents: Vec<Vec<usize>> = vec![Vec::new(); n];
    for (i, t) in schedule.transfers.iter().enumerate() {
        for &d in &t.deps {
            if d >= n {
                return Err(CollectiveError::Stalled { remaining: n });
            }
            dependents[d].push(i);
        }
    }
    let mut ready: Vec<usize> = (0..n).filter(|&i| remaining_deps[i] == 0).collect();
    let mut rng = seed | 1;
    let mut staging: Vec<T> = Vec::new();
    let mut done = 0;
    while !ready.is_empty() {
        let pick = (next_rand(&mut rng) % ready.len() as u64) as usize;
        let id = ready.swap_remove(pick);
        let t = &schedule.transfers[id];
        staging.clear();
        staging.extend_from_slice(&bufs[t.src_rank as usize][t.src.clone()]);
        let dst = &mut bufs[t.dst_rank as usize][t.dst.clone()];
        match t.op {
            Op::Copy => dst.copy_from_slice(&staging),
            Op::Sum => dst.iter_mut().zip(&staging).for_each(|(d, s)| *d = d.add(*s)),
        }
        completed[id] = true;
        done += 1;
        for &k in &dependents[id] {
            remaining_deps[k] -= 1;
            if remaining_deps[k] == 0 {
                ready.push(k);
            }
        }
    }
    if done != n {
        return Err(CollectiveError::Stalled { remaining: n - done });
    }
    Ok(bufs.into_iter().map(|b| b[schedule.output.clone()].to_vec()).collect())
}

/// Element-wise sum of all input buffers.
pub fn elementwise_sum<T: Element>(inputs: &[Vec<T>]) -> Vec<T> {
    let len = inputs.first().map_or(0, Vec::len);
    (0..len).map(|i| inputs.iter().fold(T::ZERO, |acc, b| acc.add(b[i]))).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inputs_u32(ranks: u32, elems: usize) -> Vec<Vec<u32>> {
        (0..ranks).map(|r| (0..elems).map(|i| (r + 1) * 1_000_003 + i as u32 * 7919).collect()).collect()
    }

    #[test]
    fn torchrun_rank_numbering() {
        // Book Figure 14-2: 2 nodes × 4 GPUs.
        let l = RankLayout::new(2, 4).unwrap();
        assert_eq!(l.global_rank(0, 0).unwrap(), 0);
        assert_eq!(l.global_rank(0, 3).unwrap(), 3);
        assert_eq!(l.global_rank(1, 0).unwrap(), 4);
        assert_eq!(l.global_rank(1, 3).unwrap(), 7);
        assert_eq!(l.locate(6).unwrap(), (1, 2));
        assert!(l.global_rank(2, 0).is_err() && l.global_rank(0, 4).is_err());
        assert!(l.locate(8).is_err());
        assert!(RankLayout::new(0, 8).is_err());
        for g in 0..8 {
            let (n, lr) = l.locate(g).unwrap();
            assert_eq!(l.global_rank(n, lr).unwrap(), g);
        }
    }

    #[test]
    fn chunks_cover_with_remainder() {
        let r: Vec<_> = (0..4).map(|c| chunk_range(10, 4, c)).collect();
        assert_eq!(r, vec![0..3, 3..6, 6..8, 8..10]);
        let r: Vec<_> = (0..3).map(|c| chunk_range(2, 3, c)).collect();
        assert_eq!(r, vec![0..1, 1..2, 2..2]);
        assert_eq!(chunk_range(1024, 4, 3), 768..1024);
    }

    #[test]
    fn ring_matches_book_figures_for_four_ranks() {
        let s = Schedule::ring_allreduce(4, 1024).unwrap();
        assert_eq!(s.transfers.len(), 2 * 3 * 4);
        // RS iteration 1: rank r sends its own chunk r (A0, B1, C2, D3) to r + 1.
        let rs0: Vec<_> = s.step(Phase::ReduceScatter, 0).map(|t| (t.src_rank, t.chunk, t.dst_rank)).collect();
        assert_eq!(rs0, vec![(0, 0, 1), (1, 1, 2), (2, 2, 3), (3, 3, 0)]);
        // RS iteration 2: rank 0 sends D, rank 1 A, rank 2 B, rank 3 C.
        let rs1: Vec<_> = s.step(Phase::ReduceScatter, 1).map(|t| t.chunk).collect();
        assert_eq!(rs1, vec![3, 0, 1, 2]);
        // AG iteration 1: rank 0 sends B (its reduced chunk), rank 1 C, rank 2 D, rank 3 A.
        let ag0: Vec<_> = s.step(Phase::AllGather, 0).map(|t| t.chunk).collect();
        assert_eq!(ag0, vec![1, 2, 3, 0]);
        // AG iteration 3: rank 0 sends D, rank 1 A, rank 2 B, rank 3 C.
        let ag2: Vec<_> = s.step(Phase::AllGather, 2).map(|t| t.chunk).collect();
        assert_eq!(ag2, vec![3, 0, 1, 2]);
        assert!(s.step(Phase::ReduceScatter, 0).all(|t| t.op == Op::Sum && t.src.len() == 256));
        assert!(s.step(Phase::AllGather, 1).all(|t| t.op == Op::Copy));
    }

    #[test]
    fn ready_sends_follow_previous_step() {
        let s = Schedule::ring_allreduce(3, 9).unwrap();
        let mut completed = vec![false; s.transfers.len()];
        let first = s.ready_sends(&completed);
        assert_eq!(first, vec![0, 1, 2], "only RS step 0 is ready at start");
        // Rank 0's RS step-0 send completes: rank 1 may now forward it (RS step 1).
        completed[0] = true;
        let next = s.ready_sends(&completed);
        assert_eq!(next, vec![1, 2, 4]);
        let t4 = &s.transfers[4];
        assert_eq!((t4.phase, t4.step, t4.src_rank, t4.chunk), (Phase::ReduceScatter, 1, 1, 0));
        // Step by step, every wave is exactly one ring step of N transfers.
        let mut completed = vec![false; s.transfers.len()];
        let mut waves = 0;
        loop {
            let r = s.ready_sends(&completed);
            if r.is_empty() {
                break;
            }
            assert_eq!(r.len(), 3);
            let step_ids: Vec<_> = r.iter().map(|&i| (s.transfers[i].phase, s.transfers[i].step)).collect();
            assert!(step_ids.windows(2).all(|w| w[0] == w[1]));
            for i in r {
                completed[i] = true;
            }
            waves += 1;
        }
        assert_eq!(waves, 4, "2·(N − 1) ring steps");
    }

    #[test]
    fn ring_allreduce_sums_for_2_3_8_ranks() {
        for &n in &[2u32, 3, 8] {
            for &elems in &[1usize, 7, 1000, 1024] {
                let s = Schedule::ring_allreduce(n, elems).unwrap();
                assert_eq!(s.transfers.len() as u32, 2 * n * (n - 1));
                let inputs = inputs_u32(n, elems);
                let want = elementwise_sum(&inputs);
                for seed in [1u64, 2, 3, 0xdead_beef] {
                    let out = simulate(&s, &inputs, seed).unwrap();
                    for (r, b) in out.iter().enumerate() {
                        assert_eq!(b, &want, "n {n} elems {elems} seed {seed} rank {r}");
                    }
                }
            }
        }
    }

    #[test]
    fn ring_allreduce_f32_exact_on_integers() {
        let n = 8;
        let elems = 333;
        let inputs: Vec<Vec<f32>> =
            (0..n).map(|r| (0..elems).map(|i| ((r * 31 + i * 3) % 1000) as f32 - 250.0).collect()).collect();
        let want = elementwise_sum(&inputs);
        let s = Schedule::ring_allreduce(n as u32, elems).unwrap();
        let out = simulate(&s, &inputs, 42).unwrap();
        assert!(out.iter().all(|b| b == &want));
        // And the sum is not trivially equal to any input.
        assert_ne!(want, inputs[0]);
    }

    #[test]
    fn ring_of_one_is_a_no_op() {
        let s = Schedule::ring_allreduce(1, 10).unwrap();
        assert!(s.transfers.is_empty());
        let inputs = inputs_u32(1, 10);
        assert_eq!(simulate(&s, &inputs, 1).unwrap(), inputs);
    }

    #[test]
    fn a_broken_schedule_is_caught() {
        // Dropping a dependency lets a rank forward a chunk before it is reduced: with
        // enough orders some run produces a wrong sum, which verification detects.
        let mut s = Schedule::ring_allreduce(4, 8).unwrap();
        for t in &mut s.transfers {
            t.deps.clear();
        }
        let inputs = inputs_u32(4, 8);
        let want = elementwise_sum(&inputs);
        let wrong = (0..50u64).any(|seed| simulate(&s, &inputs, seed).unwrap().iter().any(|b| b != &want));
        assert!(wrong);
        // A cycle stalls instead of looping.
        let mut c = Schedule::ring_allreduce(2, 2).unwrap();
        c.transfers[0].deps = vec![1];
        c.transfers[1].deps = vec![0];
        assert!(matches!(simulate(&c, &inputs_u32(2, 2), 1), Err(CollectiveError::Stalled { .. })));
    }

    #[test]
    fn incast_reduces_at_root() {
        let n = 6;
        let s = Schedule::incast(n, 2, 50).unwrap();
        assert_eq!(s.transfers.len(), 5);
        assert!(s.transfers.iter().all(|t| t.dst_rank == 2 && t.src_rank != 2));
        assert_eq!(s.ready_sends(&[]).len(), 5, "all senders at once");
        let inputs = inputs_u32(n, 50);
        let out = simulate(&s, &inputs, 9).unwrap();
        assert_eq!(out[2], elementwise_sum(&inputs));
        assert_eq!(out[0], inputs[0]);
        assert!(Schedule::incast(4, 4, 1).is_err());
    }

    #[test]
    fn all_to_all_transposes_blocks() {
        let n = 4;
        let elems = 12;
        let s = Schedule::all_to_all(n, elems).unwrap();
        assert_eq!(s.transfers.len(), 16);
        assert_eq!(s.transfers.iter().filter(|t| !t.is_local()).count(), 12, "N·(N−1) network sends");
        // Each network step is a permutation: every rank sends once and receives once.
        for step in 1..n {
            let mut dsts: Vec<_> = s.step(Phase::AllToAll, step).map(|t| t.dst_rank).collect();
            dsts.sort_unstable();
            assert_eq!(dsts, (0..n).collect::<Vec<_>>());
        }
        let inputs = inputs_u32(n, elems);
        let out = simulate(&s, &inputs, 5).unwrap();
        for j in 0..n {
            for i in 0..n {
                assert_eq!(
                    &out[j as usize][chunk_range(elems, n, i)],
                    &inputs[i as usize][chunk_range(elems, n, j)],
                    "rank {j} block {i}"
                );
            }
        }
        assert!(matches!(Schedule::all_to_all(4, 10), Err(CollectiveError::Uneven { .. })));
    }

    #[test]
    fn broadcast_reaches_everyone() {
        for n in [2u32, 3, 8] {
            let s = Schedule::broadcast(n, 1, 100).unwrap();
            assert_eq!(s.transfers.len() as u32, n * (n - 1));
            let inputs = inputs_u32(n, 100);
            for seed in [1, 77] {
                let out = simulate(&s, &inputs, seed).unwrap();
                assert!(out.iter().all(|b| b == &inputs[1]), "n {n}");
            }
        }
    }

    #[test]
    fn bad_inputs_rejected() {
        let s = Schedule::ring_allreduce(3, 4).unwrap();
        assert!(matches!(simulate(&s, &inputs_u32(2, 4), 1), Err(CollectiveError::BadInputs { .. })));
        assert!(matches!(simulate(&s, &inputs_u32(3, 5), 1), Err(CollectiveError::BadInputs { .. })));
        assert!(Schedule::ring_allreduce(0, 4).is_err());
    }
}
