//! The web integrations (`web/` of the runtime): the actix middleware and the axum layer, and
//! the attribute on their handlers.

mod actix;
mod axum;
mod log_capture;
