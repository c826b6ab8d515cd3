//! The options inside `#[distributed_lock(...)]`: parsed by hand (an option's name, then its
//! value) and checked here, so a bad lease or a typo'd option fails the build at its token.

use std::time::Duration;

use proc_macro2::Span;
use syn::ext::IdentExt;
use syn::parse::{Parse, ParseStream};
use syn::spanned::Spanned;
use syn::{Expr, ExprLit, Ident, Lit, LitStr, Path, Token};

pub(crate) mod job;
pub(crate) use job::Job;

/// Every option, in the order the docs list them; named in the "unknown option" error.
const OPTIONS: &str =
    "`key`, `keys`, `mode`, `fair`, `fencing`, `permits`, `lease`, `wait`, `watchdog`, \
     `profile`, `locker`, `guard`, `on_lost`, `on_busy`, `hold_at_least`, `hold_at_most`, `crate`";

/// `leasehold::MIN_LEASE`: the runtime refuses shorter leases at run time, the attribute at
/// compile time. (A proc-macro crate cannot depend on the runtime; a behaviour test keeps
/// the two equal.)
const MIN_LEASE: Duration = Duration::from_millis(10);

/// What to do with the body when the lease is lost while it runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum OnLost {
    Cancel,
    Continue,
}

/// The checked options. `errors` holds every problem found in them; the options that had
/// one are left at their default so expansion can still look at the rest.
pub(crate) struct Args {
    /// The `key` literal; `None` when it is missing or not a string (both are errors).
    pub key: Option<LitStr>,
    /// The `keys = [...]` literals, for a lock on several keys at once.
    pub keys: Option<Vec<LitStr>>,
    pub lease: Option<Duration>,
    pub wait: Option<Duration>,
    pub watchdog: Option<bool>,
    pub locker: Option<Expr>,
    pub guard: Option<Ident>,
    pub on_lost: OnLost,
    /// `mode = "read"`: the read side of a read-write lock (`"write"`, the default, is the
    /// exclusive lock).
    pub read: bool,
    /// `fair = true`: first come, first served across processes.
    pub fair: bool,
    /// `fencing = false`: a lock without a fencing token (`UnfencedGuard`); `true`, the
    /// default, is the fenced lock.
    pub fencing: bool,
    /// `permits = N`: one permit of a semaphore of `N`, instead of a lock.
    pub permits: Option<u32>,
    /// `profile = "name"`: the locker's named settings, which override the literals.
    pub profile: Option<LitStr>,
    /// Path to the runtime crate; `::leasehold` unless `crate = "..."` says otherwise.
    pub krate: Path,
    /// `on_busy`, `hold_at_least`, `hold_at_most`: singleton jobs.
    pub job: Job,
    /// The options given, in order (each once), for the cross-checks of `build`.
    pub given: Vec<&'static str>,
    /// Where `mode = "read"`, `permits` and `fencing = false` were written, if they were.
    pub read_span: Option<Span>,
    pub permits_span: Option<Span>,
    pub unfenced_span: Option<Span>,
    pub errors: Vec<syn::Error>,
}

/// Every option's name, as written and as [`Seen`] records it.
const NAMES: [&str; 17] = [
    "key",
    "keys",
    "mode",
    "fair",
    "fencing",
    "permits",
    "lease",
    "wait",
    "watchdog",
    "profile",
    "locker",
    "guard",
    "on_lost",
    "on_busy",
    "hold_at_least",
    "hold_at_most",
    "crate",
];

