//! What `#[distributed_lock]` must accept: every case is a module of this one test binary,
//! compiled with the lints it denies and its `main` run by a test of its name. (They were
//! trybuild pass cases, each linked as a binary of its own; a compile error is not their
//! point, so they build together. `tests/macro_ui.rs` keeps trybuild for what must be
//! refused.)

// For `renamed_crate`: a runtime reachable under another name, `::lh`.
extern crate leasehold as lh;

macro_rules! cases {
    ($($case:ident),* $(,)?) => {
        $(
            pub mod $case;

            #[test]
            fn $case() {
                self::$case::main();
            }
        )*
    };
}

cases!(
    actix,
    axum,
    control_flow,
    free_fn,
    generics,
    guard,
    keys,
    locker_exprs,
    methods,
    one_line_body,
    patterns,
    permits,
    profile,
    read_mode,
    renamed_crate,
    singleton_job,
    strict_lints,
    tracing_instrument,
    unfenced,
);
