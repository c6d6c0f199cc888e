//! `flow_hash` and `ecmp_index`, the ECMP member choice of the XDP program, checked from outside.
//!
//! - Pinned: `vectors/flow_hash.txt` holds hashes computed by `vectors/flow_hash.py`, a Python
//!   re-implementation of Bob Jenkins' lookup3 `hashword()` (lookup3.c) that checks itself
//!   against lookup3.c's published `driver5()` values and uses nothing of this crate.
//! - Spread and distribution: 64 source ports over 2 members, 10 000 seeded tuples over 2, 3, 4,
//!   8 and 16 members (Pearson's chi-square test), and swapped fields that must not collide.
use dataplane_common::{ecmp_index, flow_hash};

mod vectors;

use vectors::vectors;

#[test]
fn flow_hash_equals_the_lookup3_reference_vectors() {
    let v = vectors();
    // 60 misc (10 tuples x 6 seeds), 32 xdp_lb, 32 xdp: a truncated file fails here.
    let count = |s: &str| v.iter().filter(|x| x.set == s).count();
    assert_eq!((count("misc"), count("xdp_lb"), count("xdp"), v.len()), (60, 32, 32, 124));
    let wrong: Vec<String> = v
        .iter()
        .filter_map(|x| {
            let got = flow_hash(x.src, x.dst, x.proto, x.sport, x.dport, x.seed);
            (got != x.hash).then(|| {
                format!(
                    "{} {:x?} {:x?} {} {} {} seed {:#x}: {got:#010x}, lookup3 {:#010x}",
                    x.set, x.src, x.dst, x.proto, x.sport, x.dport, x.seed, x.hash
                )
            })
        })
        .collect();
    assert!(wrong.is_empty(), "{} of {} vectors differ:\n{}", wrong.len(), v.len(), wrong.join("\n"));
}

/// SplitMix64 (Steele, Lea, Flood, "Fast splittable pseudorandom number generators", OOPSLA
/// 2014): the seeded tuples of the tests below.
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn u32(&mut self) -> u32 {
        (self.next() >> 32) as u32
    }
}

#[derive(Clone, Copy, Debug)]
struct Tuple {
    src: [u32; 4],
    dst: [u32; 4],
    sport: u16,
    dport: u16,
}

impl Tuple {
    fn hash(&self, seed: u32) -> u32 {
        flow_hash(self.src, self.dst, 17, self.sport, self.dport, seed)
    }
}

const N: usize = 10_000;

/// RoCEv2 flows as a fabric carries them: IPv4 GPUs in 10.0.0.0/16, an ephemeral source port,
/// destination port 4791.
fn roce_v4(r: &mut SplitMix) -> Tuple {
    let host = |r: &mut SplitMix| 0x0a00_0000 | (r.u32() & 0xffff);
    let src = host(r);
    // A flow's ends are two GPUs: draw again on the same address.
    let dst = std::iter::repeat_with(|| host(r)).find(|&d| d != src).unwrap();
    Tuple { src: [src, 0, 0, 0], dst: [dst, 0, 0, 0], sport: 49152 + (r.u32() % 16384) as u16, dport: 4791 }
}

/// The same over IPv6: fd00::/64 with random interface identifiers.
fn roce_v6(r: &mut SplitMix) -> Tuple {
    let host = |r: &mut SplitMix| [0xfd00_0000, 0, r.u32(), r.u32()];
    Tuple { src: host(r), dst: host(r), sport: 49152 + (r.u32() % 16384) as u16, dport: 4791 }
}

/// One GPU pair, N consecutive source ports (QPs of one pair, or `rocefab send --sport-range`).
fn one_pair(i: usize) -> Tuple {
    Tuple { src: [0x0a00_0101, 0, 0, 0], dst: [0x0a00_0203, 0, 0, 0], sport: 1024 + i as u16, dport: 4791 }
}

/// 64 flows of one GPU pair (source ports 49152..49215) over 2 members: each member's count is
/// binomial(n = 64, p = 1/2), mean 32, sigma = sqrt(64 x 1/2 x 1/2) = 4, so each gets 32 +- 3
/// sigma = 20..=44 (the bound the fabric tests use for their 64 flows too).
#[test]
fn sixty_four_source_ports_spread_within_three_sigma_over_two_members() {
    for seed in [0, 1, 7, 0x1b5eed, 0xdead_beef] {
        let mut hits = [0u32; 2];
        for sport in 49152..49152 + 64u16 {
            let h = flow_hash([0x0a00_0101, 0, 0, 0], [0x0a00_0202, 0, 0, 0], 17, sport, 4791, seed);
            hits[ecmp_index(h, 2) as usize] += 1;
        }
        assert!(hits.iter().all(|h| (20..=44).contains(h)), "seed {seed:#x}: {hits:?}");
    }
}

/// Pearson's chi-square statistic X^2 = sum over members of (O - E)^2 / E with E = n / m; for
/// a uniform choice it follows chi-square with k = m - 1 degrees of freedom.
fn chi_square(counts: &[u32]) -> f64 {
    let n: u32 = counts.iter().sum();
    let e = f64::from(n) / counts.len() as f64;
    counts.iter().map(|&o| (f64::from(o) - e).powi(2) / e).sum()
}

/// The tests below make 30 chi-square checks (2 seeds x 3 families x 5 member counts); for the
/// whole to fail a uniform hash with probability <= 0.001, each check uses alpha = 0.001 / 30
/// (Bonferroni), whose standard normal quantile is z = 3.99 (upper tail 3.30e-5).
const Z: f64 = 3.99;

