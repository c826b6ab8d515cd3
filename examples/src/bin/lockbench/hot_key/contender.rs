//! Who takes the hot key, by the name a worker process is given, and the one loop every
//! contender runs in a process: `tasks` tasks taking the key as the load says, each
//! acquisition timed.

use std::sync::{Arc, Mutex};
use std::time::Instant;

use super::{Load, Sample};
use crate::baselines::{EtcdLockService, MysqlRaw, Naive, PostgresRaw, Rslock, ZooKeeperRecipe};
use crate::engine::Engine;
use crate::key_lock::{KeyLock, Ours};
use crate::measure::monotonic_ns;

/// leasehold on an engine, or a baseline it is measured against.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Contender {
    /// leasehold with the default locks (handover within the process).
    Ours(Engine),
    /// leasehold on Redis with `fair(true)` locks: no handover inside a process.
    OursFair,
    /// What users write by hand on Redis: `SET NX PX`, 1 ms polling, compare-and-delete.
    PollingLoop,
    /// rslock on one Redis server.
    Rslock,
    /// The ZooKeeper client's lock recipe.
    ZooKeeperRecipe,
    /// etcd's Lock service, a lease per task.
    EtcdLockService,
    /// The PostgreSQL engine's statements sent raw, 1 ms polling.
    PostgresRaw,
    /// The MySQL engine's procedure calls sent raw, 1 ms polling.
    MysqlRaw,
}

/// Each contender's name: on a worker's command line, and in its hot key's name.
const NAMES: [(Contender, &str); 12] = [
    (Contender::Ours(Engine::Redis), "ours"),
    (Contender::OursFair, "ours-fair"),
    (Contender::PollingLoop, "naive"),
    (Contender::Rslock, "rslock"),
    (Contender::Ours(Engine::ZooKeeper), "zk-ours"),
    (Contender::ZooKeeperRecipe, "zk-raw"),
    (Contender::Ours(Engine::Etcd), "etcd-ours"),
    (Contender::EtcdLockService, "etcd-raw"),
    (Contender::Ours(Engine::Postgres), "postgres-ours"),
    (Contender::PostgresRaw, "postgres-raw"),
    (Contender::Ours(Engine::Mysql), "mysql-ours"),
    (Contender::MysqlRaw, "mysql-raw"),
];

impl Contender {
    pub(crate) fn name(self) -> &'static str {
        NAMES
            .iter()
            .find(|(c, _)| *c == self)
            .map(|(_, name)| *name)
            .expect("every contender has a name")
    }

    pub(crate) fn parse(s: &str) -> Contender {
        NAMES
            .iter()
            .find(|(_, name)| *name == s)
            .map(|(c, _)| *c)
            .unwrap_or_else(|| panic!("unknown contender {s}"))
    }

    /// The engine the contender's locks live on.
    pub(crate) fn engine(self) -> Engine {
        match self {
            Contender::Ours(engine) => engine,
            Contender::OursFair | Contender::PollingLoop | Contender::Rslock => Engine::Redis,
            Contender::ZooKeeperRecipe => Engine::ZooKeeper,
            Contender::EtcdLockService => Engine::Etcd,
            Contender::PostgresRaw => Engine::Postgres,
            Contender::MysqlRaw => Engine::Mysql,
        }
    }

    /// Connects to `address` and runs `tasks` tasks of this process on `key`, as `load` says;
    /// also the body of a worker process.
    pub(crate) async fn contend(
        self,
        address: &str,
        key: &str,
        tasks: usize,
        load: Load,
    ) -> Vec<Sample> {
        match self {
            Contender::Ours(Engine::Redis)
            | Contender::OursFair
            | Contender::PollingLoop
            | Contender::Rslock => {
                // Whichever of them runs, the three Redis clients connect: scenario 2 counts
                // the server's commands, connections' set-up included, and so each
                // contender's count has the same set-up in it.
                let locker = Engine::Redis.locker(address).await;
                let naive = Naive::new(address).await;
                let rslock = Rslock::new(address);
                match self {
                    Contender::PollingLoop => contend(naive, key, tasks, load).await,
                    Contender::Rslock => contend(rslock, key, tasks, load).await,
                    Contender::OursFair => contend(Ours::fair(locker), key, tasks, load).await,
                    _ => contend(Ours::new(locker), key, tasks, load).await,
                }
            }
            Contender::Ours(engine) => {
                let ours = Ours::new(engine.locker(address).await);
                contend(ours, key, tasks, load).await
            }
            Contender::ZooKeeperRecipe => {
                let recipe = ZooKeeperRecipe::connect(address).await;
                contend(recipe, key, tasks, load).await
            }
            Contender::EtcdLockService => {
                let service = EtcdLockService::connect(address).await;
                contend(service, key, tasks, load).await
            }
            Contender::PostgresRaw => {
                let raw = PostgresRaw::connect(address).await;
                contend(raw, key, tasks, load).await
            }
            Contender::MysqlRaw => {
                let raw = MysqlRaw::connect(address).await;
                contend(raw, key, tasks, load).await
            }
        }
    }
}

/// `tasks` tasks each take `key` with `lock` as `load` says, starting together; every
/// acquisition's timeline.
async fn contend<L: KeyLock>(lock: L, key: &str, tasks: usize, load: Load) -> Vec<Sample> {
    let samples = Arc::new(Mutex::new(Vec::with_capacity(tasks * load.capacity())));
    let barrier = Arc::new(tokio::sync::Barrier::new(tasks));
    let mut handles = Vec::new();
    for _ in 0..tasks {
        let lock = lock.for_task().await;
        let (samples, barrier, key) = (samples.clone(), barrier.clone(), key.to_owned());
        handles.push(tokio::spawn(async move {
            barrier.wait().await;
            let start = Instant::now();
            let mut done = 0;
            while load.more(done, start) {
                done += 1;
                let asked = monotonic_ns();
                let held = lock.acquire(&key).await;
                let got = monotonic_ns();
                load.critical_section().await;
                let released = monotonic_ns();
                lock.release(&key, held).await;
                samples.lock().unwrap().push(Sample {
                    asked,
                    got,
                    released,
                });
            }
        }));
    }
    for h in handles {
        h.await.expect("task");
    }
    samples.lock().unwrap().clone()
}
