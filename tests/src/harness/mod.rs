//! The servers the suites run on: the test kit's throwaway servers and fault-injecting TCP
//! proxy (`leasehold_testkit::servers`, re-exported here whole), and lookup of sibling
//! binaries ([`cargo_bin`]), which only this workspace's tests need.
//!
//! ```no_run
//! use leasehold_tests::harness::{ProxyMode, RedisServer, TcpProxy};
//!
//! # async fn demo() {
//! let redis = RedisServer::start().await;
//! let proxy = TcpProxy::start(redis.addr()).await;
//! proxy.set_mode(ProxyMode::Stall); // a partition: bytes are held, nothing answers
//! # }
//! ```

mod cargo_bin;

pub use cargo_bin::cargo_bin;
pub use leasehold_testkit::servers::*;
