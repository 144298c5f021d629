//! `disable_symlinks` attacked through the real binary: a symlink to a file outside the root,
//! or a symlinked directory on the way, may not steer `try_files` or `if (-f|-d|-e ...)`, as
//! nginx applies the check there too; `from=$document_root` leaves a root that is itself a
//! symlink usable while a symlink below it is still refused (and a path outside the prefix,
//! or a prefix ending inside a component, is checked whole); `open_file_cache` never answers
//! one `from=` with what another checked; `if_not_owner` against links of another owner
//! (root starting the server with `user nobody nogroup`); a file named with a trailing `/`
//! is a 404; the directive's bad forms are nginx's `[emerg]`s. Each refusal has a twin
//! location with `disable_symlinks off` that does follow the same link, so the refusal is
//! the policy's and not a broken fixture's.

mod support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::unix::fs::{chown, lchown, symlink, PermissionsExt};
use std::path::Path;
use std::time::Duration;

use support::*;

/// One HTTP/1.0 request over a fresh connection: (status, body).
fn get(port: u16, uri: &str) -> (u16, String) {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(s, "GET {uri} HTTP/1.0\r\nHost: t\r\n\r\n").unwrap();
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).unwrap();
    let (code, _, body) = parse_response(&raw);
    (code, String::from_utf8_lossy(&body).into_owned())
}

fn write(p: &Path, data: &str) {
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, data).unwrap();
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o644)).unwrap();
}

/// Makes every directory under `d` searchable and readable by the serving user (`nobody`
/// when the tests run as root), whatever the umask; links are left alone.
fn open_up(d: &Path) {
    std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o755)).unwrap();
    for e in std::fs::read_dir(d).unwrap() {
        let e = e.unwrap();
        if e.file_type().unwrap().is_dir() {
            open_up(&e.path());
        }
    }
}

fn mkdir(p: &Path) {
    std::fs::create_dir_all(p).unwrap();
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o755)).unwrap();
}

const CONF: &str = r#"
pid off;
error_log {dir}/error.log info;
events {}
http {
    access_log off;
    types { text/plain txt; text/html html; }
    server {
        listen 127.0.0.1:{port0};
        root {dir}/html;

        location /try/ { disable_symlinks on; try_files $uri $uri.html =404; }
        location /tryoff/ { alias {dir}/html/try/; try_files $uri $uri.html =404; }

        location /if/ {
            disable_symlinks on;
            if (-d $request_filename) { return 200 "dir"; }
            if (-f $request_filename) { return 200 "file"; }
            if (-e $request_filename) { return 200 "exists"; }
            return 200 "none";
        }
        location /ifoff/ {
            alias {dir}/html/if/;
            if (-d $request_filename) { return 200 "dir"; }
            if (-f $request_filename) { return 200 "file"; }
            if (-e $request_filename) { return 200 "exists"; }
            return 200 "none";
        }

        location /mid/ { disable_symlinks on; }
        location /midtry/ { disable_symlinks on; alias {dir}/html/mid/; try_files $uri /fallback.txt; }
        location /midoff/ { alias {dir}/html/mid/; }

        location /from/ { root {dir}/rootlink; disable_symlinks on from=$document_root; }
        location /fromtry/ {
            root {dir}/rootlink;
            disable_symlinks on from=$document_root;
            try_files $uri /fallback.txt;
        }
        location /fromif/ {
            root {dir}/rootlink;
            disable_symlinks on from=$document_root;
            if (-f $request_filename) { return 200 "file"; }
            return 200 "none";
        }
        location /nofrom/ { root {dir}/rootlink; disable_symlinks on; }
        location /elsewhere/ { root {dir}/rootlink; disable_symlinks on from={dir}/html; }
        location /partial/ { root {dir}/rootlink; disable_symlinks on from={dir}/root; }
        location /slash/ { root {dir}/rootlink; disable_symlinks on from={dir}/rootlink/; }
        location /fromoff/ { root {dir}/rootlink; }

        location ~ (.+/)tailon$ { disable_symlinks on; alias {dir}/html/$1; }
        location ~ (.+/)tailowner$ { disable_symlinks if_not_owner; alias {dir}/html/$1; }
        location ~ (.+/)tailoff$ { disable_symlinks off; alias {dir}/html/$1; }
    }
    server {
        listen 127.0.0.1:{port1};
        root {dir}/html;
        open_file_cache max=16 inactive=60s;
        open_file_cache_valid 60s;
        open_file_cache_errors on;
        location /ca/ { alias {dir}/rootlink/from/; disable_symlinks on from={dir}/rootlink; }
        location /cb/ { alias {dir}/rootlink/from/; disable_symlinks on; }
    }
}
"#;

