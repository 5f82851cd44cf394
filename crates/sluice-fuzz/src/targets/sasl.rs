//! SASL messages a client sends a broker (PLAIN tokens, SCRAM client-first and
//! client-final) and a broker sends a client (SCRAM server-first and server-final).

use std::collections::BTreeMap;
use std::sync::OnceLock;

use sluice_protocol::scram::{self, ClientFirst, Credential, Mechanism, ServerFirst};

fn credential(mech: Mechanism) -> Credential {
    // PBKDF2 once per mechanism: the lookup below runs on every input.
    static CREDS: OnceLock<[Credential; 2]> = OnceLock::new();
    let creds = CREDS.get_or_init(|| {
        [Mechanism::Sha256, Mechanism::Sha512].map(|m| {
            let salted = scram::salted_password(m, b"secret", b"salt", 4096);
            scram::credential_from_salted(m, b"salt", &salted, 4096)
        })
    });
    creds[usize::from(mech == Mechanism::Sha512)].clone()
}

/// `[which][message]`: 0 PLAIN token; 1/2 SCRAM-SHA-256/512 client-first then (after a
/// `\n`) client-final; 3 a client reading server-first and server-final; 4 an OAUTHBEARER
/// client-first message with its unsecured token; 5 one with a signed token (and the same
/// bytes as a JWKS document).
pub fn sasl(data: &[u8]) {
    let Some((&which, msg)) = data.split_first() else {
        return;
    };
    match which % 6 {
        0 => {
            let users = BTreeMap::from([("alice".to_string(), "secret".to_string())]);
            let _ = sluice_broker::sasl::plain(&users, msg);
        }
        w @ (1 | 2) => {
            let mech = if w == 1 {
                Mechanism::Sha256
            } else {
                Mechanism::Sha512
            };
            let (first, last) = split_at_newline(msg);
            if let Ok((server, _)) = ServerFirst::new(mech, first, |_, _| Some(credential(mech))) {
                let _ = server.user();
                let _ = server.finish(last);
            }
        }
        4 => {
            let v = sluice_broker::oauthbearer::UnsecuredValidator::default();
            let _ = v.authenticate(msg, 1_800_000_000_000);
        }
        5 => {
            let _ = jwt_validator().authenticate(msg, 1_800_000_000_000);
            let _ = sluice_broker::oauthbearer::jwt::parse_jwks(msg);
        }
        _ => {
            let (first, last) = split_at_newline(msg);
            let (client, _) = ClientFirst::new(Mechanism::Sha256, "alice", "secret");
            if let Ok((fin, _)) = client.respond(first) {
                let _ = fin.verify(last);
            }
        }
    }
}

/// A JWT validator over one fixed P-256 key (made once).
fn jwt_validator() -> &'static sluice_broker::oauthbearer::Validator {
    use sluice_broker::oauthbearer::jwt::{parse_jwks, testing, JwtValidator};
    static V: OnceLock<sluice_broker::oauthbearer::Validator> = OnceLock::new();
    V.get_or_init(|| {
        let signer = testing::Signer::es256();
        let keys = parse_jwks(testing::jwks(&[signer.jwk("k")]).as_bytes()).expect("jwks");
        let settings = testing::settings("file:/unused");
        sluice_broker::oauthbearer::Validator::Jwt(JwtValidator::with_keys(settings, keys))
    })
}

fn split_at_newline(msg: &[u8]) -> (&[u8], &[u8]) {
    match msg.iter().position(|&b| b == b'\n') {
        Some(i) => (&msg[..i], &msg[i + 1..]),
        None => (msg, &[]),
    }
}

pub fn seeds() -> Vec<Vec<u8>> {
    let mut seeds = vec![
        b"\0\0alice\0secret".to_vec(),
        b"\0alice\0alice\0secret".to_vec(),
    ];
    // (Each PLAIN seed starts with its selector, 0.)
    for w in [1u8, 2] {
        let mut s = vec![w];
        s.extend_from_slice(b"n,,n=alice,r=fyko+d2lbbFgONRv9qkxdawL\nc=biws,r=fyko+d2lbbFgONRv9qkxdawL3rfcNHYJY1ZVvWVs7j,p=v0X8v3Bz2T0CJGbJQyF0X+HI4Ts=");
        seeds.push(s);
    }
    seeds.push(b"\x03r=abc,s=QSXCR+Q6sek8bf92,i=4096\nv=rmF9pqV8S7suAoZWja4dJRkFsKQ=".to_vec());
    // A signed-looking token ({"alg":"ES256","kid":"k"} . {"sub":"alice",...} . signature).
    seeds.push(
        b"\x05n,,\x01auth=Bearer eyJhbGciOiJFUzI1NiIsImtpZCI6ImsifQ.eyJzdWIiOiJhbGljZSIsImlhdCI6MTgwMDAwMDAwMCwiZXhwIjoxODAwMDAwMTAwfQ.AAAA\x01\x01"
            .to_vec(),
    );
    // {"alg":"none"} . {"sub":"alice","exp":1800000100}
    seeds.push(
        b"\x04n,,\x01auth=Bearer eyJhbGciOiJub25lIn0.eyJzdWIiOiJhbGljZSIsImV4cCI6MTgwMDAwMDEwMH0.\x01\x01"
            .to_vec(),
    );
    seeds
}
