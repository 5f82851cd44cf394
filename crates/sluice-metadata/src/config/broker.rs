//! [`BrokerConfig`]: the broker's static configuration, built once from defaults, a
//! properties file, `SLUICE_*` environment variables and `--override` flags, and validated.

use super::*;

/// A startup configuration error: stops the server with one line naming the key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigError {
    pub key: String,
    pub message: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.message.contains(&self.key) {
            f.write_str(&self.message)
        } else {
            write!(f, "{}: {}", self.key, self.message)
        }
    }
}

impl std::error::Error for ConfigError {}

/// Where a setting came from, lowest precedence first.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Origin {
    File,
    Env,
    Override,
}

/// Environment variables with the `SLUICE_` prefix that are not broker configs.
pub const NON_CONFIG_ENV: &[&str] = &[
    "SLUICE_BOOTSTRAP",
    "SLUICE_LOG",
    "SLUICE_DATA_DIR_FOR_TESTS",
];

/// `SLUICE_LOG_SEGMENT_BYTES` -> `log.segment.bytes` (`__` -> `_`, `___` -> `-`, as Kafka's
/// container images map `KAFKA_*`).
pub fn env_key_to_config(var: &str) -> Option<String> {
    let rest = var.strip_prefix("SLUICE_")?;
    if NON_CONFIG_ENV.contains(&var) || rest.is_empty() {
        return None;
    }
    let lower = rest.to_ascii_lowercase();
    Some(
        lower
            .replace("___", "\u{1}")
            .replace("__", "\u{2}")
            .replace('_', ".")
            .replace('\u{1}', "-")
            .replace('\u{2}', "_"),
    )
}

/// The broker's static configuration: explicitly set keys plus Kafka's defaults, and the
/// [`BrokerSettings`] parsed from them once.
#[derive(Clone, Debug)]
pub struct BrokerConfig {
    set: BTreeMap<String, String>,
    settings: std::sync::Arc<BrokerSettings>,
}

impl Default for BrokerConfig {
    fn default() -> Self {
        Self::from_map(BTreeMap::new())
    }
}

impl BrokerConfig {
    fn from_map(set: BTreeMap<String, String>) -> Self {
        let mut c = Self {
            set,
            settings: Default::default(),
        };
        c.settings = std::sync::Arc::new(BrokerSettings::parse(&c));
        c
    }

    /// What the broker reads while serving, parsed once.
    pub fn settings(&self) -> &BrokerSettings {
        &self.settings
    }

    /// Merge settings (later origins win), validate every known key, and report unknown ones.
    /// Returns the config and one warning per unknown key.
    pub fn build(
        settings: &[(Origin, String, String)],
    ) -> Result<(Self, Vec<String>), ConfigError> {
        let mut ordered: Vec<&(Origin, String, String)> = settings.iter().collect();
        ordered.sort_by_key(|(o, _, _)| *o as u8);
        let mut set = BTreeMap::new();
        let mut warnings = Vec::new();
        for (_, k, v) in ordered {
            set.insert(k.trim().to_string(), v.trim().to_string());
        }
        for (k, v) in &set {
            match broker_def(k).or_else(|| listener_override(k).map(|(_, d)| d)) {
                Some(d) => validate(d, v).map_err(|message| ConfigError {
                    key: k.clone(),
                    message,
                })?,
                None => warnings.push(format!("unknown configuration key '{k}' is ignored")),
            }
        }
        let cfg = Self::from_map(set);
        cfg.check_consistency()?;
        Ok((cfg, warnings))
    }

