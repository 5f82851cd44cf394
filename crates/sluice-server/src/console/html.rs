//! HTML building: escaping, the page frame (navigation, who is signed in, notices), and
//! the small pieces every page uses. Pages are built as strings; every value that comes
//! from the cluster or the request goes through [`esc`].

use std::fmt::Write;

use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};

use super::form::encode;

/// Escape text for an HTML element or a quoted attribute.
pub fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// What the frame shows around a page's body.
pub struct Frame<'a> {
    /// The signed-in principal (None: no sign-in on this cluster).
    pub principal: Option<&'a str>,
    pub csrf: &'a str,
    pub read_only: bool,
}

pub const NAV: [(&str, &str); 6] = [
    ("/", "Overview"),
    ("/topics", "Topics"),
    ("/groups", "Consumer groups"),
    ("/schemas", "Schemas"),
    ("/security", "Security"),
    ("/brokers", "Brokers"),
];

/// A whole page: `section` is the navigation entry it belongs to.
pub fn page(frame: &Frame, section: &str, title: &str, body: &str) -> Response {
    page_with_status(StatusCode::OK, frame, section, title, body)
}

pub fn page_with_status(
    status: StatusCode,
    frame: &Frame,
    section: &str,
    title: &str,
    body: &str,
) -> Response {
    let mut nav = String::new();
    for (href, label) in NAV {
        let current = if href == section {
            " aria-current=\"page\""
        } else {
            ""
        };
        let _ = write!(nav, "<a href=\"{href}\"{current}>{label}</a>");
    }
    let mut who = String::new();
    if frame.read_only {
        who.push_str(
            "<span class=\"badge\" title=\"admin.http.console.read.only=true\">read-only</span>",
        );
    }
    if let Some(p) = frame.principal {
        let _ = write!(
            who,
            "<span class=\"principal\">{}</span><form method=\"post\" action=\"/logout\">{}<button type=\"submit\" class=\"link\">Sign out</button></form>",
            esc(p),
            csrf_field(frame.csrf)
        );
    }
    let html = format!(
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
<title>{title} · Sluice</title><link rel=\"stylesheet\" href=\"/console.css\"></head>\
<body><a class=\"skip\" href=\"#main\">Skip to content</a>\
<header><a class=\"brand\" href=\"/\">Sluice</a><nav aria-label=\"Main\">{nav}</nav>\
<div class=\"who\">{who}</div></header>\
<main id=\"main\" tabindex=\"-1\"><h1>{title}</h1>{body}</main></body></html>\n",
        title = esc(title),
    );
    html_response(status, html)
}

/// A page outside the frame (sign-in, a console that cannot work).
pub fn bare_page(status: StatusCode, title: &str, body: &str) -> Response {
    let html = format!(
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
<title>{title} · Sluice</title><link rel=\"stylesheet\" href=\"/console.css\"></head>\
<body class=\"bare\"><main id=\"main\"><p class=\"brand\">Sluice</p><h1>{title}</h1>{body}</main></body></html>\n",
        title = esc(title)
    );
    html_response(status, html)
}

fn html_response(status: StatusCode, html: String) -> Response {
    (
        status,
        [
            (header::CONTENT_TYPE, "text/html; charset=utf-8"),
            (header::CACHE_CONTROL, "no-store"),
            (header::X_FRAME_OPTIONS, "DENY"),
            (
                header::CONTENT_SECURITY_POLICY,
                "default-src 'self'; frame-ancestors 'none'; form-action 'self'",
            ),
        ],
        html,
    )
        .into_response()
}

pub fn csrf_field(token: &str) -> String {
    format!(
        "<input type=\"hidden\" name=\"csrf\" value=\"{}\">",
        esc(token)
    )
}

/// A message above a page: what the last action did (`msg`) or why it failed (`err`).
pub fn notice(msg: &str, err: &str) -> String {
    let mut out = String::new();
    if !msg.is_empty() {
        let _ = write!(out, "<p class=\"ok\" role=\"status\">{}</p>", esc(msg));
    }
    if !err.is_empty() {
        let _ = write!(out, "<p class=\"error\" role=\"alert\">{}</p>", esc(err));
    }
    out
}

/// An error box for part of a page that could not be loaded.
pub fn error_box(what: &str, reason: &str) -> String {
    format!(
        "<p class=\"error\" role=\"alert\">{}: {}</p>",
        esc(what),
        esc(reason)
    )
}

/// Where to go after an action: back to `path` with a notice.
pub fn redirect_with(path: &str, key: &str, text: &str) -> Response {
    let sep = if path.contains('?') { '&' } else { '?' };
    redirect(&format!("{path}{sep}{key}={}", encode(text)))
}

pub fn redirect(location: &str) -> Response {
    (
        StatusCode::SEE_OTHER,
        [(header::LOCATION, location.to_string())],
    )
        .into_response()
}

