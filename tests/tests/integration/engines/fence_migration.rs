//! Moving a deployment's locks to another engine with fences that keep increasing (issue 31):
//! every engine has its own fence scale (Redis and PostgreSQL follow the server clock in µs,
//! ZooKeeper and etcd count transactions), so storage that saw the old engine's fences would
//! refuse every write of the new one's holders, for good. The old deployment's
//! `fence_ceiling` given as the new one's `fence_offset` mends that: for locks, readers,
//! permits and leader terms, through `check_fence` in PostgreSQL and `write_if_newer` in
//! Redis, as applications meet them.

use std::time::Duration;

use leasehold::fenced::{write_if_newer, FencedWrite};
use leasehold::{LockConfig, Locker};
use leasehold_tests::harness::{EtcdServer, PgServer, RedisServer};

async fn redis_locker(redis: &RedisServer) -> Locker {
    Locker::connect(&redis.url()).await.unwrap()
}

async fn etcd_locker(etcd: &EtcdServer, offset: u64) -> Locker {
    Locker::builder()
        .etcd([etcd.endpoint()])
        .connect_timeout(Duration::from_secs(5))
        .fence_offset(offset)
        .build()
        .await
        .unwrap()
}

/// A record in Redis that takes a write only with a fence at least its newest: the shop's
/// stock, written under the lock of `stock:1`.
async fn write(records: &RedisServer, fence: u64) -> FencedWrite {
    let mut conn = records.conn().await;
    write_if_newer(&mut conn, "stock:1", &[("left", "5")], fence)
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn from_redis_to_etcd_fences_and_terms_keep_increasing_with_the_old_ceiling_as_offset() {
    let (redis, etcd, records) = (
        RedisServer::start().await,
        EtcdServer::start().await,
        RedisServer::start().await,
    );
    // The old deployment: a holder writes, a leader leads.
    let old = redis_locker(&redis).await;
    let guard = old.lock("stock:1").acquire().await.unwrap();
    let old_fence = guard.fence();
    assert!(write(&records, old_fence).await.is_accepted());
    guard.release().await.unwrap();
    let leadership = old.leader("scheduler").campaign().await.unwrap();
    let old_term = leadership.term();
    leadership.resign().await.unwrap();

    // Moved without an offset: the new holders are refused, however many acquires follow.
    let bare = etcd_locker(&etcd, 0).await;
    for _ in 0..3 {
        let guard = bare.lock("stock:1").acquire().await.unwrap();
        assert!(
            guard.fence() < old_fence,
            "{} vs {old_fence}",
            guard.fence()
        );
        assert!(matches!(
            write(&records, guard.fence()).await,
            FencedWrite::Refused { .. }
        ));
        guard.release().await.unwrap();
    }

    // Moved with the old deployment's ceiling as the offset: every fence and term is above.
    let ceiling = old.fence_ceiling().await.unwrap();
    assert!(ceiling > old_fence && ceiling > old_term);
    let new = etcd_locker(&etcd, ceiling).await;
    let guard = new.lock("stock:1").acquire().await.unwrap();
    assert!(guard.fence() > old_fence);
    assert!(write(&records, guard.fence()).await.is_accepted());
    // The fences stay the deployment's everywhere they show: inspection too.
    let inspected = new.inspect("stock:1").await.unwrap();
    let last = inspected.last_fence.expect("a holder");
    assert!(
        last >= guard.fence() && last < guard.fence() + 32,
        "{last} vs {}",
        guard.fence()
    );
    let next = {
        let waiting = new.clone();
        let handle = tokio::spawn(async move {
            let g = waiting.lock("stock:1").acquire().await.unwrap();
            let fence = g.fence();
            g.release().await.unwrap();
            fence
        });
        tokio::time::sleep(Duration::from_millis(50)).await;
        guard.release().await.unwrap();
        handle.await.unwrap()
    };
    assert!(write(&records, next).await.is_accepted());

    // Readers and permits get the offset as well.
    let reader = new.read_lock("doc").acquire().await.unwrap();
    assert!(reader.fence() > ceiling);
    reader.release().await.unwrap();
    let permit = new.semaphore("partner", 2).acquire().await.unwrap();
    assert!(permit.fence() > ceiling);
    permit.release().await.unwrap();

    // Leader terms: the leader's and what observers see agree, above the old terms; the
    // engine still recognises its own record (its fences go back without the offset).
    let mut observer = new.observe_leader("scheduler").unwrap();
    // Bounded: a record the engine does not take for its own would leave the campaign
    // waiting for ever.
    let leadership = tokio::time::timeout(
        Duration::from_secs(10),
        new.leader("scheduler").identity("pod-1").campaign(),
    )
    .await
    .expect("elected within 10 s")
    .unwrap();
    assert!(leadership.term() > old_term);
    let seen = loop {
        if let Some(leader) = observer.next().await.unwrap() {
            break leader;
        }
    };
    assert_eq!((seen.identity(), seen.term()), ("pod-1", leadership.term()));
    leadership.resign().await.unwrap();
    let gone = tokio::time::timeout(Duration::from_secs(5), observer.next())
        .await
        .expect("the resignation is seen")
        .unwrap();
    assert!(gone.is_none(), "{gone:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_an_offset_postgres_fenced_transactions_check_the_engines_own_fence() {
    let pg = PgServer::start().await;
    let etcd = EtcdServer::start().await;
    // The old deployment on etcd, itself moved once already (an offset of its own).
    let old = etcd_locker(&etcd, 5_000_000).await;
    let old_fence = {
        let g = old.lock("stock:1").acquire().await.unwrap();
        let fence = g.fence();
        g.release().await.unwrap();
        fence
    };
    let ceiling = old.fence_ceiling().await.unwrap();
    assert!(ceiling > old_fence);
    let config = LockConfig::from_toml_str(&format!(
        "postgres = \"{}\"\nfence_offset = {ceiling}\n",
        pg.url()
    ))
    .unwrap();
    let new = Locker::from_config(&config).await.unwrap();
    let guard = new.lock("stock:1").acquire().await.unwrap();
    assert!(guard.fence() > ceiling);
    let mut client = pg.connect().await.unwrap();
    let tx = client.transaction().await.unwrap();
    leasehold::postgres::check_fence(&tx, &guard)
        .await
        .expect("the check compares the engine's own fence");
    tx.commit().await.unwrap();
    // A stale holder is still refused: the offset changes the scale, not the rule.
    let stale = new
        .lock("stock:2")
        .lease(Duration::from_millis(200))
        .watchdog(false)
        .acquire()
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(400)).await;
    let taker = new.lock("stock:2").acquire().await.unwrap();
    let tx = client.transaction().await.unwrap();
    assert!(leasehold::postgres::check_fence(&tx, &stale)
        .await
        .unwrap_err()
        .is_lost());
    leasehold::postgres::check_fence(&tx, &taker).await.unwrap();
    drop(tx);
    taker.release().await.unwrap();
    guard.release().await.unwrap();
}

/// An engine the locks of [`locks_move_between_engines_any_number_of_times`] move to.
#[derive(Clone, Copy, Debug)]
enum Target {
    Redis,
    Postgres,
    Etcd,
}

/// The servers those engines run on: the same ones each time the locks come back.
struct Servers {
    redis: RedisServer,
    pg: PgServer,
    etcd: EtcdServer,
}

impl Servers {
    async fn locker(&self, target: Target, offset: u64) -> Result<Locker, leasehold::LockError> {
        let builder = Locker::builder()
            .connect_timeout(Duration::from_secs(5))
            .fence_offset(offset);
        match target {
            Target::Redis => builder.url(self.redis.url()),
            Target::Postgres => builder.postgres(self.pg.url()),
            Target::Etcd => builder.etcd([self.etcd.endpoint()]),
        }
        .build()
        .await
    }
}

/// The offset that puts `target`'s fences above `ceiling`, the deployment's before the move
/// (`leasehold fences --above CEILING` against the new deployment): read by a locker of the
/// new deployment, whose own offset does not count.
async fn offset_above(servers: &Servers, target: Target, ceiling: u64) -> u64 {
    let probe = servers.locker(target, 0).await.unwrap();
    probe.fence_offset_above(ceiling).await.unwrap()
}

/// The move between engines works any number of times (issue 46). The locks go from Redis to
/// PostgreSQL, etcd and back, eleven moves; each new deployment's offset puts its fences above
/// the old deployment's ceiling, as the guide's move says (docs/guide/engines.md): every
/// holder's write to a record that refuses older fences is accepted, fences increase across
/// every move, and the offset stays within a clock's worth of fences. With the ceiling itself
/// as the offset (the move as it was), offsets grew by a server clock's worth (about
/// 1.8 × 10¹⁵) on every move from Redis or PostgreSQL, and the third move needed one above
/// 2⁵², which no locker takes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn locks_move_between_engines_any_number_of_times() {
    let servers = Servers {
        redis: RedisServer::start().await,
        pg: PgServer::start().await,
        etcd: EtcdServer::start().await,
    };
    let records = RedisServer::start().await;
    let mut deployment = servers.locker(Target::Redis, 0).await.unwrap();
    let mut last = {
        let guard = deployment.lock("stock:1").acquire().await.unwrap();
        assert!(write(&records, guard.fence()).await.is_accepted());
        let fence = guard.fence();
        guard.release().await.unwrap();
        fence
    };
    let route = [
        Target::Postgres,
        Target::Redis,
        Target::Postgres,
        Target::Etcd,
        Target::Redis,
        Target::Etcd,
        Target::Postgres,
        Target::Etcd,
        Target::Redis,
        Target::Postgres,
        Target::Redis,
    ];
    let mut offsets = Vec::new();
    for (moved, target) in route.into_iter().enumerate() {
        let ceiling = deployment.fence_ceiling().await.unwrap();
        assert!(ceiling > last);
        let offset = offset_above(&servers, target, ceiling).await;
        offsets.push(offset);
        deployment = servers.locker(target, offset).await.unwrap_or_else(|e| {
            panic!(
                "move {} (to {target:?}), offsets {offsets:?}: {e}",
                moved + 1
            )
        });
        for _ in 0..2 {
            let guard = deployment.lock("stock:1").acquire().await.unwrap();
            assert!(
                guard.fence() > ceiling && guard.fence() > last,
                "move {} (to {target:?}): fence {} after {last} (ceiling {ceiling})",
                moved + 1,
                guard.fence()
            );
            assert!(
                write(&records, guard.fence()).await.is_accepted(),
                "move {} (to {target:?}): the record refused fence {}",
                moved + 1,
                guard.fence()
            );
            last = guard.fence();
            guard.release().await.unwrap();
        }
    }
    // Every offset stays within a clock's worth of fences (plus etcd's counts and the margins),
    // however many moves came before.
    let clock_now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_micros() as u64;
    assert!(
        offsets.iter().all(|&o| o < clock_now + 100_000_000),
        "{offsets:?}"
    );
    assert!(last < clock_now * 2, "{last}");
}

#[tokio::test]
async fn offsets_are_bounded_and_read_from_config_and_environment() {
    let err = Locker::builder()
        .fence_offset(leasehold::MAX_FENCE_OFFSET + 1)
        .build_in_memory()
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("fence_offset") && err.contains("2^52"),
        "{err}"
    );
    let err = LockConfig::from_toml_str("fence_offset = 9007199254740993\n")
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("fence_offset") && err.contains("line 1"),
        "{err}"
    );
    let config = LockConfig::default()
        .with_vars([(
            "LEASEHOLD_FENCE_OFFSET".to_owned(),
            "1790000000000000".to_owned(),
        )])
        .unwrap();
    assert_eq!(config.fence_offset, Some(1_790_000_000_000_000));
    let err = LockConfig::default()
        .with_vars([("LEASEHOLD_FENCE_OFFSET".to_owned(), "-1".to_owned())])
        .unwrap_err()
        .to_string();
    assert!(err.contains("LEASEHOLD_FENCE_OFFSET"), "{err}");
}
