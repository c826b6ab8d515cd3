//! `?`, early `return`, loops, closures and nested async blocks in the body behave as they
//! did before the attribute.

#![deny(warnings)]

use std::num::ParseIntError;

use leasehold::{distributed_lock, LockError};

#[derive(Debug)]
#[allow(dead_code)] // the payloads are only for `Debug`
enum AppError {
    Lock(LockError),
    Parse(ParseIntError),
    Empty,
}

impl From<LockError> for AppError {
    fn from(e: LockError) -> Self {
        AppError::Lock(e)
    }
}

impl From<ParseIntError> for AppError {
    fn from(e: ParseIntError) -> Self {
        AppError::Parse(e)
    }
}

async fn fetch(s: &str) -> Result<String, LockError> {
    Ok(s.to_owned())
}

#[distributed_lock(key = "parse:<input>")]
async fn question_mark(input: String) -> Result<u32, AppError> {
    // `?` converts a foreign error into the declared one; `input` is moved into the body.
    let n: u32 = input.trim().parse()?;
    let fetched = fetch(&input).await?;
    if fetched.is_empty() {
        return Err(AppError::Empty);
    }
    for i in 0..10 {
        if i > n {
            return Ok(i);
        }
    }
    let closure = |x: u32| -> Result<u32, AppError> { Ok(x + 1) };
    // A `?` inside a nested async block returns from that block, not from the body: the
    // point of this line, which clippy would simplify away.
    #[allow(clippy::needless_question_mark)]
    let nested = async { Ok::<_, AppError>(closure(n)?) }.await?;
    Ok(nested)
}

#[distributed_lock(key = "early")]
async fn early_return(flag: bool) -> Result<&'static str, AppError> {
    if flag {
        return Ok("early");
    }
    let v: Vec<u8> = Vec::new();
    v.first().ok_or(AppError::Empty)?;
    Ok("late")
}

#[distributed_lock(key = "unit")]
async fn unit_body() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    "1".parse::<u8>()?;
    Ok(())
}

#[distributed_lock(key = "anyhow-like")]
async fn boxed_error(s: &str) -> Result<u8, Box<dyn std::error::Error + Send + Sync>> {
    let n = s.parse::<u8>()?;
    Ok(n)
}

/// Builds the future without running it: the runtime is not needed to type-check.
fn built<F: std::future::Future>(_: F) {}

pub(crate) fn main() {
    built(question_mark("1".into()));
    built(early_return(true));
    built(unit_body());
    built(boxed_error("1"));
}