    fn check_consistency(&self) -> Result<(), ConfigError> {
        self.check_consumer_group_bounds()?;
        if let (Some(b), Some(n)) = (self.set.get("broker.id"), self.set.get("node.id")) {
            if b != n && b != "-1" {
                return Err(ConfigError {
                    key: "broker.id".into(),
                    message: format!("broker.id={b} must equal node.id={n}"),
                });
            }
        }
        if self.listeners().is_empty() {
            return Err(ConfigError {
                key: "listeners".into(),
                message: "at least one listener is required".into(),
            });
        }
        let (broker, controller) = self.roles();
        let voters = self.quorum_voters().map_err(|message| ConfigError {
            key: "controller.quorum.voters".into(),
            message,
        })?;
        let names = self.controller_listener_names();
        let err = |key: &str, message: String| ConfigError {
            key: key.into(),
            message,
        };
        if self.explicit("process.roles").is_some() || !voters.is_empty() {
            let bootstrap = self
                .value("controller.quorum.bootstrap.servers")
                .unwrap_or_default();
            if voters.is_empty() && bootstrap.trim().is_empty() {
                return Err(err(
                    "controller.quorum.voters",
                    "a multi-node cluster needs controller.quorum.voters (id@host:port,...) or controller.quorum.bootstrap.servers (host:port,...: a dynamic quorum)".into(),
                ));
            }
            if controller {
                if names.is_empty() {
                    return Err(err(
                        "controller.listener.names",
                        "is required when process.roles includes controller".into(),
                    ));
                }
                if !self.listeners().iter().any(|l| names.contains(&l.name)) {
                    return Err(err(
                        "listeners",
                        format!("must include the controller listener {}", names.join(",")),
                    ));
                }
                if !voters.is_empty() && !voters.iter().any(|(id, _)| *id == self.node_id()) {
                    return Err(err(
                        "controller.quorum.voters",
                        format!(
                            "node.id={} has the controller role but is not a voter",
                            self.node_id()
                        ),
                    ));
                }
            }
            if broker && !self.listeners().iter().any(|l| !names.contains(&l.name)) {
                return Err(err(
                    "listeners",
                    "a broker needs a listener that is not a controller listener".into(),
                ));
            }
        }
        self.check_security()?;
        let dirs = self.log_dirs();
        if let Some(twice) = dirs
            .iter()
            .enumerate()
            .find(|(i, d)| dirs[..*i].contains(d))
            .map(|(_, d)| d)
        {
            return Err(ConfigError {
                key: "log.dirs".into(),
                message: format!("{} is listed twice", twice.display()),
            });
        }
        Ok(())
    }

    /// Every listener's security protocol is known and supported, and SSL listeners have
    /// what they need; the ways nodes connect to each other are complete.
    fn check_security(&self) -> Result<(), ConfigError> {
        let err = |key: String, message: String| ConfigError { key, message };
        for l in self.listeners() {
            let protocol = self
                .security_protocol(&l.name)
                .map_err(|m| err("listener.security.protocol.map".into(), m))?;
            if matches!(protocol, SecurityProtocol::Ssl | SecurityProtocol::SaslSsl) {
                self.check_ssl(&l.name)?;
            }
            if matches!(
                protocol,
                SecurityProtocol::SaslPlaintext | SecurityProtocol::SaslSsl
            ) {
                self.check_sasl(&l.name)?;
            }
        }
        if let Some(name) = self.explicit("inter.broker.listener.name") {
            let name = name.to_string();
            if !self.listeners().iter().any(|l| l.name == name) {
                return Err(err(
                    "inter.broker.listener.name".into(),
                    format!("{name} is not one of the listeners"),
                ));
            }
        }
        for name in self.controller_listener_names() {
            if !matches!(
                self.security_protocol(&name).ok(),
                Some(SecurityProtocol::Plaintext | SecurityProtocol::Ssl)
            ) {
                return Err(err(
                    "controller.listener.names".into(),
                    format!(
                        "controller listener {name} must be PLAINTEXT or SSL: the quorum's own connections do not do SASL (authenticate them with client certificates: SSL with ssl.client.auth=required)"
                    ),
                ));
            }
        }
        self.inter_broker_client()?;
        self.controller_client()?;
        Ok(())
    }

    /// How this node connects to the controllers (Raft between voters, and a broker's calls
    /// to the active controller): the first controller listener's protocol, and for SSL its
    /// trust store, key store (the client certificate) and host name check, as Kafka does.
    pub fn controller_client(&self) -> Result<InterBrokerClient, ConfigError> {
        let mut client = self.client_of(self.controller_listener_names().into_iter().next())?;
        if let (Some(listener), SecurityProtocol::Ssl) = (client.listener.clone(), client.protocol)
        {
            self.tls_client(&listener, &mut client, "nodes connect to the controllers")?;
        }
        Ok(client)
    }

    /// A client of `listener` with its security protocol (no listener: plaintext).
    fn client_of(&self, listener: Option<String>) -> Result<InterBrokerClient, ConfigError> {
        let Some(listener) = listener else {
            return Ok(InterBrokerClient::default());
        };
        let protocol = self
            .security_protocol(&listener)
            .map_err(|message| ConfigError {
                key: "listener.security.protocol.map".into(),
                message,
            })?;
        Ok(InterBrokerClient {
            listener: Some(listener),
            protocol,
            ..InterBrokerClient::default()
        })
    }

