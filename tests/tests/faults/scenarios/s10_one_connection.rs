//! Scenario 10: one of the locker's two connections stalled or cut; waits and calls stay
//! bounded.

use std::sync::Arc;
use std::time::Duration;

use leasehold_tests::harness::{ConnKind, ProxyMode, RedisServer, TcpProxy};
use leasehold_tests::history::Run;
use tokio::time::{sleep, Instant};

use super::support::{runs, Deployment};

/// One fault on one kind of connection: mode, name, how long.
type ConnFault = (ProxyMode, &'static str, Duration);

/// Three workers, each behind a proxy of its own, take one lock with short waits (so that
/// they wait for each other, woken through their subscription connections); the faults hit
/// one kind of connection of worker 0 only, one after the other, while it waits. Every acquire
/// must return within `wait + 3 × op_timeout` (the workers give up at that plus 2 s and log
/// it; the checker reports it), with the checker's other rules.
async fn one_connection_faulted(kind: ConnKind, faults: &[ConnFault], tail: Duration) {
    let faulted: Duration = faults.iter().map(|f| f.2).sum();
    for round in 0..runs() {
        let d = Deployment::start(1).await;
        let mut run = Run::new("one-connection");
        let spec = d
            .spec()
            .lease(Duration::from_millis(1500))
            .op_timeout(Duration::from_secs(1))
            .wait(Duration::from_millis(500))
            .hold(Duration::from_millis(300), 3)
            .duration(Duration::from_millis(1500) + faulted + tail);
        let mut proxies = Vec::new();
        for _ in 0..3 {
            let proxy = TcpProxy::start(d.nodes[0].addr()).await;
            run.spawn(&spec.clone().urls(&[proxy.url()]));
            proxies.push(proxy);
        }
        // Worker 0 has waited at least once, so its subscription connection is open.
        let until = Instant::now() + Duration::from_secs(5);
        while d.nodes[0].subscribers("leasehold:wake:{hist}").await == 0 && Instant::now() < until {
            sleep(Duration::from_millis(20)).await;
        }
        let which = match kind {
            ConnKind::Command => "lock-conn",
            _ => "sub-conn",
        };
        for &(mode, name, length) in faults {
            let target = format!("w0-{which}");
            run.fault(name, &target);
            proxies[0].set_mode_for(kind, mode);
            sleep(length).await;
            proxies[0].set_mode_for(kind, ProxyMode::Pass);
            run.heal(name, &target);
        }
        run.wait_all(Duration::from_secs(20)).await;
        let name = faults.iter().map(|f| f.1).collect::<Vec<_>>().join("-");
        let (history, report) = run.check_and_record(&format!("10-{which}-{name}#{round}"));
        // The faulted worker took part after the faults.
        let healed = history
            .faults
            .iter()
            .filter_map(|f| f.end)
            .max()
            .unwrap_or(0);
        assert!(
            history
                .holds_of(0)
                .any(|h| h.inv > healed && (h.ok.is_some() || h.err.is_some())),
            "worker 0 made no acquire after the faults: {report}"
        );
    }
}

/// The subscription connection alone cut, then stalled for 9 s (far past the op timeout)
/// while worker 0 waits, then healed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s10_waits_stay_bounded_when_the_subscription_connection_is_cut_and_stalled() {
    one_connection_faulted(
        ConnKind::Subscription,
        &[
            (ProxyMode::Cut, "cut", Duration::from_millis(300)),
            (ProxyMode::Stall, "stall", Duration::from_secs(9)),
        ],
        Duration::from_secs(4),
    )
    .await;
}

/// The subscription connection alone stalled for 2.5 op timeouts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s10_waits_stay_bounded_when_the_subscription_connection_stalls() {
    one_connection_faulted(
        ConnKind::Subscription,
        &[(ProxyMode::Stall, "stall", Duration::from_millis(2500))],
        Duration::from_secs(3),
    )
    .await;
}

/// The lock (script) connection alone stalled for 2.5 op timeouts; the subscription
/// connection keeps working.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s10_calls_stay_bounded_when_the_lock_connection_stalls() {
    one_connection_faulted(
        ConnKind::Command,
        &[(ProxyMode::Stall, "stall", Duration::from_millis(2500))],
        Duration::from_secs(3),
    )
    .await;
}

