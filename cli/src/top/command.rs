//! Which way `top` draws: the screen on a terminal, plain tables otherwise.

use std::io::IsTerminal as _;

use super::reading::Reading;
use super::view::View;
use super::{plain, screen, Options};
use crate::connect::Target;
use crate::exit::Failure;

/// Connects, then runs `top`: the live screen when standard output is a terminal, unless
/// `--plain` or a count asks for plain tables.
///
/// An engine that cannot be reached is not an error here: the first reading says why, and a
/// locker that connects in the background takes over.
///
/// # Errors
/// A [`Failure`] when the URL is unusable or the terminal cannot be used; the engine's
/// failures are shown instead.
pub(crate) async fn run(target: &Target, options: &Options) -> Result<u8, Failure> {
    let (locker, unreachable) = match target.connect().await {
        Ok(locker) => (locker, None),
        // A bad URL fails here too, with its own message.
        Err(unreachable) => (target.connect_lazily().await?, Some(unreachable.message)),
    };
    let mut view = View::new(target, options, locker.capabilities().leases_expire);
    if let Some(message) = unreachable {
        view.update(Reading::failed(message, locker.state()));
    }
    if options.plain || options.count.is_some() || !std::io::stdout().is_terminal() {
        plain::run(&locker, view, options).await
    } else {
        screen::run(&locker, view, options).await
    }
}
