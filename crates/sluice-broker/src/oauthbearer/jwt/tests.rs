use super::testing::{jwks, serve_jwks, Signer};
use super::*;
use serde_json::json;

const NOW: i64 = 1_800_000_000_000;

fn settings() -> JwtSettings {
    super::testing::settings("file:/unused")
}

fn rsa() -> Signer {
    Signer::rs256(include_bytes!(
        "../../../../sluice/tests/fixtures/oauth/rsa-2048.pk8"
    ))
}

fn claims() -> serde_json::Value {
    json!({"sub": "alice", "iss": "https://idp.test", "aud": ["other", "kafka"],
           "iat": 1_799_999_990, "exp": 1_800_000_600, "scope": "read"})
}

#[test]
fn signed_tokens_are_checked_as_kafkas_jwt_validator_checks_them() {
    let ec = Signer::es256();
    let rs = rsa();
    let keys = parse_jwks(jwks(&[ec.jwk("ec-1"), rs.jwk("rsa-1")]).as_bytes()).unwrap();
    assert_eq!(keys.len(), 2);
    let v = JwtValidator::with_keys(settings(), keys);
    for (signer, kid) in [(&ec, "ec-1"), (&rs, "rsa-1")] {
        assert_eq!(
            v.validate(&signer.token(Some(kid), &claims()), NOW)
                .unwrap(),
            ("alice".to_string(), 1_800_000_600_000)
        );
        // Without a kid, any key of the right kind is tried.
        assert!(v.validate(&signer.token(None, &claims()), NOW).is_ok());
    }
    let refused = |token: String, why: &str| {
        let e = v.validate(&token, NOW).unwrap_err();
        assert!(e.contains(why), "{e} (expected: {why})");
    };
    let with = |k: &str, val: serde_json::Value| {
        let mut c = claims();
        c[k] = val;
        c
    };
    let without = |k: &str| {
        let mut c = claims();
        c.as_object_mut().unwrap().remove(k);
        c
    };
    refused(
        ec.token(Some("rsa-1"), &claims()),
        "no ES256 key with kid rsa-1",
    );
    refused(
        ec.token(Some("gone"), &claims()),
        "no ES256 key with kid gone",
    );
    refused(
        Signer::es256().token(Some("ec-1"), &claims()),
        "signature does not verify",
    );
    refused(
        ec.token(Some("ec-1"), &with("exp", json!(1_799_999_900))),
        "expired",
    );
    // Thirty seconds of skew: expired twenty seconds ago still passes.
    assert!(v
        .validate(
            &ec.token(Some("ec-1"), &with("exp", json!(1_799_999_980))),
            NOW
        )
        .is_ok());
    refused(ec.token(Some("ec-1"), &without("exp")), "no exp");
    refused(ec.token(Some("ec-1"), &without("iat")), "no iat");
    refused(
        ec.token(Some("ec-1"), &with("nbf", json!(1_800_000_100))),
        "not valid yet",
    );
    refused(
        ec.token(Some("ec-1"), &with("iss", json!("https://evil"))),
        "issuer",
    );
    refused(ec.token(Some("ec-1"), &without("iss")), "issuer");
    refused(
        ec.token(Some("ec-1"), &with("aud", json!("billing"))),
        "audience",
    );
    refused(ec.token(Some("ec-1"), &without("aud")), "audience");
    refused(ec.token(Some("ec-1"), &without("sub")), "no sub claim");
    refused(
        ec.token(Some("ec-1"), &with("sub", json!("  "))),
        "no sub claim",
    );
    refused(
        ec.token(Some("ec-1"), &with("scope", json!(["a", "a"]))),
        "repeats",
    );
    // alg none, a token cut short, a signature altered.
    let unsigned = format!(
        "{}.{}.",
        base64::encode(br#"{"alg":"none"}"#),
        base64::encode(claims().to_string().as_bytes())
    );
    refused(unsigned, "alg none");
    refused("a.b".into(), "three parts");
    let t = ec.token(Some("ec-1"), &claims());
    refused(format!("{}AAAA", &t[..t.len() - 4]), "signature");
    // An RS256 token is not checked with an EC key of the same kid.
    let mixed = JwtValidator::with_keys(
        settings(),
        parse_jwks(jwks(&[ec.jwk("k")]).as_bytes()).unwrap(),
    );
    assert!(mixed
        .validate(&rs.token(Some("k"), &claims()), NOW)
        .is_err());
}

#[test]
fn audience_and_claim_names_follow_the_settings() {
    let ec = Signer::es256();
    let keys = parse_jwks(jwks(&[ec.jwk("k")]).as_bytes()).unwrap();
    let open = JwtValidator::with_keys(
        JwtSettings {
            audiences: Vec::new(),
            issuer: None,
            sub_claim: "client_id".into(),
            ..settings()
        },
        keys,
    );
    let c = json!({"client_id": "svc", "iat": 1_799_999_990, "exp": 1_800_000_600});
    assert_eq!(
        open.validate(&ec.token(Some("k"), &c), NOW).unwrap().0,
        "svc"
    );
    // No expected audience: a token with one is refused, as jose4j refuses it.
    let mut with_aud = c.clone();
    with_aud["aud"] = json!("kafka");
    assert!(open
        .validate(&ec.token(Some("k"), &with_aud), NOW)
        .unwrap_err()
        .contains("expects none"));
}

#[test]
fn jwks_documents_and_http_answers_parse() {
    let ec = Signer::es256();
    let doc = jwks(&[
        ec.jwk("a"),
        json!({"kty": "EC", "crv": "P-521", "x": "AA", "y": "AA"}),
        json!({"kty": "oct", "k": "AA"}),
        json!({"kty": "RSA", "use": "enc", "n": "AQAB", "e": "AQAB"}),
    ]);
    let keys = parse_jwks(doc.as_bytes()).unwrap();
    assert_eq!(keys.len(), 1);
    assert_eq!(keys[0].kid.as_deref(), Some("a"));
    assert!(parse_jwks(b"[]").is_err());
    assert!(parse_jwks(b"{").is_err());

    let plain = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\r\n{\"keys\":[]}";
    assert_eq!(parse_response(plain).unwrap(), b"{\"keys\":[]}");
    let chunked = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n4\r\n{\"ke\r\n7;x=1\r\nys\":[]}\r\n0\r\n\r\n";
    assert_eq!(parse_response(chunked).unwrap(), b"{\"keys\":[]}");
    assert!(parse_response(b"HTTP/1.1 404 Not Found\r\n\r\n")
        .unwrap_err()
        .contains("404"));
    assert!(
        parse_response(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nff\r\nab").is_err()
    );
    assert!(parse_response(b"garbage").is_err());
}

#[test]
fn an_http_endpoint_is_read_again_for_a_key_it_lacked() {
    let first = Signer::es256();
    let second = Signer::es256();
    let served = Arc::new(Mutex::new(jwks(&[first.jwk("one")])));
    let url = serve_jwks(Arc::clone(&served));
    let v = JwtValidator::start(JwtSettings {
        jwks_url: url,
        retry_backoff_ms: 10,
        ..settings()
    })
    .unwrap();
    assert!(v
        .validate(&first.token(Some("one"), &claims()), NOW)
        .is_ok());
    // The provider rotates a key in: the first token signed with it asks for a refresh.
    *served.lock().unwrap() = jwks(&[first.jwk("one"), second.jwk("two")]);
    let token = second.token(Some("two"), &claims());
    assert!(v.validate(&token, NOW).is_err());
    let deadline = Instant::now() + Duration::from_secs(10);
    while v.validate(&token, NOW).is_err() {
        assert!(Instant::now() < deadline, "the new key was never read");
        std::thread::sleep(Duration::from_millis(20));
    }
}
