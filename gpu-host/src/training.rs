//! A data-parallel training job as one dependency-driven [`Schedule`] (book ch. 14): the
//! parameters broadcast from rank 0 (a tree, as NCCL's Tree algorithm builds it, or a chain),
//! then per iteration a compute gap (forward and backward, emulated time) during which the
//! gradient buckets become ready one by one, each bucket ring-AllReduced as soon as it is
//! (PyTorch DDP's bucketing: communication overlaps the rest of the backward pass).
//!
//! Buffer of every rank (u32 elements): the parameters at `0..P`, then one gradient region of
//! `P` elements per iteration (iteration `i`, 1-based, at `i·P..(i+1)·P`). Every region holds
//! the rank's own pattern at the start; afterwards every rank must hold rank 0's parameters and,
//! in each gradient region, the sum over ranks of their gradients: [`crate::collective::simulate`]
//! and the engines' verification check exactly that.
//!
//! * **Compute gap:** `buckets` local holds of `compute_ns / buckets` each on every rank
//!   ([`Phase::Compute`]), chained; bucket `b` (DDP order: the last parameters first) is
//!   AllReduced once hold `b` ends, so the first buckets' communication overlaps the remaining
//!   compute and only what is left after the last hold is exposed.
//! * **Milestones** ([`Phase::Milestone`], zero-length locals): a rank's end of the broadcast
//!   and of every iteration, after every transfer into the rank (and its last hold). The next
//!   iteration's compute starts there, as a rank starts its next forward pass once its
//!   gradients are reduced.
//! * **Tree broadcast:** a binary tree over the nodes (node `n` feeds nodes `2n+1`, `2n+2`,
//!   local rank 0 to local rank 0: one rail) and a chain inside each node (local rank `l` to
//!   `l+1`), pipelined in chunks, as NCCL's Tree (with one tree where NCCL uses two
//!   complementary ones).
//! * **Rings:** in rank order (rank r sends to r+1), or rail-aligned ([`RingOrder::RailAligned`]):
//!   one ring per local rank `c` (channel), the data split across them. Within a node a ring
//!   visits the GPUs in the order `c, c+1, …, c−1`, and every other node in reverse, so the hop
//!   between two nodes joins GPUs of the same local rank, i.e. one rail (with an odd number of
//!   nodes the closing hop crosses to the neighbouring rail). NCCL builds its rings so that
//!   inter-node hops stay on one NIC rail in the same way.
use core::ops::Range;

use crate::collective::{chunk_range, CollectiveError, Op, Phase, RankLayout, Schedule, Transfer};

/// How the parameters are broadcast.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum BroadcastAlgo {
    /// Binary tree over nodes, chain within a node (NCCL's Tree).
    #[default]
    Tree,
    /// Pipelined chain in rank order ([`Schedule::broadcast`]).
    Chain,
}

/// How the AllReduce rings are ordered.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum RingOrder {
    /// One ring in rank order.
    #[default]
    Ranks,
    /// One ring per local rank; hops between nodes stay on one rail.
    RailAligned,
}

/// The job.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TrainingSpec {
    pub layout: RankLayout,
    /// Parameters (u32 elements; gradients have as many).
    pub params: usize,
    pub iterations: u32,
    /// Elements per gradient bucket (the last may be smaller).
    pub bucket: usize,
    /// Compute gap per iteration, emulated ns.
    pub compute_ns: u64,
    pub broadcast: BroadcastAlgo,
    pub rings: RingOrder,
}

/// What a milestone marks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mark {
    /// The rank holds the parameters.
    BroadcastDone,
    /// The rank's compute hold `bucket` of `iteration` ended (its gradients of that bucket are
    /// ready).
    BucketReady { iteration: u32, bucket: u32 },
    /// The rank's gradients of `iteration` are reduced and its compute done.
    IterationDone { iteration: u32 },
}

/// A transfer whose completion time the job reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Milestone {
    pub id: usize,
    pub rank: u32,
    pub mark: Mark,
}

/// The schedule and its milestones.
#[derive(Clone, Debug)]
pub struct Training {
    pub schedule: Schedule,
    pub milestones: Vec<Milestone>,
    /// Gradient buckets per iteration.
    pub buckets: u32,
}

