# claimguard image: the sidecar (`claimguard serve`) and the injection webhook (`claimguard inject`).
# Build: docker build -t claimguard:0.1.0 .   (tests/helm/check_dockerfile.py keeps the package
# lists below in step with scripts/setup.sh and with what the built binary links.)

# ---------------------------------------------------------------- build: Debian 12 toolchain
FROM debian:12 AS build
# The -dev packages of scripts/setup.sh that the claimguard binary's build needs (GTest is
# required by the top-level CMakeLists even with the tests off).
ARG BUILD_PACKAGES="build-essential cmake ninja-build pkg-config libboost1.81-all-dev libssl-dev zlib1g-dev libyaml-cpp-dev libhiredis-dev libmariadb-dev nlohmann-json3-dev libspdlog-dev libfmt-dev libcli11-dev libgtest-dev libgmock-dev libbenchmark-dev"
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends ${BUILD_PACKAGES} \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
RUN cmake -S . -B /build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCLAIMGUARD_TESTS=OFF -DCLAIMGUARD_BENCH=OFF \
 && cmake --build /build --target claimguard \
 && install -D -s -m 0755 /build/proxy/claimguard /out/usr/local/bin/claimguard \
 && mkdir -p /out/usr/share/claimguard \
 && cp -r rules/examples /out/usr/share/claimguard/examples

# ---------------------------------------------------------------- runtime: shared libraries only
FROM debian:12-slim
# What `ldd claimguard` needs beyond the base image (libc6, libgcc-s1, libstdc++6), plus the CA
# bundle for --backend-tls-verify. libmariadb3 serves the start-up schema check.
ARG RUNTIME_PACKAGES="ca-certificates libhiredis0.14 libssl3 libspdlog1.10 libfmt9 libyaml-cpp0.7 libmariadb3"
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends ${RUNTIME_PACKAGES} \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --gid 65532 claimguard \
 && useradd --uid 65532 --gid 65532 --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin claimguard
COPY --from=build /out/ /
# Numeric, so Kubernetes can check runAsNonRoot without reading /etc/passwd.
USER 65532:65532
# 3306: the app's MySQL port (on 127.0.0.1 in a pod); 9090: admin (probes, /metrics); 8443: inject.
EXPOSE 3306 9090 8443
ENTRYPOINT ["/usr/local/bin/claimguard"]
CMD ["serve"]
