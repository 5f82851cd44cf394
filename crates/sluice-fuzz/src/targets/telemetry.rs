//! Client telemetry a client pushes (KIP-714): OTLP `MetricsData`, compressed or not.

use sluice_broker::telemetry::otlp::encode::{metrics_data, Metric};
use sluice_broker::telemetry::otlp::Kind;

/// The broker's bound on one push in these runs.
const MAX_BYTES: i32 = 4096;

/// `[compression][metrics]`: what PushTelemetry carries, decompressed and decoded.
pub fn telemetry(data: &[u8]) {
    let Some((&compression, metrics)) = data.split_first() else {
        return;
    };
    let _ = sluice_broker::telemetry::decode_metrics((compression % 6) as i8, metrics, MAX_BYTES);
}

pub fn seeds() -> Vec<Vec<u8>> {
    let body = metrics_data(
        &[("service.name", "app")],
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
    let mut gzip = vec![1];
    sluice_protocol::compression::compress(
        sluice_protocol::compression::Compression::Gzip,
        &body,
        &mut gzip,
    )
    .expect("gzip");
    let mut plain = vec![0];
    plain.extend_from_slice(&body);
    vec![plain, gzip]
}
