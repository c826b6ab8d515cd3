// Every problem is reported in one build, and `buy` still exists for `main`.
use leasehold::distributed_lock;

#[distributed_lock(key = "order:<idd>", lease = "soon", watchdog = 1, colour = "red")]
fn buy(id: u64) -> u64 {
    id
}

fn main() {
    let _ = buy(1);
}
