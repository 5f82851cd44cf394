//! Base64 in the two forms Kafka uses: URL-safe without padding, how Kafka prints a topic id
//! (`Uuid.toString()`), and the standard padded form of RFC 4648 §4 (SCRAM messages).

const URL_SAFE: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
const STANDARD: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// URL-safe, unpadded.
pub fn encode(data: &[u8]) -> String {
    encode_with(data, URL_SAFE)
}

/// URL-safe, unpadded; None on any other character.
pub fn decode(text: &str) -> Option<Vec<u8>> {
    decode_with(text, URL_SAFE)
}

/// Standard alphabet, padded with `=` to a multiple of four characters.
pub fn encode_padded(data: &[u8]) -> String {
    let mut out = encode_with(data, STANDARD);
    while out.len() % 4 != 0 {
        out.push('=');
    }
    out
}

/// Standard alphabet, padded; None unless the text is exactly that (padding included).
pub fn decode_padded(text: &str) -> Option<Vec<u8>> {
    if text.len() % 4 != 0 {
        return None;
    }
    let body = text.trim_end_matches('=');
    if text.len() - body.len() > 2 {
        return None;
    }
    let out = decode_with(body, STANDARD)?;
    // Canonical only: the unused bits of the last character must be zero.
    (encode_padded(&out) == text).then_some(out)
}

fn encode_with(data: &[u8], alphabet: &[u8; 64]) -> String {
    let mut out = String::with_capacity(data.len().div_ceil(3) * 4);
    for chunk in data.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        let chars = chunk.len() + 1;
        for i in 0..chars {
            out.push(alphabet[((n >> (18 - 6 * i)) & 0x3f) as usize] as char);
        }
    }
    out
}

fn decode_with(text: &str, alphabet: &[u8; 64]) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(text.len() * 3 / 4);
    let mut acc: u32 = 0;
    let mut bits = 0;
    for c in text.bytes() {
        let v = alphabet.iter().position(|&a| a == c)? as u32;
        acc = (acc << 6) | v;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_sixteen_bytes_as_22_chars() {
        let id: Vec<u8> = (0u8..16).map(|i| i.wrapping_mul(37)).collect();
        let s = encode(&id);
        assert_eq!(s.len(), 22);
        assert_eq!(decode(&s).as_deref(), Some(&id[..]));
        assert_eq!(encode(b"\xfb\xff"), "-_8");
        assert_eq!(decode("!!"), None);
    }

    #[test]
    fn padded_form_follows_rfc_4648() {
        for (plain, coded) in [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg=="),
            ("fooba", "Zm9vYmE="),
            ("foobar", "Zm9vYmFy"),
        ] {
            assert_eq!(encode_padded(plain.as_bytes()), coded);
            assert_eq!(decode_padded(coded).as_deref(), Some(plain.as_bytes()));
        }
        assert_eq!(encode_padded(b"\xfb\xff"), "+/8=");
        for bad in ["Zg", "Zg=", "Z===", "Zh==", "Zm9v!A==", "-_8="] {
            assert_eq!(decode_padded(bad), None, "{bad}");
        }
    }
}