impl Parse for Args {
    fn parse(input: ParseStream<'_>) -> syn::Result<Self> {
        let mut seen = Seen::default();
        let mut args = Args {
            key: None,
            keys: None,
            lease: None,
            wait: None,
            watchdog: None,
            locker: None,
            guard: None,
            on_lost: OnLost::Cancel,
            read: false,
            fair: false,
            fencing: true,
            permits: None,
            profile: None,
            krate: syn::parse_quote!(::leasehold),
            job: Job::default(),
            given: Vec::new(),
            read_span: None,
            permits_span: None,
            unfenced_span: None,
            errors: Vec::new(),
        };
        while !input.is_empty() {
            if !input.peek(Ident::peek_any) {
                return Err(input.error(format!("expected an option: {OPTIONS}")));
            }
            // `crate` is a keyword, hence `parse_any`.
            let name = input.call(Ident::parse_any)?;
            match NAMES.iter().find(|known| name == **known) {
                Some(&option) => {
                    let value = value(input)?;
                    if seen.first(option, name.span(), &mut args.errors) {
                        args.set(option, &value, name.span(), &seen);
                    }
                }
                None => {
                    args.errors.push(syn::Error::new(
                        name.span(),
                        format!("unknown option `{name}`; the options are: {OPTIONS}"),
                    ));
                    // Skip its value, whatever it is, to go on checking the options after it.
                    if input.parse::<Option<Token![=]>>()?.is_some() {
                        input.parse::<Expr>()?;
                    }
                }
            }
            if input.is_empty() {
                break;
            }
            input.parse::<Token![,]>()?;
        }
        args.given = seen.0;
        Ok(args)
    }
}

impl Args {
    /// Checks `value` as the value of `option` (written at `span`, given for the first time)
    /// and keeps it, or records its error and leaves the option at its default.
    fn set(&mut self, option: &'static str, value: &Expr, span: Span, seen: &Seen) {
        let errors = &mut self.errors;
        match option {
            "keys" => {
                if seen.exclusive("keys", "key", span, errors) {
                    self.keys = errors.keep(keys(value));
                }
            }
            "key" => {
                if seen.exclusive("key", "keys", span, errors) {
                    self.key = errors.keep(string(value, "key", "\"order:<id>\""));
                }
            }
            "lease" => self.lease = errors.keep(lease(value)),
            "wait" => self.wait = errors.keep(wait(value)),
            "watchdog" => self.watchdog = errors.keep(watchdog(value)),
            "locker" => self.locker = Some(value.clone()),
            "guard" => self.guard = errors.keep(guard(value)),
            "on_lost" => {
                if let Some(on_lost) = errors.keep(on_lost(value)) {
                    self.on_lost = on_lost;
                }
            }
            "mode" => {
                if let Some(read) = errors.keep(mode(value)) {
                    self.read = read;
                    if read {
                        self.read_span = Some(value.span());
                    }
                }
            }
            "fair" => {
                if let Some(fair) = errors.keep(boolean(value, "fair")) {
                    self.fair = fair;
                }
            }
            "fencing" => {
                if let Some(fencing) = errors.keep(boolean(value, "fencing")) {
                    self.fencing = fencing;
                    if !fencing {
                        self.unfenced_span = Some(value.span());
                    }
                }
            }
            "on_busy" => self.job.on_busy = errors.keep(job::on_busy(value)),
            "hold_at_least" => self.job.hold_at_least = errors.keep(job::hold_at_least(value)),
            "hold_at_most" => self.job.hold_at_most = errors.keep(job::hold_at_most(value)),
            "permits" => {
                self.permits = errors.keep(permits(value));
                self.permits_span = Some(value.span());
            }
            "profile" => self.profile = errors.keep(profile(value)),
            "crate" => {
                if let Some(krate) = errors.keep(krate(value)) {
                    self.krate = krate;
                }
            }
            _ => unreachable!("`{option}` is in NAMES but has no arm here"),
        }
    }
}

