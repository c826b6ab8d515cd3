//! Every cross-check of the attribute's options, once they are all read (which options may
//! go together), and the one decision of what the attribute takes.

use proc_macro2::{Span, TokenStream};
use quote::quote;
use syn::Path;

use crate::args::{job, Args};

/// Checks how the options combine, adding an error (spanned at the option at fault) for each
/// combination that is refused, and settles the singleton-job options into the lease and
/// watchdog they stand for.
pub(crate) fn settle(args: &mut Args) {
    if let (Some(span), true) = (args.read_span, args.given.contains(&"keys")) {
        args.errors.push(syn::Error::new(
            span,
            "`mode = \"read\"` takes one `key`: read locks on several keys at once are not \
             supported; lock them one by one, or drop `mode` for exclusive locks",
        ));
    }
    if let (Some(span), true) = (args.read_span, args.fair) {
        args.errors.push(syn::Error::new(
            span,
            "`mode = \"read\"` cannot be combined with `fair = true`: readers have no fair \
             mode (they never queue in the process, and are let in by the writers-first \
             rule); drop `fair`, or drop `mode` where the order of requests matters",
        ));
    }
    let given = args.given.clone();
    job::settle(args, &given);
    if let Some(span) = args.permits_span {
        for (other, why) in [
            ("keys", "a semaphore has one `key`: write `key = \"...\"`"),
            ("mode", "a semaphore has no read or write side: drop `mode`"),
            (
                "fair",
                "its waiters queue in order inside the process: drop `fair`",
            ),
            (
                "on_busy",
                "a semaphore cannot skip yet: drop `on_busy`, or give `wait` a bound",
            ),
            (
                "hold_at_least",
                "a permit is given back when the body ends: drop `hold_at_least`",
            ),
            (
                "hold_at_most",
                "write `lease = \"...\", watchdog = false` for a permit's hard bound",
            ),
        ] {
            if args.given.contains(&other) {
                args.errors.push(syn::Error::new(
                    span,
                    format!("`permits` cannot be combined with `{other}`; {why}"),
                ));
            }
        }
    }
    if let Some(span) = args.unfenced_span {
        for (given, other, why) in [
            (
                args.given.contains(&"keys"),
                "keys",
                "a lock on several keys has a fencing token per key (`g.fence(\"wallet:1\")`): \
                 drop `fencing = false`, or lock one `key`",
            ),
            (
                args.given.contains(&"permits"),
                "permits",
                "unfenced permits are not offered (every permit holder gets a fencing \
                 token, `PermitGuard::fence()`): drop `fencing = false`",
            ),
            (
                args.read_span.is_some(),
                "mode = \"read\"",
                "every reader gets a fencing token that orders it among the writers, and \
                 unfenced reads are not offered: drop `fencing = false` (or drop `mode = \"read\"` for an \
                 exclusive lock without a token)",
            ),
        ] {
            if given {
                args.errors.push(syn::Error::new(
                    span,
                    format!("`fencing = false` cannot be combined with `{other}`; {why}"),
                ));
            }
        }
    }
    // A `key` that is not a string was refused above; "missing" would be a second, wrong error.
    if !args.given.contains(&"key") && !args.given.contains(&"keys") {
        args.errors.push(syn::Error::new(
            Span::call_site(),
            "missing `key`: name the resource this function locks, \
             e.g. `#[distributed_lock(key = \"order:<id>\")]` (or several with \
             `keys = [\"wallet:<from>\", \"wallet:<to>\"]`)",
        ));
    }
}

/// What the attribute takes, decided once from the settled options.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Take {
    /// One key's lock: the exclusive lease or a reader's share; with a fencing token or not.
    Lock { read: bool, fenced: bool },
    /// One permit of a semaphore of `limit` permits.
    Permit { limit: u32 },
    /// Every key of `keys = [...]`.
    All,
}

impl Take {
    /// The decision for `args` (whose refused combinations `settle` reported).
    pub(crate) fn of(args: &Args) -> Take {
        match (args.keys.is_some(), args.permits) {
            (true, _) => Take::All,
            (false, Some(limit)) => Take::Permit { limit },
            (false, None) => Take::Lock {
                read: args.read,
                fenced: args.fencing,
            },
        }
    }

    /// The runtime's `LeaseKind` variant for it, carried to the store unchanged.
    pub(crate) fn kind(self) -> TokenStream {
        match self {
            Take::Permit { limit } => quote!(Permits { limit: #limit, count: 1 }),
            Take::Lock { read: true, .. } => quote!(Read),
            Take::Lock { read: false, .. } | Take::All => quote!(Exclusive),
        }
    }

    /// The guard that holds it, which the runtime's `acquire::<G>` takes.
    pub(crate) fn guard(self, krate: &Path) -> TokenStream {
        match self {
            Take::Permit { .. } => quote!(#krate::PermitGuard),
            // `fencing = false`: a guard without `fence()`, so the body cannot read a token.
            Take::Lock { fenced: false, .. } => quote!(#krate::UnfencedGuard),
            Take::Lock { fenced: true, .. } => quote!(#krate::LockGuard),
            Take::All => quote!(#krate::MultiGuard),
        }
    }
}
