//! SCRAM (RFC 5802, RFC 7677) as Kafka uses it for SASL: SCRAM-SHA-256 and SCRAM-SHA-512,
//! no channel binding, credentials kept as (salt, iterations, StoredKey, ServerKey) so a
//! stored credential never reveals the password.
//!
//! [`ServerFirst`] is the broker's half of the exchange (two messages each way); [`ClientFirst`]
//! the client's. Both are plain functions over bytes: no I/O.

use ring::rand::SecureRandom;
use ring::{digest, hmac, pbkdf2};
use thiserror::Error;

use crate::base64;

/// Kafka's bounds on a SCRAM credential's iteration count.
pub const MIN_ITERATIONS: i32 = 4096;
pub const MAX_ITERATIONS: i32 = 16384;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Mechanism {
    Sha256,
    Sha512,
}

impl Mechanism {
    pub const ALL: [Mechanism; 2] = [Mechanism::Sha256, Mechanism::Sha512];

    /// The SASL mechanism name, e.g. `SCRAM-SHA-512`.
    pub fn name(self) -> &'static str {
        match self {
            Mechanism::Sha256 => "SCRAM-SHA-256",
            Mechanism::Sha512 => "SCRAM-SHA-512",
        }
    }

    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|m| m.name() == name)
    }

    /// The code Alter/DescribeUserScramCredentials use (0 is UNKNOWN).
    pub fn code(self) -> i8 {
        match self {
            Mechanism::Sha256 => 1,
            Mechanism::Sha512 => 2,
        }
    }

    pub fn from_code(code: i8) -> Option<Self> {
        Self::ALL.into_iter().find(|m| m.code() == code)
    }

    fn hmac(self) -> hmac::Algorithm {
        match self {
            Mechanism::Sha256 => hmac::HMAC_SHA256,
            Mechanism::Sha512 => hmac::HMAC_SHA512,
        }
    }

    fn digest(self) -> &'static digest::Algorithm {
        match self {
            Mechanism::Sha256 => &digest::SHA256,
            Mechanism::Sha512 => &digest::SHA512,
        }
    }

    fn pbkdf2(self) -> pbkdf2::Algorithm {
        match self {
            Mechanism::Sha256 => pbkdf2::PBKDF2_HMAC_SHA256,
            Mechanism::Sha512 => pbkdf2::PBKDF2_HMAC_SHA512,
        }
    }

    /// Bytes of this mechanism's hash (and so of its keys and proofs).
    pub fn hash_len(self) -> usize {
        self.digest().output_len()
    }

    fn mac(self, key: &[u8], parts: &[&[u8]]) -> Vec<u8> {
        let mut ctx = hmac::Context::with_key(&hmac::Key::new(self.hmac(), key));
        for p in parts {
            ctx.update(p);
        }
        ctx.sign().as_ref().to_vec()
    }

    fn hash(self, data: &[u8]) -> Vec<u8> {
        digest::digest(self.digest(), data).as_ref().to_vec()
    }
}

/// What the cluster stores for one user and mechanism.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Credential {
    pub salt: Vec<u8>,
    pub iterations: i32,
    pub stored_key: Vec<u8>,
    pub server_key: Vec<u8>,
}

/// Hi(password, salt, i) of RFC 5802: PBKDF2 with the mechanism's HMAC.
pub fn salted_password(mech: Mechanism, password: &[u8], salt: &[u8], iterations: u32) -> Vec<u8> {
    let mut out = vec![0u8; mech.hash_len()];
    let rounds = std::num::NonZeroU32::new(iterations.max(1)).unwrap_or(std::num::NonZeroU32::MIN);
    pbkdf2::derive(mech.pbkdf2(), rounds, salt, password, &mut out);
    out
}

/// The stored form of a salted password (what AlterUserScramCredentials sends).
pub fn credential_from_salted(
    mech: Mechanism,
    salt: &[u8],
    salted: &[u8],
    iterations: i32,
) -> Credential {
    let client_key = mech.mac(salted, &[b"Client Key"]);
    Credential {
        salt: salt.to_vec(),
        iterations,
        stored_key: mech.hash(&client_key),
        server_key: mech.mac(salted, &[b"Server Key"]),
    }
}

