//! The renderers against nginx's output, byte for byte.

use super::*;

fn entry(name: &str, dir: bool, mtime: i64, size: u64) -> Entry {
    Entry {
        name: name.as_bytes().to_vec(),
        dir,
        file: !dir,
        mtime,
        size,
    }
}

#[test]
fn civil_dates() {
    // 1986-12-31 10:00:00 UTC, a Wednesday (nginx's own sample date).
    assert_eq!(civil(536_407_200), (1986, 12, 31, 10, 0, 0, 3));
    assert_eq!(civil(0), (1970, 1, 1, 0, 0, 0, 4));
    // 2024-02-29 23:59:59, a Thursday.
    assert_eq!(civil(1_709_251_199), (2024, 2, 29, 23, 59, 59, 4));
    assert_eq!(civil(-1), (1969, 12, 31, 23, 59, 59, 3));
}

#[test]
fn html_lines_as_nginx() {
    let e = [
        entry("sub", true, 536_407_200, 4096),
        entry("a b&<\"x\">", false, 536_407_200, 42),
    ];
    let out = String::from_utf8(html("/d&<x>/", &e, false, 0, true)).unwrap();
    let want = "<html>\r\n<head><title>Index of /d&amp;&lt;x&gt;/</title></head>\r\n<body>\r\n\
        <h1>Index of /d&amp;&lt;x&gt;/</h1><hr><pre><a href=\"../\">../</a>\r\n\
        <a href=\"sub/\">sub/</a>                                               31-Dec-1986 10:00                   -\r\n\
        <a href=\"a%20b%26%3C%22x%22%3E\">a b&amp;&lt;&quot;x&quot;&gt;</a>                                          31-Dec-1986 10:00                  42\r\n\
        </pre><hr></body>\r\n</html>\r\n";
    assert_eq!(out, want);
}

#[test]
fn html_long_names_are_cut() {
    let long = "x".repeat(60);
    let out = String::from_utf8(html("/", &[entry(&long, false, 0, 1)], false, 0, true)).unwrap();
    assert!(out.contains(&format!(">{}..&gt;</a> 01-Jan-1970", "x".repeat(47))));
    // Exactly 50: kept whole, no padding.
    let fifty = "y".repeat(50);
    let out = String::from_utf8(html("/", &[entry(&fifty, false, 0, 1)], false, 0, true)).unwrap();
    assert!(out.contains(&format!(">{fifty}</a> 01-Jan-1970")));
    // UTF-8 counts characters only with `charset utf-8`.
    let name = "ф".repeat(45);
    let utf = String::from_utf8(html("/", &[entry(&name, false, 0, 1)], true, 0, true)).unwrap();
    assert!(utf.contains(&format!(">{name}</a>{}", " ".repeat(5))));
    let bytes = html("/", &[entry(&name, false, 0, 1)], false, 0, true);
    let cut = [&"ф".as_bytes().repeat(23)[..], b"\xd1..&gt;</a>"].concat();
    assert!(bytes.windows(cut.len()).any(|w| w == cut.as_slice()));
}

#[test]
fn sizes_rounded() {
    assert_eq!(rounded_size(0), "      0");
    assert_eq!(rounded_size(9999), "   9999");
    assert_eq!(rounded_size(10_000), "    10K");
    assert_eq!(rounded_size(10_240 + 511), "    10K");
    assert_eq!(rounded_size(10_240 + 512), "    11K");
    assert_eq!(rounded_size(3 << 20), "     3M");
    assert_eq!(rounded_size((5 << 30) + (1 << 29)), "     6G");
}

#[test]
fn json_and_jsonp() {
    let e = [
        entry("d", true, 536_407_200, 0),
        entry("q\"\\\n\x01", false, 536_407_200, 7),
    ];
    let want = "[\r\n{ \"name\":\"d\", \"type\":\"directory\", \"mtime\":\"Wed, 31 Dec 1986 10:00:00 GMT\" },\
        \r\n{ \"name\":\"q\\\"\\\\\\n\\u0001\", \"type\":\"file\", \"mtime\":\"Wed, 31 Dec 1986 10:00:00 GMT\", \"size\":7 }\r\n]";
    assert_eq!(String::from_utf8(json(&e, None)).unwrap(), want);
    assert_eq!(
        String::from_utf8(json(&[], Some("cb.x_1"))).unwrap(),
        "/* callback */\r\ncb.x_1([\r\n]);"
    );
    assert_eq!(jsonp_callback(Some("a=1&CallBack=f.g")), Some("f.g"));
    assert_eq!(jsonp_callback(Some("callback=")), Some(""));
    assert_eq!(jsonp_callback(None), Some(""));
    assert_eq!(jsonp_callback(Some("callback=alert(1)")), None);
    assert_eq!(
        jsonp_callback(Some(&format!("callback={}", "a".repeat(129)))),
        None
    );
}

#[test]
fn xml_escapes() {
    let mut other = entry("link", false, 0, 3);
    other.file = false;
    let e = [
        entry("<d>", true, 536_407_200, 0),
        entry("a&\"b", false, 0, 5),
        other,
    ];
    let want = "<?xml version=\"1.0\"?>\r\n<list>\r\n\
        <directory mtime=\"1986-12-31T10:00:00Z\">&lt;d&gt;</directory>\r\n\
        <file mtime=\"1970-01-01T00:00:00Z\" size=\"5\">a&amp;&quot;b</file>\r\n\
        <other mtime=\"1970-01-01T00:00:00Z\">link</other>\r\n</list>\r\n";
    assert_eq!(String::from_utf8(xml(&e)).unwrap(), want);
}

#[test]
fn localtime_offset_moves_html_dates_only() {
    let e = [entry("f", false, 536_407_200, 1)];
    let out = String::from_utf8(html("/", &e, false, 3600, true)).unwrap();
    assert!(out.contains(" 31-Dec-1986 11:00 "), "{out}");
    // XML and JSON stay UTC, as nginx.
    assert!(String::from_utf8(xml(&e)).unwrap().contains("T10:00:00Z"));
}
