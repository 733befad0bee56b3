//! Credentials kept out of every message of the remote layer: [`scrub`] is applied to each URL
//! and each reason (ours and `object_store`'s, whose errors quote the request's URL, endpoint and
//! all) before it reaches an [`Error`](crate::Error) or a `Debug` string.

use crate::error::REDACTED;

/// The most bytes of a reason kept: a server's error body quoted in an error can be any size
/// (look 63, L63-3: a 50 MB body made a 50 MB message and a quarter of a GB of copies).
const MAX_REASON: usize = 4096;

/// `text` with every credential it may hold replaced by `<redacted>`: the userinfo of every URL
/// in it (`http://user:password@host` becomes `http://<redacted>@host`), the userinfo of
/// `endpoint` and of every `AWS_*` variable holding a URL wherever it appears (as given or
/// percent-decoded: an error may quote either), the AWS keys of the environment and the
/// credentials in `known` (the options' own); at most [`MAX_REASON`] bytes of it, a longer text
/// cut with its length said.
pub(crate) fn scrub(text: &str, endpoint: Option<&str>, known: &[&str]) -> String {
    let mut secrets: Vec<String> = Vec::new();
    let mut add = |s: &str| {
        // Shorter ones would match ordinary words; the URLs' own userinfo is removed above
        // whatever its length.
        if s.len() >= 4 {
            secrets.push(s.to_string());
        }
    };
    for k in known {
        add(k);
    }
    for k in ["AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_ACCESS_KEY_ID"] {
        if let Ok(v) = std::env::var(k) {
            add(&v);
        }
    }
    let from_env = std::env::vars_os()
        .filter(|(k, _)| k.to_str().is_some_and(|k| k.starts_with("AWS_")))
        .filter_map(|(_, v)| v.into_string().ok());
    for url in endpoint.map(str::to_string).into_iter().chain(from_env) {
        if let Some(info) = userinfo(&url) {
            let decoded = percent_decode(info);
            for form in [info, decoded.as_str()] {
                add(form);
                if let Some((_, password)) = form.split_once(':') {
                    add(password);
                }
            }
        }
    }
    // The longest first, so that a password inside a longer secret does not split it.
    secrets.sort_by_key(|s| std::cmp::Reverse(s.len()));
    // Scrubbed past the cut by the longest secret and a URL's authority, so that nothing the
    // cut keeps is half a credential.
    let longest = secrets.first().map_or(0, String::len);
    let window = char_floor(text, MAX_REASON + longest + 1024);
    let mut out = crate::redact_urls(&text[..window]);
    for s in &secrets {
        out = out.replace(s.as_str(), REDACTED);
    }
    if window < text.len() || out.len() > MAX_REASON {
        // The scrubbed window's last `longest + 1024` bytes may hold the start of a credential
        // the window cut through (unmatched there): never kept, even when replacements
        // shortened the text below the cut.
        let unsure = if window < text.len() { out.len().saturating_sub(longest + 1024) } else { out.len() };
        out.truncate(char_floor(&out, MAX_REASON.min(unsure)));
        out.push_str(&format!(" ... (cut: {} bytes in all)", text.len()));
    }
    out
}

/// The largest char boundary of `text` at or below `at`.
fn char_floor(text: &str, at: usize) -> usize {
    let mut i = at.min(text.len());
    while !text.is_char_boundary(i) {
        i -= 1;
    }
    i
}

/// The userinfo of a URL given as an endpoint: what lies between `://` and the last `@` before
/// the path. An endpoint has no `@` in its path, so a password holding an unescaped `/` is
/// still found whole.
fn userinfo(url: &str) -> Option<&str> {
    let rest = &url[url.find("://")? + 3..];
    let at = rest.rfind('@')?;
    Some(&rest[..at]).filter(|s| !s.is_empty())
}

/// `%XX` escapes decoded (invalid ones kept as they are; bytes that do not form UTF-8 replaced).
fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = |c: u8| (c as char).to_digit(16);
        if b[i] == b'%'
            && let (Some(h), Some(l)) =
                (b.get(i + 1).and_then(|&c| hex(c)), b.get(i + 2).and_then(|&c| hex(c)))
        {
            out.push((h * 16 + l) as u8);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn userinfo_of_every_url_is_removed() {
        let e = "Error performing GET http://user:hunter2@127.0.0.1:9/b/k in 1ms - error sending \
                 request for url (http://user:hunter2@127.0.0.1:9/b/k)";
        let s = scrub(e, None, &[]);
        assert!(!s.contains("hunter2") && !s.contains("user:"), "{s}");
        assert!(s.contains("http://<redacted>@127.0.0.1:9/b/k"), "{s}");
        assert_eq!(
            scrub("s3://bucket/a/b and http://127.0.0.1:9000/x", None, &[]),
            "s3://bucket/a/b and http://127.0.0.1:9000/x"
        );
    }

    #[test]
    fn the_endpoints_password_is_removed_in_every_form() {
        let endpoint = "http://alice:pa/ss%40word@10.0.0.1:9000";
        for text in ["pa/ss%40word", "pa/ss@word", "alice:pa/ss%40word", "key=pa/ss@word;"] {
            let s = scrub(text, Some(endpoint), &[]);
            assert!(!s.contains("pa/ss"), "{text} -> {s}");
        }
        assert_eq!(userinfo("http://a:b@h:1/x"), Some("a:b"));
        assert_eq!(userinfo("http://h:1/x"), None);
        assert_eq!(percent_decode("a%2Fb%zz%4"), "a/b%zz%4");
    }

    /// Look 63: the options' own key id was not removed (a server echoing it, as S3's
    /// `InvalidAccessKeyId` does), and a body of any size became the message.
    #[test]
    fn known_keys_are_removed_and_a_long_reason_is_cut() {
        let s =
            scrub("InvalidAccessKeyId: AKIAEXAMPLEKEY does not exist", None, &["AKIAEXAMPLEKEY", "s3cr3t"]);
        assert_eq!(s, "InvalidAccessKeyId: <redacted> does not exist");
        let body = format!("{}AKIAEXAMPLEKEY{}", "é".repeat(MAX_REASON / 2 - 3), "x".repeat(50 << 20));
        let s = scrub(&body, None, &["AKIAEXAMPLEKEY"]);
        assert!(s.len() < MAX_REASON + 64, "{}", s.len());
        assert!(!s.contains("AKIAEX"), "no half of a key at the cut");
        assert!(s.ends_with(&format!("(cut: {} bytes in all)", body.len())), "{}", &s[s.len() - 60..]);
        assert_eq!(scrub("short", None, &[]), "short");
        // A long key echoed three times: the first two replaced shorten the window below the cut,
        // and the third, cut through by the window's end, must not survive in part.
        let key = "K".repeat(1000);
        let echoed = format!("{key}{key}{}{key}{}", "y".repeat(3500), "z".repeat(10_000));
        let s = scrub(&echoed, None, &[key.as_str()]);
        assert!(!s.contains("KKKK"), "{}", &s[..s.len().min(300)]);
    }
}
