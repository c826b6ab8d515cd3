//! The optional parts of the PostgreSQL engine against real servers, beyond the conformance
//! suite: a killed permit holder's row expires on the server's clock and is swept, a reader's
//! fence stays between the writers' across a restored fence sequence, a reader's fenced
//! transaction held open blocks no renewal and keeps writers out, the periodic sweep cleans
//! the rows of readers, permit holders and idle semaphores, and worker processes taking read
//! and write locks, permits or leaderships, one of them killed, break no rule of the history
//! checker; an in-process handover waits for the holder's fenced transaction and refuses the
//! earlier holder's fence afterwards.

use std::time::Duration;

use leasehold::postgres::tokio_postgres::{self as pg, IsolationLevel, NoTls};
use leasehold::{LockError, Locker, LostReason};
use leasehold_tests::harness::{eventually, PgServer, RedisServer};
use leasehold_tests::history::{History, Run, WorkerSpec};
use tokio::time::{sleep, Instant};

/// No test here waits an operation timeout out, so the bound of every call is long: at 500 ms
/// calls without any fault failed beside the fault suites, and at the library's default (2 s)
/// on a machine whose two cores were also busy with other work.
const OP_TIMEOUT: Duration = Duration::from_secs(5);

/// The leases that the watchdog must keep renewing over several of them: long enough that a
/// renewal delayed by a loaded machine (each bounded by [`OP_TIMEOUT`]) still lands in time.
const RENEWED_LEASE: Duration = Duration::from_secs(5);

fn builder(url: &str) -> leasehold::LockerBuilder {
    Locker::builder()
        .postgres(url)
        .prefix("pgp")
        .op_timeout(OP_TIMEOUT)
        .connect_timeout(Duration::from_secs(10))
}

async fn locker(pg: &PgServer) -> Locker {
    builder(&pg.url())
        .build()
        .await
        .expect("locker on PostgreSQL")
}

/// A client of the test's own, as the user's application would have.
async fn client(url: &str) -> pg::Client {
    let (client, connection) = pg::connect(url, NoTls).await.expect("connect");
    tokio::spawn(connection);
    client
}

async fn count(client: &pg::Client, sql: &str) -> i64 {
    client.query_one(sql, &[]).await.expect(sql).get(0)
}

/// A worker process holding the one permit of a semaphore is killed with SIGKILL: nothing
/// releases or renews its permit. Its row stops counting when its lease ends on the server's
/// clock (another process gets the permit within the lease, not sooner), and the sweep of a
/// locker deletes the row afterwards.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_permit_holders_row_expires_and_is_swept() {
    let pg = PgServer::start().await;
    let resource = RedisServer::start().await;
    let db = client(&pg.url()).await;
    let lease = Duration::from_secs(1);
    let spec = WorkerSpec::new("redis://unused", &resource.url())
        .postgres(&pg.url())
        .keys(&["killed"])
        .semaphore(1)
        .lease(lease)
        .op_timeout(OP_TIMEOUT)
        .hold(Duration::from_secs(20), 1)
        .duration(Duration::from_secs(30));
    // Made first: the schema is there before the worker's permit is looked for.
    let here = Locker::builder()
        .postgres(pg.url())
        .op_timeout(OP_TIMEOUT)
        .build()
        .await
        .unwrap();
    let mut run = Run::new("postgres-killed-permit");
    run.spawn(&spec);
    let live = "SELECT count(*) FROM leasehold_permits \
                WHERE key = 'leasehold:sem:{killed}' AND expires > clock_timestamp()";
    eventually(
        "the worker holds the permit",
        Duration::from_secs(20),
        || async { count(&db, live).await == 1 },
    )
    .await;
    // Past its first renewals: the row is the watchdog's, not the acquire's.
    sleep(lease).await;
    assert!(run.is_running(0), "the worker stopped by itself");
    run.kill9(0);
    let killed = Instant::now();

    let permit = here
        .semaphore("killed", 1)
        .wait(Duration::from_secs(10))
        .acquire()
        .await
        .expect("the killed holder's permit comes back");
    let waited = killed.elapsed();
    assert!(
        waited >= Duration::from_millis(100),
        "the permit was free {waited:?} after the kill: the worker did not hold it"
    );
    assert!(
        waited <= lease + Duration::from_millis(1500),
        "the permit came back {waited:?} after the kill (lease {lease:?})"
    );
    let dead = "SELECT count(*) FROM leasehold_permits \
                WHERE key = 'leasehold:sem:{killed}' AND expires <= clock_timestamp()";
    assert_eq!(
        count(&db, dead).await,
        1,
        "the dead holder's row is still there"
    );
    // A locker sweeps when it starts: rows that ended more than a second ago go.
    sleep(Duration::from_millis(1100)).await;
    let _sweeper = builder(&pg.url()).build().await.unwrap();
    eventually(
        "the dead holder's row is swept",
        Duration::from_secs(10),
        || async { count(&db, dead).await == 0 },
    )
    .await;
    assert_eq!(count(&db, live).await, 1, "the live holder's row stays");
    permit.release().await.unwrap();
    assert_eq!(count(&db, live).await, 0);
}

