//! Replica placement: spread partitions and their replicas evenly over live brokers with the
//! seed notes' scheme — partition i's first replica (its preferred leader) on broker
//! (start + i) mod n, replica j on (start + i + j) mod n, `start` chosen at random per topic.

/// Place `partitions` partitions starting at index `first_partition`, each with
/// `replication_factor` distinct replicas chosen from `brokers` (sorted, non-empty,
/// `replication_factor <= brokers.len()`).
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
    let n = brokers.len();
    (0..partitions)
        .map(|i| {
            let p = (first_partition + i) as usize;
            (0..replication_factor)
                .map(|j| brokers[(start + p + j) % n])
                .collect()
        })
        .collect()
}

/// A random placement start (Kafka picks one per topic so leaders of small topics do not
/// all land on the first broker).
pub fn random_start(n: usize) -> usize {
    if n == 0 {
        return 0;
    }
    (sluice_rt::random_u128() % n as u128) as usize
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_seed_scheme_spreads_leaders_and_replicas() {
        let brokers = [1, 2, 3];
        assert_eq!(
            place(&brokers, 0, 4, 3, 1),
            vec![vec![2, 3, 1], vec![3, 1, 2], vec![1, 2, 3], vec![2, 3, 1]]
        );
        for start in 0..3 {
            let placed = place(&brokers, 0, 6, 2, start);
            let mut leaders: Vec<i32> = placed.iter().map(|r| r[0]).collect();
            leaders.sort_unstable();
            assert_eq!(leaders, vec![1, 1, 2, 2, 3, 3]);
            let mut all: Vec<i32> = placed.iter().flatten().copied().collect();
            all.sort_unstable();
            assert_eq!(all, vec![1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3]);
            for r in &placed {
                assert_ne!(r[0], r[1]);
            }
        }
        // Added partitions continue the rotation where the topic left off.
        assert_eq!(place(&brokers, 2, 1, 1, 0), vec![vec![3]]);
        assert_eq!(place(&[0], 0, 3, 1, 0), vec![vec![0], vec![0], vec![0]]);
        assert!(random_start(3) < 3);
    }
}
