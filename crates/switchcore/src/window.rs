//! DCTCP's sender window as plain arithmetic over bytes: no sequence numbers, no packets, no
//! clock. The switch's flow table ([`crate::flow`]) feeds it from the TCP headers it sees; the
//! simulator (`simcore::bottleneck`) feeds it from virtual packets; both get the same window.
//!
//! - [`DctcpWindow::count`]: a data segment of the current window passed the queue, marked or not
//!   (the receiving side of DCTCP, done where the mark is decided).
//! - [`DctcpWindow::on_new_ack`]: slow start (at most 2 MSS per ACK) below `ssthresh`, then
//!   additive increase of one MSS per window of acknowledged bytes.
//! - [`DctcpWindow::end_window`]: once per window of data: `α ← (1 − g)·α + g·F` with `F` the
//!   marked share of the window's bytes, and `cwnd ← cwnd·(1 − α/2)` if anything was marked.
//! - [`DctcpWindow::on_loss`]: halve (three duplicate ACKs or a timeout, as Reno).
//!
//! A window that never sees a mark is Reno's: the simulator uses it for loss-based senders too.

/// DCTCP state of one sending direction; bytes everywhere.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DctcpWindow {
    /// Congestion window.
    pub cwnd: u64,
    /// Slow-start threshold (`u64::MAX` until the first reduction).
    pub ssthresh: u64,
    acc: u64,
    /// DCTCP's estimate of the marked fraction.
    pub alpha: f64,
    bytes: u64,
    bytes_ce: u64,
}

impl DctcpWindow {
    /// A fresh window of `init_cwnd` bytes, in slow start, with α = `alpha_init`.
    pub fn new(init_cwnd: u64, alpha_init: f64) -> Self {
        DctcpWindow {
            cwnd: init_cwnd,
            ssthresh: u64::MAX,
            acc: 0,
            alpha: alpha_init,
            bytes: 0,
            bytes_ce: 0,
        }
    }

    /// `len` bytes of data of the current window were queued; `marked`: the queue marked them.
    pub fn count(&mut self, len: u64, marked: bool) {
        self.bytes += len;
        if marked {
            self.bytes_ce += len;
        }
    }

    /// Bytes counted in the current window and how many of them were marked.
    pub fn counted(&self) -> (u64, u64) {
        (self.bytes, self.bytes_ce)
    }

    /// An ACK acknowledged `acked` new bytes: grow the window (`mss` bytes per segment).
    pub fn on_new_ack(&mut self, acked: u64, mss: u64) {
        if self.cwnd < self.ssthresh {
            self.cwnd += acked.min(2 * mss);
        } else {
            self.acc += acked * mss;
            if self.acc >= self.cwnd {
                self.cwnd += self.acc / self.cwnd;
                self.acc %= self.cwnd;
            }
        }
    }

    /// Cap the window at `limit` bytes (never below `min_cwnd`): a sender limited by the
    /// receiver's or the application's window must not bank an unbounded one.
    pub fn cap(&mut self, limit: u64, min_cwnd: u64) {
        self.cwnd = self.cwnd.min(limit.max(min_cwnd));
    }

    /// The window of data ended (everything sent at its start is acknowledged): update α with
    /// gain `g` and cut the window if anything was marked. Returns whether it was cut.
    pub fn end_window(&mut self, g: f64, min_cwnd: u64) -> bool {
        let cut = self.update_alpha(g);
        if cut {
            self.cwnd = self.reduced(min_cwnd);
            self.ssthresh = self.cwnd;
        }
        cut
    }

    /// The window of data ended: update α with gain `g` and start counting the next window.
    /// Returns whether anything in it was marked.
    pub fn update_alpha(&mut self, g: f64) -> bool {
        if self.bytes > 0 {
            let f = self.bytes_ce as f64 / self.bytes as f64;
            self.alpha = (1.0 - g) * self.alpha + g * f;
        }
        let marked = self.bytes_ce > 0;
        self.bytes = 0;
        self.bytes_ce = 0;
        marked
    }

    /// DCTCP's reduced window, `cwnd·(1 − α/2)` (not below `min_cwnd`).
    pub fn reduced(&self, min_cwnd: u64) -> u64 {
        ((self.cwnd as f64 * (1.0 - self.alpha / 2.0)) as u64).max(min_cwnd)
    }

    /// A loss: halve the window (not below `min_cwnd`) and leave slow start.
    pub fn on_loss(&mut self, min_cwnd: u64) {
        self.cwnd = (self.cwnd / 2).max(min_cwnd);
        self.ssthresh = self.cwnd;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const MSS: u64 = 1448;

    #[test]
    fn slow_start_then_one_mss_per_window() {
        let mut w = DctcpWindow::new(10 * MSS, 1.0);
        for _ in 0..10 {
            w.on_new_ack(MSS, MSS);
        }
        assert_eq!(w.cwnd, 20 * MSS, "slow start doubles in one window");
        w.on_loss(2 * MSS);
        assert_eq!(w.cwnd, 10 * MSS);
        for _ in 0..10 {
            w.on_new_ack(MSS, MSS);
        }
        let grown = w.cwnd - 10 * MSS;
        assert!(
            grown.abs_diff(MSS) * 20 < MSS,
            "congestion avoidance adds about one MSS per window: {grown}"
        );
    }

    #[test]
    fn alpha_follows_the_marked_share_and_cuts_by_half_of_it() {
        let mut w = DctcpWindow::new(100 * MSS, 0.0);
        w.ssthresh = 0;
        for _ in 0..200 {
            w.count(100 * MSS, false);
            w.count(100 * MSS, true);
            w.end_window(1.0 / 16.0, 2 * MSS);
            w.cwnd = 100 * MSS;
        }
        assert!((w.alpha - 0.5).abs() < 1e-4, "alpha {}", w.alpha);
        w.count(MSS, true);
        assert!(w.end_window(1.0 / 16.0, 2 * MSS));
        let expect = (100.0 * MSS as f64 * (1.0 - w.alpha / 2.0)) as u64;
        assert_eq!(w.cwnd, expect);
        assert!(
            !w.end_window(1.0 / 16.0, 2 * MSS),
            "an unmarked window is not cut"
        );
    }

    proptest! {
        #[test]
        fn window_stays_within_bounds(
            ops in proptest::collection::vec((0u8..4, 1u64..3000, any::<bool>()), 1..400)
        ) {
            let min = 2 * MSS;
            let mut w = DctcpWindow::new(10 * MSS, 1.0);
            for (op, n, m) in ops {
                let before = w.cwnd;
                match op {
                    0 => { w.on_new_ack(n, MSS); prop_assert!(w.cwnd >= before && w.cwnd <= before + 2 * MSS); }
                    1 => w.count(n, m),
                    2 => { w.end_window(1.0 / 16.0, min); prop_assert!(w.cwnd <= before.max(min)); }
                    _ => { w.on_loss(min); prop_assert!(w.cwnd <= before.max(min)); }
                }
                prop_assert!((0.0..=1.0).contains(&w.alpha));
                prop_assert!(w.cwnd >= min.min(10 * MSS));
            }
        }
    }
}
