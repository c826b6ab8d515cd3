//! `top` on a terminal: a full-screen view drawn with ratatui, redrawn at every reading and
//! key; the terminal is put back as it was on every way out (quit, error, panic, signal).

use std::io;

use leasehold::Locker;
use ratatui::crossterm::event::{self, Event, KeyCode, KeyEventKind, KeyModifiers};
use ratatui::layout::{Constraint, Layout};
use ratatui::style::{Style, Stylize};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Paragraph, Row, Table};
use ratatui::{DefaultTerminal, Frame};
use tokio::sync::mpsc;
use tokio::time::MissedTickBehavior;

use super::reading::{self, Reading};
use super::view::{self, View, HEADER};
use super::{Options, Sort};
use crate::display;
use crate::exit::{self, Failure};

/// The widest the KEY and LABEL columns grow, so that the holder stays in view.
const KEY_WIDTH: usize = 40;
/// See [`KEY_WIDTH`].
const LABEL_WIDTH: usize = 20;

/// What a key pressed on the screen asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Input {
    /// `q`, Esc or Ctrl-C.
    Quit,
    /// `a`, `w` or `k`.
    Sort(Sort),
    /// The terminal was resized, or another key: draw again.
    Redraw,
}

/// Shows the view until a quit key or a signal.
///
/// # Errors
/// A [`Failure`] when the terminal cannot be set up or drawn on; reading errors are shown,
/// not returned.
pub(crate) async fn run(locker: &Locker, mut view: View, options: &Options) -> Result<u8, Failure> {
    let mut screen = Screen::open().map_err(terminal_failure)?;
    // A failed connection made the first reading already: the next one is due in an interval.
    let mut readings = readings(locker.clone(), options.clone(), view.taken().is_some());
    let mut keys = keys();
    let stop = stop_signal();
    tokio::pin!(stop);
    loop {
        screen
            .terminal
            .draw(|frame| draw(frame, &view))
            .map_err(terminal_failure)?;
        tokio::select! {
            Some(reading) = readings.recv() => view.update(reading),
            Some(input) = keys.recv() => match input {
                Input::Quit => break,
                Input::Sort(sort) => view.sort = sort,
                Input::Redraw => {}
            },
            () = &mut stop => break,
        }
    }
    Ok(exit::OK)
}

/// The terminal in raw mode on its alternate screen, given back when dropped; ratatui's
/// panic hook gives it back on a panic.
struct Screen {
    terminal: DefaultTerminal,
}

impl Screen {
    fn open() -> io::Result<Screen> {
        match ratatui::try_init() {
            Ok(terminal) => Ok(Screen { terminal }),
            Err(e) => {
                // Raw mode may be on already.
                ratatui::restore();
                Err(e)
            }
        }
    }
}

impl Drop for Screen {
    fn drop(&mut self) {
        let _ = self.terminal.show_cursor();
        ratatui::restore();
    }
}

fn terminal_failure(e: io::Error) -> Failure {
    Failure::internal(format!(
        "cannot draw on the terminal ({e}); try `leasehold top --plain`"
    ))
}

/// A reading every interval (the first at once, unless `read_already`), from a task of its own so that keys are answered while the
/// engine is slow.
fn readings(locker: Locker, options: Options, read_already: bool) -> mpsc::Receiver<Reading> {
    let (tx, rx) = mpsc::channel(1);
    tokio::spawn(async move {
        let mut ticks = tokio::time::interval(options.interval);
        ticks.set_missed_tick_behavior(MissedTickBehavior::Delay);
        if read_already {
            ticks.tick().await;
        }
        loop {
            ticks.tick().await;
            let reading = reading::read(&locker, &options.pattern).await;
            if tx.send(reading).await.is_err() {
                break;
            }
        }
    });
    rx
}

/// The keys pressed, read on a thread of their own (crossterm's reads block).
fn keys() -> mpsc::UnboundedReceiver<Input> {
    let (tx, rx) = mpsc::unbounded_channel();
    std::thread::spawn(move || {
        // On a read error the thread ends; the view goes on, and a signal still stops it.
        while let Ok(event) = event::read() {
            let input = match event {
                Event::Key(key) if key.kind == KeyEventKind::Press => match key.code {
                    KeyCode::Char('c') if key.modifiers.contains(KeyModifiers::CONTROL) => {
                        Input::Quit
                    }
                    KeyCode::Char('q') | KeyCode::Esc => Input::Quit,
                    KeyCode::Char(c) => Sort::for_key(c).map_or(Input::Redraw, Input::Sort),
                    _ => Input::Redraw,
                },
                Event::Resize(..) => Input::Redraw,
                _ => continue,
            };
            if tx.send(input).is_err() {
                break;
            }
        }
    });
    rx
}

