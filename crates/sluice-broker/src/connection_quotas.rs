//! Connection limits (Kafka's ConnectionQuotas): `max.connections` over every listener of
//! the broker, `listener.name.<listener>.max.connections` for one listener, and
//! `max.connections.per.ip` with `max.connections.per.ip.overrides` per client address. All
//! are dynamic broker configs: a change applies to the next connection accepted;
//! connections already open are kept.
//!
//! As in Kafka, at the broker-wide limit a listener stops accepting until a connection
//! closes (new clients wait in the socket backlog rather than being refused), except the
//! inter-broker listener, which always accepts so replication and controller traffic are
//! never locked out by clients. An address at its own limit has its new connection closed
//! at once.

use std::collections::HashMap;
use std::net::{IpAddr, ToSocketAddrs};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use sluice_metadata::config::{parse_per_ip_overrides, BrokerConfig};
use tokio::sync::Notify;

/// The limits in force, from the static and dynamic broker configs.
#[derive(Clone, Debug, PartialEq)]
struct Limits {
    total: usize,
    /// `listener.name.<listener>.max.connections`, by lower-case listener name.
    per_listener: HashMap<String, usize>,
    per_ip: usize,
    overrides: HashMap<IpAddr, usize>,
    /// The `max.connections.per.ip.overrides` text `overrides` was resolved from.
    overrides_text: String,
}

impl Limits {
    /// The limits `c` sets; `previous` lends its resolved overrides when the text is the
    /// same (names are resolved only when the setting changes).
    fn from_config(c: &BrokerConfig, previous: Option<&Limits>) -> Self {
        let count = |key: &str| usize::try_from(c.number(key)).unwrap_or(0);
        let text = c
            .value("max.connections.per.ip.overrides")
            .unwrap_or_default();
        let overrides = match previous {
            Some(p) if p.overrides_text == text => p.overrides.clone(),
            _ => resolve_overrides(&text),
        };
        let per_listener = c
            .explicit_keys()
            .filter_map(|(k, v)| {
                let listener = k
                    .strip_prefix("listener.name.")?
                    .strip_suffix(".max.connections")?;
                Some((listener.to_lowercase(), v.trim().parse().ok()?))
            })
            .collect();
        Self {
            total: count("max.connections"),
            per_listener,
            per_ip: count("max.connections.per.ip"),
            overrides,
            overrides_text: text,
        }
    }

    fn for_ip(&self, ip: &IpAddr) -> usize {
        self.overrides.get(ip).copied().unwrap_or(self.per_ip)
    }

    fn for_listener(&self, listener: &str) -> usize {
        self.per_listener
            .get(&listener.to_lowercase())
            .copied()
            .unwrap_or(usize::MAX)
    }
}

fn resolve_overrides(text: &str) -> HashMap<IpAddr, usize> {
    let mut overrides = HashMap::new();
    let listed = parse_per_ip_overrides(text).unwrap_or_default();
    for (host, n) in listed {
        // Host names are resolved when the setting changes, as Kafka does.
        match host.parse::<IpAddr>() {
            Ok(ip) => {
                overrides.insert(ip, n);
            }
            Err(_) => match (host.as_str(), 0).to_socket_addrs() {
                Ok(addrs) => {
                    for a in addrs {
                        overrides.insert(a.ip(), n);
                    }
                }
                Err(e) => {
                    tracing::warn!(%host, error = %e, "max.connections.per.ip.overrides: cannot resolve host; ignoring it")
                }
            },
        }
    }
    overrides
}

#[derive(Default)]
struct Counts {
    total: usize,
    per_listener: HashMap<Arc<str>, usize>,
    per_ip: HashMap<IpAddr, usize>,
}

/// Why a connection was refused.
#[derive(Debug, PartialEq, Eq)]
pub struct TooManyConnections {
    pub limit: usize,
}

#[derive(Default)]
pub struct ConnectionQuotas {
    counts: Mutex<Counts>,
    /// (metadata offset the limits were computed at, limits)
    limits: Mutex<Option<(i64, Arc<Limits>)>>,
    freed: Notify,
}

/// One open connection's share; dropping it frees the slot.
pub struct ConnectionSlot {
    quotas: Arc<ConnectionQuotas>,
    listener: Arc<str>,
    ip: IpAddr,
}

