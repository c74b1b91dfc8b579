//! A minimal Redis client: the `redis://` URL and one RESP2 connection.
//!
//! The shared tier ([`crate::remote`]) needs five commands (AUTH, SELECT,
//! GET, SET with NX/PX, DEL), each a request and one reply, so this is a
//! blocking client over [`std::net::TcpStream`]: no event loop, no pool, no
//! dependency. Each command has one deadline, its connection's timeout from
//! when it is sent: every read and write waits at most what is left of it, so
//! a server that answers a byte at a time still costs one timeout at most.
//! A reply it cannot parse, a reply line longer than [`MAX_LINE`], a
//! deadline passed or a closed socket is an [`std::io::Error`]; the caller
//! drops the connection and opens another.

use std::io::{self, BufRead, BufReader, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

/// A parsed `redis://[[user]:password@]host[:port][/db][?name=value&...]` URL.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Url {
    pub host: String,
    pub port: u16,
    pub db: u32,
    pub user: Option<String>,
    pub password: Option<String>,
    /// The query's `name=value` pairs, in order (the tier's settings).
    pub query: Vec<(String, String)>,
}

/// `url` for a message: what lies between `redis://` and the last `@` (user
/// and password) is shown as `***`.
pub fn redacted(url: &str) -> String {
    match (url.strip_prefix("redis://"), url.rfind('@')) {
        (Some(_), Some(at)) if at >= "redis://".len() => format!("redis://***{}", &url[at..]),
        _ => url.to_owned(),
    }
}

impl Url {
    /// Parse `url`; a scheme other than `redis`, an empty host, a port or db
    /// that is no number, or a query pair without `=` is an error naming it.
    ///
    /// Messages show the URL with its credentials cut ([`redacted`]).
    pub fn parse(url: &str) -> Result<Self, String> {
        let shown = redacted(url);
        let rest = url
            .strip_prefix("redis://")
            .ok_or_else(|| format!("{shown:?}: the shared cache URL must start with redis://"))?;
        let (rest, query) = match rest.split_once('?') {
            Some((r, q)) => (r, q),
            None => (rest, ""),
        };
        let (auth, rest) = match rest.rsplit_once('@') {
            Some((a, r)) => (Some(a), r),
            None => (None, rest),
        };
        let (hostport, db) = match rest.split_once('/') {
            Some((h, "")) => (h, 0),
            Some((h, d)) => (
                h,
                d.parse()
                    .map_err(|_| format!("{shown:?}: database {d:?} is not a number"))?,
            ),
            None => (rest, 0),
        };
        let (host, port) = match hostport.strip_prefix('[') {
            Some(v6) => {
                let (h, p) = v6
                    .split_once(']')
                    .ok_or_else(|| format!("{shown:?}: an IPv6 host without ']'"))?;
                if !p.is_empty() && !p.starts_with(':') {
                    return Err(format!("{shown:?}: {p:?} after an IPv6 host is no :port"));
                }
                (h, p.strip_prefix(':'))
            }
            None => match hostport.split_once(':') {
                Some((h, p)) => (h, Some(p)),
                None => (hostport, None),
            },
        };
        let port = match port {
            None => 6379,
            Some(p) => p
                .parse()
                .map_err(|_| format!("{shown:?}: port {p:?} is not a number"))?,
        };
        if host.is_empty() {
            return Err(format!("{shown:?}: no host"));
        }
        let (user, password) = match auth {
            None => (None, None),
            Some(a) => match a.split_once(':') {
                Some((u, p)) => ((!u.is_empty()).then(|| u.to_owned()), Some(p.to_owned())),
                None => (Some(a.to_owned()), None),
            },
        };
        let mut pairs = Vec::new();
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            let (k, v) = pair
                .split_once('=')
                .ok_or_else(|| format!("{shown:?}: query item {pair:?} is not name=value"))?;
            pairs.push((k.to_owned(), v.to_owned()));
        }
        Ok(Self {
            host: host.to_owned(),
            port,
            db,
            user,
            password,
            query: pairs,
        })
    }

    /// `host:port/db`, for messages (no credentials).
    pub fn address(&self) -> String {
        format!("{}:{}/{}", self.host, self.port, self.db)
    }
}

