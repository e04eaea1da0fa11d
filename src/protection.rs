//! Settings that protect a public-facing server from abuse: DNS Cookies (RFC 7873, RFC 9018) and
//! response rate limiting: their flags, their TOML tables (`[cookies]`, `[rrl]`), and their
//! resolution into the data plane's [`CookieSecrets`] and [`RrlConfig`].
//!
//! | TOML key | flag | default | on reload |
//! |---|---|---|---|
//! | `rrl.rate` | `--rrl-rate` | 0: off | restart |
//! | `rrl.slip` | `--rrl-slip` | 2 | restart |
//! | `rrl.window` | `--rrl-window` | 15 s | restart |
//! | `rrl.ipv4_prefix`, `rrl.ipv6_prefix` | `--rrl-ipv4-prefix`, `--rrl-ipv6-prefix` | 24, 56 | restart |
//! | `rrl.exempt` | `--rrl-exempt` | none | restart |
//! | `cookies.enabled` | `--cookies` | true | restart |
//! | `cookies.secret` | `--cookie-secret`, `SKYLINE_COOKIE_SECRET` | random, made at start | applied |
//! | `cookies.secret_previous` | `--cookie-secret-previous`, `SKYLINE_COOKIE_SECRET_PREVIOUS` | none | applied |

use crate::cli::parse_go_bool;
use clap::Args;
use serde::Deserialize;
use skyline_dataplane::cookie::{CookieSecrets, Secret};
use skyline_dataplane::forward::Prefix;
use skyline_dataplane::rrl::RrlConfig;

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
    /// A rate-limiting setting out of its range.
    #[error("{setting}: {reason}")]
    Rrl {
        /// The setting.
        setting: &'static str,
        /// What is wrong.
        reason: String,
    },
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

    /// Response rate limiting: UDP responses a second allowed to one client prefix for one
    /// name (NXDOMAIN and errors: one zone); 0 turns it off [default: 0]
    #[arg(long, value_name = "N")]
    pub rrl_rate: Option<u32>,

    /// Of the responses over the rate, every Nth goes out truncated (TC) so that a genuine
    /// client retries over TCP, the rest are dropped; 0 drops all, 1 truncates all [default: 2]
    #[arg(long, value_name = "N")]
    pub rrl_slip: Option<u32>,

    /// Seconds a client over the rate stays limited after it stops: the debt a bucket can
    /// hold, 1 to 3600 [default: 15]
    #[arg(long, value_name = "SECS")]
    pub rrl_window: Option<u32>,

    /// Leading bits of an IPv4 client's address that rate limiting groups by [default: 24]
    #[arg(long, value_name = "BITS")]
    pub rrl_ipv4_prefix: Option<u8>,

    /// Leading bits of an IPv6 client's address that rate limiting groups by [default: 56]
    #[arg(long, value_name = "BITS")]
    pub rrl_ipv6_prefix: Option<u8>,

    /// Comma-separated address prefixes never rate limited [default: none]
    #[arg(long, value_name = "PREFIX,...", value_delimiter = ',')]
    pub rrl_exempt: Option<Vec<Prefix>>,
}

/// The `[rrl]` table of the TOML file.
#[derive(Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct RrlFile {
    /// `--rrl-rate`.
    pub rate: Option<u32>,
    /// `--rrl-slip`.
    pub slip: Option<u32>,
    /// `--rrl-window`, seconds.
    pub window: Option<u32>,
    /// `--rrl-ipv4-prefix`.
    pub ipv4_prefix: Option<u8>,
    /// `--rrl-ipv6-prefix`.
    pub ipv6_prefix: Option<u8>,
    /// `--rrl-exempt`, as a list.
    pub exempt: Option<Vec<String>>,
}

/// Resolves response rate limiting: flags over the `[rrl]` table over the defaults (off).
pub fn rrl_config(args: &ProtectionArgs, file: Option<&RrlFile>) -> Result<RrlConfig, ProtectionError> {
    let empty = RrlFile::default();
    let file = file.unwrap_or(&empty);
    let defaults = RrlConfig::default();
    let out_of_range = |setting, reason: &str| ProtectionError::Rrl {
        setting,
        reason: reason.to_owned(),
    };
    let exempt = match (&args.rrl_exempt, &file.exempt) {
        (Some(prefixes), _) => prefixes.clone(),
        (None, Some(texts)) => texts
            .iter()
            .map(|text| {
                text.parse::<Prefix>().map_err(|e| ProtectionError::Rrl {
                    setting: "rrl.exempt",
                    reason: e.to_string(),
                })
            })
            .collect::<Result<_, _>>()?,
        (None, None) => defaults.exempt.clone(),
    };
    let config = RrlConfig {
        rate: args.rrl_rate.or(file.rate).unwrap_or(defaults.rate),
        slip: args.rrl_slip.or(file.slip).unwrap_or(defaults.slip),
        window: args.rrl_window.or(file.window).unwrap_or(defaults.window),
        ipv4_prefix: args
            .rrl_ipv4_prefix
            .or(file.ipv4_prefix)
            .unwrap_or(defaults.ipv4_prefix),
        ipv6_prefix: args
            .rrl_ipv6_prefix
            .or(file.ipv6_prefix)
            .unwrap_or(defaults.ipv6_prefix),
        exempt,
    };
    if !(1..=3600).contains(&config.window) {
        return Err(out_of_range("rrl.window", "between 1 and 3600 seconds"));
    }
    if config.slip > 10 {
        return Err(out_of_range("rrl.slip", "at most 10"));
    }
    if config.ipv4_prefix > 32 {
        return Err(out_of_range("rrl.ipv4_prefix", "at most 32 bits"));
    }
    if config.ipv6_prefix > 128 {
        return Err(out_of_range("rrl.ipv6_prefix", "at most 128 bits"));
    }
    Ok(config)
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
            ..ProtectionArgs::default()
        };
        let both = cookie_settings(&args, Some(&file)).unwrap();
        assert!(both.enabled);
        assert_eq!(both.secret, Some(CookieSecrets::parse_secret(B).unwrap()));
        assert_eq!(both.previous, Some(CookieSecrets::parse_secret(B).unwrap()));
    }

    #[test]
    fn rate_limiting_is_off_by_default_and_flags_win_over_the_file() {
        assert!(!rrl_config(&ProtectionArgs::default(), None).unwrap().is_enabled());
        let file = RrlFile {
            rate: Some(5),
            window: Some(4),
            exempt: Some(vec!["192.0.2.0/24".into()]),
            ..RrlFile::default()
        };
        let args = ProtectionArgs {
            rrl_rate: Some(20),
            rrl_ipv4_prefix: Some(32),
            ..ProtectionArgs::default()
        };
        let config = rrl_config(&args, Some(&file)).unwrap();
        assert_eq!((config.rate, config.slip, config.window), (20, 2, 4));
        assert_eq!((config.ipv4_prefix, config.ipv6_prefix), (32, 56));
        assert_eq!(config.exempt, vec!["192.0.2.0/24".parse().unwrap()]);
        let bad = RrlFile {
            window: Some(0),
            ..RrlFile::default()
        };
        assert!(matches!(
            rrl_config(&ProtectionArgs::default(), Some(&bad)),
            Err(ProtectionError::Rrl {
                setting: "rrl.window",
                ..
            })
        ));
        let bad = RrlFile {
            exempt: Some(vec!["nonsense".into()]),
            ..RrlFile::default()
        };
        assert!(rrl_config(&ProtectionArgs::default(), Some(&bad)).is_err());
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