/// A delegation token's HMAC as Kafka computes it: HMAC-SHA512 of the token id keyed with
/// `delegation.token.secret.key`. Its padded base64 is the token's SCRAM password.
pub fn token_hmac(secret_key: &str, token_id: &str) -> Vec<u8> {
    let key = hmac::Key::new(hmac::HMAC_SHA512, secret_key.as_bytes());
    hmac::sign(&key, token_id.as_bytes()).as_ref().to_vec()
}

/// `n` random bytes from the system's secure generator.
pub fn random_bytes(n: usize) -> Vec<u8> {
    let mut out = vec![0u8; n];
    // The OS generator only fails when the OS cannot supply randomness at all; an
    // all-zero nonce or salt would then still be rejected by nothing, so fall back to
    // the clock rather than panic.
    if ring::rand::SystemRandom::new().fill(&mut out).is_err() {
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        for (i, b) in out.iter_mut().enumerate() {
            *b = (t >> ((i % 16) * 8)) as u8 ^ i as u8;
        }
    }
    out
}

/// A fresh nonce: printable, no comma (RFC 5802 `printable`).
fn nonce() -> String {
    base64::encode(&random_bytes(24))
}

#[derive(Debug, Error, PartialEq, Eq)]
pub enum ScramError {
    #[error("invalid SCRAM message: {0}")]
    Malformed(String),
    #[error("Authentication failed: Invalid user credentials")]
    UnknownUser,
    #[error("Authentication failed during authentication due to invalid credentials with SASL mechanism {0}")]
    BadProof(&'static str),
    #[error("SCRAM server signature does not match: the server does not know this password")]
    BadServerSignature,
    #[error("SCRAM server error: {0}")]
    ServerError(String),
    #[error("{0}")]
    Unsupported(String),
}

fn malformed(what: impl Into<String>) -> ScramError {
    ScramError::Malformed(what.into())
}

/// `saslname` of RFC 5802: `=2C` is `,`, `=3D` is `=`, any other `=` is an error.
fn decode_saslname(s: &str) -> Result<String, ScramError> {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(i) = rest.find('=') {
        out.push_str(&rest[..i]);
        let esc = rest.get(i..i + 3).unwrap_or("");
        match esc {
            "=2C" => out.push(','),
            "=3D" => out.push('='),
            _ => return Err(malformed(format!("bad escape in user name {s:?}"))),
        }
        rest = &rest[i + 3..];
    }
    out.push_str(rest);
    Ok(out)
}

fn encode_saslname(s: &str) -> String {
    s.replace('=', "=3D").replace(',', "=2C")
}

/// `k=value` attributes of a SCRAM message, in order.
fn attributes(msg: &str) -> Result<Vec<(char, &str)>, ScramError> {
    msg.split(',')
        .map(|part| {
            let mut chars = part.chars();
            match (chars.next(), chars.next()) {
                (Some(k), Some('=')) if k.is_ascii_alphabetic() => Ok((k, &part[2..])),
                _ => Err(malformed(format!("attribute {part:?}"))),
            }
        })
        .collect()
}

fn utf8(bytes: &[u8]) -> Result<&str, ScramError> {
    std::str::from_utf8(bytes).map_err(|_| malformed("not UTF-8"))
}

fn valid_nonce(n: &str) -> bool {
    !n.is_empty() && n.bytes().all(|b| (0x21..=0x7e).contains(&b) && b != b',')
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// The broker after the client's first message: it sent `server-first` and awaits the proof.
#[derive(Debug)]
pub struct ServerFirst {
    mech: Mechanism,
    user: String,
    gs2_header: String,
    client_first_bare: String,
    server_first: String,
    nonce: String,
    credential: Credential,
    /// The client authenticates with a delegation token (Kafka's `tokenauth=true`
    /// extension): the user is the token id.
    token: bool,
}

impl ServerFirst {
    /// Handle `client-first`; `lookup` finds the stored credential of a user, or with
    /// `true` of a delegation token (the user named is its token id).
    pub fn new(
        mech: Mechanism,
        client_first: &[u8],
        lookup: impl FnOnce(&str, bool) -> Option<Credential>,
    ) -> Result<(ServerFirst, Vec<u8>), ScramError> {
        Self::with_nonce(mech, client_first, lookup, &nonce())
    }

    fn with_nonce(
        mech: Mechanism,
        client_first: &[u8],
        lookup: impl FnOnce(&str, bool) -> Option<Credential>,
        server_nonce: &str,
    ) -> Result<(ServerFirst, Vec<u8>), ScramError> {
        let msg = utf8(client_first)?;
        // gs2-header: cbind-flag "," [authzid] ","
        let (flag, rest) = msg
            .split_once(',')
            .ok_or_else(|| malformed("no GS2 header"))?;
        match flag {
            "n" | "y" => {}
            f if f.starts_with("p=") => {
                return Err(ScramError::Unsupported(
                    "SCRAM channel binding is not supported".into(),
                ))
            }
            f => return Err(malformed(format!("GS2 flag {f:?}"))),
        }
        let (authzid, bare) = rest
            .split_once(',')
            .ok_or_else(|| malformed("no GS2 header"))?;
        // n=<user>,r=<nonce>, then Kafka's `key=value` extensions (multi-letter keys).
        let mut parts = bare.splitn(3, ',');
        let (user, client_nonce) = match (parts.next(), parts.next()) {
            (Some(m), _) if m.starts_with("m=") => {
                return Err(ScramError::Unsupported(
                    "mandatory SCRAM extensions are not supported".into(),
                ))
            }
            (Some(n), Some(r)) => match (n.strip_prefix("n="), r.strip_prefix("r=")) {
                (Some(user), Some(nonce)) => (decode_saslname(user)?, nonce),
                _ => return Err(malformed("client-first must start n=<user>,r=<nonce>")),
            },
            _ => return Err(malformed("client-first must start n=<user>,r=<nonce>")),
        };
        if !valid_nonce(client_nonce) {
            return Err(malformed("client nonce"));
        }
        let mut token = false;
        for ext in parts
            .next()
            .unwrap_or("")
            .split(',')
            .filter(|e| !e.is_empty())
        {
            let Some((key, value)) = ext.split_once('=') else {
                return Err(malformed(format!("extension {ext:?}")));
            };
            if key == "tokenauth" {
                token = value.eq_ignore_ascii_case("true");
            }
        }
        if !authzid.is_empty() {
            let id = authzid
                .strip_prefix("a=")
                .ok_or_else(|| malformed(format!("authzid {authzid:?}")))?;
            if decode_saslname(id)? != user {
                return Err(ScramError::Unsupported(
                    "Authentication failed: Client requested an authorization id that is different from username".into(),
                ));
            }
        }
        let credential = lookup(&user, token).ok_or(ScramError::UnknownUser)?;
        let nonce = format!("{client_nonce}{server_nonce}");
        let server_first = format!(
            "r={nonce},s={},i={}",
            base64::encode_padded(&credential.salt),
            credential.iterations
        );
        let out = server_first.clone().into_bytes();
        Ok((
            ServerFirst {
                mech,
                user,
                gs2_header: format!("{flag},{authzid},"),
                client_first_bare: bare.to_string(),
                server_first,
                nonce,
                credential,
                token,
            },
            out,
        ))
    }

    /// The authenticated user's name (known since the first message); a token id when
    /// [`Self::token_auth`].
    pub fn user(&self) -> &str {
        &self.user
    }

    /// The client authenticates with a delegation token.
    pub fn token_auth(&self) -> bool {
        self.token
    }

    /// Check `client-final`'s proof; on success the user and `server-final`.
    pub fn finish(self, client_final: &[u8]) -> Result<(String, Vec<u8>), ScramError> {
        let msg = utf8(client_final)?;
        let (without_proof, proof) = msg
            .rsplit_once(",p=")
            .ok_or_else(|| malformed("client-final has no proof"))?;
        let attrs = attributes(without_proof)?;
        let (binding, nonce) = match attrs.as_slice() {
            [('c', c), ('r', r), ..] => (*c, *r),
            _ => return Err(malformed("client-final must start c=<binding>,r=<nonce>")),
        };
        if base64::decode_padded(binding).as_deref() != Some(self.gs2_header.as_bytes()) {
            return Err(malformed("channel binding does not match the GS2 header"));
        }
        if nonce != self.nonce {
            return Err(malformed("nonce does not match"));
        }
        let proof = base64::decode_padded(proof).ok_or_else(|| malformed("proof"))?;
        let auth_message = format!(
            "{},{},{without_proof}",
            self.client_first_bare, self.server_first
        );
        let signature = self
            .mech
            .mac(&self.credential.stored_key, &[auth_message.as_bytes()]);
        if proof.len() != signature.len() {
            return Err(ScramError::BadProof(self.mech.name()));
        }
        let client_key: Vec<u8> = proof.iter().zip(&signature).map(|(p, s)| p ^ s).collect();
        if !constant_time_eq(&self.mech.hash(&client_key), &self.credential.stored_key) {
            return Err(ScramError::BadProof(self.mech.name()));
        }
        let server_signature = self
            .mech
            .mac(&self.credential.server_key, &[auth_message.as_bytes()]);
        let server_final = format!("v={}", base64::encode_padded(&server_signature));
        Ok((self.user, server_final.into_bytes()))
    }
}

/// The client after sending `client-first`.
#[derive(Debug)]
pub struct ClientFirst {
    mech: Mechanism,
    password: String,
    client_nonce: String,
    client_first_bare: String,
}

/// The client after sending its proof: checks the server's signature.
#[derive(Debug)]
pub struct ClientFinal {
    expected: Vec<u8>,
}

impl ClientFirst {
    pub fn new(mech: Mechanism, user: &str, password: &str) -> (ClientFirst, Vec<u8>) {
        Self::with_nonce(mech, user, password, &nonce())
    }

    /// Authenticate with a delegation token (Kafka's `tokenauth=true` extension): the user is
    /// the token id, the password the padded base64 of its HMAC.
    pub fn for_token(mech: Mechanism, token_id: &str, hmac: &str) -> (ClientFirst, Vec<u8>) {
        let (mut first, _) = Self::with_nonce(mech, token_id, hmac, &nonce());
        first.client_first_bare.push_str(",tokenauth=true");
        let msg = format!("n,,{}", first.client_first_bare).into_bytes();
        (first, msg)
    }

    fn with_nonce(
        mech: Mechanism,
        user: &str,
        password: &str,
        client_nonce: &str,
    ) -> (ClientFirst, Vec<u8>) {
        let bare = format!("n={},r={client_nonce}", encode_saslname(user));
        let msg = format!("n,,{bare}").into_bytes();
        (
            ClientFirst {
                mech,
                password: password.to_string(),
                client_nonce: client_nonce.to_string(),
                client_first_bare: bare,
            },
            msg,
        )
    }

    /// Handle `server-first`; returns the proof message to send.
    pub fn respond(self, server_first: &[u8]) -> Result<(ClientFinal, Vec<u8>), ScramError> {
        let msg = utf8(server_first)?;
        let attrs = attributes(msg)?;
        if let Some((_, e)) = attrs.iter().find(|(k, _)| *k == 'e') {
            return Err(ScramError::ServerError((*e).to_string()));
        }
        let (nonce, salt, iterations) = match attrs.as_slice() {
            [('r', r), ('s', s), ('i', i), ..] => (*r, *s, *i),
            _ => return Err(malformed("server-first must be r=,s=,i=")),
        };
        if !nonce.starts_with(&self.client_nonce) || nonce.len() == self.client_nonce.len() {
            return Err(malformed("server nonce does not extend the client's"));
        }
        let salt = base64::decode_padded(salt).ok_or_else(|| malformed("salt"))?;
        let iterations: u32 = iterations
            .parse()
            .map_err(|_| malformed("iteration count"))?;
        // Kafka's client refuses fewer than 4096 (a server downgrading the work), and a
        // huge count would stall the client.
        if iterations < MIN_ITERATIONS as u32 || iterations > 1_000_000 {
            return Err(malformed("iteration count out of range"));
        }
        let salted = salted_password(self.mech, self.password.as_bytes(), &salt, iterations);
        let without_proof = format!("c={},r={nonce}", base64::encode_padded(b"n,,"));
        let auth_message = format!("{},{msg},{without_proof}", self.client_first_bare);
        let client_key = self.mech.mac(&salted, &[b"Client Key"]);
        let stored_key = self.mech.hash(&client_key);
        let signature = self.mech.mac(&stored_key, &[auth_message.as_bytes()]);
        let proof: Vec<u8> = client_key
            .iter()
            .zip(&signature)
            .map(|(k, s)| k ^ s)
            .collect();
        let server_key = self.mech.mac(&salted, &[b"Server Key"]);
        let expected = self.mech.mac(&server_key, &[auth_message.as_bytes()]);
        let out = format!("{without_proof},p={}", base64::encode_padded(&proof));
        Ok((ClientFinal { expected }, out.into_bytes()))
    }
}

impl ClientFinal {
    /// Check `server-final`: the server proved it knows the credential.
    pub fn verify(self, server_final: &[u8]) -> Result<(), ScramError> {
        let msg = utf8(server_final)?;
        if let Some(e) = msg.strip_prefix("e=") {
            return Err(ScramError::ServerError(e.to_string()));
        }
        let v = msg
            .strip_prefix("v=")
            .and_then(|v| base64::decode_padded(v.split(',').next().unwrap_or(v)))
            .ok_or_else(|| malformed("server-final"))?;
        if constant_time_eq(&v, &self.expected) {
            Ok(())
        } else {
            Err(ScramError::BadServerSignature)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 7677 §3: the SCRAM-SHA-256 example exchange, byte for byte.
    #[test]
    fn rfc_7677_example() {
        let salt = base64::decode_padded("W22ZaJ0SNY7soEsUEjb6gQ==").unwrap();
        let salted = salted_password(Mechanism::Sha256, b"pencil", &salt, 4096);
        let cred = credential_from_salted(Mechanism::Sha256, &salt, &salted, 4096);
        let (client, first) =
            ClientFirst::with_nonce(Mechanism::Sha256, "user", "pencil", "rOprNGfwEbeRWgbNEkqO");
        assert_eq!(first, b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO");
        let (server, server_first) = ServerFirst::with_nonce(
            Mechanism::Sha256,
            &first,
            |u, token| (u == "user" && !token).then(|| cred.clone()),
            "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0",
        )
        .unwrap();
        assert_eq!(
            std::str::from_utf8(&server_first).unwrap(),
            "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
        );
        let (client, client_final) = client.respond(&server_first).unwrap();
        assert_eq!(
            std::str::from_utf8(&client_final).unwrap(),
            "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
        );
        let (user, server_final) = server.finish(&client_final).unwrap();
        assert_eq!(user, "user");
        assert_eq!(
            std::str::from_utf8(&server_final).unwrap(),
            "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="
        );
        client.verify(&server_final).unwrap();
    }

    fn exchange(mech: Mechanism, stored_pw: &str, given_pw: &str) -> Result<String, ScramError> {
        let salt = random_bytes(16);
        let cred = credential_from_salted(
            mech,
            &salt,
            &salted_password(mech, stored_pw.as_bytes(), &salt, 4096),
            4096,
        );
        let (client, first) = ClientFirst::new(mech, "al,i=ce", given_pw);
        let (server, server_first) =
            ServerFirst::new(mech, &first, |u, _| (u == "al,i=ce").then(|| cred.clone()))?;
        let (client, client_final) = client.respond(&server_first)?;
        let (user, server_final) = server.finish(&client_final)?;
        client.verify(&server_final)?;
        Ok(user)
    }

    #[test]
    fn both_mechanisms_authenticate_the_right_password_only() {
        for mech in Mechanism::ALL {
            assert_eq!(exchange(mech, "s3cret", "s3cret").unwrap(), "al,i=ce");
            assert_eq!(
                exchange(mech, "s3cret", "guess"),
                Err(ScramError::BadProof(mech.name()))
            );
        }
    }

    /// Kafka's `tokenauth=true` extension asks for a delegation token's credential (the
    /// user is the token id); other extensions are ignored.
    #[test]
    fn the_tokenauth_extension_looks_up_a_token() {
        let cred = credential_from_salted(Mechanism::Sha512, b"salt", &[7; 64], 4096);
        for (first, token) in [
            (&b"n,,n=tok,r=abc,tokenauth=true"[..], true),
            (b"n,,n=tok,r=abc,tokenauth=TRUE,other=x", true),
            (b"n,,n=tok,r=abc,tokenauth=false", false),
            (b"n,,n=tok,r=abc,other=x", false),
        ] {
            let (server, _) = ServerFirst::new(Mechanism::Sha512, first, |user, t| {
                (user == "tok" && t == token).then(|| cred.clone())
            })
            .unwrap();
            assert_eq!(server.token_auth(), token);
            assert_eq!(server.user(), "tok");
        }
        // A whole exchange with a token: the extension is part of the signed message.
        let password = base64::encode_padded(&token_hmac("secret", "tok"));
        let salt = b"pepper".to_vec();
        let salted = salted_password(Mechanism::Sha256, password.as_bytes(), &salt, 4096);
        let cred = credential_from_salted(Mechanism::Sha256, &salt, &salted, 4096);
        let (client, first) = ClientFirst::for_token(Mechanism::Sha256, "tok", &password);
        let (server, server_first) = ServerFirst::new(Mechanism::Sha256, &first, |u, t| {
            (u == "tok" && t).then(|| cred.clone())
        })
        .unwrap();
        assert!(server.token_auth());
        let (client, client_final) = client.respond(&server_first).unwrap();
        let (user, server_final) = server.finish(&client_final).unwrap();
        assert_eq!(user, "tok");
        client.verify(&server_final).unwrap();
        // Python: base64(hmac.new(b"secret", b"tokenid", sha512).digest())
        assert_eq!(
            base64::encode_padded(&token_hmac("secret", "tokenid")),
            "ruEIJamjEQsAtxNf4aMj/H003j0BJ7Kr8kS4xNJigwoEEpg98/JUxFugV/1oCBP8VM8ftcNJKuPxqbzlchmshA=="
        );
    }

    #[test]
    fn bad_client_messages_are_errors_not_panics() {
        let cred = credential_from_salted(Mechanism::Sha512, b"salt", &[7; 64], 4096);
        let lookup = |_: &str, _| Some(cred.clone());
        for bad in [
            &b""[..],
            b"n",
            b"n,,",
            b"x,,n=u,r=abc",
            b"p=tls-unique,,n=u,r=abc",
            b"n,,r=abc,n=u",
            b"n,,n=u=,r=abc",
            b"n,,n=u,r=",
            b"n,a=other,n=u,r=abc",
            b"n,,m=ext,n=u,r=abc",
            b"\xff\xfe",
        ] {
            assert!(
                ServerFirst::new(Mechanism::Sha512, bad, lookup).is_err(),
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
        assert_eq!(
            ServerFirst::new(Mechanism::Sha512, b"n,,n=nobody,r=abc", |_, _| None).unwrap_err(),
            ScramError::UnknownUser
        );
        for bad in [
            &b""[..],
            b"c=biws,r=abc",
            b"c=biws,r=wrong,p=AAAA",
            b"c=eCws,r=NONCE,p=AAAA",
            b"c=biws,r=NONCE,p=!!",
            b"c=biws,r=NONCE,p=AAAA",
        ] {
            let (server, first) =
                ServerFirst::with_nonce(Mechanism::Sha512, b"n,,n=u,r=abc", lookup, "xyz").unwrap();
            assert!(first.starts_with(b"r=abcxyz,"));
            let bad = String::from_utf8_lossy(bad).replace("NONCE", "abcxyz");
            assert!(server.finish(bad.as_bytes()).is_err(), "{bad}");
        }
    }

    #[test]
    fn mechanism_names_and_codes() {
        for m in Mechanism::ALL {
            assert_eq!(Mechanism::from_name(m.name()), Some(m));
            assert_eq!(Mechanism::from_code(m.code()), Some(m));
        }
        assert_eq!(Mechanism::from_name("SCRAM-SHA-1"), None);
        assert_eq!(Mechanism::from_code(0), None);
        assert_eq!(Mechanism::Sha512.hash_len(), 64);
    }
}
