//! The five Kafka compression codecs. Every decompression is capped: a batch that inflates
//! past the caller's limit is an error, never an unbounded allocation.
//!
//! Snappy follows Kafka's Java client, which frames snappy the way xerial's
//! `SnappyOutputStream` does: an 8-byte magic, two big-endian u32 versions, then blocks of
//! `[u32 BE compressed length][raw snappy block]`. Readers also accept a bare raw-snappy
//! payload, which some clients send. LZ4 is the standard LZ4 frame format.

use std::io::{self, Read, Write};
use thiserror::Error;

/// The codec id stored in the low three bits of a batch's attributes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Compression {
    None = 0,
    Gzip = 1,
    Snappy = 2,
    Lz4 = 3,
    Zstd = 4,
}

#[derive(Debug, Error)]
pub enum CompressionError {
    #[error("unknown compression codec id {0}")]
    UnknownCodec(u8),
    #[error("decompressed size exceeds the limit of {0} bytes")]
    TooLarge(u64),
    #[error("corrupt {codec:?} data: {source}")]
    Corrupt {
        codec: Compression,
        source: io::Error,
    },
}

impl Compression {
    pub fn from_id(id: u8) -> Result<Self, CompressionError> {
        Ok(match id {
            0 => Compression::None,
            1 => Compression::Gzip,
            2 => Compression::Snappy,
            3 => Compression::Lz4,
            4 => Compression::Zstd,
            other => return Err(CompressionError::UnknownCodec(other)),
        })
    }

    /// Kafka's name for the codec, as used by `compression.type`.
    pub fn name(self) -> &'static str {
        match self {
            Compression::None => "none",
            Compression::Gzip => "gzip",
            Compression::Snappy => "snappy",
            Compression::Lz4 => "lz4",
            Compression::Zstd => "zstd",
        }
    }

    pub fn from_name(name: &str) -> Option<Self> {
        Some(match name {
            "none" | "uncompressed" => Compression::None,
            "gzip" => Compression::Gzip,
            "snappy" => Compression::Snappy,
            "lz4" => Compression::Lz4,
            "zstd" => Compression::Zstd,
            _ => return None,
        })
    }
}

const XERIAL_MAGIC: [u8; 8] = [0x82, b'S', b'N', b'A', b'P', b'P', b'Y', 0];
const XERIAL_HEADER_LEN: usize = 16;
const XERIAL_BLOCK_BYTES: usize = 32 * 1024;

/// Compress `data` with `codec`, appending to `out`.
pub fn compress(codec: Compression, data: &[u8], out: &mut Vec<u8>) -> io::Result<()> {
    match codec {
        Compression::None => out.extend_from_slice(data),
        Compression::Gzip => {
            let mut enc = flate2::write::GzEncoder::new(out, flate2::Compression::default());
            enc.write_all(data)?;
            enc.finish()?;
        }
        Compression::Snappy => {
            out.extend_from_slice(&XERIAL_MAGIC);
            out.extend_from_slice(&1u32.to_be_bytes());
            out.extend_from_slice(&1u32.to_be_bytes());
            let mut enc = snap::raw::Encoder::new();
            for block in data.chunks(XERIAL_BLOCK_BYTES) {
                let compressed = enc.compress_vec(block).map_err(io::Error::other)?;
                out.extend_from_slice(&(compressed.len() as u32).to_be_bytes());
                out.extend_from_slice(&compressed);
            }
        }
        Compression::Lz4 => {
            let mut info = lz4_flex::frame::FrameInfo::new();
            info.block_size = lz4_flex::frame::BlockSize::Max64KB;
            let mut enc = lz4_flex::frame::FrameEncoder::with_frame_info(info, out);
            enc.write_all(data)?;
            enc.finish().map_err(io::Error::other)?;
        }
        Compression::Zstd => {
            let mut enc = zstd::stream::write::Encoder::new(out, 3)?;
            enc.write_all(data)?;
            enc.finish()?;
        }
    }
    Ok(())
}