/// Remembers which options were given, to refuse the second of a pair.
#[derive(Default)]
struct Seen(Vec<&'static str>);

impl Seen {
    /// True the first time `name` is seen; records an error at `span` every other time.
    fn first(&mut self, name: &'static str, span: Span, errors: &mut Vec<syn::Error>) -> bool {
        if self.0.contains(&name) {
            errors.push(syn::Error::new(
                span,
                format!("`{name}` is given twice: keep one of them"),
            ));
            false
        } else {
            self.0.push(name);
            true
        }
    }
}

impl Seen {
    /// False, with an error at `span`, when `other` (exclusive with `name`) was given.
    fn exclusive(
        &self,
        name: &'static str,
        other: &'static str,
        span: Span,
        errors: &mut Vec<syn::Error>,
    ) -> bool {
        if self.0.contains(&other) {
            errors.push(syn::Error::new(
                span,
                format!(
                    "`{name}` and `{other}` cannot both be given: use `key = \"...\"` for one \
                     lock, or `keys = [\"...\", \"...\"]` to lock several keys at once"
                ),
            ));
            false
        } else {
            true
        }
    }
}

trait Keep {
    fn keep<T>(&mut self, result: syn::Result<T>) -> Option<T>;
}

impl Keep for Vec<syn::Error> {
    /// The value, or `None` with its error recorded.
    fn keep<T>(&mut self, result: syn::Result<T>) -> Option<T> {
        result.map_err(|e| self.push(e)).ok()
    }
}

/// `= value`; any expression, checked by the option that reads it.
fn value(input: ParseStream<'_>) -> syn::Result<Expr> {
    input.parse::<Token![=]>()?;
    input.parse()
}

fn string(value: &Expr, option: &str, example: &str) -> syn::Result<LitStr> {
    match value {
        Expr::Lit(ExprLit {
            lit: Lit::Str(lit), ..
        }) => Ok(lit.clone()),
        _ => Err(syn::Error::new(
            value.span(),
            format!("`{option}` takes a string literal: write `{option} = {example}`"),
        )),
    }
}

fn keys(value: &Expr) -> syn::Result<Vec<LitStr>> {
    const EXAMPLE: &str = "`keys = [\"wallet:<from>\", \"wallet:<to>\"]`";
    let Expr::Array(array) = value else {
        return Err(syn::Error::new(
            value.span(),
            format!("`keys` takes a list of string literals: write {EXAMPLE}"),
        ));
    };
    if array.elems.is_empty() {
        return Err(syn::Error::new(
            value.span(),
            format!("`keys = []` locks nothing: name at least one key, as in {EXAMPLE}"),
        ));
    }
    array
        .elems
        .iter()
        .map(|elem| match elem {
            Expr::Lit(ExprLit {
                lit: Lit::Str(lit), ..
            }) => Ok(lit.clone()),
            _ => Err(syn::Error::new(
                elem.span(),
                format!("each key of `keys` is a string literal: write {EXAMPLE}"),
            )),
        })
        .collect()
}

fn duration(value: &Expr, option: &str) -> syn::Result<(LitStr, Duration)> {
    let lit = string(value, option, "\"30s\"")?;
    let text = lit.value();
    if text.trim_start().starts_with('-') {
        return Err(syn::Error::new(
            lit.span(),
            format!("`{option}` cannot be negative: write a duration like \"30s\" or \"500ms\""),
        ));
    }
    let duration = humantime::parse_duration(&text).map_err(|e| {
        syn::Error::new(
            lit.span(),
            format!(
                "`{option} = {text:?}` is not a duration ({e}): write it like \"30s\", \"500ms\" \
                 or \"2m\""
            ),
        )
    })?;
    Ok((lit, duration))
}

fn lease(value: &Expr) -> syn::Result<Duration> {
    let (lit, lease) = duration(value, "lease")?;
    if lease.is_zero() {
        return Err(syn::Error::new(
            lit.span(),
            "`lease` must be longer than zero: a zero lease expires as it is taken; write e.g. \
             \"30s\", or leave `lease` out to use the Locker's default",
        ));
    }
    if lease < MIN_LEASE {
        return Err(syn::Error::new(
            lit.span(),
            format!(
                "`lease = {:?}` is shorter than the shortest lease, {MIN_LEASE:?}: Redis counts \
                 leases in milliseconds and the client keeps a safety margin; write e.g. \"1s\"",
                lit.value()
            ),
        ));
    }
    Ok(lease)
}

fn wait(value: &Expr) -> syn::Result<Duration> {
    duration(value, "wait").map(|(_, wait)| wait)
}

fn watchdog(value: &Expr) -> syn::Result<bool> {
    match value {
        Expr::Lit(ExprLit {
            lit: Lit::Bool(b), ..
        }) => Ok(b.value),
        _ => Err(syn::Error::new(
            value.span(),
            "`watchdog` takes `true` (renew the lease while the body runs) or `false` (the \
             lease is a hard maximum), without quotes",
        )),
    }
}

fn on_lost(value: &Expr) -> syn::Result<OnLost> {
    let lit = string(value, "on_lost", "\"cancel\"")?;
    match lit.value().as_str() {
        "cancel" => Ok(OnLost::Cancel),
        "continue" => Ok(OnLost::Continue),
        other => Err(syn::Error::new(
            lit.span(),
            format!(
                "`on_lost = {other:?}` is not an action: write \"cancel\" (drop the body and \
                 return `LockError::Lost`) or \"continue\" (let the body run on)"
            ),
        )),
    }
}

fn boolean(value: &Expr, option: &str) -> syn::Result<bool> {
    match value {
        Expr::Lit(ExprLit {
            lit: Lit::Bool(b), ..
        }) => Ok(b.value),
        _ => Err(syn::Error::new(
            value.span(),
            format!("`{option}` takes `true` or `false`, without quotes: write `{option} = true`"),
        )),
    }
}

fn mode(value: &Expr) -> syn::Result<bool> {
    let lit = string(value, "mode", "\"read\"")?;
    match lit.value().as_str() {
        "read" => Ok(true),
        "write" => Ok(false),
        other => Err(syn::Error::new(
            lit.span(),
            format!(
                "`mode = {other:?}` is not a lock mode: write \"read\" (shared with other \
                 readers) or \"write\" (exclusive, the default)"
            ),
        )),
    }
}

/// `leasehold::MAX_PERMITS`, checked at compile time too.
const MAX_PERMITS: u32 = 10_000;

fn permits(value: &Expr) -> syn::Result<u32> {
    let Expr::Lit(ExprLit {
        lit: Lit::Int(int), ..
    }) = value
    else {
        return Err(syn::Error::new(
            value.span(),
            "`permits` takes a whole number of permits, without quotes: write `permits = 8`",
        ));
    };
    match int.base10_parse::<u32>() {
        Ok(0) => Err(syn::Error::new(
            int.span(),
            "`permits = 0` would let nobody in: a semaphore needs at least 1 permit (with 1 it \
             is an exclusive lock: drop `permits` for that)",
        )),
        Ok(n) if n <= MAX_PERMITS => Ok(n),
        _ => Err(syn::Error::new(
            int.span(),
            format!(
                "`permits = {}` is above the limit of {MAX_PERMITS} permits: every permit held \
                 is an entry with its own lease in the store",
                int.base10_digits()
            ),
        )),
    }
}

fn profile(value: &Expr) -> syn::Result<LitStr> {
    let lit = string(value, "profile", "\"payments\"")?;
    let name = lit.value();
    if name.is_empty() || name.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(syn::Error::new(
            lit.span(),
            format!(
                "`profile = {name:?}` is not a profile name: write the name of a \
                 `[profiles.NAME]` table of the locker's config, e.g. `profile = \"payments\"`"
            ),
        ));
    }
    Ok(lit)
}

fn guard(value: &Expr) -> syn::Result<Ident> {
    match value {
        Expr::Path(path) if path.qself.is_none() && path.attrs.is_empty() => {
            match path.path.get_ident() {
                Some(ident) if ident != "self" && ident != "_" => Ok(ident.clone()),
                _ => Err(guard_error(value)),
            }
        }
        _ => Err(guard_error(value)),
    }
}

fn guard_error(value: &Expr) -> syn::Error {
    syn::Error::new(
        value.span(),
        "`guard` takes the name to bind the `&LockGuard` (with `keys`, the `&MultiGuard`) to \
         in the body, without quotes: write e.g. `guard = g`, then `g.fence()`",
    )
}

fn krate(value: &Expr) -> syn::Result<Path> {
    let lit = string(value, "crate", "\"::leasehold\"")?;
    lit.parse_with(Path::parse_mod_style).map_err(|_| {
        syn::Error::new(
            lit.span(),
            format!(
                "`crate = {:?}` is not a path: write the path the runtime crate is reachable \
                 at, e.g. `crate = \"::leasehold\"`",
                lit.value()
            ),
        )
    })
}
