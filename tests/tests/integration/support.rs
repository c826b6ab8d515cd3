//! Tracing in a process that many tests share: a subscriber of a test's own thread
//! ([`scoped`]), and the events of every thread while a [`Tap`] lives.
//!
//! Tracing caches, per call site, whether anyone listens. With scoped subscribers alone, a call
//! site first reached on a thread that has none is cached as "never", also for the subscriber a
//! test set on another thread, which then misses its events. So a global subscriber goes in
//! first, interested "sometimes" in every call site: the cache never says never, and every event
//! is offered to it on the threads without a scoped subscriber, where it hands the event to the
//! live taps (and drops it when there is none).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Once, Weak};

use tracing::span::{Attributes, Id, Record};
use tracing::subscriber::{DefaultGuard, Interest};
use tracing::{Event, Metadata, Subscriber};

type Listener = dyn Fn(&Event<'_>) + Send + Sync;

static TAPS: Mutex<Vec<Weak<Listener>>> = Mutex::new(Vec::new());
/// The taps alive, so that no event takes the lock when there is none.
static LIVE: AtomicUsize = AtomicUsize::new(0);

/// Sets `subscriber` as the default of this thread until the guard is dropped, as
/// `tracing::subscriber::set_default` does, with the global subscriber in place first.
pub fn scoped(subscriber: impl Subscriber + Send + Sync + 'static) -> DefaultGuard {
    install();
    tracing::subscriber::set_default(subscriber)
}

/// Hands `listener` every event of every thread that has no scoped subscriber, until the tap
/// is dropped; events of other tests too, so a listener keeps only what is its test's own.
pub fn tap(listener: impl Fn(&Event<'_>) + Send + Sync + 'static) -> Tap {
    install();
    let listener: Arc<Listener> = Arc::new(listener);
    let mut taps = TAPS.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    taps.retain(|t| t.strong_count() > 0);
    taps.push(Arc::downgrade(&listener));
    LIVE.fetch_add(1, Ordering::SeqCst);
    Tap {
        _listener: listener,
    }
}

/// Events reach the listener of [`tap`] while this lives.
pub struct Tap {
    _listener: Arc<Listener>,
}

impl Drop for Tap {
    fn drop(&mut self) {
        LIVE.fetch_sub(1, Ordering::SeqCst);
    }
}

fn install() {
    static INSTALLED: Once = Once::new();
    INSTALLED.call_once(|| {
        tracing::subscriber::set_global_default(Global)
            .expect("the only global subscriber of this test binary");
    });
}

/// The global subscriber: interested in every call site, enabled for events while a tap lives.
struct Global;

impl Subscriber for Global {
    fn register_callsite(&self, _: &'static Metadata<'static>) -> Interest {
        Interest::sometimes()
    }

    fn enabled(&self, metadata: &Metadata<'_>) -> bool {
        metadata.is_event() && LIVE.load(Ordering::SeqCst) > 0
    }

    fn new_span(&self, _: &Attributes<'_>) -> Id {
        Id::from_u64(1)
    }

    fn record(&self, _: &Id, _: &Record<'_>) {}

    fn record_follows_from(&self, _: &Id, _: &Id) {}

    fn event(&self, event: &Event<'_>) {
        let taps: Vec<Arc<Listener>> = TAPS
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .iter()
            .filter_map(Weak::upgrade)
            .collect();
        for tap in taps {
            tap(event);
        }
    }

    fn enter(&self, _: &Id) {}

    fn exit(&self, _: &Id) {}
}
