//! What an engine offers, as data: one [`Capabilities`] value per engine, read where a
//! request's options are resolved (not re-decided by each store call), public through
//! [`Locker::capabilities`](crate::Locker::capabilities), and listed in the README by a test.

use std::time::Duration;

use crate::error::LockError;

/// What the engine under a [`Locker`](crate::Locker) offers. A service whose engine comes
/// from configuration reads it to decide what it may use; a request for something the engine
/// lacks fails at once with [`LockError::Config`], whose message names the engines that have
/// it.
///
/// Every engine offers locks, multi-key locks (`lock_all`), unfenced locks and singleton jobs.
///
/// ```
/// let caps = leasehold::Locker::in_memory().capabilities();
/// assert!(caps.read_locks && caps.semaphores && caps.leader_election);
/// assert_eq!(caps.max_lease, None);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Capabilities {
    /// Read-write locks: [`Locker::read_lock`](crate::Locker::read_lock), `mode = "read"`.
    pub read_locks: bool,
    /// Semaphores: [`Locker::semaphore`](crate::Locker::semaphore), `permits = N`.
    pub semaphores: bool,
    /// Leader election and its observers: [`Locker::leader`](crate::Locker::leader),
    /// [`Locker::observe_leader`](crate::Locker::observe_leader).
    pub leader_election: bool,
    /// How fair locks ([`LockRequest::fair`](crate::LockRequest::fair), `fair = true`)
    /// order their waiters.
    pub fairness: Fairness,
    /// Inspection, listing and forced release of locks, for operators
    /// ([`Locker::inspect`](crate::Locker::inspect), the `leasehold` CLI).
    pub inspection: bool,
    /// The longest lease the engine honours, where it bounds leases: a longer one is
    /// shortened to it (and refused with [`LockError::Config`] when the watchdog is off, since
    /// it would end sooner than asked). On ZooKeeper and etcd the locker's session is the lease
    /// (the session timeout the server granted); `None` elsewhere.
    pub max_lease: Option<Duration>,
    /// Whether a lock frees itself in the store when its lease runs out (a Redis key's TTL,
    /// a row's expiry). False on ZooKeeper and etcd, where a lock lives as long as the
    /// locker's session: a lease that lapses without the watchdog is given back by the
    /// locker, and a crashed holder's locks go when its session ends.
    pub leases_expire: bool,
}

/// How an engine orders the waiters of a fair lock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Fairness {
    /// Processes take the lock in the order they began to wait, and the tasks of one process
    /// in the order of its local queue.
    PerProcess,
    /// Every request waits in the engine's queue under a name of its own: first come, first
    /// served across every task of every process.
    PerRequest,
}

/// The engines, for the table of what each offers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Engine {
    Redis,
    Sentinel,
    Cluster,
    RedLock,
    ZooKeeper,
    Etcd,
    Postgres,
    Mysql,
    Memory,
}

impl Engine {
    /// Every engine, in the order the README's table lists them.
    pub(crate) const ALL: [Engine; 9] = [
        Engine::Redis,
        Engine::Sentinel,
        Engine::Cluster,
        Engine::RedLock,
        Engine::ZooKeeper,
        Engine::Etcd,
        Engine::Postgres,
        Engine::Mysql,
        Engine::Memory,
    ];

