//! `leasehold-servers`: starts throwaway servers of the engines named on the command line (all
//! of them with `all`; Redis alone by default) on free ports of 127.0.0.1, prints the URL to
//! give `Locker::connect`, `LEASEHOLD_URL` or the CLI for each, and stops them, removing
//! their data, on Ctrl-C (or SIGTERM).
//!
//! ```text
//! leasehold-servers [redis] [zookeeper] [etcd] [postgres] [mysql] | all
//! ```

use std::process::ExitCode;

use leasehold_testkit::servers::{EtcdServer, MysqlServer, PgServer, RedisServer, ZkServer};

const ENGINES: [&str; 5] = ["redis", "zookeeper", "etcd", "postgres", "mysql"];

const USAGE: &str = "usage: leasehold-servers [redis] [zookeeper] [etcd] [postgres] [mysql] | all

Starts a throwaway server of each engine named (Redis alone when none is) on a free port of
127.0.0.1, prints the URL to give Locker::connect, LEASEHOLD_URL or the leasehold CLI, and
stops them, removing their data, on Ctrl-C. The servers' binaries must be installed
(redis-server; ZooKeeper; etcd; PostgreSQL's initdb and postgres; MariaDB's mariadbd).";

/// A started server, kept alive until the command ends.
enum Running {
    Redis(RedisServer),
    ZooKeeper(ZkServer),
    Etcd(EtcdServer),
    Postgres(PgServer),
    Mysql(MysqlServer),
}

impl Running {
    async fn start(engine: &str) -> Running {
        match engine {
            "redis" => Running::Redis(RedisServer::start().await),
            "zookeeper" => Running::ZooKeeper(ZkServer::start().await),
            "etcd" => Running::Etcd(EtcdServer::start().await),
            "postgres" => Running::Postgres(PgServer::start().await),
            "mysql" => Running::Mysql(MysqlServer::start().await),
            other => unreachable!("`{other}` was checked against ENGINES"),
        }
    }

    /// The one URL that names this server as a lock engine (`Deployment::parse`).
    fn url(&self) -> String {
        match self {
            Running::Redis(s) => s.url(),
            Running::ZooKeeper(s) => format!("zookeeper://{}", s.connect_string()),
            Running::Etcd(s) => format!("etcd://{}", s.addr()),
            Running::Postgres(s) => s.url(),
            Running::Mysql(s) => s.url(),
        }
    }
}

/// The engines named by `args`, in the order of [`ENGINES`], or why they are not valid.
fn engines(args: &[String]) -> Result<Vec<&'static str>, String> {
    if args.is_empty() {
        return Ok(vec!["redis"]);
    }
    if args.iter().any(|a| a == "all") {
        return Ok(ENGINES.to_vec());
    }
    for a in args {
        if !ENGINES.contains(&a.as_str()) {
            return Err(format!(
                "unknown engine `{a}`; the engines are: {}, or all",
                ENGINES.join(", ")
            ));
        }
    }
    Ok(ENGINES
        .into_iter()
        .filter(|e| args.iter().any(|a| a == e))
        .collect())
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == "-h" || a == "--help") {
        println!("{USAGE}");
        return ExitCode::SUCCESS;
    }
    let engines = match engines(&args) {
        Ok(engines) => engines,
        Err(why) => {
            eprintln!("leasehold-servers: {why}\n\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    let runtime = tokio::runtime::Runtime::new().expect("a Tokio runtime");
    runtime.block_on(async {
        let mut running = Vec::new();
        for engine in engines {
            eprintln!("starting {engine}...");
            let server = Running::start(engine).await;
            println!("{engine:<10} {}", server.url());
            running.push(server);
        }
        println!();
        println!("Use one as LEASEHOLD_URL (or in Locker::connect, or the CLI's --url), e.g.:");
        println!("  export LEASEHOLD_URL={}", running[0].url());
        println!("Ctrl-C stops the servers and removes their data.");
        wait_for_stop().await;
        eprintln!("stopping...");
        drop(running);
    });
    ExitCode::SUCCESS
}

/// Until Ctrl-C or SIGTERM.
async fn wait_for_stop() {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .expect("SIGTERM can be listened to");
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
}

#[cfg(test)]
mod tests {
    use super::engines;

    fn args(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn engines_are_named_in_a_fixed_order() {
        assert_eq!(engines(&args(&[])).unwrap(), ["redis"]);
        assert_eq!(
            engines(&args(&["etcd", "redis"])).unwrap(),
            ["redis", "etcd"]
        );
        assert_eq!(engines(&args(&["all"])).unwrap().len(), 5);
        let e = engines(&args(&["reddis"])).unwrap_err();
        assert!(
            e.contains("unknown engine `reddis`") && e.contains("redis, zookeeper"),
            "{e}"
        );
    }
}
