//! Zig-zag varints (protobuf style), the integer encoding used inside record batch v2.

use thiserror::Error;

#[derive(Debug, Error, PartialEq, Eq)]
pub enum VarintError {
    #[error("varint truncated")]
    Truncated,
    #[error("varint too long")]
    TooLong,
}

/// Decode an unsigned LEB128 value of at most `max_bytes` bytes; returns (value, bytes read).
fn decode_unsigned(buf: &[u8], max_bytes: usize) -> Result<(u64, usize), VarintError> {
    let mut value: u64 = 0;
    for (i, &b) in buf.iter().enumerate() {
        if i >= max_bytes {
            return Err(VarintError::TooLong);
        }
        value |= u64::from(b & 0x7f) << (7 * i);
        if b & 0x80 == 0 {
            return Ok((value, i + 1));
        }
    }
    if buf.len() >= max_bytes {
        Err(VarintError::TooLong)
    } else {
        Err(VarintError::Truncated)
    }
}

/// Decode a zig-zag varint (32-bit); returns (value, bytes read).
pub fn read_varint(buf: &[u8]) -> Result<(i32, usize), VarintError> {
    let (raw, n) = decode_unsigned(buf, 5)?;
    let raw = raw as u32;
    Ok((((raw >> 1) as i32) ^ -((raw & 1) as i32), n))
}

/// Decode a zig-zag varlong (64-bit); returns (value, bytes read).
pub fn read_varlong(buf: &[u8]) -> Result<(i64, usize), VarintError> {
    let (raw, n) = decode_unsigned(buf, 10)?;
    Ok((((raw >> 1) as i64) ^ -((raw & 1) as i64), n))
}

fn write_unsigned(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

pub fn write_varint(out: &mut Vec<u8>, v: i32) {
    write_unsigned(out, u64::from(((v << 1) ^ (v >> 31)) as u32));
}

pub fn write_varlong(out: &mut Vec<u8>, v: i64) {
    write_unsigned(out, ((v << 1) ^ (v >> 63)) as u64);
}

/// Encoded size of a zig-zag varint.
pub fn varint_len(v: i32) -> usize {
    let mut u = ((v << 1) ^ (v >> 31)) as u32;
    let mut n = 1;
    while u >= 0x80 {
        u >>= 7;
        n += 1;
    }
    n
}

/// Encoded size of a zig-zag varlong.
pub fn varlong_len(v: i64) -> usize {
    let mut u = ((v << 1) ^ (v >> 63)) as u64;
    let mut n = 1;
    while u >= 0x80 {
        u >>= 7;
        n += 1;
    }
    n
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn varint_round_trip(v in any::<i32>()) {
            let mut out = Vec::new();
            write_varint(&mut out, v);
            prop_assert_eq!(out.len(), varint_len(v));
            prop_assert_eq!(read_varint(&out), Ok((v, out.len())));
        }

        #[test]
        fn varlong_round_trip(v in any::<i64>()) {
            let mut out = Vec::new();
            write_varlong(&mut out, v);
            prop_assert_eq!(out.len(), varlong_len(v));
            prop_assert_eq!(read_varlong(&out), Ok((v, out.len())));
        }

        #[test]
        fn garbage_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..12)) {
            let _ = read_varint(&bytes);
            let _ = read_varlong(&bytes);
        }
    }

    #[test]
    fn known_encodings() {
        let mut out = Vec::new();
        write_varint(&mut out, -1);
        assert_eq!(out, [0x01]);
        out.clear();
        write_varint(&mut out, 300);
        assert_eq!(out, [0xd8, 0x04]);
        assert_eq!(read_varint(&[0x80]), Err(VarintError::Truncated));
        assert_eq!(read_varint(&[0xff; 6]), Err(VarintError::TooLong));
    }
}
