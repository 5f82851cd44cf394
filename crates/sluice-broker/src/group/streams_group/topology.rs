//! A streams group's topology (what the Kafka Streams application declares when it joins)
//! and its configuration against the cluster's topics, as Kafka's InternalTopicManager does
//! it: the partition counts of the repartition topics (fixed, inherited from the
//! subtopologies writing into them, or made equal inside a copartition group), each
//! subtopology's number of tasks (its most partitioned source), the changelogs' partition
//! counts (the number of tasks), and which internal topics are missing and to be created.

use std::collections::{BTreeMap, BTreeSet};

/// An internal topic the application declares: a changelog or a repartition topic.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct TopicInfo {
    pub name: String,
    /// 0: left to the broker (always so for changelogs).
    pub partitions: i32,
    /// 0 or -1: the broker's default.
    pub replication_factor: i16,
    pub configs: Vec<(String, String)>,
}

/// Topics that must have the same number of partitions: indexes into the subtopology's
/// source topics and repartition source topics.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct CopartitionGroup {
    pub source_topics: Vec<i16>,
    pub repartition_source_topics: Vec<i16>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Subtopology {
    pub id: String,
    pub source_topics: Vec<String>,
    pub state_changelog_topics: Vec<TopicInfo>,
    pub repartition_sink_topics: Vec<String>,
    pub repartition_source_topics: Vec<TopicInfo>,
    pub copartition_groups: Vec<CopartitionGroup>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Topology {
    pub epoch: i32,
    /// Sorted by id.
    pub subtopologies: Vec<Subtopology>,
}

/// The heartbeat's status codes (StreamsGroupHeartbeatResponse.Status).
pub const STALE_TOPOLOGY: i8 = 0;
pub const MISSING_SOURCE_TOPICS: i8 = 1;
pub const INCORRECTLY_PARTITIONED_TOPICS: i8 = 2;
pub const MISSING_INTERNAL_TOPICS: i8 = 3;
pub const SHUTDOWN_APPLICATION: i8 = 4;
pub const ASSIGNMENT_DELAYED: i8 = 5;

/// The topology as configured against the cluster's topics.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Configured {
    /// Subtopology id -> number of tasks (empty when source topics are missing).
    pub tasks: BTreeMap<String, i32>,
    /// What keeps it from being ready: a status code and its detail.
    pub problem: Option<(i8, String)>,
    /// Internal topics to create (name, partitions, replication factor (-1: default),
    /// configs).
    pub to_create: Vec<TopicInfo>,
    /// Internal topic -> partition count decided.
    pub internal: BTreeMap<String, i32>,
}

impl Configured {
    pub fn is_ready(&self) -> bool {
        self.problem.is_none()
    }
}

/// A topology no cluster can satisfy (STREAMS_INVALID_TOPOLOGY).
pub type Invalid = String;

impl Topology {
    /// Every topic the topology reads or keeps: sources, repartition sources, changelogs.
    pub fn required_topics(&self) -> BTreeSet<&str> {
        let mut out = BTreeSet::new();
        for s in &self.subtopologies {
            out.extend(s.source_topics.iter().map(String::as_str));
            out.extend(s.repartition_source_topics.iter().map(|t| t.name.as_str()));
            out.extend(s.state_changelog_topics.iter().map(|t| t.name.as_str()));
        }
        out
    }

    /// Every topic name it mentions (what the broker checks names and ACLs of).
    pub fn all_topics(&self) -> BTreeSet<&str> {
        let mut out = self.required_topics();
        for s in &self.subtopologies {
            out.extend(s.repartition_sink_topics.iter().map(String::as_str));
        }
        out
    }

    /// The source and repartition source topics of each subtopology (a task's input
    /// partitions).
    pub fn inputs(&self, subtopology: &str) -> Vec<&str> {
        self.subtopologies
            .iter()
            .filter(|s| s.id == subtopology)
            .flat_map(|s| {
                s.source_topics
                    .iter()
                    .map(String::as_str)
                    .chain(s.repartition_source_topics.iter().map(|t| t.name.as_str()))
            })
            .collect()
    }