    /// The TLS side of a connection to `listener` (see [`Self::inter_broker_client`]);
    /// `who` says which connections need it, for the error.
    fn tls_client(
        &self,
        listener: &str,
        client: &mut InterBrokerClient,
        who: &str,
    ) -> Result<(), ConfigError> {
        let err = |key: String, message: String| ConfigError { key, message };
        let key = self.listener_key(listener, "ssl.truststore.location");
        client.truststore = Some(self.value(&key).ok_or_else(|| {
            err(
                key.clone(),
                format!("{key} is required: {who} over the TLS listener {listener} and check the certificates against it"),
            )
        })?);
        client.keystore = self.listener_value(listener, "ssl.keystore.location");
        let key = self.listener_key(listener, "ssl.endpoint.identification.algorithm");
        client.verify_hostname = match self.value(&key).unwrap_or_default().trim() {
            "" => false,
            v if v.eq_ignore_ascii_case("https") => true,
            v => return Err(err(key, format!("'{v}' must be https or empty"))),
        };
        Ok(())
    }

    /// The listener brokers reach each other on: `inter.broker.listener.name`, else the
    /// first listener that is not a controller's.
    pub fn inter_broker_listener(&self) -> Option<String> {
        let names = self.controller_listener_names();
        self.explicit("inter.broker.listener.name").map_or_else(
            || {
                self.listeners()
                    .into_iter()
                    .find(|l| !names.contains(&l.name))
                    .map(|l| l.name)
            },
            |n| Some(n.to_string()),
        )
    }

    /// How this broker connects to the others' inter-broker listener: TLS with the
    /// listener's trust store (and its key store as the client certificate), SASL with
    /// `sasl.mechanism.inter.broker.protocol` and the username/password of that mechanism's
    /// JAAS entry on the listener — as Kafka does.
    pub fn inter_broker_client(&self) -> Result<InterBrokerClient, ConfigError> {
        let err = |key: String, message: String| ConfigError { key, message };
        let mut client = self.client_of(self.inter_broker_listener())?;
        let (Some(listener), protocol) = (client.listener.clone(), client.protocol) else {
            return Ok(client);
        };
        if matches!(protocol, SecurityProtocol::Ssl | SecurityProtocol::SaslSsl) {
            self.tls_client(&listener, &mut client, "brokers connect to each other")?;
        }
        if matches!(
            protocol,
            SecurityProtocol::SaslPlaintext | SecurityProtocol::SaslSsl
        ) {
            let key = "sasl.mechanism.inter.broker.protocol";
            let mech = self.value(key).unwrap_or_default();
            if !INTER_BROKER_SASL_MECHANISMS.contains(&mech.as_str()) {
                return Err(err(
                    key.into(),
                    format!("{mech} is not supported: use PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 (the inter-broker listener {listener} is SASL)"),
                ));
            }
            if !self.sasl_mechanisms(&listener).contains(&mech) {
                return Err(err(
                    key.into(),
                    format!("{mech} is not in sasl.enabled.mechanisms of the inter-broker listener {listener}"),
                ));
            }
            let jaas_key = format!(
                "listener.name.{}.{}.sasl.jaas.config",
                listener.to_lowercase(),
                mech.to_lowercase()
            );
            let jaas = self.explicit(&jaas_key).ok_or_else(|| {
                err(
                    jaas_key.clone(),
                    format!("{jaas_key} is required: it holds the username and password this broker authenticates to the others with"),
                )
            })?;
            let (_, options) = parse_jaas(jaas).map_err(|m| err(jaas_key.clone(), m))?;
            let option = |name: &str| {
                sluice_protocol::jaas::option(&options, name)
                    .map(str::to_owned)
                    .ok_or_else(|| {
                        err(
                            jaas_key.clone(),
                            format!("{jaas_key} needs a {name}=\"...\" option: the inter-broker credentials"),
                        )
                    })
            };
            client.sasl = Some((mech.clone(), option("username")?, option("password")?));
        }
        Ok(client)
    }

