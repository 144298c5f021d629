//! The configuration language: nginx's syntax, nginx's directive names.
//!
//! Text flows `parse` (tokens → a tree of directives with file and line, `include` expanded)
//! → `table` (each directive's contexts and arguments checked) → `build` (values merged
//! http → server → location) → [`model::Config`].

pub mod model;
pub mod vars;