/// Upper-tail critical value of chi-square with `k` degrees of freedom at the normal quantile
/// [`Z`], by the Wilson-Hilferty approximation (E. B. Wilson, M. M. Hilferty, "The distribution
/// of chi-square", PNAS 17 (1931) 684): k (1 - 2/(9k) + z sqrt(2/(9k)))^3. It errs on the loose
/// side for these k: 18.79, 21.85, 24.43, 33.14, 47.73 for k = 1, 2, 3, 7, 15, against exact
/// values 17.22, 20.62, 23.40, 32.46, 47.27 (the closed-form tail, Abramowitz and Stegun 26.4.4
/// and 26.4.5, solved by bisection).
fn chi_square_limit(k: u32) -> f64 {
    let k = f64::from(k);
    let t = 2.0 / (9.0 * k);
    k * (1.0 - t + Z * t.sqrt()).powi(3)
}

#[test]
fn ten_thousand_tuples_are_uniform_over_2_3_4_8_and_16_members() {
    let mut r = SplitMix(0x726f_6365_6661_6221);
    let families: [(&str, Vec<Tuple>); 3] = [
        ("roce v4", (0..N).map(|_| roce_v4(&mut r)).collect()),
        ("roce v6", (0..N).map(|_| roce_v6(&mut r)).collect()),
        ("one pair, consecutive sports", (0..N).map(one_pair).collect()),
    ];
    let mut report = Vec::new();
    let mut failed = false;
    for seed in [7, 0x1b5eed] {
        for (name, tuples) in &families {
            for m in [2, 3, 4, 8, 16] {
                let limit = chi_square_limit(m - 1);
                let mut counts = vec![0u32; m as usize];
                for t in tuples {
                    counts[ecmp_index(t.hash(seed), m) as usize] += 1;
                }
                let x2 = chi_square(&counts);
                failed |= x2 > limit;
                report.push(format!("seed {seed:#x} {name}, {m} members: X^2 = {x2:.2} (limit {limit:.2}) {counts:?}"));
            }
        }
    }
    eprintln!("{}", report.join("\n"));
    assert!(!failed, "not uniform (rows above)");
}

/// Swapping source and destination (addresses, ports, or both: the two directions of one
/// connection) gives another hash: no 32-bit collision among 10 000 tuples (a uniform hash
/// collides with probability 2^-32 each: 2.3e-6 expected), and on 2 members the reverse
/// direction takes the same member as often as chance says: binomial(10 000, 1/2), 5000 +- 3
/// sigma (sigma = 50) = 4850..=5150. A symmetric hash gives 10 000.
#[test]
fn swapped_source_and_destination_do_not_collide() {
    let mut r = SplitMix(0x5357_4150);
    for (family, gen) in [("v4", roce_v4 as fn(&mut SplitMix) -> Tuple), ("v6", roce_v6)] {
        let tuples: Vec<Tuple> = (0..N).map(|_| gen(&mut r)).collect();
        type Swap = fn(Tuple) -> Tuple;
        let swaps: [(&str, Swap); 3] = [
            ("addresses", |t| Tuple { src: t.dst, dst: t.src, ..t }),
            ("ports", |t| Tuple { sport: t.dport, dport: t.sport, ..t }),
            ("addresses and ports", |t| Tuple { src: t.dst, dst: t.src, sport: t.dport, dport: t.sport }),
        ];
        for (what, swap) in swaps {
            let equal = tuples.iter().filter(|t| t.hash(7) == swap(**t).hash(7)).count();
            assert_eq!(equal, 0, "{family}: swapped {what}: {equal} of {N} hashes equal");
            let same = tuples.iter().filter(|t| ecmp_index(t.hash(7), 2) == ecmp_index(swap(**t).hash(7), 2)).count();
            assert!((4850..=5150).contains(&same), "{family}: swapped {what}: same member {same} of {N} times");
        }
    }
}

/// IPv6: the 32-bit words of an address enter the hash at their own positions. An XOR fold of
/// the words (the hash before lookup3 `hashword`) maps every permutation of an address's words
/// to one value, and cancels two equal words: fd00::/64 hosts whose interface identifiers differ
/// only in word order took one member, and so did an address with two equal words and the one
/// with those words zero.
#[test]
fn ipv6_words_swapped_or_repeated_do_not_collide() {
    let mut r = SplitMix(0x7636);
    type Vary = fn([u32; 4]) -> [u32; 4];
    let variants: [(&str, Vary); 4] = [
        ("words 0 and 1 swapped", |w| [w[1], w[0], w[2], w[3]]),
        ("words 2 and 3 swapped", |w| [w[0], w[1], w[3], w[2]]),
        ("words reversed", |w| [w[3], w[2], w[1], w[0]]),
        ("two equal words for two zero words", |w| [w[0], w[1], 0, 0]),
    ];
    let mut report = Vec::new();
    for (what, vary) in variants {
        let mut equal = 0;
        for _ in 0..N {
            let mut t = roce_v6(&mut r);
            if what.starts_with("two equal") {
                let x = r.u32();
                t.src[2] = x;
                t.src[3] = x;
            }
            let u = Tuple { src: vary(t.src), ..t };
            assert_ne!(t.src, u.src, "the variant changes the address");
            equal += usize::from(t.hash(7) == u.hash(7));
        }
        if equal > 0 {
            report.push(format!("{what}: {equal} of {N} source addresses hash alike"));
        }
    }
    assert!(report.is_empty(), "{}", report.join("\n"));
}