/// The cluster is restored from a file-level copy made before later writers of a lock (as
/// after restoring a backup, or promoting an asynchronous standby that had not received
/// them): the fence sequence goes back (all the way back, here, after the connections
/// opened). A reader after the restore still gets a fence at or above the last writer's, and
/// the next writer one above the reader's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reader_after_a_restored_sequence_is_between_the_writers() {
    let pg = PgServer::start().await;
    {
        let locker = locker(&pg).await;
        let r = locker.read_lock("f").acquire().await.unwrap();
        r.release().await.unwrap();
    }
    pg.stop_fast();
    let saved = pg.save_data("backup");
    pg.start_again();
    pg.wait_until_ready().await;
    let mut last = 0;
    {
        let locker = locker(&pg).await;
        // More than the 32 values a sequence logs ahead of its last one, readers among them.
        for i in 0..40 {
            let guard = if i % 4 == 3 {
                locker.read_lock("f").acquire().await.unwrap()
            } else {
                locker.write_lock("f").acquire().await.unwrap()
            };
            assert!(guard.fence() >= last, "{} after {last}", guard.fence());
            last = guard.fence();
            guard.release().await.unwrap();
        }
    }
    pg.stop_fast();
    pg.restore_data(&saved);
    pg.start_again();
    pg.wait_until_ready().await;
    let locker = locker(&pg).await;
    // The locker's new connections drew fences when they opened (their warm-up), which lifted
    // the sequence to the clock again; the rule must not count on that: back to its start.
    let db = client(&pg.url()).await;
    db.execute("SELECT setval('leasehold_fences', 1)", &[])
        .await
        .unwrap();
    let reader = locker.read_lock("f").acquire().await.unwrap();
    assert!(
        reader.fence() >= last,
        "reader fence {} after the restore, {last} before it",
        reader.fence()
    );
    let read_fence = reader.fence();
    reader.release().await.unwrap();
    let writer = locker.write_lock("f").acquire().await.unwrap();
    assert!(
        writer.fence() > read_fence,
        "writer fence {} after reader fence {read_fence}",
        writer.fence()
    );
    writer.release().await.unwrap();
}

