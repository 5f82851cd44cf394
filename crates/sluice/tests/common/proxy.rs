//! A TCP proxy for fault injection: forwards a local port to a target and can be switched,
//! at any moment, to stall (hold every byte in both directions, connections stay open: a
//! network that loses packets), to lose answers (requests still reach the target, its
//! answers are thrown away) or to cut (close every connection and refuse new ones: a
//! network that answers with resets). Switching back to pass resumes stalled traffic.
#![allow(dead_code)] // each test binary uses the modes it needs

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::{Arc, Condvar, Mutex};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    Pass,
    Stall,
    /// Forward client bytes; discard what the target sends back.
    LoseAnswers,
    Cut,
}

struct Shared {
    mode: Mutex<Mode>,
    changed: Condvar,
    /// Both ends of every open connection, to close them on a cut.
    conns: Mutex<Vec<TcpStream>>,
}

impl Shared {
    fn lock_mode(&self) -> std::sync::MutexGuard<'_, Mode> {
        self.mode.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Wait while stalled; then whether to forward these bytes (Some(false): drop them) or
    /// to close (None, when cut). `answers`: the bytes come from the target.
    fn wait_to_pass(&self, answers: bool) -> Option<bool> {
        let mut mode = self.lock_mode();
        while *mode == Mode::Stall {
            mode = self.changed.wait(mode).unwrap_or_else(|e| e.into_inner());
        }
        match *mode {
            Mode::Cut => None,
            Mode::LoseAnswers => Some(!answers),
            _ => Some(true),
        }
    }
}

pub struct Proxy {
    pub port: u16,
    shared: Arc<Shared>,
}

impl Proxy {
    /// Listen on a free loopback port and forward to `target` (`host:port`).
    pub fn start(target: String) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let shared = Arc::new(Shared {
            mode: Mutex::new(Mode::Pass),
            changed: Condvar::new(),
            conns: Mutex::new(Vec::new()),
        });
        let s = Arc::clone(&shared);
        std::thread::spawn(move || {
            for client in listener.incoming() {
                let Ok(client) = client else { continue };
                if *s.lock_mode() == Mode::Cut {
                    continue; // dropped: the peer sees the connection closed
                }
                let Ok(server) = TcpStream::connect(&target) else {
                    continue;
                };
                let _ = client.set_nodelay(true);
                let _ = server.set_nodelay(true);
                {
                    let mut conns = s.conns.lock().unwrap_or_else(|e| e.into_inner());
                    conns.retain(|c| c.peer_addr().is_ok());
                    for c in [&client, &server] {
                        if let Ok(c) = c.try_clone() {
                            conns.push(c);
                        }
                    }
                }
                for (from, to, answers) in [(&client, &server, false), (&server, &client, true)] {
                    let (Ok(from), Ok(to)) = (from.try_clone(), to.try_clone()) else {
                        continue;
                    };
                    let s = Arc::clone(&s);
                    std::thread::spawn(move || pump(from, to, answers, &s));
                }
            }
        });
        Proxy { port, shared }
    }

    pub fn set(&self, mode: Mode) {
        *self.shared.lock_mode() = mode;
        self.shared.changed.notify_all();
        if mode == Mode::Cut {
            for c in self
                .shared
                .conns
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .drain(..)
            {
                let _ = c.shutdown(Shutdown::Both);
            }
        }
    }
}

/// Copy `from` to `to`; `answers` says this is the target's direction.
fn pump(mut from: TcpStream, mut to: TcpStream, answers: bool, s: &Shared) {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = match from.read(&mut buf) {
            Ok(0) | Err(_) => 0,
            Ok(n) => n,
        };
        let forward = s.wait_to_pass(answers);
        let failed = match forward {
            None => true,
            Some(_) if n == 0 => true,
            Some(true) => to.write_all(&buf[..n]).is_err(),
            Some(false) => false,
        };
        if failed {
            let _ = to.shutdown(Shutdown::Both);
            let _ = from.shutdown(Shutdown::Both);
            return;
        }
    }
}