    /// An SSL or SASL_SSL listener has a key store, no encrypted key, and a trust store
    /// when it asks for client certificates.
    fn check_ssl(&self, listener: &str) -> Result<(), ConfigError> {
        let err = |key: String, message: String| ConfigError { key, message };
        let key = self.listener_key(listener, "ssl.keystore.location");
        if self.explicit(&key).is_none() {
            return Err(err(
                key,
                format!("is required for the TLS listener {listener}"),
            ));
        }
        let key = self.listener_key(listener, "ssl.key.password");
        if self.explicit(&key).is_some_and(|v| !v.is_empty()) {
            return Err(err(
                key,
                "encrypted private keys are not supported: give an unencrypted PEM key".into(),
            ));
        }
        let auth = self.listener_value(listener, "ssl.client.auth");
        let trust = self.listener_key(listener, "ssl.truststore.location");
        if auth.as_deref() != Some("none") && self.explicit(&trust).is_none() {
            return Err(err(
                trust,
                format!(
                    "is required with ssl.client.auth={}",
                    auth.unwrap_or_default()
                ),
            ));
        }
        Ok(())
    }

    /// A SASL listener offers only mechanisms Sluice implements, and PLAIN has its users.
    fn check_sasl(&self, listener: &str) -> Result<(), ConfigError> {
        let key = self.listener_key(listener, "sasl.enabled.mechanisms");
        let mechanisms = self.sasl_mechanisms(listener);
        if mechanisms.is_empty() {
            return Err(ConfigError {
                key,
                message: format!("no SASL mechanism enabled for listener {listener}"),
            });
        }
        for m in &mechanisms {
            if !SASL_MECHANISMS.contains(&m.as_str()) {
                return Err(ConfigError {
                    key,
                    message: format!(
                        "{m} is not supported (listener {listener}); enable one or more of {}",
                        SASL_MECHANISMS.join(", ")
                    ),
                });
            }
        }
        if mechanisms.iter().any(|m| m == "PLAIN") {
            self.plain_users(listener).map_err(|message| ConfigError {
                key: plain_jaas_key(listener),
                message,
            })?;
        }
        if mechanisms.iter().any(|m| m == "OAUTHBEARER") {
            self.oauthbearer_jwt(listener)?;
            self.oauthbearer_options(listener)
                .map_err(|message| ConfigError {
                    key: oauthbearer_jaas_key(listener),
                    message,
                })?;
        }
        Ok(())
    }

    /// An OAUTHBEARER setting of listener `listener`: Kafka reads
    /// `listener.name.<l>.oauthbearer.<key>`, then `listener.name.<l>.<key>`, then `<key>`.
    fn oauthbearer_value(&self, listener: &str, key: &str) -> (String, Option<String>) {
        let l = listener.to_lowercase();
        for k in [
            format!("listener.name.{l}.oauthbearer.{key}"),
            format!("listener.name.{l}.{key}"),
        ] {
            if let Some(v) = self.explicit(&k) {
                return (k, Some(v.to_string()));
            }
        }
        (key.to_string(), self.value(key))
    }