/// Largest broadcast chunk, elements (512 KiB): the tree's pipelining grain.
const BROADCAST_CHUNK: usize = 128 * 1024;

impl TrainingSpec {
    /// Gradient buckets per iteration.
    pub fn buckets(&self) -> u32 {
        self.params.div_ceil(self.bucket.max(1)) as u32
    }

    /// Elements of gradient bucket `b` within a gradient region (DDP order: bucket 0 holds the
    /// last parameters, whose gradients the backward pass produces first).
    pub fn bucket_range(&self, b: u32) -> Range<usize> {
        let end = self.params - (b as usize * self.bucket).min(self.params);
        end.saturating_sub(self.bucket)..end
    }

    /// The schedule.
    pub fn build(&self) -> Result<Training, CollectiveError> {
        let n = self.layout.world_size();
        if self.params == 0 || self.bucket == 0 || self.iterations == 0 {
            return Err(CollectiveError::InvalidLayout("parameters, bucket and iterations must be > 0"));
        }
        let p = self.params;
        let buckets = self.buckets();
        let mut t: Vec<Transfer> = Vec::new();
        let mut milestones = Vec::new();
        // Per rank, the ids of the transfers into it since its last milestone.
        let mut into: Vec<Vec<usize>> = vec![Vec::new(); n as usize];
        let push = |t: &mut Vec<Transfer>, into: &mut Vec<Vec<usize>>, x: Transfer| {
            into[x.dst_rank as usize].push(t.len());
            t.push(x);
            t.len() - 1
        };
        match self.broadcast {
            BroadcastAlgo::Chain => {
                for x in Schedule::broadcast(n, 0, p)?.transfers {
                    push(&mut t, &mut into, x);
                }
            }
            BroadcastAlgo::Tree => {
                for x in tree_broadcast(&self.layout, 0..p) {
                    push(&mut t, &mut into, x);
                }
            }
        }
        let mut last: Vec<usize> = (0..n)
            .map(|r| {
                let deps = std::mem::take(&mut into[r as usize]);
                let id = t.len();
                t.push(local(Phase::Milestone, r, deps, 0));
                milestones.push(Milestone { id, rank: r, mark: Mark::BroadcastDone });
                id
            })
            .collect();
        let rings = self.rings();
        for it in 1..=self.iterations {
            let region = it as usize * p;
            // The compute holds of every rank; bucket b's AllReduce starts after hold b.
            let mut holds: Vec<Vec<usize>> = vec![Vec::with_capacity(buckets as usize); n as usize];
            for r in 0..n {
                for b in 0..buckets {
                    let hold = self.compute_ns / u64::from(buckets)
                        + u64::from(b + 1 == buckets) * (self.compute_ns % u64::from(buckets));
                    let dep = if b == 0 { last[r as usize] } else { holds[r as usize][b as usize - 1] };
                    let id = t.len();
                    let mut x = local(Phase::Compute, r, vec![dep], hold);
                    x.step = it;
                    x.chunk = b;
                    t.push(x);
                    holds[r as usize].push(id);
                    milestones.push(Milestone { id, rank: r, mark: Mark::BucketReady { iteration: it, bucket: b } });
                }
            }
            for b in 0..buckets {
                let range = self.bucket_range(b);
                let range = region + range.start..region + range.end;
                let start = |r: u32| vec![holds[r as usize][b as usize]];
                for x in ring_allreduce(&rings, range, t.len(), start) {
                    push(&mut t, &mut into, x);
                }
            }
            for r in 0..n {
                let mut deps = std::mem::take(&mut into[r as usize]);
                deps.push(*holds[r as usize].last().expect("buckets > 0"));
                let id = t.len();
                let mut x = local(Phase::Milestone, r, deps, 0);
                x.step = it;
                t.push(x);
                milestones.push(Milestone { id, rank: r, mark: Mark::IterationDone { iteration: it } });
                last[r as usize] = id;
            }
        }
        let elems = p * (1 + self.iterations as usize);
        Ok(Training {
            schedule: Schedule { ranks: n, elems, buffer_elems: elems, output: 0..elems, transfers: t },
            milestones,
            buckets,
        })
    }

