//! The `fair` cells: requests of one process served in the order they came, through the
//! store, or by handovers without it.

use super::*;

/// Fair requests queued in one process are served in the order they came, each through the
/// store (a fair release never hands over in the process); without `fair`, the same queue is
/// served by handovers (the control, for the lock). Leaders are always fair.
pub(crate) async fn fair(prim: Prim) {
    let fair = Opts {
        fair: true,
        ..Opts::default()
    };
    match prim {
        Prim::lock | Prim::write | Prim::lock_all => {
            for &via in vias(prim) {
                served_in_order(prim, via, &fair, true).await;
            }
            if prim == Prim::lock {
                served_in_order(prim, Via::Api, &Opts::default(), false).await;
            }
        }
        Prim::downgrade => {
            for &via in vias(prim) {
                served_in_order(prim, via, &fair, true).await;
            }
            // A fair read inside the write: refused, as every fair read.
            let w = world();
            let write = take_one(&w.a, Prim::write, &Opts::default(), Via::Api)
                .await
                .unwrap();
            let a = w.a.clone();
            let read = write
                .scope(async move { take_one(&a, Prim::read, &fair, Via::Api).await })
                .await;
            assert_config(read, "fair read locks are not offered", "a fair downgrade");
        }
        Prim::leader => {
            served_in_order(prim, Via::Api, &Opts::default(), true).await;
            let loose = Opts {
                profile: Some("loose"),
                ..Opts::default()
            };
            served_in_order(prim, Via::Api, &loose, true).await;
        }
        Prim::read | Prim::permits => unreachable!("not a Means cell"),
    }
}

/// Three requests of one process, queued behind a holder of the same process in this order,
/// get what `prim` takes in that order once it is released; `fair`: each through the store,
/// else by handovers.
pub(super) async fn served_in_order(prim: Prim, via: Via, o: &Opts, fair: bool) {
    let case = format!("{prim:?} via {via:?} with {o:?}");
    let w = world();
    let first = take(&w.a, prim, o, via).await.unwrap();
    let order = Arc::new(Mutex::new(Vec::new()));
    let mut waiters = Vec::new();
    for i in 0..3 {
        let (locker, o, order) = (w.a.clone(), o.clone().waiting(LONG), order.clone());
        // A downgrade's waiters are writers.
        let waits_for = if prim == Prim::downgrade {
            Prim::write
        } else {
            prim
        };
        waiters.push(tokio::spawn(async move {
            let taken = take(&locker, waits_for, &o, via).await.unwrap();
            order.lock().unwrap().push(i);
            tokio::time::sleep(Duration::from_millis(10)).await;
            taken.release().await.unwrap();
        }));
        settle().await;
    }
    let before = w.store.acquires();
    first.release().await.unwrap();
    for waiter in waiters {
        waiter.await.unwrap();
    }
    assert_eq!(*order.lock().unwrap(), [0, 1, 2], "{case}: out of order");
    let per_holder = if prim == Prim::lock_all { 2 } else { 1 };
    let through_the_store = w.store.acquires() - before;
    match fair {
        true => assert_eq!(
            through_the_store,
            3 * per_holder,
            "{case}: a fair release handed over in the process"
        ),
        // The holder reserved one fence (nobody waited yet): the first waiter takes its own
        // lease, with fences for the two behind it, and hands it over to them.
        false => assert_eq!(through_the_store, 1, "{case}: no handover"),
    }
}
