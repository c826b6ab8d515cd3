//! What `Locker::capabilities` says is what the engine does: each feature it claims works,
//! each one it denies is refused at the request with a `Config` error.

use std::time::Duration;

use leasehold::LockError;
use leasehold_tests::conformance::Engine;

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
