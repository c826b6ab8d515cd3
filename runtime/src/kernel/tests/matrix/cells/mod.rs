//! The cells of the matrix, one file per option (`hold` and `lost` two each): what the option
//! means on each primitive, or how it is refused.

use super::*;

pub(super) mod fair;
pub(super) mod hold;
pub(super) mod lost;
pub(super) mod profile;
pub(super) mod refused;
pub(super) mod unfenced;
pub(super) mod wait_zero;
