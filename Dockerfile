# skyline's container image: built in the Rust image, run from distroless (glibc and libgcc, no
# shell, no package manager) as the unprivileged user 65532.
#
#   docker build -t skyline:0.1.0 .
#   docker build --target node-setup -t skyline-node-setup:0.1.0 .
#   docker run --rm -p 1053:53/udp -p 1053:53/tcp skyline:0.1.0 --addr 0.0.0.0:53 \
#       --nameservers 192.0.2.53:53
#
# The binary carries the file capability cap_net_bind_service, so that the unprivileged user
# can bind port 53 where nothing else allows it (a pod on the host network). Two consequences:
# the kernel refuses to execute it when the container's bounding set lacks that capability,
# so a container that drops capabilities must add NET_BIND_SERVICE back (Docker keeps it by
# default; Kubernetes: drop ALL, add NET_BIND_SERVICE); and the capability is kept across
# COPY --from by BuildKit (Docker 23 and later) and Buildah, not by every builder.
# The node-setup target is the node-local cache's init container (deploy/node-local/): ip and
# nft for its interface and NOTRACK rules.

FROM rust:1-bookworm AS build
# protoc for the etcd client's generated code; setcap (libcap2-bin) for the file capability.
RUN apt-get update \
 && apt-get install -y --no-install-recommends protobuf-compiler libprotobuf-dev libcap2-bin \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked -p skyline \
 && install -D -m 0755 target/release/skyline /out/skyline \
 && strip --strip-debug /out/skyline \
 && setcap cap_net_bind_service=+ep /out/skyline \
 && getcap /out/skyline | grep -q cap_net_bind_service

FROM debian:bookworm-slim AS node-setup
RUN apt-get update \
 && apt-get install -y --no-install-recommends iproute2 nftables \
 && rm -rf /var/lib/apt/lists/*

# `skyline node-cache` in NodeLocal DNSCache's place (deploy/node-local/nodelocaldns.yaml):
# as node-cache, it runs as root with NET_ADMIN and makes the interface and the NOTRACK rules
# itself, so the image carries ip, nft and iptables. Build it with --target node-cache.
FROM debian:bookworm-slim AS node-cache
RUN apt-get update \
 && apt-get install -y --no-install-recommends iproute2 nftables iptables \
 && rm -rf /var/lib/apt/lists/*
COPY --from=build /out/skyline /usr/local/bin/skyline
ENTRYPOINT ["/usr/local/bin/skyline", "node-cache"]

FROM gcr.io/distroless/cc-debian12:nonroot AS runtime
COPY --from=build /out/skyline /usr/local/bin/skyline
USER 65532:65532
EXPOSE 53/udp 53/tcp 9153/tcp
ENTRYPOINT ["/usr/local/bin/skyline"]
CMD ["--addr", "0.0.0.0:53", "--http-addr", "0.0.0.0:9153"]
