//! Starting a server: `initdb`, the postmaster spawned as the unprivileged user, and the wait
//! until it answers; the leftovers of a killed one cleared first.

use std::fs;
use std::net::{Ipv4Addr, SocketAddr};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use std::time::Duration;

use tokio_postgres::{NoTls, SimpleQueryMessage};

use crate::servers::process;
use crate::servers::server::{Answer, LaunchError};

use super::*;

impl PgServer {
    pub(super) fn data_dir(&self) -> PathBuf {
        self.dir().join(DATA_DIR)
    }

    /// Spawns the postmaster and waits until it accepts connections, or says why not.
    pub(super) async fn launch(&self) -> Result<(), LaunchError> {
        let log_start = self.process.log_len();
        self.spawn();
        self.wait_ready(log_start, STARTUP_TIMEOUT).await
    }

    /// Makes the cluster in `data/`, as the server's user.
    ///
    /// # Panics
    ///
    /// If `initdb` cannot be run, fails, or takes more than 60 s.
    pub(super) async fn initdb(&self, binaries: &Binaries) {
        let mut cmd = Command::new(&binaries.initdb);
        cmd.arg("-D")
            .arg(self.data_dir())
            .args(["--auth=trust", "-U", "postgres", "--no-sync", "-E", "UTF8"])
            .arg("--locale=C")
            // Spares initdb its scan of the time zone database.
            .env("TZ", "UTC");
        self.prepare(&mut cmd);
        let mut child = process::spawn(cmd, self.dir().to_owned()).unwrap_or_else(|e| {
            panic!(
                "cannot run {} for {}: {e} (run scripts/ensure-postgres, or name the directory \
                 in {BIN_VAR})",
                binaries.initdb.display(),
                self.describe()
            )
        });
        let Some(status) = process::finish(&mut child, INITDB_TIMEOUT).await else {
            panic!(
                "initdb for {} did not finish within {INITDB_TIMEOUT:?}\n{}",
                self.describe(),
                self.log_tail()
            );
        };
        assert!(
            status.success(),
            "initdb for {} exited with {status}\n{}",
            self.describe(),
            self.log_tail()
        );
    }

    /// Runs the postmaster, without waiting for it to accept connections.
    ///
    /// # Panics
    ///
    /// If `postgres` cannot be found or run.
    pub(super) fn spawn(&self) {
        let postgres = &binaries().postgres;
        let mut cmd = Command::new(postgres);
        cmd.arg("-D")
            .arg(self.data_dir())
            .arg("-p")
            .arg(self.port.to_string())
            .arg("-k")
            .arg(self.dir())
            .args(["-c", "listen_addresses=127.0.0.1"])
            .args(["-c", "shared_buffers=16MB"])
            .args(["-c", "max_connections=200"])
            .args(["-c", "fsync=off"])
            // Files in data/ rather than /dev/shm, so a killed server leaves nothing outside
            // its directory.
            .args(["-c", "dynamic_shared_memory_type=mmap"])
            .args(["-c", "huge_pages=off"])
            .args(["-c", "log_min_messages=warning"]);
        if self.options.tls.is_some() {
            let tls = self.dir().join(TLS_DIR);
            let setting = |name: &str, file: &str| format!("{name}={}", tls.join(file).display());
            cmd.args(["-c", "ssl=on"])
                .args(["-c", &setting("ssl_cert_file", "server.crt")])
                .args(["-c", &setting("ssl_key_file", "server.key")]);
            if self.options.client_ca.is_some() {
                cmd.args(["-c", &setting("ssl_ca_file", "client-ca.crt")]);
            }
        }
        // Out of the test binary's process group: a Ctrl-C meant for the tests is no fast
        // shutdown. (The backends call setsid(), so the group is not the whole server.)
        cmd.process_group(0);
        self.prepare(&mut cmd);
        if let Err(e) = self.process.spawn(cmd) {
            panic!(
                "cannot run {} for {}: {e} (run scripts/ensure-postgres, or name the directory \
                 in {BIN_VAR})",
                postgres.display(),
                self.describe()
            )
        }
    }

    /// What `initdb` and `postgres` share: the user, the directory, the environment, the log.
    pub(super) fn prepare(&self, cmd: &mut Command) {
        if let Some(user) = self.run_as {
            cmd.uid(user.uid).gid(user.gid);
        }
        cmd.current_dir(self.dir())
            // English messages, which `wait_ready` reads.
            .env("LC_ALL", "C")
            // Ours are on the command line.
            .env_remove("PGDATA")
            .env_remove("PGPORT")
            .stdin(Stdio::null());
        if let Err(why) = self.process.log_to(cmd) {
            panic!("{why}");
        }
    }