/// A reader checks its fence in its own `REPEATABLE READ` transaction and keeps it open for
/// several leases: the watchdog still renews the reader (its row is key-share locked by the
/// transaction, which an update of its lease does not wait for), other readers come and go,
/// and no writer gets in. Then, in a `READ COMMITTED` one, the reader leaves before the
/// transaction ends: still no writer gets in until it ends.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_readers_fenced_transaction_held_open_blocks_no_renewal_and_keeps_writers_out() {
    let pg = PgServer::start().await;
    let (a, b) = (locker(&pg).await, locker(&pg).await);
    let mut db = client(&pg.url()).await;
    // Not longer: the fence check lets the transaction idle for the lease left plus 5 s, and
    // it idles here for three leases.
    let lease = Duration::from_secs(2);
    let reader = a.read_lock("doc").lease(lease).acquire().await.unwrap();
    let tx = db
        .build_transaction()
        .isolation_level(IsolationLevel::RepeatableRead)
        .start()
        .await
        .unwrap();
    leasehold::postgres::check_fence(&tx, &reader)
        .await
        .expect("the reader's check passes");
    // Three leases (the transaction may idle for the lease left plus 5 s).
    sleep(lease * 3).await;
    assert!(
        reader.is_held(),
        "the open transaction blocked the renewals"
    );
    // Waits (the transaction stays open until after the writer's try below): a try could
    // read a renewal's row update on a loaded machine as "held" (a row wait past the lock
    // timeout), while a reader kept out by the open transaction would wait past 5 s here.
    let other = b
        .read_lock("doc")
        .wait(Duration::from_secs(5))
        .acquire()
        .await
        .expect("another reader joins");
    other.release().await.unwrap();
    // A try that waited on the open transaction's row would read as held only after the
    // server's lock timeout (half the operation timeout); one answered from the rows, at once.
    let started = Instant::now();
    let writer = b.write_lock("doc").try_acquire().await.unwrap();
    assert!(writer.is_none(), "a writer got in beside a reader");
    assert!(
        started.elapsed() < OP_TIMEOUT / 2,
        "the writer waited {:?} (the server's lock timeout is {:?})",
        started.elapsed(),
        OP_TIMEOUT / 2
    );
    tx.commit().await.unwrap();

    let tx = db.transaction().await.unwrap();
    leasehold::postgres::check_fence(&tx, &reader)
        .await
        .expect("the reader's check passes");
    reader.release().await.unwrap();
    let writer = b
        .write_lock("doc")
        .wait(Duration::from_millis(600))
        .acquire()
        .await;
    assert!(
        matches!(writer, Err(LockError::Busy { .. })),
        "a writer took the lock while a reader's fenced transaction was open: {writer:?}"
    );
    tx.commit().await.unwrap();
    let writer = b
        .write_lock("doc")
        .wait(Duration::from_secs(10))
        .acquire()
        .await
        .expect("the writer once the transaction ended");
    writer.release().await.unwrap();
}

/// A reader whose lock an operator deleted while it believed it held (as a paused reader
/// would, its lease still valid on its clock) is refused at its fence check once a writer
/// took the lock, and its guard is told; the writer's own check passes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fence_check_refuses_a_reader_that_an_operator_deposed() {
    let pg = PgServer::start().await;
    let (a, b) = (locker(&pg).await, locker(&pg).await);
    let mut db = client(&pg.url()).await;
    let reader = a
        .read_lock("deposed")
        .lease(Duration::from_secs(30))
        .watchdog(false)
        .acquire()
        .await
        .unwrap();
    assert!(
        b.force_release("deposed").await.unwrap(),
        "nothing to force"
    );
    let writer = b.write_lock("deposed").try_acquire().await.unwrap();
    let writer = writer.expect("the writer after the forced release");
    assert!(writer.fence() > reader.fence());
    {
        let tx = db.transaction().await.unwrap();
        let e = leasehold::postgres::check_fence(&tx, &reader)
            .await
            .unwrap_err();
        assert!(
            matches!(
                e,
                LockError::Lost {
                    reason: LostReason::StaleFence
                }
            ),
            "{e:?}"
        );
        assert!(!reader.is_held(), "the guard was not told");
    }
    let tx = db.transaction().await.unwrap();
    leasehold::postgres::check_fence(&tx, &writer)
        .await
        .expect("the writer's check passes");
    tx.commit().await.unwrap();
    writer.release().await.unwrap();
}

