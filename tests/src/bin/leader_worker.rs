//! A separate OS process that campaigns for one leader election in a loop, for
//! `tests/tests/integration/leader.rs`: while it leads it samples `is_leader()`, writes its name
//! to a fenced record with its term (`fenced::write_if_newer`: a value no read computed), and
//! resigns after a random while; all along, an observer task logs
//! every leader it sees. Every step goes to an event log in `CLOCK_MONOTONIC` time
//! (see `leasehold_tests::history`).
//!
//! Usage: `leader_worker ID LOG LOCK_URL RESOURCE_URL DURATION_MS LEASE_MS`
//!
//! | event | fields | meaning |
//! | --- | --- | --- |
//! | `start` | id pid | the worker started |
//! | `camp` | | a campaign started |
//! | `cerr` | code | the campaign failed |
//! | `elected` | term identity | the campaign returned a leadership (time taken after) |
//! | `h` | term | `is_leader()` was true (time taken before asking) |
//! | `win` / `wok` | term / term 1-0 | a fenced write with the term invoked / accepted (1) or refused (0) |
//! | `lost` | term 1-0 | `is_leader()` turned false; 1 when `lost()` had resolved too |
//! | `resign` / `rsok` / `rserr` | term / term / term code | resign invoked / returned Ok / an error |
//! | `obs` | term identity | the observer saw this leader (`0 -`: nobody leads) |
//! | `end` | | the run is over |

use std::time::Duration;

use leasehold::fenced;
use leasehold::Locker;
use leasehold_tests::history::{monotonic_ns, resource_key, EventLog};
use tokio::time::Instant;

/// The election every worker campaigns for, and the fenced record they write.
const ELECTION: &str = "history:leader";

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let [_, id, log, lock_url, resource_url, duration_ms, lease_ms] = args.as_slice() else {
        eprintln!("usage: leader_worker ID LOG LOCK_URL RESOURCE_URL DURATION_MS LEASE_MS");
        std::process::exit(2);
    };
    let id: usize = id.parse().expect("ID is a number");
    let duration = Duration::from_millis(duration_ms.parse().expect("DURATION_MS"));
    let lease = Duration::from_millis(lease_ms.parse().expect("LEASE_MS"));
    let log = std::sync::Arc::new(EventLog::create(log.as_ref()).expect("the event log"));
    log.now("start", &[&id, &std::process::id()]);
    let locker = Locker::builder()
        .url(lock_url.as_str())
        .op_timeout(Duration::from_millis(500))
        .build()
        .await
        .expect("connect to the lock server");
    let mut resource = redis::Client::open(resource_url.as_str())
        .expect("the resource's URL")
        .get_multiplexed_async_connection()
        .await
        .expect("connect to the resource");

    let observer = {
        let (locker, log) = (locker.clone(), log.clone());
        tokio::spawn(async move {
            let mut observer = locker.observe_leader(ELECTION).expect("observe");
            loop {
                match observer.next().await {
                    Ok(Some(leader)) => {
                        log.now("obs", &[&leader.term(), &leader.identity()]);
                    }
                    Ok(None) => {
                        log.now("obs", &[&0, &"-"]);
                    }
                    Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
                }
            }
        })
    };

    let identity = format!("w{id}");
    let end = Instant::now() + duration;
    let mut rng = Rng((u64::from(std::process::id()) ^ monotonic_ns()) | 1);
    while Instant::now() < end {
        log.now("camp", &[]);
        let campaign = locker
            .leader(ELECTION)
            .identity(identity.as_str())
            .lease(lease)
            .wait(end.saturating_duration_since(Instant::now()))
            .campaign()
            .await;
        let leadership = match campaign {
            Ok(leadership) => leadership,
            Err(e) => {
                log.now("cerr", &[&e.code()]);
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let term = leadership.term();
        log.now("elected", &[&term, &leadership.identity()]);
        let hold = Duration::from_millis(300 + rng.next() % 2200);
        let until = (Instant::now() + hold).min(end);
        let writer = format!("w{id}.{term}");
        loop {
            // Whether the hold is over is judged at the time of the belief too, so a worker
            // paused between its belief and the end of the iteration wakes, writes blind and
            // finds it lost, rather than resigning from a leadership it no longer has.
            let sampled = Instant::now();
            let t = monotonic_ns();
            let held = leadership.is_leader();
            if held {
                log.at(t, "h", &[&term]);
            }
            // Blind: a leader that was paused past its lease writes once more before it
            // looks, as real code between two checks would; the resource must refuse it.
            log.now("win", &[&term]);
            // A value computed from no read: the blind fenced write is the right one here.
            let record = resource_key(ELECTION);
            let fields = [("writer", writer.as_str())];
            match fenced::write_if_newer(&mut resource, &record, &fields, term).await {
                Ok(written) => {
                    log.now("wok", &[&term, &u8::from(written.is_accepted())]);
                }
                Err(_) => {
                    log.now("werr", &[&term]);
                }
            }
            if !held {
                let told = tokio::time::timeout(Duration::ZERO, leadership.lost())
                    .await
                    .is_ok();
                log.now("lost", &[&term, &u8::from(told)]);
                break;
            }
            if sampled >= until {
                log.now("resign", &[&term]);
                match leadership.resign().await {
                    Ok(()) => log.now("rsok", &[&term]),
                    Err(e) => log.now("rserr", &[&term, &e.code()]),
                };
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    // Let the observer see the last changes, then stop.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    observer.abort();
    log.now("end", &[]);
}

/// xorshift64: enough randomness for hold times.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}
