//! The switch's free UMEM frames, and the chains of its multi-buffer packets
//! ([`afxdp::chain`]).
//!
//! On a jumbo link (MTU 9216; the lossless class's RoCE at path MTU 4096 is about 4.2 KB a
//! frame) a frame longer than one 4 KiB chunk arrives as two or three descriptors. The data path
//! names such a packet by its first descriptor, its head, everywhere (queues, buffer charges,
//! scheduler), with its length the whole packet's; [`FramePool`] keeps the links from each
//! descriptor to the next, and every place that gives a packet back ([`FramePool::push`]),
//! sends it ([`FramePool::expand`]) or mirrors it ([`FramePool::whole_frame`]) follows them.
//! A switch whose links all fit one chunk never builds a chain: its path is what it was.
//!
//! The links are one slot per UMEM chunk, allocated at start-up; nothing here allocates later.
use std::ops::{Deref, DerefMut};

use afxdp::chain::{Chains, Segment, MAX_SEGMENTS};
use afxdp::{FrameDesc, Umem};

/// Free frames (a stack of descriptors) plus the links of the packets in flight.
#[derive(Debug)]
pub struct FramePool {
    free: Vec<FrameDesc>,
    chains: Chains<FrameDesc>,
    max_segments: usize,
}

impl FramePool {
    /// A pool of `free` frames of a UMEM of `chunks` chunks; `multi_buffer` when the sockets
    /// were bound with `XDP_USE_SG`.
    pub fn new(free: Vec<FrameDesc>, chunks: usize, multi_buffer: bool) -> Self {
        FramePool {
            free,
            chains: Chains::new(if multi_buffer { chunks } else { 0 }),
            max_segments: if multi_buffer { MAX_SEGMENTS } else { 1 },
        }
    }

    /// Gives back every descriptor of the packet whose head is `d` (just `d` when it is one
    /// descriptor: completions and frames the switch wrote itself never continue).
    #[inline]
    pub fn push(&mut self, d: FrameDesc) {
        if !d.continues() {
            self.free.push(d);
            return;
        }
        let (free, chains) = (&mut self.free, &self.chains);
        chains.for_each(d, |mut s| {
            s.set_continues(false);
            free.push(s);
        });
    }

    /// Gives back every descriptor of the packet `head` but `head` itself, which then stands
    /// alone (a trimmed packet keeps only its first part: `switch_model::trim`).
    #[inline]
    pub fn keep_head(&mut self, head: &mut FrameDesc) {
        if !head.continues() {
            return;
        }
        let (free, chains) = (&mut self.free, &self.chains);
        let mut first = true;
        chains.for_each(*head, |mut s| {
            if first {
                first = false;
                return;
            }
            s.set_continues(false);
            free.push(s);
        });
        head.set_continues(false);
    }

    /// The links of the packets held.
    pub fn chains(&mut self) -> &mut Chains<FrameDesc> {
        &mut self.chains
    }

    /// Most descriptors one packet takes (1 without multi-buffer).
    #[inline]
    pub fn max_segments(&self) -> usize {
        self.max_segments
    }

    /// Bytes of the packet whose head is `d`.
    #[inline]
    pub fn packet_len(&self, d: &FrameDesc) -> usize {
        self.chains.packet_len(d)
    }

    /// Writes the descriptors of the packet `head` into `out` for a TX ring; how many, or
    /// `None` when `out` is too short.
    #[inline]
    pub fn expand(&self, head: FrameDesc, out: &mut [FrameDesc]) -> Option<usize> {
        if !head.continues() {
            let o = out.first_mut()?;
            *o = head;
            return Some(1);
        }
        self.chains.expand(head, out)
    }

    /// Writes the descriptors of every packet in `heads` into `out`, in order; returns how many
    /// (`out` holds [`FramePool::max_segments`] per head, so they always fit).
    #[inline]
    pub fn expand_all(&self, heads: &[FrameDesc], out: &mut [FrameDesc]) -> usize {
        let mut k = 0;
        for &h in heads {
            match self.expand(h, &mut out[k..]) {
                Some(n) => k += n,
                None => break, // cannot happen: `out` holds `max_segments` per head
            }
        }
        k
    }

    /// The bytes of the whole packet `head`, whose first descriptor holds `first`: `first`
    /// itself when the packet is one descriptor, else copied with the rest into `buf` (a
    /// capture needs the frame in one piece).
    ///
    /// # Safety
    ///
    /// The caller owns the packet (every descriptor of its chain is ours, in no ring the kernel
    /// writes) and `umem` is the UMEM of its descriptors.
    pub unsafe fn whole_frame<'a>(
        &self,
        umem: &'a Umem,
        head: &FrameDesc,
        first: &'a [u8],
        buf: &'a mut [u8],
    ) -> &'a [u8] {
        if !head.continues() {
            return first;
        }
        let mut at = first.len().min(buf.len());
        buf[..at].copy_from_slice(&first[..at]);
        let mut i = 0;
        self.chains.for_each(*head, |s| {
            i += 1;
            if i == 1 {
                return; // the head: `first`
            }
            // SAFETY: a descriptor of the caller's packet (see the function's contract); the
            // head's bytes are `first`, never read again through the UMEM here.
            let data = unsafe { umem.data(&s) };
            let b = data.contents();
            let n = b.len().min(buf.len() - at);
            buf[at..at + n].copy_from_slice(&b[..n]);
            at += n;
        });
        &buf[..at]
    }
}

impl Deref for FramePool {
    type Target = Vec<FrameDesc>;
    fn deref(&self) -> &Vec<FrameDesc> {
        &self.free
    }
}

/// The stack of free descriptors itself (refill, completions, counts). Giving back a packet
/// goes through [`FramePool::push`], which follows its chain.
impl DerefMut for FramePool {
    fn deref_mut(&mut self) -> &mut Vec<FrameDesc> {
        &mut self.free
    }
}
