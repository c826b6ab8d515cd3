//! The conformance suite: what every lock engine must do, written once and run against each
//! engine of `leasehold_tests::conformance`. An engine is done when all of it passes (plus its
//! own fault tests).
//!
//! Each property is a module with one test per engine, `<property>::<engine>`:
//! `cargo test --test conformance -- single` runs one engine, `-- watchdog::` one property.
//! The differential test (`differential::<engine>`) runs the same generated schedules on every
//! engine and judges them by one model: `-- differential::` alone.
//! This file lists the properties, in their numbers' order; `checks/` holds each property's
//! check, `differential/` the differential test.
//! Time bounds here tell a release from a lease's expiry, and a bounded call from a hung one;
//! they carry generous slack and never judge speed.

use std::collections::BTreeSet;

use leasehold_tests::conformance::{Engine, EngineKind};

mod checks;
mod differential;

/// Expands each property into one test per engine it lists. Every engine of [`EngineKind::ALL`]
/// must be listed (a test per property checks it), with the property's own check or, where the
/// engine cannot offer the property, an in-process variant and a comment saying why.
macro_rules! conformance {
    ($(
        $(#[doc = $doc:literal])*
        $property:ident {
            $( $($engine:ident),+ => $check:path; )+
        }
    )*) => {$(
        $(#[doc = $doc])*
        mod $property {
            use super::*;

            $($(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $engine() {
                    let engine = start(stringify!($engine)).await;
                    $check(&engine).await;
                }
            )+)+

            #[test]
            fn lists_every_engine() {
                assert_lists_every_engine(
                    stringify!($property),
                    &[$($(stringify!($engine)),+),+],
                );
            }
        }
    )*};
}

conformance! {
    /// 1. Mutual exclusion: 3 processes × 8 tasks over 3 keys, judged by the history checker
    /// (no overlapping validity windows, fences in real-time order, no stale write accepted).
    mutual_exclusion {
        single, redlock3, cluster, sentinel, zookeeper, etcd, etcd3, postgres, mysql => checks::exclusion::across_processes;
        // Memory's locks live in one process: 24 tasks in this one, checked in place.
        memory => checks::exclusion::in_process;
    }

    /// 2. Fences strictly increase per key across holders, also after a lease expired.
    fences {
        single, redlock3, cluster, sentinel, memory, zookeeper, etcd, etcd3, postgres, mysql => checks::fences::increase_across_holders;
    }

    /// 3. A waiter wakes on the holder's release, not at the end of its (long) lease.
    wake_on_release {
        single, redlock3, cluster, sentinel, memory, zookeeper, etcd, etcd3, postgres, mysql => checks::wake::on_release;
    }

    /// 4. `Busy` after waiting for a held lock; `try_acquire` is `None` when held, `Some`
    /// when free.
    busy {
        single, redlock3, cluster, sentinel, memory, zookeeper, etcd, etcd3, postgres, mysql => checks::busy::after_waiting_and_try_acquire;
    }

    /// 5. The watchdog keeps a lease alive over five leases.
    watchdog {
        single, redlock3, cluster, sentinel, memory, zookeeper, etcd, etcd3, postgres, mysql => checks::watchdog::keeps_the_lease_alive;
    }

    /// 6. A holder learns of its loss when the engine goes away.
    loss {
        single, redlock3, cluster, sentinel, zookeeper, etcd, etcd3, postgres, mysql => checks::loss::when_the_engine_goes_away;
        // Memory cannot go away without the process: its lease runs out unrenewed instead
        // (watchdog off), which must be detected and reported the same way.
        memory => checks::loss::when_the_lease_runs_out;
    }

    /// 7. A guard is released when dropped, when its task panics or is aborted, and an
    /// aborted waiter leaves nothing behind: the next owner gets the lock at once.
    release_on_every_path {
        single, redlock3, cluster, sentinel, memory, zookeeper, etcd, etcd3, postgres, mysql => checks::release::on_drop_panic_and_abort;
    }

    /// 8. Re-entry follows the call tree: inside the holder's scope the same key re-enters;
    /// the same task outside it, or a task spawned from it, is another owner.
    reentry {
        single, redlock3, cluster, sentinel, memory, zookeeper, etcd, etcd3, postgres, mysql => checks::reentry::follows_the_scope;
    }

    /// 9. Hostile keys (braces, internal-looking names, wildcards, newlines, NUL, unicode,
    /// the longest allowed) each lock and exclude on their own; bad ones are `InvalidKey`.
    hostile_keys {
        single, redlock3, cluster, sentinel, memory, zookeeper, etcd, etcd3, postgres, mysql => checks::hostile_keys::lock_and_exclude;
    }

    /// 10. Calls are bounded: against a stalled engine, `acquire` with wait W fails within
    /// W + 3 × op_timeout, and `release` within its own bound; the engine serves again
    /// once healed.
    bounded_calls {
        single, redlock3, cluster, sentinel, zookeeper, etcd, etcd3, postgres, mysql => checks::bounded::when_stalled;
        // Memory has no connection to stall: its calls are checked against a lock that
        // stays held instead.
        memory => checks::bounded::when_held;
    }

    /// 11. Multi-key locks: opposite-order transfers between wallets (hostile keys among
    /// them, the same wallet twice now and then) by three lockers conserve money, never put a
    /// wallet in two transfers at once, and never hang.
    multi_key {
        single, redlock3, cluster, sentinel, memory, zookeeper, etcd, etcd3, postgres, mysql => checks::multi::transfers_conserve_money;
    }

    /// 11b. Multi-key locks with read keys: readers of a key share across lockers and hold
    /// its writers out, a busy key gives back what was taken (a read share too), and bookings
    /// (seats written, a venue read) beside venue changes (the venue written, a seat read) of
    /// three lockers never overlap a writer and never hang.
    multi_key_read_write {
        single, redlock3, cluster, sentinel, memory, zookeeper, etcd, etcd3, postgres, mysql => checks::multi_read::reads_and_writes_together;
    }

    /// 12. Read-write locks: readers share across lockers, writers exclude everyone, a
    /// waiting writer holds new readers back (one that left, none), readers' fences are at
    /// least the last writer's, a crashed reader frees its share after its lease, a mixed
    /// load never overlaps a writer.
    read_write {
        single, redlock3, cluster, sentinel, memory, zookeeper, etcd, etcd3, postgres, mysql => checks::read_write::readers_share_writers_exclude;
    }

    /// 13. Leader election: one leader at a time across three lockers, terms strictly
    /// increasing, a resign hands over, followers observe every change, a dropped campaign
    /// leaves nothing behind.
    leader {
        single, redlock3, cluster, sentinel, memory, zookeeper, etcd, etcd3, postgres, mysql => checks::leader::one_leader_terms_increase_followers_observe;
    }

    /// 14. Semaphores: three lockers never hold more than the limit's permits at once, a
    /// crashed holder's permit comes back after its lease, a waiter wakes on a release,
    /// callers that disagree on the limit are refused, inspection shows the holders.
    semaphore {
        single, cluster, sentinel, memory, zookeeper, etcd, etcd3, postgres, mysql => checks::semaphore::never_more_than_the_limit;
        // Never on RedLock: permits counted per master and granted by a majority admit more
        // holders than the limit (limit 2 on 3 masters admits 3); it takes consensus.
        redlock3 => checks::semaphore::refused_clearly;
    }

    /// 15. Singleton jobs: of three lockers triggering a job at once exactly one runs it;
    /// `hold_at_least` keeps the lock taken after the job ended early, so a trigger a moment
    /// later skips; after the hold the next trigger runs with a greater fence.
    singleton_job {
        single, redlock3, cluster, sentinel, memory, zookeeper, etcd, etcd3, postgres, mysql => checks::job::runs_once_and_holds;
    }

    /// 16. Cancellation at every await point: an acquire, a `try_acquire`, a waiting acquire
    /// and a release, each dropped after its N-th poll for every N until it finishes by
    /// itself, leave the lock free within the operation timeout plus a handover.
    cancellation {
        single, redlock3, cluster, sentinel, memory, zookeeper, etcd, etcd3, postgres, mysql => checks::cancel::at_every_poll;
    }

    /// 17. The same for read locks, where the engine has them.
    read_cancellation {
        single, redlock3, cluster, sentinel, memory, zookeeper, etcd, etcd3, postgres, mysql => checks::cancel::reads_at_every_poll;
    }

    /// 18. The same for semaphore permits, where the engine has them.
    permit_cancellation {
        single, cluster, sentinel, memory, zookeeper, etcd, etcd3, postgres, mysql => checks::cancel::permits_at_every_poll;
        // Never on RedLock (see `semaphore`): per-master counts under majorities overshoot.
        redlock3 => checks::semaphore::refused_clearly;
    }

    /// 19. Every way a waiter leaves (`Busy`, cancelled, panicked), for every primitive the
    /// engine has, leaves nothing that delays the next owner; a writer that left lets new
    /// readers in at once.
    waiter_leaves {
        single, cluster, sentinel, memory, zookeeper, etcd, etcd3, postgres, mysql => checks::leave::all;
        // No semaphores on RedLock (see `semaphore`).
        redlock3 => checks::leave::without_semaphores;
    }

    /// 20. A forced release is seen at once by the forced-out process: a task of its own
    /// queued behind the holder gets the lock within a handover, and the holder's guard
    /// reports the loss, instead of a third of the lease later.
    forced_release {
        single, cluster, sentinel, zookeeper, etcd, etcd3, postgres, mysql => checks::forced::seen_by_the_holders_process;
        // Memory's locks live in one process (no operator reaches them); RedLock's nodes are
        // forced one by one, each with a locker of its own.
        memory, redlock3 => checks::forced::refused_clearly;
    }

    /// 21. What `Locker::capabilities` says is what the engine does: every feature it
    /// claims works, every one it denies is refused at the request with a `Config` error.
    capabilities {
        single, redlock3, cluster, sentinel, zookeeper, etcd, etcd3, postgres, mysql, memory => checks::capabilities::tell_the_truth;
    }

    /// 22. Waiting rides out an outage: an acquire waiting through 5 s of a stalled engine
    /// takes the lock once the engine answers again; one told not to retry fails at once.
    rides_out_outages {
        single, redlock3, cluster, sentinel, zookeeper, etcd, etcd3, postgres, mysql => checks::outage::ridden_out;
        // Memory has no connection to lose: its waits are checked against a held lock.
        memory => checks::bounded::when_held;
    }

    /// 23. Downgrading: a read taken inside a held write keeps the lock after the write's
    /// release, with no gap, while writers of another locker stay blocked.
    downgrade {
        single, redlock3, cluster, sentinel, memory, zookeeper, etcd, etcd3, postgres, mysql => checks::read_write::downgrade_keeps_reading;
    }

    /// 24. A locker that closes gives back every lease it holds (lock, read, permits,
    /// leadership, as the engine has them): another locker waiting for each gets it within a
    /// handover; the closed locker refuses new calls.
    close {
        single, redlock3, cluster, sentinel, zookeeper, etcd, etcd3, postgres, mysql => checks::close::gives_everything_back;
        // Memory's lockers share no store: its own waiters end with `Closed`.
        memory => checks::close::in_process;
    }

    /// 25. Inspection tells who holds a lock and who waits: the holder's locker described
    /// (service, host, pid, start, version, id), its label and since when, the waiting
    /// locker described with how long it waited, never an owner token.
    holders {
        single, cluster, sentinel, zookeeper, etcd, etcd3, postgres, mysql => checks::holders::shown;
        // Memory's locks live in one process (no operator reaches them); RedLock's nodes are
        // inspected one by one, each with a locker of its own. Labels are still checked.
        memory, redlock3 => checks::holders::refused_clearly;
    }

    /// 26. Namespaces (issue 46): the election `jobs` of a prefix and the lock `jobs` of the
    /// prefix its data lives under (`svc:leader`: refused) or of the one next to it
    /// (`svc:leaders`) never exclude each other, nor count fences together.
    hostile_prefixes {
        single, redlock3, cluster, sentinel, memory, zookeeper, etcd, etcd3, postgres, mysql => checks::hostile_keys::elections_and_locks_stay_apart;
    }

    /// 27. The health course: an idle, a waiting and a holding locker through a freeze of every
    /// lock server and its thaw: suspended and lost within the engine's bounds, never connected
    /// while no server answers, reconnected within the bound of the thaw.
    health_course {
        single, redlock3, cluster, sentinel, zookeeper, etcd, etcd3, postgres, mysql => checks::health::follows_the_server;
        // Memory has no server to freeze: its state stays connected.
        memory => checks::health::in_process;
    }

    /// 28. Options kept by the engine's own means (the rest of the options × primitives
    /// matrix runs on the core): `hold_at_least` keeps a lock, a read, a write and a downgrade
    /// (the write's hold, the read's own) taken after an early release until the hold ends.
    options {
        single, redlock3, cluster, sentinel, memory, zookeeper, etcd, etcd3, postgres, mysql => checks::options::holds_on_every_primitive;
    }

    /// 29. A forced release is seen by every task of the holder's process as soon as by
    /// another process: after an operator releases a lock, a lock of `lock_all`, a write, an
    /// unfenced or a read lock by force, a `try_acquire` of the holder's own locker gets in
    /// (not "busy" until the holder's next renewal), and the holder counts its lease lost;
    /// with its own locker as the operator, at once (Redisson's `testForceUnlock`).
    forced_release_everywhere {
        single, redlock3, cluster, sentinel, zookeeper, etcd, etcd3, postgres, mysql => checks::forced::seen_by_every_task_at_once;
        // Memory's locks live in one process: no operator reaches them.
        memory => checks::forced::refused_clearly;
    }
}

async fn start(name: &str) -> Engine {
    let kind = EngineKind::named(name).unwrap_or_else(|| panic!("no engine named `{name}`"));
    Engine::start(kind).await
}

fn assert_lists_every_engine(property: &str, listed: &[&str]) {
    let listed: BTreeSet<&str> = listed.iter().copied().collect();
    let all: BTreeSet<&str> = EngineKind::ALL.iter().map(|kind| kind.name()).collect();
    assert_eq!(
        listed, all,
        "property `{property}` must list every engine, with an in-process variant where one \
         cannot offer it"
    );
}