/// A streaming reader over the decompressed form of `data`, erroring once more than
/// `limit_bytes` would be produced. Memory stays bounded whatever `data` claims.
pub fn decompressing_reader<'a>(
    codec: Compression,
    data: &'a [u8],
    limit_bytes: u64,
) -> Result<Box<dyn Read + 'a>, CompressionError> {
    let inner: Box<dyn Read + 'a> = match codec {
        Compression::None => Box::new(data),
        Compression::Gzip => Box::new(flate2::read::MultiGzDecoder::new(data)),
        Compression::Snappy => Box::new(SnappyReader::new(data, limit_bytes)?),
        Compression::Lz4 => Box::new(lz4_flex::frame::FrameDecoder::new(data)),
        Compression::Zstd => Box::new(
            zstd::stream::read::Decoder::with_buffer(data)
                .map_err(|source| CompressionError::Corrupt { codec, source })?,
        ),
    };
    Ok(Box::new(Limited {
        inner,
        remaining: limit_bytes,
        limit: limit_bytes,
    }))
}

/// Decompress all of `data`, at most `limit_bytes` of output.
pub fn decompress(
    codec: Compression,
    data: &[u8],
    limit_bytes: u64,
) -> Result<Vec<u8>, CompressionError> {
    let mut reader = decompressing_reader(codec, data, limit_bytes)?;
    let mut out = Vec::with_capacity(data.len().saturating_mul(4).min(limit_bytes as usize));
    reader
        .read_to_end(&mut out)
        .map_err(|e| into_compression_error(codec, e))?;
    Ok(out)
}

/// Map an I/O error from a [`decompressing_reader`] back to the typed error.
pub fn into_compression_error(codec: Compression, e: io::Error) -> CompressionError {
    match e
        .get_ref()
        .and_then(|inner| inner.downcast_ref::<LimitExceeded>())
    {
        Some(LimitExceeded(limit)) => CompressionError::TooLarge(*limit),
        None => CompressionError::Corrupt { codec, source: e },
    }
}

#[derive(Debug, Error)]
#[error("decompressed size exceeds the limit of {0} bytes")]
struct LimitExceeded(u64);

struct Limited<'a> {
    inner: Box<dyn Read + 'a>,
    remaining: u64,
    limit: u64,
}

impl Read for Limited<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        // Ask for one byte more than allowed so overflow is detected, not truncated.
        let want = buf.len().min(self.remaining.saturating_add(1) as usize);
        let n = self.inner.read(&mut buf[..want])?;
        if n as u64 > self.remaining {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                LimitExceeded(self.limit),
            ));
        }
        self.remaining -= n as u64;
        Ok(n)
    }
}

/// The most one byte of a snappy block can decompress to (a 3-byte copy of 64 bytes), rounded up.
const SNAPPY_MAX_EXPANSION: usize = 22;

/// Reads xerial-framed snappy block by block, or a single raw snappy block.
struct SnappyReader<'a> {
    input: &'a [u8],
    framed: bool,
    block: Vec<u8>,
    pos: usize,
    limit_bytes: u64,
    decoder: snap::raw::Decoder,
}

impl<'a> SnappyReader<'a> {
    fn new(data: &'a [u8], limit_bytes: u64) -> Result<Self, CompressionError> {
        let framed = data.len() >= XERIAL_HEADER_LEN && data[..8] == XERIAL_MAGIC;
        let input = if framed {
            &data[XERIAL_HEADER_LEN..]
        } else {
            data
        };
        Ok(Self {
            input,
            framed,
            block: Vec::new(),
            pos: 0,
            limit_bytes,
            decoder: snap::raw::Decoder::new(),
        })
    }

    fn corrupt(msg: impl Into<String>) -> io::Error {
        io::Error::new(io::ErrorKind::InvalidData, msg.into())
    }

    /// Decompress the next block into `self.block`; false at the end of input.
    fn next_block(&mut self) -> io::Result<bool> {
        if self.input.is_empty() {
            return Ok(false);
        }
        let raw = if self.framed {
            if self.input.len() < 4 {
                return Err(Self::corrupt("truncated xerial block length"));
            }
            let len =
                u32::from_be_bytes([self.input[0], self.input[1], self.input[2], self.input[3]])
                    as usize;
            let rest = &self.input[4..];
            if rest.len() < len {
                return Err(Self::corrupt("truncated xerial block"));
            }
            let (block, tail) = rest.split_at(len);
            self.input = tail;
            block
        } else {
            std::mem::take(&mut self.input)
        };
        let size = snap::raw::decompress_len(raw).map_err(|e| Self::corrupt(e.to_string()))?;
        // The block is decompressed into a buffer of the size it claims, so a claim no block
        // of this length can make good is refused before the buffer is zero-filled: snappy's
        // densest element turns 3 bytes into 64.
        if size > raw.len().saturating_mul(SNAPPY_MAX_EXPANSION) {
            return Err(Self::corrupt(format!(
                "a {}-byte snappy block claims {size} bytes",
                raw.len()
            )));
        }
        if size as u64 > self.limit_bytes {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                LimitExceeded(self.limit_bytes),
            ));
        }
        self.block.resize(size, 0);
        let n = self
            .decoder
            .decompress(raw, &mut self.block)
            .map_err(|e| Self::corrupt(e.to_string()))?;
        self.block.truncate(n);
        self.pos = 0;
        Ok(true)
    }
}

