//! Settings that protect a public-facing server from abuse, DNS Cookies (RFC 7873, RFC 9018) and
//! response rate limiting: the resolution of the `[cookies]` and `[rrl]` tables (declared in
//! [`crate::settings`]) into the data plane's [`CookieSecrets`] and [`RrlConfig`].

use crate::settings::{Cookies, Rrl};
use skyline_dataplane::cookie::{CookieSecrets, Secret};
use skyline_dataplane::rrl::RrlConfig;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::ops::RangeInclusive;

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

/// The seconds `rrl.window` may be: a bucket holds at most an hour's debt. `--help` states the
/// same range (a test in `crate::settings` keeps the two together).
pub const RRL_WINDOW: RangeInclusive<u32> = 1..=3600;
/// The largest `rrl.slip`, for the check and its message alike.
pub const RRL_MAX_SLIP: u32 = 10;

/// Resolves response rate limiting, checking each value's range.
pub fn rrl_config(rrl: &Rrl) -> Result<RrlConfig, ProtectionError> {
    let out_of_range = |setting, reason: String| ProtectionError::Rrl { setting, reason };
    let config = RrlConfig {
        rate: rrl.rate,
        slip: rrl.slip,
        window: rrl.window,
        ipv4_prefix: rrl.ipv4_prefix,
        ipv6_prefix: rrl.ipv6_prefix,
        exempt: rrl.exempt.clone(),
    };
    if !RRL_WINDOW.contains(&config.window) {
        let (first, last) = RRL_WINDOW.into_inner();
        return Err(out_of_range(
            "rrl.window",
            format!("between {first} and {last} seconds"),
        ));
    }
    if config.slip > RRL_MAX_SLIP {
        return Err(out_of_range("rrl.slip", format!("at most {RRL_MAX_SLIP}")));
    }
    if u32::from(config.ipv4_prefix) > Ipv4Addr::BITS {
        return Err(out_of_range(
            "rrl.ipv4_prefix",
            format!("at most {} bits", Ipv4Addr::BITS),
        ));
    }
    if u32::from(config.ipv6_prefix) > Ipv6Addr::BITS {
        return Err(out_of_range(
            "rrl.ipv6_prefix",
            format!("at most {} bits", Ipv6Addr::BITS),
        ));
    }
    Ok(config)
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

/// Resolves the cookie settings, checking the secrets.
pub fn cookie_settings(cookies: &Cookies) -> Result<CookieSettings, ProtectionError> {
    let secret = |text: &Option<String>, setting| {
        text.as_ref()
            .map(|text| CookieSecrets::parse_secret(text).map_err(|_| ProtectionError::Secret { setting }))
            .transpose()
    };
    let current = secret(&cookies.secret, "cookies.secret")?;
    let previous = secret(&cookies.secret_previous, "cookies.secret_previous")?;
    if previous.is_some() && current.is_none() {
        return Err(ProtectionError::PreviousAlone);
    }
    Ok(CookieSettings {
        enabled: cookies.enabled,
        secret: current,
        previous,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::settings::{CookiesArgs, CookiesFile, Invalid, RrlArgs, RrlFile};
    use std::path::Path;

    const A: &str = "e5e973e5a6b2a43f48e7dc849e37bfcf";
    const B: &str = "445536bcd2513298075a5d379663c962";

    fn cookies(args: &CookiesArgs, file: Option<&CookiesFile>) -> Result<CookieSettings, ProtectionError> {
        cookie_settings(&Cookies::merge(args, file, Path::new(""), &mut Vec::new()))
    }

    fn rrl(args: &RrlArgs, file: Option<&RrlFile>) -> Result<RrlConfig, ProtectionError> {
        let mut problems = Vec::new();
        let merged = Rrl::merge(args, file, Path::new(""), &mut problems);
        assert_eq!(problems, []);
        rrl_config(&merged)
    }

    #[test]
    fn flags_win_over_the_file_and_cookies_are_on_by_default() {
        let none = cookies(&CookiesArgs::default(), None).unwrap();
        assert!(none.enabled && none.secret.is_none());
        assert!(none.secrets().unwrap().is_some(), "a random secret is made");
        let file = CookiesFile {
            enabled: Some(false),
            secret: Some(A.into()),
            secret_previous: Some(B.into()),
        };
        let from_file = cookies(&CookiesArgs::default(), Some(&file)).unwrap();
        assert!(!from_file.enabled);
        assert_eq!(from_file.secret, Some(CookieSecrets::parse_secret(A).unwrap()));
        let args = CookiesArgs {
            enabled: Some(true),
            secret: Some(B.into()),
            ..CookiesArgs::default()
        };
        let both = cookies(&args, Some(&file)).unwrap();
        assert!(both.enabled);
        assert_eq!(both.secret, Some(CookieSecrets::parse_secret(B).unwrap()));
        assert_eq!(both.previous, Some(CookieSecrets::parse_secret(B).unwrap()));
    }

    #[test]
    fn rate_limiting_is_off_by_default_and_flags_win_over_the_file() {
        assert!(!rrl(&RrlArgs::default(), None).unwrap().is_enabled());
        let file = RrlFile {
            rate: Some(5),
            window: Some(4),
            exempt: Some(vec!["192.0.2.0/24".into()]),
            ..RrlFile::default()
        };
        let args = RrlArgs {
            rate: Some(20),
            ipv4_prefix: Some(32),
            ..RrlArgs::default()
        };
        let config = rrl(&args, Some(&file)).unwrap();
        assert_eq!((config.rate, config.slip, config.window), (20, 2, 4));
        assert_eq!((config.ipv4_prefix, config.ipv6_prefix), (32, 56));
        assert_eq!(config.exempt, vec!["192.0.2.0/24".parse().unwrap()]);
        let bad = RrlFile {
            window: Some(0),
            ..RrlFile::default()
        };
        assert!(matches!(
            rrl(&RrlArgs::default(), Some(&bad)),
            Err(ProtectionError::Rrl {
                setting: "rrl.window",
                ..
            })
        ));
        let bad = RrlFile {
            exempt: Some(vec!["nonsense".into()]),
            ..RrlFile::default()
        };
        let mut problems = Vec::new();
        Rrl::merge(&RrlArgs::default(), Some(&bad), Path::new(""), &mut problems);
        assert!(matches!(problems[..], [Invalid { key: "rrl.exempt", .. }]));
    }

    #[test]
    fn bad_secrets_are_named() {
        let args = CookiesArgs {
            secret: Some("abc".into()),
            ..CookiesArgs::default()
        };
        assert_eq!(
            cookies(&args, None),
            Err(ProtectionError::Secret {
                setting: "cookies.secret"
            })
        );
        let args = CookiesArgs {
            secret_previous: Some(A.into()),
            ..CookiesArgs::default()
        };
        assert_eq!(cookies(&args, None), Err(ProtectionError::PreviousAlone));
    }

    #[test]
    fn a_reload_keeps_the_random_secret_unless_one_is_configured() {
        let running = CookieSecrets::generate().unwrap();
        let unset = cookies(&CookiesArgs::default(), None).unwrap();
        assert_eq!(unset.reloaded(&running), running);
        let file = CookiesFile {
            secret: Some(B.into()),
            secret_previous: Some(A.into()),
            ..CookiesFile::default()
        };
        let set = cookies(&CookiesArgs::default(), Some(&file)).unwrap();
        let rotated = set.reloaded(&running);
        assert_eq!(rotated.current, CookieSecrets::parse_secret(B).unwrap());
        assert_eq!(rotated.previous, Some(CookieSecrets::parse_secret(A).unwrap()));
    }
}
