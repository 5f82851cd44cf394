//! Raft RPCs between controllers, on the controller listener, plus the framing every
//! internal call shares: request `u32 length, u8 kind, payload`; response `u32 length,
//! u8 status (0 ok, 1 error), payload (an error message when status is 1)`.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use openraft::error::{InstallSnapshotError, NetworkError, RPCError, RaftError, Unreachable};
use openraft::network::{RPCOption, RaftNetwork, RaftNetworkFactory};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse,
    VoteRequest, VoteResponse,
};
use openraft::BasicNode;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use super::{
    get_entry, get_log_id, get_snapshot_meta, get_vote, put_entry, put_log_id, put_snapshot_meta,
    put_vote, TypeConfig,
};
use crate::transport::{BoxStream, Transport};
use crate::wire::{Reader, WireError, Writer};

pub const KIND_APPEND: u8 = 1;
pub const KIND_VOTE: u8 = 2;
pub const KIND_SNAPSHOT: u8 = 3;
pub const KIND_CONTROLLER: u8 = 4;
pub const KIND_FETCH: u8 = 5;

/// Largest internal frame (a snapshot chunk or a batch of entries is far smaller).
pub const MAX_FRAME: usize = 64 * 1024 * 1024;

pub async fn write_frame(
    s: &mut (impl AsyncWrite + Unpin),
    head: u8,
    payload: &[u8],
) -> std::io::Result<()> {
    let mut buf = Vec::with_capacity(5 + payload.len());
    buf.extend_from_slice(&(payload.len() as u32 + 1).to_be_bytes());
    buf.push(head);
    buf.extend_from_slice(payload);
    s.write_all(&buf).await?;
    s.flush().await
}

/// Read one frame: (head byte, payload). `Ok(None)` at a clean end of stream.
pub async fn read_frame(
    s: &mut (impl AsyncRead + Unpin),
) -> std::io::Result<Option<(u8, Vec<u8>)>> {
    let mut len = [0u8; 4];
    match s.read_exact(&mut len).await {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(e),
    }
    let len = u32::from_be_bytes(len) as usize;
    if len == 0 || len > MAX_FRAME {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("internal frame of {len} bytes"),
        ));
    }
    let mut buf = vec![0u8; len];
    s.read_exact(&mut buf).await?;
    let head = buf.remove(0);
    Ok(Some((head, buf)))
}

/// Why an internal call failed.
#[derive(Debug)]
pub enum CallError {
    /// Could not connect, or the connection broke: try elsewhere.
    Unreachable(std::io::Error),
    /// The peer answered with an error.
    Remote(String),
}

impl std::fmt::Display for CallError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CallError::Unreachable(e) => write!(f, "unreachable: {e}"),
            CallError::Remote(m) => write!(f, "{m}"),
        }
    }
}

/// One connection to a peer, reopened after any failure.
pub struct Conn {
    transport: Arc<dyn Transport>,
    stream: Option<BoxStream>,
}

impl Default for Conn {
    /// Plain TCP.
    fn default() -> Self {
        Self::new(crate::transport::tcp())
    }
}

impl Conn {
    pub fn new(transport: Arc<dyn Transport>) -> Self {
        Self {
            transport,
            stream: None,
        }
    }

    pub async fn call(
        &mut self,
        addr: &str,
        kind: u8,
        payload: &[u8],
        timeout: Duration,
    ) -> Result<Vec<u8>, CallError> {
        let attempt = async {
            let s = match &mut self.stream {
                Some(s) => s,
                None => {
                    let s = self.transport.connect(addr).await?;
                    self.stream.insert(s)
                }
            };
            write_frame(s, kind, payload).await?;
            read_frame(s).await?.ok_or_else(|| {
                std::io::Error::new(std::io::ErrorKind::UnexpectedEof, "connection closed")
            })
        };
        let result = match tokio::time::timeout(timeout, attempt).await {
            Ok(r) => r,
            Err(_) => Err(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                format!("no answer from {addr} in {timeout:?}"),
            )),
        };
        match result {
            Ok((0, body)) => Ok(body),
            Ok((_, body)) => Err(CallError::Remote(
                String::from_utf8_lossy(&body).into_owned(),
            )),
            Err(e) => {
                self.stream = None;
                Err(CallError::Unreachable(e))
            }
        }
    }
}

