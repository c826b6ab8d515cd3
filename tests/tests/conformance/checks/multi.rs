//! Property 11, multi-key locks: transfers between wallets, each naming its two wallets in either
//! order (sometimes the same wallet twice), by tasks of three lockers (three clients, as three
//! processes would be). Money is conserved, no wallet is ever in two transfers at once, and
//! nothing hangs.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use leasehold_tests::conformance::Engine;
use tokio::time::{sleep, Instant};

/// Wallet keys, hostile ones among them (braces, NUL, a newline): they must lock and exclude
/// like any other.
const WALLETS: [&str; 6] = ["w:1", "w:2", "w:{3}", "w:4\0", "w:5\n", "w:6"];
const START: i64 = 100;

/// A small deterministic generator per task.
struct Lcg(u64);

impl Lcg {
    fn next(&mut self, n: usize) -> usize {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((self.0 >> 33) % n as u64) as usize
    }
}

pub async fn transfers_conserve_money(engine: &Engine) {
    let balances = Arc::new(Mutex::new([START; WALLETS.len()]));
    let busy: Arc<[AtomicBool; WALLETS.len()]> = Arc::new(Default::default());
    let done = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for l in 0..3 {
        let locker = engine.locker().await;
        for t in 0..4 {
            let (locker, balances, busy, done) =
                (locker.clone(), balances.clone(), busy.clone(), done.clone());
            tasks.push(tokio::spawn(async move {
                let mut rng = Lcg(l * 31 + t + 1);
                let until = Instant::now() + Duration::from_secs(2);
                let mut mine = 0;
                while Instant::now() < until {
                    let (a, b) = (rng.next(WALLETS.len()), rng.next(WALLETS.len()));
                    let guard = locker
                        .lock_all([WALLETS[a], WALLETS[b]])
                        .lease(Duration::from_secs(5))
                        .wait(Duration::from_secs(10))
                        .acquire()
                        .await
                        .unwrap_or_else(|e| panic!("transfer {a}->{b}: {e}"));
                    assert_eq!(guard.guards().len(), if a == b { 1 } else { 2 });
                    let mut wallets = vec![a, b];
                    wallets.dedup();
                    for &w in &wallets {
                        assert!(
                            !busy[w].swap(true, Ordering::SeqCst),
                            "wallet {:?} is in two transfers at once",
                            WALLETS[w]
                        );
                    }
                    // Read, pay (an await), write: lost updates without the locks.
                    let (from, to) = {
                        let all = balances.lock().unwrap();
                        (all[a], all[b])
                    };
                    sleep(Duration::from_millis(1)).await;
                    if a != b {
                        let amount = 1 + from.rem_euclid(3);
                        let mut all = balances.lock().unwrap();
                        all[a] = from - amount;
                        all[b] = to + amount;
                    }
                    for &w in &wallets {
                        busy[w].store(false, Ordering::SeqCst);
                    }
                    guard.release().await.expect("release");
                    mine += 1;
                }
                assert!(mine > 0, "locker {l} task {t} made no transfer");
                done.fetch_add(mine, Ordering::Relaxed);
            }));
        }
    }
    let all = async {
        for task in tasks {
            task.await.expect("a transfer task failed");
        }
    };
    tokio::time::timeout(Duration::from_secs(60), all)
        .await
        .expect("transfers hung: a deadlock or a lost wake-up");
    let total: i64 = balances.lock().unwrap().iter().sum();
    assert_eq!(
        total,
        START * WALLETS.len() as i64,
        "money was created or lost"
    );
    assert!(done.load(Ordering::Relaxed) >= 12);
}
