//! Settings that protect a public-facing server from abuse: DNS Cookies (RFC 7873, RFC 9018):
//! their flags, their TOML table (`[cookies]`), and their resolution into the data plane's
//! [`CookieSecrets`].
//!
//! | TOML key | flag | default | on reload |
//! |---|---|---|---|
//! | `cookies.enabled` | `--cookies` | true | restart |
//! | `cookies.secret` | `--cookie-secret`, `SKYLINE_COOKIE_SECRET` | random, made at start | applied |
//! | `cookies.secret_previous` | `--cookie-secret-previous`, `SKYLINE_COOKIE_SECRET_PREVIOUS` | none | applied |

use crate::cli::parse_go_bool;
use clap::Args;
use serde::Deserialize;
use skyline_dataplane::cookie::{CookieSecrets, Secret};

/// Why a protection setting is unusable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ProtectionError {
    /// A cookie secret that is not 32 hexadecimal digits.
    #[error("{setting}: a cookie secret is 32 hexadecimal digits (16 bytes)")]
    Secret {
        /// The setting.
        setting: &'static str,
    },
    /// A previous secret without a current one: the server would make cookies with a random
    /// secret, and the one it was meant to make them with would be accepted only as old.
    #[error("cookies.secret_previous needs cookies.secret (--cookie-secret)")]
    PreviousAlone,
    /// The operating system's random number generator failed.
    #[error("making a cookie secret: {0}")]
    Random(#[from] skyline_dataplane::cookie::SecretError),
}

/// The command-line options of DNS Cookies.
#[derive(Debug, Clone, Default, Args)]
pub struct ProtectionArgs {
    /// Answer DNS Cookies (RFC 7873): a COOKIE option is checked and answered with a server
    /// cookie; a wrong server cookie over UDP gets BADCOOKIE [default: true]
    #[arg(
        long,
        value_name = "BOOL",
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = "true",
        value_parser = parse_go_bool
    )]
    pub cookies: Option<bool>,

    /// Secret of the server cookies, 32 hexadecimal digits; set the same on every server of
    /// an anycast address [default: random, made at start]
    #[arg(long, env = "SKYLINE_COOKIE_SECRET", value_name = "HEX", hide_env_values = true)]
    pub cookie_secret: Option<String>,

    /// The secret before the last rotation, still accepted [default: none]
    #[arg(
        long,
        env = "SKYLINE_COOKIE_SECRET_PREVIOUS",
        value_name = "HEX",
        hide_env_values = true
    )]
    pub cookie_secret_previous: Option<String>,
}

/// The `[cookies]` table of the TOML file.
#[derive(Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct CookiesFile {
    /// `--cookies`.
    pub enabled: Option<bool>,
    /// `--cookie-secret`.
    pub secret: Option<String>,
    /// `--cookie-secret-previous`.
    pub secret_previous: Option<String>,
}

/// The cookie settings as resolved: whether cookies are on, and the secrets the operator set.
#[derive(Clone, PartialEq, Eq)]
pub struct CookieSettings {
    /// Cookies are answered.
    pub enabled: bool,
    /// The configured secret; `None` makes a random one at start.
    pub secret: Option<Secret>,
    /// The configured previous secret.
    pub previous: Option<Secret>,
}

impl std::fmt::Debug for CookieSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CookieSettings")
            .field("enabled", &self.enabled)
            .field("secret", &self.secret.is_some())
            .field("previous", &self.previous.is_some())
            .finish()
    }
}

impl CookieSettings {
    /// The secrets the workers start with: the configured ones, or a random current one.
    pub fn secrets(&self) -> Result<Option<CookieSecrets>, ProtectionError> {
        if !self.enabled {
            return Ok(None);
        }
        let secrets = match self.secret {
            Some(current) => CookieSecrets {
                current,
                previous: self.previous,
            },
            None => CookieSecrets::generate()?,
        };
        Ok(Some(secrets))
    }

