//! Partition assignors: the group leader runs one over every member's subscription. Pure
//! functions of (members, partition counts), so any member elected leader — this client, the
//! Java client or librdkafka using the same assignor — hands out the same kind of assignment.
//!
//! - `range`: per topic, members in order each take a contiguous block; the first
//!   `partitions % members` take one extra (Kafka's `RangeAssignor`).
//! - `roundrobin`: all partitions in (topic, partition) order dealt round the members that
//!   subscribe to the topic (`RoundRobinAssignor`).
//! - `cooperative-sticky`: a balanced assignment that keeps every member's owned partitions
//!   where balance allows; a partition moving between members is first only taken away (its
//!   owner revokes it and rejoins), and handed to its new owner in the follow-up rebalance
//!   (KIP-429), so no partition is ever owned twice.
//!
//! Members are ordered as the Java client orders them: static members by instance id first,
//! then dynamic members by member id.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use sluice_protocol::types::TopicPartition;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Assignor {
    Range,
    RoundRobin,
    CooperativeSticky,
}

impl Assignor {
    /// The protocol name members advertise in JoinGroup.
    pub fn name(self) -> &'static str {
        match self {
            Assignor::Range => "range",
            Assignor::RoundRobin => "roundrobin",
            Assignor::CooperativeSticky => "cooperative-sticky",
        }
    }

    /// From a short name (librdkafka) or a Java class name.
    pub fn from_name(name: &str) -> Option<Assignor> {
        let short = name.rsplit('.').next().unwrap_or(name);
        match short {
            "range" | "RangeAssignor" => Some(Assignor::Range),
            "roundrobin" | "RoundRobinAssignor" => Some(Assignor::RoundRobin),
            "cooperative-sticky" | "CooperativeStickyAssignor" => Some(Assignor::CooperativeSticky),
            _ => None,
        }
    }

    pub fn is_cooperative(self) -> bool {
        self == Assignor::CooperativeSticky
    }

    /// Assign `partitions` (topic → partition count) to `members`; every member appears in
    /// the answer, possibly with nothing.
    pub fn assign(
        self,
        members: &[MemberSubscription],
        partitions: &BTreeMap<String, i32>,
    ) -> BTreeMap<String, Vec<TopicPartition>> {
        let mut ordered: Vec<&MemberSubscription> = members.iter().collect();
        ordered.sort_by(|a, b| a.sort_key().cmp(&b.sort_key()));
        let mut out: BTreeMap<String, Vec<TopicPartition>> = members
            .iter()
            .map(|m| (m.member_id.clone(), Vec::new()))
            .collect();
        match self {
            Assignor::Range => range(&ordered, partitions, &mut out),
            Assignor::RoundRobin => round_robin(&ordered, partitions, &mut out),
            Assignor::CooperativeSticky => cooperative_sticky(&ordered, partitions, &mut out),
        }
        for parts in out.values_mut() {
            parts.sort();
        }
        out
    }
}

/// What the leader knows of one member.
#[derive(Clone, Debug, Default)]
pub struct MemberSubscription {
    pub member_id: String,
    pub instance_id: Option<String>,
    pub topics: Vec<String>,
    /// Partitions the member owns now (cooperative members report them).
    pub owned: Vec<TopicPartition>,
    /// Generation of `owned` (-1 when unknown).
    pub generation: i32,
}

impl MemberSubscription {
    fn sort_key(&self) -> (bool, &str) {
        match &self.instance_id {
            Some(i) => (false, i.as_str()),
            None => (true, self.member_id.as_str()),
        }
    }

    fn wants(&self, topic: &str) -> bool {
        self.topics.iter().any(|t| t == topic)
    }
}

fn range(
    members: &[&MemberSubscription],
    partitions: &BTreeMap<String, i32>,
    out: &mut BTreeMap<String, Vec<TopicPartition>>,
) {
    for (topic, &count) in partitions {
        let takers: Vec<&&MemberSubscription> = members.iter().filter(|m| m.wants(topic)).collect();
        if takers.is_empty() || count <= 0 {
            continue;
        }
        let n = takers.len() as i32;
        let (each, extra) = (count / n, count % n);
        for (i, m) in takers.iter().enumerate() {
            let i = i as i32;
            let start = i * each + i.min(extra);
            let len = each + i32::from(i < extra);
            let parts = out.entry(m.member_id.clone()).or_default();
            parts.extend((start..start + len).map(|p| TopicPartition::new(topic.clone(), p)));
        }
    }
}

