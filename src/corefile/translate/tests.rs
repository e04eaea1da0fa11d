use super::*;
use crate::corefile::parse::parse;
use std::path::Path;
use std::sync::Arc;

fn translated(text: &str) -> Translated {
    let blocks = parse(text, Path::new("Corefile"), &|_| None).unwrap();
    translate(&blocks).unwrap()
}

fn errors(text: &str) -> Vec<String> {
    let blocks = parse(text, Path::new("Corefile"), &|_| None).unwrap();
    translate(&blocks)
        .unwrap_err()
        .iter()
        .map(ToString::to_string)
        .collect()
}

#[test]
fn keys_zones_ports_and_reverse_cidrs() {
    let token = |text: &str| Token {
        text: text.into(),
        quoted: false,
        place: Place {
            file: Arc::from(Path::new("Corefile")),
            line: 1,
        },
    };
    let k = key(&token("dns://Cluster.Local:1053")).unwrap();
    assert_eq!((k.zone.as_str(), k.port), ("cluster.local.", 1053));
    assert_eq!(key(&token(".")).unwrap().port, 53);
    assert_eq!(key(&token("10.0.0.0/8")).unwrap().zone, "10.in-addr.arpa.");
    assert_eq!(key(&token("fd00::/8")).unwrap().zone, "d.f.ip6.arpa.");
    assert!(key(&token("10.0.0.0/9")).is_err());
    assert!(key(&token("https://.:443")).is_err());
}

#[test]
fn go_durations() {
    assert_eq!(go_duration("1m30s").unwrap(), Duration::from_secs(90));
    assert_eq!(go_duration("500ms").unwrap(), Duration::from_millis(500));
    assert!(go_duration("5").is_err());
    assert!(go_duration("5x").is_err());
}

#[test]
fn blocks_on_one_port_are_the_server_and_its_stub_zones() {
    let t = translated(
        "cluster.local:53 {\n bind 169.254.20.10 10.96.0.10\n cache {\n  success 9984 30\n  denial 9984 5\n }\n forward . 10.96.0.11\n}\n\
         .:53 {\n bind 169.254.20.10 10.96.0.10\n cache 30\n forward . /etc/resolv.conf\n}\n",
    );
    let addrs = match &t.file.main.addr {
        Some(Addrs::Many(addrs)) => addrs.clone(),
        other => panic!("{other:?}"),
    };
    let want: Vec<SocketAddr> = ["169.254.20.10:53", "10.96.0.10:53"]
        .iter()
        .map(|a| a.parse().unwrap())
        .collect();
    assert_eq!(addrs, want);
    let forward = t.file.forward.as_ref().unwrap();
    assert_eq!(forward.resolv_conf.as_deref(), Some(Path::new("/etc/resolv.conf")));
    let stubs = forward.stub_zones.as_ref().unwrap();
    assert_eq!(stubs.len(), 1);
    assert_eq!(stubs[0].zone, "cluster.local.");
    assert_eq!(stubs[0].servers, ["10.96.0.11:53"]);
    let cache = t.file.cache.as_ref().unwrap();
    assert_eq!(cache.max_ttl, Some(30));
    assert_eq!(
        cache.negative_ttl_zones.as_ref().unwrap().get("cluster.local."),
        Some(&5)
    );
    assert_eq!(t.file.main.round_robin, Some(false), "no loadbalance, no shuffling");
}

#[test]
fn a_forward_from_a_subzone_is_a_stub_zone_of_it() {
    let t = translated(".:53 {\n forward corp.example 10.0.0.1:5353\n forward . 1.1.1.1\n}\n");
    let forward = t.file.forward.as_ref().unwrap();
    assert_eq!(forward.stub_zones.as_ref().unwrap()[0].zone, "corp.example.");
    assert_eq!(t.file.main.nameservers, Some(vec!["1.1.1.1:53".parse().unwrap()]));
}

