//! The generators that turn one declarative list of directives (`directives.rs`) into the
//! pieces each module needs, so a plain directive is written once.
//!
//! A list is a macro that hands its entries to a generator: `loc_directives!(conf_struct!
//! ...)` calls `conf_struct! { ... ; ENTRIES }`. Every generator reads the same entry form:
//!
//! ```text
//! "NAME" field: Type = DEFAULT => (CONTEXTS, MIN_ARGS, MAX_ARGS, "default as nginx writes it", Merge, parser) "doc line";
//! ```
//!
//! - [`conf_struct!`] (model.rs): the model's struct, its hand-written fields then `field: Type`.
//! - [`settings_struct!`] (settings.rs): the level's settings, its hand-written fields then
//!   `field: Option<Type>` (`None` until written), and `inherit_listed`: the `Inherit` ones
//!   take the parent's value when unset (`Own`, `Global`: not inherited).
//! - [`finish_conf!`] (settings.rs, build.rs): the model's struct literal, the hand-written
//!   fields given, each listed field `DEFAULT` when nobody set it.
//! - [`defaults_conf!`] (test fixtures): the same with every listed field at its default.
//! - [`setters!`] and [`spec_rows!`] (table.rs): one handler per entry (`"NAME" directive is
//!   duplicate` on a second one in a block, then the parser) and the table rows; a group kept
//!   in a struct of its own is reached by a path (`proxy.ssl`).
//! - [`defaults_match_docs!`] (table.rs' tests): each entry's documented default, parsed by
//!   its parser, equals `DEFAULT`, so docs/directives.md cannot drift from the code.
//!
//! Names in an entry resolve where the generator expands: types and defaults in model.rs and
//! settings.rs, parsers in the setters' module (`p::` is `args`, `h::` `handlers`, `srv::`
//! `server_handlers`, `px::` `proxy`).

