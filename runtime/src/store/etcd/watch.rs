//! Watching a lock's queue for a subscription: the deletion of the key just ahead of ours,
//! or, for a reader waiting without one, of any writer's key.

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

/// Watches the deletion of the key just ahead of revision `mine` in `range` (of any writer's
/// key of the range when this process has no key there, as a waiting reader: readers' keys
/// come and go without waking it), from the revision the queue was read at. `None` when there
/// is nothing to wait for.
pub(super) async fn watch_predecessor(
    client: &etcd::Client,
    range: &str,
    mine: Option<i64>,
    limit: Duration,
) -> Result<Option<Watching>, String> {
    let mut options = etcd::GetOptions::new()
        .with_prefix()
        .with_keys_only()
        .with_sort(etcd::SortTarget::Create, etcd::SortOrder::Descend)
        .with_limit(1);
    if let Some(mine) = mine {
        options = options.with_max_create_revision(mine - 1);
    }
    let read = retry_unsent(client, limit, |mut c| {
        let options = options.clone();
        async move { c.get(range, Some(options)).await }
    })
    .await
    .map_err(|_| format!("no answer within {limit:?}"))?
    .map_err(|e| e.to_string())?;
    let revision = read.header().map_or(0, |h| h.revision());
    let watched = match (mine, read.kvs().first()) {
        (Some(_), None) => return Ok(None), // first in line
        (Some(_), Some(ahead)) => ahead.key().to_vec(),
        (None, _) => range.as_bytes().to_vec(),
    };
    let mut options = etcd::WatchOptions::new()
        .with_start_revision(revision + 1)
        .with_filters([etcd::WatchFilterType::NoPut]);
    if mine.is_none() {
        // The writers' keys: the range up to where readers' keys start.
        options = options.with_range(format!("{range}~"));
    }
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
    if !created.events().is_empty() || created.canceled() {
        let _ = tx.try_send(());
    }
    let (sender, mut responses) = stream.split();
    tokio::spawn(async move {
        loop {
            tokio::select! {
                answer = responses.message() => match answer {
                    Ok(Some(r)) if r.events().is_empty() && !r.canceled() => continue,
                    // A deletion, a cancelled watch (compaction) or a broken stream: look again.
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
