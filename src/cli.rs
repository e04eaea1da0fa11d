//! The command line: SkyDNS's flags (as long options) with SkyDNS's environment variables, plus
//! skyline's own. The settings' flags are declared in [`crate::settings`], group by group; this
//! is the command they make, with the few options that are not settings.

use crate::settings::{
    Cache, CacheArgs, Cookies, CookiesArgs, Etcd, EtcdArgs, FileConfig, Forward, ForwardArgs, Given, Hosts, HostsArgs,
    Invalid, Kubernetes, KubernetesArgs, Main, MainArgs, Observe, ObserveArgs, Plugins, PluginsArgs, Rewrite,
    RewriteArgs, Rrl, RrlArgs, Template, TemplateArgs,
};
use clap::{CommandFactory, FromArgMatches, Parser};
use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// skyline: a service-discovery DNS server serving SkyDNS records.
///
/// Precedence of settings: flags, then environment variables, then the --config file, then the
/// /<prefix>/config object of the data (the records file or etcd), then SkyDNS's defaults.
///
/// In the --config file a setting's key is its long flag in snake_case: the top-level keys
/// (before any table) are those of the "Serving and etcd" section below; the others live in the table
/// their section names, without its prefix (--forward-timeout is `timeout` in `[forward]`,
/// --cache-size is `size` in `[cache]`). `skyline --check-config` prints every setting in force in
/// that form.
///
/// `skyline kube2etcd --help`: the mirror of a Kubernetes cluster's DNS records into etcd.
#[derive(Debug, Clone, Parser)]
#[command(name = "skyline", version)]
pub struct Cli {
    /// Where DNS is served, what shapes the answers, how the process runs.
    #[command(
        flatten,
        next_help_heading = "Serving and etcd (top-level keys of the --config file)"
    )]
    pub main: MainArgs,

    /// Where etcd is and how to authenticate to it.
    #[command(flatten)]
    pub etcd: EtcdArgs,

    /// TOML configuration file: each setting's key is its long flag in snake_case, at the top
    /// level or in the table its section of this help names
    #[arg(long, value_name = "FILE", help_heading = "The configuration file")]
    pub config: Option<PathBuf>,

    /// CoreDNS Corefile to run (docs/corefile.md): its server blocks and plugins become
    /// skyline's settings, under the flags and environment; in a --config file the key
    /// `corefile`, whose other keys then win over the Corefile's
    #[arg(
        long,
        env = "SKYLINE_COREFILE",
        value_name = "FILE",
        help_heading = "The configuration file",
        conflicts_with = "config"
    )]
    pub corefile: Option<PathBuf>,

    /// Validate the configuration, the records file and the files it names included, print the
    /// settings in force as a --config file and exit: 0 when a start would accept them, 1 with
    /// every problem named
    #[arg(long, help_heading = "The configuration file")]
    pub check_config: bool,

    /// Log at debug level (otherwise RUST_LOG, default info)
    #[arg(long, short, help_heading = "The configuration file")]
    pub verbose: bool,

    /// Forwarding.
    #[command(flatten, next_help_heading = "Forwarding ([forward] table)")]
    pub forward: ForwardArgs,

    /// The response cache.
    #[command(flatten, next_help_heading = "Response cache ([cache] table)")]
    pub cache: CacheArgs,

    /// DNS Cookies.
    #[command(flatten, next_help_heading = "DNS Cookies ([cookies] table)")]
    pub cookies: CookiesArgs,

    /// Response rate limiting.
    #[command(flatten, next_help_heading = "Response rate limiting ([rrl] table)")]
    pub rrl: RrlArgs,

    /// CoreDNS's rewrite plugin.
    #[command(flatten, next_help_heading = "Rewriting questions ([rewrite] table)")]
    pub rewrite: RewriteArgs,

    /// CoreDNS's template plugin.
    #[command(flatten, next_help_heading = "Answers from templates ([template] table)")]
    pub template: TemplateArgs,

    /// CoreDNS's whoami, chaos and any plugins.
    #[command(flatten, next_help_heading = "whoami, CHAOS identity and ANY (top-level keys)")]
    pub plugins: PluginsArgs,

    /// Serve Kubernetes cluster DNS from the API server (connection from --kubeconfig, else
    /// KUBECONFIG or ~/.kube/config, else the in-cluster service account); so does any
    /// --kubernetes-* flag or a `[kubernetes]` table
    #[arg(long = "kubernetes", help_heading = "Kubernetes cluster DNS ([kubernetes] table)")]
    pub kubernetes_on: bool,

    /// Kubernetes cluster DNS.
    #[command(flatten, next_help_heading = "Kubernetes cluster DNS ([kubernetes] table)")]
    pub kubernetes: KubernetesArgs,

    /// Names from a hosts file and inline entries.
    #[command(flatten, next_help_heading = "Hosts ([hosts] table)")]
    pub hosts: HostsArgs,

    /// dnstap, the query log and the top talkers.
    #[command(flatten, next_help_heading = "Observation ([observe] table)")]
    pub observe: ObserveArgs,
}

