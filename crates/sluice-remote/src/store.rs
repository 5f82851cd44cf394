//! [`RemoteStore`]: one object store (a local directory or an S3-compatible bucket) under a
//! key prefix. Each request has a timeout; S3 requests are retried with backoff by the
//! client (`object_store`'s retry policy: server errors, throttling, dropped connections);
//! files above [`MULTIPART_THRESHOLD_BYTES`] go up as multipart uploads, a part at a time
//! from disk, so a segment never sits whole in memory.

use std::ops::Range;
use std::path::Path as FsPath;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use bytes::Bytes;
use futures_util::TryStreamExt;
use object_store::aws::AmazonS3Builder;
use object_store::local::LocalFileSystem;
use object_store::path::Path;
use object_store::{
    BackoffConfig, ClientOptions, ObjectStore, ObjectStoreExt, PutPayload, RetryConfig,
    WriteMultipart,
};
use std::io::Read;

use crate::error::RemoteError;
use crate::layout::{join, SegmentKey};

/// Files larger than this are uploaded in parts.
pub const MULTIPART_THRESHOLD_BYTES: u64 = 16 * 1024 * 1024;
/// The size of each part of a multipart upload (S3's minimum is 5 MiB).
pub const PART_BYTES: usize = 8 * 1024 * 1024;
/// Parts of one upload in flight at once.
const PARTS_IN_FLIGHT: usize = 4;

/// Where the store is and how to reach it: the broker's `remote.log.storage.*` keys.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StoreConfig {
    /// `remote.log.storage.uri`: `file:///abs/dir` or `s3://bucket/optional/prefix`.
    pub uri: String,
    /// `remote.log.storage.s3.endpoint` (an S3-compatible server); None: AWS.
    pub s3_endpoint: Option<String>,
    /// `remote.log.storage.s3.region`
    pub s3_region: Option<String>,
    /// `remote.log.storage.s3.access.key.id` (else `AWS_ACCESS_KEY_ID`).
    pub s3_access_key_id: Option<String>,
    /// `remote.log.storage.s3.secret.access.key` (else `AWS_SECRET_ACCESS_KEY`).
    pub s3_secret_access_key: Option<String>,
    /// `remote.log.storage.s3.path.style.access`
    pub s3_path_style_access: bool,
    /// `remote.log.storage.request.timeout.ms`: one request (one part of an upload).
    pub request_timeout_ms: u64,
    /// `remote.log.storage.retries`: retries of a failed request (S3).
    pub retries: usize,
}

/// A handle on the store; cheap to clone.
#[derive(Clone, Debug)]
pub struct RemoteStore {
    inner: Arc<dyn ObjectStore>,
    prefix: Path,
    timeout: Duration,
}

/// The simulated world's object store (see [`install_simulated`]).
static SIMULATED: OnceLock<Arc<dyn ObjectStore>> = OnceLock::new();

/// Install the deterministic simulator's object store for the rest of the process: every
/// [`RemoteStore::open`] then returns a handle on it, whatever the URI (one store shared by
/// every simulated node, as a bucket is; the simulator decides each request's latency and
/// failure). The simulator calls this once, before any node starts; fails if a store is
/// installed already. A server process never calls it.
pub fn install_simulated(store: Arc<dyn ObjectStore>) -> Result<(), Arc<dyn ObjectStore>> {
    SIMULATED.set(store)
}

impl RemoteStore {
    /// Build the store `config` names. A `file://` directory is created if missing.
    pub fn open(config: &StoreConfig) -> Result<Self, RemoteError> {
        let timeout = Duration::from_millis(config.request_timeout_ms.max(1));
        if let Some(simulated) = SIMULATED.get() {
            return Ok(Self::with_store(Arc::clone(simulated), "", timeout));
        }
        if let Some(dir) = config.uri.strip_prefix("file://") {
            if !dir.starts_with('/') {
                return Err(RemoteError::Config(format!(
                    "remote.log.storage.uri {}: a file:// URI needs an absolute path",
                    config.uri
                )));
            }
            std::fs::create_dir_all(dir).map_err(|e| RemoteError::io(FsPath::new(dir), e))?;
            let fs = LocalFileSystem::new_with_prefix(dir)?;
            return Ok(Self::with_store(Arc::new(fs), "", timeout));
        }
        let Some(rest) = config.uri.strip_prefix("s3://") else {
            return Err(RemoteError::Config(format!(
                "remote.log.storage.uri {}: expected file:///dir or s3://bucket/prefix",
                config.uri
            )));
        };
        let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
        if bucket.is_empty() {
            return Err(RemoteError::Config(format!(
                "remote.log.storage.uri {}: no bucket",
                config.uri
            )));
        }
        let mut b = AmazonS3Builder::from_env()
            .with_bucket_name(bucket)
            .with_virtual_hosted_style_request(!config.s3_path_style_access)
            .with_retry(RetryConfig {
                backoff: BackoffConfig {
                    init_backoff: Duration::from_millis(100),
                    max_backoff: Duration::from_secs(5),
                    base: 2.0,
                },
                max_retries: config.retries,
                retry_timeout: timeout * (config.retries as u32 + 1),
            })
            .with_client_options(
                ClientOptions::new()
                    .with_timeout(timeout)
                    .with_connect_timeout(timeout.min(Duration::from_secs(10)))
                    .with_allow_http(true),
            );
        if let Some(e) = &config.s3_endpoint {
            b = b.with_endpoint(e);
        }
        if let Some(r) = &config.s3_region {
            b = b.with_region(r);
        }
        if let Some(k) = &config.s3_access_key_id {
            b = b.with_access_key_id(k);
        }
        if let Some(s) = &config.s3_secret_access_key {
            b = b.with_secret_access_key(s);
        }
        Ok(Self::with_store(Arc::new(b.build()?), prefix, timeout))
    }

