//! Cluster links and mirror topics (a Sluice cluster's mirroring), over the Kafka protocol:
//! a link is a config resource of type 64 (IncrementalAlterConfigs / DescribeConfigs), a
//! mirror topic is created by CreateTopics with `mirror.link`, and its state is its
//! `mirror.state` config.

use super::{Admin, AlterOp, ConfigResource, NewTopic};
use crate::error::{Error, Result};

/// A mirror topic on a link.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MirrorTopicInfo {
    pub topic: String,
    pub source_topic: String,
    /// `active`, `paused` or `stopped`.
    pub state: String,
}

/// One mirror partition's lag, as the broker that copies it reports.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MirrorPartitionLag {
    pub topic: String,
    pub partition: i32,
    /// The broker copying it (the partition's leader here).
    pub broker: i32,
    pub source_high_watermark: i64,
    pub log_end_offset: i64,
    pub lag_records: i64,
    pub lag_ms: i64,
    pub error: Option<String>,
}

/// A cluster link: its configs (secrets withheld), mirror topics and per-partition lag.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LinkDescription {
    pub name: String,
    pub configs: Vec<(String, Option<String>)>,
    pub topics: Vec<MirrorTopicInfo>,
    pub partitions: Vec<MirrorPartitionLag>,
    /// (broker, topic): of the mirror topics being promoted, those whose last copy of group
    /// offsets the broker made.
    pub promotion_synced: Vec<(i32, String)>,
}

fn field<'a>(value: &'a str, key: &str) -> Option<&'a str> {
    let at = value.find(&format!("{key}="))?;
    let rest = &value[at + key.len() + 1..];
    Some(rest.split(' ').next().unwrap_or(rest))
}

impl Admin {
    /// Create cluster link `name` with `configs`: `bootstrap.servers` of the source and
    /// the client security settings that reach it, plus link settings.
    pub async fn create_link(&self, name: &str, configs: &[(String, String)]) -> Result<()> {
        if self.list_links().await?.iter().any(|(l, _)| l == name) {
            return Err(Error::Config {
                key: "link".into(),
                message: format!("cluster link {name} already exists"),
            });
        }
        self.alter_link(name, configs, &[]).await
    }

    /// Set and remove configs of cluster link `name`.
    pub async fn alter_link(
        &self,
        name: &str,
        set: &[(String, String)],
        remove: &[String],
    ) -> Result<()> {
        let ops: Vec<AlterOp> = set
            .iter()
            .map(|(k, v)| AlterOp::Set(k.clone(), v.clone()))
            .chain(remove.iter().map(|k| AlterOp::Delete(k.clone())))
            .collect();
        self.alter_configs(&ConfigResource::ClusterLink(name.to_string()), &ops, false)
            .await
    }

    /// Delete cluster link `name` (refused while a mirror topic still copies through it).
    pub async fn delete_link(&self, name: &str) -> Result<()> {
        let entries = self
            .link_entries(ConfigResource::ClusterLink(name.to_string()))
            .await?;
        let set: Vec<String> = entries
            .into_iter()
            .filter(|e| e.source == 1)
            .map(|e| e.name)
            .collect();
        self.alter_link(name, &[], &set).await
    }

    /// Every cluster link: (name, source bootstrap servers).
    pub async fn list_links(&self) -> Result<Vec<(String, String)>> {
        Ok(self
            .link_entries(ConfigResource::ClusterLink(String::new()))
            .await?
            .into_iter()
            .map(|e| (e.name, e.value.unwrap_or_default()))
            .collect())
    }

    async fn link_entries(&self, resource: ConfigResource) -> Result<Vec<super::ConfigEntry>> {
        self.describe_configs(std::slice::from_ref(&resource))
            .await?
            .into_iter()
            .next()
            .ok_or_else(|| Error::Protocol("empty DescribeConfigs response".into()))?
    }

