//! `leasehold`: looks at the locks that applications hold in Redis, ZooKeeper, etcd,
//! PostgreSQL or MySQL (list, show, semaphore, watch, top, fences) and deletes one by force when its holder
//! is stuck. Built on the runtime's inspection API.

#![deny(missing_docs)]
#![forbid(unsafe_code)]

mod args;
mod connect;
mod display;
mod exit;
mod fences;
mod list;
mod release;
mod semaphore;
mod show;
mod top;
mod watch;

use std::process::ExitCode;

use args::{Command, Parsed};
use exit::Failure;

fn main() -> ExitCode {
    let parsed = match args::parse(std::env::args_os().skip(1)) {
        Ok(parsed) => parsed,
        Err(e) => return e.report(),
    };
    let invocation = match parsed {
        Parsed::Help(text) => {
            print!("{text}");
            return ExitCode::SUCCESS;
        }
        Parsed::Version => {
            println!("leasehold {}", env!("CARGO_PKG_VERSION"));
            return ExitCode::SUCCESS;
        }
        Parsed::Run(invocation) => invocation,
    };
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            return Failure::internal(format!("cannot start the async runtime: {e}")).report()
        }
    };
    let outcome = runtime.block_on(async {
        let target = connect::Target::resolve(&invocation.global)?;
        if let Command::Top(options) = &invocation.command {
            // It connects on its own: it starts while the engine is down, and shows it.
            return top::run(&target, options).await;
        }
        let locker = target.connect().await?;
        match invocation.command {
            Command::List { pattern } => list::run(&locker, &target, &pattern).await,
            Command::Show { key } => show::run(&locker, &target, &key).await,
            Command::Semaphore { key } => semaphore::run(&locker, &target, &key).await,
            Command::Release { key, yes } => release::run(&locker, &target, &key, yes).await,
            Command::Watch {
                key,
                interval,
                stop_after,
            } => watch::run(&locker, &target, &key, interval, stop_after).await,
            Command::Top(_) => unreachable!("`top` ran above"),
            Command::Fences { above } => fences::run(&locker, &target, above).await,
        }
    });
    match outcome {
        Ok(code) => code.into(),
        Err(failure) => failure.report(),
    }
}