/// Polls `future` once: a task asking for a lock takes its place in its locker's queue on
/// its first poll.
async fn poll_once<F: std::future::Future + Unpin>(future: &mut F) -> std::task::Poll<F::Output> {
    std::future::poll_fn(|cx| std::task::Poll::Ready(std::pin::Pin::new(&mut *future).poll(cx)))
        .await
}

/// A task that wants a lock, as it runs in its own task once it waits.
type Task<T> = std::pin::Pin<Box<dyn std::future::Future<Output = T> + Send>>;

/// The lock `key` held through `a`, by a lease that has a fence reserved for `next`, a task of
/// `a` queued behind the holder (so that a release hands the lease over in `a`), and `next`
/// running. Another locker holds the lock while the holder queues in the database and `next`
/// queues behind it in `a`; the attempt that takes the lock once that locker leaves reserves a
/// fence for `next`.
async fn hold_with_a_task_queued_behind<T: Send + 'static>(
    pg: &PgServer,
    a: &Locker,
    key: &'static str,
    mut next: Task<T>,
) -> (leasehold::LockGuard, tokio::task::JoinHandle<T>) {
    let gate_keeper = locker(pg).await;
    let gate = gate_keeper.lock(key).acquire().await.unwrap();
    let mut holder = Box::pin({
        let a = a.clone();
        async move { a.lock(key).lease(LONG).wait(LONG).acquire().await }
    });
    assert!(poll_once(&mut holder).await.is_pending());
    assert!(poll_once(&mut next).await.is_pending());
    let holder = tokio::spawn(holder);
    eventually("the holder waits in the database", LONG, || async {
        gate_keeper.inspect(key).await.unwrap().waiting_processes > 0
    })
    .await;
    gate.release().await.unwrap();
    let holder = holder.await.unwrap().expect("the holder gets the lock");
    (holder, tokio::spawn(next))
}

/// Long enough for anything here to happen by a release, never by a lease's end.
const LONG: Duration = Duration::from_secs(10);

/// A holder that releases its guard before its fenced transaction commits lets nobody in
/// before that commit, its own process's tasks included (issue 46): `check_fence` keeps
/// other processes out with an advisory lock, and an in-process handover gave the lease to the
/// next task of the holder's locker without it. The holder reads a counter in its checked
/// transaction and releases; the next task, queued behind it in the same locker, increments
/// the counter in a checked transaction of its own. With its transaction still open, the
/// holder waits for whichever comes first: the next task's read (it got the lock, and read the
/// value the holder is about to replace), or the lock's row gone from the table (the lease
/// was not handed over: it went back to the store, where only an acquire can take it, and
/// none can while the transaction holds the advisory lock; a handed-over lease keeps the row).
/// Judged by the store and by that order alone, with no clock; then by the counter the
/// database kept (2 of 2 increments).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handover_in_the_process_waits_for_the_holders_fenced_transaction() {
    let pg = PgServer::start().await;
    let a = locker(&pg).await;
    let mut db = client(&pg.url()).await;
    db.batch_execute(
        "CREATE TABLE handover_stock (id int PRIMARY KEY, n bigint NOT NULL); \
         INSERT INTO handover_stock VALUES (1, 0)",
    )
    .await
    .unwrap();
    let (read_tx, read_rx) = tokio::sync::oneshot::channel();
    let next: Task<Result<i64, LockError>> = Box::pin({
        let (a, url) = (a.clone(), pg.url());
        async move {
            let guard = a.lock("handover").lease(LONG).wait(LONG).acquire().await?;
            let mut db = client(&url).await;
            let tx = db.transaction().await.unwrap();
            leasehold::postgres::check_fence(&tx, &guard).await?;
            let n: i64 = tx
                .query_one("SELECT n FROM handover_stock WHERE id = 1", &[])
                .await
                .unwrap()
                .get(0);
            let _ = read_tx.send(n);
            tx.execute("UPDATE handover_stock SET n = $1 WHERE id = 1", &[&(n + 1)])
                .await
                .unwrap();
            tx.commit().await.unwrap();
            guard.release().await?;
            Ok(n)
        }
    });
    let (holder, next) = hold_with_a_task_queued_behind(&pg, &a, "handover", next).await;

    let tx = db.transaction().await.unwrap();
    leasehold::postgres::check_fence(&tx, &holder)
        .await
        .expect("the holder's check");
    let n: i64 = tx
        .query_one("SELECT n FROM handover_stock WHERE id = 1", &[])
        .await
        .unwrap()
        .get(0);
    holder.release().await.expect("the holder releases");
    let observer = client(&pg.url()).await;
    let read_early = tokio::select! {
        read = read_rx => Some(read.expect("the next task reads or fails")),
        () = eventually("the lock is back in the table, held by nobody", LONG, || async {
            count(
                &observer,
                "SELECT count(*) FROM leasehold_locks WHERE key = 'pgp:lock:{handover}'",
            )
            .await
                == 0
        }) => None,
    };
    tx.execute("UPDATE handover_stock SET n = $1 WHERE id = 1", &[&(n + 1)])
        .await
        .unwrap();
    tx.commit().await.unwrap();
    let read_by_next = next
        .await
        .unwrap()
        .expect("the next task gets the lock once the transaction ended");
    let counted = count(&db, "SELECT n FROM handover_stock WHERE id = 1").await;
    assert_eq!(
        read_early, None,
        "the next task of the holder's process got the lock and read {read_by_next} while the \
         holder's fenced transaction was open; the database counted {counted} of 2 increments"
    );
    assert_eq!(counted, 2, "the increments the database kept");
}

