//! AF_XDP multi-buffer packets (Linux ≥ 6.6, `Documentation/networking/af_xdp.rst`,
//! "Multi-Buffer Support"): a frame longer than one UMEM chunk holds travels as several
//! descriptors, every one but the last with [`XDP_PKT_CONTD`] in its `options`. A socket gets
//! them only when bound with `XDP_USE_SG` ([`crate::Socket::open`]); the kernel refuses UMEM
//! chunks larger than a page (`XDP_UMEM_REG` returns `EINVAL` for a `chunk_size` of 8192 or
//! more, hugepage-backed or not, on the 6.18 kernel this was measured on), so this is how a
//! 9216-byte Ethernet MTU reaches userspace.
//!
//! On RX every chunk takes at most [`RX_FRAME_BYTES`] of the frame (the chunk less the XDP
//! headroom): a RoCEv2 frame at path MTU 4096 (about 4.2 KB) is two descriptors, a 9216-byte
//! MTU frame three. The headers are always in the first one.
//!
//! [`Chains`] remembers which descriptor follows which, one slot per UMEM chunk, allocated once:
//! a packet is then named by its first descriptor (its head) alone, so queues hold one entry
//! per packet whatever its length. [`Gather`] builds the chains from an RX ring's descriptors,
//! which may stop in the middle of a packet (the consumer reads a bounded batch).
use crate::FRAME_SIZE;

/// `XDP_PKT_CONTD` (`include/uapi/linux/if_xdp.h`): more descriptors of this packet follow.
pub const XDP_PKT_CONTD: u32 = 1;
/// Headroom the kernel leaves in front of every received buffer in copy mode
/// (`XDP_PACKET_HEADROOM`).
pub const XDP_PACKET_HEADROOM: u32 = 256;
/// Bytes of a frame one chunk takes on RX.
pub const RX_FRAME_BYTES: u32 = FRAME_SIZE - XDP_PACKET_HEADROOM;
/// Ethernet header with one 802.1Q tag: what a frame adds to the link MTU.
pub const ETH_TAGGED_HLEN: u32 = 18;
/// The largest link MTU rocefab accepts (the lossless class's jumbo MTU).
pub const MAX_LINK_MTU: u32 = 9216;
/// Most descriptors one packet takes on RX at [`MAX_LINK_MTU`] (9234 bytes in chunks of 3840).
pub const MAX_SEGMENTS: usize = ((MAX_LINK_MTU + ETH_TAGGED_HLEN).div_ceil(RX_FRAME_BYTES)) as usize;
/// The longest frame at [`MAX_LINK_MTU`] (a buffer this long holds any gathered packet).
pub const MAX_FRAME_BYTES: usize = (MAX_LINK_MTU + ETH_TAGGED_HLEN) as usize;

const _: () = assert!(MAX_SEGMENTS == 3);

/// Whether a link of `link_mtu` bytes carries frames longer than one chunk: its sockets need
/// `XDP_USE_SG` and its XDP program `xdp.frags`. False up to MTU 3822: rocefab's links up to
/// 3500 bytes keep one descriptor per frame.
pub const fn needs_multi_buffer(link_mtu: u32) -> bool {
    link_mtu + ETH_TAGGED_HLEN > RX_FRAME_BYTES
}

/// One descriptor as the chain logic sees it (a [`crate::FrameDesc`]; tests use their own).
pub trait Segment: Copy + Default {
    /// Index of the UMEM chunk the descriptor points into.
    fn chunk(&self) -> usize;
    /// Bytes of the packet in this descriptor.
    fn seg_len(&self) -> usize;
    /// `options` has [`XDP_PKT_CONTD`].
    fn continues(&self) -> bool;
    /// Sets or clears [`XDP_PKT_CONTD`].
    fn set_continues(&mut self, on: bool);
}

impl Segment for crate::FrameDesc {
    #[inline(always)]
    fn chunk(&self) -> usize {
        self.addr() / FRAME_SIZE as usize
    }
    #[inline(always)]
    fn seg_len(&self) -> usize {
        self.lengths().data()
    }
    #[inline(always)]
    fn continues(&self) -> bool {
        self.options() & XDP_PKT_CONTD != 0
    }
    #[inline(always)]
    fn set_continues(&mut self, on: bool) {
        let o = self.options() & !XDP_PKT_CONTD;
        self.set_options(if on { o | XDP_PKT_CONTD } else { o });
    }
}

/// The next descriptor of every descriptor that continues, by UMEM chunk.
#[derive(Debug, Clone)]
pub struct Chains<S> {
    next: Vec<S>,
}

impl<S: Segment> Chains<S> {
    /// Links for a UMEM of `chunks` chunks (allocated here, never again).
    pub fn new(chunks: usize) -> Self {
        Chains { next: vec![S::default(); chunks] }
    }

