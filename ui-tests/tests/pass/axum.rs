//! axum handlers: the locked future stays `Send` (axum's `Handler` requires it), state and
//! path extractors bind what the key uses, and `impl IntoResponse` works in the return type.

#![deny(warnings)]

use std::future::Future;
use std::sync::Arc;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use leasehold::{distributed_lock, LockError, Locker};

struct AppState {
    locker: Locker,
}

#[derive(Debug)]
enum AppError {
    Lock(LockError),
    NotFound,
}

impl From<LockError> for AppError {
    fn from(e: LockError) -> Self {
        AppError::Lock(e)
    }
}

impl IntoResponse for AppError {
    fn into_response(self) -> Response {
        match self {
            AppError::Lock(e) => (StatusCode::CONFLICT, e.to_string()).into_response(),
            AppError::NotFound => StatusCode::NOT_FOUND.into_response(),
        }
    }
}

#[distributed_lock(key = "order:<id>", lease = "10s", locker = state.locker, guard = lock)]
async fn buy(State(state): State<Arc<AppState>>, Path(id): Path<u64>) -> Result<String, AppError> {
    let _ = &state;
    tokio::task::yield_now().await;
    if id == 0 {
        return Err(AppError::NotFound);
    }
    Ok(format!("{id}:{}", lock.fence()))
}

#[distributed_lock(key = "stock:<shop>/<sku>", locker = state.locker)]
async fn stock(
    State(state): State<Arc<AppState>>,
    Path((shop, sku)): Path<(String, u32)>,
) -> Result<impl IntoResponse, AppError> {
    let _ = &state;
    tokio::task::yield_now().await;
    Ok((StatusCode::OK, format!("{shop}/{sku}")))
}

fn is_send<F, A, B, Fut>(_: F)
where
    F: Fn(A, B) -> Fut,
    Fut: Future + Send,
{
}

pub(crate) fn main() {
    is_send(buy);
    is_send(stock);
    let _router: Router<Arc<AppState>> = Router::new()
        .route("/orders/{id}", post(buy))
        .route("/stock/{shop}/{sku}", get(stock));
}
