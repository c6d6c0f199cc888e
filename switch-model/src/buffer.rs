//! Shared-buffer admission with ingress priority-group accounting, as a shared-buffer switch
//! ASIC does it (docs/src/lossless-qos.md and "Architecture"; book ch. 11).
//!
//! Every frame held is charged twice: to its egress queue (port, traffic class) and to its
//! ingress priority group (ingress port, priority from the DSCP map). Charges are frame bytes or,
//! with a cell size, whole cells. The buffer is split into
//! - the headroom reserved for every (port × lossless priority): `headroom_bytes` each, used only
//!   by a lossless group past xOFF, for the bytes in flight while its PFC reaches the sender;
//! - the shared pool: everything else.
//!
//! A lossy frame is admitted only while its egress queue stays within `queue_limit_bytes` and the
//! shared pool has room; otherwise it is dropped at admission. It never takes headroom. A
//! lossless frame is charged to the shared pool while the pool has room and its group is below
//! xOFF, then to its group's headroom; a frame that fits neither is a headroom overflow, the only
//! way a lossless frame is lost. A group reaching xOFF (or spilling into headroom) emits
//! [`PgEvent::Xoff`] once; falling below xON afterwards emits [`PgEvent::Xon`] once.
//!
//! The buffer also counts the UMEM chunks its frames hold, against two budgets sized at a
//! realistic frame mix rather than the smallest frame ([`rocefab_contracts::memory`]): the shared
//! pool's and the headroom's. A lossy frame that finds no chunk of the shared budget is dropped
//! at admission ([`Reject::NoFrame`], counted per queue), never a silent fill-ring starvation; a
//! lossless frame that finds none goes to its group's headroom, as when the shared bytes run out
//! (so its group sends PFC), and is lost only when the headroom's bytes or chunks are exhausted
//! ([`Reject::HeadroomOverflow`]).
//!
//! Every change of a queue's charge is stored into the [`DepthBoard`] given by
//! [`SharedBuffer::publish_to`], where the XDP program's WRED reads it.
//!
//! Pure logic: no clock, no allocation after [`SharedBuffer::new`].
use dataplane_common::limits::NUM_TC;

use crate::depths::DepthBoard;

/// The buffer's configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BufferParams {
    pub ports: usize,
    pub buffer_bytes: u64,
    /// Accounting cell; 0 = frame bytes.
    pub cell_bytes: u32,
    /// Bitmap of lossless priorities.
    pub lossless: u8,
    pub xoff_bytes: u64,
    pub xon_bytes: u64,
    pub headroom_bytes: u64,
    /// Egress limit of lossy queues.
    pub queue_limit_bytes: u64,
    /// UMEM chunk size (a frame longer than one 4 KiB chunk holds several).
    pub chunk_bytes: u32,
    /// UMEM chunks for frames charged to the shared pool, and to the headroom.
    pub frames: rocefab_contracts::memory::BufferChunks,
}

/// Where an admitted frame was charged.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Admit {
    #[default]
    Shared,
    Headroom,
}

/// Why a frame was not admitted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reject {
    /// Lossy: its egress queue is at its limit.
    QueueFull,
    /// Lossy: the shared pool is full.
    PoolFull,
    /// Lossy: every UMEM chunk of the shared pool's budget is held.
    NoFrame,
    /// Lossless: past xOFF and the group's headroom is full.
    HeadroomOverflow,
}

/// A priority group crossed a threshold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PgEvent {
    Xoff { port: usize, prio: u8 },
    Xon { port: usize, prio: u8 },
}

#[derive(Debug, Clone, Copy, Default)]
struct Pg {
    shared: u64,
    headroom: u64,
    /// UMEM chunks of the group's frames charged to its headroom.
    headroom_chunks: u64,
    xoff: bool,
}

/// The shared buffer of one switch.
#[derive(Debug)]
pub struct SharedBuffer {
    p: BufferParams,
    shared_size: u64,
    shared_used: u64,
    /// Chunk budgets and the chunks held against them.
    frames: rocefab_contracts::memory::BufferChunks,
    shared_frames: u64,
    headroom_frames: u64,
    pg: Vec<[Pg; NUM_TC]>,
    queue: Vec<[u64; NUM_TC]>,
    /// Where every change of a queue's charge is published for the XDP program's WRED.
    board: Option<DepthBoard>,
}

