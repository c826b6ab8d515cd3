//! Spans and metrics are emitted under their documented names, with keys shown as configured
//! and owner tokens never shown.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use leasehold::{distributed_lock, LockError, Locker, TraceKeys};
use leasehold_tests::harness::RedisServer;
use metrics_util::debugging::{DebugValue, DebuggingRecorder};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::Instrument;
use tracing::{Event, Subscriber};
use tracing_subscriber::layer::{Context, Layer, SubscriberExt};
use tracing_subscriber::registry::LookupSpan;

/// A span's name and its fields, as recorded over its life.
type SpanRecord = (String, HashMap<String, String>);

/// Every span and every event's fields.
#[derive(Clone, Default)]
struct Captured {
    spans: Arc<Mutex<Vec<SpanRecord>>>,
    ids: Arc<Mutex<HashMap<u64, usize>>>,
    events: Arc<Mutex<Vec<HashMap<String, String>>>>,
}

struct Fields<'a>(&'a mut HashMap<String, String>);

impl Visit for Fields<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0.insert(
            field.name().to_owned(),
            format!("{value:?}").trim_matches('"').to_owned(),
        );
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().to_owned(), value.to_owned());
    }
}

impl<S: Subscriber + for<'a> LookupSpan<'a>> Layer<S> for Captured {
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let mut fields = HashMap::new();
        attrs.record(&mut Fields(&mut fields));
        // The parent's name, under a field name no span of the library uses.
        if let Some(parent) = ctx.span(id).and_then(|span| span.parent()) {
            fields.insert("(parent)".to_owned(), parent.name().to_owned());
        }
        let mut spans = self.spans.lock().unwrap();
        spans.push((attrs.metadata().name().to_owned(), fields));
        self.ids
            .lock()
            .unwrap()
            .insert(id.into_u64(), spans.len() - 1);
    }
    fn on_record(&self, id: &Id, values: &Record<'_>, _: Context<'_, S>) {
        if let Some(&i) = self.ids.lock().unwrap().get(&id.into_u64()) {
            values.record(&mut Fields(&mut self.spans.lock().unwrap()[i].1));
        }
    }
    fn on_event(&self, event: &Event<'_>, _: Context<'_, S>) {
        let mut fields = HashMap::new();
        event.record(&mut Fields(&mut fields));
        self.events.lock().unwrap().push(fields);
    }
}

impl Captured {
    fn spans_named(&self, name: &str) -> Vec<HashMap<String, String>> {
        self.spans
            .lock()
            .unwrap()
            .iter()
            .filter(|(n, _)| n == name)
            .map(|(_, f)| f.clone())
            .collect()
    }

    /// Every value written anywhere, to look for things that must never appear.
    fn all_values(&self) -> Vec<String> {
        let spans = self.spans.lock().unwrap();
        let events = self.events.lock().unwrap();
        spans
            .iter()
            .flat_map(|(_, f)| f.values().cloned())
            .chain(events.iter().flat_map(|f| f.values().cloned()))
            .collect()
    }
}

#[distributed_lock(key = "order:<id>", locker = locker)]
async fn buy(locker: &Locker, id: u64) -> Result<u64, LockError> {
    tracing::info!(inside = "body", "buying");
    Ok(id)
}

/// The tests of this file run one at a time: tracing caches, per call site, whether anyone
/// listens, and tests that set and drop their own subscribers on parallel threads race on
/// that cache (a span can go unrecorded).
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

