//! Who may change a locker's znodes: with credentials, the identity that created them alone;
//! and the check, when an authenticated session opens, that its identity may create locks at
//! all (ZooKeeper's digest scheme takes a wrong password without a word, as another identity).

use zookeeper_client as zk;

use super::names::ROOT;
use super::ZooKeeper;
use crate::error::LockError;
use crate::store::sequenced::tag;
use crate::store::token::OwnerToken;

/// What a write-like permission of `world:anyone` on the root lets anyone do.
const WRITES: [(zk::Permission, &str); 4] = [
    (zk::Permission::CREATE, "create"),
    (zk::Permission::DELETE, "delete"),
    (zk::Permission::WRITE, "write"),
    (zk::Permission::ADMIN, "admin"),
];

impl ZooKeeper {
    /// The ACL of every znode this locker creates (the root, each lock's container, each
    /// contender): with credentials, every permission to the identity that created it and
    /// none to anyone else, reading included (the names are lock keys, which may carry user
    /// data, and a contender's data is its owner token or a leader record); without, every
    /// permission to anyone, as ZooKeeper has it by default.
    pub(super) fn acls(&self) -> zk::Acls<'static> {
        if self.ensemble.authenticated() {
            zk::Acls::creator_all()
        } else {
            zk::Acls::anyone_all()
        }
    }

    /// Checks what a new authenticated session may do under the root, so that credentials
    /// the ensemble does not accept fail the build rather than the first lock: a dry run of
    /// the create of a lock container (in one transaction with a check that fails, so nothing
    /// is written), which the server refuses with `NoAuth` when the root belongs to another
    /// identity. A missing root is created, with this identity's ACL. A root that anyone may
    /// change (made by an unauthenticated locker) is said in a warning: its locks are not
    /// protected until an operator sets its ACL.
    ///
    /// # Errors
    /// [`LockError::Config`] when the server refuses this identity.
    pub(super) async fn check_access(&self, client: &zk::Client) -> Result<(), LockError> {
        let probe = format!("{ROOT}/probe-{}", tag(&OwnerToken::generate()));
        let options = zk::CreateMode::Ephemeral.with_acls(self.acls());
        let mut multi = client.new_multi_writer();
        let commit = multi
            .add_create(&probe, &[], &options)
            .and_then(|()| multi.add_check_version(&probe, i32::MAX))
            .map(|()| multi.commit());
        let commit = match commit {
            Ok(commit) => commit,
            Err(e) => return Err(self.failed("refused a create", e)),
        };
        let limit = self.settings.op_timeout;
        let answer = match tokio::time::timeout(limit, commit).await {
            Ok(answer) => answer,
            Err(_) => return Err(self.late(limit)),
        };
        match answer {
            // The create was allowed; the check rolled it back.
            Err(zk::MultiWriteError::OperationFailed { index: 1, .. }) => {}
            Err(zk::MultiWriteError::OperationFailed {
                index: 0,
                source: zk::Error::NoNode,
            }) => {
                // No root yet: made now, this identity's alone.
                let options = zk::CreateMode::Persistent.with_acls(self.acls());
                return match tokio::time::timeout(limit, client.create(ROOT, &[], &options)).await {
                    Ok(Ok(_) | Err(zk::Error::NodeExists)) => Ok(()),
                    Ok(Err(zk::Error::NoNode)) => Err(LockError::config(format!(
                        "zookeeper at {}: the chroot of the connect string does not exist; an \
                         operator creates it first (zkCli.sh: create /<chroot>)",
                        self.hosts
                    ))),
                    Ok(Err(e)) => Err(self.failed("refused a create", e)),
                    Err(_) => Err(self.late(limit)),
                };
            }
            Err(zk::MultiWriteError::OperationFailed { source, .. })
            | Err(zk::MultiWriteError::RequestFailed { source }) => {
                return Err(self.failed(&format!("refused to create locks under {ROOT}"), source))
            }
            // Cannot be (the check cannot pass): the probe goes with the session anyway.
            Ok(_) => {
                let _ = tokio::time::timeout(limit, client.delete(&probe, None)).await;
            }
        }
        self.warn_if_open(client).await;
        Ok(())
    }

    /// Warns when anyone may change the root: its locks are then open to anyone who can reach
    /// the ensemble, whatever ACL this locker gives the znodes it creates.
    async fn warn_if_open(&self, client: &zk::Client) {
        let limit = self.settings.op_timeout;
        let Ok(Ok((acls, _))) = tokio::time::timeout(limit, client.get_acl(ROOT)).await else {
            return; // not readable to us: not open to anyone either
        };
        let open: Vec<&str> = WRITES
            .iter()
            .filter(|(permission, _)| {
                acls.iter().any(|acl| {
                    acl.scheme() == "world"
                        && acl.id() == "anyone"
                        && acl.permission().has(*permission)
                })
            })
            .map(|(_, name)| *name)
            .collect();
        if !open.is_empty() {
            tracing::warn!(
                root = ROOT,
                "zookeeper at {}: anyone may {} under {ROOT} (an unauthenticated locker created \
                 it): the locks there are not protected by this locker's credentials until an \
                 operator, authenticated as this locker, runs `setAcl -R {ROOT} auth::cdrwa`",
                self.hosts,
                open.join(", "),
            );
        }
    }

    /// Creates `path` with this locker's ACL if missing.
    pub(super) async fn ensure(
        &self,
        client: &zk::Client,
        path: &str,
        mode: zk::CreateMode,
    ) -> Result<(), LockError> {
        let limit = self.settings.op_timeout;
        let options = mode.with_acls(self.acls());
        match tokio::time::timeout(limit, client.create(path, &[], &options)).await {
            Ok(Ok(_) | Err(zk::Error::NodeExists)) => Ok(()),
            Ok(Err(e)) => Err(self.failed("refused a create", e)),
            Err(_) => Err(self.late(limit)),
        }
    }
}
