//! `application/x-www-form-urlencoded`: the console's query strings and form bodies, and
//! the encoding of values put into links.

/// The pairs of a query string or form body, in order (a key may repeat). Malformed
/// percent escapes are kept as written; bytes that are not UTF-8 are replaced.
pub fn parse(input: &str) -> Vec<(String, String)> {
    input
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|pair| {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            (decode(k), decode(v))
        })
        .collect()
}

fn decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < bytes.len() => match (hex(bytes[i + 1]), hex(bytes[i + 2])) {
                (Some(h), Some(l)) => {
                    out.push(h << 4 | l);
                    i += 2;
                }
                _ => out.push(b'%'),
            },
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn hex(b: u8) -> Option<u8> {
    (b as char).to_digit(16).map(|d| d as u8)
}

/// Percent-encode a value for a link's query string or path segment.
pub fn encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// Fields of a parsed form or query, looked up by name.
#[derive(Debug, Default)]
pub struct Fields(pub Vec<(String, String)>);

impl Fields {
    pub fn from_query(query: Option<&str>) -> Fields {
        Fields(query.map(parse).unwrap_or_default())
    }

    pub fn from_body(body: &[u8]) -> Fields {
        Fields(parse(&String::from_utf8_lossy(body)))
    }

    /// The first value of `key`, trimmed; "" when absent.
    pub fn get(&self, key: &str) -> &str {
        self.0
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.trim())
            .unwrap_or("")
    }

    /// The first value of `key` as written (not trimmed): keys and values of records.
    pub fn raw(&self, key: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// A number, or `default` when the field is empty; Err names the field.
    pub fn number<T: std::str::FromStr>(&self, key: &str, default: T) -> Result<T, String> {
        let v = self.get(key);
        if v.is_empty() {
            return Ok(default);
        }
        v.parse()
            .map_err(|_| format!("{key} must be a number, not '{v}'"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pairs_are_decoded_and_bad_escapes_kept() {
        let p = parse("a=1&b=x+y%20z&c=%E2%9C%93&d&e=%zz&f=%4");
        assert_eq!(
            p,
            vec![
                ("a".into(), "1".into()),
                ("b".into(), "x y z".into()),
                ("c".into(), "✓".into()),
                ("d".into(), "".into()),
                ("e".into(), "%zz".into()),
                ("f".into(), "%4".into()),
            ]
        );
        assert_eq!(
            parse(&format!("k={}", encode("a b&c=d/é"))),
            vec![("k".into(), "a b&c=d/é".into())]
        );
    }
}
