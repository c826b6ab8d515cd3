//! The local lines of semaphore waiters: one first-come-first-served line per semaphore with
//! waiters in this process, whose front is the one waiter contending in the store. Kept apart
//! from `semaphore.rs` because the locker's shared state holds them.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// The lines of a locker's waiters, one per semaphore with waiters in this process: a fair
/// (first come, first served) async mutex whose holder is the one waiter contending in the
/// store.
#[derive(Default)]
pub(crate) struct Lines {
    lines: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
}

/// A place in one semaphore's line; the line goes when its last place does.
pub(crate) struct Line<'a> {
    lines: &'a Lines,
    key: &'a str,
    /// `None` only while dropping.
    mutex: Option<Arc<tokio::sync::Mutex<()>>>,
}

impl Line<'_> {
    /// The line's mutex: whoever holds it is the front of the line.
    pub(crate) fn front(&self) -> &tokio::sync::Mutex<()> {
        self.mutex
            .as_deref()
            .expect("a line is only taken apart when dropped")
    }
}

impl Lines {
    /// Joins the line of the semaphore whose store name is `key`.
    pub(crate) fn enter<'a>(&'a self, key: &'a str) -> Line<'a> {
        let mutex = self
            .lines
            .lock()
            .unwrap()
            .entry(key.to_owned())
            .or_default()
            .clone();
        Line {
            lines: self,
            key,
            mutex: Some(mutex),
        }
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.lines.lock().unwrap().len()
    }
}

impl Drop for Line<'_> {
    fn drop(&mut self) {
        let mut lines = self.lines.lines.lock().unwrap();
        // Let go of ours under the map's lock (nobody joins without it): when only the map's
        // is left, nobody waits in this line any more.
        drop(self.mutex.take());
        if lines
            .get(self.key)
            .is_some_and(|m| Arc::strong_count(m) == 1)
        {
            lines.remove(self.key);
        }
    }
}
