//! A batch of leases taken together on a majority of the nodes (`lock_all` of free keys,
//! readers' shares beside locks): each node takes every lease of the batch or none, in one
//! script call (its own all-or-nothing batch, acquire_all.lua); the batch is granted when a
//! majority of the nodes took all of it, with each key's fence settled by the fence round of
//! a single lease. Otherwise every node gives back what it may have taken, and every answer
//! is `Held`: the locker then takes the keys one by one in their global order, whose attempts
//! retry a split between contenders as a single lease's do.

use tokio::time::Instant;

use super::{no_quorum, RedLock};
use crate::error::LockError;
use crate::store::{join_all, AcquireRequest, Attempt, Store};

impl RedLock {
    /// Takes every lease of `batch` (locks and readers' shares of distinct keys, none queued)
    /// on a majority of the nodes, or none: one round trip to each node when they agree on
    /// the fences, a second to the lagging ones otherwise (as a single lease's fence round).
    pub(crate) async fn acquire_together(
        &self,
        batch: &[AcquireRequest<'_>],
    ) -> Result<Vec<Attempt>, LockError> {
        let answers = join_all(self.nodes.iter().map(|node| node.acquire_all(batch))).await;
        // The nodes that took the whole batch, each with the fence it answered for each key.
        let mut granted = Vec::new();
        let mut failures = Vec::new();
        for (node, answer) in self.nodes.iter().zip(answers) {
            match answer {
                Ok(attempts) => {
                    let tops: Option<Vec<u64>> = attempts
                        .iter()
                        .map(|a| match a {
                            Attempt::Granted { top, .. } => Some(*top),
                            Attempt::Held { .. } => None,
                        })
                        .collect();
                    // Some of a batch granted is a node's fault: given back below.
                    if let Some(tops) = tops.filter(|t| t.len() == batch.len()) {
                        granted.push((node, tops));
                    }
                }
                Err(e) => failures.push(e),
            }
        }
        let quorum = self.quorum();
        let in_time = |at: Instant| batch.iter().all(|req| at - req.sent < req.validity);
        if granted.len() >= quorum && in_time(Instant::now()) {
            // Each key's fence: the highest any granting node answered for it.
            let tops: Vec<u64> = (0..batch.len())
                .map(|i| granted.iter().map(|(_, t)| t[i]).max().unwrap_or(0))
                .collect();
            // A node whose fence lags for some key is raised to it, key by key; it counts
            // towards the quorum when every raise of it succeeded.
            let raised = join_all(granted.iter().map(|(node, answered)| {
                let tops = &tops;
                async move {
                    let lagging = batch
                        .iter()
                        .zip(answered.iter().zip(tops))
                        .filter(|(_, (answered, top))| answered < top);
                    let results =
                        join_all(lagging.map(|(req, (_, &top))| {
                            node.raise_fence(req.keys, top, req.fence_ttl)
                        }))
                        .await;
                    results.iter().all(Result::is_ok)
                }
            }))
            .await;
            let agreed = raised.iter().filter(|ok| **ok).count();
            if agreed >= quorum && in_time(Instant::now()) {
                return Ok(tops.into_iter().map(Attempt::granted).collect());
            }
            tracing::debug!(
                agreed,
                quorum,
                "redlock: a batch's fence round missed the quorum"
            );
        }
        // No quorum, or not in time: every node gives back every lease of the batch (a node
        // that did not answer may have taken it all the same).
        join_all(batch.iter().map(|req| {
            let until = req.sent + req.validity;
            join_all(self.nodes.iter().map(move |n| {
                let node: &dyn Store = n;
                node.give_back(req.keys, req.token, req.kind, until)
            }))
        }))
        .await;
        if failures.len() > self.nodes.len() - quorum {
            return Err(no_quorum(
                "acquire",
                granted.len(),
                self.nodes.len(),
                failures,
            ));
        }
        Ok(vec![Attempt::Held { remaining: None }; batch.len()])
    }
}
