//! The Corefile front end: a CoreDNS configuration read (`parse`, with `lex` below it) and
//! turned into skyline's own settings (`translate`), the same [`FileConfig`] a `--config` file
//! gives. docs/corefile.md lists the plugins and options taken and where skyline differs.

mod lex;
mod parse;
mod translate;

use crate::settings::FileConfig;
pub use parse::ParseError;
use std::path::Path;
pub use translate::CorefileError;

/// Why a Corefile cannot run.
#[derive(Debug, thiserror::Error)]
pub enum Problem {
    /// It cannot be read, or is not shaped as a Corefile.
    #[error(transparent)]
    Parse(#[from] ParseError),
    /// A plugin or option skyline does not run, or a value it cannot take.
    #[error(transparent)]
    Plugin(#[from] CorefileError),
}

/// Reads the Corefile at `path` (and what it imports) and translates it, the environment
/// filling its `{$NAME}` placeholders; the notes are what runs differently from CoreDNS.
pub fn load(path: &Path) -> Result<(FileConfig, Vec<String>), Vec<Problem>> {
    let env = |name: &str| std::env::var(name).ok();
    let blocks = parse::read(path, &env).map_err(|e| vec![Problem::from(e)])?;
    let translated =
        translate::translate(&blocks).map_err(|errors| errors.into_iter().map(Problem::from).collect::<Vec<_>>())?;
    Ok((translated.file, translated.notes))
}
