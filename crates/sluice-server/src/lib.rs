//! A Sluice node: wires the controller, the log manager, the replica manager and the
//! broker's listeners together, runs the background chores, and shuts it all down in order.
//!
//! # Layout
//! - [`node`]: [`Node::start`] / [`Node::shutdown`]: startup sequence, tasks, clean shutdown.
//! - [`controller_client`]: the broker's [`sluice_broker::controller_api::ControllerApi`]:
//!   requests forwarded to the active controller, heartbeats, metadata fetching.
//! - [`quorum_transport`]: TLS for the controller listener's connections.
//! - [`admin_http`]: the admin HTTP listener: `/metrics`, `/health`, `/ready`, JSON API.
//! - `console`: the web console the admin HTTP listener serves at `/`.
//! - [`settings`]: building a [`sluice_metadata::BrokerConfig`] from a properties file,
//!   `SLUICE_*` environment variables and `--override` flags.

pub mod admin_http;
mod console;
pub mod controller_client;
pub mod node;
pub mod quorum_transport;
pub mod schema_http;
pub mod settings;
pub mod storage;

pub use node::{Node, NodeError};
/// Runtime log levels (KIP-412): the binary installs its log filter here.
pub use sluice_broker::loggers;
