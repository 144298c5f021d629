//! The acceptance test of the config language: Debian's stock nginx configuration, unchanged,
//! serves its default site. It listens on port 80 and writes `/run/nginx.pid`, so it runs in a
//! private network and mount namespace (`unshare`), where port 80 and `/run` are its own.

mod support;

use std::process::Command;

use support::*;

#[test]
fn debian_default_site_serves() {
    assert!(
        std::path::Path::new("/etc/nginx/sites-enabled/default").exists(),
        "Debian's nginx package is required (scripts/test installs it)"
    );
    let script = format!(
        r#"
set -e
ip link set lo up
mount -t tmpfs tmpfs /run
{bin} -c /etc/nginx/nginx.conf 2>/run/fb.err &
pid=$!
i=0
until curl -s -o /dev/null http://127.0.0.1/; do
  i=$((i+1)); [ $i -lt 200 ] || {{ cat /run/fb.err; kill $pid; exit 3; }}
  sleep 0.05
done
curl -s -D /run/h http://127.0.0.1/ > /run/body
curl -s -g -o /dev/null -w '%{{http_code}}\n' 'http://[::1]/' > /run/v6
curl -s -o /dev/null -w '%{{http_code}}\n' http://127.0.0.1/nope > /run/nope
cat /run/h; echo ----; cat /run/body; echo ----; cat /run/v6; cat /run/nope; echo ----
cat /run/fb.err
kill -QUIT $pid; wait $pid || true
"#,
        bin = bin().display()
    );
    let out = Command::new("unshare")
        .args(["--net", "--mount", "--fork", "sh", "-c", &script])
        .output()
        .expect("unshare (util-linux)");
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{text}");
    let parts: Vec<&str> = text.split("----\n").collect();
    assert!(parts[0].starts_with("HTTP/1.1 200"), "{text}");
    assert!(parts[0].contains("Server: firstbyte"), "{text}");
    assert!(parts[1].contains("Welcome to nginx!"), "{text}");
    let codes: Vec<&str> = parts[2].lines().collect();
    assert_eq!(codes, ["200", "404"], "{text}");
    assert!(
        parts[3].contains("[warn]"),
        "warnings printed at start: {text}"
    );
}
