//! One hot key, many contenders: the harness scenarios 2 and 5 to 8 share, whatever the
//! engine and whoever takes the key.

mod compare;
mod contender;
mod load;
mod processes;
mod timeline;

pub(crate) use compare::{
    handover_p50, report_against, run_each, Meter, Shape, ENGINE_SHAPES, ROUNDS_AT_16_TASKS,
};
pub(crate) use contender::Contender;
pub(crate) use load::Load;
pub(crate) use processes::{in_processes, worker};
pub(crate) use timeline::{assert_exclusive, hot_stats, HotStats, Sample};
