//! Read locks: readers share a lock while no writer holds it or waits for it, each with a
//! lease and fence of its own.

use tokio::time::Instant;

use super::MemoryStore;
use crate::store::keys::LockKeys;
use crate::store::token::OwnerToken;
use crate::store::{AcquireRequest, Attempt};

impl MemoryStore {
    pub(crate) fn acquire_shared(&self, req: &AcquireRequest<'_>) -> Attempt {
        let mut state = self.state.lock().unwrap();
        let now = Instant::now();
        state.tick(now);
        if let Some(held) = state.locks.get(req.keys.lock()) {
            if held.expires > now {
                return Attempt::Held {
                    remaining: Some(held.expires - now),
                };
            }
        }
        if let Some(&until) = state.writer_waits.get(req.keys.lock()) {
            if until > now {
                return Attempt::Held { remaining: None };
            }
        }
        state
            .readers
            .entry(req.keys.lock().to_owned())
            .or_default()
            .insert(req.token.clone(), now + req.lease);
        Attempt::granted(state.current_fence(req.keys.fence(), now))
    }

    pub(crate) fn release_shared(&self, keys: &LockKeys, token: &OwnerToken) -> bool {
        let mut state = self.state.lock().unwrap();
        let now = Instant::now();
        let Some(readers) = state.readers.get_mut(keys.lock()) else {
            return false;
        };
        let was_held = readers.remove(token).is_some_and(|until| until > now);
        readers.retain(|_, until| *until > now);
        if readers.is_empty() {
            state.readers.remove(keys.lock());
            if let Some(tx) = state.channels.get(keys.wake()) {
                tx.send_modify(|n| *n += 1);
            }
        }
        was_held
    }
}