#[test]
fn forward_options_apply_to_their_own_set_with_coredns_defaults() {
    let t = translated(
        ".:53 {\n loop\n forward . 10.0.0.1 10.0.0.2 {\n  policy sequential\n  max_fails 5\n  health_check 2s no_rec domain example.org\n  except internal.example\n  max_concurrent 1000\n }\n}\n\
         corp:53 {\n forward . 10.1.0.1 {\n  health_check\n }\n}\n",
    );
    let forward = t.file.forward.as_ref().unwrap();
    assert_eq!(forward.policy.as_deref(), Some("sequential"));
    assert_eq!(forward.max_fails, Some(5));
    assert_eq!(forward.health_check.as_deref(), Some("2000ms"));
    assert_eq!(forward.health_check_no_rec, Some(true));
    assert_eq!(forward.health_check_domain.as_deref(), Some("example.org."));
    assert_eq!(forward.except, Some(vec!["internal.example.".to_string()]));
    assert_eq!(forward.max_concurrent, Some(1000));
    assert_eq!(forward.loop_detect, Some(true));
    let stub = &forward.stub_zones.as_ref().unwrap()[0];
    assert_eq!(stub.zone, "corp.");
    assert_eq!(stub.policy.as_deref(), Some("random"), "CoreDNS's default policy");
    assert_eq!(stub.max_fails, Some(2), "CoreDNS's default max_fails");
    assert_eq!(stub.health_check.as_deref(), Some("500ms"));
    assert_eq!(stub.except, None);
    let t = translated(
        ".:53 {\n forward . tls://9.9.9.9 tls://[2620:fe::fe]:8853 {\n  tls_servername dns.quad9.net\n  tls ca.pem\n  expire 30s\n }\n}\n\
         cluster.local:53 {\n forward . 10.96.0.10 {\n  force_tcp\n  tls_servername ignored.example\n }\n}\n",
    );
    let forward = t.file.forward.as_ref().unwrap();
    assert_eq!(forward.tls, Some(true));
    assert_eq!(forward.tls_servername.as_deref(), Some("dns.quad9.net"));
    assert_eq!(forward.tls_ca.as_deref(), Some(Path::new("ca.pem")));
    assert_eq!(forward.expire.as_deref(), Some("30000ms"));
    assert_eq!(
        t.file.main.nameservers,
        Some(vec![
            "9.9.9.9:853".parse().unwrap(),
            "[2620:fe::fe]:8853".parse().unwrap()
        ])
    );
    let stub = &forward.stub_zones.as_ref().unwrap()[0];
    assert_eq!(stub.servers, ["10.96.0.10:53"]);
    assert!(stub.force_tcp);
    assert_eq!(stub.tls_servername, None, "TLS options count for tls:// upstreams only");
    let mixed = errors(".:53 {\n forward . 10.0.0.1 tls://10.0.0.2\n}\n");
    assert!(mixed[0].contains("one way"), "{mixed:?}");
    let wrong = errors(".:53 {\n forward . 10.0.0.1 {\n  policy fastest\n  max_fails many\n }\n}\n");
    assert_eq!(wrong.len(), 1, "{wrong:?}");
    assert!(
        wrong[0].contains("Corefile:3") && wrong[0].contains("fastest"),
        "{wrong:?}"
    );
}

#[test]
fn the_kubernetes_block_lines_map_onto_the_kubernetes_settings() {
    let t = translated(
        ".:53 {\n kubernetes cluster.local in-addr.arpa {\n  endpoint https://10.96.0.1:443\n  namespaces a b\n  labels env in (prod, test)\n  pods verified\n  endpoint_pod_names\n  ttl 10\n  noendpoints\n  fallthrough\n  ignore empty_service\n }\n}\n",
    );
    let k = t.file.kubernetes.unwrap();
    assert_eq!(k.zones, Some(vec!["cluster.local.".into(), "in-addr.arpa.".into()]));
    assert_eq!(k.endpoint.as_deref(), Some("https://10.96.0.1:443"));
    assert_eq!(k.namespaces, Some(vec!["a".into(), "b".into()]));
    assert_eq!(k.labels.as_deref(), Some("env in (prod, test)"));
    assert_eq!(k.pods.as_deref(), Some("verified"));
    assert_eq!(k.ttl, Some(10));
    assert_eq!(k.fallthrough, k.zones, "fallthrough without zones: all of the plugin's");
    assert_eq!(
        (k.endpoint_pod_names, k.noendpoints, k.ignore_empty_service),
        (Some(true), Some(true), Some(true))
    );
}