impl Drop for ConnectionSlot {
    fn drop(&mut self) {
        {
            let mut c = lock(&self.quotas.counts);
            c.total = c.total.saturating_sub(1);
            if let Some(n) = c.per_listener.get_mut(&self.listener) {
                *n = n.saturating_sub(1);
            }
            if let Some(n) = c.per_ip.get_mut(&self.ip) {
                *n -= 1;
                if *n == 0 {
                    c.per_ip.remove(&self.ip);
                }
            }
        }
        self.quotas.freed.notify_waiters();
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// How long an acceptor waiting for a free slot goes without re-reading the limits, in case
/// they were raised (a metadata change wakes it sooner).
const RECHECK: Duration = Duration::from_secs(1);

impl ConnectionQuotas {
    fn limits(&self, metadata: &crate::metadata_cache::MetadataCache) -> Arc<Limits> {
        let image = metadata.current();
        let previous = match &*lock(&self.limits) {
            Some((offset, l)) if *offset == image.offset => return Arc::clone(l),
            Some((_, l)) => Some(Arc::clone(l)),
            None => None,
        };
        // Built without holding the lock: a host name in the overrides may need resolving.
        let l = Arc::new(Limits::from_config(&metadata.config(), previous.as_deref()));
        *lock(&self.limits) = Some((image.offset, Arc::clone(&l)));
        l
    }

    /// Take a slot for a connection from `ip` on `listener`: waits while the listener is at
    /// its own `listener.name.<listener>.max.connections` or the broker at `max.connections`
    /// (unless `protected`: the inter-broker listener, as Kafka's connectionSlotAvailable),
    /// fails at once if `ip` is at its own limit.
    pub async fn acquire(
        self: &Arc<Self>,
        broker: &crate::network::Frontend,
        listener: &Arc<str>,
        ip: IpAddr,
        protected: bool,
    ) -> Result<ConnectionSlot, TooManyConnections> {
        loop {
            let freed = self.freed.notified();
            tokio::pin!(freed);
            freed.as_mut().enable();
            let limits = self.limits(&broker.metadata);
            {
                let mut c = lock(&self.counts);
                let on_listener = c.per_listener.get(listener).copied().unwrap_or(0);
                let free = on_listener < limits.for_listener(listener)
                    && (protected || c.total < limits.total);
                if free {
                    let limit = limits.for_ip(&ip);
                    let n = c.per_ip.entry(ip).or_insert(0);
                    if *n >= limit {
                        if *n == 0 {
                            c.per_ip.remove(&ip);
                        }
                        return Err(TooManyConnections { limit });
                    }
                    *n += 1;
                    c.total += 1;
                    *c.per_listener.entry(Arc::clone(listener)).or_insert(0) += 1;
                    return Ok(ConnectionSlot {
                        quotas: Arc::clone(self),
                        listener: Arc::clone(listener),
                        ip,
                    });
                }
            }
            tokio::select! {
                _ = &mut freed => {}
                _ = broker.metadata.changed(RECHECK) => {}
            }
        }
    }

    /// Open connections (all listeners).
    pub fn open(&self) -> usize {
        lock(&self.counts).total
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(pairs: &[(&str, &str)]) -> BrokerConfig {
        let broker = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        BrokerConfig::default().with_dynamic(&sluice_metadata::config::DynamicBrokerConfigs {
            broker,
            ..Default::default()
        })
    }

    #[test]
    fn limits_read_the_dynamic_keys() {
        let l = Limits::from_config(
            &config(&[
                ("max.connections", "5"),
                ("max.connections.per.ip", "2"),
                ("listener.name.client.max.connections", "3"),
                (
                    "max.connections.per.ip.overrides",
                    "127.0.0.2:7, localhost:9",
                ),
            ]),
            None,
        );
        assert_eq!(l.total, 5);
        assert_eq!(l.for_listener("CLIENT"), 3);
        assert_eq!(l.for_listener("PLAINTEXT"), usize::MAX);
        assert_eq!(l.for_ip(&"10.0.0.1".parse().unwrap()), 2);
        assert_eq!(l.for_ip(&"127.0.0.2".parse().unwrap()), 7);
        assert_eq!(l.for_ip(&"127.0.0.1".parse().unwrap()), 9);
        let d = Limits::from_config(&config(&[]), Some(&l));
        assert_eq!(d.total, i32::MAX as usize);
        assert_eq!(d.per_ip, i32::MAX as usize);
    }
}