    /// Describe cluster link `name`, with the lag of every mirror partition (each broker is
    /// asked for the partitions it copies).
    pub async fn describe_link(&self, name: &str) -> Result<LinkDescription> {
        let entries = self
            .link_entries(ConfigResource::ClusterLink(name.to_string()))
            .await?;
        let mut out = LinkDescription {
            name: name.to_string(),
            ..Default::default()
        };
        for e in entries {
            if let Some(topic) = e.name.strip_prefix("mirror.topic.") {
                let v = e.value.unwrap_or_default();
                out.topics.push(MirrorTopicInfo {
                    topic: topic.to_string(),
                    source_topic: field(&v, "source.topic").unwrap_or(topic).to_string(),
                    state: field(&v, "state").unwrap_or("active").to_string(),
                });
            } else if !e.name.starts_with("mirror.partition.")
                && !e.name.starts_with("mirror.promotion.")
            {
                out.configs.push((e.name, e.value));
            }
        }
        let brokers: Vec<i32> = self
            .core
            .refresh(&[])
            .await?
            .brokers
            .keys()
            .copied()
            .collect();
        for b in brokers {
            let Ok(entries) = self
                .link_entries(ConfigResource::ClusterLinkOn(name.to_string(), b))
                .await
            else {
                continue;
            };
            for e in entries {
                if let Some(topic) = e.name.strip_prefix("mirror.promotion.") {
                    out.promotion_synced.push((b, topic.to_string()));
                    continue;
                }
                let Some(rest) = e.name.strip_prefix("mirror.partition.") else {
                    continue;
                };
                let Some((topic, partition)) = rest.rsplit_once('.') else {
                    continue;
                };
                let v = e.value.unwrap_or_default();
                let num = |k: &str| field(&v, k).and_then(|x| x.parse().ok()).unwrap_or(-1);
                out.partitions.push(MirrorPartitionLag {
                    topic: topic.to_string(),
                    partition: partition.parse().unwrap_or(-1),
                    broker: b,
                    source_high_watermark: num("source.high.watermark"),
                    log_end_offset: num("log.end.offset"),
                    lag_records: num("lag.records"),
                    lag_ms: num("lag.ms"),
                    error: v.find("error=").map(|at| v[at + 6..].to_string()),
                });
            }
        }
        out.partitions
            .sort_by(|a, b| (&a.topic, a.partition).cmp(&(&b.topic, b.partition)));
        Ok(out)
    }

    /// Create mirror topic `topic` on `link`, copying `source_topic` (default: the same
    /// name) with its partition count; `replication_factor` -1 for the default.
    pub async fn create_mirror_topic(
        &self,
        topic: &str,
        link: &str,
        source_topic: Option<&str>,
        replication_factor: i16,
    ) -> Result<()> {
        let mut t = NewTopic::new(topic, -1, replication_factor).config("mirror.link", link);
        if let Some(s) = source_topic {
            t = t.config("mirror.source.topic", s);
        }
        let results = self.create_topics(&[t], false).await?;
        results
            .into_iter()
            .next()
            .map(|(_, r)| r)
            .unwrap_or_else(|| Err(Error::Protocol("empty CreateTopics response".into())))
    }

    /// Promote mirror topics to ordinary writable topics, for good, once each has
    /// everything its source has and the link has made a last copy of its group offsets:
    /// they go to `promoting` (still read-only and copying), then to `stopped` when every
    /// partition's lag is zero and every live broker reports the last copy of the group
    /// offsets (each copies the groups it coordinates). Waits at most `wait`; a topic not
    /// ready by then stays `promoting` (read-only) and [`Error::Timeout`] says what it
    /// waited for (promote it without waiting with `set_mirror_state(topic, "stopped")`).
    pub async fn promote_mirror_topics(
        &self,
        topics: &[String],
        wait: std::time::Duration,
    ) -> Result<()> {
        let deadline = tokio::time::Instant::now() + wait;
        for topic in topics {
            self.set_mirror_state(topic, "promoting").await?;
        }
        for topic in topics {
            loop {
                let waiting = self.promotion_pending(topic).await?;
                let Some(what) = waiting else { break };
                if tokio::time::Instant::now() >= deadline {
                    return Err(Error::Timeout(format!(
                        "{topic} is not ready to promote after {} ms: {what}",
                        wait.as_millis()
                    )));
                }
                tokio::time::sleep(std::time::Duration::from_millis(200)).await;
            }
            self.set_mirror_state(topic, "stopped").await?;
        }
        Ok(())
    }