    /// OAUTHBEARER's validator on listener `listener`: signed JWTs checked against a JWKS
    /// (Some) when the server callback handler is Kafka's `OAuthBearerValidatorCallbackHandler`,
    /// else Kafka's default unsecured validator (None). A JWKS endpoint without that handler,
    /// or another handler class, is refused: tokens would otherwise be accepted unchecked.
    pub fn oauthbearer_jwt(&self, listener: &str) -> Result<Option<JwtSettings>, ConfigError> {
        const VALIDATOR: &str =
            "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler";
        let handler = Some(self.oauthbearer_value(listener, "sasl.server.callback.handler.class"))
            .filter(|(_, v)| v.as_deref().is_some_and(|v| !v.trim().is_empty()));
        let (url_key, url) = self.oauthbearer_value(listener, "sasl.oauthbearer.jwks.endpoint.url");
        let url = url.filter(|u| !u.trim().is_empty());
        let Some((handler_key, handler)) = handler else {
            if url.is_some() {
                return Err(ConfigError {
                    key: url_key,
                    message: format!(
                        "OAUTHBEARER on listener {listener}: a JWKS endpoint is used by Kafka's \
                         {VALIDATOR}; set listener.name.{}.oauthbearer.sasl.server.callback.handler.class \
                         to it (without it Kafka would accept unsecured tokens, and Sluice refuses that)",
                        listener.to_lowercase()
                    ),
                });
            }
            return Ok(None);
        };
        let handler = handler.unwrap_or_default();
        if handler.trim() != VALIDATOR {
            return Err(ConfigError {
                key: handler_key,
                message: format!(
                    "OAUTHBEARER on listener {listener}: Sluice has two validators, Kafka's default \
                     (unsecured tokens) and {VALIDATOR} (signed tokens, with a JWKS); not {}",
                    handler.trim()
                ),
            });
        }
        let url = url.ok_or_else(|| ConfigError {
            key: url_key.clone(),
            message: format!(
                "OAUTHBEARER on listener {listener}: {VALIDATOR} needs sasl.oauthbearer.jwks.endpoint.url"
            ),
        })?;
        if !["http://", "https://", "file:"]
            .iter()
            .any(|p| url.trim().starts_with(p))
        {
            return Err(ConfigError {
                key: url_key,
                message: format!(
                    "the JWKS endpoint must be an http://, https:// or file: URL, not {url}"
                ),
            });
        }
        let get = |key: &str| self.oauthbearer_value(listener, key);
        let number = |key: &str| -> Result<i64, ConfigError> {
            let (k, v) = get(key);
            v.unwrap_or_default()
                .trim()
                .parse::<i64>()
                .ok()
                .filter(|n| *n >= 0)
                .ok_or_else(|| ConfigError {
                    key: k,
                    message: "must be a non-negative number".into(),
                })
        };
        let flag = |key: &str| {
            get(key)
                .1
                .is_some_and(|v| v.trim().eq_ignore_ascii_case("true"))
        };
        let audiences: Vec<String> = get("sasl.oauthbearer.expected.audience")
            .1
            .unwrap_or_default()
            .split(',')
            .map(str::trim)
            .filter(|a| !a.is_empty())
            .map(str::to_owned)
            .collect();
        let issuer = get("sasl.oauthbearer.expected.issuer")
            .1
            .map(|i| i.trim().to_string())
            .filter(|i| !i.is_empty());
        // As Kafka 4.4: the validator checks issuer and audience unless told not to.
        if audiences.is_empty() && !flag("sasl.oauthbearer.allow.unverified.audience") {
            return Err(ConfigError {
                key: "sasl.oauthbearer.expected.audience".into(),
                message: format!(
                    "OAUTHBEARER on listener {listener}: with a JWKS endpoint, set the audiences \
                     tokens must be for (or sasl.oauthbearer.allow.unverified.audience=true)"
                ),
            });
        }
        if issuer.is_none() && !flag("sasl.oauthbearer.allow.unverified.issuer") {
            return Err(ConfigError {
                key: "sasl.oauthbearer.expected.issuer".into(),
                message: format!(
                    "OAUTHBEARER on listener {listener}: with a JWKS endpoint, set the issuer \
                     tokens must come from (or sasl.oauthbearer.allow.unverified.issuer=true)"
                ),
            });
        }
        let claim = |key: &str, default: &str| {
            get(key)
                .1
                .map(|c| c.trim().to_string())
                .filter(|c| !c.is_empty())
                .unwrap_or_else(|| default.to_string())
        };
        Ok(Some(JwtSettings {
            jwks_url: url.trim().to_string(),
            audiences,
            issuer,
            clock_skew_s: number("sasl.oauthbearer.clock.skew.seconds")?,
            scope_claim: claim("sasl.oauthbearer.scope.claim.name", "scope"),
            sub_claim: claim("sasl.oauthbearer.sub.claim.name", "sub"),
            refresh_ms: number("sasl.oauthbearer.jwks.endpoint.refresh.ms")?,
            retry_backoff_ms: number("sasl.oauthbearer.jwks.endpoint.retry.backoff.ms")?,
            retry_backoff_max_ms: number("sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms")?,
        }))
    }

    /// OAUTHBEARER's unsecured-validator options on listener `listener`: the options of its
    /// `listener.name.<listener>.oauthbearer.sasl.jaas.config` (OAuthBearerLoginModule), none
    /// when it is not set.
    pub fn oauthbearer_options(&self, listener: &str) -> Result<BTreeMap<String, String>, String> {
        let key = oauthbearer_jaas_key(listener);
        let Some(jaas) = self.explicit(&key) else {
            return Ok(BTreeMap::new());
        };
        let (module, options) = parse_jaas(jaas)?;
        if !module.ends_with("OAuthBearerLoginModule") {
            return Err(format!(
                "{key}: expected org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule, got {module}"
            ));
        }
        Ok(options.into_iter().collect())
    }