impl Read for SnappyReader<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        while self.pos >= self.block.len() {
            if !self.next_block()? {
                return Ok(0);
            }
        }
        let n = buf.len().min(self.block.len() - self.pos);
        buf[..n].copy_from_slice(&self.block[self.pos..self.pos + n]);
        self.pos += n;
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const ALL: [Compression; 5] = [
        Compression::None,
        Compression::Gzip,
        Compression::Snappy,
        Compression::Lz4,
        Compression::Zstd,
    ];

    #[test]
    fn every_codec_round_trips() {
        let data: Vec<u8> = (0..200_000u32)
            .flat_map(|i| (i % 251).to_le_bytes())
            .collect();
        for codec in ALL {
            let mut out = Vec::new();
            compress(codec, &data, &mut out).unwrap();
            let back = decompress(codec, &out, data.len() as u64).unwrap();
            assert_eq!(back, data, "{codec:?}");
        }
    }

    #[test]
    fn decompression_over_the_limit_is_an_error() {
        let data = vec![0u8; 1 << 20];
        for codec in ALL {
            let mut out = Vec::new();
            compress(codec, &data, &mut out).unwrap();
            match decompress(codec, &out, 1000) {
                Err(CompressionError::TooLarge(1000)) => {}
                other => panic!("{codec:?}: expected TooLarge, got {other:?}"),
            }
        }
    }

    #[test]
    fn raw_snappy_without_framing_is_accepted() {
        let data = b"hello hello hello hello".repeat(10);
        let raw = snap::raw::Encoder::new().compress_vec(&data).unwrap();
        assert_eq!(
            decompress(Compression::Snappy, &raw, 1 << 20).unwrap(),
            data
        );
    }

    /// The densest a real snappy block gets (long runs of one byte) stays within the bound
    /// that refuses impossible size claims.
    #[test]
    fn real_snappy_blocks_stay_within_the_expansion_bound() {
        for data in [vec![0u8; 4 << 20], b"ab".repeat(1 << 20)] {
            let raw = snap::raw::Encoder::new().compress_vec(&data).unwrap();
            assert!(
                data.len() <= raw.len() * SNAPPY_MAX_EXPANSION,
                "{} from {}",
                data.len(),
                raw.len()
            );
            assert_eq!(
                decompress(Compression::Snappy, &raw, 8 << 20).unwrap(),
                data
            );
        }
    }

    /// Found by the `records` fuzz target: a 53-byte block claiming ~172 MB (within the
    /// broker's 256 MiB limit) made the reader zero-fill that much before failing. The claim
    /// is refused now, before any buffer is sized.
    #[test]
    fn a_snappy_block_claiming_more_than_it_can_hold_is_refused() {
        let mut block = vec![0xaf, 0xaf, 0xaf, 0x52];
        block.extend_from_slice(&[0x88; 49]);
        let mut framed = XERIAL_MAGIC.to_vec();
        framed.extend_from_slice(&[0, 0, 0, 1, 0, 0, 0, 1]);
        framed.extend_from_slice(&(block.len() as u32).to_be_bytes());
        framed.extend_from_slice(&block);
        match decompress(Compression::Snappy, &framed, 256 << 20) {
            Err(CompressionError::Corrupt { source, .. }) => {
                assert!(source.to_string().contains("claims"), "{source}");
            }
            other => panic!("expected a corrupt block, got {other:?}"),
        }
    }

    proptest! {
        #[test]
        fn garbage_is_an_error_not_a_panic(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
            for codec in ALL {
                let _ = decompress(codec, &bytes, 1 << 16);
            }
        }
    }
}
