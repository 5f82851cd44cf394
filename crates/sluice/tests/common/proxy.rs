//! A TCP proxy for fault injection: forwards a local port to a target and can be switched,
//! at any moment, to stall (hold every byte in both directions, connections stay open: a
//! network that loses packets) or to cut (close every connection and refuse new ones: a
//! network that answers with resets). Switching back to pass resumes stalled traffic.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::{Arc, Condvar, Mutex};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    Pass,
    Stall,
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

    /// Wait while stalled; false when cut.
    fn wait_to_pass(&self) -> bool {
        let mut mode = self.lock_mode();
        while *mode == Mode::Stall {
            mode = self.changed.wait(mode).unwrap_or_else(|e| e.into_inner());
        }
        *mode == Mode::Pass
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
                for (from, to) in [(&client, &server), (&server, &client)] {
                    let (Ok(from), Ok(to)) = (from.try_clone(), to.try_clone()) else {
                        continue;
                    };
                    let s = Arc::clone(&s);
                    std::thread::spawn(move || pump(from, to, &s));
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

fn pump(mut from: TcpStream, mut to: TcpStream, s: &Shared) {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = match from.read(&mut buf) {
            Ok(0) | Err(_) => 0,
            Ok(n) => n,
        };
        if !s.wait_to_pass() || n == 0 || to.write_all(&buf[..n]).is_err() {
            let _ = to.shutdown(Shutdown::Both);
            let _ = from.shutdown(Shutdown::Both);
            return;
        }
    }
}
