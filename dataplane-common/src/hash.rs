//! The ECMP flow hash (lookup3 `hashword`) and the member choice it feeds.

/// ECMP flow hash over the 5-tuple: Bob Jenkins' lookup3 `hashword()` (lookup3.c, 2006, public
/// domain; the Linux kernel's `jhash2()`) over the 10 words `src[0..4], dst[0..4],
/// sport << 16 | dport, proto`, with the switch's seed as `initval`. The same function runs in
/// XDP and in userspace (tests and tools predict paths with it). Addresses are given as 4
/// big-endian u32 words (IPv4 uses word 0 only, the rest zero).
///
/// Every word enters the state at its own position (three per `mix`), so words swapped within
/// an address, or addresses swapped between source and destination, hash apart; an XOR fold of
/// the address words would map `(a, b, ..)` and `(b, a, ..)`, or any two words that are equal,
/// to one value. Pinned by `tests/vectors/flow_hash.txt`, computed by `tests/vectors/flow_hash.py`
/// from lookup3.c's definition outside the crate. Straight-line code (3 `mix` and a `final`),
/// no loop for the verifier.
#[inline(always)]
pub fn flow_hash(src: [u32; 4], dst: [u32; 4], proto: u8, sport: u16, dport: u16, seed: u32) -> u32 {
    /// lookup3.c `mix()`.
    #[inline(always)]
    fn mix(a: &mut u32, b: &mut u32, c: &mut u32) {
        *a = a.wrapping_sub(*c);
        *a ^= c.rotate_left(4);
        *c = c.wrapping_add(*b);
        *b = b.wrapping_sub(*a);
        *b ^= a.rotate_left(6);
        *a = a.wrapping_add(*c);
        *c = c.wrapping_sub(*b);
        *c ^= b.rotate_left(8);
        *b = b.wrapping_add(*a);
        *a = a.wrapping_sub(*c);
        *a ^= c.rotate_left(16);
        *c = c.wrapping_add(*b);
        *b = b.wrapping_sub(*a);
        *b ^= a.rotate_left(19);
        *a = a.wrapping_add(*c);
        *c = c.wrapping_sub(*b);
        *c ^= b.rotate_left(4);
        *b = b.wrapping_add(*a);
    }
    /// lookup3.c `final()`.
    #[inline(always)]
    fn fin(a: &mut u32, b: &mut u32, c: &mut u32) {
        *c ^= *b;
        *c = c.wrapping_sub(b.rotate_left(14));
        *a ^= *c;
        *a = a.wrapping_sub(c.rotate_left(11));
        *b ^= *a;
        *b = b.wrapping_sub(a.rotate_left(25));
        *c ^= *b;
        *c = c.wrapping_sub(b.rotate_left(16));
        *a ^= *c;
        *a = a.wrapping_sub(c.rotate_left(4));
        *b ^= *a;
        *b = b.wrapping_sub(a.rotate_left(14));
        *c ^= *b;
        *c = c.wrapping_sub(b.rotate_left(24));
    }
    // hashword(k, 10, seed): the state starts at 0xdeadbeef + (length << 2) + initval.
    const WORDS: u32 = 10;
    let init = 0xdead_beef_u32.wrapping_add(WORDS << 2).wrapping_add(seed);
    let (mut a, mut b, mut c) = (init, init, init);
    a = a.wrapping_add(src[0]);
    b = b.wrapping_add(src[1]);
    c = c.wrapping_add(src[2]);
    mix(&mut a, &mut b, &mut c);
    a = a.wrapping_add(src[3]);
    b = b.wrapping_add(dst[0]);
    c = c.wrapping_add(dst[1]);
    mix(&mut a, &mut b, &mut c);
    a = a.wrapping_add(dst[2]);
    b = b.wrapping_add(dst[3]);
    c = c.wrapping_add((sport as u32) << 16 | dport as u32);
    mix(&mut a, &mut b, &mut c);
    // The last block: one word, then final().
    a = a.wrapping_add(proto as u32);
    fin(&mut a, &mut b, &mut c);
    c
}

/// ECMP member choice: index into a group of `count` members (count ≥ 1).
#[inline(always)]
pub fn ecmp_index(hash: u32, count: u32) -> u32 {
    if count == 0 {
        0
    } else {
        hash % count
    }
}