    /// Its name in metrics' labels: one lowercase word.
    pub(crate) fn label(self) -> &'static str {
        match self {
            Engine::Redis => "redis",
            Engine::Sentinel => "sentinel",
            Engine::Cluster => "cluster",
            Engine::RedLock => "redlock",
            Engine::ZooKeeper => "zookeeper",
            Engine::Etcd => "etcd",
            Engine::Postgres => "postgres",
            Engine::Mysql => "mysql",
            Engine::Memory => "memory",
        }
    }

    /// Its name in messages.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Engine::Redis => "one Redis server",
            Engine::Sentinel => "Sentinel",
            Engine::Cluster => "Redis Cluster",
            Engine::RedLock => "RedLock",
            Engine::ZooKeeper => "ZooKeeper",
            Engine::Etcd => "etcd",
            Engine::Postgres => "PostgreSQL",
            Engine::Mysql => "MySQL",
            Engine::Memory => "in memory",
        }
    }

    /// What it offers; `session` is the session timeout that bounds leases on the engines
    /// whose locks live as long as a session (ZooKeeper, etcd).
    pub(crate) fn capabilities(self, session: Duration) -> Capabilities {
        let redis = Capabilities {
            read_locks: true,
            semaphores: true,
            leader_election: true,
            fairness: Fairness::PerRequest,
            inspection: true,
            max_lease: None,
            leases_expire: true,
        };
        let lock_only = Capabilities {
            read_locks: false,
            semaphores: false,
            leader_election: false,
            ..redis
        };
        let sessions = Capabilities {
            read_locks: true,
            semaphores: true,
            leader_election: true,
            fairness: Fairness::PerProcess,
            max_lease: Some(session),
            leases_expire: false,
            ..lock_only
        };
        match self {
            Engine::Redis | Engine::Sentinel | Engine::Cluster => redis,
            // Each node is inspected with a locker of its own; no semaphores (`why_not`).
            Engine::RedLock => Capabilities {
                read_locks: true,
                leader_election: true,
                fairness: Fairness::PerProcess,
                inspection: false,
                ..lock_only
            },
            Engine::ZooKeeper | Engine::Etcd => sessions,
            // Read locks, semaphores and leader records in tables of their own.
            Engine::Postgres => redis,
            // As PostgreSQL: the same tables and rules, on InnoDB.
            Engine::Mysql => redis,
            // One process: its local queue orders every request.
            Engine::Memory => Capabilities {
                fairness: Fairness::PerProcess,
                inspection: false,
                ..redis
            },
        }
    }
}

impl Engine {
    /// Why the engine does not offer `feature`, where the reason is in its design rather than
    /// in work not done yet; its refusals say it.
    pub(crate) fn why_not(self, feature: Feature) -> Option<&'static str> {
        match (self, feature) {
            // The argument and its counterexample: store/redis/redlock/semaphores.rs.
            (Engine::RedLock, Feature::Semaphores) => Some(
                "permits counted on each node and granted by a majority admit more holders \
                 than the limit (limit 2 on 3 nodes admits 3), and one agreed count needs a \
                 consensus engine",
            ),
            _ => None,
        }
    }
}

impl Engine {
    /// Why the engine offers no inspection, where it says more than that it has none: its
    /// refusal to an operator says it.
    pub(crate) fn why_not_inspect(self) -> Option<&'static str> {
        match self {
            Engine::Memory => Some(
                "inspecting locks needs a locker on a shared engine; an in-memory locker's locks \
                 are visible to its own process only",
            ),
            Engine::RedLock => Some(
                "inspecting locks needs a locker on one Redis server, a Sentinel master or a \
                 cluster; for RedLock, inspect each node with a locker of its own",
            ),
            _ => None,
        }
    }
}

/// Something a request needs that an engine may lack.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Feature {
    ReadLocks,
    Semaphores,
    LeaderElection,
}

impl Feature {
    /// Whether `caps` offer it.
    pub(crate) fn offered_by(self, caps: &Capabilities) -> bool {
        match self {
            Feature::ReadLocks => caps.read_locks,
            Feature::Semaphores => caps.semaphores,
            Feature::LeaderElection => caps.leader_election,
        }
    }

    /// What it is called, and whether that name is plural.
    fn name(self) -> (&'static str, bool) {
        match self {
            Feature::ReadLocks => ("read locks", true),
            Feature::Semaphores => ("semaphores", true),
            Feature::LeaderElection => ("leader election", false),
        }
    }
}

/// The error for a request that needs `feature` on an engine (`on`, as the store describes
/// itself) without it; it names the engines that have it, from the table above, after `why`
/// the engine lacks it where it has a reason ([`Engine::why_not`]).
pub(crate) fn refusal(feature: Feature, on: &str, why: Option<&str>) -> LockError {
    let with: Vec<&str> = Engine::ALL
        .into_iter()
        .filter(|engine| feature.offered_by(&engine.capabilities(Duration::from_secs(10))))
        .map(Engine::name)
        .collect();
    let list = match with.split_last() {
        Some((last, [])) => last.to_string(),
        Some((last, rest)) => format!("{} and {last}", rest.join(", ")),
        None => "no engine yet".into(),
    };
    let (name, plural) = feature.name();
    let (are, they) = if plural {
        ("are", "they")
    } else {
        ("is", "it")
    };
    let why = why.map(|why| format!(": {why}")).unwrap_or_default();
    LockError::config(format!(
        "{name} {are} not supported on {on}{why}; {they} {are} on {list}"
    ))
}

