# Sluice's container image: `docker build .` or `podman build .` (scripts/image does the latter on a machine
# with no registry, and labels and tags the result). Multi-stage: the build stage compiles the server on
# Debian 12 with the project's own scripts and lays out the runtime's root filesystem (scripts/lib/image-rootfs);
# the runtime stage is that filesystem alone: the binary, the shared libraries it links, CA certificates,
# /etc/passwd and the licenses. No shell, no package manager.
#
# Build arguments:
#   BASE      the Debian 12 image to build on (scripts/image makes one with debootstrap when none is pulled)
#   ROOTFS    unset or `build`: compile here; `prebuilt`: take rootfs/ from the build context, laid out from an
#             already built build/sluice (scripts/image --from-build)
#   VERSION   the semantic version (meson.build's project version), REVISION the git commit (scripts/image sets
#             both from the built binary)
# The repository's URL is the label org.opencontainers.image.source: add it with
# `--label org.opencontainers.image.source=https://...` (scripts/image does, when the clone's `origin` is one).
ARG BASE=debian:bookworm
# No default here but in `FROM ${ROOTFS:-build}`: buildah 1.28 (Debian 12's podman) takes a stage name from a
# build argument's default only in that form (`ARG ROOTFS=build` made a plain `podman build .` look for an image
# named `build`).
ARG ROOTFS

FROM ${BASE} AS build
ARG REVISION=unknown
WORKDIR /src
COPY . .
# scripts/build --server-only: the build packages only, a release build without the tests, the binary only.
RUN SLUICE_COMMIT=${REVISION} scripts/build --server-only \
 && scripts/lib/image-rootfs build/sluice /rootfs

FROM scratch AS prebuilt
COPY rootfs/ /rootfs/

FROM ${ROOTFS:-build} AS rootfs

FROM scratch
ARG VERSION=1.1.0
ARG REVISION=unknown
COPY --from=rootfs /rootfs/ /
LABEL org.opencontainers.image.title="sluice" \
      org.opencontainers.image.description="Envoy rate limit service (drop-in for envoyproxy/ratelimit), echo and holidays APIs" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.licenses="Apache-2.0"
# distroless' nonroot; any other non-root UID works too (nothing is written outside what the settings name).
USER 65532:65532
# HTTP (/json, /healthcheck, echo, holidays), gRPC, debug; Prometheus when USE_PROMETHEUS=true (:19001 in
# Envoy Gateway).
EXPOSE 8080 8081 6070
# Upstream's path: manifests that say command: ["/bin/ratelimit"] and charts that set no command both work;
# `client` and `check-config` are subcommands of the same binary (also /bin/sluice).
ENTRYPOINT ["/bin/ratelimit"]
