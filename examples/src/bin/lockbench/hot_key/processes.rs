//! The hot key across processes: this binary started again as workers
//! (`lockbench --worker CONTENDER ADDRESS KEY TASKS LOAD`), which connect, say `ready`, start
//! together on a line from us, and print one line per acquisition.

use std::io::{BufRead, Write};
use std::process::{Command, Stdio};

use leasehold::Locker;

use super::{Contender, Load, Sample};
use crate::engine::Engine;

/// Runs `contender` on `key` in `processes` worker processes with `tasks` tasks each; the
/// samples of each process.
pub(crate) async fn in_processes(
    contender: Contender,
    address: &str,
    key: &str,
    processes: usize,
    tasks: usize,
    load: Load,
) -> Vec<Vec<Sample>> {
    let (address, key) = (address.to_owned(), key.to_owned());
    tokio::task::spawn_blocking(move || {
        run_workers(contender.name(), &address, &key, processes, tasks, load)
    })
    .await
    .expect("workers")
}

fn run_workers(
    which: &str,
    address: &str,
    key: &str,
    processes: usize,
    tasks: usize,
    load: Load,
) -> Vec<Vec<Sample>> {
    let exe = std::env::current_exe().expect("own path");
    let mut children: Vec<_> = (0..processes)
        .map(|_| {
            Command::new(&exe)
                .args(["--worker", which, address, key])
                .arg(tasks.to_string())
                .arg(load.arg())
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .spawn()
                .expect("spawn worker")
        })
        .collect();
    // Each worker connects, prints "ready", and starts on a line from us.
    let mut readers: Vec<_> = children
        .iter_mut()
        .map(|c| std::io::BufReader::new(c.stdout.take().expect("stdout")))
        .collect();
    for r in &mut readers {
        let mut line = String::new();
        r.read_line(&mut line).expect("worker ready");
        assert_eq!(line.trim(), "ready", "worker said {line:?}");
    }
    for c in &mut children {
        writeln!(c.stdin.as_mut().expect("stdin"), "go").expect("start worker");
    }
    let mut per_process = Vec::new();
    for (mut c, r) in children.into_iter().zip(readers) {
        let samples = r
            .lines()
            .map(|line| Sample::parse(&line.expect("worker output")))
            .collect();
        assert!(c.wait().expect("worker").success(), "worker failed");
        per_process.push(samples);
    }
    per_process
}

/// A worker process: `CONTENDER ADDRESS KEY TASKS LOAD`.
pub(crate) async fn worker(args: &[String]) {
    let [which, address, key, tasks, load] = args else {
        panic!("worker arguments: CONTENDER ADDRESS KEY TASKS LOAD");
    };
    let contender = Contender::parse(which);
    let tasks = tasks.parse().expect("tasks");
    let load = Load::parse(load);
    // Connect before the start signal, so all processes begin together.
    let _warm = match contender.engine() {
        Engine::Redis => Some(Locker::connect(address).await.expect("connect")),
        _ => None,
    };
    println!("ready");
    let mut line = String::new();
    std::io::stdin().read_line(&mut line).expect("go");
    let samples = contender.contend(address, key, tasks, load).await;
    let mut out = std::io::stdout().lock();
    for s in samples {
        writeln!(out, "{}", s.line()).expect("write");
    }
}