/// Fails with the refusal of the engine `info` describes ([`refusal`]) unless `caps` offer
/// `feature`.
pub(crate) fn require(
    feature: Feature,
    caps: &Capabilities,
    info: &super::Info,
) -> Result<(), LockError> {
    match feature.offered_by(caps) {
        true => Ok(()),
        false => Err(refusal(
            feature,
            &info.description,
            info.engine.why_not(feature),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The README's table of what each engine offers is this table, cell by cell.
    #[test]
    fn the_readme_lists_what_each_engine_offers() {
        let readme = include_str!("../../../README.md");
        let header = "| | one Redis, Sentinel, Cluster | RedLock | ZooKeeper | etcd | PostgreSQL | MySQL | in memory |";
        assert!(readme.contains(header), "the README's engine table moved");
        let columns = [
            Engine::Redis,
            Engine::RedLock,
            Engine::ZooKeeper,
            Engine::Etcd,
            Engine::Postgres,
            Engine::Mysql,
            Engine::Memory,
        ];
        for same in [Engine::Sentinel, Engine::Cluster] {
            assert_eq!(
                same.capabilities(Duration::ZERO),
                Engine::Redis.capabilities(Duration::ZERO)
            );
        }
        let row = |first: &str| -> Vec<&str> {
            let line = readme
                .lines()
                .find(|l| l.starts_with(&format!("| {first}")))
                .unwrap_or_else(|| panic!("no README row {first:?}"));
            let cells: Vec<&str> = line.split('|').map(str::trim).collect();
            cells[2..cells.len() - 1].to_vec()
        };
        type Flag = fn(&Capabilities) -> bool;
        let flags: [(&str, Flag); 3] = [
            ("`read_lock`", |c| c.read_locks),
            ("semaphores", |c| c.semaphores),
            ("leader election", |c| c.leader_election),
        ];
        for (first, flag) in flags {
            for (engine, cell) in columns.iter().zip(row(first)) {
                let caps = engine.capabilities(Duration::from_secs(10));
                let listed = match cell {
                    "yes" => true,
                    "refused" => false,
                    other => panic!("README row {first}, {engine:?}: {other:?}"),
                };
                assert_eq!(listed, flag(&caps), "README row {first}, {engine:?}");
            }
        }
        for (engine, cell) in columns.iter().zip(row("`fair(true)`")) {
            let fairness = engine.capabilities(Duration::from_secs(10)).fairness;
            let listed = match cell {
                c if c.starts_with("per request") => Fairness::PerRequest,
                c if c.starts_with("per process") => Fairness::PerProcess,
                other => panic!("README fair row, {engine:?}: {other:?}"),
            };
            assert_eq!(listed, fairness, "README fair row, {engine:?}");
        }
    }

    #[test]
    fn refusals_name_the_engines_that_offer_it() {
        let e = refusal(Feature::Semaphores, "etcd at a:2379", None).to_string();
        assert!(
            e.contains(
                "semaphores are not supported on etcd at a:2379; they are on one Redis \
                 server, Sentinel, Redis Cluster, ZooKeeper, etcd, PostgreSQL, MySQL and in \
                 memory"
            ),
            "{e}"
        );
        let e = refusal(Feature::ReadLocks, "PostgreSQL", None).to_string();
        assert!(
            e.contains("read locks are not supported on PostgreSQL; they are on"),
            "{e}"
        );
    }

    /// RedLock's refusal of semaphores says why; the generic one stays for the rest.
    #[test]
    fn redlock_says_why_it_has_no_semaphores() {
        let why = Engine::RedLock.why_not(Feature::Semaphores);
        let e = refusal(Feature::Semaphores, "redlock over a, b, c", why).to_string();
        assert!(
            e.contains(
                "semaphores are not supported on redlock over a, b, c: permits counted on each \
                 node and granted by a majority admit more holders than the limit"
            ),
            "{e}"
        );
        assert!(e.contains("; they are on one Redis server"), "{e}");
        for engine in Engine::ALL {
            for feature in [
                Feature::ReadLocks,
                Feature::Semaphores,
                Feature::LeaderElection,
            ] {
                let offered = feature.offered_by(&engine.capabilities(Duration::ZERO));
                let why = engine.why_not(feature);
                assert!(!(offered && why.is_some()), "{engine:?} offers {feature:?}");
                if (engine, feature) != (Engine::RedLock, Feature::Semaphores) {
                    assert_eq!(why, None, "{engine:?}, {feature:?}");
                }
            }
        }
    }
}
