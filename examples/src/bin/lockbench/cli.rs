//! The command line: the benchmark's options (which scenarios, how long, where to write), or
//! one of the modes the benchmark starts itself in (`--worker`, `--held-worker`), or
//! `--profile`.

use std::path::PathBuf;
use std::time::Duration;

use crate::engine::Target;

/// What this process is to do.
pub(crate) enum Command {
    /// The benchmark.
    Bench(Options),
    /// `--worker CONTENDER ADDRESS KEY TASKS LOAD`: a hot-key worker process.
    Worker(Vec<String>),
    /// `--held-worker SIDE URL N LEASE_MS SETTLE_MS HOLD_MS`: a held-locks worker process.
    HeldWorker(Vec<String>),
    /// `--profile CONTENDER TASKS SECONDS`: one contender of scenario 1 alone.
    Profile(Vec<String>),
    /// `--profile-engine ENGINE CONTENDER TASKS SECONDS`: one contender of scenario 6 or 7
    /// alone.
    ProfileEngine(Vec<String>),
}

/// The benchmark's options.
pub(crate) struct Options {
    /// The scenarios to run (in their own order, whatever the order given).
    pub(crate) scenarios: Vec<Scenario>,
    pub(crate) length: RunLength,
    /// The engines scenarios 11 and 12 run on (`--engines`; all by default).
    pub(crate) targets: Vec<Target>,
    /// The JSON report's path; the picture goes next to it, with `.svg`.
    pub(crate) out: PathBuf,
}

/// How long the run is: `--smoke` wins over `--quick`.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum RunLength {
    /// About 80 seconds.
    Full,
    /// `--quick`: about 15 seconds.
    Quick,
    /// `--smoke`: the shortest run that still exercises every scenario (CI checks it completes
    /// and writes valid JSON; its figures mean nothing).
    Smoke,
}

impl RunLength {
    /// Each timed run's length (a scenario's turns share it).
    pub(crate) fn duration(self) -> Duration {
        match self {
            RunLength::Full => Duration::from_secs(3),
            RunLength::Quick => Duration::from_millis(700),
            RunLength::Smoke => Duration::from_millis(100),
        }
    }

    /// Acquisitions per task of a hot-key run with 64 tasks on the key.
    pub(crate) fn rounds(self) -> usize {
        match self {
            RunLength::Full => 20,
            RunLength::Quick => 5,
            RunLength::Smoke => 2,
        }
    }

    /// Sequential operations behind a latency percentile.
    pub(crate) fn iterations(self) -> usize {
        match self {
            RunLength::Full => 2000,
            RunLength::Quick => 300,
            RunLength::Smoke => 20,
        }
    }

    /// Leader handovers per side and row of scenario 11.
    pub(crate) fn handovers(self) -> usize {
        match self {
            RunLength::Full => 120,
            RunLength::Quick => 24,
            RunLength::Smoke => 4,
        }
    }
}

/// The scenarios, in the order they run; `--only` picks some by name or number.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Scenario {
    Uncontended,
    HotKey,
    Attribute,
    Redlock,
    Fairness,
    ZooKeeper,
    Etcd,
    Postgres,
    Semaphore,
    Held,
    Leader,
    Permits,
    Mysql,
}

impl Scenario {
    pub(crate) const ALL: [Scenario; 13] = [
        Scenario::Uncontended,
        Scenario::HotKey,
        Scenario::Attribute,
        Scenario::Redlock,
        Scenario::Fairness,
        Scenario::ZooKeeper,
        Scenario::Etcd,
        Scenario::Postgres,
        Scenario::Semaphore,
        Scenario::Held,
        Scenario::Leader,
        Scenario::Permits,
        Scenario::Mysql,
    ];

    fn parse(s: &str) -> Scenario {
        match s {
            "1" | "uncontended" => Scenario::Uncontended,
            "2" | "hot-key" => Scenario::HotKey,
            "3" | "attribute" => Scenario::Attribute,
            "4" | "redlock" => Scenario::Redlock,
            "5" | "fairness" => Scenario::Fairness,
            "6" | "zookeeper" => Scenario::ZooKeeper,
            "7" | "etcd" => Scenario::Etcd,
            "8" | "postgres" => Scenario::Postgres,
            "9" | "semaphore" => Scenario::Semaphore,
            "10" | "held" => Scenario::Held,
            "11" | "leader" => Scenario::Leader,
            "12" | "semaphores" => Scenario::Permits,
            "13" | "mysql" => Scenario::Mysql,
            other => {
                eprintln!(
                    "unknown scenario {other:?}: --only takes a comma-separated list of \
                     uncontended, hot-key, attribute, redlock, fairness, zookeeper, etcd, \
                     postgres, semaphore, held, leader, semaphores, mysql (or 1 to 13)"
                );
                std::process::exit(2)
            }
        }
    }
}

/// Reads the arguments after the program's name; exits with a usage message on an unknown
/// scenario.
pub(crate) fn parse(args: Vec<String>) -> Command {
    let mode = args.first().map(String::as_str);
    let rest = || args[1..].to_vec();
    match mode {
        Some("--worker") => return Command::Worker(rest()),
        Some("--held-worker") => return Command::HeldWorker(rest()),
        Some("--profile") => return Command::Profile(rest()),
        Some("--profile-engine") => return Command::ProfileEngine(rest()),
        _ => {}
    }
    let length = if args.iter().any(|a| a == "--smoke") {
        RunLength::Smoke
    } else if args.iter().any(|a| a == "--quick") {
        RunLength::Quick
    } else {
        RunLength::Full
    };
    let out = args
        .iter()
        .position(|a| a == "--out")
        .and_then(|i| args.get(i + 1).cloned())
        .unwrap_or_else(|| "target/lockbench.json".to_owned());
    let only = args
        .iter()
        .position(|a| a == "--only")
        .map(|i| args.get(i + 1).expect("--only needs a scenario").as_str());
    let scenarios = match only {
        Some(names) => names.split(',').map(Scenario::parse).collect(),
        None => Scenario::ALL.to_vec(),
    };
    let targets = match args.iter().position(|a| a == "--engines") {
        Some(i) => {
            let names = args.get(i + 1).expect("--engines needs a list of engines");
            names.split(',').map(parse_target).collect()
        }
        None => Target::ALL.to_vec(),
    };
    Command::Bench(Options {
        scenarios,
        length,
        targets,
        out: out.into(),
    })
}

/// The engine named `s` for `--engines`; exits with a usage message on an unknown one.
fn parse_target(s: &str) -> Target {
    Target::parse(s).unwrap_or_else(|| {
        let names: Vec<&str> = Target::ALL.iter().map(|t| t.name()).collect();
        eprintln!(
            "unknown engine {s:?}: --engines takes a comma-separated list of {}",
            names.join(", ")
        );
        std::process::exit(2)
    })
}