impl SharedBuffer {
    pub fn new(p: BufferParams) -> Self {
        let reserved = p.ports as u64 * u64::from(p.lossless.count_ones()) * p.headroom_bytes;
        SharedBuffer {
            p,
            shared_size: p.buffer_bytes.saturating_sub(reserved),
            shared_used: 0,
            frames: p.frames,
            shared_frames: 0,
            headroom_frames: 0,
            pg: vec![[Pg::default(); NUM_TC]; p.ports],
            queue: vec![[0; NUM_TC]; p.ports],
            board: None,
        }
    }

    /// Publishes every queue's charge into `board` from now on (see [`crate::depths`]).
    pub fn publish_to(&mut self, board: DepthBoard) {
        for (port, q) in self.queue.iter().enumerate() {
            for (tc, &bytes) in q.iter().enumerate() {
                board.publish(port, tc as u8, bytes);
            }
        }
        self.board = Some(board);
    }

    /// Bytes charged for a frame of `frame_len` bytes: the frame, or whole cells.
    #[inline]
    pub fn charge_of(&self, frame_len: u32) -> u64 {
        let len = u64::from(frame_len).max(1);
        match self.p.cell_bytes {
            0 => len,
            c => len.div_ceil(u64::from(c)) * u64::from(c),
        }
    }

    /// UMEM chunks a frame of `frame_len` bytes holds.
    #[inline(always)]
    fn chunks_of(&self, frame_len: u32) -> u64 {
        u64::from(rocefab_contracts::memory::chunks_per_frame(frame_len, self.p.chunk_bytes))
    }

    #[inline]
    fn is_lossless(&self, prio: u8) -> bool {
        self.p.lossless & (1 << (prio & 7)) != 0
    }

    /// Admits a frame arriving on `ingress` with priority `prio`, bound for queue (`egress`, `tc`).
    #[inline]
    pub fn admit(
        &mut self,
        ingress: usize,
        prio: u8,
        egress: usize,
        tc: u8,
        frame_len: u32,
    ) -> Result<(Admit, Option<PgEvent>), Reject> {
        let (prio, tc) = (prio & 7, tc & 7);
        let c = self.charge_of(frame_len);
        let k = self.chunks_of(frame_len);
        let pool_room = self.shared_used + c <= self.shared_size;
        let frame_room = self.shared_frames + k <= self.frames.shared;
        let admit = if self.is_lossless(prio) {
            let pg = &self.pg[ingress][prio as usize];
            if pool_room && frame_room && pg.shared + pg.headroom < self.p.xoff_bytes {
                Admit::Shared
            } else if pg.headroom + c <= self.p.headroom_bytes && self.headroom_frames + k <= self.frames.headroom {
                Admit::Headroom
            } else {
                return Err(Reject::HeadroomOverflow);
            }
        } else {
            if self.queue[egress][tc as usize] + c > self.p.queue_limit_bytes {
                return Err(Reject::QueueFull);
            }
            if !pool_room {
                return Err(Reject::PoolFull);
            }
            if !frame_room {
                return Err(Reject::NoFrame);
            }
            Admit::Shared
        };
        match admit {
            Admit::Shared => self.shared_frames += k,
            Admit::Headroom => self.headroom_frames += k,
        }
        self.queue[egress][tc as usize] += c;
        if let Some(b) = &self.board {
            b.publish(egress, tc, self.queue[egress][tc as usize]);
        }
        let pg = &mut self.pg[ingress][prio as usize];
        match admit {
            Admit::Shared => {
                self.shared_used += c;
                pg.shared += c;
            }
            Admit::Headroom => {
                pg.headroom += c;
                pg.headroom_chunks += k;
            }
        }
        let mut ev = None;
        if self.p.lossless & (1 << prio) != 0
            && !pg.xoff
            && (pg.shared + pg.headroom >= self.p.xoff_bytes || admit == Admit::Headroom)
        {
            pg.xoff = true;
            ev = Some(PgEvent::Xoff { port: ingress, prio });
        }
        Ok((admit, ev))
    }

