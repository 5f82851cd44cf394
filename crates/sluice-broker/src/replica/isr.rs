//! The leader's ISR upkeep: followers that stop keeping up for `replica.lag.time.max.ms`
//! leave the ISR, replicas that caught up to the high watermark join it. Each change is
//! proposed to the controller (AlterPartition) with the leader and partition epochs it was
//! computed from, so a stale one is refused; it takes effect when the metadata comes back.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use sluice_protocol::types::TopicPartition;
use tokio::sync::watch;
use tracing::{debug, info, warn};

use crate::controller_api::ControllerApi;
use crate::metadata_cache::MetadataCache;
use crate::replica::manager::ReplicaManager;

pub async fn run_isr_checks(
    replicas: Arc<ReplicaManager>,
    metadata: Arc<MetadataCache>,
    controller: Arc<dyn ControllerApi>,
    lag_max_ms: i64,
    mut shutdown: watch::Receiver<bool>,
) {
    let period = Duration::from_millis((lag_max_ms / 2).clamp(25, 250) as u64);
    let mut tick = tokio::time::interval(period);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let in_flight: Arc<Mutex<HashSet<TopicPartition>>> = Arc::default();
    loop {
        tokio::select! {
            _ = shutdown.changed() => return,
            _ = tick.tick() => {}
        }
        let image = metadata.current();
        let now = crate::now_ms();
        for p in replicas.all() {
            if !p.is_leader()
                || in_flight
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .contains(&p.tp)
            {
                continue;
            }
            let Some(change) = p.isr_proposal(now, lag_max_ms, |r| image.is_live(r)) else {
                continue;
            };
            in_flight
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .insert(p.tp.clone());
            let shrink = change.isr.len() < p.state().isr().len();
            let controller = Arc::clone(&controller);
            let in_flight = Arc::clone(&in_flight);
            let tp = p.tp.clone();
            tokio::spawn(async move {
                if change.isr.len() == 1 {
                    // Left alone in the ISR, this leader's disk will hold the only copy of
                    // what acks=all acknowledged: make it durable first (see flush_log).
                    let flushed =
                        sluice_rt::task::spawn_blocking(move || p.flush_log(crate::now_ms())).await;
                    if !matches!(flushed, Ok(Ok(()))) {
                        warn!(partition = %tp, "not shrinking the ISR to the leader alone: its log cannot be fsynced");
                        in_flight
                            .lock()
                            .unwrap_or_else(std::sync::PoisonError::into_inner)
                            .remove(&tp);
                        return;
                    }
                }
                match controller.alter_partition(&change).await {
                    Ok(Ok(())) => {
                        info!(partition = %tp, isr = ?change.isr, "ISR changed");
                        let which = if shrink {
                            "sluice_isr_shrinks_total"
                        } else {
                            "sluice_isr_expands_total"
                        };
                        metrics::counter!(which).increment(1);
                    }
                    Ok(Err(e)) => {
                        debug!(partition = %tp, code = ?e.code, "ISR change refused: {}", e.message)
                    }
                    Err(e) => debug!(partition = %tp, error = %e, "ISR change failed"),
                }
                in_flight
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .remove(&tp);
            });
        }
    }
}
