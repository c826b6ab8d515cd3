//! What `Locker::capabilities` says is what the engine does: each feature it claims works,
//! each one it denies is refused at the request with a `Config` error.

use std::time::Duration;

use leasehold::{Capabilities, Fairness, LockError};
use leasehold_tests::conformance::{Engine, EngineKind};

/// The README's table of primitives × engines, as `Locker::capabilities()` of a live locker
/// of `kind` must read it: the column of its engine, row by row.
fn assert_readme_lists(kind: EngineKind, caps: &Capabilities) {
    let readme = include_str!("../../../../README.md");
    let header = readme
        .lines()
        .find(|l| l.starts_with("| | one Redis, Sentinel, Cluster |"))
        .expect("the README's engine table");
    let column = match kind {
        EngineKind::Single | EngineKind::Cluster | EngineKind::Sentinel => {
            "one Redis, Sentinel, Cluster"
        }
        EngineKind::RedLock3 => "RedLock",
        EngineKind::ZooKeeper => "ZooKeeper",
        EngineKind::Etcd | EngineKind::Etcd3 => "etcd",
        EngineKind::Postgres => "PostgreSQL",
        EngineKind::Mysql => "MySQL",
        EngineKind::Memory => "in memory",
        other => panic!("no README column for {other:?}"),
    };
    let at = header
        .split('|')
        .map(str::trim)
        .position(|c| c == column)
        .unwrap_or_else(|| panic!("no README column {column:?}"));
    let cell = |row: &str| -> &str {
        let line = readme
            .lines()
            .find(|l| l.starts_with(&format!("| {row}")))
            .unwrap_or_else(|| panic!("no README row {row:?}"));
        line.split('|').map(str::trim).nth(at).expect("a cell")
    };
    let yes = |row: &str| match cell(row) {
        "yes" => true,
        "refused" => false,
        other => panic!("README row {row:?}, column {column:?}: {other:?}"),
    };
    assert_eq!(
        yes("`read_lock`"),
        caps.read_locks,
        "README read locks, {column}"
    );
    assert_eq!(
        yes("semaphores"),
        caps.semaphores,
        "README semaphores, {column}"
    );
    assert_eq!(
        yes("leader election"),
        caps.leader_election,
        "README leader election, {column}"
    );
    let fair = match caps.fairness {
        Fairness::PerRequest => "per request",
        Fairness::PerProcess => "per process",
        _ => "another fairness",
    };
    assert!(
        cell("`fair(true)`").starts_with(fair),
        "README fair locks, {column}"
    );
}

/// Asserts that `outcome` is a success when `offered`, and a `Config` refusal when not.
fn agrees<T: std::fmt::Debug>(what: &str, offered: bool, outcome: &Result<T, LockError>) {
    match (offered, outcome) {
        (true, Ok(_)) | (false, Err(LockError::Config { .. })) => {}
        _ => panic!("capabilities say {what} = {offered}, but the engine answered {outcome:?}"),
    }
}

pub async fn tell_the_truth(engine: &Engine) {
    let locker = engine.locker().await;
    let caps = locker.capabilities();
    assert_readme_lists(engine.kind(), &caps);
    let wait = Duration::from_secs(5);

    let read = locker.read_lock("caps:doc").wait(wait).acquire().await;
    agrees("read_locks", caps.read_locks, &read);
    if let Ok(reader) = read {
        reader.release().await.unwrap();
    }

    let permit = locker.semaphore("caps:sem", 2).wait(wait).acquire().await;
    agrees("semaphores", caps.semaphores, &permit);
    if let Ok(permit) = permit {
        permit.release().await.unwrap();
    }

    let leader = locker.leader("caps").identity("p0").campaign().await;
    agrees("leader_election", caps.leader_election, &leader);
    if let Ok(leadership) = leader {
        leadership.resign().await.unwrap();
    }

    let info = locker.inspect("caps:doc").await;
    agrees("inspection", caps.inspection, &info);

    // Every engine has fair locks; how they queue is what differs.
    let fair = locker
        .lock("caps:fair")
        .fair(true)
        .wait(wait)
        .acquire()
        .await;
    fair.expect("a fair lock").release().await.unwrap();

    // A lease above the engine's bound is shortened to it, not refused.
    if let Some(bound) = caps.max_lease {
        assert!(bound >= Duration::from_secs(1), "{bound:?}");
        let long = locker
            .lock("caps:long")
            .lease(bound * 3)
            .wait(wait)
            .acquire()
            .await;
        long.expect("a lease above the bound")
            .release()
            .await
            .unwrap();
    }
}
