//! The part of OpenTelemetry's `MetricsData` (OTLP, protobuf) that clients push with
//! PushTelemetry (KIP-714): gauges and sums, their data points, and the attributes of each
//! point and of its resource. Histograms and summaries (which Kafka's clients do not send)
//! and anything unknown are skipped, as protobuf readers skip unknown fields.
//!
//! Hand-written over the protobuf wire format: the subset is six small messages, and a
//! generated decoder would bring a code generator and its runtime to the build for them.
//! Every length is checked against what is left, so any bytes decode or fail, never panic.

use thiserror::Error;

#[derive(Debug, Error, PartialEq, Eq)]
pub enum DecodeError {
    #[error("truncated protobuf message")]
    Truncated,
    #[error("protobuf varint longer than 10 bytes")]
    LongVarint,
    #[error("protobuf wire type {0} is not supported")]
    WireType(u8),
    #[error("a string that is not UTF-8")]
    Utf8,
    #[error("more than {0} data points")]
    TooManyPoints(usize),
}

/// How a metric's points add up.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Gauge,
    /// A monotonic sum.
    Counter,
    /// A sum that may go down.
    UpDownSum,
}

/// One data point: its metric, the attributes of its resource and its own, and its value.
#[derive(Clone, Debug, PartialEq)]
pub struct Point {
    pub name: String,
    pub kind: Kind,
    pub attributes: Vec<(String, String)>,
    pub value: f64,
}

enum Field<'a> {
    Varint(u64),
    Fixed64(u64),
    Bytes(&'a [u8]),
    Fixed32,
}

/// The fields of one protobuf message, in order.
struct Fields<'a>(&'a [u8]);

