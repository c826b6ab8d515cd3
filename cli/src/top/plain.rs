//! `top` without a terminal: a block per reading, a timestamped summary line and a table, so
//! that its output can be logged, piped or read by a script.

use std::io::Write as _;
use std::time::SystemTime;

use leasehold::Locker;
use tokio::time::MissedTickBehavior;

use super::reading;
use super::view::{View, HEADER};
use super::Options;
use crate::display;
use crate::exit::{self, Failure};

/// Prints a block every interval, `options.count` times or until stopped.
///
/// # Errors
/// None of its own: a reading that fails is printed as one and reading goes on. The exit
/// status is [`exit::ENGINE`] when the last reading failed.
pub(crate) async fn run(locker: &Locker, mut view: View, options: &Options) -> Result<u8, Failure> {
    let mut ticks = tokio::time::interval(options.interval);
    ticks.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let mut printed = 0u64;
    while options.count.is_none_or(|count| printed < count) {
        ticks.tick().await;
        // A failed connection made the first reading already.
        if printed > 0 || view.taken().is_none() {
            view.update(reading::read(locker, &options.pattern).await);
        }
        // Blocks are told apart by a blank line.
        let text = if printed == 0 {
            block(&view)
        } else {
            format!("\n{}", block(&view))
        };
        let mut out = std::io::stdout().lock();
        // A closed pipe (`| head`) ends the run, as it would end any filter.
        if out.write_all(text.as_bytes()).is_err() || out.flush().is_err() {
            return Ok(exit::OK);
        }
        printed += 1;
    }
    Ok(if view.failing().is_some() {
        exit::ENGINE
    } else {
        exit::OK
    })
}

/// One reading as text: the summary after a timestamp, then the error, or the table, or a
/// line saying nothing is held.
fn block(view: &View) -> String {
    let taken = view.taken().unwrap_or_else(SystemTime::now);
    let mut out = format!("{}  {}\n", display::timestamp(taken), view.summary());
    if let Some(error) = view.failing() {
        out.push_str(&format!("error: {error}\n"));
        return out;
    }
    let rows = view.rows();
    if rows.is_empty() {
        out.push_str(&view.nothing_held());
        out.push('\n');
    } else {
        let cells: Vec<Vec<String>> = rows.into_iter().map(|r| r.cells.to_vec()).collect();
        out.push_str(&display::table(&HEADER, &cells));
    }
    out
}