fn round_robin(
    members: &[&MemberSubscription],
    partitions: &BTreeMap<String, i32>,
    out: &mut BTreeMap<String, Vec<TopicPartition>>,
) {
    if members.is_empty() {
        return;
    }
    let mut next = 0usize;
    for (topic, &count) in partitions {
        if !members.iter().any(|m| m.wants(topic)) {
            continue;
        }
        for p in 0..count {
            while !members[next % members.len()].wants(topic) {
                next += 1;
            }
            let m = members[next % members.len()];
            out.entry(m.member_id.clone())
                .or_default()
                .push(TopicPartition::new(topic.clone(), p));
            next += 1;
        }
    }
}

fn cooperative_sticky(
    members: &[&MemberSubscription],
    partitions: &BTreeMap<String, i32>,
    out: &mut BTreeMap<String, Vec<TopicPartition>>,
) {
    let exists = |tp: &TopicPartition| {
        partitions
            .get(&tp.topic)
            .is_some_and(|&c| tp.partition.0 < c)
    };
    // Who claims each partition; the highest generation wins, a tie at the top voids the claim.
    let mut claims: HashMap<&TopicPartition, Vec<(i32, &str)>> = HashMap::new();
    for m in members {
        for tp in &m.owned {
            claims
                .entry(tp)
                .or_default()
                .push((m.generation, m.member_id.as_str()));
        }
    }
    let mut owner: HashMap<&TopicPartition, &str> = HashMap::new();
    for (tp, cs) in &claims {
        let top = cs.iter().map(|c| c.0).max().unwrap_or(-1);
        let at_top: Vec<&str> = cs.iter().filter(|c| c.0 == top).map(|c| c.1).collect();
        if let [only] = at_top[..] {
            owner.insert(*tp, only);
        }
    }

    // 1. Every member keeps what it validly owns.
    let mut assigned: BTreeMap<&str, BTreeSet<TopicPartition>> = members
        .iter()
        .map(|m| (m.member_id.as_str(), BTreeSet::new()))
        .collect();
    let by_id: HashMap<&str, &MemberSubscription> =
        members.iter().map(|m| (m.member_id.as_str(), *m)).collect();
    let mut taken: BTreeSet<TopicPartition> = BTreeSet::new();
    for m in members {
        for tp in &m.owned {
            if owner.get(tp) == Some(&m.member_id.as_str()) && exists(tp) && m.wants(&tp.topic) {
                assigned.entry(&m.member_id).or_default().insert(tp.clone());
                taken.insert(tp.clone());
            }
        }
    }
    // 2. Every other partition goes to the least-loaded member that wants it.
    for (topic, &count) in partitions {
        for p in 0..count {
            let tp = TopicPartition::new(topic.clone(), p);
            if taken.contains(&tp) {
                continue;
            }
            let target = members
                .iter()
                .filter(|m| m.wants(topic))
                .min_by_key(|m| assigned[m.member_id.as_str()].len());
            if let Some(m) = target {
                assigned.entry(&m.member_id).or_default().insert(tp);
            }
        }
    }
    // 3. Balance: move partitions from the most to a less loaded member that wants them until
    //    no member has two more than another that could take one. Each move lowers the sum of
    //    squared loads, so this ends.
    let order: Vec<&str> = members.iter().map(|m| m.member_id.as_str()).collect();
    loop {
        let mut moved = false;
        let mut heavy = order.clone();
        heavy.sort_by_key(|id| std::cmp::Reverse(assigned[id].len()));
        'find: for from in heavy {
            let load = assigned[from].len();
            // Give away partitions not owned before first, then the highest ones.
            let mut candidates: Vec<TopicPartition> = assigned[from].iter().cloned().collect();
            candidates
                .sort_by_key(|tp| (owner.get(tp) == Some(&from), std::cmp::Reverse(tp.clone())));
            for tp in candidates {
                let to = order
                    .iter()
                    .filter(|id| **id != from && by_id[*id].wants(&tp.topic))
                    .filter(|id| assigned[**id].len() + 1 < load)
                    .min_by_key(|id| assigned[**id].len());
                if let Some(to) = to {
                    let to: &str = to;
                    assigned.get_mut(from).map(|s| s.remove(&tp));
                    assigned.get_mut(to).map(|s| s.insert(tp));
                    moved = true;
                    break 'find;
                }
            }
        }
        if !moved {
            break;
        }
    }
    // 4. Cooperative: a partition moving away from its owner is withheld this round; the
    //    owner revokes it and rejoins, and the next round hands it out. So is one whose
    //    claim was void (claimed twice in one generation). An older generation's stale
    //    claim does not hold up the rightful owner.
    for (id, parts) in assigned {
        let keep: Vec<TopicPartition> = parts
            .into_iter()
            .filter(|tp| match owner.get(tp) {
                Some(o) => *o == id,
                None => !claims.contains_key(tp),
            })
            .collect();
        out.insert(id.to_string(), keep);
    }
}

#[cfg(test)]
mod tests;