pub fn encode_append(req: &AppendEntriesRequest<TypeConfig>) -> Vec<u8> {
    let mut w = Writer::default();
    put_vote(&mut w, &req.vote);
    put_log_id(&mut w, &req.prev_log_id);
    w.u32(req.entries.len() as u32);
    for e in &req.entries {
        put_entry(&mut w, e);
    }
    put_log_id(&mut w, &req.leader_commit);
    w.0
}

pub fn decode_append(buf: &[u8]) -> Result<AppendEntriesRequest<TypeConfig>, WireError> {
    let mut r = Reader::new(buf);
    let vote = get_vote(&mut r)?;
    let prev_log_id = get_log_id(&mut r)?;
    let n = r.count(20)?;
    let mut entries = Vec::with_capacity(n);
    for _ in 0..n {
        entries.push(get_entry(&mut r)?);
    }
    let leader_commit = get_log_id(&mut r)?;
    r.done()?;
    Ok(AppendEntriesRequest {
        vote,
        prev_log_id,
        entries,
        leader_commit,
    })
}

pub fn encode_append_response(resp: &AppendEntriesResponse<u64>) -> Vec<u8> {
    let mut w = Writer::default();
    match resp {
        AppendEntriesResponse::Success => {
            w.u8(0);
        }
        AppendEntriesResponse::PartialSuccess(id) => {
            w.u8(1);
            put_log_id(&mut w, id);
        }
        AppendEntriesResponse::Conflict => {
            w.u8(2);
        }
        AppendEntriesResponse::HigherVote(v) => {
            w.u8(3);
            put_vote(&mut w, v);
        }
    }
    w.0
}

pub fn decode_append_response(buf: &[u8]) -> Result<AppendEntriesResponse<u64>, WireError> {
    let mut r = Reader::new(buf);
    Ok(match r.u8()? {
        0 => AppendEntriesResponse::Success,
        1 => AppendEntriesResponse::PartialSuccess(get_log_id(&mut r)?),
        2 => AppendEntriesResponse::Conflict,
        3 => AppendEntriesResponse::HigherVote(get_vote(&mut r)?),
        _ => return Err(WireError("unknown append response")),
    })
}

pub fn encode_vote(req: &VoteRequest<u64>) -> Vec<u8> {
    let mut w = Writer::default();
    put_vote(&mut w, &req.vote);
    put_log_id(&mut w, &req.last_log_id);
    w.0
}

pub fn decode_vote(buf: &[u8]) -> Result<VoteRequest<u64>, WireError> {
    let mut r = Reader::new(buf);
    let vote = get_vote(&mut r)?;
    let last_log_id = get_log_id(&mut r)?;
    r.done()?;
    Ok(VoteRequest { vote, last_log_id })
}

pub fn encode_vote_response(resp: &VoteResponse<u64>) -> Vec<u8> {
    let mut w = Writer::default();
    put_vote(&mut w, &resp.vote);
    w.bool(resp.vote_granted);
    put_log_id(&mut w, &resp.last_log_id);
    w.0
}

pub fn decode_vote_response(buf: &[u8]) -> Result<VoteResponse<u64>, WireError> {
    let mut r = Reader::new(buf);
    Ok(VoteResponse {
        vote: get_vote(&mut r)?,
        vote_granted: r.bool()?,
        last_log_id: get_log_id(&mut r)?,
    })
}

pub fn encode_snapshot(req: &InstallSnapshotRequest<TypeConfig>) -> Vec<u8> {
    let mut w = Writer::default();
    put_vote(&mut w, &req.vote);
    put_snapshot_meta(&mut w, &req.meta);
    w.u64(req.offset).bytes(&req.data).bool(req.done);
    w.0
}