    /// Releases the charges of a frame that left (transmitted, or dropped after admission).
    ///
    /// Its group's headroom is given back first, whichever part the frame was charged to when
    /// it arrived, as ns-3's shared-buffer MMU does (`SwitchMmu::RemoveFromIngressAdmission` in
    /// the HPCC repository: `from_hdrm = min(hdrm_bytes, psize)`): the headroom holds the
    /// group's overshoot past xOFF, and an egress FIFO sends the group's older (shared) frames
    /// first, so charging each frame back to where it came in would leave one pause's overshoot
    /// in the headroom while the next pause fills it again, and lose a lossless frame to a
    /// headroom sized for one pause.
    #[inline]
    pub fn release(&mut self, ingress: usize, prio: u8, egress: usize, tc: u8, frame_len: u32) -> Option<PgEvent> {
        let (prio, tc) = (prio & 7, tc & 7);
        let c = self.charge_of(frame_len);
        let k = self.chunks_of(frame_len);
        let q = &mut self.queue[egress][tc as usize];
        *q = q.saturating_sub(c);
        if let Some(b) = &self.board {
            b.publish(egress, tc, *q);
        }
        let pg = &mut self.pg[ingress][prio as usize];
        let from_headroom = pg.headroom.min(c);
        let chunks_from_headroom = pg.headroom_chunks.min(k);
        pg.headroom -= from_headroom;
        pg.headroom_chunks -= chunks_from_headroom;
        pg.shared = pg.shared.saturating_sub(c - from_headroom);
        self.shared_used = self.shared_used.saturating_sub(c - from_headroom);
        self.headroom_frames = self.headroom_frames.saturating_sub(chunks_from_headroom);
        self.shared_frames = self.shared_frames.saturating_sub(k - chunks_from_headroom);
        if pg.xoff && pg.shared + pg.headroom < self.p.xon_bytes {
            pg.xoff = false;
            return Some(PgEvent::Xon { port: ingress, prio });
        }
        None
    }

