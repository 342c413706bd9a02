//! A monotone priority queue for progressive filling (`maxmin.rs`).

/// A monotone priority queue on `u64` keys (a radix heap): every key pushed is at least the
/// last one popped, as the water level only rises. Push O(1); a pop redistributes one bucket.
#[derive(Debug, Clone)]
pub(crate) struct RadixHeap {
    last: u64,
    len: usize,
    /// Bit i: bucket i holds entries (so a pop finds the next one in one instruction).
    used: u128,
    buckets: [Vec<(u64, u32)>; 65],
}

impl Default for RadixHeap {
    fn default() -> Self {
        RadixHeap {
            last: 0,
            len: 0,
            used: 0,
            buckets: std::array::from_fn(|_| Vec::new()),
        }
    }
}

impl RadixHeap {
    fn bucket(&self, key: u64) -> usize {
        (64 - (key ^ self.last).leading_zeros()) as usize
    }
    pub(crate) fn clear(&mut self) {
        while self.used != 0 {
            let i = self.used.trailing_zeros() as usize;
            self.buckets[i].clear();
            self.used &= self.used - 1;
        }
        self.last = 0;
        self.len = 0;
    }
    pub(crate) fn push(&mut self, key: u64, item: u32) {
        let key = key.max(self.last);
        let b = self.bucket(key);
        self.buckets[b].push((key, item));
        self.used |= 1 << b;
        self.len += 1;
    }
    /// The least key (without taking it).
    pub(crate) fn peek(&self) -> Option<u64> {
        if self.len == 0 {
            None
        } else if self.used & 1 != 0 {
            Some(self.last)
        } else {
            let i = self.used.trailing_zeros() as usize;
            self.buckets[i].iter().map(|e| e.0).min()
        }
    }
    pub(crate) fn pop(&mut self) -> Option<(u64, u32)> {
        if self.len == 0 {
            return None;
        }
        if self.used & 1 == 0 {
            let i = self.used.trailing_zeros() as usize;
            let mut items = std::mem::take(&mut self.buckets[i]);
            self.used &= !(1 << i);
            self.last = items.iter().map(|e| e.0).min()?;
            for &(k, v) in &items {
                let b = self.bucket(k);
                self.buckets[b].push((k, v));
                self.used |= 1 << b;
            }
            items.clear();
            self.buckets[i] = items; // keep its allocation
        }
        self.len -= 1;
        let top = self.buckets[0].pop();
        if self.buckets[0].is_empty() {
            self.used &= !1;
        }
        top
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn the_radix_heap_pops_in_order(batches in prop::collection::vec(prop::collection::vec(0u64..1 << 40, 0..20), 1..20)) {
            // pushes never go below the last pop: each batch adds to the last popped key
            let mut heap = RadixHeap::default();
            let mut reference: Vec<(u64, u32)> = Vec::new();
            let mut last = 0u64;
            for (i, batch) in batches.iter().enumerate() {
                for (j, &d) in batch.iter().enumerate() {
                    heap.push(last + d, (i * 100 + j) as u32);
                    reference.push((last + d, (i * 100 + j) as u32));
                }
                reference.sort_unstable_by_key(|e| std::cmp::Reverse(e.0));
                if let Some(want) = reference.pop() {
                    let got = heap.pop().unwrap();
                    prop_assert_eq!(got.0, want.0);
                    last = got.0;
                    // equal keys may come out in any order: drop the one popped
                    if got.1 != want.1 {
                        let k = reference.iter().position(|e| *e == got).unwrap();
                        reference[k] = want;
                    }
                }
            }
            prop_assert_eq!(heap.len, reference.len());
        }
    }
}