/// After an in-process handover on PostgreSQL the lock's row gives the next holder a fence
/// of its own, so a check with the earlier holder's fence is refused (issue 46): before, the
/// row kept the lease's reserved fences, every one of which passed `leasehold_check_fence`,
/// so a late check of the earlier holder (another driver, or a statement that arrived late)
/// passed beside the next holder's. The next holder's own check passes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_handover_in_the_process_the_earlier_holders_fence_is_refused() {
    let pg = PgServer::start().await;
    let a = locker(&pg).await;
    let db = client(&pg.url()).await;
    let next: Task<_> = Box::pin({
        let a = a.clone();
        async move { a.lock("handed").lease(LONG).wait(LONG).acquire().await }
    });
    let (holder, next) = hold_with_a_task_queued_behind(&pg, &a, "handed", next).await;
    let (key, earlier) = (leasehold::postgres::store_key(&holder), holder.fence());
    holder.release().await.unwrap();
    let next = next.await.unwrap().expect("handed over");
    assert!(next.fence() > earlier);
    let check = |fence: u64| {
        let (db, key) = (&db, key.clone());
        async move {
            db.query_one(
                "SELECT leasehold_check_fence($1, $2)",
                &[&key, &i64::try_from(fence).unwrap()],
            )
            .await
            .unwrap()
            .get::<_, bool>(0)
        }
    };
    assert!(
        !check(earlier).await,
        "the earlier holder's fence {earlier} passed a check after the lock went to {}",
        next.fence()
    );
    assert!(check(next.fence()).await, "the next holder's check");
    next.release().await.unwrap();
}

