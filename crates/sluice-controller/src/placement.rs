//! Replica placement: spread partitions and their replicas evenly over brokers, the first
//! replica (the preferred leader) rotating from partition to partition, as Kafka's striped
//! placer does for a single rack.

/// Place `partitions` partitions starting at index `first_partition`, each with
/// `replication_factor` distinct replicas chosen from `brokers` (sorted, non-empty,
/// `replication_factor <= brokers.len()`). `start` rotates the first leader.
pub fn place(
    brokers: &[i32],
    first_partition: i32,
    partitions: i32,
    replication_factor: usize,
    start: usize,
) -> Vec<Vec<i32>> {
    assert!(
        !brokers.is_empty() && replication_factor <= brokers.len(),
        "caller checked the broker count"
    );
    (0..partitions)
        .map(|i| {
            let p = (first_partition + i) as usize;
            let first = (start + p) % brokers.len();
            // Shift followers by a per-round amount so replica sets differ across rounds.
            let shift = 1 + (p / brokers.len()) % (brokers.len().max(2) - 1);
            let mut replicas = vec![brokers[first]];
            let mut j = 0;
            while replicas.len() < replication_factor {
                let candidate = brokers[(first + shift + j) % brokers.len()];
                if !replicas.contains(&candidate) {
                    replicas.push(candidate);
                }
                j += 1;
            }
            replicas
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leaders_and_replicas_are_spread() {
        let brokers = [1, 2, 3];
        let placed = place(&brokers, 0, 6, 3, 0);
        for replicas in &placed {
            let mut r = replicas.clone();
            r.sort_unstable();
            r.dedup();
            assert_eq!(r.len(), 3);
        }
        let mut leaders: Vec<i32> = placed.iter().map(|r| r[0]).collect();
        leaders.sort_unstable();
        assert_eq!(leaders, vec![1, 1, 2, 2, 3, 3]);
        assert_eq!(place(&[0], 0, 3, 1, 0), vec![vec![0], vec![0], vec![0]]);
    }
}