/// One reply.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reply {
    /// `+OK` and other simple strings.
    Status(String),
    /// `-ERR ...`: the server refused the command.
    Error(String),
    Int(i64),
    /// A bulk string; `None` is nil (a missing key, a SET NX that lost).
    Bulk(Option<Vec<u8>>),
}

/// One open connection, authenticated and on its database.
#[derive(Debug)]
pub struct Conn {
    reader: BufReader<TcpStream>,
    /// Each command's time, from when it is sent to the end of its reply.
    timeout: Duration,
}

/// Longest bulk reply read (a larger one is an error, not an allocation).
pub const MAX_BULK: usize = 64 << 20;

/// Longest reply line read (status, error, integer and bulk headers are short).
pub const MAX_LINE: usize = 64 << 10;

/// What is left until `deadline`, or a timeout error once it has passed.
fn left(deadline: Instant) -> io::Result<Duration> {
    let now = Instant::now();
    if now >= deadline {
        return Err(io::Error::new(
            io::ErrorKind::TimedOut,
            "redis: the command's deadline passed",
        ));
    }
    Ok(deadline - now)
}

impl Conn {
    /// Connect to `url` within `timeout` (the connection, and each command
    /// after: see the module header), then AUTH and SELECT as it says.
    pub fn open(url: &Url, timeout: Duration) -> io::Result<Self> {
        let addrs = (url.host.as_str(), url.port).to_socket_addrs()?;
        let mut last = io::Error::new(io::ErrorKind::NotFound, "no address");
        for addr in addrs {
            match TcpStream::connect_timeout(&addr, timeout) {
                Ok(stream) => {
                    stream.set_nodelay(true)?;
                    let mut conn = Self {
                        reader: BufReader::new(stream),
                        timeout,
                    };
                    conn.setup(url)?;
                    return Ok(conn);
                }
                Err(e) => last = e,
            }
        }
        Err(last)
    }

    fn setup(&mut self, url: &Url) -> io::Result<()> {
        if let Some(password) = &url.password {
            let reply = match &url.user {
                Some(user) => self.call(&[b"AUTH", user.as_bytes(), password.as_bytes()])?,
                None => self.call(&[b"AUTH", password.as_bytes()])?,
            };
            refused(reply, "AUTH")?;
        }
        if url.db != 0 {
            let db = url.db.to_string();
            refused(self.call(&[b"SELECT", db.as_bytes()])?, "SELECT")?;
        }
        Ok(())
    }

