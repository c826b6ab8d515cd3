//! The demo shop's purchase (`src/store/redis.rs`: read the quantity, await the payment,
//! write the quantity less one), over an in-memory stock record that keeps the newest fence
//! that touched it, as the Redis record does. Two ways to fence it, as the shop's
//! `PurchaseFencing`:
//! - `WriteOnly` (the bug): a plain read, and a write refused only if a newer fence *wrote*
//!   first. A holder paused past its lease whose write lands between the next holder's read
//!   and its write is accepted, and so is the next holder's: two sales, the stock down by one.
//! - `Claim` (the fix): the read claims the record with the fence; a write is accepted only
//!   while the claim is still the writer's own.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use leasehold::{LockGuard, Locker};
use leasehold_testkit::{faulty_with, History, Report};
use tokio::sync::Notify;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Fencing {
    WriteOnly,
    Claim,
}

/// The stock record: the quantity, the sales, and the newest fence that claimed or wrote it.
#[derive(Default)]
struct Record {
    quantity: u64,
    sold: u64,
    fence: u64,
}

#[derive(Clone)]
struct Stock {
    record: Arc<Mutex<Record>>,
    history: History,
}

impl Stock {
    fn new(quantity: u64, history: &History) -> Self {
        let record = Record {
            quantity,
            ..Record::default()
        };
        Stock {
            record: Arc::new(Mutex::new(record)),
            history: history.clone(),
        }
    }

    /// The read: with `Claim`, refused (None) when a newer fence claimed the record first.
    fn read(&self, holder: &str, fence: u64, fencing: Fencing) -> Option<u64> {
        let mut r = self.record.lock().unwrap();
        if fencing == Fencing::Claim {
            if fence < r.fence {
                return None;
            }
            r.fence = fence;
        }
        self.history.read(holder, "stock", r.quantity);
        Some(r.quantity)
    }

    /// The write of `quantity`: whether the record accepted it.
    fn write(&self, holder: &str, fence: u64, quantity: u64, fencing: Fencing) -> bool {
        let mut r = self.record.lock().unwrap();
        let accepted = match fencing {
            Fencing::Claim => r.fence == fence,
            Fencing::WriteOnly => fence >= r.fence,
        };
        if accepted {
            r.quantity = quantity;
            r.sold += 1;
            r.fence = fence;
        }
        self.history.write(holder, "stock", fence, accepted);
        accepted
    }
}

/// One purchase under `guard`: read, pay (`payment`), write. Whether it sold.
async fn purchase(
    stock: &Stock,
    holder: &str,
    guard: &LockGuard,
    fencing: Fencing,
    payment: impl Future<Output = ()>,
) -> bool {
    let Some(quantity) = stock.read(holder, guard.fence(), fencing) else {
        return false;
    };
    payment.await;
    stock.write(holder, guard.fence(), quantity - 1, fencing)
}

/// Two shops buy the same sku: `a` is paused past its lease during its payment, `b` takes
/// the key and reads, then `a`'s write lands, then `b`'s. The stock record's sales and
/// quantity, and the checker's report.
async fn two_purchases(fencing: Fencing) -> (u64, u64, Report) {
    const LEASE: Duration = Duration::from_secs(10);
    let (shop_a, faults) = faulty_with(Locker::builder().default_lease(LEASE)).unwrap();
    let shop_b = faults.locker();
    let history = History::new();
    let stock = Stock::new(10, &history);
    let b_read = Arc::new(Notify::new());
    let a_wrote = Arc::new(Notify::new());

    let a = shop_a.lock("sku:42").acquire().await.unwrap();
    let b = tokio::spawn({
        let (stock, b_read, a_wrote) = (stock.clone(), b_read.clone(), a_wrote.clone());
        async move {
            let b = shop_b
                .lock("sku:42")
                .wait(LEASE * 2)
                .acquire()
                .await
                .unwrap();
            purchase(&stock, "b", &b, fencing, async {
                b_read.notify_one();
                a_wrote.notified().await;
            })
            .await
        }
    });
    // a's payment: a is paused past its lease, b takes the key and reads; a's write lands.
    purchase(&stock, "a", &a, fencing, async {
        faults.delay_past_lease("sku:42", b_read.notified()).await;
    })
    .await;
    a_wrote.notify_one();
    b.await.unwrap();
    let r = stock.record.lock().unwrap();
    (r.sold, r.quantity, history.check())
}

#[tokio::test(start_paused = true)]
async fn the_unfenced_read_loses_an_update_and_the_kit_reports_it() {
    let (sold, quantity, report) = two_purchases(Fencing::WriteOnly).await;
    // Two sales, the stock down by one.
    assert_eq!((sold, quantity), (2, 9));
    assert!(report.has_lost_update(), "{report}");
    assert!(report.to_string().contains("`b`"), "{report}");
}

#[tokio::test(start_paused = true)]
async fn the_claimed_read_loses_nothing() {
    let (sold, quantity, report) = two_purchases(Fencing::Claim).await;
    assert_eq!((sold, quantity), (1, 9));
    report.assert_clean();
}
