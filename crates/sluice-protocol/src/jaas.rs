//! JAAS login-module entries as Kafka takes them in `sasl.jaas.config`, e.g.
//! `org.apache.kafka.common.security.scram.ScramLoginModule required username="u" password="p";`
//! — the broker reads its PLAIN users and inter-broker credentials from them, clients their
//! SASL credentials.

/// A JAAS login module entry as Kafka takes it in `sasl.jaas.config`:
/// `<class> <flag> key="value" key2=value2;` — returns the class and the options.
pub fn parse(text: &str) -> Result<(String, Vec<(String, String)>), String> {
    let text = text.trim();
    let body = text
        .strip_suffix(';')
        .ok_or("a JAAS entry must end with ';'")?;
    let mut rest = body.trim_start();
    let mut word = || {
        let end = rest.find(char::is_whitespace).unwrap_or(rest.len());
        let (w, r) = rest.split_at(end);
        rest = r.trim_start();
        w.to_string()
    };
    let module = word();
    let flag = word();
    if module.is_empty()
        || !["required", "requisite", "sufficient", "optional"].contains(&flag.as_str())
    {
        return Err("a JAAS entry is '<LoginModule class> required key=\"value\" ...;'".into());
    }
    let mut options = Vec::new();
    while !rest.is_empty() {
        let (k, after) = rest
            .split_once('=')
            // Not quoting the text: it may hold a password.
            .ok_or("a JAAS option is not key=value")?;
        let k = k.trim();
        if k.is_empty() || k.contains(char::is_whitespace) {
            return Err(format!("JAAS option name {k:?} is invalid"));
        }
        let after = after.trim_start();
        let (value, remaining) = if let Some(quoted) = after.strip_prefix('"') {
            let mut value = String::new();
            let mut chars = quoted.char_indices();
            let mut end = None;
            while let Some((i, c)) = chars.next() {
                match c {
                    '\\' => {
                        if let Some((_, n)) = chars.next() {
                            value.push(n);
                        }
                    }
                    '"' => {
                        end = Some(i + 1);
                        break;
                    }
                    c => value.push(c),
                }
            }
            let end = end.ok_or_else(|| format!("JAAS option {k}: unterminated quote"))?;
            (value, &quoted[end..])
        } else {
            let end = after.find(char::is_whitespace).unwrap_or(after.len());
            (after[..end].to_string(), &after[end..])
        };
        options.push((k.to_string(), value));
        rest = remaining.trim_start();
    }
    Ok((module, options))
}

/// The value of option `key` in an entry's options.
pub fn option<'a>(options: &'a [(String, String)], key: &str) -> Option<&'a str> {
    options
        .iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.as_str())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_quoted_and_bare_options() {
        let (module, opts) = parse(
            "org.apache.kafka.common.security.scram.ScramLoginModule required username=\"a b\" password=\"p\\\"q\" x=1;",
        )
        .unwrap();
        assert_eq!(
            module,
            "org.apache.kafka.common.security.scram.ScramLoginModule"
        );
        assert_eq!(option(&opts, "username"), Some("a b"));
        assert_eq!(option(&opts, "password"), Some("p\"q"));
        assert_eq!(option(&opts, "x"), Some("1"));
        assert_eq!(option(&opts, "y"), None);
        for bad in [
            "",
            "M required",
            "M maybe;",
            "M required k;",
            "M required k=\"x;",
            "M required =1;",
        ] {
            assert!(parse(bad).is_err(), "{bad:?}");
        }
    }
}
