//! kube2etcd: the cluster's DNS records written into etcd as SkyDNS records.
pub mod layout;
