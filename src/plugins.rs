//! The `[rewrite]` and `[template]` tables and the `whoami`, `chaos*` and `any` keys (declared in
//! [`crate::settings`]) turned into the data plane's [`Plugins`], compiled once so that a bad
//! rule stops a start, `--check-config` and a reload alike (docs/rewrite.md).

use crate::settings::Given;
use skyline_dataplane::rewrite::{Chaos, PluginError, Plugins, PluginsConfig};
use std::sync::Arc;

/// What `version.bind` answers unless `chaos.version` says otherwise.
const VERSION: &str = concat!("skyline-", env!("CARGO_PKG_VERSION"));

/// The plugins the settings configure, compiled; `None` when none is, so that answering is
/// left as it is.
pub fn plugins(given: &Given) -> Result<Option<Arc<Plugins>>, PluginError> {
    let id = &given.plugins;
    let chaos_on = id.chaos || id.chaos_version.is_some() || id.chaos_authors.is_some() || id.chaos_hostname.is_some();
    let config = PluginsConfig {
        rewrite: given.rewrite.rules.clone(),
        templates: given.template.blocks.clone(),
        whoami: id.whoami.clone(),
        chaos: chaos_on.then(|| Chaos {
            version: id.chaos_version.clone().unwrap_or_else(|| VERSION.to_owned()),
            authors: id.chaos_authors.clone().unwrap_or_else(|| vec!["skyline".to_owned()]),
            hostname: id.chaos_hostname.clone().unwrap_or_else(crate::observe::host_name),
        }),
        any: id.any,
    };
    if config.is_empty() {
        return Ok(None);
    }
    Plugins::new(config).map(|plugins| Some(Arc::new(plugins)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::Cli;
    use crate::settings::FileConfig;
    use clap::Parser;
    use std::path::Path;

    fn given(args: &[&str], file: &str) -> Given {
        let cli = Cli::try_parse_from(std::iter::once("skyline").chain(args.iter().copied())).unwrap();
        let file = FileConfig::parse(file, Path::new("x.toml")).unwrap();
        cli.given_valid(Some(&file)).unwrap()
    }

    #[test]
    fn no_plugin_configured_leaves_answering_alone() {
        assert!(plugins(&given(&[], "")).unwrap().is_none());
    }

    #[test]
    fn flags_and_tables_give_the_rules_in_order() {
        let given = given(
            &[
                "--rewrite",
                "name exact a.example. b.example.",
                "--whoami",
                "who.example.,me.example.",
            ],
            "chaos_authors = ['a', 'b']\n[template]\nblocks = ['IN A example.org { rcode NXDOMAIN }']\n",
        );
        let compiled = plugins(&given).unwrap().unwrap();
        let config = compiled.config();
        assert_eq!(config.rewrite, ["name exact a.example. b.example."]);
        assert_eq!(config.templates.len(), 1);
        assert_eq!(config.whoami, ["who.example.", "me.example."]);
        let chaos = config.chaos.as_ref().unwrap();
        assert_eq!(
            (chaos.authors.as_slice(), chaos.version.as_str()),
            (&["a".to_owned(), "b".to_owned()][..], VERSION)
        );
    }

    #[test]
    fn a_rule_that_does_not_parse_is_refused() {
        let error = plugins(&given(&["--rewrite", "ttl exact a. 5"], "")).unwrap_err();
        assert!(matches!(error, PluginError::Rewrite { .. }), "{error}");
    }
}
