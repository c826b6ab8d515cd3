//! The shop processes the demo runs: copies of the demo's own executable serving a shop
//! (`demo --serve shop-axum ...`, the same code as the `shop-axum` binary, so building the
//! demo builds them), on free ports, waited for until they answer, and killed at the end, on
//! Ctrl-C, and (through the kernel's parent-death signal) even if the demo itself is killed.

use std::fs::File;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use leasehold_examples::client::HttpClient;

/// The two shops, alternated so that every round runs both frameworks.
pub const SHOPS: [&str; 2] = ["shop-actix", "shop-axum"];

/// `demo --serve SHOP [shop flags]` serves a shop instead of running the demo.
pub const SERVE_FLAG: &str = "--serve";

/// A running shop.
pub struct Shop {
    /// Which binary.
    pub name: &'static str,
    /// `http://127.0.0.1:PORT`.
    pub url: String,
    log: PathBuf,
}

/// Every process the demo started; shared with the Ctrl-C handler.
#[derive(Clone, Default)]
pub struct Fleet {
    children: Arc<Mutex<Vec<Child>>>,
}

impl Fleet {
    /// Starts `count` shops (alternating actix-web and axum) with `args` (which name the
    /// servers they use), and waits until each answers HTTP.
    ///
    /// # Errors
    /// What did not start, with the end of its log.
    pub async fn start(
        &self,
        count: usize,
        args: &[&str],
        logs: &Path,
    ) -> Result<Vec<Shop>, String> {
        let binary =
            std::env::current_exe().map_err(|e| format!("cannot find the demo's path: {e}"))?;
        let mut shops = Vec::new();
        for i in 0..count {
            let name = SHOPS[i % SHOPS.len()];
            let port = free_port()?;
            let log = logs.join(format!("{name}-{port}.log"));
            let out = File::create(&log).map_err(|e| format!("{}: {e}", log.display()))?;
            let err = out
                .try_clone()
                .map_err(|e| format!("{}: {e}", log.display()))?;
            let mut cmd = Command::new(&binary);
            cmd.args([SERVE_FLAG, name])
                .arg("--port")
                .arg(port.to_string())
                .args(args)
                .stdin(Stdio::null())
                .stdout(out)
                .stderr(err);
            die_with_parent(&mut cmd);
            let child = cmd
                .spawn()
                .map_err(|e| format!("cannot start {name} ({}): {e}", binary.display()))?;
            self.lock().push(child);
            shops.push(Shop {
                name,
                url: format!("http://127.0.0.1:{port}"),
                log,
            });
        }
        let client = HttpClient::new(Duration::from_secs(2));
        for shop in &shops {
            self.wait_ready(&client, shop).await?;
        }
        Ok(shops)
    }

    /// Polls the shop until it answers (any status), for up to 30 s.
    async fn wait_ready(&self, client: &HttpClient, shop: &Shop) -> Result<(), String> {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if client
                .get(&format!("{}/stock/readiness-probe", shop.url))
                .await
                .is_ok()
            {
                return Ok(());
            }
            let exited = self
                .lock()
                .iter_mut()
                .any(|c| matches!(c.try_wait(), Ok(Some(_))));
            if exited || Instant::now() >= deadline {
                let log = std::fs::read_to_string(&shop.log).unwrap_or_default();
                let why = if exited {
                    "exited"
                } else {
                    "did not answer within 30s"
                };
                return Err(format!(
                    "{} at {} {why}; its log:\n{}",
                    shop.name,
                    shop.url,
                    log.trim_end()
                ));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Kills and reaps every process started so far.
    pub fn stop_all(&self) {
        for mut child in self.lock().drain(..) {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Child>> {
        self.children.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// A port that was free a moment ago.
fn free_port() -> Result<u16, String> {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(|e| format!("cannot find a free port on 127.0.0.1: {e}"))
}

/// Asks the kernel to SIGKILL the child when the thread that spawned it (the demo's main
/// thread, which lives as long as the demo) ends, so no shop outlives a killed demo.
#[cfg(target_os = "linux")]
fn die_with_parent(cmd: &mut Command) {
    use std::os::unix::process::CommandExt;
    let parent = std::process::id();
    // SAFETY: the closure runs between fork and exec and makes only async-signal-safe calls.
    unsafe {
        cmd.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong) == -1 {
                return Err(std::io::Error::last_os_error());
            }
            if libc::getppid() as u32 != parent {
                return Err(std::io::Error::other(
                    "the demo exited while starting a shop",
                ));
            }
            Ok(())
        });
    }
}

#[cfg(not(target_os = "linux"))]
fn die_with_parent(_cmd: &mut Command) {}
