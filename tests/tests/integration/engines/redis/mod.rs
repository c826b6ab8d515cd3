//! The Redis deployments and what runs on them: ACLs, Cluster, Sentinel, RedLock.

mod acl;
mod cluster;
mod redlock;
mod sentinel;
