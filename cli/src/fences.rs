//! `leasehold fences`: the fence ceiling of a deployment, for moving its locks to another.

use leasehold::Locker;

use crate::connect::Target;
use crate::exit::{self, Failure};

/// Prints the ceiling alone on stdout (for scripts), and what to do with it on stderr.
///
/// # Errors
/// A [`Failure`] when the engine fails.
pub(crate) async fn run(locker: &Locker, target: &Target) -> Result<u8, Failure> {
    let ceiling = locker
        .fence_ceiling()
        .await
        .map_err(|e| target.failure(e))?;
    println!("{ceiling}");
    eprintln!(
        "every fence and leader term of {} (prefix {:?}) so far is below {ceiling}; to move \
         these locks to another deployment, give each of its processes fence_offset = \
         {ceiling} (LEASEHOLD_FENCE_OFFSET)",
        target.endpoint(),
        target.prefix
    );
    Ok(exit::OK)
}
