//! The simple assignor of share groups (Kafka's `simple`): for each topic, its partitions are
//! spread over the members subscribed to it so that each partition has
//! `ceil(members / partitions)` members and members' counts differ by at most one. With
//! fewer members than partitions each partition has one member; with more, partitions are
//! shared (records, not partitions, are what members hold). Deterministic: the same members
//! and topics give the same assignment. Kafka's assignor also keeps partitions where they
//! were when balance allows; moving a share partition costs nothing but the next fetch, so
//! this one does not.

use std::collections::BTreeMap;

use super::{Assignment, ShareMember};

/// The target assignment of `members` over `topics` (name → partition count).
pub fn assign(
    members: &BTreeMap<String, ShareMember>,
    topics: &BTreeMap<String, i32>,
) -> BTreeMap<String, Assignment> {
    let mut out: BTreeMap<String, Assignment> = members
        .keys()
        .map(|m| (m.clone(), Assignment::new()))
        .collect();
    // Where each topic's round starts, so that members a topic leaves short are first in
    // line for the next.
    let mut turn = 0usize;
    for (topic, &partitions) in topics {
        let subscribers: Vec<&String> = members
            .iter()
            .filter(|(_, m)| m.subscribed.contains(topic))
            .map(|(id, _)| id)
            .collect();
        if subscribers.is_empty() || partitions <= 0 {
            continue;
        }
        let p = partitions as usize;
        let n = subscribers.len();
        let sharing = n.div_ceil(p);
        // Slot k is partition k % p; member i takes the slots k ≡ i (mod n). No member gets
        // a partition twice: that would need n ≡ 0 (mod p), when every member has one slot.
        for k in 0..p * sharing {
            let member = subscribers[(k + turn) % n];
            out.get_mut(member)
                .expect("every member has an entry")
                .entry(topic.clone())
                .or_default()
                .insert((k % p) as i32);
        }
        turn = (turn + p * sharing) % n;
    }
    for a in out.values_mut() {
        a.retain(|_, ps| !ps.is_empty());
    }
    out
}
