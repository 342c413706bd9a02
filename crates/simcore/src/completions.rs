//! When each flow slot of a fluid engine completes at its current rate, and which come next.
//!
//! A heap of (time, slot) entries beside the times themselves: an entry is stale once its
//! slot's time changed, and stale entries are dropped as they come up (every finite entry comes
//! up once the clock passes it). A solve re-times only the flows whose rates changed, so this
//! replaces a scan of every slot per event (most of the run at 10,000 hosts) with a few heap
//! operations per re-timed flow.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

#[derive(Debug, Default)]
pub struct Completions {
    /// Each slot's completion time (infinity: free, or never).
    at: Vec<f64>,
    /// (bits of a time, slot): times are non-negative, so their bits order as they do.
    heap: BinaryHeap<Reverse<(u64, u32)>>,
}

impl Completions {
    /// Slot `id`'s completion time.
    pub fn get(&self, id: u32) -> f64 {
        self.at.get(id as usize).copied().unwrap_or(f64::INFINITY)
    }

    /// Set slot `id`'s completion time (infinity: none), growing the slots as needed.
    pub fn set(&mut self, id: u32, at: f64) {
        let i = id as usize;
        if self.at.len() <= i {
            self.at.resize(i + 1, f64::INFINITY);
        }
        self.at[i] = at;
        if at.is_finite() {
            debug_assert!(at >= 0.0, "completion times are not negative");
            self.heap.push(Reverse((at.to_bits(), id)));
            if self.heap.len() > 2 * self.at.len() + 4096 {
                self.rebuild();
            }
        }
    }

    /// The earliest completion time (infinity: none).
    pub fn next(&mut self) -> f64 {
        while let Some(&Reverse((bits, id))) = self.heap.peek() {
            if self.at[id as usize].to_bits() == bits {
                return f64::from_bits(bits);
            }
            self.heap.pop();
        }
        f64::INFINITY
    }

    /// The slots completing at or before `until` into `out`, in slot order (as a scan of the
    /// slots would list them); their entries leave the heap, their times stay until set.
    pub fn due(&mut self, until: f64, out: &mut Vec<u32>) {
        out.clear();
        while let Some(&Reverse((bits, id))) = self.heap.peek() {
            if f64::from_bits(bits) > until {
                break;
            }
            self.heap.pop();
            if self.at[id as usize].to_bits() == bits {
                out.push(id);
            }
        }
        out.sort_unstable();
        out.dedup();
    }

    /// (most entries stale: the heap again from the slots)
    fn rebuild(&mut self) {
        self.heap.clear();
        for (id, &at) in self.at.iter().enumerate() {
            if at.is_finite() {
                self.heap.push(Reverse((at.to_bits(), id as u32)));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn next_and_due_follow_the_latest_times() {
        let mut c = Completions::default();
        c.set(3, 2.0);
        c.set(1, 1.0);
        c.set(2, 1.0);
        assert_eq!(c.next(), 1.0);
        c.set(1, 5.0); // re-timed: its old entry is stale
        c.set(2, f64::INFINITY); // gone
        assert_eq!(c.next(), 2.0);
        c.set(0, 2.0);
        let mut due = Vec::new();
        c.due(2.0 + 1e-9, &mut due);
        assert_eq!(due, vec![0, 3]);
        c.set(0, f64::INFINITY);
        c.set(3, f64::INFINITY);
        assert_eq!(c.next(), 5.0);
        assert_eq!(c.get(1), 5.0);
        assert_eq!(c.get(7), f64::INFINITY);
    }

    #[test]
    fn many_re_timings_keep_the_heap_bounded_and_right() {
        let mut c = Completions::default();
        for round in 0..10_000u32 {
            for id in 0..8u32 {
                c.set(id, 100.0 + f64::from((round * 7 + id * 13) % 97));
            }
        }
        assert!(c.heap.len() <= 2 * 8 + 4096 + 8);
        let want = (0..8u32)
            .map(|id| 100.0 + f64::from((9_999 * 7 + id * 13) % 97))
            .fold(f64::INFINITY, f64::min);
        assert_eq!(c.next(), want);
    }
}