/// Ctrl-C (when it reaches the process as a signal), SIGTERM or SIGHUP.
async fn stop_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        if let (Ok(mut term), Ok(mut hup)) = (
            signal(SignalKind::terminate()),
            signal(SignalKind::hangup()),
        ) {
            tokio::select! {
                _ = term.recv() => {}
                _ = hup.recv() => {}
                _ = tokio::signal::ctrl_c() => {}
            }
            return;
        }
    }
    if tokio::signal::ctrl_c().await.is_err() {
        std::future::pending::<()>().await;
    }
}

/// Draws the summary line, the status line, as many rows as fit, and the keys.
fn draw(frame: &mut Frame, view: &View) {
    let [title, status, body, footer] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Length(1),
        Constraint::Fill(1),
        Constraint::Length(1),
    ])
    .areas(frame.area());

    let taken = view.taken().map(time_of_day).unwrap_or_default();
    let summary = Line::from(vec![
        Span::from("leasehold top").bold(),
        Span::from(format!("  {}  {taken}", view.summary())),
    ]);
    frame.render_widget(Paragraph::new(summary).reversed(), title);

    let rows = view.rows();
    let status_line = match view.failing() {
        Some(error) => {
            let since = view
                .rows_taken()
                .map(|t| format!(" (rows as of {})", time_of_day(t)))
                .unwrap_or_default();
            // One line: the message's own line breaks are spaces here.
            let error = display::key(&error.replace('\n', " "));
            Line::from(format!("error{since}: {error}")).red()
        }
        None if rows.is_empty() && view.taken().is_some() => Line::from(view.nothing_held()),
        None => Line::default(),
    };
    frame.render_widget(Paragraph::new(status_line), status);

    let fit = usize::from(body.height.saturating_sub(1));
    let shown = rows.len().min(fit);
    let left_out = rows.len() - shown;
    let cells: Vec<&[String; HEADER.len()]> = rows[..shown].iter().map(|r| &r.cells).collect();
    let widths = widths(&cells);
    let table = Table::new(
        cells.iter().map(|c| Row::new(c.iter().map(String::as_str))),
        widths,
    )
    .header(Row::new(HEADER).style(Style::new().bold().underlined()))
    .column_spacing(2);
    frame.render_widget(table, body);

    let mut keys = Vec::new();
    if left_out > 0 {
        keys.push(Span::from(format!("{left_out} more not shown  ")).bold());
    }
    keys.push(Span::from(format!(
        "sort: {}  [a]ge [w]aiters [k]ey  [q]uit  {}",
        view.sort.as_str(),
        view::rates_note()
    )));
    frame.render_widget(Paragraph::new(Line::from(keys)).dim(), footer);
}

/// The time of day of `t` in UTC, `12:34:56.789Z`: the screen shows the date nowhere else
/// but needs none.
fn time_of_day(t: std::time::SystemTime) -> String {
    let stamp = display::timestamp(t);
    stamp[stamp.find('T').map_or(0, |at| at + 1)..].to_owned()
}

/// Each column as wide as its widest cell (KEY and LABEL up to a limit); HOLDER takes the rest.
fn widths(rows: &[&[String; HEADER.len()]]) -> Vec<Constraint> {
    HEADER
        .iter()
        .enumerate()
        .map(|(i, title)| {
            if i == HEADER.len() - 1 {
                return Constraint::Fill(1);
            }
            let widest = rows
                .iter()
                .map(|r| r[i].chars().count())
                .max()
                .unwrap_or(0)
                .max(title.len());
            let limit = match *title {
                "KEY" => KEY_WIDTH,
                "LABEL" => LABEL_WIDTH,
                _ => usize::MAX,
            };
            Constraint::Length(u16::try_from(widest.min(limit)).unwrap_or(u16::MAX))
        })
        .collect()
}