#[test]
fn etcd_gives_the_domain_prefix_and_connection() {
    let t = translated(
        "skydns.local {\n etcd {\n  path /skydns\n  endpoint http://127.0.0.1:2379 http://127.0.0.2:2379\n  credentials user secret\n }\n}\n",
    );
    assert_eq!(t.file.main.domain.as_deref(), Some("skydns.local."));
    assert_eq!(t.file.main.path_prefix.as_deref(), Some("skydns"));
    assert_eq!(t.file.etcd.machines.as_ref().map(Vec::len), Some(2));
    assert_eq!(t.file.etcd.username.as_deref(), Some("user"));
}

#[test]
fn etcd_fallthrough_passes_on_the_whole_domain_or_nothing() {
    let fallthrough = |option: &str| {
        translated(&format!("skydns.local {{\n etcd {{\n  {option}\n }}\n}}\n"))
            .file
            .main
            .fallthrough
    };
    assert_eq!(fallthrough("path /skydns"), None);
    assert_eq!(fallthrough("fallthrough"), Some(true));
    assert_eq!(fallthrough("fallthrough skydns.local local."), Some(true));
    assert_eq!(fallthrough("fallthrough ."), Some(true));
    let elsewhere = translated("skydns.local {\n etcd {\n  fallthrough example.org\n }\n}\n");
    assert_eq!(elsewhere.file.main.fallthrough, None);
    assert!(
        elsewhere.notes.iter().any(|n| n.contains("nothing falls through")),
        "{:?}",
        elsewhere.notes
    );
    let got = errors("skydns.local {\n etcd {\n  fallthrough a.skydns.local\n }\n}\n");
    assert!(
        got.iter()
            .any(|e| e.starts_with("Corefile:3:") && e.contains("whole etcd zone skydns.local.")),
        "{got:#?}"
    );
}

#[test]
fn every_unsupported_plugin_and_option_is_named_with_its_line() {
    let got =
        errors(".:53 {\n dnssec\n cache {\n  shared\n }\n kubernetes {\n  tls a b c\n }\n nonsense\n}\n.:53 {\n}\n");
    assert_eq!(got.len(), 5, "{got:#?}");
    assert!(
        got[0].starts_with("Corefile:11: zone . on port 53 is already a key at Corefile:1"),
        "{got:#?}"
    );
    assert!(
        got[1].starts_with("Corefile:2: plugin dnssec: not supported by skyline"),
        "{got:#?}"
    );
    assert!(
        got[2].starts_with("Corefile:4: plugin cache: unknown option shared"),
        "{got:#?}"
    );
    assert!(
        got[3].starts_with("Corefile:7: plugin kubernetes: option tls"),
        "{got:#?}"
    );
    assert!(
        got[4].starts_with("Corefile:9: plugin nonsense: not supported by skyline"),
        "{got:#?}"
    );
}

#[test]
fn health_ready_and_prometheus_each_get_their_address() {
    let t = translated(
        ".:53 {\n health {\n  lameduck 5s\n }\n ready\n prometheus :9153\n prometheus\n reload 10s\n log\n}\n",
    );
    let http = match t.file.main.http_addr {
        Some(Addrs::Many(addrs)) => addrs,
        other => panic!("{other:?}"),
    };
    let want: Vec<SocketAddr> = ["0.0.0.0:8080", "0.0.0.0:8181", "0.0.0.0:9153"]
        .iter()
        .map(|a| a.parse().unwrap())
        .collect();
    assert_eq!(http, want, ":PORT is every address, which covers localhost's");
    assert_eq!(t.file.main.drain.as_deref(), Some("5000ms"));
    assert_eq!(t.file.main.reload.as_deref(), Some("10000ms"));
    assert_eq!(t.file.observe.unwrap().query_log, Some(PathBuf::from("-")));
    let t = translated(".:53 {\n prometheus\n}\n");
    let Some(Addrs::Many(http)) = t.file.main.http_addr else {
        panic!()
    };
    assert_eq!(
        http,
        ["127.0.0.1:9153".parse::<SocketAddr>().unwrap()],
        "no address at all: localhost"
    );
}