#[test]
fn symlinks_cannot_steer_try_files_if_or_a_from_prefix() {
    let dir = tempdir("symlinks");
    mkdir(&dir);
    let (html, outside, real) = (dir.join("html"), dir.join("outside"), dir.join("realroot"));
    write(&outside.join("secret.txt"), "SECRET\n");
    write(&html.join("index.html"), "index\n");
    write(&html.join("fallback.txt"), "FALLBACK\n");
    mkdir(&html.join("sub"));
    // A symlink to a file outside the root, beside a local candidate.
    write(&html.join("try/secret.html"), "LOCAL\n");
    symlink(outside.join("secret.txt"), html.join("try/secret")).unwrap();
    symlink(&outside, html.join("try/dirlink")).unwrap();
    write(&html.join("if/real.txt"), "real\n");
    symlink(outside.join("secret.txt"), html.join("if/link")).unwrap();
    symlink(&outside, html.join("if/dirlink")).unwrap();
    mkdir(&html.join("mid"));
    symlink(&outside, html.join("mid/dirlink")).unwrap();
    // The root is a symlink; below it, a file, a link out and a symlinked directory.
    for part in [
        "from",
        "fromtry",
        "fromif",
        "nofrom",
        "elsewhere",
        "partial",
        "slash",
        "fromoff",
    ] {
        write(&real.join(part).join("f.txt"), "in root\n");
        symlink(outside.join("secret.txt"), real.join(part).join("evil")).unwrap();
        symlink(&outside, real.join(part).join("sub")).unwrap();
    }
    symlink(&real, dir.join("rootlink")).unwrap();
    // Trailing `/`: a link to a file, and one to a directory, with the same owner.
    symlink(html.join("index.html"), html.join("link")).unwrap();
    symlink(html.join("sub"), html.join("linkdir")).unwrap();

    open_up(&dir);
    let ports = [free_port(), free_port()];
    let srv = Server::start_in(&dir, &render(CONF, &dir, &ports), ports[0]);
    let (p, cached) = (ports[0], ports[1]);
    let secret = (200, "SECRET\n".to_string());

    // try_files: the link out is no candidate under `on`; the local one answers.
    assert_eq!(get(p, "/try/secret"), (200, "LOCAL\n".into()));
    assert_eq!(get(p, "/tryoff/secret"), secret, "control: off follows");
    assert_eq!(get(p, "/try/dirlink/secret.txt").0, 404);
    assert_eq!(get(p, "/tryoff/dirlink/secret.txt"), secret);

    // if (-f|-d|-e): a refused link, or a path through one, is not there.
    for (uri, on, off) in [
        ("real.txt", "file", "file"),
        ("link", "none", "file"),
        ("dirlink/", "none", "dir"),
        ("dirlink", "none", "dir"),
        ("dirlink/secret.txt", "none", "file"),
        ("missing", "none", "none"),
    ] {
        assert_eq!(get(p, &format!("/if/{uri}")).1, on, "on: {uri}");
        assert_eq!(get(p, &format!("/ifoff/{uri}")).1, off, "off: {uri}");
    }

    // A symlinked directory on the way: not a directory (nginx's ENOTDIR, 404), for static
    // files and try_files alike.
    assert_eq!(get(p, "/mid/dirlink/secret.txt").0, 404);
    assert_eq!(
        get(p, "/midtry/dirlink/secret.txt"),
        (200, "FALLBACK\n".into())
    );
    assert_eq!(get(p, "/midoff/dirlink/secret.txt"), secret);

    // from=$document_root: the root may be a symlink, nothing below it may.
    let in_root = (200, "in root\n".to_string());
    assert_eq!(get(p, "/from/f.txt"), in_root);
    assert_eq!(get(p, "/from/evil").0, 403);
    assert_eq!(get(p, "/from/sub/secret.txt").0, 404);
    assert_eq!(get(p, "/fromoff/evil"), secret, "control: off follows");
    assert_eq!(get(p, "/fromtry/f.txt"), in_root);
    assert_eq!(get(p, "/fromtry/evil"), (200, "FALLBACK\n".into()));
    assert_eq!(
        get(p, "/fromtry/sub/secret.txt"),
        (200, "FALLBACK\n".into())
    );
    assert_eq!(get(p, "/fromif/f.txt").1, "file");
    assert_eq!(get(p, "/fromif/evil").1, "none");
    // Without from=, or with a prefix the path does not start with, or one that ends inside
    // a component (`.../root` of `.../rootlink/...`), the whole path is checked.
    assert_eq!(get(p, "/nofrom/f.txt").0, 404);
    assert_eq!(get(p, "/elsewhere/f.txt").0, 404);
    assert_eq!(get(p, "/partial/f.txt").0, 404);
    // A prefix written with its trailing `/` counts up to that `/`.
    assert_eq!(get(p, "/slash/f.txt"), in_root);
    assert_eq!(get(p, "/slash/evil").0, 403);

    // A file named with a trailing `/` is not there, under every policy; a directory is.
    assert_eq!(get(p, "/link/tailon").0, 404);
    assert_eq!(get(p, "/link/tailowner").0, 404);
    assert_eq!(get(p, "/link/tailoff").0, 404);
    assert_eq!(get(p, "/linkdir/tailowner").0, 301);
    assert_eq!(get(p, "/linkdir/tailoff").0, 301);
    assert_eq!(get(p, "/linkdir/tailon").0, 404);

    // open_file_cache: what one from= checked is not what another may use.
    for _ in 0..2 {
        assert_eq!(get(cached, "/ca/f.txt"), in_root);
        assert_eq!(get(cached, "/cb/f.txt").0, 404);
    }
    drop(srv);
}