    /// The secrets after a reload resolved these settings, given those in use: a configured
    /// secret replaces the one in use; without one the random one made at start stays.
    pub fn reloaded(&self, running: &CookieSecrets) -> CookieSecrets {
        match self.secret {
            Some(current) => CookieSecrets {
                current,
                previous: self.previous,
            },
            None => running.clone(),
        }
    }
}

/// Resolves the cookie settings: flags over the `[cookies]` table over the defaults.
pub fn cookie_settings(args: &ProtectionArgs, file: Option<&CookiesFile>) -> Result<CookieSettings, ProtectionError> {
    let empty = CookiesFile::default();
    let file = file.unwrap_or(&empty);
    let secret = |flag: &Option<String>, key: &Option<String>, setting| {
        flag.as_ref()
            .or(key.as_ref())
            .map(|text| CookieSecrets::parse_secret(text).map_err(|_| ProtectionError::Secret { setting }))
            .transpose()
    };
    let current = secret(&args.cookie_secret, &file.secret, "cookies.secret")?;
    let previous = secret(
        &args.cookie_secret_previous,
        &file.secret_previous,
        "cookies.secret_previous",
    )?;
    if previous.is_some() && current.is_none() {
        return Err(ProtectionError::PreviousAlone);
    }
    Ok(CookieSettings {
        enabled: args.cookies.or(file.enabled).unwrap_or(true),
        secret: current,
        previous,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: &str = "e5e973e5a6b2a43f48e7dc849e37bfcf";
    const B: &str = "445536bcd2513298075a5d379663c962";

    #[test]
    fn flags_win_over_the_file_and_cookies_are_on_by_default() {
        let none = cookie_settings(&ProtectionArgs::default(), None).unwrap();
        assert!(none.enabled && none.secret.is_none());
        assert!(none.secrets().unwrap().is_some(), "a random secret is made");
        let file = CookiesFile {
            enabled: Some(false),
            secret: Some(A.into()),
            secret_previous: Some(B.into()),
        };
        let from_file = cookie_settings(&ProtectionArgs::default(), Some(&file)).unwrap();
        assert!(!from_file.enabled);
        assert_eq!(from_file.secret, Some(CookieSecrets::parse_secret(A).unwrap()));
        let args = ProtectionArgs {
            cookies: Some(true),
            cookie_secret: Some(B.into()),
            cookie_secret_previous: None,
        };
        let both = cookie_settings(&args, Some(&file)).unwrap();
        assert!(both.enabled);
        assert_eq!(both.secret, Some(CookieSecrets::parse_secret(B).unwrap()));
        assert_eq!(both.previous, Some(CookieSecrets::parse_secret(B).unwrap()));
    }

    #[test]
    fn bad_secrets_are_named() {
        let args = ProtectionArgs {
            cookie_secret: Some("abc".into()),
            ..ProtectionArgs::default()
        };
        assert_eq!(
            cookie_settings(&args, None),
            Err(ProtectionError::Secret {
                setting: "cookies.secret"
            })
        );
        let args = ProtectionArgs {
            cookie_secret_previous: Some(A.into()),
            ..ProtectionArgs::default()
        };
        assert_eq!(cookie_settings(&args, None), Err(ProtectionError::PreviousAlone));
    }

    #[test]
    fn a_reload_keeps_the_random_secret_unless_one_is_configured() {
        let running = CookieSecrets::generate().unwrap();
        let unset = cookie_settings(&ProtectionArgs::default(), None).unwrap();
        assert_eq!(unset.reloaded(&running), running);
        let file = CookiesFile {
            secret: Some(B.into()),
            secret_previous: Some(A.into()),
            ..CookiesFile::default()
        };
        let set = cookie_settings(&ProtectionArgs::default(), Some(&file)).unwrap();
        let rotated = set.reloaded(&running);
        assert_eq!(rotated.current, CookieSecrets::parse_secret(B).unwrap());
        assert_eq!(rotated.previous, Some(CookieSecrets::parse_secret(A).unwrap()));
    }
}
