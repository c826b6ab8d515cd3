//! Checks the annotated function against the options and wraps its body in calls of
//! `::leasehold::__private`; the signature stays as the user wrote it.

use proc_macro2::{Delimiter, Group, Literal, Span, TokenStream, TokenTree};
use quote::{quote, quote_spanned, ToTokens};
use syn::spanned::Spanned;
use syn::visit_mut::VisitMut;
use syn::{
    AttrStyle, Expr, GenericArgument, Ident, ItemFn, LitStr, PathArguments, ReturnType, Signature,
    Type,
};

use crate::args::{Args, OnLost};
use crate::bindings;
use crate::build::Take;
use crate::template::{self, Field, Placeholder, Segment};

/// `#[distributed_lock(args)] item` → the locked function, or `compile_error!`s for every
/// problem found next to the untouched function, so the rest of the crate still resolves it.
pub(crate) fn expand(args: TokenStream, item: TokenStream) -> TokenStream {
    match try_expand(args, item.clone()) {
        Ok(expanded) => expanded,
        Err(errors) => {
            let errors = errors.into_iter().map(|e| e.to_compile_error());
            quote!(#(#errors)* #item)
        }
    }
}

fn try_expand(args: TokenStream, item: TokenStream) -> Result<TokenStream, Vec<syn::Error>> {
    let mut errors = Vec::new();
    let args = match syn::parse2::<Args>(args) {
        Ok(mut args) => {
            crate::build::settle(&mut args);
            errors.append(&mut args.errors);
            Some(args)
        }
        Err(e) => {
            errors.push(e);
            None
        }
    };
    let func: ItemFn = match syn::parse2(item) {
        Ok(func) => func,
        Err(e) => {
            errors.push(syn::Error::new(
                e.span(),
                "`#[distributed_lock]` goes on an `async fn` with a body",
            ));
            return Err(errors);
        }
    };

    let sig = &func.sig;
    if sig.asyncness.is_none() {
        errors.push(syn::Error::new(
            sig.fn_token.span,
            format!(
                "`#[distributed_lock]` only goes on an `async fn`: the lock is held across \
                 `.await`s; write `async fn {}`",
                sig.ident
            ),
        ));
    }
    let returned = errors.keep(result_type(sig));
    if let (Some(args), Some(returned)) = (&args, returned) {
        if args.job.skips() {
            errors.keep(skip_value_type(returned, sig).map_err(|e| [e]));
        }
    }
    let key = match &args {
        Some(Args { key: Some(lit), .. }) => errors.keep(key_expr(lit, sig).map(Keys::One)),
        Some(Args {
            keys: Some(lits), ..
        }) => {
            let mut exprs = Vec::new();
            for lit in lits {
                exprs.extend(errors.keep(key_expr(lit, sig)));
            }
            (exprs.len() == lits.len()).then_some(Keys::Many(exprs))
        }
        _ => None,
    };

    let (Some(args), Some(returned), Some(key), true) = (args, returned, key, errors.is_empty())
    else {
        return Err(errors);
    };
    Ok(locked_fn(&args, &func, returned, &key))
}

/// What the function locks: one key (`key = ...`) or several at once (`keys = [...]`).
enum Keys {
    One(TokenStream),
    Many(Vec<TokenStream>),
}

/// The whole output for a function that passed every check.
fn locked_fn(args: &Args, func: &ItemFn, returned: &Type, key: &Keys) -> TokenStream {
    let krate = &args.krate;
    let private = quote!(#krate::__private);
    let ItemFn {
        attrs,
        vis,
        sig,
        block,
    } = func;
    let outer = attrs.iter().filter(|a| a.style == AttrStyle::Outer);
    let inner = attrs
        .iter()
        .filter(|a| matches!(a.style, AttrStyle::Inner(_)));

    // The one decision of what is taken: what the lease holds and the guard that holds it.
    let take = Take::of(args);
    let guard_type = take.guard(krate);
    let spec = spec(args, &take, &private, &sig.ident);
    // A missing `From<LockError>` is reported at the error type, where the fix goes.
    let err_span = error_type_span(returned);
    // One conversion for both a failed acquire and a loss under the body: a missing `From`
    // is one obligation at one place, so the compiler reports it once.
    let convert = quote_spanned! {err_span=>
        // `From::from` is the identity when `E` is `LockError` itself.
        #[allow(clippy::useless_conversion)]
        let __leasehold_convert = |__leasehold_error: #krate::LockError| {
            ::core::convert::From::from(__leasehold_error)
        };
    };
    let failed = quote_spanned! {err_span=>
        ::core::result::Result::Err(__leasehold_convert(__leasehold_error))
    };
    let bail = quote!(return #failed);
    let guard = args
        .guard
        .as_ref()
        .map(|g| quote!(let #g: &#guard_type = &__leasehold_guard;));
    let (acquire, taken) = acquisition(args, returned, key, &guard_type, &private);
    let fake_return = fake_return(returned);
    // The body's statements, not its block: a block nested as the async block's value is
    // what `unused_braces` flags (in the user's code, where `cargo fix` would then break it).
    let body = &block.stmts;
    let finish = quote! {
        match #private::finish(__leasehold_guard, __leasehold_out).await {
            ::core::result::Result::Ok(__leasehold_result) => __leasehold_result,
            ::core::result::Result::Err(__leasehold_error) => #failed,
        }
    };

    quote! {
        #(#outer)*
        #vis #sig {
            #(#inner)*
            #spec
            #convert
            let __leasehold_guard = {
                match #acquire {
                    #taken
                    ::core::result::Result::Err(__leasehold_error) => #bail,
                }
            };
            let __leasehold_out = {
                #guard
                #private::hold(&__leasehold_guard, &__LEASEHOLD_SPEC, async move {
                    #fake_return
                    #(#body)*
                })
                .await
            };
            #finish
        }
    }
}