/// The case scenario 10 was written for, in one process and step by step: a waiter behind
/// the proxy (op timeout 1 s) on a lock another locker holds; its connections (`kind`, or
/// all) cut for 300 ms, then stalled for 9 s, then healed; 3 s later an acquire with a wait
/// of 500 ms. Every acquire made through all this, and that one, must return within
/// `wait + 3 × op_timeout` (plus 1 s of slack); each is under a timeout, so a hang is a
/// failure, not a hung test. Then the lock is released, and the waiter must get it.
async fn a_waiter_after_a_cut_and_a_stall(kind: Option<ConnKind>) {
    let locks = RedisServer::start().await;
    let proxy = TcpProxy::start(locks.addr()).await;
    let holder = leasehold::Locker::builder()
        .url(locks.url())
        .build()
        .await
        .unwrap();
    let op_timeout = Duration::from_secs(1);
    let waiter = leasehold::Locker::builder()
        .url(proxy.url())
        .op_timeout(op_timeout)
        .connect_timeout(op_timeout)
        .build()
        .await
        .unwrap();
    let held = holder
        .lock("stalled")
        .lease(Duration::from_secs(2))
        .acquire()
        .await
        .unwrap();
    let wait = Duration::from_millis(500);
    let limit = wait + op_timeout * 3 + Duration::from_secs(1);
    // One bounded acquire: what went wrong, if anything.
    let attempt = move |waiter: leasehold::Locker, wait: Duration| async move {
        let started = Instant::now();
        match tokio::time::timeout(limit, waiter.lock("stalled").wait(wait).acquire()).await {
            Err(_) => Some(format!(
                "an acquire with wait {wait:?} did not return within {limit:?}"
            )),
            Ok(Ok(_)) => Some("an acquire got a lock that another locker holds".to_owned()),
            Ok(Err(e)) if started.elapsed() > limit => Some(format!(
                "an acquire took {:?} to fail ({e})",
                started.elapsed()
            )),
            Ok(Err(_)) => None,
        }
    };
    // Waiters all along, so that the faults hit waits in progress.
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let waiting = {
        let (waiter, stop) = (waiter.clone(), stop.clone());
        tokio::spawn(async move {
            let mut wrong = Vec::new();
            while !stop.load(std::sync::atomic::Ordering::Acquire) {
                wrong.extend(attempt(waiter.clone(), wait).await);
            }
            wrong
        })
    };
    // The first wait has subscribed: the subscription connection is open.
    let until = Instant::now() + Duration::from_secs(5);
    while locks.subscribers("leasehold:wake:{stalled}").await == 0 && Instant::now() < until {
        sleep(Duration::from_millis(20)).await;
    }
    let set = |mode| match kind {
        Some(kind) => proxy.set_mode_for(kind, mode),
        None => proxy.set_mode(mode),
    };
    set(ProxyMode::Cut);
    sleep(Duration::from_millis(300)).await;
    set(ProxyMode::Stall);
    sleep(Duration::from_secs(9)).await;
    set(ProxyMode::Pass);
    sleep(Duration::from_secs(3)).await;
    stop.store(true, std::sync::atomic::Ordering::Release);
    let mut wrong = tokio::time::timeout(limit * 2, waiting)
        .await
        .expect("the waiting task is bounded")
        .unwrap();
    wrong.extend(attempt(waiter.clone(), wait).await);

    // Healed: a release wakes the waiter, which gets the lock within its wait.
    let wait = Duration::from_secs(3);
    let taking = {
        let waiter = waiter.clone();
        tokio::spawn(async move {
            tokio::time::timeout(
                wait + op_timeout * 3,
                waiter.lock("stalled").wait(wait).acquire(),
            )
            .await
        })
    };
    sleep(Duration::from_millis(200)).await;
    held.release().await.unwrap();
    match taking.await.unwrap() {
        Ok(Ok(guard)) => drop(guard),
        Ok(Err(e)) => wrong.push(format!(
            "after healing, the released lock was not taken: {e}"
        )),
        Err(_) => wrong.push(format!(
            "after healing, an acquire with wait {wait:?} did not return"
        )),
    }
    assert!(
        wrong.is_empty(),
        "a waiter behind a proxy whose {} cut for 300 ms, then stalled for 9 s: {}",
        match kind {
            Some(ConnKind::Subscription) => "subscription connection was",
            Some(_) => "lock connection was",
            None => "connections were",
        },
        wrong.join("; ")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s10_a_waiter_returns_after_its_connections_were_cut_and_stalled() {
    a_waiter_after_a_cut_and_a_stall(None).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s10_a_waiter_returns_after_its_subscription_connection_was_cut_and_stalled() {
    a_waiter_after_a_cut_and_a_stall(Some(ConnKind::Subscription)).await;
}