#[test]
fn spans_carry_the_documented_names_and_fields() {
    let _serial = serial();
    let captured = Captured::default();
    let subscriber = tracing_subscriber::registry().with(captured.clone());
    let _default = crate::support::scoped(subscriber);
    runtime().block_on(async {
        let srv = RedisServer::start().await;
        let locker = Locker::connect(&srv.url()).await.unwrap();
        assert_eq!(buy(&locker, 7).await.unwrap(), 7);
        let held = locker.lock("order:8").acquire().await.unwrap();
        let busy = locker.lock("order:8").wait(Duration::ZERO).acquire().await;
        assert!(busy.is_err());
        drop(held);
        tokio::time::sleep(Duration::from_millis(100)).await;
    });

    let acquires = captured.spans_named("leasehold.acquire");
    let first = &acquires[0];
    assert_eq!(first["key"], "order:7");
    assert_eq!(first["outcome"], "acquired");
    assert!(first["fence"].parse::<u64>().unwrap() > 0);
    assert!(first.contains_key("waited_ms") && first.contains_key("lease_ms"));
    assert!(acquires
        .iter()
        .any(|s| s.get("outcome").map(String::as_str) == Some("lock_busy")));
    let holds = captured.spans_named("leasehold.hold");
    assert_eq!(holds[0]["key"], "order:7");
    let releases = captured.spans_named("leasehold.release");
    assert!(
        releases.iter().all(|r| r["outcome"] == "released"),
        "{releases:?}"
    );
    assert_eq!(
        releases.len(),
        2,
        "the attribute's release and the dropped guard's"
    );
    // The body's event was recorded (inside the hold span).
    assert!(captured
        .events
        .lock()
        .unwrap()
        .iter()
        .any(|e| e.get("inside").is_some()));
    // No owner token (32 hex characters) anywhere.
    for value in captured.all_values() {
        let hexish = value.len() >= 32 && value.chars().all(|c| c.is_ascii_hexdigit());
        assert!(!hexish, "a token-like value was traced: {value}");
    }
}

/// The hold span is the acquire span's sibling under the caller's span, not its child, for a
/// plain acquire and for the attribute; the body's events are inside the hold span.
#[test]
fn hold_and_acquire_spans_are_siblings_under_the_callers_span() {
    let _serial = serial();
    let captured = Captured::default();
    let subscriber = tracing_subscriber::registry().with(captured.clone());
    let _default = crate::support::scoped(subscriber);
    runtime().block_on(
        async {
            let locker = Locker::in_memory();
            let guard = locker.lock("order:1").acquire().await.unwrap();
            guard.release().await.unwrap();
            buy(&locker, 2).await.unwrap();
        }
        .instrument(tracing::info_span!("caller")),
    );
    let acquires = captured.spans_named("leasehold.acquire");
    let holds = captured.spans_named("leasehold.hold");
    assert_eq!(
        (acquires.len(), holds.len()),
        (2, 2),
        "{acquires:?} {holds:?}"
    );
    for span in acquires.iter().chain(&holds) {
        assert_eq!(
            span.get("(parent)").map(String::as_str),
            Some("caller"),
            "{span:?}"
        );
    }
}

#[distributed_lock(key = "frozen", lease = "600ms", locker = locker)]
async fn long_body(locker: &Locker) -> Result<(), LockError> {
    tokio::time::sleep(Duration::from_secs(10)).await;
    Ok(())
}

/// A lease whose renewals fail until it runs out is reported lost once, and no "renewal
/// failed" warning follows that report.
#[test]
fn no_renewal_warning_after_the_loss_was_reported() {
    let _serial = serial();
    let captured = Captured::default();
    let subscriber = tracing_subscriber::registry().with(captured.clone());
    let _default = crate::support::scoped(subscriber);
    runtime().block_on(async {
        let srv = RedisServer::start().await;
        let locker = Locker::builder()
            .url(srv.url())
            .op_timeout(Duration::from_millis(100))
            .build()
            .await
            .unwrap();
        let frozen = {
            let srv = &srv;
            async move {
                // Freeze Redis once the body runs; the attribute cancels the body when the
                // lease runs out, and reports the loss then.
                tokio::time::sleep(Duration::from_millis(50)).await;
                srv.pause();
            }
        };
        let (out, ()) = tokio::join!(long_body(&locker), frozen);
        assert!(out.unwrap_err().is_lost());
        // Past every retry the watchdog could still have scheduled.
        tokio::time::sleep(Duration::from_millis(800)).await;
        srv.resume();
    });
    let events = captured.events.lock().unwrap().clone();
    let message = |e: &HashMap<String, String>| e.get("message").cloned().unwrap_or_default();
    let lost: Vec<usize> = events
        .iter()
        .enumerate()
        .filter(|(_, e)| message(e).contains("lease lost"))
        .map(|(i, _)| i)
        .collect();
    assert_eq!(lost.len(), 1, "reported lost once: {events:?}");
    let late: Vec<String> = events[lost[0]..]
        .iter()
        .map(message)
        .filter(|m| m.contains("renewal failed"))
        .collect();
    assert!(late.is_empty(), "renewal warnings after the loss: {late:?}");
    assert!(
        events[..lost[0]]
            .iter()
            .any(|e| message(e).contains("renewal failed")),
        "the failed renewals before the loss are reported: {events:?}"
    );
}