    /// Records that `next` follows `d` (which must continue).
    #[inline]
    pub fn link(&mut self, d: &S, next: S) {
        if let Some(slot) = self.next.get_mut(d.chunk()) {
            *slot = next;
        }
    }

    /// The descriptor after `d`, if `d` continues.
    #[inline]
    pub fn next(&self, d: &S) -> Option<S> {
        if d.continues() {
            self.next.get(d.chunk()).copied()
        } else {
            None
        }
    }

    /// Calls `f` on every descriptor of the packet whose head is `head`, in order; at most
    /// [`MAX_SEGMENTS`] (a longer chain is never built: [`Gather`] refuses it).
    #[inline]
    pub fn for_each(&self, head: S, mut f: impl FnMut(S)) {
        let mut d = Some(head);
        let mut n = 0;
        while let Some(s) = d {
            if n == MAX_SEGMENTS {
                break;
            }
            f(s);
            n += 1;
            d = self.next(&s);
        }
    }

    /// Bytes of the whole packet whose head is `head`.
    #[inline]
    pub fn packet_len(&self, head: &S) -> usize {
        if !head.continues() {
            return head.seg_len();
        }
        let mut len = 0;
        self.for_each(*head, |s| len += s.seg_len());
        len
    }

    /// Writes the packet's descriptors into `out` (the head first); returns how many, or
    /// `None` (nothing written that counts) if `out` is too short.
    #[inline]
    pub fn expand(&self, head: S, out: &mut [S]) -> Option<usize> {
        let mut n = 0;
        let mut short = false;
        self.for_each(head, |s| match out.get_mut(n) {
            Some(o) => {
                *o = s;
                n += 1;
            }
            None => short = true,
        });
        (!short).then_some(n)
    }

    /// The packet's bytes: the head's own when it is one descriptor, else gathered into `buf`
    /// (cut at its length). `bytes(d)` is descriptor `d`'s part of the frame.
    pub fn gather<'a>(&self, head: &S, bytes: impl Fn(&S) -> &'a [u8], buf: &'a mut [u8]) -> &'a [u8] {
        if !head.continues() {
            return bytes(head);
        }
        let mut at = 0;
        self.for_each(*head, |s| {
            let b = bytes(&s);
            let n = b.len().min(buf.len() - at);
            buf[at..at + n].copy_from_slice(&b[..n]);
            at += n;
        });
        &buf[..at]
    }
}

/// What [`Gather::push`] made of a descriptor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Gathered<S> {
    /// Part of a packet whose last descriptor has not been read yet.
    Partial,
    /// The last (or only) descriptor of a packet: its head.
    Packet(S),
    /// A packet of more than [`MAX_SEGMENTS`] descriptors ended here: its head (its chain holds
    /// its first [`MAX_SEGMENTS`] descriptors) and the descriptors beyond them are in `extra`
    /// — the caller frees all of them and counts a drop.
    TooLong { head: S, extra: usize },
}

/// Reassembles packets from one RX ring's descriptors (one per socket: a packet's descriptors
/// are contiguous on its ring).
#[derive(Debug, Clone, Copy, Default)]
pub struct Gather<S> {
    head: Option<S>,
    tail: S,
    segs: usize,
}

impl<S: Segment> Gather<S> {
    /// Feeds the next descriptor read from the ring. A packet's extra descriptors beyond
    /// [`MAX_SEGMENTS`] are handed to `spill` (to free) as they come.
    #[inline]
    pub fn push(&mut self, chains: &mut Chains<S>, d: S, mut spill: impl FnMut(S)) -> Gathered<S> {
        let last = !d.continues();
        match self.head {
            None if last => Gathered::Packet(d),
            None => {
                self.head = Some(d);
                self.tail = d;
                self.segs = 1;
                Gathered::Partial
            }
            Some(head) => {
                self.segs += 1;
                if self.segs <= MAX_SEGMENTS {
                    let mut tail = self.tail;
                    if self.segs == MAX_SEGMENTS && !last {
                        // The chain ends here; what follows is spilled.
                        let mut end = d;
                        end.set_continues(false);
                        chains.link(&tail, end);
                        tail = end;
                    } else {
                        chains.link(&tail, d);
                        tail = d;
                    }
                    self.tail = tail;
                } else {
                    let mut s = d;
                    s.set_continues(false);
                    spill(s);
                }
                if !last {
                    return Gathered::Partial;
                }
                self.head = None;
                let segs = std::mem::take(&mut self.segs);
                if segs > MAX_SEGMENTS {
                    Gathered::TooLong { head, extra: segs - MAX_SEGMENTS }
                } else {
                    Gathered::Packet(head)
                }
            }
        }
    }

