//! Credentials never reach an output: `redis://:secret@host` is shown as
//! `redis://:***@host` in the summary, the JSON, the SVG and error messages.

/// `url` with its password (userinfo after `:`, and `pass=`/`password=` query
/// parameters of `redis+unix://` URLs) replaced by `***`. Text that does not
/// parse as a URL is redacted conservatively: everything between `://` and the
/// last `@` except a user name.
pub fn redact_url(url: &str) -> String {
    let Ok(mut u) = url::Url::parse(url) else {
        return redact_fallback(url);
    };
    if u.password().is_some() && u.set_password(Some("***")).is_err() {
        return redact_fallback(url);
    }
    let secret_keys = ["pass", "password"];
    if u.query_pairs()
        .any(|(k, _)| secret_keys.contains(&k.as_ref()))
    {
        let pairs: Vec<(String, String)> = u
            .query_pairs()
            .map(|(k, v)| {
                let v = if secret_keys.contains(&k.as_ref()) {
                    "***".to_string()
                } else {
                    v.into_owned()
                };
                (k.into_owned(), v)
            })
            .collect();
        u.query_pairs_mut().clear().extend_pairs(pairs);
    }
    // `url` percent-encodes `*` in the query; show it as typed.
    u.to_string().replace("%2A%2A%2A", "***")
}

fn redact_fallback(url: &str) -> String {
    let Some(scheme_end) = url.find("://").map(|i| i + 3) else {
        return url.to_string();
    };
    let Some(at) = url.rfind('@').filter(|&at| at >= scheme_end) else {
        return url.to_string();
    };
    let user = url[scheme_end..at].split(':').next().unwrap_or("");
    format!("{}{user}:***{}", &url[..scheme_end], &url[at..])
}

/// Serde helper: serialise an optional URL redacted.
pub fn serialize_opt_url<S: serde::Serializer>(
    url: &Option<String>,
    s: S,
) -> Result<S::Ok, S::Error> {
    match url {
        Some(u) => s.serialize_some(&redact_url(u)),
        None => s.serialize_none(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_are_starred() {
        assert_eq!(
            redact_url("redis://:secret@10.0.0.1:6379/0"),
            "redis://:***@10.0.0.1:6379/0"
        );
        assert_eq!(
            redact_url("rediss://alice:s3cr%40t@host:7000"),
            "rediss://alice:***@host:7000"
        );
        assert_eq!(
            redact_url("redis://127.0.0.1:6379/"),
            "redis://127.0.0.1:6379/"
        );
        assert_eq!(redact_url("redis://alice@host/"), "redis://alice@host/");
        let unix = redact_url("redis+unix:///tmp/r.sock?db=1&pass=secret");
        assert!(
            !unix.contains("secret") && unix.contains("pass=***"),
            "{unix}"
        );
        assert_eq!(redact_url("not a url:pw@x"), "not a url:pw@x");
        assert_eq!(redact_url("weird://u:p w@h"), "weird://u:***@h");
    }
}