const OWNER_CONF: &str = r#"
user nobody nogroup;
pid off;
error_log {dir}/error.log info;
events {}
http {
    access_log off;
    types { text/plain txt; }
    server {
        listen 127.0.0.1:{port0};
        root {dir}/html;
        location /own/ { disable_symlinks if_not_owner; }
        location /try/ { disable_symlinks if_not_owner; alias {dir}/html/own/; try_files $uri $uri.txt =404; }
        location /if/ {
            disable_symlinks if_not_owner;
            alias {dir}/html/own/;
            if (-f $request_filename) { return 200 "file"; }
            return 200 "none";
        }
        location /off/ { alias {dir}/html/own/; }
    }
}
"#;

#[test]
fn if_not_owner_refuses_links_to_another_owners_files() {
    // SAFETY: geteuid has no preconditions.
    let euid = unsafe { libc::geteuid() };
    assert_eq!(euid, 0, "this test needs root (CI runs as root)");
    const NOBODY: u32 = 65534;
    let dir = tempdir("symlinks-owner");
    mkdir(&dir);
    let (own, outside) = (dir.join("html/own"), dir.join("outside"));
    // root's file and directory, readable by all: only the owner check keeps them out.
    write(&outside.join("secret.txt"), "SECRET\n");
    mkdir(&outside);
    // nobody's files, and nobody's links to them and to root's.
    write(&own.join("target.txt"), "OWN\n");
    write(&own.join("try.txt"), "LOCAL TRY\n");
    write(&own.join("sub/x.txt"), "OWN SUB\n");
    mkdir(&own.join("sub"));
    let links = [
        ("same", own.join("target.txt")),
        ("other", outside.join("secret.txt")),
        ("try", outside.join("secret.txt")),
        ("dirsame", own.join("sub")),
        ("dirother", outside.clone()),
    ];
    for (name, target) in &links {
        symlink(target, own.join(name)).unwrap();
        lchown(own.join(name), Some(NOBODY), Some(NOBODY)).unwrap();
    }
    for p in ["target.txt", "try.txt", "sub/x.txt", "sub", ""] {
        chown(own.join(p), Some(NOBODY), Some(NOBODY)).unwrap();
    }

    open_up(&dir);
    let port = free_port();
    let srv = Server::start_in(&dir, &render(OWNER_CONF, &dir, &[port]), port);
    let secret = (200, "SECRET\n".to_string());

    // Static files: followed to nobody's, refused to root's (a link as the last component
    // or as a directory on the way).
    assert_eq!(get(port, "/own/same"), (200, "OWN\n".into()));
    assert_eq!(get(port, "/own/other").0, 403);
    assert_eq!(get(port, "/own/dirsame/x.txt"), (200, "OWN SUB\n".into()));
    assert_eq!(get(port, "/own/dirother/secret.txt").0, 403);
    assert_eq!(get(port, "/off/other"), secret, "control: off follows");
    assert_eq!(get(port, "/off/dirother/secret.txt"), secret);
    // try_files passes over the link to root's file to the local candidate.
    assert_eq!(get(port, "/try/try"), (200, "LOCAL TRY\n".into()));
    assert_eq!(get(port, "/try/same"), (200, "OWN\n".into()));
    // if (-f): a link to root's file is no file.
    assert_eq!(get(port, "/if/same").1, "file");
    assert_eq!(get(port, "/if/other").1, "none");
    assert_eq!(get(port, "/if/dirother/secret.txt").1, "none");
    drop(srv);
}