    /// A packet is half read.
    pub fn pending(&self) -> bool {
        self.head.is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A descriptor: chunk index, length, continues.
    #[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
    struct D(usize, usize, bool);

    impl Segment for D {
        fn chunk(&self) -> usize {
            self.0
        }
        fn seg_len(&self) -> usize {
            self.1
        }
        fn continues(&self) -> bool {
            self.2
        }
        fn set_continues(&mut self, on: bool) {
            self.2 = on;
        }
    }

    fn feed(g: &mut Gather<D>, c: &mut Chains<D>, ds: &[D], spilled: &mut Vec<D>) -> Vec<Gathered<D>> {
        ds.iter().map(|&d| g.push(c, d, |s| spilled.push(s))).collect()
    }

    #[test]
    fn single_descriptors_are_packets_and_need_no_chain() {
        let mut c = Chains::new(8);
        let mut g = Gather::default();
        let mut sp = vec![];
        let r = feed(&mut g, &mut c, &[D(3, 1500, false), D(5, 60, false)], &mut sp);
        assert_eq!(r, [Gathered::Packet(D(3, 1500, false)), Gathered::Packet(D(5, 60, false))]);
        assert_eq!(c.packet_len(&D(3, 1500, false)), 1500);
        assert!(sp.is_empty() && !g.pending());
    }

    #[test]
    fn a_roce_4096_frame_is_two_descriptors_named_by_its_head() {
        // 4096 B payload + BTH/RETH/ICRC + UDP/IPv4/Ethernet = 4174 bytes: 3840 + 334.
        let mut c = Chains::new(8);
        let mut g = Gather::default();
        let mut sp = vec![];
        let (h, t) = (D(6, 3840, true), D(2, 334, false));
        let r = feed(&mut g, &mut c, &[h], &mut sp);
        assert_eq!(r, [Gathered::Partial]);
        assert!(g.pending());
        // The rest arrives in the next batch.
        let r = feed(&mut g, &mut c, &[t, D(7, 64, false)], &mut sp);
        assert_eq!(r, [Gathered::Packet(h), Gathered::Packet(D(7, 64, false))]);
        assert_eq!(c.packet_len(&h), 4174);
        let mut out = [D::default(); 3];
        assert_eq!(c.expand(h, &mut out), Some(2));
        assert_eq!(out[..2], [h, t]);
        assert_eq!(c.expand(h, &mut out[..1]), None);
        let mut seen = vec![];
        c.for_each(h, |s| seen.push(s.0));
        assert_eq!(seen, [6, 2]);
    }

    #[test]
    fn a_jumbo_frame_is_three_descriptors_and_a_fourth_is_spilled() {
        let mut c = Chains::new(16);
        let mut g = Gather::default();
        let mut sp = vec![];
        let ds = [D(1, 3840, true), D(9, 3840, true), D(4, 1554, false)];
        let r = feed(&mut g, &mut c, &ds, &mut sp);
        assert_eq!(r[2], Gathered::Packet(ds[0]));
        assert_eq!(c.packet_len(&ds[0]), 9234);
        // Four descriptors (longer than any link rocefab allows): the chain keeps three, the
        // third no longer continues, the fourth is spilled and the packet reported too long.
        let ds = [D(10, 3840, true), D(11, 3840, true), D(12, 3840, true), D(13, 10, false)];
        let r = feed(&mut g, &mut c, &ds, &mut sp);
        assert_eq!(r[3], Gathered::TooLong { head: ds[0], extra: 1 });
        assert_eq!(sp, [D(13, 10, false)]);
        let mut seen = vec![];
        c.for_each(ds[0], |s| seen.push(s));
        assert_eq!(seen, [ds[0], ds[1], D(12, 3840, false)]);
        assert!(!g.pending());
    }

    #[test]
    fn gather_copies_the_segments_in_order() {
        let mut c = Chains::new(4);
        let (h, t) = (D(0, 3, true), D(1, 2, false));
        c.link(&h, t);
        let data = [[1u8, 2, 3, 0], [4, 5, 0, 0], [0; 4], [0; 4]];
        let mut buf = [0u8; 16];
        let got = c.gather(&h, |d| &data[d.0][..d.1], &mut buf);
        assert_eq!(got, [1, 2, 3, 4, 5]);
        let mut buf = [0u8; 16];
        assert_eq!(c.gather(&t, |d| &data[d.0][..d.1], &mut buf), [4, 5]);
    }

    #[test]
    fn multi_buffer_starts_above_one_chunk() {
        assert!(!needs_multi_buffer(1500));
        assert!(!needs_multi_buffer(3500));
        assert!(!needs_multi_buffer(RX_FRAME_BYTES - ETH_TAGGED_HLEN));
        assert!(needs_multi_buffer(RX_FRAME_BYTES - ETH_TAGGED_HLEN + 1));
        assert!(needs_multi_buffer(9216));
    }
}