/// One locker holds a lock, two readers and permits at once: its watchdog renews them
/// together (one statement per kind, side by side) over several leases, each answer reaching
/// its own lease; a lease that ran out meanwhile (a reader without the watchdog) is not
/// renewed, and takes nobody's renewal with it. (The leases are [`RENEWED_LEASE`]: with 600 ms,
/// and then 2 s, a renewal delayed by a loaded machine let a lease run out between the checks.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leases_of_every_kind_are_renewed_together() {
    let pg = PgServer::start().await;
    let (a, b) = (locker(&pg).await, locker(&pg).await);
    let lease = RENEWED_LEASE;
    let lock = a.lock("mix:lock").lease(lease).acquire().await.unwrap();
    let r1 = a.read_lock("mix:doc").lease(lease).acquire().await.unwrap();
    let r2 = a
        .read_lock("mix:other")
        .lease(lease)
        .acquire()
        .await
        .unwrap();
    let unrenewed = a
        .read_lock("mix:gone")
        .lease(lease)
        .watchdog(false)
        .acquire()
        .await
        .unwrap();
    let permits = a
        .semaphore("mix:sem", 2)
        .lease(lease)
        .acquire_many(2)
        .await
        .unwrap();
    sleep(lease * 3).await;
    for (what, held) in [
        ("lock", lock.is_held()),
        ("reader", r1.is_held()),
        ("other reader", r2.is_held()),
        ("permits", permits.is_held()),
    ] {
        assert!(held, "the {what} lapsed");
    }
    assert!(!unrenewed.is_held());
    assert!(b.lock("mix:lock").try_acquire().await.unwrap().is_none());
    assert!(b
        .write_lock("mix:doc")
        .try_acquire()
        .await
        .unwrap()
        .is_none());
    assert!(b
        .semaphore("mix:sem", 2)
        .try_acquire()
        .await
        .unwrap()
        .is_none());
    let gone = b.write_lock("mix:gone").try_acquire().await.unwrap();
    gone.expect("the unrenewed reader's lock is free")
        .release()
        .await
        .unwrap();
    lock.release().await.unwrap();
    r1.release().await.unwrap();
    r2.release().await.unwrap();
    permits.release().await.unwrap();
}

/// Rows left behind (readers and permit holders whose leases ended, a semaphore nobody used
/// for minutes) are swept by lockers, the live ones stay.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sweep_cleans_readers_permits_and_idle_semaphores() {
    let pg = PgServer::start().await;
    let first = locker(&pg).await;
    let db = client(&pg.url()).await;
    let reader = first.read_lock("live").acquire().await.unwrap();
    let permit = first.semaphore("live", 2).acquire().await.unwrap();
    db.batch_execute(
        "INSERT INTO leasehold_readers (key, owner, fence, expires) \
         SELECT 'pgp:lock:{dead' || i || '}', 'gone', 32, now() - interval '1 minute' \
         FROM generate_series(1, 300) AS i; \
         INSERT INTO leasehold_permits (key, owner, permits, fence, expires) \
         SELECT 'pgp:sem:{dead}', 'gone' || i, 1, 33, now() - interval '1 minute' \
         FROM generate_series(1, 300) AS i; \
         INSERT INTO leasehold_semaphores (key, permit_limit, fence, granted) \
         SELECT 'pgp:sem:{idle' || i || '}', 2, 33, now() - interval '5 minutes' \
         FROM generate_series(1, 300) AS i; \
         UPDATE leasehold_semaphores SET granted = now() - interval '5 minutes' \
         WHERE key = 'pgp:sem:{live}'",
    )
    .await
    .unwrap();
    // A locker sweeps when it starts, then every half minute.
    let _second = locker(&pg).await;
    eventually("old rows are swept", Duration::from_secs(10), || async {
        count(
            &db,
            "SELECT (SELECT count(*) FROM leasehold_readers WHERE owner = 'gone') \
             + (SELECT count(*) FROM leasehold_permits WHERE owner LIKE 'gone%') \
             + (SELECT count(*) FROM leasehold_semaphores WHERE key LIKE 'pgp:sem:{idle%')",
        )
        .await
            == 0
    })
    .await;
    assert_eq!(
        count(
            &db,
            "SELECT count(*) FROM leasehold_semaphores WHERE key = 'pgp:sem:{live}'"
        )
        .await,
        1,
        "a held semaphore's row stays, however long ago its last grant"
    );
    assert_eq!(
        count(&db, "SELECT count(*) FROM leasehold_readers").await,
        1,
        "the live reader stays"
    );
    reader.release().await.unwrap();
    permit.release().await.unwrap();
    assert_eq!(
        count(&db, "SELECT count(*) FROM leasehold_readers").await,
        0
    );
    assert_eq!(
        count(&db, "SELECT count(*) FROM leasehold_permits").await,
        0
    );
    assert_eq!(
        count(&db, "SELECT count(*) FROM leasehold_locks").await,
        0,
        "the last reader's release deleted the lock's row"
    );
}