/// The model's struct: the hand-written fields, then one per entry.
macro_rules! conf_struct {
    (
        $(#[$sm:meta])* $sv:vis struct $name:ident {
            $( $(#[$fm:meta])* $fv:vis $f:ident : $ft:ty ),* $(,)?
        }
        ; $( $dname:literal $field:ident : $ty:ty = $default:expr => ($($spec:tt)*) $doc:literal ; )*
    ) => {
        $(#[$sm])* $sv struct $name {
            $( $(#[$fm])* $fv $f: $ft, )*
            $( #[doc = concat!("`", $dname, "`: ", $doc)] pub $field: $ty, )*
        }
    };
}
pub(crate) use conf_struct;

/// A level's settings as written: the hand-written fields, then `Option<Type>` per entry,
/// and `inherit_listed`.
macro_rules! settings_struct {
    (
        $(#[$sm:meta])* $sv:vis struct $name:ident {
            $( $(#[$fm:meta])* $fv:vis $f:ident : $ft:ty ),* $(,)?
        }
        ; $( $dname:literal $field:ident : $ty:ty = $default:expr =>
            ($ctx:expr, $min:expr, $max:expr, $dd:literal, $merge:ident, $parse:expr) $doc:literal ; )*
    ) => {
        $(#[$sm])* $sv struct $name {
            $( $(#[$fm])* $fv $f: $ft, )*
            $( #[doc = concat!("`", $dname, "` as written.")] pub $field: Option<$ty>, )*
        }

        impl $name {
            /// Fills the listed values this level did not set from `p` (those that inherit).
            #[allow(dead_code, unused_variables)]
            pub(crate) fn inherit_listed(&mut self, p: &Self) {
                $( $crate::conf::declare::inherit_one!($merge, self.$field, p.$field); )*
            }
        }
    };
}
pub(crate) use settings_struct;

/// One inheritance line, by merge kind.
macro_rules! inherit_one {
    (Inherit, $mine:expr, $parent:expr) => {
        if $mine.is_none() {
            $mine.clone_from(&$parent);
        }
    };
    ($other:ident, $mine:expr, $parent:expr) => {};
}
pub(crate) use inherit_one;

/// The model's struct literal: `$body` (the hand-written fields, each ending in `,`), then
/// each entry's value from `$src`, or its default.
macro_rules! finish_conf {
    (
        ($src:expr) $name:ident { $($body:tt)* }
        ; $( $dname:literal $field:ident : $ty:ty = $default:expr => ($($spec:tt)*) $doc:literal ; )*
    ) => {
        $name {
            $($body)*
            $( $field: $crate::conf::declare::value_or(&$src.$field, || $default), )*
        }
    };
}
pub(crate) use finish_conf;

/// The model's struct literal with every listed field at its default (test fixtures,
/// `Default` impls): `$body`, the hand-written fields, each ending in `,`.
macro_rules! defaults_conf {
    (
        $name:ident { $($body:tt)* }
        ; $( $dname:literal $field:ident : $ty:ty = $default:expr => ($($spec:tt)*) $doc:literal ; )*
    ) => {
        $name {
            $($body)*
            $( $field: $default, )*
        }
    };
}
pub(crate) use defaults_conf;

/// A test that every entry's default, as the docs show it, reads back (through the entry's
/// own parser) as the value the model gets when nobody sets it; `$skip`: entries whose docs
/// default is prose (`"... (root), off (others)"`) or names what is implied.
#[cfg(test)]
macro_rules! defaults_match_docs {
    (
        $test:ident, [$($skip:literal),*]
        ; $( $dname:literal $field:ident : $ty:ty = $default:expr =>
            ($ctx:expr, $min:expr, $max:expr, $dd:literal, $merge:ident, $parse:expr) $doc:literal ; )*
    ) => {
        #[test]
        fn $test() {
            #[allow(unused_imports)]
            use $crate::conf::{args as p, handlers as h, proxy as px, server_handlers as srv};
            let skip: &[&str] = &[$($skip),*];
            let mut checked = 0;
            $(
                if !$dd.is_empty() && !skip.contains(&$dname) {
                    let args: Vec<&str> = $dd.split(' ').collect();
                    let d = $crate::conf::testutil::directive($dname, &args, 1);
                    let got: $ty = ($parse)(&d, &mut $crate::conf::testutil::cx())
                        .unwrap_or_else(|e| panic!("{}: docs default {:?}: {e}", $dname, $dd));
                    let want: $ty = $default;
                    assert_eq!(got, want, "{}: docs say {:?}", $dname, $dd);
                    checked += 1;
                }
            )*
            assert!(checked > 0);
        }
    };
}
#[cfg(test)]
pub(crate) use defaults_match_docs;

/// A value as written, or the default.
pub(crate) fn value_or<T: Clone>(v: &Option<T>, default: impl FnOnce() -> T) -> T {
    match v {
        Some(v) => v.clone(),
        None => default(),
    }
}

/// A module `$module` of handlers, one per entry, each setting `s.field` of `$settings` (or
/// `s.$sub.field`, for a group of values kept in a struct of its own).
macro_rules! setters {
    (
        $module:ident, $settings:ty
        ; $( $dname:literal $field:ident : $ty:ty = $default:expr =>
            ($ctx:expr, $min:expr, $max:expr, $dd:literal, $merge:ident, $parse:expr) $doc:literal ; )*
    ) => {
        $crate::conf::declare::setters!(@module $module, $settings, s, (s) ; $( $dname $field $parse ; )*);
    };
    (
        $module:ident, $settings:ty, $($sub:ident).+
        ; $( $dname:literal $field:ident : $ty:ty = $default:expr =>
            ($ctx:expr, $min:expr, $max:expr, $dd:literal, $merge:ident, $parse:expr) $doc:literal ; )*
    ) => {
        $crate::conf::declare::setters!(@module $module, $settings, s, (s $(.$sub)+) ; $( $dname $field $parse ; )*);
    };
    (@module $module:ident, $settings:ty, $s:ident, $slot:tt ; $( $dname:literal $field:ident $parse:expr ; )*) => {
        pub(crate) mod $module {
            #[allow(unused_imports)]
            use $crate::conf::{
                args as p, handlers as h, proxy as px, server_handlers as srv,
            };
            use $crate::conf::args::{once, R};
            use $crate::conf::cx::Cx;
            use $crate::conf::parse::Directive;
            $(
                #[doc = concat!("`", $dname, "`.")]
                pub(crate) fn $field($s: &mut $settings, d: &Directive, cx: &mut Cx) -> R {
                    let slot = &mut $slot.$field;
                    once(slot, d)?;
                    *slot = Some(($parse)(d, cx)?);
                    Ok(())
                }
            )*
        }
    };
}
pub(crate) use setters;

/// The table rows of a list, handled by `$module` (made by [`setters!`]) through `$handler`.
macro_rules! spec_rows {
    (
        $static:ident, $handler:ident, $module:ident
        ; $( $dname:literal $field:ident : $ty:ty = $default:expr =>
            ($ctx:expr, $min:expr, $max:expr, $dd:literal, $merge:ident, $parse:expr) $doc:literal ; )*
    ) => {
        pub(crate) static $static: &[Spec] = &[
            $(
                Spec {
                    name: $dname,
                    contexts: $ctx,
                    min_args: $min,
                    max_args: $max,
                    block: false,
                    default: $dd,
                    merge: Merge::$merge,
                    doc: $doc,
                    handler: Handler::$handler($module::$field),
                },
            )*
        ];
    };
}
pub(crate) use spec_rows;