/// The attribute's settings as the runtime reads them, `static __LEASEHOLD_SPEC`, and its
/// entry in the registry of every call site.
fn spec(args: &Args, take: &Take, private: &TokenStream, function: &Ident) -> TokenStream {
    let duration = |d: Option<std::time::Duration>| match d {
        Some(d) => {
            let secs = Literal::u64_suffixed(d.as_secs());
            let nanos = Literal::u32_suffixed(d.subsec_nanos());
            quote!(::core::option::Option::Some(#private::Duration::new(#secs, #nanos)))
        }
        None => quote!(::core::option::Option::None),
    };
    let lease = duration(args.lease);
    let wait = duration(args.wait);
    let hold_at_least = duration(args.job.hold_at_least());
    let watchdog = match args.watchdog {
        Some(on) => quote!(::core::option::Option::Some(#on)),
        None => quote!(::core::option::Option::None),
    };
    let fair = args.fair;
    let on_lost = match args.on_lost {
        OnLost::Cancel => quote!(Cancel),
        OnLost::Continue => quote!(Continue),
    };
    let kind = take.kind();
    let profile = match &args.profile {
        Some(name) => quote!(::core::option::Option::Some(::std::borrow::Cow::Borrowed(#name))),
        None => quote!(::core::option::Option::None),
    };
    let site = site(args, private, function);
    quote! {
        static __LEASEHOLD_SPEC: #private::Spec = #private::Spec {
            lease: #lease,
            wait: #wait,
            watchdog: #watchdog,
            on_lost: #private::OnLost::#on_lost,
            kind: #private::LeaseKind::#kind,
            fair: #fair,
            hold_at_least: #hold_at_least,
            profile: #profile,
            site: ::core::option::Option::Some(#site),
        };
        // Every call site in one registry, gathered by the linker: a locker checks them
        // all at start-up (`Locker::check_call_sites`).
        #[#private::linkme::distributed_slice(#private::CALL_SITES)]
        #[linkme(crate = #private::linkme)]
        static __LEASEHOLD_SITE: &#private::Spec = &__LEASEHOLD_SPEC;
    }
}

/// Where the attribute is, for the start-up check of every call site and the one log line of
/// a call site's configuration error.
fn site(args: &Args, private: &TokenStream, function: &Ident) -> TokenStream {
    let function = LitStr::new(&format!("::{function}"), Span::call_site());
    let (key_text, several) = match (&args.key, &args.keys) {
        (Some(lit), _) => (format!("{:?}", lit.value()), false),
        (None, Some(lits)) => (
            format!(
                "[{}]",
                lits.iter()
                    .map(|lit| format!("{:?}", lit.value()))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            true,
        ),
        (None, None) => (String::new(), false),
    };
    let key_text = LitStr::new(&key_text, Span::call_site());
    let locker_text = match &args.locker {
        Some(expr) => {
            let text = LitStr::new(&expr_text(expr), Span::call_site());
            quote!(::core::option::Option::Some(#text))
        }
        None => quote!(::core::option::Option::None),
    };
    quote! {
        #private::Site {
            function: ::core::concat!(::core::module_path!(), #function),
            file: ::core::file!(),
            line: ::core::line!(),
            key: #key_text,
            keys: #several,
            locker: #locker_text,
        }
    }
}

/// The acquire call (the locker, the keys, the spec) and the `match` arms that take its guard
/// or, with `on_busy = "skip"`, return at once when the lock is taken.
fn acquisition(
    args: &Args,
    returned: &Type,
    key: &Keys,
    guard_type: &TokenStream,
    private: &TokenStream,
) -> (TokenStream, TokenStream) {
    let locker = locker(args, private);
    // With `on_busy = "skip"` the lock is only tried, and a taken lock returns at once.
    let skips = args.job.skips();
    let acquire = if skips {
        quote!(try_acquire)
    } else {
        quote!(acquire)
    };
    let keys = match key {
        Keys::One(key) => quote!(#key),
        Keys::Many(keys) => quote!(::std::vec![#(#keys),*]),
    };
    // One entry point, told which guard to take: the runtime asks for it as the spec says.
    let acquire =
        quote!(#private::#acquire::<#guard_type>(#locker, #keys, &__LEASEHOLD_SPEC).await);
    let taken = if skips {
        // `Ok(())` or `Ok(None)`, spanned at the `Ok` type: any other type is refused there.
        let ok_span = ok_type(returned).map_or_else(|| returned.span(), Spanned::span);
        let skipped = quote_spanned! {ok_span=>
            return ::core::result::Result::Ok(#private::Skipped::skipped())
        };
        quote! {
            ::core::result::Result::Ok(::core::option::Option::Some(__leasehold_guard)) =>
                __leasehold_guard,
            ::core::result::Result::Ok(::core::option::Option::None) => #skipped,
        }
    } else {
        quote! {
            ::core::result::Result::Ok(__leasehold_guard) => __leasehold_guard,
        }
    };
    (acquire, taken)
}

/// The locker expression. It is borrowed inside the `match` scrutinee, so a temporary it
/// creates (`locker = make_locker()`) lives until the acquire is done. The call is spanned
/// from the expression's first token to its last, so a wrong type is reported at the
/// expression.
fn locker(args: &Args, private: &TokenStream) -> TokenStream {
    match &args.locker {
        Some(expr) => {
            let (first, last) = first_and_last_span(expr);
            let path = respan(quote!(#private::locker_of), first);
            let amp = quote_spanned!(first=> &);
            // Parentheses only where `&` would otherwise bind tighter than the expression's own
            // operators: the compiler underlines an unparenthesized expression whole.
            let inner = if binds_tighter_than_ref(expr) {
                expr.to_token_stream()
            } else {
                let mut group = Group::new(Delimiter::Parenthesis, expr.to_token_stream());
                group.set_span(last);
                group.into_token_stream()
            };
            let mut args = Group::new(Delimiter::Parenthesis, quote!(#amp #inner));
            args.set_span(last);
            quote!(#path #args)
        }
        None => quote!(#private::default_locker()),
    }
}

/// Whether `&expr` borrows the whole of `expr` without parentheses (the common cases:
/// `state.locker`, `locker()`, `self.lockers.get()`).
fn binds_tighter_than_ref(expr: &Expr) -> bool {
    matches!(
        expr,
        Expr::Path(_) | Expr::Field(_) | Expr::MethodCall(_) | Expr::Call(_)
    )
}

/// `tokens` with every span set to `span`, so a compiler error in them points there.
fn respan(tokens: TokenStream, span: Span) -> TokenStream {
    tokens
        .into_iter()
        .map(|mut tree| {
            if let TokenTree::Group(group) = &tree {
                let mut new = Group::new(group.delimiter(), respan(group.stream(), span));
                new.set_span(span);
                tree = TokenTree::Group(new);
            } else {
                tree.set_span(span);
            }
            tree
        })
        .collect()
}

/// The spans of the first and last token of `tokens` (stable Rust cannot join spans; the
/// compiler joins them itself when they start and end an expression).
fn first_and_last_span(tokens: &impl ToTokens) -> (Span, Span) {
    let mut trees = tokens.to_token_stream().into_iter();
    let first = trees.next().map_or_else(Span::call_site, |t| t.span());
    let last = trees.last().map_or(first, |t| t.span());
    (first, last)
}

/// The type arguments of `Result<T, E>` (or of an alias like `io::Result<T>`).
fn result_arguments(returned: &Type) -> Vec<&Type> {
    let mut inner = returned;
    while let Type::Group(group) = inner {
        inner = &group.elem;
    }
    match inner {
        Type::Path(path) => match path.path.segments.last().map(|s| &s.arguments) {
            Some(PathArguments::AngleBracketed(args)) => args
                .args
                .iter()
                .filter_map(|arg| match arg {
                    GenericArgument::Type(ty) => Some(ty),
                    _ => None,
                })
                .collect(),
            _ => Vec::new(),
        },
        _ => Vec::new(),
    }
}

/// The `T` of `Result<T, E>`, when the return type names it.
fn ok_type(returned: &Type) -> Option<&Type> {
    result_arguments(returned).first().copied()
}

/// With `on_busy = "skip"`, a skipped call must be visible in the value: `Result<(), E>`
/// (skipped: `Ok(())`) or `Result<Option<T>, E>` (skipped: `Ok(None)`).
fn skip_value_type(returned: &Type, sig: &Signature) -> syn::Result<()> {
    let name = &sig.ident;
    let Some(ok) = ok_type(returned) else {
        return Err(syn::Error::new(
            returned.span(),
            format!(
                "with `on_busy = \"skip\"`, `{name}` returns at once without running its body \
                 when the lock is taken elsewhere, so its return type must show what a skipped \
                 call gives: write it out as `-> Result<(), E>` (a skipped call returns \
                 `Ok(())`) or `-> Result<Option<T>, E>` (a skipped call returns `Ok(None)`), \
                 not `{}`",
                type_text(returned)
            ),
        ));
    };
    let mut inner = ok;
    while let Type::Group(group) = inner {
        inner = &group.elem;
    }
    let fits = match inner {
        Type::Tuple(tuple) => tuple.elems.is_empty(),
        Type::Path(path) => {
            path.qself.is_none()
                && path.path.segments.last().is_some_and(|s| {
                    s.ident == "Option" && matches!(s.arguments, PathArguments::AngleBracketed(_))
                })
        }
        _ => false,
    };
    if fits {
        return Ok(());
    }
    let text = type_text(ok);
    Err(syn::Error::new(
        ok.span(),
        format!(
            "with `on_busy = \"skip\"`, `{name}` returns at once without running its body when \
             the lock is taken elsewhere, so `{text}` cannot be its `Ok` value: write \
             `Result<Option<{text}>, E>` (a skipped call returns `Ok(None)`) or `Result<(), E>` \
             (a skipped call returns `Ok(())`)"
        ),
    ))
}

/// The error type of `Result<T, E>`, or the whole type for one-parameter aliases.
fn error_type_span(returned: &Type) -> Span {
    let mut inner = returned;
    while let Type::Group(group) = inner {
        inner = &group.elem;
    }
    if let Type::Path(path) = inner {
        if let Some(PathArguments::AngleBracketed(args)) =
            path.path.segments.last().map(|s| &s.arguments)
        {
            let mut types = args.args.iter().filter_map(|arg| match arg {
                GenericArgument::Type(ty) => Some(ty),
                _ => None,
            });
            if let (Some(_), Some(error)) = (types.next(), types.next()) {
                return error.span();
            }
        }
    }
    returned.span()
}

/// An unreachable `return` of the declared type as the body's first statement, so `?` and
/// `return` in the body infer exactly as they did before the body moved into an async block.
fn fake_return(returned: &Type) -> TokenStream {
    let mut erased = returned.clone();
    EraseImplTrait.visit_type_mut(&mut erased);
    quote_spanned! {returned.span()=>
        #[allow(
            unknown_lints,
            unreachable_code,
            clippy::diverging_sub_expression,
            clippy::let_unit_value,
            clippy::unreachable,
            clippy::empty_loop,
            clippy::needless_return
        )]
        if false {
            let __leasehold_fake_return: #erased = ::core::unreachable!();
            return __leasehold_fake_return;
        }
    }
}

/// `impl Trait` cannot be named in a `let`; `_` lets the body's value decide it.
struct EraseImplTrait;

impl VisitMut for EraseImplTrait {
    fn visit_type_mut(&mut self, ty: &mut Type) {
        if let Type::ImplTrait(it) = ty {
            *ty = Type::Infer(syn::TypeInfer {
                underscore_token: syn::Token![_](it.span()),
            });
        } else {
            syn::visit_mut::visit_type_mut(self, ty);
        }
    }
}

/// The declared return type, if it is a `Result` (any path ending in `Result`, so aliases
/// like `io::Result<T>` or `anyhow::Result<T>` work too).
fn result_type(sig: &Signature) -> syn::Result<&Type> {
    let fix = "a lock can fail to be taken, so `#[distributed_lock]` needs the function to \
               return a `Result` whose error type implements `From<leasehold::LockError>`";
    let ty = match &sig.output {
        ReturnType::Default => {
            return Err(syn::Error::new(
                sig.ident.span(),
                format!(
                    "`{}` returns `()`, but {fix}: write `-> Result<(), E>` (e.g. \
                     `-> Result<(), leasehold::LockError>`)",
                    sig.ident
                ),
            ))
        }
        ReturnType::Type(_, ty) => ty.as_ref(),
    };
    let mut inner = ty;
    while let Type::Group(group) = inner {
        inner = &group.elem;
    }
    match inner {
        Type::Path(path)
            if path.qself.is_none()
                && path
                    .path
                    .segments
                    .last()
                    .is_some_and(|s| s.ident.to_string().ends_with("Result")) =>
        {
            Ok(ty)
        }
        _ => {
            let text = type_text(ty);
            Err(syn::Error::new(
                ty.span(),
                format!(
                    "`{}` returns `{text}`, but {fix}: write `-> Result<{text}, E>` (e.g. \
                     `-> Result<{text}, leasehold::LockError>`)",
                    sig.ident
                ),
            ))
        }
    }
}

/// An expression as a person would write it, for messages (`self.locker`, not
/// `self . locker`).
fn expr_text(expr: &Expr) -> String {
    let text = expr.to_token_stream().to_string();
    let mut out = String::with_capacity(text.len());
    let mut prev = ' ';
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        let next = chars.peek().copied().unwrap_or(' ');
        let tight_before = matches!(next, '.' | '(' | ')' | '[' | ']' | ',' | '?' | ':');
        let tight_after = matches!(prev, '.' | '(' | '[' | '&' | '*' | '!' | ':');
        if c == ' ' && (tight_before || tight_after) {
            continue;
        }
        out.push(c);
        prev = c;
    }
    out.replace(",", ", ").replace(",  ", ", ")
}

/// A type as a person would write it (token strings put spaces everywhere).
fn type_text(ty: &Type) -> String {
    let text = ty.to_token_stream().to_string();
    let mut out = String::with_capacity(text.len());
    let mut prev = ' ';
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        let next = chars.peek().copied().unwrap_or(' ');
        let tight_before = matches!(next, '<' | '>' | ',' | ':' | ')' | ']');
        let tight_after = matches!(prev, '<' | ':' | '&' | '(' | '[');
        if c == ' ' && (tight_before || tight_after) {
            continue;
        }
        out.push(c);
        prev = c;
    }
    out.replace("dyn", "dyn ").replace("dyn  ", "dyn ")
}

/// The expression that builds the key: checks the template and resolves every placeholder
/// against the function's bindings.
fn key_expr(lit: &LitStr, sig: &Signature) -> Result<TokenStream, Vec<syn::Error>> {
    let span = lit.span();
    let segments = template::parse(&lit.value()).map_err(|errors| {
        errors
            .into_iter()
            .map(|e| syn::Error::new(subspan(lit, &e.span), e))
            .collect::<Vec<_>>()
    })?;

    let bindings = bindings::of(sig);
    let mut errors = Vec::new();
    let mut format = String::new();
    let mut values = Vec::new();
    for segment in &segments {
        match segment {
            Segment::Literal(text) => format.push_str(&text.replace('{', "{{").replace('}', "}}")),
            Segment::Placeholder(placeholder) => {
                if bindings.contains(&placeholder.root) {
                    format.push_str("{}");
                    values.push(placeholder_expr(placeholder, span));
                } else {
                    errors.push(syn::Error::new(
                        subspan(lit, &placeholder.span),
                        unknown_binding(placeholder, sig, &bindings),
                    ));
                }
            }
        }
    }
    if !errors.is_empty() {
        return Err(errors);
    }
    Ok(if values.is_empty() {
        let text = LitStr::new(&format.replace("{{", "{").replace("}}", "}"), span);
        quote_spanned!(span=> ::std::string::String::from(#text))
    } else {
        let format = LitStr::new(&format, span);
        quote_spanned!(span=> ::std::format!(#format, #(#values),*))
    })
}

/// `self.tenant.0`, spanned at the key so a missing `Display` is reported there.
fn placeholder_expr(placeholder: &Placeholder, span: Span) -> TokenStream {
    let mut expr = ident(&placeholder.root, span).into_token_stream();
    for field in &placeholder.fields {
        match field {
            Field::Named(name) => {
                let name = ident(name, span);
                expr.extend(quote_spanned!(span=> .#name));
            }
            Field::Index(index) => {
                let index = syn::Index {
                    index: *index,
                    span,
                };
                expr.extend(quote_spanned!(span=> .#index));
            }
            Field::Token(_) => unreachable!("`template::parse` refuses tokens"),
        }
    }
    expr
}

fn ident(name: &str, span: Span) -> Ident {
    match name.strip_prefix("r#") {
        Some(raw) => Ident::new_raw(raw, span),
        None => Ident::new(name, span),
    }
}

fn unknown_binding(placeholder: &Placeholder, sig: &Signature, bindings: &[String]) -> String {
    let name = &sig.ident;
    let root = &placeholder.root;
    let what = if root == "self" {
        format!("`{name}` is not a method, so the key cannot use `self`")
    } else {
        format!("no parameter `{root}` in `{name}`")
    };
    if bindings.is_empty() {
        return format!(
            "{what}, and `{name}` has no parameters: write a fixed key, or add the parameter \
             the key depends on"
        );
    }
    let list = bindings
        .iter()
        .map(|b| format!("`{b}`"))
        .collect::<Vec<_>>()
        .join(", ");
    match bindings
        .iter()
        .filter(|b| edit_distance(b, root) <= 2.min(root.len() / 2 + 1))
        .min_by_key(|b| edit_distance(b, root))
    {
        Some(close) => format!(
            "{what}; did you mean `{}`? the key can use: {list}",
            Placeholder {
                root: close.clone(),
                ..placeholder.clone()
            }
            .text()
        ),
        None => format!("{what}; the key can use: {list}"),
    }
}

/// Levenshtein distance, for "did you mean".
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let above = row[j + 1];
            row[j + 1] = (above + 1)
                .min(row[j] + 1)
                .min(diagonal + usize::from(ca != *cb));
            diagonal = above;
        }
    }
    row[b.len()]
}

/// The span of `range` (bytes of the key's value) inside the literal, where the compiler
/// can give one (nightly); the whole literal otherwise. Escapes in the source (`\"`) shift
/// offsets, so the sub-span is only taken for literals written without any.
fn subspan(lit: &LitStr, range: &std::ops::Range<usize>) -> Span {
    let token = lit.token();
    let source = token.to_string();
    if source.starts_with('"') && !source.contains('\\') && range.end < source.len() - 1 {
        if let Some(span) = token.subspan(range.start + 1..range.end + 1) {
            return span;
        }
    }
    lit.span()
}

trait Keep {
    fn keep<T, E: IntoIterator<Item = syn::Error>>(&mut self, result: Result<T, E>) -> Option<T>;
}

impl Keep for Vec<syn::Error> {
    fn keep<T, E: IntoIterator<Item = syn::Error>>(&mut self, result: Result<T, E>) -> Option<T> {
        result.map_err(|e| self.extend(e)).ok()
    }
}

#[cfg(test)]
mod tests;