    /// The SASL mechanisms listener `listener` offers, in the configured order.
    pub fn sasl_mechanisms(&self, listener: &str) -> Vec<String> {
        self.listener_value(listener, "sasl.enabled.mechanisms")
            .unwrap_or_default()
            .split(',')
            .map(|m| m.trim().to_string())
            .filter(|m| !m.is_empty())
            .collect()
    }

    /// PLAIN's users on listener `listener`: the `user_<name>="<password>"` options of its
    /// `listener.name.<listener>.plain.sasl.jaas.config` (Kafka's PlainLoginModule format).
    pub fn plain_users(&self, listener: &str) -> Result<BTreeMap<String, String>, String> {
        let key = plain_jaas_key(listener);
        let jaas = self
            .explicit(&key)
            .ok_or_else(|| format!("{key} is required: PLAIN is enabled on listener {listener}"))?;
        let (module, options) = parse_jaas(jaas)?;
        if !module.ends_with("PlainLoginModule") {
            return Err(format!(
                "{key}: expected org.apache.kafka.common.security.plain.PlainLoginModule, got {module}"
            ));
        }
        Ok(options
            .into_iter()
            .filter_map(|(k, v)| Some((k.strip_prefix("user_")?.to_string(), v)))
            .collect())
    }

    /// The security protocol of listener `name`.
    pub fn security_protocol(&self, name: &str) -> Result<SecurityProtocol, String> {
        let map = self
            .value("listener.security.protocol.map")
            .unwrap_or_default();
        let mut found = None;
        for item in map.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let (l, p) = item
                .split_once(':')
                .ok_or_else(|| format!("{item} is not of the form LISTENER:PROTOCOL"))?;
            let protocol = SecurityProtocol::parse(p.trim())
                .ok_or_else(|| format!("unknown security protocol {p} for listener {l}"))?;
            if l.trim() == name {
                found = Some(protocol);
            }
        }
        match found {
            Some(p) => Ok(p),
            // Kafka maps the controller listener to PLAINTEXT when it is not named.
            None if self.controller_listener_names().iter().any(|c| c == name) => {
                Ok(SecurityProtocol::Plaintext)
            }
            None => Err(format!("listener {name} has no security protocol")),
        }
    }

    /// `listener.name.<listener>.<key>` (the listener name in lower case, as Kafka writes it).
    fn listener_key(&self, listener: &str, key: &str) -> String {
        let prefixed = format!("listener.name.{}.{key}", listener.to_lowercase());
        if self.explicit(&prefixed).is_some() {
            prefixed
        } else {
            key.to_string()
        }
    }

    /// A setting for one listener: its `listener.name.<listener>.` override, else the
    /// broker-wide value.
    pub fn listener_value(&self, listener: &str, key: &str) -> Option<String> {
        self.value(&self.listener_key(listener, key))
    }

    /// The explicitly set value of `key`, if any.
    pub fn explicit(&self, key: &str) -> Option<&str> {
        self.set.get(key).map(String::as_str)
    }

    pub fn explicit_keys(&self) -> impl Iterator<Item = (&str, &str)> {
        self.set.iter().map(|(k, v)| (k.as_str(), v.as_str()))
    }

    /// Kafka's checks of the consumer group protocol's timeouts against their bounds
    /// (GroupCoordinatorConfig), with its messages.
    fn check_consumer_group_bounds(&self) -> Result<(), ConfigError> {
        self.check_group_bounds("consumer")?;
        self.check_group_bounds("streams")
    }

    /// Kafka's GroupCoordinatorConfig checks of `group.<protocol>.*` timeouts.
    fn check_group_bounds(&self, protocol: &str) -> Result<(), ConfigError> {
        let k = |s: &str| format!("group.{protocol}.{s}");
        let rules = [
            (
                "max.heartbeat.interval.ms",
                ">=",
                "min.heartbeat.interval.ms",
            ),
            ("heartbeat.interval.ms", ">=", "min.heartbeat.interval.ms"),
            ("heartbeat.interval.ms", "<=", "max.heartbeat.interval.ms"),
            ("max.session.timeout.ms", ">=", "min.session.timeout.ms"),
            ("session.timeout.ms", ">=", "min.session.timeout.ms"),
            ("session.timeout.ms", "<=", "max.session.timeout.ms"),
            ("heartbeat.interval.ms", "<", "session.timeout.ms"),
        ];
        for (a, op, b) in rules {
            let (x, y) = (self.int(&k(a)), self.int(&k(b)));
            let (ok, words) = match op {
                ">=" => (x >= y, "greater than or equal to"),
                "<=" => (x <= y, "less than or equal to"),
                _ => (x < y, "less than"),
            };
            if !ok {
                return Err(ConfigError {
                    key: k(a),
                    message: format!("{} must be {words} {}", k(a), k(b)),
                });
            }
        }
        Ok(())
    }

    /// Explicit value or Kafka's default.
    pub fn value(&self, key: &str) -> Option<String> {
        self.explicit(key)
            .map(str::to_owned)
            .or_else(|| broker_def(key).and_then(|d| d.default).map(str::to_owned))
    }

    fn int(&self, key: &str) -> i64 {
        self.value(key)
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0)
    }

    /// Whether ACLs are enforced (`authorizer.class.name` names Kafka's authorizer).
    pub fn authorizer_enabled(&self) -> bool {
        self.value("authorizer.class.name")
            .is_some_and(|v| !v.is_empty())
    }

    /// `super.users`: principals every check allows.
    pub fn super_users(&self) -> Vec<String> {
        self.value("super.users")
            .unwrap_or_default()
            .split(';')
            .map(|p| p.trim().to_string())
            .filter(|p| !p.is_empty())
            .collect()
    }

    pub fn allow_everyone_if_no_acl_found(&self) -> bool {
        self.flag("allow.everyone.if.no.acl.found")
    }

    fn flag(&self, key: &str) -> bool {
        self.value(key)
            .is_some_and(|v| v.eq_ignore_ascii_case("true"))
    }

    pub fn set_explicit(&mut self, key: &str, value: &str) {
        self.set.insert(key.to_string(), value.to_string());
        self.settings = std::sync::Arc::new(BrokerSettings::parse(self));
    }

    pub fn node_id(&self) -> i32 {
        match self.explicit("node.id") {
            Some(v) => v.parse().unwrap_or(0),
            None => self
                .explicit("broker.id")
                .and_then(|v| v.parse().ok())
                .filter(|v| *v >= 0)
                .unwrap_or(0),
        }
    }

    pub fn roles(&self) -> (bool, bool) {
        let v = self.value("process.roles").unwrap_or_default();
        let has = |r: &str| v.split(',').any(|x| x.trim() == r);
        (has("broker"), has("controller"))
    }

    /// `controller.quorum.voters` as (id, host:port).
    pub fn quorum_voters(&self) -> Result<Vec<(i32, String)>, String> {
        let v = self.value("controller.quorum.voters").unwrap_or_default();
        v.split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(|item| {
                let (id, addr) = item
                    .split_once('@')
                    .ok_or_else(|| format!("'{item}' is not id@host:port"))?;
                let id: i32 = id
                    .trim()
                    .parse()
                    .map_err(|_| format!("'{item}' has no numeric id"))?;
                if !addr.contains(':') || id < 0 {
                    return Err(format!("'{item}' is not id@host:port"));
                }
                Ok((id, addr.trim().to_string()))
            })
            .collect()
    }

    /// `controller.listener.names`.
    pub fn controller_listener_names(&self) -> Vec<String> {
        self.value("controller.listener.names")
            .unwrap_or_default()
            .split(',')
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
            .collect()
    }

    pub fn listeners(&self) -> Vec<Listener> {
        parse_listeners(&self.value("listeners").unwrap_or_default()).unwrap_or_default()
    }

    /// What clients are told: advertised listeners (or listeners), without the
    /// controller listeners.
    pub fn advertised_listeners(&self) -> Vec<Listener> {
        let controller = self.controller_listener_names();
        match self.explicit("advertised.listeners") {
            Some(v) => parse_listeners(v).unwrap_or_default(),
            None => self.listeners(),
        }
        .into_iter()
        .filter(|l| !controller.contains(&l.name))
        .collect()
    }

    pub fn log_dirs(&self) -> Vec<PathBuf> {
        let raw = self
            .explicit("log.dirs")
            .map(str::to_owned)
            .or_else(|| self.value("log.dir"))
            .unwrap_or_default();
        raw.split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(PathBuf::from)
            .collect()
    }

    pub fn num_partitions(&self) -> i32 {
        self.int("num.partitions") as i32
    }

    pub fn default_replication_factor(&self) -> i16 {
        self.int("default.replication.factor") as i16
    }

    pub fn auto_create_topics(&self) -> bool {
        self.flag("auto.create.topics.enable")
    }

    /// `delegation.token.*`.
    pub fn token_settings(&self) -> crate::controller_types::TokenSettings {
        crate::controller_types::TokenSettings {
            secret_key: self.value("delegation.token.secret.key"),
            max_lifetime_ms: self.int("delegation.token.max.lifetime.ms").max(1),
            expiry_time_ms: self.int("delegation.token.expiry.time.ms").max(1),
            expiry_check_interval_ms: self.int("delegation.token.expiry.check.interval.ms").max(1),
        }
    }

    /// `telemetry.max.bytes`: the largest metrics payload a client may push (KIP-714).
    pub fn telemetry_max_bytes(&self) -> i32 {
        i32::try_from(self.int("telemetry.max.bytes")).unwrap_or(i32::MAX)
    }

    pub fn delete_topic_enable(&self) -> bool {
        self.flag("delete.topic.enable")
    }

    pub fn socket_request_max_bytes(&self) -> usize {
        self.int("socket.request.max.bytes") as usize
    }

    pub fn queued_max_requests(&self) -> usize {
        self.int("queued.max.requests") as usize
    }

    pub fn connections_max_idle_ms(&self) -> i64 {
        self.int("connections.max.idle.ms")
    }

    /// `remote.log.storage.system.enable`
    pub fn remote_storage_enabled(&self) -> bool {
        self.flag("remote.log.storage.system.enable")
    }

    pub fn diskless_compaction_interval_ms(&self) -> i64 {
        self.int("diskless.wal.compaction.interval.ms")
    }

    pub fn retention_check_interval_ms(&self) -> i64 {
        self.int("log.retention.check.interval.ms")
    }

    pub fn recovery_checkpoint_interval_ms(&self) -> i64 {
        self.int("log.flush.offset.checkpoint.interval.ms")
    }

    pub fn flush_scheduler_interval_ms(&self) -> i64 {
        self.int("log.flush.scheduler.interval.ms")
    }

    /// Numeric setting (explicit or default), for the coordinator's many knobs.
    pub fn number(&self, key: &str) -> i64 {
        self.int(key)
    }

    pub fn cleaner_enabled(&self) -> bool {
        self.flag("log.cleaner.enable")
    }

    pub fn cleaner_backoff_ms(&self) -> i64 {
        self.int("log.cleaner.backoff.ms")
    }

    pub fn fetch_max_bytes(&self) -> u64 {
        self.settings.fetch_max_bytes
    }

    pub fn socket_buffer_bytes(&self) -> (i32, i32) {
        (
            self.int("socket.send.buffer.bytes") as i32,
            self.int("socket.receive.buffer.bytes") as i32,
        )
    }

    /// The broker-level default of a topic config: its highest-priority set synonym
    /// (converted to the topic config's unit), else the topic default.
    pub fn topic_default(
        &self,
        topic_key: &str,
    ) -> Option<(String, Option<(&'static str, ConfigSource)>)> {
        let tdef = topic_def(topic_key)?;
        for (syn, factor) in tdef.broker_synonyms {
            if let Some(v) = self.explicit(syn) {
                return Some((
                    scale(v, *factor),
                    Some((syn, ConfigSource::StaticBrokerConfig)),
                ));
            }
        }
        Some((tdef.def.default.unwrap_or_default().to_string(), None))
    }
}

pub(crate) fn scale(v: &str, factor: i64) -> String {
    if factor == 1 {
        return v.trim().to_string();
    }
    match v.trim().parse::<i64>() {
        Ok(n) if n < 0 => "-1".to_string(),
        Ok(n) => n.saturating_mul(factor).to_string(),
        Err(_) => v.to_string(),
    }
}

impl BrokerConfig {
    /// This config with the dynamic broker configs applied: the cluster-wide defaults, then
    /// this broker's own (Kafka's precedence: broker, cluster default, static, default).
    pub fn with_dynamic(&self, dynamic: &DynamicBrokerConfigs) -> BrokerConfig {
        let mut set = self.set.clone();
        for (k, v) in dynamic.cluster_default.iter().chain(&dynamic.broker) {
            set.insert(k.clone(), v.clone());
        }
        Self::from_map(set)
    }
}