    /// The rings (each a rank order) of [`Self::rings`].
    pub fn rings(&self) -> Vec<Vec<u32>> {
        let l = &self.layout;
        let n = l.world_size();
        match self.rings {
            RingOrder::Ranks => vec![(0..n).collect()],
            RingOrder::RailAligned => (0..l.procs_per_node)
                .map(|c| {
                    let g = l.procs_per_node;
                    (0..l.nodes)
                        .flat_map(|node| {
                            (0..g).map(move |k| {
                                let k = if node % 2 == 0 { k } else { g - 1 - k };
                                node * g + (c + k) % g
                            })
                        })
                        .collect()
                })
                .collect(),
        }
    }
}

/// One iteration's times (emulated ns since the job's start), over all ranks: the step ends when
/// the slowest rank has its gradients reduced (data parallelism is synchronous), and the ring can
/// move a bucket only once every rank has it ready.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct IterationTimes {
    pub iteration: u32,
    /// When the first rank started computing (its previous iteration, or the broadcast, ended).
    pub start_ns: u64,
    /// When the last rank had its gradients reduced.
    pub end_ns: u64,
    /// Longest compute gap as a rank ran it (its start to its last bucket ready).
    pub compute_ns: u64,
    /// The communication window: from the first bucket being ready on every rank to the end.
    pub comm_ns: u64,
    /// Exposed communication: from the last rank's compute end to the end (what the overlap with
    /// compute did not hide).
    pub exposed_ns: u64,
}

impl Training {
    /// When every rank held the parameters, and each iteration's times, from `at(id)`: when
    /// milestone `id` was reached. `Err` names a milestone never reached.
    pub fn times(&self, at: impl Fn(usize) -> Option<u64>) -> Result<(u64, Vec<IterationTimes>), Milestone> {
        let mut broadcast = 0;
        let ranks = self.schedule.ranks as usize;
        let iterations = self
            .milestones
            .iter()
            .filter_map(|m| match m.mark {
                Mark::IterationDone { iteration } => Some(iteration),
                _ => None,
            })
            .max()
            .unwrap_or(0) as usize;
        // Per iteration (0: the broadcast) and rank: (end, first bucket ready, last bucket ready).
        let mut t = vec![vec![(0u64, u64::MAX, 0u64); ranks]; iterations + 1];
        for m in &self.milestones {
            let when = at(m.id).ok_or(*m)?;
            let r = m.rank as usize;
            match m.mark {
                Mark::BroadcastDone => {
                    t[0][r].0 = when;
                    broadcast = broadcast.max(when);
                }
                Mark::BucketReady { iteration, .. } => {
                    let x = &mut t[iteration as usize][r];
                    x.1 = x.1.min(when);
                    x.2 = x.2.max(when);
                }
                Mark::IterationDone { iteration } => t[iteration as usize][r].0 = when,
            }
        }
        let out = (1..=iterations)
            .map(|i| {
                let mut it = IterationTimes { iteration: i as u32, start_ns: u64::MAX, ..Default::default() };
                let (mut first_all, mut last_all) = (0, 0);
                for (prev, &(end, first, last)) in t[i - 1].iter().zip(&t[i]) {
                    let start = prev.0;
                    it.start_ns = it.start_ns.min(start);
                    it.end_ns = it.end_ns.max(end);
                    it.compute_ns = it.compute_ns.max(last.saturating_sub(start));
                    first_all = first_all.max(first);
                    last_all = last_all.max(last);
                }
                it.comm_ns = it.end_ns.saturating_sub(first_all);
                it.exposed_ns = it.end_ns.saturating_sub(last_all);
                it
            })
            .collect();
        Ok((broadcast, out))
    }
}

/// A local transfer of no data on rank `r`.
fn local(phase: Phase, r: u32, deps: Vec<usize>, hold_ns: u64) -> Transfer {
    Transfer { phase, step: 0, src_rank: r, dst_rank: r, chunk: 0, src: 0..0, dst: 0..0, op: Op::Copy, deps, hold_ns }
}

