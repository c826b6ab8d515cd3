//! A minimal RESP client for the harness's own probes, one command per connection.
//!
//! Going around `redis::Client` keeps probes off the server's command statistics beyond the one
//! command sent, and works before a server is ready for a full client handshake.

use std::io;
use std::net::SocketAddr;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

/// A reply the probes understand.
#[derive(Debug)]
pub(crate) enum Reply {
    /// `+OK`, or a bulk string.
    Text(String),
    /// `-ERR ...`.
    Error(String),
}

/// Connects to `addr`, sends `args` as one command and reads one reply, all within `within`.
pub(crate) async fn command(
    addr: SocketAddr,
    args: &[&str],
    within: Duration,
) -> io::Result<Reply> {
    tokio::time::timeout(within, exchange(addr, args))
        .await
        .map_err(|_| {
            io::Error::new(
                io::ErrorKind::TimedOut,
                format!("{addr} did not answer within {within:?}"),
            )
        })?
}

async fn exchange(addr: SocketAddr, args: &[&str]) -> io::Result<Reply> {
    let mut stream = TcpStream::connect(addr).await?;
    let mut request = format!("*{}\r\n", args.len());
    for arg in args {
        request.push_str(&format!("${}\r\n{arg}\r\n", arg.len()));
    }
    stream.write_all(request.as_bytes()).await?;
    let mut reader = BufReader::new(stream);
    let mut line = String::new();
    if reader.read_line(&mut line).await? == 0 {
        return Err(io::ErrorKind::UnexpectedEof.into());
    }
    let line = line.trim_end();
    let invalid = || {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("unexpected reply {line:?}"),
        )
    };
    match line.split_at_checked(1).ok_or_else(invalid)? {
        ("+", text) => Ok(Reply::Text(text.to_owned())),
        ("-", error) => Ok(Reply::Error(error.to_owned())),
        ("$", len) => {
            let len: usize = len.parse().map_err(|_| invalid())?;
            let mut body = vec![0; len + 2];
            reader.read_exact(&mut body).await?;
            body.truncate(len);
            String::from_utf8(body)
                .map(Reply::Text)
                .map_err(|_| invalid())
        }
        _ => Err(invalid()),
    }
}