    /// What the promotion of `topic` still waits for (None: nothing).
    async fn promotion_pending(&self, topic: &str) -> Result<Option<String>> {
        let mut link = None;
        for (name, _) in self.list_links().await? {
            let d = self.describe_link(&name).await?;
            if d.topics.iter().any(|t| t.topic == topic) {
                link = Some(d);
                break;
            }
        }
        let d = link.ok_or_else(|| Error::Config {
            key: "topic".into(),
            message: format!("{topic} is not a mirror topic"),
        })?;
        let partitions = self
            .describe_topics(&[topic])
            .await?
            .first()
            .map_or(0, |t| t.partitions.len());
        let lags: Vec<_> = d.partitions.iter().filter(|p| p.topic == topic).collect();
        let lagging = lags
            .iter()
            .filter(|p| p.lag_records != 0 || p.error.is_some())
            .count()
            + partitions.saturating_sub(lags.len());
        if lagging > 0 {
            return Ok(Some(format!(
                "{lagging} of its {partitions} partitions lag their source"
            )));
        }
        let brokers: Vec<i32> = self
            .core
            .refresh(&[])
            .await?
            .brokers
            .keys()
            .copied()
            .collect();
        let unsynced: Vec<String> = brokers
            .iter()
            .filter(|b| {
                !d.promotion_synced
                    .iter()
                    .any(|(sb, t)| sb == *b && t == topic)
            })
            .map(i32::to_string)
            .collect();
        if !unsynced.is_empty() {
            return Ok(Some(format!(
                "the last copy of its group offsets is not made on broker(s) {}",
                unsynced.join(", ")
            )));
        }
        Ok(None)
    }

    /// Set a mirror topic's state: `active` (resume), `paused`, `promoting` or `stopped`
    /// (promote at once: it becomes an ordinary writable topic, for good; see
    /// [`Self::promote_mirror_topics`] to wait for the lag and group offsets first).
    pub async fn set_mirror_state(&self, topic: &str, state: &str) -> Result<()> {
        self.alter_configs(
            &ConfigResource::Topic(topic.to_string()),
            &[AlterOp::Set("mirror.state".into(), state.into())],
            false,
        )
        .await
    }

    /// Mirror every source topic whose whole name matches `pattern` (a regular expression),
    /// now and as the source creates them: adds it to the link's
    /// `auto.create.mirror.topics.patterns`.
    pub async fn add_mirror_topic_pattern(&self, link: &str, pattern: &str) -> Result<()> {
        let mut patterns = self.mirror_topic_patterns(link).await?;
        if !patterns.iter().any(|p| p == pattern) {
            patterns.push(pattern.to_string());
        }
        self.set_mirror_topic_patterns(link, &patterns).await
    }

    /// Stop mirroring new source topics that match `pattern` (mirror topics it made stay).
    pub async fn remove_mirror_topic_pattern(&self, link: &str, pattern: &str) -> Result<()> {
        let mut patterns = self.mirror_topic_patterns(link).await?;
        let before = patterns.len();
        patterns.retain(|p| p != pattern);
        if patterns.len() == before {
            return Err(Error::Config {
                key: PATTERNS.into(),
                message: format!("cluster link {link} has no topic pattern {pattern}"),
            });
        }
        self.set_mirror_topic_patterns(link, &patterns).await
    }

    /// The link's topic patterns.
    pub async fn mirror_topic_patterns(&self, link: &str) -> Result<Vec<String>> {
        let d = self.describe_link(link).await?;
        Ok(d.configs
            .iter()
            .find(|(k, _)| k == PATTERNS)
            .and_then(|(_, v)| v.as_deref())
            .unwrap_or_default()
            .split(',')
            .map(str::trim)
            .filter(|p| !p.is_empty())
            .map(str::to_owned)
            .collect())
    }

    async fn set_mirror_topic_patterns(&self, link: &str, patterns: &[String]) -> Result<()> {
        if patterns.is_empty() {
            self.alter_link(link, &[], &[PATTERNS.to_string()]).await
        } else {
            self.alter_link(link, &[(PATTERNS.to_string(), patterns.join(","))], &[])
                .await
        }
    }
}

/// The link setting that holds the topic patterns.
const PATTERNS: &str = "auto.create.mirror.topics.patterns";
