//! The test harness's TCP proxy ([`TcpProxy`]) for scripts: `scripts/ab-shops-delayed-write`
//! puts the shops' connections behind proxies and holds, stalls and releases their bytes
//! with it, as the fault suite does from Rust. One process runs every proxy; it reads one
//! command per line on stdin and answers each with one line on stdout (`error: ...` when it
//! cannot), so a script drives it as a coprocess.
//!
//! ```text
//! start NAME HOST:PORT          a proxy to HOST:PORT        -> NAME 127.0.0.1:PORT
//! hold NAME PATTERN             hold the next connection whose client sends PATTERN, from
//!                               that request on (TcpProxy::hold_next_sending, Held::Requests)
//!                                                           -> ok
//! wait-caught MS NAME [NAME..]  the first NAME whose held connection was caught, waiting up
//!                               to MS milliseconds         -> NAME | none
//! release NAME                  deliver what NAME held, in order (disarms an unsprung hold)
//!                                                           -> ok
//! cut NAME                      close what NAME held        -> ok
//! mode NAME pass|stall|cut      every connection of NAME    -> ok
//! ```
//!
//! It ends at end of input; its proxies close with it.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::time::Duration;

use leasehold_tests::harness::{Held, ProxyMode, TcpProxy};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::time::Instant;

#[tokio::main]
async fn main() {
    let mut proxies: HashMap<String, TcpProxy> = HashMap::new();
    let mut lines = BufReader::new(tokio::io::stdin()).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        let words: Vec<&str> = line.split_whitespace().collect();
        if words.is_empty() {
            continue;
        }
        let answer = match run(&mut proxies, &words).await {
            Ok(answer) => answer,
            Err(e) => format!("error: {e}"),
        };
        // stdout is line-buffered: each answer leaves as it is printed.
        println!("{answer}");
    }
}

async fn run(proxies: &mut HashMap<String, TcpProxy>, words: &[&str]) -> Result<String, String> {
    let proxy = |name: &str| {
        proxies
            .get(name)
            .ok_or_else(|| format!("no proxy named {name:?}"))
    };
    match words {
        ["start", name, target] => {
            let target: SocketAddr = target
                .parse()
                .map_err(|e| format!("{target:?} is not HOST:PORT: {e}"))?;
            let started = TcpProxy::start(target).await;
            let answer = format!("{name} {}", started.addr());
            proxies.insert((*name).to_owned(), started);
            Ok(answer)
        }
        ["hold", name, pattern] => {
            proxy(name)?.hold_next_sending(pattern.as_bytes(), Held::Requests);
            Ok("ok".to_owned())
        }
        ["wait-caught", ms, names @ ..] if !names.is_empty() => {
            let ms: u64 = ms
                .parse()
                .map_err(|_| format!("{ms:?} is not a number of milliseconds"))?;
            let watched = names
                .iter()
                .map(|name| Ok((*name, proxy(name)?)))
                .collect::<Result<Vec<_>, String>>()?;
            let until = Instant::now() + Duration::from_millis(ms);
            loop {
                if let Some((name, _)) = watched.iter().find(|(_, p)| p.caught() > 0) {
                    return Ok((*name).to_owned());
                }
                if Instant::now() >= until {
                    return Ok("none".to_owned());
                }
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
        }
        ["release", name] => {
            proxy(name)?.release_held();
            Ok("ok".to_owned())
        }
        ["cut", name] => {
            proxy(name)?.cut_held();
            Ok("ok".to_owned())
        }
        ["mode", name, mode] => {
            let mode = match *mode {
                "pass" => ProxyMode::Pass,
                "stall" => ProxyMode::Stall,
                "cut" => ProxyMode::Cut,
                other => return Err(format!("mode {other:?}: expected pass, stall or cut")),
            };
            proxy(name)?.set_mode(mode);
            Ok("ok".to_owned())
        }
        _ => Err(format!("unknown command {:?}", words.join(" "))),
    }
}
