//! The oversell demo, small: it must run end to end on its own (throwaway Redis, shop
//! processes of both frameworks, and a throwaway ZooKeeper or etcd with `--engine zookeeper` or
//! `--engine etcd`, or a throwaway PostgreSQL or MariaDB for locks and stock with `--engine
//! postgres` or `--engine mysql`),
//! print the table, and sell exactly the stock with the lock.

use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[test]
fn a_small_demo_run_sells_exactly_the_stock_with_the_lock() {
    let stdout = small_demo(&[]);
    assert!(stdout.contains("locks in Redis"), "{stdout}");
}

#[test]
fn a_small_demo_run_with_locks_in_zookeeper_sells_exactly_the_stock() {
    let stdout = small_demo(&["--engine", "zookeeper"]);
    assert!(stdout.contains("locks in ZooKeeper"), "{stdout}");
}

#[test]
fn a_small_demo_run_with_locks_in_etcd_sells_exactly_the_stock() {
    let stdout = small_demo(&["--engine", "etcd"]);
    assert!(stdout.contains("locks in etcd"), "{stdout}");
}

#[test]
fn a_small_demo_run_with_locks_and_stock_in_postgres_sells_exactly_the_stock() {
    let stdout = small_demo(&["--engine", "postgres"]);
    assert!(
        stdout.contains("locks in PostgreSQL, stock in PostgreSQL, fenced in the same transaction"),
        "{stdout}"
    );
}

#[test]
fn a_small_demo_run_with_locks_and_stock_in_mysql_sells_exactly_the_stock() {
    let stdout = small_demo(&["--engine", "mysql"]);
    assert!(
        stdout.contains("locks in MySQL (MariaDB), stock in MySQL, fenced in the same transaction"),
        "{stdout}"
    );
}

/// Runs the demo with 300 purchases of a stock of 30 and `args`, checks its table, and
/// returns what it printed.
fn small_demo(args: &[&str]) -> String {
    let mut child = Command::new(env!("CARGO_BIN_EXE_demo"))
        .args(["--purchases", "300", "--stock", "30", "--concurrency", "60"])
        .args(args)
        .env_remove("REDIS_URL")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run the demo");
    let deadline = Instant::now() + Duration::from_secs(120);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the demo did not finish within 120s");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut stdout = String::new();
    let mut stderr = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut stdout)
        .unwrap();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    assert!(
        status.success(),
        "the demo failed: {status}\n{stdout}\n{stderr}"
    );

    let row = |name: &str| -> Vec<String> {
        stdout
            .lines()
            .find(|line| line.starts_with(name))
            .unwrap_or_else(|| panic!("no `{name}` row in:\n{stdout}"))
            .split_whitespace()
            .map(str::to_owned)
            .collect()
    };
    let header = row("run");
    assert_eq!(&header[1..3], ["sold", "oversold"], "{stdout}");
    let locked = row("leasehold");
    assert_eq!(
        &locked[1..4],
        ["30", "0", "30"],
        "sold, oversold, 201s:\n{stdout}"
    );
    let naive = row("no lock");
    assert_eq!(naive.len(), locked.len() + 1, "{stdout}"); // "no lock" is two words
    assert!(
        stderr.contains("[leasehold]"),
        "progress is shown:\n{stderr}"
    );
    stdout
}