impl<'a> Fields<'a> {
    fn varint(&mut self) -> Result<u64, DecodeError> {
        let mut v = 0u64;
        for i in 0..10 {
            let (&b, rest) = self.0.split_first().ok_or(DecodeError::Truncated)?;
            self.0 = rest;
            v |= u64::from(b & 0x7f) << (7 * i);
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(DecodeError::LongVarint)
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        if n > self.0.len() {
            return Err(DecodeError::Truncated);
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(head)
    }

    fn next(&mut self) -> Result<Option<(u64, Field<'a>)>, DecodeError> {
        if self.0.is_empty() {
            return Ok(None);
        }
        let key = self.varint()?;
        let field = key >> 3;
        let value = match (key & 7) as u8 {
            0 => Field::Varint(self.varint()?),
            1 => Field::Fixed64(u64::from_le_bytes(
                self.take(8)?
                    .try_into()
                    .map_err(|_| DecodeError::Truncated)?,
            )),
            2 => {
                let n = usize::try_from(self.varint()?).map_err(|_| DecodeError::Truncated)?;
                Field::Bytes(self.take(n)?)
            }
            5 => {
                self.take(4)?;
                Field::Fixed32
            }
            other => return Err(DecodeError::WireType(other)),
        };
        Ok(Some((field, value)))
    }
}

fn text(b: &[u8]) -> Result<String, DecodeError> {
    std::str::from_utf8(b)
        .map(str::to_owned)
        .map_err(|_| DecodeError::Utf8)
}

/// `KeyValue { string key = 1; AnyValue value = 2; }`; values other than scalars are skipped.
fn key_value(b: &[u8]) -> Result<Option<(String, String)>, DecodeError> {
    let mut key = None;
    let mut value = None;
    let mut f = Fields(b);
    while let Some((n, v)) = f.next()? {
        match (n, v) {
            (1, Field::Bytes(k)) => key = Some(text(k)?),
            (2, Field::Bytes(any)) => value = any_value(any)?,
            _ => {}
        }
    }
    Ok(key.zip(value))
}

/// `AnyValue`: string 1, bool 2, int 3, double 4 (arrays, maps and bytes are skipped).
fn any_value(b: &[u8]) -> Result<Option<String>, DecodeError> {
    let mut out = None;
    let mut f = Fields(b);
    while let Some((n, v)) = f.next()? {
        out = match (n, v) {
            (1, Field::Bytes(s)) => Some(text(s)?),
            (2, Field::Varint(x)) => Some((x != 0).to_string()),
            (3, Field::Varint(x)) => Some((x as i64).to_string()),
            (4, Field::Fixed64(x)) => Some(f64::from_bits(x).to_string()),
            _ => out,
        };
    }
    Ok(out)
}

/// Decode a `MetricsData` message, at most `max_points` data points.
pub fn decode(b: &[u8], max_points: usize) -> Result<Vec<Point>, DecodeError> {
    let mut out = Vec::new();
    let mut f = Fields(b);
    while let Some((n, v)) = f.next()? {
        if let (1, Field::Bytes(rm)) = (n, v) {
            resource_metrics(rm, max_points, &mut out)?;
        }
    }
    Ok(out)
}

/// `ResourceMetrics { Resource resource = 1; repeated ScopeMetrics scope_metrics = 2; }`
fn resource_metrics(b: &[u8], max: usize, out: &mut Vec<Point>) -> Result<(), DecodeError> {
    // The resource may follow its metrics on the wire: read it first.
    let mut attributes = Vec::new();
    let mut f = Fields(b);
    while let Some((n, v)) = f.next()? {
        if let (1, Field::Bytes(resource)) = (n, v) {
            let mut r = Fields(resource);
            while let Some((n, v)) = r.next()? {
                if let (1, Field::Bytes(kv)) = (n, v) {
                    attributes.extend(key_value(kv)?);
                }
            }
        }
    }
    let mut f = Fields(b);
    while let Some((n, v)) = f.next()? {
        if let (2, Field::Bytes(scope)) = (n, v) {
            let mut s = Fields(scope);
            while let Some((n, v)) = s.next()? {
                if let (2, Field::Bytes(m)) = (n, v) {
                    metric(m, &attributes, max, out)?;
                }
            }
        }
    }
    Ok(())
}

/// `Metric { string name = 1; Gauge gauge = 5; Sum sum = 7; ... }`
fn metric(
    b: &[u8],
    resource: &[(String, String)],
    max: usize,
    out: &mut Vec<Point>,
) -> Result<(), DecodeError> {
    let mut name = String::new();
    let mut data: Option<(Kind, &[u8])> = None;
    let mut f = Fields(b);
    while let Some((n, v)) = f.next()? {
        match (n, v) {
            (1, Field::Bytes(s)) => name = text(s)?,
            (5, Field::Bytes(g)) => data = Some((Kind::Gauge, g)),
            (7, Field::Bytes(s)) => data = Some((Kind::UpDownSum, s)),
            _ => {}
        }
    }
    let Some((mut kind, body)) = data else {
        return Ok(());
    };
    let mut points = Vec::new();
    let mut f = Fields(body);
    while let Some((n, v)) = f.next()? {
        match (n, v) {
            (1, Field::Bytes(p)) => points.push(p),
            // Sum.is_monotonic
            (3, Field::Varint(x)) if kind != Kind::Gauge && x != 0 => kind = Kind::Counter,
            _ => {}
        }
    }
    for p in points {
        if out.len() >= max {
            return Err(DecodeError::TooManyPoints(max));
        }
        let mut attributes = resource.to_vec();
        let mut value = None;
        let mut f = Fields(p);
        while let Some((n, v)) = f.next()? {
            match (n, v) {
                (4, Field::Fixed64(x)) => value = Some(f64::from_bits(x)),
                (6, Field::Fixed64(x)) => value = Some(x as i64 as f64),
                (7, Field::Bytes(kv)) => attributes.extend(key_value(kv)?),
                _ => {}
            }
        }
        if let Some(value) = value {
            out.push(Point {
                name: name.clone(),
                kind,
                attributes,
                value,
            });
        }
    }
    Ok(())
}

/// An encoder for the same subset, for tests (of the decoder, and of the broker by pushing).
pub mod encode {
    use super::Kind;

    fn varint(out: &mut Vec<u8>, mut v: u64) {
        while v >= 0x80 {
            out.push((v as u8) | 0x80);
            v >>= 7;
        }
        out.push(v as u8);
    }

    fn bytes(out: &mut Vec<u8>, field: u64, b: &[u8]) {
        varint(out, field << 3 | 2);
        varint(out, b.len() as u64);
        out.extend_from_slice(b);
    }

    fn key_value(k: &str, v: &str) -> Vec<u8> {
        let mut any = Vec::new();
        bytes(&mut any, 1, v.as_bytes());
        let mut kv = Vec::new();
        bytes(&mut kv, 1, k.as_bytes());
        bytes(&mut kv, 2, &any);
        kv
    }

    /// A metric of one point.
    pub struct Metric<'a> {
        pub name: &'a str,
        pub kind: Kind,
        pub attributes: &'a [(&'a str, &'a str)],
        pub value: f64,
    }

    /// `MetricsData` of one resource with `resource` attributes and `metrics`.
    pub fn metrics_data(resource: &[(&str, &str)], metrics: &[Metric]) -> Vec<u8> {
        let mut res = Vec::new();
        for (k, v) in resource {
            bytes(&mut res, 1, &key_value(k, v));
        }
        let mut scope = Vec::new();
        for m in metrics {
            let mut point = Vec::new();
            for (k, v) in m.attributes {
                bytes(&mut point, 7, &key_value(k, v));
            }
            varint(&mut point, 4 << 3 | 1);
            point.extend_from_slice(&m.value.to_bits().to_le_bytes());
            let mut data = Vec::new();
            bytes(&mut data, 1, &point);
            if m.kind == Kind::Counter {
                varint(&mut data, 3 << 3);
                varint(&mut data, 1);
            }
            let mut metric = Vec::new();
            bytes(&mut metric, 1, m.name.as_bytes());
            bytes(
                &mut metric,
                if m.kind == Kind::Gauge { 5 } else { 7 },
                &data,
            );
            bytes(&mut scope, 2, &metric);
        }
        let mut rm = Vec::new();
        bytes(&mut rm, 1, &res);
        bytes(&mut rm, 2, &scope);
        let mut out = Vec::new();
        bytes(&mut out, 1, &rm);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::encode::{metrics_data, Metric};
    use super::*;

    #[test]
    fn gauges_and_sums_decode_with_their_attributes() {
        let b = metrics_data(
            &[("service", "app")],
            &[
                Metric {
                    name: "org.apache.kafka.producer.record.send.total",
                    kind: Kind::Counter,
                    attributes: &[("client_id", "p-1")],
                    value: 42.0,
                },
                Metric {
                    name: "org.apache.kafka.producer.buffer.available.bytes",
                    kind: Kind::Gauge,
                    attributes: &[],
                    value: 1.5,
                },
            ],
        );
        let points = decode(&b, 100).unwrap();
        assert_eq!(
            points,
            [
                Point {
                    name: "org.apache.kafka.producer.record.send.total".into(),
                    kind: Kind::Counter,
                    attributes: vec![
                        ("service".into(), "app".into()),
                        ("client_id".into(), "p-1".into())
                    ],
                    value: 42.0,
                },
                Point {
                    name: "org.apache.kafka.producer.buffer.available.bytes".into(),
                    kind: Kind::Gauge,
                    attributes: vec![("service".into(), "app".into())],
                    value: 1.5,
                },
            ]
        );
        assert_eq!(decode(&b, 1), Err(DecodeError::TooManyPoints(1)));
        assert_eq!(decode(&[], 1), Ok(Vec::new()));
    }

    #[test]
    fn any_bytes_decode_or_fail_without_panicking() {
        let b = metrics_data(
            &[("k", "v")],
            &[Metric {
                name: "m",
                kind: Kind::UpDownSum,
                attributes: &[("a", "b")],
                value: -3.0,
            }],
        );
        for cut in 0..b.len() {
            let _ = decode(&b[..cut], 100);
        }
        for i in 0..b.len() {
            let mut bad = b.clone();
            bad[i] ^= 0xff;
            let _ = decode(&bad, 100);
        }
        assert_eq!(decode(&[0x0b], 10), Err(DecodeError::WireType(3)));
        assert_eq!(decode(&[0x0a, 0x05, 1], 10), Err(DecodeError::Truncated));
        let mut long = vec![0x08];
        long.extend([0xff; 11]);
        assert_eq!(decode(&long, 10), Err(DecodeError::LongVarint));
    }
}
