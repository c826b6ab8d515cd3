//! Property 11b, multi-key locks with read keys: "read the venue, write these seats" as one
//! all-or-nothing acquisition. Readers of a key share across lockers (three clients, as three
//! processes would be) and hold its writers out; a busy key gives back what was taken;
//! bookings and venue changes of three lockers, each naming its keys in its own order, never
//! put a seat in two bookings, never let a venue change overlap a booking that reads it, and
//! never hang.

use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use leasehold_tests::conformance::Engine;
use tokio::time::{sleep, Instant};

const SEATS: [&str; 4] = ["seat:1", "seat:2", "seat:{3}", "seat:4"];
const VENUES: [&str; 2] = ["venue:a", "venue:b"];

pub async fn reads_and_writes_together(engine: &Engine) {
    let lockers = [
        engine.locker().await,
        engine.locker().await,
        engine.locker().await,
    ];
    // Two lockers read the venue together, each writing its own seat.
    let first = lockers[0]
        .lock_all([SEATS[1], SEATS[0]])
        .read_keys([VENUES[0]])
        .acquire()
        .await
        .unwrap();
    let names: Vec<&str> = first.keys().collect();
    assert_eq!(names, [SEATS[0], SEATS[1], VENUES[0]]);
    for (key, fence) in first.fences() {
        assert_eq!(first.fence(key), Some(fence));
    }
    let second = lockers[1]
        .lock_all([SEATS[2]])
        .read_keys([VENUES[0]])
        .try_acquire()
        .await
        .unwrap()
        .expect("readers of the venue in two lockers share it");
    assert!(
        lockers[2]
            .write_lock(VENUES[0])
            .try_acquire()
            .await
            .unwrap()
            .is_none(),
        "a writer of the venue while bookings read it"
    );
    assert!(
        lockers[2]
            .read_lock(SEATS[0])
            .try_acquire()
            .await
            .unwrap()
            .is_none(),
        "a reader of a seat being written"
    );
    // A seat taken elsewhere: nothing stays taken, the venue's share included.
    assert!(lockers[2]
        .lock_all([SEATS[0], SEATS[3]])
        .read_keys([VENUES[1]])
        .try_acquire()
        .await
        .unwrap()
        .is_none());
    let venue_b = lockers[2]
        .write_lock(VENUES[1])
        .try_acquire()
        .await
        .unwrap()
        .expect("the share of venue:b taken before the busy seat was given back");
    venue_b.release().await.unwrap();
    let seat_4 = lockers[2].lock(SEATS[3]).try_acquire().await.unwrap();
    assert!(seat_4.is_some(), "seat:4 was given back");
    drop(seat_4);
    first.release().await.unwrap();
    second.release().await.unwrap();

    // The load: bookings (two seats written, a venue read) and venue changes (a venue
    // written, a seat read), by four tasks of each locker.
    let seats: Arc<[AtomicI64; SEATS.len()]> = Arc::new(Default::default());
    let venues: Arc<[AtomicI64; VENUES.len()]> = Arc::new(Default::default());
    let done = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for (l, locker) in lockers.iter().enumerate() {
        for t in 0..4usize {
            let (locker, seats, venues, done) =
                (locker.clone(), seats.clone(), venues.clone(), done.clone());
            tasks.push(tokio::spawn(async move {
                let until = Instant::now() + Duration::from_secs(2);
                let mut round = l * 7 + t;
                let mut mine = 0;
                while Instant::now() < until {
                    round += 1;
                    let (a, b) = (round % SEATS.len(), (round * 3 + 1) % SEATS.len());
                    let v = round / 2 % VENUES.len();
                    let change = round % 5 == 0;
                    let (writes, reads) = if change {
                        (vec![VENUES[v]], vec![SEATS[a]])
                    } else {
                        (vec![SEATS[b], SEATS[a]], vec![VENUES[v]])
                    };
                    let guard = locker
                        .lock_all(writes)
                        .read_keys(reads)
                        .lease(Duration::from_secs(5))
                        .wait(Duration::from_secs(20))
                        .acquire()
                        .await
                        .unwrap_or_else(|e| panic!("locker {l} task {t} round {round}: {e}"));
                    // -1: written; n > 0: read by n.
                    let (written, read): (Vec<&AtomicI64>, Vec<&AtomicI64>) = if change {
                        (vec![&venues[v]], vec![&seats[a]])
                    } else {
                        let mut w = vec![&seats[a]];
                        if a != b {
                            w.push(&seats[b]);
                        }
                        (w, vec![&venues[v]])
                    };
                    for w in &written {
                        assert_eq!(w.swap(-1, Ordering::SeqCst), 0, "a writer overlaps");
                    }
                    for r in &read {
                        assert!(r.fetch_add(1, Ordering::SeqCst) >= 0, "read while written");
                    }
                    sleep(Duration::from_millis(1)).await;
                    for w in &written {
                        w.store(0, Ordering::SeqCst);
                    }
                    for r in &read {
                        r.fetch_sub(1, Ordering::SeqCst);
                    }
                    guard.release().await.expect("release");
                    mine += 1;
                }
                done.fetch_add(mine, Ordering::Relaxed);
            }));
        }
    }
    let all = async {
        for task in tasks {
            task.await.expect("a booking task failed");
        }
    };
    tokio::time::timeout(Duration::from_secs(90), all)
        .await
        .expect("bookings hung: a deadlock or a lost wake-up");
    assert!(done.load(Ordering::Relaxed) >= 12);
}
