//! A minimal blocking Kafka wire client for protocol edge cases that real clients never
//! send (or send only at one version).
#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::{ApiKey, RequestHeader};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use sluice_protocol::frame;

pub struct Wire {
    pub stream: TcpStream,
    next_correlation: i32,
    client_id: &'static str,
}

impl Wire {
    pub fn connect(bootstrap: &str) -> Wire {
        Self::connect_as(bootstrap, "sluice-wire-test")
    }

    /// Connect, sending `client_id` in every request header.
    pub fn connect_as(bootstrap: &str, client_id: &'static str) -> Wire {
        let stream = TcpStream::connect(bootstrap).expect("connect");
        stream
            .set_read_timeout(Some(Duration::from_secs(30)))
            .unwrap();
        Wire {
            stream,
            next_correlation: 1,
            client_id,
        }
    }

    /// Connect from source address `from` (another loopback address, say), to tell
    /// clients apart by address.
    pub fn connect_from(from: &str, bootstrap: &str) -> Wire {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .build()
            .unwrap();
        let stream = rt
            .block_on(async {
                let socket = tokio::net::TcpSocket::new_v4()?;
                socket.bind(format!("{from}:0").parse().expect("a source address"))?;
                let s = socket
                    .connect(bootstrap.parse().expect("an ip:port"))
                    .await?;
                s.into_std()
            })
            .expect("connect");
        stream.set_nonblocking(false).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(30)))
            .unwrap();
        Wire {
            stream,
            next_correlation: 1,
            client_id: "sluice-wire-test",
        }
    }

    /// Send one request without reading the answer; returns its correlation id.
    pub fn send<Req: Encodable>(&mut self, key: ApiKey, version: i16, req: &Req) -> i32 {
        self.send_as(key, version, version, req)
    }

    /// Send a request whose header claims `claimed_version` but whose body is encoded at
    /// `encoded_version` (a client from the future).
    pub fn send_as<Req: Encodable>(
        &mut self,
        key: ApiKey,
        claimed_version: i16,
        encoded_version: i16,
        req: &Req,
    ) -> i32 {
        let id = self.next_correlation;
        self.next_correlation += 1;
        let header = RequestHeader::default()
            .with_request_api_key(key as i16)
            .with_request_api_version(encoded_version)
            .with_correlation_id(id)
            .with_client_id(Some(StrBytes::from_static_str(self.client_id)));
        let mut out = BytesMut::new();
        frame::encode_request(&mut out, &header, req).expect("encode");
        out[6..8].copy_from_slice(&claimed_version.to_be_bytes());
        self.stream.write_all(&out).expect("write");
        id
    }

    /// Read one response frame body (after the size prefix), or None if the broker closed.
    pub fn read_frame(&mut self) -> Option<Bytes> {
        let mut size = [0u8; 4];
        self.stream.read_exact(&mut size).ok()?;
        let mut body = vec![0u8; i32::from_be_bytes(size) as usize];
        self.stream.read_exact(&mut body).ok()?;
        Some(Bytes::from(body))
    }

    pub fn recv<Resp: Decodable>(&mut self, key: ApiKey, version: i16, expect_id: i32) -> Resp {
        let mut frame = self
            .read_frame()
            .expect("a response, not a closed connection");
        let header =
            frame::decode_response_header(&mut frame, key, version).expect("response header");
        assert_eq!(header.correlation_id, expect_id);
        frame::decode(&mut frame, version, "response").expect("response body")
    }

    pub fn call<Req: Encodable, Resp: Decodable>(
        &mut self,
        key: ApiKey,
        version: i16,
        req: &Req,
    ) -> Resp {
        let id = self.send(key, version, req);
        self.recv(key, version, id)
    }

    pub fn write_raw(&mut self, bytes: &[u8]) {
        let _ = self.stream.write_all(bytes);
    }

    /// True once the broker has closed the connection (EOF or reset).
    pub fn is_closed_by_peer(&mut self) -> bool {
        let mut b = [0u8; 1];
        match self.stream.read(&mut b) {
            Ok(0) => true,
            Ok(_) => false,
            Err(e) => !matches!(
                e.kind(),
                std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
            ),
        }
    }
}