#[test]
fn keys_can_be_kept_out_of_traces() {
    let _serial = serial();
    let captured = Captured::default();
    let subscriber = tracing_subscriber::registry().with(captured.clone());
    let _default = crate::support::scoped(subscriber);
    runtime().block_on(async {
        let srv = RedisServer::start().await;
        let locker = Locker::builder()
            .url(srv.url())
            .trace_keys(TraceKeys::Hashed)
            .build()
            .await
            .unwrap();
        locker
            .lock("user:alice@example.com")
            .acquire()
            .await
            .unwrap()
            .release()
            .await
            .unwrap();
    });
    for value in captured.all_values() {
        assert!(!value.contains("alice"), "the key leaked: {value}");
    }
    let acquire = &captured.spans_named("leasehold.acquire")[0];
    assert_eq!(acquire["key"].len(), 16);
}

#[test]
fn metrics_are_emitted_under_their_documented_names() {
    let _serial = serial();
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    metrics::with_local_recorder(&recorder, || {
        runtime().block_on(async {
            let srv = RedisServer::start().await;
            let locker = Locker::connect(&srv.url()).await.unwrap();
            let held = locker
                .lock("m")
                .lease(Duration::from_millis(300))
                .acquire()
                .await
                .unwrap();
            assert!(locker
                .lock("m")
                .wait(Duration::ZERO)
                .acquire()
                .await
                .is_err());
            // Long enough for a few renewals.
            tokio::time::sleep(Duration::from_millis(350)).await;
            held.release().await.unwrap();
            // A lost lease: its key is deleted behind its back.
            let doomed = locker
                .lock("gone")
                .lease(Duration::from_millis(150))
                .acquire()
                .await
                .unwrap();
            let mut conn = srv.conn().await;
            let _: () = redis::AsyncCommands::del(&mut conn, "leasehold:lock:{gone}")
                .await
                .unwrap();
            doomed.lost().await;
            drop(doomed);
            tokio::time::sleep(Duration::from_millis(50)).await;
            srv.kill9();
            assert!(locker.lock("x").acquire().await.is_err());
        })
    });
    let snapshot = snapshotter.snapshot().into_vec();
    let value = |name: &str| {
        snapshot
            .iter()
            .filter(|(key, ..)| key.key().name() == name)
            .map(|(_, _, _, v)| v)
            .collect::<Vec<_>>()
    };
    let counter = |name: &str| {
        value(name)
            .iter()
            .map(|v| match v {
                DebugValue::Counter(n) => *n,
                other => panic!("{name} is not a counter: {other:?}"),
            })
            .sum::<u64>()
    };
    assert_eq!(counter("leasehold_acquired_total"), 2);
    assert_eq!(counter("leasehold_busy_total"), 1);
    assert_eq!(counter("leasehold_unavailable_total"), 1);
    assert!(counter("leasehold_renewals_total") >= 2);
    assert_eq!(counter("leasehold_lost_total"), 1);
    assert!(!value("leasehold_acquire_seconds").is_empty());
    assert!(!value("leasehold_hold_seconds").is_empty());
    // One lag per renewal sent, each well under the 300 ms lease.
    match value("leasehold_renewal_lag_seconds").first().copied() {
        Some(DebugValue::Histogram(lags)) => {
            assert!(lags.len() >= 2, "one lag per renewal: {lags:?}");
            assert!(lags.iter().all(|l| l.into_inner() < 0.3), "{lags:?}");
        }
        other => panic!("leasehold_renewal_lag_seconds: {other:?}"),
    }
    match value("leasehold_locks_held").first().copied() {
        Some(DebugValue::Gauge(g)) => assert_eq!(g.into_inner(), 0.0, "every lock was given back"),
        other => panic!("leasehold_locks_held: {other:?}"),
    }
}