#[test]
fn bad_forms_are_nginx_emergs() {
    for (args, msg) in [
        (
            "off from=$document_root",
            "\"from=\" cannot be used with \"off\" parameter",
        ),
        ("on on", "duplicate parameters \"on on\""),
        (
            "from=/srv",
            "\"disable_symlinks\" must have \"off\", \"on\" or \"if_not_owner\" parameter",
        ),
        ("on bogus", "invalid parameter \"bogus\""),
        ("ON", "invalid parameter \"ON\""),
        ("on from=$nosuchvar", "unknown \"nosuchvar\" variable"),
    ] {
        let dir = tempdir("symlinks-emerg");
        let path = dir.join("firstbyte.conf");
        let conf = format!(
            "pid off;\nevents {{}}\nhttp {{\n    access_log off;\n    server {{\n        listen 127.0.0.1:{};\n        disable_symlinks {args};\n    }}\n}}\n",
            free_port()
        );
        std::fs::write(&path, conf).unwrap();
        let out = firstbyte(&["-t", "-c", path.to_str().unwrap()]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args}: {err}");
        let want = format!("[emerg] {msg} in {}:7", path.display());
        assert!(err.contains(&want), "{args}: want {want:?} in {err}");
    }
    // Both orders load.
    for args in ["if_not_owner from=$document_root", "from=$document_root on"] {
        let dir = tempdir("symlinks-ok");
        let path = dir.join("firstbyte.conf");
        let conf = format!(
            "pid off;\nevents {{}}\nhttp {{ access_log off; server {{ listen 127.0.0.1:{}; disable_symlinks {args}; }} }}\n",
            free_port()
        );
        std::fs::write(&path, conf).unwrap();
        let out = firstbyte(&["-t", "-c", path.to_str().unwrap()]);
        assert!(
            out.status.success(),
            "{args}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}