    /// Send one command (its arguments as bulk strings) and read its reply,
    /// all within the connection's timeout.
    pub fn call(&mut self, args: &[&[u8]]) -> io::Result<Reply> {
        let deadline = Instant::now() + self.timeout;
        let mut out = Vec::with_capacity(16 + args.iter().map(|a| a.len() + 16).sum::<usize>());
        out.extend_from_slice(format!("*{}\r\n", args.len()).as_bytes());
        for a in args {
            out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
            out.extend_from_slice(a);
            out.extend_from_slice(b"\r\n");
        }
        let mut sent = 0;
        while sent < out.len() {
            let stream = self.reader.get_mut();
            stream.set_write_timeout(Some(left(deadline)?))?;
            match stream.write(&out[sent..]) {
                Ok(0) => return Err(bad("the connection closed while a command was sent")),
                Ok(n) => sent += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        self.read_reply(deadline)
    }

    /// The buffered bytes, reading more (within `deadline`) when there are
    /// none; empty at the end of the stream.
    fn fill(&mut self, deadline: Instant) -> io::Result<&[u8]> {
        if self.reader.buffer().is_empty() {
            self.reader
                .get_ref()
                .set_read_timeout(Some(left(deadline)?))?;
        }
        loop {
            match self.reader.fill_buf() {
                Ok(_) => return Ok(self.reader.buffer()),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }

    fn read_line(&mut self, deadline: Instant) -> io::Result<Vec<u8>> {
        let mut line = Vec::new();
        loop {
            let buf = self.fill(deadline)?;
            if buf.is_empty() {
                return Err(bad("a reply line not ended by CRLF (connection closed?)"));
            }
            let (used, done) = match buf.iter().position(|&b| b == b'\n') {
                Some(at) => (at + 1, true),
                None => (buf.len(), false),
            };
            line.extend_from_slice(&buf[..used]);
            self.reader.consume(used);
            if line.len() > MAX_LINE {
                return Err(bad("a reply line over MAX_LINE"));
            }
            if done {
                break;
            }
        }
        if !line.ends_with(b"\r\n") {
            return Err(bad("a reply line not ended by CRLF (connection closed?)"));
        }
        line.truncate(line.len() - 2);
        Ok(line)
    }

    /// Exactly `data.len()` bytes, within `deadline`.
    fn read_exact(&mut self, data: &mut [u8], deadline: Instant) -> io::Result<()> {
        let mut got = 0;
        while got < data.len() {
            let buf = self.fill(deadline)?;
            if buf.is_empty() {
                return Err(bad("the connection closed inside a bulk reply"));
            }
            let n = buf.len().min(data.len() - got);
            data[got..got + n].copy_from_slice(&buf[..n]);
            self.reader.consume(n);
            got += n;
        }
        Ok(())
    }

    fn read_reply(&mut self, deadline: Instant) -> io::Result<Reply> {
        let line = self.read_line(deadline)?;
        let (kind, rest) = line.split_first().ok_or_else(|| bad("an empty reply"))?;
        let text = || String::from_utf8_lossy(rest).into_owned();
        let int = || -> io::Result<i64> {
            std::str::from_utf8(rest)
                .ok()
                .and_then(|s| s.parse().ok())
                .ok_or_else(|| bad("a malformed integer"))
        };
        match kind {
            b'+' => Ok(Reply::Status(text())),
            b'-' => Ok(Reply::Error(text())),
            b':' => Ok(Reply::Int(int()?)),
            b'$' => {
                let n = int()?;
                if n < 0 {
                    return Ok(Reply::Bulk(None));
                }
                let n = n as usize;
                if n > MAX_BULK {
                    return Err(bad("a bulk reply over MAX_BULK"));
                }
                let mut data = vec![0u8; n + 2];
                self.read_exact(&mut data, deadline)?;
                if !data.ends_with(b"\r\n") {
                    return Err(bad("a bulk reply not ended by CRLF"));
                }
                data.truncate(n);
                Ok(Reply::Bulk(Some(data)))
            }
            _ => Err(bad("a reply type this client does not use")),
        }
    }
}

fn bad(what: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, format!("redis: {what}"))
}

/// A setup command's reply: an error reply is an error naming the command.
fn refused(reply: Reply, command: &str) -> io::Result<()> {
    match reply {
        Reply::Error(e) => Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!("redis {command}: {e}"),
        )),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_parse_with_their_parts() {
        let u = Url::parse("redis://127.0.0.1:6390/2?timeout_ms=5&wait_ms=0").unwrap();
        assert_eq!((u.host.as_str(), u.port, u.db), ("127.0.0.1", 6390, 2));
        assert_eq!(u.query[1], ("wait_ms".into(), "0".into()));
        let u = Url::parse("redis://:s3cret@cache").unwrap();
        assert_eq!(
            (u.port, u.db, u.user, u.password),
            (6379, 0, None, Some("s3cret".into()))
        );
        let u = Url::parse("redis://bob:pw@[::1]:7000/").unwrap();
        assert_eq!(
            (u.host.as_str(), u.port, u.user),
            ("::1", 7000, Some("bob".into()))
        );
        for bad in [
            "http://x",
            "redis://",
            "redis://h:port",
            "redis://h/db",
            "redis://h?novalue",
            "redis://[::1]7000",
            "redis://[::1]x:7000",
        ] {
            assert!(Url::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn url_messages_show_no_credentials() {
        for bad in [
            "redis://:s3cretpw@cache:notaport",
            "redis://bob:s3cretpw@cache/zero",
            "redis://bob:s3cretpw@[::1",
            "redis://bob:s3cretpw@cache?x",
            "redis://bob:s3cretpw@",
        ] {
            let e = Url::parse(bad).unwrap_err();
            assert!(!e.contains("s3cretpw") && !e.contains("bob"), "{e}");
            assert!(e.starts_with("\"redis://***@"), "{e}");
        }
    }
}