/// Bytes as people read them.
pub fn bytes(n: i64) -> String {
    if n < 0 {
        return "–".into();
    }
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = n as f64;
    let mut unit = 0;
    while v >= 1024.0 && unit + 1 < UNITS.len() {
        v /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{n} B")
    } else {
        format!("{v:.1} {}", UNITS[unit])
    }
}

/// A count with thousands separators.
pub fn count(n: i64) -> String {
    let s = n.unsigned_abs().to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    if n < 0 {
        format!("-{out}")
    } else {
        out
    }
}

/// A timestamp in milliseconds as UTC `YYYY-MM-DD HH:MM:SS.mmm`.
pub fn time_ms(ms: i64) -> String {
    if ms < 0 {
        return "–".into();
    }
    let secs = ms.div_euclid(1000);
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02}.{:03}",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60,
        ms.rem_euclid(1000)
    )
}

/// Parse `YYYY-MM-DDTHH:MM[:SS[.mmm]]` (UTC; what a datetime-local field sends) or plain
/// milliseconds since the epoch.
pub fn parse_time_ms(s: &str) -> Option<i64> {
    let s = s.trim();
    if let Ok(ms) = s.parse::<i64>() {
        return Some(ms);
    }
    let (date, time) = s.split_once(['T', ' '])?;
    let mut d = date.splitn(3, '-').map(|p| p.parse::<i64>().ok());
    let (y, mo, da) = (d.next()??, d.next()??, d.next()??);
    let (hms, frac) = time.split_once('.').unwrap_or((time, "0"));
    let mut t = hms.splitn(3, ':').map(|p| p.parse::<i64>().ok());
    let (h, mi) = (t.next()??, t.next()??);
    let sec = t.next().flatten().unwrap_or(0);
    let ms: i64 = format!("{frac:0<3}").get(..3)?.parse().ok()?;
    if !(1..=12).contains(&mo) || !(1..=31).contains(&da) || h > 23 || mi > 59 || sec > 60 {
        return None;
    }
    Some(((days_from_civil(y, mo, da) * 86_400 + h * 3600 + mi * 60 + sec) * 1000) + ms)
}

// Howard Hinnant's civil-calendar algorithms (proleptic Gregorian, days since 1970-01-01).
fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let mp = if m > 2 { m - 3 } else { m + 9 };
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// Links to the pages around `page` (1-based) of `total` rows, `per_page` each; `base` is
/// the page's URL with its other parameters (ending in `?` or `&`).
pub fn pager(base: &str, page: usize, per_page: usize, total: usize) -> String {
    let pages = total.div_ceil(per_page).max(1);
    if pages == 1 {
        return String::new();
    }
    let mut out = String::from("<nav class=\"pager\" aria-label=\"Pages\">");
    if page > 1 {
        let _ = write!(
            out,
            "<a href=\"{base}page={}\" rel=\"prev\">← Previous</a>",
            page - 1
        );
    }
    let _ = write!(out, "<span>Page {page} of {pages}</span>");
    if page < pages {
        let _ = write!(
            out,
            "<a href=\"{base}page={}\" rel=\"next\">Next →</a>",
            page + 1
        );
    }
    out.push_str("</nav>");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_is_escaped_for_elements_and_attributes() {
        assert_eq!(
            esc("<script>\"x\" & 'y'</script>"),
            "&lt;script&gt;&quot;x&quot; &amp; &#39;y&#39;&lt;/script&gt;"
        );
    }

    #[test]
    fn times_round_trip_through_the_calendar() {
        assert_eq!(time_ms(0), "1970-01-01 00:00:00.000");
        assert_eq!(time_ms(1_764_806_400_123), "2025-12-04 00:00:00.123");
        assert_eq!(parse_time_ms("2025-12-04T00:00"), Some(1_764_806_400_000));
        assert_eq!(
            parse_time_ms("2025-12-04 00:00:00.123"),
            Some(1_764_806_400_123)
        );
        assert_eq!(
            parse_time_ms("2024-02-29T23:59:59"),
            Some(1_709_251_199_000)
        );
        assert_eq!(parse_time_ms("1700000000000"), Some(1_700_000_000_000));
        assert_eq!(parse_time_ms("2025-13-01T00:00"), None);
        assert_eq!(parse_time_ms("yesterday"), None);
        for ms in [0, 951_782_400_000, 4_102_444_800_999] {
            assert_eq!(parse_time_ms(&time_ms(ms)), Some(ms));
        }
    }

    #[test]
    fn numbers_read_as_people_read_them() {
        assert_eq!(bytes(512), "512 B");
        assert_eq!(bytes(1536), "1.5 KiB");
        assert_eq!(count(1_234_567), "1,234,567");
        assert_eq!(count(-1000), "-1,000");
    }
}