impl Cli {
    /// Every setting this command line gives, stacked over the configuration file `file` and
    /// the declared defaults; each file value that does not convert is added to `problems` and
    /// counts as not set.
    pub fn given(&self, file: Option<&FileConfig>, problems: &mut Vec<Invalid>) -> Given {
        let dir = file.map_or(Path::new(""), |f| f.dir.as_path());
        Given {
            main: Main::merge(&self.main, file.map(|f| &f.main), dir, problems),
            etcd: Etcd::merge(&self.etcd, file.map(|f| &f.etcd), dir, problems),
            forward: Forward::merge(&self.forward, file.and_then(|f| f.forward.as_ref()), dir, problems),
            cache: Cache::merge(&self.cache, file.and_then(|f| f.cache.as_ref()), dir, problems),
            kubernetes: Kubernetes::merge(
                &self.kubernetes,
                file.and_then(|f| f.kubernetes.as_ref()),
                dir,
                problems,
            ),
            kubernetes_on: self.kubernetes_on
                || self.kubernetes != KubernetesArgs::default()
                || file.is_some_and(|f| f.kubernetes.is_some()),
            hosts: Hosts::merge(&self.hosts, file.and_then(|f| f.hosts.as_ref()), dir, problems),
            hosts_given: self.hosts != HostsArgs::default() || file.is_some_and(|f| f.hosts.is_some()),
            observe: Observe::merge(&self.observe, file.and_then(|f| f.observe.as_ref()), dir, problems),
            cookies: Cookies::merge(&self.cookies, file.and_then(|f| f.cookies.as_ref()), dir, problems),
            rrl: Rrl::merge(&self.rrl, file.and_then(|f| f.rrl.as_ref()), dir, problems),
            rewrite: Rewrite::merge(&self.rewrite, file.and_then(|f| f.rewrite.as_ref()), dir, problems),
            template: Template::merge(&self.template, file.and_then(|f| f.template.as_ref()), dir, problems),
            plugins: Plugins::merge(&self.plugins, file.map(|f| &f.plugins), dir, problems),
        }
    }

    /// [`Cli::given`], failing on the first value that does not convert.
    #[cfg(test)]
    pub fn given_valid(&self, file: Option<&FileConfig>) -> Result<Given, Invalid> {
        let mut problems = Vec::new();
        let given = self.given(file, &mut problems);
        match problems.into_iter().next() {
            Some(problem) => Err(problem),
            None => Ok(given),
        }
    }

    /// Parses a command line, reading the environment variables as SkyDNS does: Go's
    /// `os.Getenv` makes an empty variable the same as an unset one (deployments often carry
    /// e.g. `SKYDNS_NAMESERVERS=""`), whereas clap would take it as an empty, invalid value.
    pub fn try_parse_skydns<I, T>(args: I) -> Result<Cli, clap::Error>
    where
        I: IntoIterator<Item = T>,
        T: Into<OsString> + Clone,
    {
        let command = Cli::command().mut_args(|arg| {
            let empty = arg
                .get_env()
                .and_then(std::env::var_os)
                .is_some_and(|value| value.is_empty());
            if empty {
                arg.env(None)
            } else {
                arg
            }
        });
        let args: Vec<OsString> = args.into_iter().map(Into::into).collect();
        let matches = command
            .clone()
            .try_get_matches_from(&args)
            .map_err(|e| from_the_environment(&command, &args, e))?;
        Cli::from_arg_matches(&matches)
    }
}