    /// Waits until the postmaster just spawned accepts connections as itself, or says why not. A
    /// postmaster that will not serve is killed.
    pub(super) async fn wait_ready(
        &self,
        log_start: u64,
        within: Duration,
    ) -> Result<(), LaunchError> {
        self.process
            .wait_launched(log_start, within, || async {
                match self.probe().await {
                    Ok(data_dir) if same_dir(Path::new(&data_dir), &self.data_dir()) => {
                        Answer::Ours
                    }
                    // Another server answers on the port; ours cannot bind it.
                    Ok(_) => Answer::Theirs,
                    Err(why) => Answer::NotYet(why),
                }
            })
            .await
    }

    /// Connects and asks for the data directory, within [`PROBE_TIMEOUT`]: which server answers
    /// on the port, or why none does.
    pub(super) async fn probe(&self) -> Result<String, String> {
        let exchange = async {
            let (client, connection) = self
                .admin_config()
                .connect(NoTls)
                .await
                .map_err(|e| format!("cannot connect: {e}"))?;
            tokio::spawn(async move {
                let _ = connection.await;
            });
            let messages = client
                .simple_query("SELECT current_setting('data_directory')")
                .await
                .map_err(|e| format!("SELECT: {e}"))?;
            messages
                .iter()
                .find_map(|message| match message {
                    SimpleQueryMessage::Row(row) => row.get(0).map(str::to_owned),
                    _ => None,
                })
                .ok_or_else(|| "SELECT gave no row".to_owned())
        };
        tokio::time::timeout(PROBE_TIMEOUT, exchange)
            .await
            .unwrap_or_else(|_| Err(format!("no answer within {PROBE_TIMEOUT:?}")))
    }
}

/// What messages call the server on `port` in `dir`.
pub(super) fn label(port: u16, dir: &Path) -> String {
    format!(
        "postgres at {} ({})",
        SocketAddr::from((Ipv4Addr::LOCALHOST, port)),
        dir.display()
    )
}

/// Removes the lock file and the System V shared memory segment it names, which a killed
/// postmaster leaves in the server's directory `dir`; none of its processes may be alive.
pub(super) fn clear_crash_leftovers(dir: &Path) {
    let lock_file = dir.join(DATA_DIR).join(LOCK_FILE);
    let Ok(lock) = fs::read_to_string(&lock_file) else {
        return;
    };
    // Line 7 is "KEY ID" of the segment, once the postmaster has made it.
    let segment = lock.lines().nth(6).and_then(|line| {
        let mut numbers = line.split_whitespace().map(str::parse::<i64>);
        Some((numbers.next()?.ok()?, numbers.next()?.ok()?))
    });
    if let Some((key, id)) = segment {
        remove_segment(key, id);
    }
    let _ = fs::remove_file(&lock_file);
}

/// Removes System V shared memory segment `id` if it still has `key` (ids are reused) and no
/// process is attached.
#[cfg(target_os = "linux")]
fn remove_segment(key: i64, id: i64) {
    let (Ok(key), Ok(id)) = (libc::key_t::try_from(key), libc::c_int::try_from(id)) else {
        return;
    };
    // SAFETY: `shmid_ds` is plain data, for which all zeroes is a valid value.
    let mut status: libc::shmid_ds = unsafe { std::mem::zeroed() };
    // SAFETY: IPC_STAT writes one `shmid_ds` into `status`; IPC_RMID takes no buffer.
    unsafe {
        if libc::shmctl(id, libc::IPC_STAT, &mut status) == 0
            && status.shm_perm.__key == key
            && status.shm_nattch == 0
        {
            libc::shmctl(id, libc::IPC_RMID, std::ptr::null_mut());
        }
    }
}

#[cfg(not(target_os = "linux"))]
fn remove_segment(_key: i64, _id: i64) {}

/// Whether two paths name the same directory (the server may spell its own differently).
fn same_dir(a: &Path, b: &Path) -> bool {
    a == b
        || matches!(
            (fs::canonicalize(a), fs::canonicalize(b)),
            (Ok(a), Ok(b)) if a == b
        )
}