    /// Bytes charged to the ingress group (shared + headroom).
    pub fn pg_bytes(&self, port: usize, prio: u8) -> u64 {
        let pg = &self.pg[port][(prio & 7) as usize];
        pg.shared + pg.headroom
    }
    pub fn headroom_used(&self, port: usize, prio: u8) -> u64 {
        self.pg[port][(prio & 7) as usize].headroom
    }
    /// Bytes charged to egress queue (`port`, `tc`).
    pub fn queue_bytes(&self, port: usize, tc: u8) -> u64 {
        self.queue[port][(tc & 7) as usize]
    }
    pub fn shared_used(&self) -> u64 {
        self.shared_used
    }
    pub fn shared_size(&self) -> u64 {
        self.shared_size
    }
    pub fn is_xoff(&self, port: usize, prio: u8) -> bool {
        self.pg[port][(prio & 7) as usize].xoff
    }
    /// UMEM chunks the held frames take (shared pool and headroom).
    pub fn frames_held(&self) -> u64 {
        self.shared_frames + self.headroom_frames
    }
    /// UMEM chunks the buffer may hold ([`rocefab_contracts::memory::buffer_chunks`]).
    pub fn frames_needed(&self) -> u64 {
        self.frames.total()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rocefab_contracts::memory::BufferChunks;

    fn params() -> BufferParams {
        BufferParams {
            ports: 3,
            buffer_bytes: 100_000,
            cell_bytes: 0,
            lossless: 1 << 3,
            xoff_bytes: 20_000,
            xon_bytes: 5_000,
            headroom_bytes: 10_000,
            queue_limit_bytes: 30_000,
            chunk_bytes: 2048,
            // Chunks enough for the bytes at the smallest frame: only the bytes limit.
            frames: BufferChunks { shared: 100_000, headroom: 100_000 },
        }
    }

    #[test]
    fn every_charge_change_is_published() {
        let mut b = SharedBuffer::new(params());
        b.publish_to(DepthBoard::heap());
        b.admit(0, 3, 2, 3, 1000).unwrap();
        b.admit(1, 3, 2, 3, 500).unwrap();
        let board = b.board.as_ref().unwrap();
        assert_eq!(board.get(2, 3), 1500);
        assert_eq!(board.get(2, 3), b.queue_bytes(2, 3));
        b.release(0, 3, 2, 3, 1000);
        assert_eq!(b.board.as_ref().unwrap().get(2, 3), 500);
        b.release(1, 3, 2, 3, 500);
        assert_eq!(b.board.as_ref().unwrap().get(2, 3), 0);
    }

    #[test]
    fn headroom_is_reserved_per_port_and_lossless_priority() {
        let b = SharedBuffer::new(params());
        assert_eq!(b.shared_size(), 100_000 - 3 * 10_000);
        assert_eq!(b.frames_needed(), 200_000);
        let two = SharedBuffer::new(BufferParams { lossless: 0b1000_1000, ..params() });
        assert_eq!(two.shared_size(), 100_000 - 6 * 10_000);
    }

    #[test]
    fn cells_round_up() {
        let b = SharedBuffer::new(BufferParams { cell_bytes: 256, ..params() });
        assert_eq!(b.charge_of(60), 256);
        assert_eq!(b.charge_of(256), 256);
        assert_eq!(b.charge_of(257), 512);
        assert_eq!(b.charge_of(1514), 1536);
        assert_eq!(SharedBuffer::new(params()).charge_of(1514), 1514);
    }

    #[test]
    fn lossless_xoff_once_then_headroom_then_overflow_and_xon_once() {
        let mut b = SharedBuffer::new(params());
        let mut events = vec![];
        let mut admitted = vec![];
        let mut overflow = 0;
        for _ in 0..40 {
            match b.admit(0, 3, 2, 3, 1000) {
                Ok((a, ev)) => {
                    admitted.push(a);
                    events.extend(ev);
                }
                Err(Reject::HeadroomOverflow) => overflow += 1,
                Err(e) => panic!("{e:?}"),
            }
        }
        // 20 frames reach xOFF in the shared pool, 10 more fill the headroom, 10 overflow.
        assert_eq!(admitted.iter().filter(|a| **a == Admit::Shared).count(), 20);
        assert_eq!(admitted.iter().filter(|a| **a == Admit::Headroom).count(), 10);
        assert_eq!(overflow, 10);
        assert_eq!(events, vec![PgEvent::Xoff { port: 0, prio: 3 }]);
        assert!(b.is_xoff(0, 3));
        assert_eq!(b.pg_bytes(0, 3), 30_000);
        assert_eq!(b.headroom_used(0, 3), 10_000);
        assert_eq!(b.queue_bytes(2, 3), 30_000);
        // Another ingress group is unaffected.
        assert!(matches!(b.admit(1, 3, 2, 3, 1000), Ok((Admit::Shared, None))));
        b.release(1, 3, 2, 3, 1000);
        // Drain: the XON comes once, when the group falls below xON.
        let mut xon = vec![];
        for i in 0..admitted.len() {
            if let Some(ev) = b.release(0, 3, 2, 3, 1000) {
                xon.push((i, ev));
            }
        }
        assert_eq!(xon.len(), 1);
        assert_eq!(xon[0].1, PgEvent::Xon { port: 0, prio: 3 });
        // The headroom is given back first, then the shared bytes; below 5000 B after 26 releases.
        assert_eq!(xon[0].0, 25);
        assert_eq!((b.pg_bytes(0, 3), b.shared_used(), b.queue_bytes(2, 3), b.frames_held()), (0, 0, 0, 0));
    }

    #[test]
    fn a_pause_overshoot_leaves_the_headroom_before_the_next_pause_fills_it() {
        // One ingress group, a FIFO egress: 20 frames to xOFF, 10 overshoot into the headroom
        // (the most it holds), then the 26 oldest leave (the XON) while the last 4 of the
        // overshoot are still queued, and the sender fills the group to xOFF and overshoots by
        // 10 again. The headroom is given back first, so the second overshoot fits: charging
        // each frame back to where it came in would have 4 000 B of the first overshoot left in
        // the headroom and lose 4 lossless frames.
        let mut b = SharedBuffer::new(params());
        let mut queued = std::collections::VecDeque::new();
        for _ in 0..30 {
            queued.push_back(b.admit(0, 3, 2, 3, 1000).unwrap().0);
        }
        assert_eq!(queued.iter().filter(|a| **a == Admit::Headroom).count(), 10);
        let mut xon = None;
        for i in 0..26 {
            queued.pop_front();
            if let Some(ev) = b.release(0, 3, 2, 3, 1000) {
                xon = Some((i, ev));
            }
        }
        assert_eq!(xon, Some((25, PgEvent::Xon { port: 0, prio: 3 })));
        assert_eq!((b.pg_bytes(0, 3), b.headroom_used(0, 3)), (4_000, 0), "the headroom went first");
        let (mut shared, mut headroom, mut xoff) = (0, 0, vec![]);
        for _ in 0..26 {
            match b.admit(0, 3, 2, 3, 1000) {
                Ok((Admit::Shared, ev)) => {
                    shared += 1;
                    xoff.extend(ev);
                }
                Ok((Admit::Headroom, ev)) => {
                    headroom += 1;
                    xoff.extend(ev);
                }
                Err(e) => panic!("lost a lossless frame: {e:?}"),
            }
        }
        assert_eq!((shared, headroom), (16, 10));
        assert_eq!(xoff, vec![PgEvent::Xoff { port: 0, prio: 3 }]);
        assert_eq!(b.admit(0, 3, 2, 3, 1000), Err(Reject::HeadroomOverflow), "and the headroom is full again");
        for _ in 0..30 {
            b.release(0, 3, 2, 3, 1000);
        }
        assert_eq!((b.pg_bytes(0, 3), b.shared_used(), b.frames_held()), (0, 0, 0));
    }

    #[test]
    fn lossy_is_limited_by_its_queue_and_the_pool_and_never_takes_headroom() {
        let mut b = SharedBuffer::new(params());
        let mut n = 0;
        while b.admit(0, 0, 1, 0, 1000).is_ok() {
            n += 1;
        }
        assert_eq!(n, 30, "queue limit 30 000 B");
        assert_eq!(b.admit(0, 0, 1, 0, 1000), Err(Reject::QueueFull));
        // Other queues fill the rest of the shared pool (70 000 B), never the headroom.
        let mut m = 0;
        loop {
            match b.admit(0, 0, 2, 1, 1000) {
                Ok((a, ev)) => {
                    assert_eq!((a, ev), (Admit::Shared, None));
                    m += 1;
                }
                Err(Reject::QueueFull) => break,
                Err(Reject::PoolFull) => break,
                Err(e) => panic!("{e:?}"),
            }
        }
        assert_eq!(m, 30);
        assert!(b.admit(0, 0, 0, 2, 1000).is_ok());
        for _ in 0..9 {
            b.admit(0, 0, 0, 2, 1000).unwrap();
        }
        assert_eq!(b.shared_used(), 70_000);
        assert_eq!(b.admit(0, 0, 0, 2, 1000), Err(Reject::PoolFull));
        // A lossless frame still finds its group's headroom.
        assert_eq!(b.admit(2, 3, 0, 3, 1000), Ok((Admit::Headroom, Some(PgEvent::Xoff { port: 2, prio: 3 }))));
    }

    #[test]
    fn out_of_frames_is_a_lossy_admission_drop() {
        // Ten chunks for the shared pool: the bytes have room for far more frames.
        let mut b = SharedBuffer::new(BufferParams { frames: BufferChunks { shared: 10, headroom: 4 }, ..params() });
        assert_eq!(b.frames_needed(), 14);
        for _ in 0..10 {
            b.admit(0, 0, 1, 0, 60).unwrap();
        }
        assert_eq!(b.frames_held(), 10);
        assert_eq!(b.admit(0, 0, 1, 0, 60), Err(Reject::NoFrame));
        assert_eq!(b.admit(1, 0, 2, 0, 60), Err(Reject::NoFrame), "every lossy queue");
        // The bytes are not what ran out, and nothing was charged for the dropped frames.
        assert_eq!((b.shared_used(), b.queue_bytes(1, 0), b.queue_bytes(2, 0)), (600, 600, 0));
        // A released frame gives its chunk back.
        b.release(0, 0, 1, 0, 60);
        assert!(b.admit(1, 0, 2, 0, 60).is_ok());
    }

    #[test]
    fn out_of_frames_sends_a_lossless_frame_to_headroom_with_xoff() {
        let mut b = SharedBuffer::new(BufferParams { frames: BufferChunks { shared: 10, headroom: 4 }, ..params() });
        for _ in 0..10 {
            b.admit(0, 0, 1, 0, 60).unwrap(); // lossy traffic holds every shared chunk
        }
        // Far below xOFF in bytes, but no shared chunk: the headroom takes it and the group
        // sends PFC, as when the shared pool's bytes run out.
        assert_eq!(b.admit(2, 3, 0, 3, 60), Ok((Admit::Headroom, Some(PgEvent::Xoff { port: 2, prio: 3 }))));
        assert_eq!(b.admit(2, 3, 0, 3, 60), Ok((Admit::Headroom, None)));
        assert_eq!(b.admit(1, 3, 0, 3, 60).map(|r| r.0), Ok(Admit::Headroom));
        assert_eq!(b.admit(1, 3, 0, 3, 60).map(|r| r.0), Ok(Admit::Headroom));
        // Only past the headroom's chunks is a lossless frame lost: a headroom overflow.
        assert_eq!(b.admit(2, 3, 0, 3, 60), Err(Reject::HeadroomOverflow));
        assert_eq!(b.frames_held(), 14);
        // The group is below xON (5000 bytes) as soon as a frame leaves: XON once.
        assert_eq!(b.release(2, 3, 0, 3, 60), Some(PgEvent::Xon { port: 2, prio: 3 }));
        assert_eq!(b.release(2, 3, 0, 3, 60), None);
        assert_eq!(b.admit(2, 3, 0, 3, 60).map(|r| r.0), Ok(Admit::Headroom));
    }

    #[test]
    fn a_multi_buffer_frame_holds_every_chunk_it_takes() {
        let frames = BufferChunks { shared: 5, headroom: 0 };
        let mut b = SharedBuffer::new(BufferParams { chunk_bytes: 4096, frames, ..params() });
        // 4170 bytes: two 4 KiB chunks (3840 bytes each after the XDP headroom); 9234: three.
        b.admit(0, 0, 1, 0, 4170).unwrap();
        assert_eq!(b.frames_held(), 2);
        b.admit(0, 0, 2, 0, 1000).unwrap();
        b.admit(0, 0, 2, 0, 1000).unwrap();
        assert_eq!(b.frames_held(), 4);
        assert_eq!(b.admit(0, 0, 2, 0, 4170), Err(Reject::NoFrame));
        b.release(0, 0, 1, 0, 4170);
        assert_eq!(b.frames_held(), 2);
        assert_eq!(b.admit(0, 0, 1, 0, 9234), Ok((Admit::Shared, None)));
        assert_eq!(b.frames_held(), 5);
    }

    proptest::proptest! {
        #[test]
        fn random_admit_release_keeps_the_books(ops in proptest::collection::vec((0usize..3, 0u8..8, 0usize..3, 60u32..1600, proptest::bool::ANY), 1..400)) {
            let p = BufferParams { cell_bytes: 128, frames: BufferChunks { shared: 40, headroom: 10 }, ..params() };
            let mut b = SharedBuffer::new(p);
            let mut held: Vec<(usize, u8, usize, u32)> = vec![];
            for (ing, prio, eg, len, release) in ops {
                if release && !held.is_empty() {
                    let (i, pr, e, l) = held.remove(ing % held.len());
                    b.release(i, pr, e, pr, l);
                } else if b.admit(ing, prio, eg, prio, len).is_ok() {
                    held.push((ing, prio, eg, len));
                }
                proptest::prop_assert!(b.shared_used() <= b.shared_size());
                proptest::prop_assert!(b.frames_held() <= b.frames_needed());
                for port in 0..3 {
                    proptest::prop_assert!(b.headroom_used(port, 3) <= p.headroom_bytes);
                    for q in 0..8u8 {
                        if p.lossless & (1 << q) == 0 {
                            proptest::prop_assert!(b.queue_bytes(port, q) <= p.queue_limit_bytes);
                        }
                    }
                }
            }
            for (i, pr, e, l) in held.drain(..) {
                b.release(i, pr, e, pr, l);
            }
            proptest::prop_assert_eq!((b.shared_used(), b.frames_held()), (0, 0));
            for port in 0..3 {
                for q in 0..8u8 {
                    proptest::prop_assert_eq!((b.pg_bytes(port, q), b.queue_bytes(port, q), b.is_xoff(port, q)), (0, 0, false));
                }
            }
        }
    }
}
