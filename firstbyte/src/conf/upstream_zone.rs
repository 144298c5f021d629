//! `zone NAME [SIZE]` inside `upstream {}` (nginx's ngx_http_upstream_zone_module).
//!
//! nginx keeps a group's configuration and run-time state (failures, connection counts) in
//! shared memory so that its worker processes share them. firstbyte is one process: every
//! group's state is shared by all its connections already, so the directive changes nothing
//! at run time. It is read with nginx's checks (a name, a size of at least 8 pages, one size
//! per name, a name no other kind of zone uses, a size given somewhere for each name), so a
//! configuration nginx refuses is refused here too.

use std::collections::HashMap;

use super::args::R;
use super::cx::Cx;
use super::error::ConfError;
use super::model::Pos;
use super::parse::Directive;

/// nginx's smallest upstream zone: 8 pages of 4 KiB.
const MIN_SIZE: u64 = 8 * 4096;

/// Upstream zones by name: the size (0 until one `zone` gives it) and the first use.
pub(crate) type UpstreamZones = HashMap<String, (u64, Pos)>;

/// `zone NAME [SIZE]` in an `upstream` block.
pub(crate) fn zone(cx: &mut Cx, c: &Directive) -> R {
    if !(1..=2).contains(&c.args.len()) {
        return Err(ConfError::ArgCount {
            name: c.name.clone(),
            pos: c.pos.clone(),
        });
    }
    let name = c.args[0].as_str();
    if name.is_empty() {
        return Err(ConfError::other(
            format!("invalid zone name \"{name}\""),
            &c.pos,
        ));
    }
    let size = match c.args.get(1) {
        Some(s) => {
            let n = super::units::size(s)
                .ok_or_else(|| ConfError::other(format!("invalid zone size \"{s}\""), &c.pos))?;
            if n < MIN_SIZE {
                return Err(ConfError::other(
                    format!("zone \"{name}\" is too small"),
                    &c.pos,
                ));
            }
            n
        }
        None => 0,
    };
    if cx.zones.other_kind(name) {
        return Err(ConfError::other(
            format!("the shared memory zone \"{name}\" is already declared for a different use"),
            &c.pos,
        ));
    }
    let entry = cx
        .zones
        .upstream
        .entry(name.to_string())
        .or_insert_with(|| (0, c.pos.clone()));
    if entry.0 == 0 {
        entry.0 = size;
    }
    if size != 0 && size != entry.0 {
        return Err(ConfError::other(
            format!(
                "the size {size} of shared memory zone \"{name}\" conflicts with already declared size {}",
                entry.0
            ),
            &c.pos,
        ));
    }
    Ok(())
}

/// Every upstream zone got a size from one of its `zone` lines (nginx: `zero size shared
/// memory zone "NAME"`, checked once the whole file is read).
pub(crate) fn check_sizes(cx: &Cx) -> R {
    let mut unsized_zones: Vec<(&String, &Pos)> = cx
        .zones
        .upstream
        .iter()
        .filter(|(_, (size, _))| *size == 0)
        .map(|(n, (_, pos))| (n, pos))
        .collect();
    unsized_zones.sort_by_key(|(_, pos)| (pos.file.clone(), pos.line));
    match unsized_zones.first() {
        Some((name, pos)) => Err(ConfError::other(
            format!("zero size shared memory zone \"{name}\""),
            pos,
        )),
        None => Ok(()),
    }
}