pub fn decode_snapshot(buf: &[u8]) -> Result<InstallSnapshotRequest<TypeConfig>, WireError> {
    let mut r = Reader::new(buf);
    let req = InstallSnapshotRequest {
        vote: get_vote(&mut r)?,
        meta: get_snapshot_meta(&mut r)?,
        offset: r.u64()?,
        data: r.bytes()?.to_vec(),
        done: r.bool()?,
    };
    r.done()?;
    Ok(req)
}

pub fn encode_snapshot_response(resp: &InstallSnapshotResponse<u64>) -> Vec<u8> {
    let mut w = Writer::default();
    put_vote(&mut w, &resp.vote);
    w.0
}

/// Builds a [`RaftPeer`] per target voter. `isolated` cuts this node off from its peers
/// (a network partition, for fault-injection tests).
pub struct NetworkFactory {
    pub isolated: Arc<AtomicBool>,
    /// This node's `controller.quorum.voters` addresses. As in Kafka's static quorum, each
    /// node reaches the voters where its own config says (the membership in the log only
    /// records who votes), so an address can differ per node (NAT, proxies).
    pub voters: std::collections::BTreeMap<u64, String>,
    pub transport: Arc<dyn Transport>,
}

impl RaftNetworkFactory<TypeConfig> for NetworkFactory {
    type Network = RaftPeer;

    async fn new_client(&mut self, target: u64, node: &BasicNode) -> Self::Network {
        RaftPeer {
            target,
            addr: self
                .voters
                .get(&target)
                .cloned()
                .unwrap_or_else(|| node.addr.clone()),
            conn: Conn::new(Arc::clone(&self.transport)),
            isolated: Arc::clone(&self.isolated),
        }
    }
}

pub struct RaftPeer {
    target: u64,
    addr: String,
    conn: Conn,
    isolated: Arc<AtomicBool>,
}

impl RaftPeer {
    async fn call<E: std::error::Error>(
        &mut self,
        kind: u8,
        payload: Vec<u8>,
        option: &RPCOption,
    ) -> Result<Vec<u8>, RPCError<u64, BasicNode, E>> {
        if self.isolated.load(Ordering::Relaxed) {
            let e = std::io::Error::new(std::io::ErrorKind::NotConnected, "isolated");
            return Err(RPCError::Unreachable(Unreachable::new(&e)));
        }
        match self
            .conn
            .call(&self.addr, kind, &payload, option.hard_ttl())
            .await
        {
            Ok(body) => Ok(body),
            Err(CallError::Unreachable(e)) => Err(RPCError::Unreachable(Unreachable::new(&e))),
            Err(CallError::Remote(m)) => Err(RPCError::Network(NetworkError::new(
                &std::io::Error::other(format!("node {}: {m}", self.target)),
            ))),
        }
    }
}

fn bad<E: std::error::Error>(e: WireError) -> RPCError<u64, BasicNode, E> {
    RPCError::Network(NetworkError::new(&e))
}

impl RaftNetwork<TypeConfig> for RaftPeer {
    async fn append_entries(
        &mut self,
        rpc: AppendEntriesRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<AppendEntriesResponse<u64>, RPCError<u64, BasicNode, RaftError<u64>>> {
        let body = self.call(KIND_APPEND, encode_append(&rpc), &option).await?;
        decode_append_response(&body).map_err(bad)
    }

    async fn install_snapshot(
        &mut self,
        rpc: InstallSnapshotRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<
        InstallSnapshotResponse<u64>,
        RPCError<u64, BasicNode, RaftError<u64, InstallSnapshotError>>,
    > {
        let body = self
            .call(KIND_SNAPSHOT, encode_snapshot(&rpc), &option)
            .await?;
        let mut r = Reader::new(&body);
        Ok(InstallSnapshotResponse {
            vote: get_vote(&mut r).map_err(bad)?,
        })
    }

    async fn vote(
        &mut self,
        rpc: VoteRequest<u64>,
        option: RPCOption,
    ) -> Result<VoteResponse<u64>, RPCError<u64, BasicNode, RaftError<u64>>> {
        let body = self.call(KIND_VOTE, encode_vote(&rpc), &option).await?;
        decode_vote_response(&body).map_err(bad)
    }
}
