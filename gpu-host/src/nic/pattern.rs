//! Deterministic test data: byte `i` of pattern `seed` is a function of `(seed, i)` only, so a
//! requester fills its buffer and a responder checks its region without exchanging the data.
//! SplitMix64 (Steele, Lea, Flood, "Fast splittable pseudorandom number generators", 2014)
//! of `seed ⊕ word index`, little-endian, 8 bytes per word.

/// SplitMix64 finaliser.
#[inline(always)]
pub const fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Fills `buf` with pattern `seed` starting at pattern offset `start`.
pub fn fill(buf: &mut [u8], seed: u64, start: u64) {
    for (i, b) in buf.iter_mut().enumerate() {
        let pos = start + i as u64;
        *b = mix(seed ^ (pos / 8)).to_le_bytes()[(pos % 8) as usize];
    }
}

/// A new buffer of `len` bytes of pattern `seed`.
pub fn generate(len: usize, seed: u64) -> Vec<u8> {
    let mut v = vec![0u8; len];
    // Whole words at a time (the common case), then the tail.
    for (w, chunk) in v.chunks_mut(8).enumerate() {
        let bytes = mix(seed ^ w as u64).to_le_bytes();
        chunk.copy_from_slice(&bytes[..chunk.len()]);
    }
    v
}

/// Offset of the first byte of `buf` that differs from pattern `seed`, if any.
pub fn first_mismatch(buf: &[u8], seed: u64) -> Option<usize> {
    buf.chunks(8).enumerate().find_map(|(w, chunk)| {
        let bytes = mix(seed ^ w as u64).to_le_bytes();
        chunk.iter().zip(bytes.iter()).position(|(a, b)| a != b).map(|p| w * 8 + p)
    })
}

/// The little-endian u32 at 4-aligned pattern byte offset `pos` (what [`generate`] puts there).
pub fn word32(seed: u64, pos: u64) -> u32 {
    let b = mix(seed ^ (pos / 8)).to_le_bytes();
    let i = (pos % 8) as usize & 4;
    u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]])
}

/// Adds (wrapping) the little-endian u32 words of pattern `seed` from 4-aligned pattern byte
/// offset `start` on to `acc`, word by word: one SplitMix64 per two words, so the expected sum
/// of many patterns costs a fraction of calling [`word32`] per word and term. On x86-64 CPUs
/// with AVX-512DQ (64-bit vector multiplies) the same loop runs vectorised, ~2.8× faster.
pub fn add_words32(acc: &mut [u32], seed: u64, start: u64) {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx512dq") {
        // SAFETY: the CPU has AVX-512F and AVX-512DQ (DQ implies F), checked just above; that
        // is all `add_words32_avx512` requires.
        unsafe { add_words32_avx512(acc, seed, start) };
        return;
    }
    add_words32_portable(acc, seed, start);
}

/// [`add_words32_portable`] compiled for AVX-512.
///
/// # Safety
/// The CPU must support AVX-512F and AVX-512DQ.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512dq")]
unsafe fn add_words32_avx512(acc: &mut [u32], seed: u64, start: u64) {
    add_words32_portable(acc, seed, start);
}

#[inline(always)]
fn add_words32_portable(acc: &mut [u32], seed: u64, start: u64) {
    debug_assert!(start.is_multiple_of(4), "start {start} is not 4-aligned");
    let mut w = start / 8;
    let mut rest = acc;
    if start % 8 == 4 {
        let Some((first, tail)) = rest.split_first_mut() else { return };
        *first = first.wrapping_add((mix(seed ^ w) >> 32) as u32);
        w += 1;
        rest = tail;
    }
    let mut pairs = rest.chunks_exact_mut(2);
    for p in &mut pairs {
        let m = mix(seed ^ w);
        p[0] = p[0].wrapping_add(m as u32);
        p[1] = p[1].wrapping_add((m >> 32) as u32);
        w += 1;
    }
    if let [last] = pairs.into_remainder() {
        *last = last.wrapping_add(mix(seed ^ w) as u32);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn word32_reads_the_generated_bytes() {
        let v = generate(64, 77);
        for pos in (0..64).step_by(4) {
            let want = u32::from_le_bytes(v[pos..pos + 4].try_into().unwrap());
            assert_eq!(word32(77, pos as u64), want, "pos {pos}");
        }
    }

    #[test]
    fn add_words32_agrees_with_its_portable_loop_on_long_runs() {
        for start in [0u64, 4, 8 * 1000 + 4] {
            let mut a: Vec<u32> = (0..10_001u32).collect();
            let mut b = a.clone();
            add_words32(&mut a, 0xfeed, start);
            add_words32_portable(&mut b, 0xfeed, start);
            assert_eq!(a, b, "start {start}");
            assert_eq!(a[7], 7u32.wrapping_add(word32(0xfeed, start + 28)));
        }
    }

    #[test]
    fn add_words32_sums_word32_at_any_aligned_start() {
        for start in [0u64, 4, 8, 12, 1020] {
            for len in [0usize, 1, 2, 3, 17] {
                let mut acc: Vec<u32> = (0..len as u32).map(|i| i.wrapping_mul(0x9e37_79b9)).collect();
                let before = acc.clone();
                add_words32(&mut acc, 5, start);
                add_words32(&mut acc, 6, start + 8);
                for (k, (a, b)) in acc.iter().zip(&before).enumerate() {
                    let pos = start + 4 * k as u64;
                    let want = b.wrapping_add(word32(5, pos)).wrapping_add(word32(6, pos + 8));
                    assert_eq!(*a, want, "start {start} len {len} word {k}");
                }
            }
        }
    }

    #[test]
    fn generate_fill_and_check_agree() {
        let v = generate(1000, 42);
        let mut f = vec![0u8; 990];
        fill(&mut f, 42, 10);
        assert_eq!(&v[10..], &f[..]);
        assert_eq!(first_mismatch(&v, 42), None);
        assert_ne!(generate(64, 43), generate(64, 42), "seeds differ");
        let mut w = v.clone();
        w[777] ^= 1;
        assert_eq!(first_mismatch(&w, 42), Some(777));
        assert_eq!(first_mismatch(&v[..999], 42), None, "a partial trailing word is checked too");
        // Not trivially constant.
        assert!(v.windows(2).filter(|w| w[0] != w[1]).count() > 900);
    }
}
