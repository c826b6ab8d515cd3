//! Watching a lock's queue for a subscription: the deletion of the key just ahead of ours,
//! or, for a waiter without one, of any writer's key (or a change of its value: a leader
//! record); for a semaphore, of any key.

use std::time::Duration;

use etcd_client as etcd;
use tokio::sync::mpsc;

use super::calls::retry_unsent;

/// What a subscription watches one lock's queue with.
pub(crate) struct Watcher {
    pub(super) client: etcd::Client,
    /// The lock's range of contenders.
    pub(super) range: String,
    pub(super) limit: Duration,
}

/// A watch on the deletion of one key (or of any key of a range).
pub(super) struct Watching {
    _stream: etcd::WatchRequestSender,
    events: mpsc::Receiver<()>,
}

impl Watching {
    /// Resolves at the watched deletion, or when the watch breaks (a waiter then looks).
    pub(super) async fn deleted(&mut self) {
        let _ = self.events.recv().await;
    }
}

/// What a watch of a lock's range waits for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Target {
    /// The deletion of the key just ahead of this create revision.
    Predecessor(i64),
    /// The deletion of any writer's key, or a change of its value (a leader record written or
    /// cleared): what a waiter without a key waits for (readers' keys come and go without
    /// waking it, and so do new writers' keys).
    Writers,
    /// The deletion of any key of the range: a semaphore's waiters.
    Deletions,
}

/// Whether an event wakes a watch: a deletion, or a change of an existing key's value.
fn wakes(event: &etcd::Event) -> bool {
    event.event_type() == etcd::EventType::Delete
        || event
            .kv()
            .is_some_and(|kv| kv.create_revision() != kv.mod_revision())
}

/// Watches `range` for `target`. `None` when there is nothing to wait for (a predecessor's
/// watch of the first in line).
///
/// A predecessor's watch starts from the revision the queue was read at, so that its deletion
/// between the read and the watch is not missed. The watches of a whole range (a waiter
/// without a key, a semaphore's waiters) need no read: they start from the revision the
/// server is at, which keeps them in etcd's synced group, whose events come at once (a watch
/// that starts from a past revision is caught up by a loop that runs every 100 ms: an
/// observer saw a new leader's record up to 100 ms late). Nothing is missed either way: the
/// waiter is told to look only once its watch is set.
pub(super) async fn watch_predecessor(
    client: &etcd::Client,
    range: &str,
    target: Target,
    limit: Duration,
) -> Result<Option<Watching>, String> {
    let (watched, options) = match target {
        Target::Predecessor(mine) => {
            let options = etcd::GetOptions::new()
                .with_prefix()
                .with_keys_only()
                .with_sort(etcd::SortTarget::Create, etcd::SortOrder::Descend)
                .with_limit(1)
                .with_max_create_revision(mine - 1);
            let read = retry_unsent(client, limit, |mut c| {
                let options = options.clone();
                async move { c.get(range, Some(options)).await }
            })
            .await
            .map_err(|_| format!("no answer within {limit:?}"))?
            .map_err(|e| e.to_string())?;
            let revision = read.header().map_or(0, |h| h.revision());
            let Some(ahead) = read.kvs().first() else {
                return Ok(None); // first in line
            };
            let options = etcd::WatchOptions::new()
                .with_start_revision(revision + 1)
                .with_filters([etcd::WatchFilterType::NoPut]);
            (ahead.key().to_vec(), options)
        }
        // The writers' keys: the range up to where readers' keys start. Puts are seen (a
        // record is one) and sorted out here: a new writer's key does not wake.
        Target::Writers => (
            range.as_bytes().to_vec(),
            etcd::WatchOptions::new().with_range(format!("{range}~")),
        ),
        Target::Deletions => (
            range.as_bytes().to_vec(),
            etcd::WatchOptions::new()
                .with_prefix()
                .with_filters([etcd::WatchFilterType::NoPut]),
        ),
    };
    let mut stream = retry_unsent(client, limit, |mut c| {
        let (watched, options) = (watched.clone(), options.clone());
        async move { c.watch(watched, Some(options)).await }
    })
    .await
    .map_err(|_| format!("no answer within {limit:?}"))?
    .map_err(|e| e.to_string())?;
    // The first answer confirms the watch; events may come with it.
    let created = tokio::time::timeout(limit, stream.message())
        .await
        .map_err(|_| format!("no answer within {limit:?}"))?
        .map_err(|e| e.to_string())?
        .ok_or("the watch stream ended at once")?;
    let (tx, events) = mpsc::channel(1);
    if created.events().iter().any(wakes) || created.canceled() {
        let _ = tx.try_send(());
    }
    let (sender, mut responses) = stream.split();
    tokio::spawn(async move {
        loop {
            tokio::select! {
                answer = responses.message() => match answer {
                    Ok(Some(r)) if !r.canceled() && !r.events().iter().any(wakes) => continue,
                    // A deletion, a changed value, a cancelled watch (compaction) or a broken
                    // stream: look again.
                    _ => {
                        let _ = tx.try_send(());
                        return;
                    }
                },
                // Nobody watches any more: dropping the stream cancels the watch.
                () = tx.closed() => return,
            }
        }
    });
    Ok(Some(Watching {
        _stream: sender,
        events,
    }))
}