    /// Over any `object_store` (the simulator's, tests').
    pub fn with_store(inner: Arc<dyn ObjectStore>, prefix: &str, timeout: Duration) -> Self {
        Self {
            inner,
            prefix: join(&Path::default(), prefix),
            timeout,
        }
    }

    fn path(&self, key: &str) -> Path {
        join(&self.prefix, key)
    }

    async fn timed<T>(
        &self,
        what: &str,
        f: impl std::future::Future<Output = object_store::Result<T>>,
    ) -> Result<T, RemoteError> {
        match tokio::time::timeout(self.timeout, f).await {
            Ok(r) => Ok(r?),
            Err(_) => Err(RemoteError::Store(object_store::Error::Generic {
                store: "remote",
                source: format!("{what} timed out after {:?}", self.timeout).into(),
            })),
        }
    }

    /// Store `bytes` at `key` (whole, one request).
    pub async fn put(&self, key: &str, bytes: Bytes) -> Result<(), RemoteError> {
        let path = self.path(key);
        self.timed("put", self.inner.put(&path, PutPayload::from(bytes)))
            .await
            .map(|_| ())
    }

    /// Store the file at `file` under `key`: in parts above [`MULTIPART_THRESHOLD_BYTES`].
    /// Returns the bytes stored.
    pub async fn put_file(&self, key: &str, file: &FsPath) -> Result<u64, RemoteError> {
        let io = |e| RemoteError::io(file, e);
        let path = file.to_path_buf();
        let (f, small) = blocking(move || {
            let mut f = std::fs::File::open(&path)?;
            let len = f.metadata()?.len();
            if len > MULTIPART_THRESHOLD_BYTES {
                return Ok((f, None));
            }
            let mut buf = Vec::with_capacity(len as usize);
            f.read_to_end(&mut buf)?;
            Ok((f, Some(buf)))
        })
        .await
        .map_err(io)?;
        if let Some(buf) = small {
            let n = buf.len() as u64;
            self.put(key, Bytes::from(buf)).await?;
            return Ok(n);
        }
        let path = self.path(key);
        let upload = self
            .timed("start multipart upload", self.inner.put_multipart(&path))
            .await?;
        let mut w = WriteMultipart::new_with_chunk_size(upload, PART_BYTES);
        let mut sent = 0u64;
        let result: Result<(), RemoteError> = async {
            let mut state = (f, vec![0u8; PART_BYTES]);
            loop {
                // A part read off the async workers; the file and buffer go there and back.
                let (mut f, mut buf) = state;
                let (f, buf, n) = blocking(move || {
                    let n = read_full(&mut f, &mut buf)?;
                    Ok((f, buf, n))
                })
                .await
                .map_err(io)?;
                if n == 0 {
                    break;
                }
                w.wait_for_capacity(PARTS_IN_FLIGHT).await?;
                w.write(&buf[..n]);
                sent += n as u64;
                state = (f, buf);
            }
            Ok(())
        }
        .await;
        match result {
            Ok(()) => {
                w.finish().await?;
                Ok(sent)
            }
            Err(e) => {
                let _ = w.abort().await;
                Err(e)
            }
        }
    }

    /// Bytes `range` of the object at `key`.
    pub async fn get_range(&self, key: &str, range: Range<u64>) -> Result<Bytes, RemoteError> {
        let path = self.path(key);
        self.timed("get", self.inner.get_range(&path, range)).await
    }