/// How long a run may take to reach what its test needs, before and after the kill: far more
/// than it needs on a quiet machine (a few seconds), so that a loaded one only makes it slower.
const ENOUGH_WITHIN: Duration = Duration::from_secs(45);

/// Worker processes take `primitive` (see [`history_with_a_kill`]) on PostgreSQL; once ten
/// holds were granted, the worker of a hold acquired in the last 50 ms is killed with
/// SIGKILL, and the run goes on until twenty holds were granted in all and five by the others
/// after the killed one's lease (judged by the holds the workers logged, not by a window of
/// the clock). The checker finds no overlap of believed holdings (a writer beside anyone, more
/// holders than permits, two leaders), no fence out of order (readers' between the writers'
/// before and after them, permits' and terms' above every earlier one), and the others carry
/// on: holds are granted after the killed one's lease.
async fn history_with_a_kill(name: &str, workers: usize, primitive: fn(WorkerSpec) -> WorkerSpec) {
    let pg = PgServer::start().await;
    let resource = RedisServer::start().await;
    let lease = Duration::from_millis(600);
    let spec = primitive(
        WorkerSpec::new("redis://unused", &resource.url())
            .postgres(&pg.url())
            .lease(lease)
            .op_timeout(Duration::from_secs(2))
            .wait(Duration::from_secs(5))
            .hold(Duration::from_millis(20), 2)
            .gap(Duration::from_millis(10))
            // Longer than any run needs: the test ends the workers once enough happened.
            .duration(Duration::from_secs(120)),
    );
    // The schema first, so that the workers do not all wait for its creation.
    drop(locker(&pg).await);
    let mut run = Run::new(name);
    for _ in 0..workers {
        run.spawn(&spec);
    }
    run.wait_for(ENOUGH_WITHIN, |history| history.granted() >= 10)
        .await;
    let (victim, hold) = run.young_hold().await.expect("a hold to kill");
    let at = run.kill9(victim);
    let after_lease = at + lease.as_nanos() as u64;
    let granted_after = |history: &History| {
        (0..workers)
            .filter(|&w| w != victim)
            .flat_map(|w| history.holds_of(w))
            .filter(|h| h.ok.is_some_and(|(t, _)| t > after_lease))
            .count()
    };
    run.run_until(ENOUGH_WITHIN, |history| {
        history.granted() >= 20 && granted_after(history) >= 5
    })
    .await;
    run.wait_all(Duration::from_secs(10)).await;
    let (history, report) = run.check_and_record(name);
    assert!(report.holds >= 20, "too little happened: {report}");
    assert!(
        granted_after(&history) >= 5,
        "too little was granted after {hold}'s worker was killed: {report}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readers_and_writers_of_four_processes_one_killed_break_no_rule() {
    history_with_a_kill("postgres-rw-kill", 4, |spec| {
        spec.keys(&["doc:{7}:ключ"]).read_write(70)
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn permit_holders_of_three_processes_one_killed_break_no_rule() {
    history_with_a_kill("postgres-sem-kill", 3, |spec| {
        spec.keys(&["permits"]).semaphore(2).tasks(2)
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leaders_of_three_processes_one_killed_break_no_rule() {
    history_with_a_kill("postgres-leader-kill", 3, |spec| {
        spec.keys(&["election"]).leader()
    })
    .await;
}
