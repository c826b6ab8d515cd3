//! The task that keeps the locker's etcd lease alive: periodic keep-alives, and one on
//! demand shared by every acquire and renewal that waits for it.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use etcd_client as etcd;
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;

use super::calls::lease_gone;
use super::session::{Beat, Ended};

/// The task that keeps one lease alive: a keep-alive every third of the TTL, and one on demand
/// for the acquires and renewals that need it. One keep-alive on demand is on its way at a
/// time: requests made meanwhile wait for its answer and then share the next one (or ride on
/// the next periodic one), which is sent after each of them was made, all they ask. Under
/// load that is one keep-alive per round trip instead of one per acquire; a keep-alive's
/// round trip is shorter than the write the acquire waits for anyway.
pub(super) struct Keeper {
    pub(super) client: etcd::Client,
    pub(super) id: i64,
    pub(super) ttl: Duration,
    pub(super) op_timeout: Duration,
    pub(super) acked: Arc<Mutex<Instant>>,
    pub(super) ended: Ended,
    /// The driver's link: up while keep-alives are acknowledged in time.
    pub(super) link: Weak<watch::Sender<bool>>,
}

impl Keeper {
    pub(super) async fn run(self, mut requests: mpsc::UnboundedReceiver<Beat>) {
        let interval = (self.ttl / 3).max(Duration::from_millis(100));
        let mut keeper: Option<etcd::LeaseKeeper> = None;
        let mut responses: Option<etcd::LeaseKeepAliveStream> = None;
        // Keep-alives sent and not answered yet, in order, with who waits for each.
        let mut pending: VecDeque<(Instant, Vec<Beat>)> = VecDeque::new();
        // Callers waiting while the stream is being opened again.
        let mut waiting: Vec<Beat> = Vec::new();
        // Who asked for a keep-alive while one that callers wait for was on its way.
        let mut next: Vec<Beat> = Vec::new();
        let mut next_beat = Instant::now() + interval;
        let mut reopen_at = Instant::now();
        loop {
            let give_up = *self.acked.lock().unwrap() + self.ttl;
            if Instant::now() >= give_up {
                self.connected(false);
                self.ended
                    .end("no keep-alive was acknowledged for the whole TTL")
                    .await;
                return;
            }
            if keeper.is_none() && Instant::now() >= reopen_at {
                let sent = Instant::now();
                let mut client = self.client.clone();
                match tokio::time::timeout(self.op_timeout, client.lease_keep_alive(self.id)).await
                {
                    Ok(Ok((k, r))) => {
                        // Its first keep-alive was acknowledged as the stream opened.
                        self.ack(sent);
                        for beat in waiting.drain(..) {
                            let _ = beat.send(());
                        }
                        keeper = Some(k);
                        responses = Some(r);
                        next_beat = sent + interval;
                    }
                    Ok(Err(e)) if lease_gone(&e) => {
                        self.connected(false);
                        self.ended.end("etcd says the lease expired").await;
                        return;
                    }
                    Ok(Err(e)) => {
                        tracing::debug!(error = %e, "etcd keep-alive stream not opened; retrying");
                        self.connected(false);
                        reopen_at = Instant::now() + Duration::from_millis(100);
                    }
                    Err(_) => {
                        self.connected(false);
                        reopen_at = Instant::now() + Duration::from_millis(100);
                    }
                }
                continue;
            }
            let answer = async {
                match responses.as_mut() {
                    Some(r) => r.message().await,
                    None => std::future::pending().await,
                }
            };
            let mut broken = false;
            // The oldest keep-alive unanswered for the operation timeout: the link is down
            // (etcd paused, a partition), long before the lease is given up.
            let overdue = pending.front().map(|(sent, _)| *sent + self.op_timeout);
            let overdue = async {
                match overdue {
                    Some(at) => tokio::time::sleep_until(at).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                request = requests.recv() => {
                    let Some(beat) = request else {
                        // The store is gone: give its locks back now rather than in a TTL.
                        let mut client = self.client.clone();
                        let _ = tokio::time::timeout(self.op_timeout, client.lease_revoke(self.id)).await;
                        return;
                    };
                    next.push(beat);
                    while let Ok(beat) = requests.try_recv() {
                        next.push(beat);
                    }
                    if keeper.is_none() {
                        waiting.append(&mut next);
                    }
                }
                () = tokio::time::sleep_until(next_beat), if keeper.is_some() => {
                    next_beat = Instant::now() + interval;
                    if let Some(k) = keeper.as_mut() {
                        // Whoever waits for the next keep-alive rides on this one.
                        let beats = std::mem::take(&mut next);
                        broken = !send_keep_alive(k, &mut pending, beats, &mut waiting).await;
                    }
                }
                answer = answer => match answer {
                    Ok(Some(answer)) => {
                        if answer.ttl() <= 0 {
                            self.connected(false);
                            self.ended.end("etcd says the lease expired").await;
                            return;
                        }
                        // etcd answers the keep-alives of one stream one by one, in the order
                        // sent: this answer is the oldest pending one's, and vouches for its
                        // send time. An answer to none moves nothing: the send times locks
                        // are counted from must be of keep-alives etcd received after them.
                        if let Some((sent, beats)) = pending.pop_front() {
                            self.ack(sent);
                            for beat in beats {
                                let _ = beat.send(());
                            }
                        }
                    }
                    // Broken (a member died, a connection dropped): open it again. Whoever
                    // waited for an answer on it hears nothing and tries again.
                    Ok(None) | Err(_) => broken = true,
                },
                () = tokio::time::sleep_until(give_up) => {}
                () = tokio::time::sleep_until(reopen_at), if keeper.is_none() => {}
                () = overdue, if self.is_connected() => self.connected(false),
            }
            // Callers asked, and no keep-alive they wait for is on its way: one goes for all.
            let awaited = pending.iter().any(|(_, beats)| !beats.is_empty());
            if !broken && !awaited && !next.is_empty() {
                if let Some(k) = keeper.as_mut() {
                    let beats = std::mem::take(&mut next);
                    broken = !send_keep_alive(k, &mut pending, beats, &mut waiting).await;
                }
            }
            if broken {
                tracing::debug!("etcd keep-alive stream broke; opening it again");
                keeper = None;
                responses = None;
                pending.clear();
                waiting.append(&mut next);
                reopen_at = Instant::now();
            }
        }
    }

    /// A keep-alive sent at `sent` was acknowledged: etcd keeps the lease at least a TTL from
    /// then. Never moves back (an older send time says less).
    pub(super) fn ack(&self, sent: Instant) {
        let mut acked = self.acked.lock().unwrap();
        *acked = (*acked).max(sent);
        drop(acked);
        self.connected(true);
    }

    /// Says whether keep-alives are acknowledged in time, if that changed.
    fn connected(&self, up: bool) {
        if let Some(link) = self.link.upgrade() {
            link.send_if_modified(|now| std::mem::replace(now, up) != up);
        }
    }

    fn is_connected(&self) -> bool {
        self.link.upgrade().is_some_and(|link| *link.borrow())
    }
}

/// Sends one keep-alive on `k` for `beats` (those waiting for it, possibly none); false when
/// the stream is broken, the beats then wait in `waiting` for it to open again.
pub(super) async fn send_keep_alive(
    k: &mut etcd::LeaseKeeper,
    pending: &mut VecDeque<(Instant, Vec<Beat>)>,
    beats: Vec<Beat>,
    waiting: &mut Vec<Beat>,
) -> bool {
    let sent = Instant::now();
    if k.keep_alive().await.is_ok() {
        pending.push_back((sent, beats));
        true
    } else {
        waiting.extend(beats);
        false
    }
}