/// Tree broadcast of `range` from rank 0 (see the module docs); dependencies are indices into
/// the returned list ([`TrainingSpec::build`] puts it first, so they are the transfer ids).
fn tree_broadcast(l: &RankLayout, range: Range<usize>) -> Vec<Transfer> {
    let g = l.procs_per_node;
    // Edges (parent, child) in the order data flows: first down the node tree (local rank 0s),
    // then along each node's chain.
    let mut parent: Vec<Option<u32>> = vec![None; l.world_size() as usize];
    for node in 1..l.nodes {
        parent[(node * g) as usize] = Some((node - 1) / 2 * g);
    }
    for node in 0..l.nodes {
        for k in 1..g {
            parent[(node * g + k) as usize] = Some(node * g + k - 1);
        }
    }
    // Ranks in breadth-first order from the root, so a parent's hop precedes its children's.
    let mut order = vec![0u32];
    let mut i = 0;
    while i < order.len() {
        let r = order[i];
        order.extend((0..l.world_size()).filter(|&c| parent[c as usize] == Some(r)));
        i += 1;
    }
    let chunks = range.len().div_ceil(BROADCAST_CHUNK).max(1) as u32;
    let mut arrival: Vec<Vec<usize>> = vec![Vec::new(); l.world_size() as usize];
    let mut t = Vec::new();
    for c in 0..chunks {
        let cr = chunk_range(range.len(), chunks, c);
        let cr = range.start + cr.start..range.start + cr.end;
        for &r in order.iter().skip(1) {
            let from = parent[r as usize].expect("non-root");
            let deps = if from == 0 { vec![] } else { vec![arrival[from as usize][c as usize]] };
            arrival[r as usize].push(t.len());
            t.push(Transfer {
                phase: Phase::Broadcast,
                step: c,
                src_rank: from,
                dst_rank: r,
                chunk: c,
                src: cr.clone(),
                dst: cr.clone(),
                op: Op::Copy,
                deps,
                hold_ns: 0,
            });
        }
    }
    t
}

