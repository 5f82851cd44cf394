//! The server's log output: `tracing` to stdout, filtered by `RUST_LOG` (default
//! `info,openraft=warn`), as text or JSON lines. The filter sits behind a reload handle so
//! Kafka's BROKER_LOGGER configs (IncrementalAlterConfigs, `sluice configs --entity-type
//! broker-loggers`) change levels at runtime.

use std::collections::BTreeMap;
use std::sync::Mutex;

use sluice_server::loggers::{self, LogControl, ROOT};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{fmt, reload, EnvFilter, Registry};

const DEFAULT: &str = "info,openraft=warn";

/// The filter as a root level and per-target levels.
#[derive(Debug, PartialEq)]
struct Directives {
    root: String,
    targets: BTreeMap<String, String>,
}

impl Directives {
    /// From `RUST_LOG` syntax; directives this model cannot hold (span filters) are kept
    /// whole under their own text.
    fn parse(spec: &str) -> Self {
        let mut d = Directives {
            root: "error".into(),
            targets: BTreeMap::new(),
        };
        for part in spec.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            match part.rsplit_once('=') {
                Some((target, level)) if !target.contains('[') => {
                    d.targets.insert(target.to_string(), level.to_string());
                }
                Some(_) => {
                    d.targets.insert(part.to_string(), String::new());
                }
                // A bare level is the root's; a bare target (all its levels) is kept as is.
                None if part
                    .parse::<tracing_subscriber::filter::LevelFilter>()
                    .is_ok() =>
                {
                    d.root = part.to_string()
                }
                None => {
                    d.targets.insert(part.to_string(), String::new());
                }
            }
        }
        d
    }

    fn render(&self) -> String {
        std::iter::once(self.root.clone())
            .chain(self.targets.iter().map(|(t, l)| {
                if l.is_empty() {
                    t.clone()
                } else {
                    format!("{t}={l}")
                }
            }))
            .collect::<Vec<_>>()
            .join(",")
    }
}

struct Control {
    handle: reload::Handle<EnvFilter, Registry>,
    directives: Mutex<Directives>,
}

impl LogControl for Control {
    fn levels(&self) -> Vec<(String, String)> {
        let d = self
            .directives
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        std::iter::once((ROOT.to_string(), loggers::kafka_level(&d.root)))
            .chain(
                d.targets
                    .iter()
                    .filter(|(_, l)| !l.is_empty())
                    .map(|(t, l)| (t.clone(), loggers::kafka_level(l))),
            )
            .collect()
    }

    fn apply(&self, changes: &[(String, Option<String>)]) -> Result<(), String> {
        let mut d = self
            .directives
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut next = Directives {
            root: d.root.clone(),
            targets: d.targets.clone(),
        };
        for (logger, level) in changes {
            let level = level.as_deref().map(|l| {
                loggers::tracing_level(l)
                    .map(str::to_owned)
                    .ok_or_else(|| format!("{l} is not a log level"))
            });
            match level {
                Some(l) if logger == ROOT => next.root = l?,
                Some(l) => {
                    next.targets.insert(logger.clone(), l?);
                }
                None => {
                    next.targets.remove(logger);
                }
            }
        }
        let filter = EnvFilter::try_new(next.render()).map_err(|e| e.to_string())?;
        self.handle.reload(filter).map_err(|e| e.to_string())?;
        *d = next;
        Ok(())
    }
}

pub fn init(json: bool) {
    let spec = std::env::var("RUST_LOG")
        .ok()
        .filter(|s| EnvFilter::try_new(s).is_ok() && !s.trim().is_empty())
        .unwrap_or_else(|| DEFAULT.to_string());
    let directives = Directives::parse(&spec);
    let filter =
        EnvFilter::try_new(directives.render()).unwrap_or_else(|_| EnvFilter::new(DEFAULT));
    let (filter, handle) = reload::Layer::new(filter);
    let registry = tracing_subscriber::registry().with(filter);
    if json {
        registry
            .with(fmt::layer().json().with_current_span(false))
            .init();
    } else {
        let ansi = std::io::IsTerminal::is_terminal(&std::io::stdout());
        registry
            .with(fmt::layer().with_target(false).with_ansi(ansi))
            .init();
    }
    loggers::install(Box::new(Control {
        handle,
        directives: Mutex::new(directives),
    }));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn directives_round_trip() {
        let d = Directives::parse("info,openraft=warn, sluice_broker::replica::fetcher=debug");
        assert_eq!(d.root, "info");
        assert_eq!(d.targets["openraft"], "warn");
        assert_eq!(
            d.render(),
            "info,openraft=warn,sluice_broker::replica::fetcher=debug"
        );
        assert_eq!(Directives::parse("openraft=warn").root, "error");
        let bare = Directives::parse("info,sluice_broker");
        assert_eq!(bare.root, "info");
        assert_eq!(bare.render(), "info,sluice_broker");
        let spans = Directives::parse("debug,[request{api=Fetch}]=trace");
        assert_eq!(spans.render(), "debug,[request{api=Fetch}]=trace");
    }
}
