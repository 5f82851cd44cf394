//! Broker-to-broker Kafka-protocol connections (replica fetchers, transaction markers), and
//! where another broker listens for them (`inter.broker.listener.name`, else its first
//! listener).

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::{ApiKey, RequestHeader};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use sluice_metadata::MetadataImage;
use sluice_protocol::frame;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// `host:port` of a live (unfenced) broker on `listener` (its first one when None).
pub fn broker_address(image: &MetadataImage, node: i32, listener: Option<&str>) -> Option<String> {
    let b = image.brokers.get(&node).filter(|b| !b.fenced)?;
    let e = match listener {
        Some(name) => b.endpoints.iter().find(|e| e.name == name),
        None => b.endpoints.first(),
    }?;
    Some(format!("{}:{}", e.host, e.port))
}

/// A Kafka-protocol connection to another broker, one request at a time.
pub struct BrokerConn {
    stream: TcpStream,
    correlation: i32,
    client_id: StrBytes,
}

impl BrokerConn {
    pub async fn connect(addr: &str, client_id: &str) -> std::io::Result<Self> {
        let stream = TcpStream::connect(addr).await?;
        let _ = stream.set_nodelay(true);
        Ok(Self {
            stream,
            correlation: 0,
            client_id: StrBytes::from_string(client_id.to_string()),
        })
    }

    pub async fn call<Req: Encodable, Resp: Decodable>(
        &mut self,
        key: ApiKey,
        version: i16,
        req: &Req,
    ) -> std::io::Result<Resp> {
        self.correlation = self.correlation.wrapping_add(1);
        let header = RequestHeader::default()
            .with_request_api_key(key as i16)
            .with_request_api_version(version)
            .with_correlation_id(self.correlation)
            .with_client_id(Some(self.client_id.clone()));
        let mut out = BytesMut::new();
        frame::encode_request(&mut out, &header, req).map_err(std::io::Error::other)?;
        self.stream.write_all(&out).await?;
        let size = self.stream.read_i32().await?;
        if !(0..=256 * 1024 * 1024).contains(&size) {
            return Err(std::io::Error::other(format!("response of {size} bytes")));
        }
        let mut buf = vec![0u8; size as usize];
        self.stream.read_exact(&mut buf).await?;
        let mut frame_bytes = Bytes::from(buf);
        let h = frame::decode_response_header(&mut frame_bytes, key, version)
            .map_err(std::io::Error::other)?;
        if h.correlation_id != self.correlation {
            return Err(std::io::Error::other("correlation id mismatch"));
        }
        Resp::decode(&mut frame_bytes, version).map_err(std::io::Error::other)
    }
}
