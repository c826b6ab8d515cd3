//! Brings a dropped connection back as soon as its server answers again, instead of on the
//! next command. The client reconnects once right after a drop; when the server is still
//! down that attempt fails, and the connection then stays broken until some command fails
//! on it and starts another attempt. For the lock connection that command is a user's
//! acquire; for the subscription connection nothing is ever sent, so waiters stay deaf to
//! that server's releases. `Revival` keeps probing, with backoff, until a probe succeeds.

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use tokio::time::Instant;

/// The first probe after a drop: the client's own reconnect has had its chance by then.
const FIRST_PROBE: Duration = Duration::from_millis(50);
/// The longest pause between probes, so a server back after a long outage is noticed
/// within this much.
const MAX_PROBE_INTERVAL: Duration = Duration::from_millis(500);

/// One probe in flight: resolves to `true` when the connection works again.
pub(crate) type Probe = Pin<Box<dyn Future<Output = bool> + Send>>;

/// What [`Revival::step`] came to.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Step {
    /// Time for a probe: hand one to [`Revival::probe`].
    Due,
    /// The probe succeeded and no drop came after it was sent: the connection is back.
    Back,
    /// The probe failed (or a drop overtook it); another one is scheduled.
    Retry,
}

/// The probing schedule of one connection, driven by the task that watches its drops.
#[derive(Default)]
pub(crate) struct Revival {
    delay: Duration,
    due: Option<Instant>,
    probe: Option<Probe>,
    /// A drop came while the probe was in flight: its success may be the old connection's.
    stale: bool,
}

impl Revival {
    /// The connection dropped, or a command found it broken: probe until it works.
    pub(crate) fn dropped(&mut self) {
        if self.probe.is_some() {
            self.stale = true;
        } else if self.due.is_none() {
            self.delay = FIRST_PROBE;
            self.due = Some(Instant::now() + FIRST_PROBE);
        }
    }

    /// Whether anything is scheduled or in flight; [`Revival::step`] never resolves otherwise.
    pub(crate) fn active(&self) -> bool {
        self.due.is_some() || self.probe.is_some()
    }

    /// Sends the probe the last [`Step::Due`] asked for.
    pub(crate) fn probe(&mut self, probe: Probe) {
        self.probe = Some(probe);
    }

    /// Waits for the next thing to do. Cancel-safe: the probe in flight and the schedule live
    /// in `self`, so a `select!` may drop this future and call it again.
    pub(crate) async fn step(&mut self) -> Step {
        if let Some(probe) = self.probe.as_mut() {
            let ok = probe.await;
            self.probe = None;
            let stale = std::mem::take(&mut self.stale);
            if ok && !stale {
                self.due = None;
                return Step::Back;
            }
            self.delay = (self.delay * 2).clamp(FIRST_PROBE, MAX_PROBE_INTERVAL);
            self.due = Some(Instant::now() + self.delay);
            return Step::Retry;
        }
        match self.due {
            Some(due) => {
                tokio::time::sleep_until(due).await;
                self.due = None;
                Step::Due
            }
            None => std::future::pending().await,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(ok: bool) -> Probe {
        Box::pin(async move { ok })
    }

    #[tokio::test(start_paused = true)]
    async fn probes_with_backoff_until_one_succeeds() {
        let mut r = Revival::default();
        assert!(!r.active());
        r.dropped();
        let start = Instant::now();
        let mut gaps = Vec::new();
        let mut last = start;
        for ok in [false, false, false, false, false, true] {
            assert_eq!(r.step().await, Step::Due);
            gaps.push(Instant::now() - last);
            last = Instant::now();
            r.probe(answer(ok));
            let expected = if ok { Step::Back } else { Step::Retry };
            assert_eq!(r.step().await, expected);
        }
        assert!(!r.active());
        let ms: Vec<u128> = gaps.iter().map(|d| d.as_millis()).collect();
        assert_eq!(ms, [50, 100, 200, 400, 500, 500]);
    }

    /// A drop arrives while a probe answering `first` is in flight: that probe never counts
    /// as the connection being back, and the next successful one does.
    async fn drop_during_a_probe(first: bool) {
        let mut r = Revival::default();
        r.dropped();
        assert_eq!(r.step().await, Step::Due);
        r.probe(answer(first));
        r.dropped();
        assert_eq!(r.step().await, Step::Retry);
        assert_eq!(r.step().await, Step::Due);
        r.probe(answer(true));
        assert_eq!(r.step().await, Step::Back);
    }

    #[tokio::test(start_paused = true)]
    async fn a_drop_during_a_probe_discounts_its_success() {
        drop_during_a_probe(true).await;
    }

    #[tokio::test(start_paused = true)]
    async fn a_drop_during_a_failed_probe_costs_no_extra_probe() {
        drop_during_a_probe(false).await;
    }

    #[tokio::test(start_paused = true)]
    async fn drops_while_scheduled_do_not_postpone_the_probe() {
        let mut r = Revival::default();
        r.dropped();
        tokio::time::advance(Duration::from_millis(30)).await;
        r.dropped();
        let start = Instant::now();
        assert_eq!(r.step().await, Step::Due);
        assert_eq!((Instant::now() - start).as_millis(), 20);
    }
}
