//! A minimal big-endian binary codec for the controller's internal messages (Raft RPCs,
//! broker heartbeats, forwarded writes, metadata fetches). Every length is checked against
//! what is left, so a hostile or torn frame is an error, never a large allocation.

use thiserror::Error;

#[derive(Debug, Error, PartialEq, Eq)]
#[error("malformed controller message: {0}")]
pub struct WireError(pub &'static str);

#[derive(Default)]
pub struct Writer(pub Vec<u8>);

impl Writer {
    pub fn u8(&mut self, v: u8) -> &mut Self {
        self.0.push(v);
        self
    }
    pub fn bool(&mut self, v: bool) -> &mut Self {
        self.u8(u8::from(v))
    }
    pub fn i16(&mut self, v: i16) -> &mut Self {
        self.0.extend_from_slice(&v.to_be_bytes());
        self
    }
    pub fn i32(&mut self, v: i32) -> &mut Self {
        self.0.extend_from_slice(&v.to_be_bytes());
        self
    }
    pub fn u32(&mut self, v: u32) -> &mut Self {
        self.0.extend_from_slice(&v.to_be_bytes());
        self
    }
    pub fn i64(&mut self, v: i64) -> &mut Self {
        self.0.extend_from_slice(&v.to_be_bytes());
        self
    }
    pub fn u64(&mut self, v: u64) -> &mut Self {
        self.0.extend_from_slice(&v.to_be_bytes());
        self
    }
    pub fn bytes(&mut self, b: &[u8]) -> &mut Self {
        self.u32(b.len() as u32);
        self.0.extend_from_slice(b);
        self
    }
    pub fn str(&mut self, s: &str) -> &mut Self {
        self.bytes(s.as_bytes())
    }
    pub fn opt_str(&mut self, s: Option<&str>) -> &mut Self {
        match s {
            Some(s) => self.bool(true).str(s),
            None => self.bool(false),
        }
    }
    pub fn uuid(&mut self, id: &uuid::Uuid) -> &mut Self {
        self.0.extend_from_slice(id.as_bytes());
        self
    }
    pub fn ints(&mut self, v: &[i32]) -> &mut Self {
        self.u32(v.len() as u32);
        for x in v {
            self.i32(*x);
        }
        self
    }
}

pub struct Reader<'a> {
    pub buf: &'a [u8],
}

impl<'a> Reader<'a> {
    pub fn new(buf: &'a [u8]) -> Self {
        Self { buf }
    }
    pub fn take(&mut self, n: usize) -> Result<&'a [u8], WireError> {
        if self.buf.len() < n {
            return Err(WireError("truncated"));
        }
        let (head, rest) = self.buf.split_at(n);
        self.buf = rest;
        Ok(head)
    }
    fn arr<const N: usize>(&mut self) -> Result<[u8; N], WireError> {
        let mut a = [0u8; N];
        a.copy_from_slice(self.take(N)?);
        Ok(a)
    }
    pub fn u8(&mut self) -> Result<u8, WireError> {
        Ok(self.take(1)?[0])
    }
    pub fn bool(&mut self) -> Result<bool, WireError> {
        Ok(self.u8()? != 0)
    }
    pub fn i16(&mut self) -> Result<i16, WireError> {
        Ok(i16::from_be_bytes(self.arr()?))
    }
    pub fn i32(&mut self) -> Result<i32, WireError> {
        Ok(i32::from_be_bytes(self.arr()?))
    }
    pub fn u32(&mut self) -> Result<u32, WireError> {
        Ok(u32::from_be_bytes(self.arr()?))
    }
    pub fn i64(&mut self) -> Result<i64, WireError> {
        Ok(i64::from_be_bytes(self.arr()?))
    }
    pub fn u64(&mut self) -> Result<u64, WireError> {
        Ok(u64::from_be_bytes(self.arr()?))
    }
    pub fn bytes(&mut self) -> Result<&'a [u8], WireError> {
        let n = self.u32()? as usize;
        self.take(n)
    }
    pub fn str(&mut self) -> Result<String, WireError> {
        String::from_utf8(self.bytes()?.to_vec()).map_err(|_| WireError("invalid UTF-8"))
    }
    pub fn opt_str(&mut self) -> Result<Option<String>, WireError> {
        if self.bool()? {
            self.str().map(Some)
        } else {
            Ok(None)
        }
    }
    pub fn uuid(&mut self) -> Result<uuid::Uuid, WireError> {
        Ok(uuid::Uuid::from_bytes(self.arr()?))
    }
    /// A count of items each at least `min_size` bytes: refuses counts the frame cannot hold.
    pub fn count(&mut self, min_size: usize) -> Result<usize, WireError> {
        let n = self.u32()? as usize;
        if n.saturating_mul(min_size.max(1)) > self.buf.len() {
            return Err(WireError("count exceeds frame"));
        }
        Ok(n)
    }
    pub fn ints(&mut self) -> Result<Vec<i32>, WireError> {
        let n = self.count(4)?;
        (0..n).map(|_| self.i32()).collect()
    }
    pub fn done(&self) -> Result<(), WireError> {
        if self.buf.is_empty() {
            Ok(())
        } else {
            Err(WireError("trailing bytes"))
        }
    }
}
