//! Scenario 13: leasehold on MySQL (MariaDB) against the same procedure calls sent raw by the
//! same driver (mysql_async), on connections of their own, to the same throwaway server, in
//! the same run: uncontended cycles, and one hot key across four processes, where the raw side
//! polls every 1 ms on a busy lock (it has no wake-ups); then how soon a waiter hears a release
//! and what waiting costs the server ([`mysql_waiting`](super::mysql_waiting)), and scenario 5
//! (no process starved) on MySQL.

use std::time::Duration;

use leasehold_tests::harness::MysqlServer;

use crate::baselines::{MysqlRaw, MYSQL_KEYS_RAW, MYSQL_RAW, MYSQL_RAW_POLLING};
use crate::engine::Engine;
use crate::hot_key::{
    handover_p50, report_against, run_each, Contender, ENGINE_SHAPES, ROUNDS_AT_16_TASKS,
};
use crate::report::Report;
use crate::versus::{self, ByHand};

/// Scenario 13: uncontended cycles at 1 and 16 tasks, one hot key across four processes, and
/// waiting.
pub(crate) async fn scenario(
    report: &mut Report,
    mysql: &MysqlServer,
    duration: Duration,
    rounds: usize,
) {
    let url = mysql.url();
    // Ours first: connecting creates the schema the raw side uses too.
    let locker = Engine::Mysql.locker(&url).await;
    let raw = MysqlRaw::connect(&url).await;
    versus::uncontended(
        report,
        "13 mysql",
        (&locker, &raw),
        |t, k| format!("raw-u:{t}:{k}"),
        MYSQL_RAW,
        duration,
        mysql.pid(),
    )
    .await;
    versus::several_keys(report, "13 mysql", &locker, duration).await;
    let floor = ByHand {
        all: &raw,
        name: MYSQL_KEYS_RAW,
        one: &raw,
        one_name: MYSQL_RAW,
        baseline_key: |t, k| format!("raw-a:{t}:{k}"),
        metric: "",
    };
    versus::several_keys_by_hand(report, "13 mysql", &locker, floor, duration, mysql.pid()).await;
    hot_key(report, &url, rounds).await;
    super::mysql_waiting::scenario(report, &url, duration, rounds).await;
    // Scenario 5 on MySQL: no process starved.
    super::fairness::on(report, Engine::Mysql, "13 mysql", &url, duration).await;
}

/// One hot key, 4 processes x 4 tasks: a handover between processes goes through the server
/// (ours wakes the next process through the wake log; the raw side finds the lock free on a
/// poll).
async fn hot_key(report: &mut Report, url: &str, rounds: usize) {
    let rounds = ROUNDS_AT_16_TASKS * rounds;
    let shape = ENGINE_SHAPES[1];
    let contenders = [Contender::Ours(Engine::Mysql), Contender::MysqlRaw];
    let measured = run_each(url, shape, rounds, &contenders, &()).await;
    let [(ours, ()), (raw, ())] = &measured[..] else {
        unreachable!("two contenders")
    };
    report_against(
        report,
        &format!("13 mysql hot key, {}", shape.label()),
        (ours, raw),
        MYSQL_RAW_POLLING,
        &[handover_p50(ours, raw)],
    );
}