/// A value clap refused, said to come from the environment variable that gave it when no flag
/// did: clap names only the flag, which the operator never typed.
fn from_the_environment(command: &clap::Command, args: &[OsString], error: clap::Error) -> clap::Error {
    use clap::error::{ContextKind, ContextValue, ErrorKind};
    if error.kind() != ErrorKind::ValueValidation && error.kind() != ErrorKind::InvalidValue {
        return error;
    }
    let Some(ContextValue::String(shown)) = error.get(ContextKind::InvalidArg) else {
        return error;
    };
    let long = shown
        .trim_start_matches("--")
        .split([' ', '=', '['])
        .next()
        .unwrap_or_default();
    let typed = args.iter().any(|a| {
        let a = a.to_string_lossy();
        a == format!("--{long}") || a.starts_with(&format!("--{long}="))
    });
    let variable = command
        .get_arguments()
        .find(|a| a.get_long() == Some(long))
        .and_then(|a| a.get_env())
        .filter(|variable| !typed && std::env::var_os(variable).is_some());
    match variable {
        Some(variable) => {
            let mut command = command.clone();
            let text = error.to_string();
            let reason = text.lines().next().unwrap_or_default().trim_start_matches("error: ");
            command.error(
                error.kind(),
                format!(
                    "{reason} (given by the environment variable {})",
                    variable.to_string_lossy()
                ),
            )
        }
        None => error,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    #[test]
    fn the_command_line_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    /// The `--flag` tokens and environment variable names written in the tables of README.md
    /// and `docs/settings.md`, where every flag is listed.
    fn readme_table_words() -> (BTreeSet<String>, BTreeSet<String>) {
        let docs = [include_str!("../README.md"), include_str!("../docs/settings.md")];
        let (mut flags, mut env) = (BTreeSet::new(), BTreeSet::new());
        for row in docs
            .iter()
            .flat_map(|doc| doc.lines())
            .filter(|line| line.starts_with('|'))
        {
            for word in row.split(|c: char| !(c.is_ascii_alphanumeric() || c == '-' || c == '_')) {
                if let Some(flag) = word
                    .strip_prefix("--")
                    .filter(|f| f.starts_with(|c: char| c.is_ascii_lowercase()))
                {
                    flags.insert(flag.to_owned());
                } else if ["SKYDNS_", "ETCD_", "SKYLINE_"].iter().any(|p| word.starts_with(p)) {
                    env.insert(word.to_owned());
                }
            }
        }
        (flags, env)
    }

    #[test]
    fn the_readme_tables_name_every_flag_and_variable_and_no_other() {
        let (server, kube2etcd) = (Cli::command(), crate::kube2etcd::Kube2EtcdCli::command());
        let args: Vec<_> = server
            .get_arguments()
            .chain(kube2etcd.get_arguments())
            .filter(|a| a.get_long().is_some())
            .collect();
        let cli_flags: BTreeSet<String> = args
            .iter()
            .filter_map(|a| a.get_long())
            .filter(|long| !matches!(*long, "help" | "version"))
            .map(str::to_owned)
            .collect();
        let cli_env: BTreeSet<String> = args
            .iter()
            .filter_map(|a| a.get_env())
            .map(|e| e.to_string_lossy().into_owned())
            .collect();
        let (readme_flags, readme_env) = readme_table_words();
        let undocumented: Vec<_> = cli_flags.difference(&readme_flags).collect();
        let unknown: Vec<_> = readme_flags.difference(&cli_flags).collect();
        assert!(
            undocumented.is_empty(),
            "flags missing from docs/settings.md's tables: {undocumented:?}"
        );
        assert!(
            unknown.is_empty(),
            "the tables of README.md or docs/settings.md name flags skyline lacks: {unknown:?}"
        );
        let undocumented: Vec<_> = cli_env.difference(&readme_env).collect();
        let unknown: Vec<_> = readme_env.difference(&cli_env).collect();
        assert!(
            undocumented.is_empty(),
            "variables missing from docs/settings.md's tables: {undocumented:?}"
        );
        assert!(
            unknown.is_empty(),
            "the tables of README.md or docs/settings.md name variables skyline lacks: {unknown:?}"
        );
    }
}
