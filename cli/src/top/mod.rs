//! `leasehold top`: a live view of the locks held under a prefix, refreshed every interval,
//! on a terminal screen (ratatui) or as plain tables when standard output is not a terminal.

mod command;
mod options;
mod plain;
mod rates;
mod reading;
mod screen;
mod sort;
mod view;

pub(crate) use command::run;
pub(crate) use options::{Options, DEFAULT_INTERVAL};
pub(crate) use sort::Sort;