    /// Configure against the cluster: `partitions(topic)` is the topic's partition count if
    /// it exists.
    pub fn configure(
        &self,
        partitions: &dyn Fn(&str) -> Option<i32>,
    ) -> Result<Configured, Invalid> {
        // 1. Source topics must exist.
        let mut missing: BTreeSet<&str> = BTreeSet::new();
        for s in &self.subtopologies {
            for t in &s.source_topics {
                if partitions(t).is_none() {
                    missing.insert(t);
                }
            }
        }
        if !missing.is_empty() {
            let names: Vec<&str> = missing.into_iter().collect();
            return Ok(Configured {
                problem: Some((
                    MISSING_SOURCE_TOPICS,
                    format!("Source topics {} are missing.", names.join(", ")),
                )),
                ..Configured::default()
            });
        }
        // 2. Repartition topics' partition counts.
        let mut decided: BTreeMap<String, i32> = BTreeMap::new();
        let repartition: BTreeMap<&str, &TopicInfo> = self
            .subtopologies
            .iter()
            .flat_map(|s| s.repartition_source_topics.iter())
            .map(|t| (t.name.as_str(), t))
            .collect();
        let fixed: BTreeSet<&str> = repartition
            .values()
            .filter(|t| t.partitions > 0)
            .map(|t| t.name.as_str())
            .collect();
        for t in repartition.values().filter(|t| t.partitions > 0) {
            decided.insert(t.name.clone(), t.partitions);
        }
        let count = |t: &str, decided: &BTreeMap<String, i32>| -> Option<i32> {
            decided.get(t).copied().or_else(|| {
                if repartition.contains_key(t) {
                    None
                } else {
                    partitions(t)
                }
            })
        };
        loop {
            let undecided: Vec<&str> = self
                .subtopologies
                .iter()
                .flat_map(|s| s.repartition_sink_topics.iter())
                .map(String::as_str)
                .filter(|t| repartition.contains_key(t) && !decided.contains_key(*t))
                .collect();
            if undecided.is_empty() {
                break;
            }
            let mut progress = false;
            for s in &self.subtopologies {
                for sink in &s.repartition_sink_topics {
                    if decided.contains_key(sink) || !repartition.contains_key(sink.as_str()) {
                        continue;
                    }
                    let inputs = s
                        .source_topics
                        .iter()
                        .map(String::as_str)
                        .chain(s.repartition_source_topics.iter().map(|t| t.name.as_str()));
                    let n = inputs.filter_map(|t| count(t, &decided)).max();
                    if let Some(n) = n.filter(|n| *n > 0) {
                        decided.insert(sink.clone(), n);
                        progress = true;
                    }
                }
            }
            if !progress {
                return Err("Failed to compute number of partitions for all repartition topics. There may be loops in the topology that cannot be resolved.".into());
            }
        }
        if repartition.keys().any(|t| !decided.contains_key(*t)) {
            return Err("Failed to compute number of partitions for all repartition topics, because a repartition source topic is never used as a sink topic.".into());
        }
        // Copartition groups: external topics must agree; repartition topics follow them.
        for s in &self.subtopologies {
            for g in &s.copartition_groups {
                let external: Vec<&str> = g
                    .source_topics
                    .iter()
                    .filter_map(|i| s.source_topics.get(usize::try_from(*i).ok()?))
                    .map(String::as_str)
                    .collect();
                let internal: Vec<&str> = g
                    .repartition_source_topics
                    .iter()
                    .filter_map(|i| s.repartition_source_topics.get(usize::try_from(*i).ok()?))
                    .map(|t| t.name.as_str())
                    .collect();
                let target = if external.is_empty() {
                    let fixed_counts: BTreeMap<&str, i32> = internal
                        .iter()
                        .filter(|t| fixed.contains(*t))
                        .filter_map(|t| decided.get(*t).map(|n| (*t, *n)))
                        .collect();
                    let distinct: BTreeSet<i32> = fixed_counts.values().copied().collect();
                    if distinct.len() > 1 {
                        return Ok(incorrectly_partitioned(format!(
                            "Following topics do not have the same number of partitions: [{}]",
                            java_map(&fixed_counts)
                        )));
                    }
                    match distinct.into_iter().next() {
                        Some(n) => n,
                        None => {
                            let n = internal
                                .iter()
                                .filter_map(|t| decided.get(*t))
                                .max()
                                .copied()
                                .unwrap_or(0);
                            if n <= 0 {
                                return Err(format!(
                                    "All topics in the copartition group had undefined partition number: [{}]",
                                    internal.join(", ")
                                ));
                            }
                            n
                        }
                    }
                } else {
                    let counts: BTreeMap<&str, i32> = external
                        .iter()
                        .filter_map(|t| partitions(t).map(|n| (*t, n)))
                        .collect();
                    let distinct: BTreeSet<i32> = counts.values().copied().collect();
                    if distinct.len() > 1 {
                        return Ok(incorrectly_partitioned(format!(
                            "Following topics do not have the same number of partitions: [{}]",
                            java_map(&counts)
                        )));
                    }
                    distinct.into_iter().next().unwrap_or(0)
                };
                for t in internal {
                    if fixed.contains(t) && decided.get(t) != Some(&target) {
                        return Ok(incorrectly_partitioned(format!(
                            "Number of partitions [{}] of repartition topic [{t}] doesn't match number of partitions [{target}] of the source topic.",
                            decided.get(t).copied().unwrap_or(0)
                        )));
                    }
                    decided.insert(t.to_string(), target);
                }
            }
        }
        // 3. Tasks per subtopology, and its changelogs' partition counts.
        let mut tasks = BTreeMap::new();
        let mut internal: BTreeMap<String, i32> = decided.clone();
        let mut declared: BTreeMap<&str, &TopicInfo> = repartition.clone();
        for s in &self.subtopologies {
            let n = s
                .source_topics
                .iter()
                .map(String::as_str)
                .chain(s.repartition_source_topics.iter().map(|t| t.name.as_str()))
                .filter_map(|t| count(t, &decided))
                .max();
            let Some(n) = n else {
                return Err(format!("No source topics found for subtopology {}", s.id));
            };
            tasks.insert(s.id.clone(), n);
            for c in &s.state_changelog_topics {
                internal.insert(c.name.clone(), n);
                declared.insert(c.name.as_str(), c);
            }
        }
        // 4. Which internal topics exist, and with the partitions decided.
        let mut to_create = Vec::new();
        for (name, n) in &internal {
            match partitions(name) {
                Some(found) if found != *n => {
                    return Ok(incorrectly_partitioned(format!(
                        "Existing topic {name} has different number of partitions: expected {n}, found {found}"
                    )))
                }
                Some(_) => {}
                None => {
                    let info = declared.get(name.as_str());
                    to_create.push(TopicInfo {
                        name: name.clone(),
                        partitions: *n,
                        replication_factor: info
                            .map(|i| i.replication_factor)
                            .filter(|rf| *rf > 0)
                            .unwrap_or(-1),
                        configs: info.map(|i| i.configs.clone()).unwrap_or_default(),
                    })
                }
            }
        }
        let problem = (!to_create.is_empty()).then(|| {
            let names: Vec<&str> = to_create.iter().map(|t| t.name.as_str()).collect();
            (
                MISSING_INTERNAL_TOPICS,
                format!("Internal topics are missing: {}", names.join(", ")),
            )
        });
        Ok(Configured {
            tasks,
            problem,
            to_create,
            internal,
        })
    }
}

fn incorrectly_partitioned(detail: String) -> Configured {
    Configured {
        problem: Some((INCORRECTLY_PARTITIONED_TOPICS, detail)),
        ..Configured::default()
    }
}

/// A map as Java's toString writes it: `a=1, b=2`.
fn java_map(m: &BTreeMap<&str, i32>) -> String {
    m.iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(", ")
}