#[test]
fn rewrite_template_whoami_chaos_and_any_carry_over_in_their_own_syntax() {
    let t = translated(
        ".:53 {\n any\n chaos skyline-test alice bob\n rewrite name exact a.example. b.example.\n\
         rewrite stop {\n  name regex (.*)\\.svc\\.example\\. {1}.default.svc.cluster.local.\n  answer name (.*)\\.default\\.svc\\.cluster\\.local\\. {1}.svc.example.\n }\n\
         template IN A {\n  match ^ip-(\\d+)-(\\d+)-(\\d+)-(\\d+)[.]example[.]$\n  answer \"{{ .Name }} 60 IN A {{ index .Match 1 }}.{{ index .Match 2 }}.{{ index .Match 3 }}.{{ index .Match 4 }}\"\n }\n\
         forward . 10.0.0.1\n}\n\
         who.example:53 {\n whoami\n}\n",
    );
    let rules = t.file.rewrite.as_ref().unwrap().rules.as_ref().unwrap();
    assert_eq!(rules[0], "name exact a.example. b.example.");
    assert!(
        rules[1].starts_with("stop name regex") && rules[1].contains(" answer name "),
        "{rules:?}"
    );
    let templates = t.file.template.as_ref().unwrap().blocks.as_ref().unwrap();
    assert!(templates[0].starts_with("IN A . {"), "the block's zone: {templates:?}");
    assert!(templates[0].contains("\"{{ .Name }} 60 IN A"), "{templates:?}");
    assert_eq!(t.file.plugins.whoami, Some(vec!["who.example.".to_string()]));
    assert_eq!(t.file.plugins.any, Some(true));
    assert_eq!(t.file.plugins.chaos_version.as_deref(), Some("skyline-test"));
    assert_eq!(
        t.file.plugins.chaos_authors,
        Some(vec!["alice".to_string(), "bob".to_string()])
    );
    let bad = errors(".:53 {\n rewrite ttl exact a. 5\n template IN A {\n  rcode NOPE\n }\n}\n");
    assert_eq!(bad.len(), 2, "{bad:?}");
    assert!(bad[0].contains("Corefile:2: plugin rewrite"), "{bad:?}");
    assert!(bad[1].contains("Corefile:3: plugin template"), "{bad:?}");
}

#[test]
fn autopath_at_kubernetes_turns_on_the_kubernetes_search() {
    let t = translated(
        ".:53 {\n autopath @kubernetes\n kubernetes cluster.local {\n  pods verified\n }\n forward . 10.0.0.1\n}\n",
    );
    let k = t.file.kubernetes.as_ref().unwrap();
    assert_eq!(k.autopath, Some(true));
    assert!(k.autopath_search.is_some());
    let alone = errors(".:53 {\n autopath @kubernetes\n forward . 10.0.0.1\n}\n");
    assert!(alone[0].contains("Corefile:2: plugin autopath"), "{alone:?}");
    let file = errors(".:53 {\n autopath /etc/resolv.conf\n}\n");
    assert!(file[0].contains("@kubernetes"), "{file:?}");
}

#[test]
fn cache_caps_per_block_disable_keepttl_and_no_cache_as_coredns() {
    let t = translated(
        ".:53 {\n cache {\n  keepttl\n  servfail 0\n  disable success nocache.example\n }\n forward . 10.0.0.1\n}\n\
         cluster.local:53 {\n cache {\n  success 9984 30\n  denial 9984 5\n  disable denial\n }\n forward . 10.96.0.10\n}\n\
         consul:53 {\n forward . 10.0.0.2\n}\n",
    );
    let cache = t.file.cache.as_ref().unwrap();
    assert_eq!(cache.keep_ttl, Some(true));
    assert_eq!(
        (cache.max_ttl, cache.negative_ttl, cache.min_ttl),
        (Some(3600), Some(1800), Some(5)),
        "CoreDNS's caps when none is written"
    );
    let success = cache.success_ttl_zones.as_ref().unwrap();
    assert_eq!(success.get("nocache.example."), Some(&0));
    assert_eq!(success.get("cluster.local."), Some(&30));
    assert_eq!(success.get("consul."), Some(&0), "a block without cache caches nothing");
    let denial = cache.negative_ttl_zones.as_ref().unwrap();
    assert_eq!(denial.get("cluster.local."), Some(&0), "disable denial");
    assert_eq!(denial.get("consul."), Some(&0));
    assert!(t.notes.is_empty(), "{:?}", t.notes);
}