/// Ring AllReduce of `range` over every ring of `rings` (each a rank order of the same length;
/// the range split evenly across them), as [`Schedule::ring_allreduce`] does for one ring in rank
/// order, step by step across the rings. The transfers get ids from `base` on; a rank's first
/// sends wait for `start(rank)`.
fn ring_allreduce(
    rings: &[Vec<u32>],
    range: Range<usize>,
    base: usize,
    start: impl Fn(u32) -> Vec<usize>,
) -> Vec<Transfer> {
    let m = rings.first().map_or(0, Vec::len) as u32;
    if m < 2 {
        return Vec::new();
    }
    let nr = rings.len();
    let steps = m - 1;
    let id = |k: u32, c: usize, p: u32| base + (k as usize * nr + c) * m as usize + p as usize;
    let mut t = Vec::with_capacity(2 * steps as usize * nr * m as usize);
    for k in 0..2 * steps {
        let (phase, step, op) =
            if k < steps { (Phase::ReduceScatter, k, Op::Sum) } else { (Phase::AllGather, k - steps, Op::Copy) };
        for (c, ring) in rings.iter().enumerate() {
            let part = chunk_range(range.len(), nr as u32, c as u32);
            let part = range.start + part.start..range.start + part.end;
            for p in 0..m {
                let chunk = match phase {
                    Phase::ReduceScatter => (p + m - step) % m,
                    _ => (p + 1 + m - step) % m,
                };
                let r = chunk_range(part.len(), m, chunk);
                let r = part.start + r.start..part.start + r.end;
                let deps = if k == 0 { start(ring[p as usize]) } else { vec![id(k - 1, c, (p + m - 1) % m)] };
                t.push(Transfer {
                    phase,
                    step,
                    src_rank: ring[p as usize],
                    dst_rank: ring[((p + 1) % m) as usize],
                    chunk,
                    src: r.clone(),
                    dst: r,
                    op,
                    deps,
                    hold_ns: 0,
                });
            }
        }
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::collective::simulate;

    fn spec(nodes: u32, g: u32, params: usize, bucket: usize) -> TrainingSpec {
        TrainingSpec {
            layout: RankLayout::new(nodes, g).unwrap(),
            params,
            iterations: 3,
            bucket,
            compute_ns: 1_000_003,
            broadcast: BroadcastAlgo::Tree,
            rings: RingOrder::Ranks,
        }
    }

    /// Every rank ends with rank 0's parameters and, per iteration, the sum of every rank's
    /// gradients of that iteration (in any dependency-respecting order).
    fn check(s: &TrainingSpec) {
        let tr = s.build().unwrap();
        let n = s.layout.world_size();
        let elems = tr.schedule.elems;
        let inputs: Vec<Vec<u32>> = (0..n)
            .map(|r| (0..elems).map(|i| (r + 1).wrapping_mul(2_654_435_761) ^ (i as u32 * 7919)).collect())
            .collect();
        for seed in [1u64, 7, 0xfeed] {
            let out = simulate(&tr.schedule, &inputs, seed).unwrap();
            for (r, b) in out.iter().enumerate() {
                assert_eq!(&b[..s.params], &inputs[0][..s.params], "{s:?}: rank {r}'s parameters");
                for it in 1..=s.iterations as usize {
                    let reg = it * s.params..(it + 1) * s.params;
                    let want: Vec<u32> =
                        reg.clone().map(|i| inputs.iter().fold(0u32, |a, x| a.wrapping_add(x[i]))).collect();
                    assert_eq!(&b[reg], &want[..], "{s:?}: rank {r} iteration {it}");
                }
            }
        }
    }

    #[test]
    fn every_variant_broadcasts_the_parameters_and_sums_each_iterations_gradients() {
        for (nodes, g) in [(1, 1), (1, 4), (2, 2), (3, 2), (4, 1), (2, 4), (5, 3)] {
            for broadcast in [BroadcastAlgo::Tree, BroadcastAlgo::Chain] {
                for rings in [RingOrder::Ranks, RingOrder::RailAligned] {
                    for (params, bucket) in [(1000, 300), (64, 64), (10, 3)] {
                        check(&TrainingSpec { broadcast, rings, ..spec(nodes, g, params, bucket) });
                    }
                }
            }
        }
    }

    #[test]
    fn rail_aligned_rings_cross_between_nodes_on_one_rail_only() {
        let l = RankLayout::new(4, 8).unwrap();
        let s = TrainingSpec { rings: RingOrder::RailAligned, ..spec(4, 8, 4096, 4096) };
        let rings = s.rings();
        assert_eq!(rings.len(), 8, "a ring per local rank");
        for ring in &rings {
            let mut sorted = ring.clone();
            sorted.sort_unstable();
            assert_eq!(sorted, (0..32).collect::<Vec<_>>(), "a ring visits every rank once");
            let mut inter = 0;
            for (i, &a) in ring.iter().enumerate() {
                let b = ring[(i + 1) % ring.len()];
                let ((na, la), (nb, lb)) = (l.locate(a).unwrap(), l.locate(b).unwrap());
                if na != nb {
                    inter += 1;
                    assert_eq!(la, lb, "ring {ring:?}: hop {a} -> {b} changes rail");
                }
            }
            assert_eq!(inter, 4, "each ring leaves every node once");
        }
        // The rings' inter-node hops use every rail (two rings per rail).
        let mut rails = [0; 8];
        for ring in &rings {
            for (i, &a) in ring.iter().enumerate() {
                let b = ring[(i + 1) % ring.len()];
                if a / 8 != b / 8 {
                    rails[(a % 8) as usize] += 1;
                }
            }
        }
        assert!(rails.iter().all(|&k| k == 4), "{rails:?}");
        // Rank order crosses rails between nodes.
        let plain = TrainingSpec { rings: RingOrder::Ranks, ..s.clone() }.rings();
        assert!(plain[0].windows(2).any(|w| w[0] / 8 != w[1] / 8 && w[0] % 8 != w[1] % 8));
        // With an odd number of nodes only the closing hop changes rail, to the next one.
        let odd = TrainingSpec { rings: RingOrder::RailAligned, ..spec(3, 4, 64, 64) };
        for ring in odd.rings() {
            let changes: Vec<_> = (0..ring.len())
                .map(|i| (ring[i], ring[(i + 1) % ring.len()]))
                .filter(|(a, b)| a / 4 != b / 4 && a % 4 != b % 4)
                .collect();
            assert_eq!(changes.len(), 1, "{ring:?}");
            assert_eq!(changes[0].1 / 4, 0, "the closing hop");
        }
    }

    #[test]
    fn the_tree_feeds_nodes_from_local_rank_0_and_chains_inside_a_node() {
        let s = TrainingSpec { iterations: 1, ..spec(7, 4, 3 * BROADCAST_CHUNK + 5, 1000) };
        let tr = s.build().unwrap();
        let bc: Vec<_> = tr.schedule.transfers.iter().filter(|t| t.phase == Phase::Broadcast).collect();
        assert_eq!(bc.len(), 4 * 27, "4 chunks to each of 27 ranks");
        for t in &bc {
            let (sa, sb) = (t.src_rank / 4, t.dst_rank / 4);
            if sa == sb {
                assert_eq!(t.dst_rank, t.src_rank + 1, "chain inside a node");
            } else {
                assert_eq!((t.src_rank % 4, t.dst_rank % 4), (0, 0), "node to node on rail 1");
                assert_eq!(sa, (sb - 1) / 2, "binary tree over nodes");
            }
        }
        // Node 0 feeds only nodes 1 and 2: the tree, not a chain or a star.
        let fed: std::collections::BTreeSet<_> =
            bc.iter().filter(|t| t.src_rank == 0 && t.dst_rank >= 4).map(|t| t.dst_rank).collect();
        assert_eq!(fed.into_iter().collect::<Vec<_>>(), vec![4, 8]);
    }

    #[test]
    fn buckets_start_after_their_compute_hold_and_the_iteration_waits_for_all() {
        let s = spec(2, 2, 1000, 300);
        assert_eq!(s.buckets(), 4);
        assert_eq!((0..4).map(|b| s.bucket_range(b)).collect::<Vec<_>>(), vec![700..1000, 400..700, 100..400, 0..100]);
        let tr = s.build().unwrap();
        let t = &tr.schedule.transfers;
        for r in 0..4 {
            let holds: Vec<_> =
                t.iter().filter(|x| x.phase == Phase::Compute && x.src_rank == r && x.step == 2).collect();
            assert_eq!(holds.len(), 4);
            assert_eq!(holds.iter().map(|h| h.hold_ns).sum::<u64>(), 1_000_003, "the holds add up to the gap");
        }
        let ready = |it, b, r| {
            tr.milestones
                .iter()
                .find(|m| m.rank == r && m.mark == Mark::BucketReady { iteration: it, bucket: b })
                .unwrap()
                .id
        };
        let done = |it, r| {
            tr.milestones.iter().find(|m| m.rank == r && m.mark == Mark::IterationDone { iteration: it }).unwrap().id
        };
        for (id, x) in t.iter().enumerate() {
            if x.phase == Phase::ReduceScatter && x.step == 0 {
                // Which bucket: by its elements within the region.
                let it = x.src.start / 1000;
                let b = (0..4).find(|&b| s.bucket_range(b).contains(&(x.src.start % 1000))).unwrap();
                assert_eq!(x.deps, vec![ready(it as u32, b, x.src_rank)], "transfer {id}");
            }
        }
        // An iteration ends on a rank after everything sent to it in that iteration and its last
        // hold; the next compute starts there.
        for r in 0..4 {
            let d = &t[done(2, r)];
            assert!(d.deps.contains(&ready(2, 3, r)));
            let into = t
                .iter()
                .enumerate()
                .filter(|(_, x)| x.dst_rank == r && !x.is_local() && x.src.start / 1000 == 2)
                .count();
            assert_eq!(d.deps.len(), into + 1);
            assert_eq!(t[ready(3, 0, r)].deps, vec![done(2, r)]);
        }
    }

    #[test]
    fn nothing_to_train_is_refused() {
        assert!(TrainingSpec { iterations: 0, ..spec(2, 2, 10, 10) }.build().is_err());
        assert!(TrainingSpec { bucket: 0, ..spec(2, 2, 10, 10) }.build().is_err());
        assert!(spec(2, 2, 0, 10).build().is_err());
    }
}
