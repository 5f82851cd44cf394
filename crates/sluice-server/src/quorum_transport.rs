//! The controller listener over TLS: this node's [`Transport`] for the quorum's connections
//! when the controller listener is SSL — accepted connections complete the listener's TLS
//! handshake (a client certificate too with `ssl.client.auth=required`), and connections
//! to the controllers trust the listener's trust store and present its key store, as
//! Kafka's controller clients do.

use std::io;
use std::sync::Arc;

use sluice_broker::tls::ListenerTls;
use sluice_client::security::Connector;
use sluice_controller::transport::{BoxFuture, BoxStream, Transport};
use sluice_metadata::config::SecurityProtocol;
use sluice_metadata::BrokerConfig;
use sluice_rt::net::Stream as TcpStream;

pub struct TlsTransport {
    connector: Connector,
    /// The controller listener's TLS, when this node has one (a controller).
    acceptor: Option<Arc<ListenerTls>>,
}

impl Transport for TlsTransport {
    fn connect<'a>(&'a self, addr: &'a str) -> BoxFuture<'a, io::Result<BoxStream>> {
        Box::pin(async move {
            let s = self.connector.connect(addr, "sluice-controller").await?;
            Ok(Box::new(s) as BoxStream)
        })
    }

    fn accept(&self, tcp: TcpStream) -> BoxFuture<'static, io::Result<BoxStream>> {
        let acceptor = self.acceptor.as_ref().map(|t| t.acceptor());
        Box::pin(async move {
            match acceptor {
                Some(a) => Ok(Box::new(a.accept(tcp).await?) as BoxStream),
                None => Ok(Box::new(tcp) as BoxStream),
            }
        })
    }
}

/// How this node's quorum connections are made: plain TCP for a PLAINTEXT controller
/// listener, else TLS from the listener's settings. A one-line reason when they cannot
/// work (checked at startup).
pub fn from_config(config: &BrokerConfig) -> Result<Arc<dyn Transport>, String> {
    let client = config.controller_client().map_err(|e| e.to_string())?;
    if client.protocol != SecurityProtocol::Ssl {
        return Ok(sluice_controller::transport::tcp());
    }
    let listener = client.listener.clone().unwrap_or_default();
    // A controller serves the listener; a broker-only node only connects to it.
    let serves = config.listeners().iter().any(|l| l.name == listener);
    let acceptor = match serves {
        true => Some(Arc::new(ListenerTls::new(config, &listener)?)),
        false => None,
    };
    let connector = sluice_broker::broker_conn::connector(client, "controller connections")?;
    Ok(Arc::new(TlsTransport {
        connector,
        acceptor,
    }))
}
