//! The settings in force written back as the configuration file writes them, for
//! `--check-config`: what it prints can be read as a `--config` file and gives the same
//! settings, so that it answers "what is this server running with" in the form an operator
//! edits.

use crate::file_value::Addrs;
use crate::flag_value::{NO_RESOLV_CONF, STDERR};
use skyline_dataplane::forward::{Policy, Prefix};
use skyline_dataplane::io::XdpMode;
use skyline_dataplane::wire::Name;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

/// A setting's value as a TOML value; `None` for a setting that is not set.
pub trait InForce {
    /// The value, as the configuration file writes it.
    fn in_force(&self) -> Option<toml::Value>;
}

/// The form the configuration file gives a key whose file type differs from its setting's: a
/// memory size is a string there, so a number of bytes is written as one.
pub trait FileForm {
    /// `value` in the file's form.
    fn form(value: toml::Value) -> toml::Value {
        value
    }
}

impl FileForm for String {
    fn form(value: toml::Value) -> toml::Value {
        match value {
            toml::Value::Integer(n) => toml::Value::String(size(n)),
            other => other,
        }
    }
}

impl FileForm for PathBuf {}
impl FileForm for Addrs {}
impl FileForm for Vec<String> {}
/// Negative TTL caps are one table of zone = seconds in the file, not a list of one-entry tables.
impl FileForm for BTreeMap<String, u32> {
    fn form(value: toml::Value) -> toml::Value {
        match value {
            toml::Value::Array(items) => {
                let merged = items
                    .into_iter()
                    .filter_map(|item| match item {
                        toml::Value::Table(table) => Some(table),
                        _ => None,
                    })
                    .flatten()
                    .collect();
                toml::Value::Table(merged)
            }
            other => other,
        }
    }
}

/// A memory size in the largest unit that writes it whole.
fn size(bytes: i64) -> String {
    for (unit, scale) in [("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)] {
        if bytes != 0 && bytes % scale == 0 {
            return format!("{}{unit}", bytes / scale);
        }
    }
    bytes.to_string()
}

impl<T: InForce> InForce for Option<T> {
    fn in_force(&self) -> Option<toml::Value> {
        self.as_ref().and_then(InForce::in_force)
    }
}

impl InForce for bool {
    fn in_force(&self) -> Option<toml::Value> {
        Some(toml::Value::Boolean(*self))
    }
}

/// Unsigned integers, which every TOML integer this server takes fits.
macro_rules! integers {
    ($($ty:ty),*) => {$(
        impl InForce for $ty {
            fn in_force(&self) -> Option<toml::Value> {
                Some(toml::Value::Integer(i64::try_from(*self).unwrap_or(i64::MAX)))
            }
        }
    )*};
}
integers!(u8, u32, u64, usize);

/// Values written as their text.
macro_rules! texts {
    ($($ty:ty),*) => {$(
        impl InForce for $ty {
            fn in_force(&self) -> Option<toml::Value> {
                Some(toml::Value::String(self.to_string()))
            }
        }
    )*};
}
texts!(String, SocketAddr, Name, XdpMode, Prefix, Policy);

/// Paths are written absolute, so that the text means the same files wherever it is saved;
/// the words that name no file (`-`, stderr, for the query log; `none` for resolv.conf) stay
/// as they are.
impl InForce for PathBuf {
    fn in_force(&self) -> Option<toml::Value> {
        Some(toml::Value::String(absolute(self).display().to_string()))
    }
}

/// `path` made absolute, unless it is a word that names no file.
pub fn absolute(path: &std::path::Path) -> PathBuf {
    let word = [STDERR, NO_RESOLV_CONF].iter().any(|w| path.as_os_str() == *w);
    match std::path::absolute(path) {
        Ok(absolute) if !word => absolute,
        _ => path.to_owned(),
    }
}

impl InForce for Duration {
    fn in_force(&self) -> Option<toml::Value> {
        let text = match (self.subsec_millis(), self.as_secs()) {
            (0, secs) if secs != 0 && secs % 3600 == 0 => format!("{}h", secs / 3600),
            (0, secs) if secs != 0 && secs % 60 == 0 => format!("{}m", secs / 60),
            (0, secs) => format!("{secs}s"),
            _ => format!("{}ms", self.as_millis()),
        };
        Some(toml::Value::String(text))
    }
}

impl<T: InForce> InForce for Vec<T> {
    fn in_force(&self) -> Option<toml::Value> {
        Some(toml::Value::Array(self.iter().filter_map(InForce::in_force).collect()))
    }
}

impl InForce for (Name, u32) {
    fn in_force(&self) -> Option<toml::Value> {
        let mut table = toml::Table::new();
        table.insert(self.0.to_string(), self.1.in_force()?);
        Some(toml::Value::Table(table))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_and_sizes_are_written_as_the_file_writes_them() {
        let text = |d: Duration| d.in_force().unwrap().as_str().unwrap().to_owned();
        assert_eq!(text(Duration::from_millis(1500)), "1500ms");
        assert_eq!(text(Duration::from_secs(5)), "5s");
        assert_eq!(text(Duration::from_secs(90 * 60)), "90m");
        assert_eq!(text(Duration::from_secs(24 * 3600)), "24h");
        assert_eq!(text(Duration::ZERO), "0s");
        assert_eq!(String::form(toml::Value::Integer(16 << 20)).as_str(), Some("16MiB"));
        assert_eq!(String::form(toml::Value::Integer(1000)).as_str(), Some("1000"));
        for d in [1500, 5000, 5_400_000, 0] {
            let d = Duration::from_millis(d);
            assert_eq!(crate::flag_value::parse_duration(&text(d)), Ok(d));
        }
    }
}