    /// The whole object at `key`; None if there is none.
    pub async fn get(&self, key: &str) -> Result<Option<Bytes>, RemoteError> {
        let path = self.path(key);
        let got = self
            .timed("get", async { self.inner.get(&path).await?.bytes().await })
            .await;
        match got {
            Ok(b) => Ok(Some(b)),
            Err(RemoteError::Store(object_store::Error::NotFound { .. })) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Delete the object at `key`; one that is not there is no error.
    pub async fn delete(&self, key: &str) -> Result<(), RemoteError> {
        let path = self.path(key);
        match self.timed("delete", self.inner.delete(&path)).await {
            Ok(()) | Err(RemoteError::Store(object_store::Error::NotFound { .. })) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Delete every file of a remote segment.
    pub async fn delete_segment(&self, key: &SegmentKey) -> Result<(), RemoteError> {
        for suffix in crate::layout::SUFFIXES {
            self.delete(&key.object(suffix)).await?;
        }
        Ok(())
    }

    /// Keys (relative to the store's prefix) and sizes of the objects under `prefix`.
    pub async fn list(&self, prefix: &str) -> Result<Vec<(String, u64)>, RemoteError> {
        Ok(self
            .list_with_age(prefix)
            .await?
            .into_iter()
            .map(|(k, size, _)| (k, size))
            .collect())
    }

    /// Keys, sizes and last-modified times (ms since the epoch) of the objects under
    /// `prefix`.
    pub async fn list_with_age(
        &self,
        prefix: &str,
    ) -> Result<Vec<(String, u64, i64)>, RemoteError> {
        let p = self.path(prefix);
        let metas: Vec<object_store::ObjectMeta> = self
            .timed("list", self.inner.list(Some(&p)).try_collect())
            .await?;
        let base = self.prefix.as_ref();
        Ok(metas
            .into_iter()
            .map(|m| {
                let k = m.location.as_ref();
                let rel = k
                    .strip_prefix(base)
                    .map(|r| r.trim_start_matches('/'))
                    .unwrap_or(k);
                (rel.to_string(), m.size, m.last_modified.timestamp_millis())
            })
            .collect())
    }
}

/// `f` on the blocking pool (a task of the node's runtime in the simulator).
async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> std::io::Result<T> + Send + 'static,
) -> std::io::Result<T> {
    sluice_rt::task::spawn_blocking(f)
        .await
        .map_err(std::io::Error::other)?
}

/// Fill `buf` from `f` unless the file ends first; the bytes read.
fn read_full(f: &mut std::fs::File, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        let got = f.read(&mut buf[n..])?;
        if got == 0 {
            break;
        }
        n += got;
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn local(dir: &FsPath) -> RemoteStore {
        RemoteStore::open(&StoreConfig {
            uri: format!("file://{}", dir.display()),
            request_timeout_ms: 30_000,
            ..StoreConfig::default()
        })
        .unwrap()
    }

    #[tokio::test]
    async fn put_get_list_delete_on_a_directory() {
        let dir = tempfile::tempdir().unwrap();
        let s = local(dir.path());
        s.put("a/b/one", Bytes::from_static(b"hello"))
            .await
            .unwrap();
        assert_eq!(&s.get_range("a/b/one", 1..4).await.unwrap()[..], b"ell");
        assert_eq!(s.get("a/b/none").await.unwrap(), None);
        let big = dir.path().join("big");
        let content: Vec<u8> = (0..(MULTIPART_THRESHOLD_BYTES as usize + 12_345))
            .map(|i| (i % 251) as u8)
            .collect();
        std::fs::write(&big, &content).unwrap();
        assert_eq!(
            s.put_file("a/big", &big).await.unwrap(),
            content.len() as u64
        );
        assert_eq!(s.get("a/big").await.unwrap().unwrap(), content);
        let mut listed = s.list("a").await.unwrap();
        listed.sort();
        assert_eq!(
            listed,
            vec![
                ("a/b/one".to_string(), 5),
                ("a/big".to_string(), content.len() as u64)
            ]
        );
        s.delete("a/b/one").await.unwrap();
        s.delete("a/b/one").await.unwrap();
        assert_eq!(s.get("a/b/one").await.unwrap(), None);
    }

    #[test]
    fn bad_uris_are_refused() {
        for uri in ["relative/dir", "file://relative", "s3://", "gs://b"] {
            let e = RemoteStore::open(&StoreConfig {
                uri: uri.into(),
                ..StoreConfig::default()
            })
            .unwrap_err();
            assert!(matches!(e, RemoteError::Config(_)), "{uri}: {e}");
        }
    }
}
