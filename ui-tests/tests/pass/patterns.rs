//! Placeholders that name bindings inside parameter patterns, fields and tuple fields.

#![deny(warnings)]

use leasehold::{distributed_lock, LockError};

struct Path<T>(T);

struct Order {
    customer_id: u64,
    lines: (String, u32),
}

struct Point {
    x: i32,
    y: i32,
}

#[distributed_lock(key = "order:<id>")]
async fn tuple_struct(Path(id): Path<u64>) -> Result<u64, LockError> {
    Ok(id)
}

#[distributed_lock(key = "stock:<shop>/<sku>")]
async fn nested(Path((shop, sku)): Path<(String, String)>) -> Result<String, LockError> {
    Ok(shop + &sku)
}

#[distributed_lock(key = "customer:<order.customer_id>:<order.lines.0>:<path.0>")]
async fn fields(order: Order, path: (u8, u8)) -> Result<u32, LockError> {
    Ok(order.lines.1 + u32::from(path.1))
}

#[distributed_lock(key = "point:<x>,<why>")]
async fn struct_pattern(Point { x, y: why }: Point, &(a, _): &(u8, u8)) -> Result<i32, LockError> {
    Ok(x + why + i32::from(a))
}

#[distributed_lock(key = "all:<all.0>:<first>")]
async fn at_pattern(all @ (first, _): (u8, u8), mut counter: u32) -> Result<u32, LockError> {
    counter += u32::from(all.1 + first);
    Ok(counter)
}

#[distributed_lock(key = "raw:<r#type>")]
async fn raw_ident(r#type: &str) -> Result<(), LockError> {
    let _ = r#type;
    Ok(())
}

/// Builds the future without running it: the runtime is not needed to type-check.
fn built<F: std::future::Future>(_: F) {}

pub(crate) fn main() {
    built(tuple_struct(Path(1)));
    built(nested(Path(("a".into(), "b".into()))));
    let order = Order {
        customer_id: 1,
        lines: ("x".into(), 2),
    };
    let _ = order.customer_id;
    built(fields(order, (1, 2)));
    built(struct_pattern(Point { x: 1, y: 2 }, &(1, 2)));
    built(at_pattern((3, 4), 0));
    built(raw_ident("t"));
}
