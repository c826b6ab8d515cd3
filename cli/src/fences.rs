//! `leasehold fences`: the fence ceiling of a deployment, for moving its locks to another, and
//! (`--above`) the offset that puts the new deployment's fences above it.

use leasehold::Locker;

use crate::connect::Target;
use crate::exit::{self, Failure};

/// Prints the ceiling, or with `above` the offset above that ceiling, alone on stdout (for
/// scripts), and what to do with it on stderr.
///
/// # Errors
/// A [`Failure`] when the engine fails.
pub(crate) async fn run(
    locker: &Locker,
    target: &Target,
    above: Option<u64>,
) -> Result<u8, Failure> {
    if let Some(ceiling) = above {
        let offset = locker
            .fence_offset_above(ceiling)
            .await
            .map_err(|e| target.failure(e))?;
        println!("{offset}");
        eprintln!(
            "with fence_offset = {offset} (LEASEHOLD_FENCE_OFFSET) in each of its processes, \
             every fence and leader term of {} (prefix {:?}) from now on is above {ceiling}",
            target.endpoint(),
            target.prefix
        );
        return Ok(exit::OK);
    }
    let ceiling = locker
        .fence_ceiling()
        .await
        .map_err(|e| target.failure(e))?;
    println!("{ceiling}");
    eprintln!(
        "every fence and leader term of {} (prefix {:?}) so far is below {ceiling}; to move \
         these locks to another deployment, run `leasehold fences --above {ceiling}` against \
         it, and give each of its processes the fence_offset that prints \
         (LEASEHOLD_FENCE_OFFSET)",
        target.endpoint(),
        target.prefix
    );
    Ok(exit::OK)
}
