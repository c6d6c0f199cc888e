//! Keys (QPNs, ranks) to dense indices for the engine's per-packet lookups.

/// Keys (QPNs, ranks) to dense indices without hashing: a table indexed by key − smallest key
/// when the keys span at most [`IndexTable::DENSE_SPAN`] values (QPNs and ranks handed out by
/// one controller are consecutive), else a sorted list searched by bisection. Built at setup;
/// a lookup allocates nothing.
#[derive(Clone, Debug)]
pub(super) enum IndexTable {
    Dense { base: u32, slots: Vec<u32> },
    Sorted(Vec<(u32, usize)>),
}

impl IndexTable {
    /// Widest key range stored densely (256 KiB of slots).
    const DENSE_SPAN: u64 = 1 << 16;
    const EMPTY: u32 = u32::MAX;

    /// The table of `keys` (key `keys[i]` maps to `i`); `Err(key)` names a duplicate.
    pub(super) fn new(keys: &[u32]) -> Result<IndexTable, u32> {
        let mut sorted: Vec<(u32, usize)> = keys.iter().copied().zip(0..).collect();
        sorted.sort_unstable();
        if let Some(w) = sorted.windows(2).find(|w| w[0].0 == w[1].0) {
            return Err(w[0].0);
        }
        let (Some(&(lo, _)), Some(&(hi, _))) = (sorted.first(), sorted.last()) else {
            return Ok(IndexTable::Sorted(sorted));
        };
        if u64::from(hi - lo) < Self::DENSE_SPAN && keys.len() < Self::EMPTY as usize {
            let mut slots = vec![Self::EMPTY; (hi - lo) as usize + 1];
            for (k, i) in sorted {
                slots[(k - lo) as usize] = i as u32;
            }
            return Ok(IndexTable::Dense { base: lo, slots });
        }
        Ok(IndexTable::Sorted(sorted))
    }

    pub(super) fn get(&self, key: u32) -> Option<usize> {
        match self {
            IndexTable::Dense { base, slots } => {
                let i = *slots.get(key.wrapping_sub(*base) as usize)?;
                (i != Self::EMPTY).then_some(i as usize)
            }
            IndexTable::Sorted(v) => v.binary_search_by_key(&key, |e| e.0).ok().map(|i| v[i].1),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn index_tables_find_every_key_dense_or_sorted_and_reject_duplicates() {
        let dense = IndexTable::new(&[0x107, 0x101, 0x103]).unwrap();
        assert!(matches!(dense, IndexTable::Dense { .. }));
        let sparse = IndexTable::new(&[5, 0xff_fff0, 70_000]).unwrap();
        assert!(matches!(sparse, IndexTable::Sorted(_)));
        for (t, keys) in [(&dense, [0x107, 0x101, 0x103]), (&sparse, [5, 0xff_fff0, 70_000])] {
            for (i, k) in keys.into_iter().enumerate() {
                assert_eq!(t.get(k), Some(i), "{t:?} key {k}");
            }
            for k in [0, 4, 6, 0x100, 0x102, 0x108, 69_999, 0xff_ffff, u32::MAX] {
                assert_eq!(t.get(k), None, "{t:?} key {k}");
            }
        }
        assert_eq!(IndexTable::new(&[]).unwrap().get(0), None);
        assert_eq!(IndexTable::new(&[9, 3, 9]).unwrap_err(), 9);
    }
}
