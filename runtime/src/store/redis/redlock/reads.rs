//! Read locks over the nodes: each node lets a reader in by its own rule (read_acquire.lua:
//! no writer holds the lock there or waits for it), and the reader is in when a majority did,
//! within the validity: the rule of the lock ([`RedLock::acquire`]). A failed attempt's
//! shares, and a released reader's, are given back on every node.
//!
//! Exclusion: a writer needs a majority of nodes holding its lock, a reader a majority
//! holding its share; two majorities share a node, and no node holds both. A writer that
//! waits is queued, and marks the lock (`R+`), on each node it asked, so new readers are held
//! back there, as on one server; a writer that left is withdrawn from every node.
//!
//! Fences: a reader's fence must be at or above every fence handed out for the key before,
//! and below every later writer's. Each granting node answers its current fence
//! (`max(counter, clock)`, nothing reserved); the reader's fence is the highest answer of its
//! majority, and every granting node that answered less is raised to it before the reader is
//! let in: the fence round of the lock, for the same reason.
//! - At or above every earlier fence: an earlier token was raised on its holder's majority,
//!   which shares a node with the reader's, whose answer is at least that counter.
//! - Below every later writer's: the nodes' counters differ (a failed attempt may have
//!   incremented a minority), so the highest answer may come from a node that a later
//!   writer's majority misses. Raised, every node of the reader's majority counts at least
//!   the reader's fence, the later writer's majority shares one of them, and that node
//!   reserves above its counter. Without the raise, that writer could get a smaller token
//!   than a reader before it (the integration test
//!   `a_readers_fence_from_a_node_ahead_is_below_the_next_writers` sets one node ahead).
//!
//! A reader whose nodes all answer the same fence costs one round trip; otherwise two, and a
//! write on the nodes that lagged.
//!
//! Nodes that fail: a reader holds while a majority renews its share, as a lock does, so a
//! minority of nodes down costs it nothing. A node that restarts empty forgets the shares it
//! held: a reader that held every node keeps a majority through one such restart; one that
//! held a bare majority does not, a writer can get in before the reader's next renewal
//! reports the loss (within a third of the lease), and only fences order them then. Hence
//! RedLock's rule for restarts: a node without persistence stays down longer than a lease.
