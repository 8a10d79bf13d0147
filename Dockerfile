# syntax=docker/dockerfile:1
#
# bearer-proxy container image.
#
#   docker build -t bearer-proxy:0.1.0 \
#     --build-arg REVISION="$(git rev-parse HEAD)" \
#     --build-arg CREATED="$(date -u +%Y-%m-%dT%H:%M:%SZ)" .
#
# Stage 1 compiles TypeScript and bundles the CLI (dist/bundle/: cli.cjs and its chunks, every
# dependency inside) with the full Node image; stage 2 runs the bundle on distroless (no shell, no
# package manager), as a numeric non-root user, on a read-only root filesystem. The runtime stage
# gets no node_modules but the one native addon, @node-rs/bcrypt (bench/PROFILE.md, "The bundle":
# a start loads a few chunks instead of ~360 ES modules).
#
# Base images are pinned by tag. For reproducible production builds pin them by digest as well,
# at the two places marked "digest" below (`docker buildx imagetools inspect <image:tag>` prints
# it). The digests were not filled in because they could not be resolved where this file was
# written (no registry access): an invented digest would only break the build.

# ---------------------------------------------------------------------------------------------
FROM node:24-bookworm AS build
# digest: FROM node:24-bookworm@sha256:<digest> AS build

WORKDIR /src
ENV npm_config_fund=false \
    npm_config_audit=false \
    npm_config_update_notifier=false

# Dependencies first so the layer is cached until the lockfile changes. --ignore-scripts: the
# package's own `prepare` script builds, which needs the sources copied below; no dependency
# needs an install script (the one native addon, @node-rs/bcrypt, comes prebuilt as an optional
# dependency for the build's platform, which the runtime image shares: glibc, same architecture).
COPY package.json package-lock.json ./
RUN --mount=type=cache,target=/root/.npm npm ci --ignore-scripts

COPY tsconfig.json tsconfig.build.json ./
COPY src ./src
# The build generates the config validator (ajv standalone code) after tsc, then bundles.
COPY scripts/build-config-schema.mjs scripts/build-bundle.mjs ./scripts/
RUN npm run build

# ---------------------------------------------------------------------------------------------
FROM gcr.io/distroless/nodejs24-debian12:nonroot AS runtime
# digest: FROM gcr.io/distroless/nodejs24-debian12:nonroot@sha256:<digest> AS runtime

ARG VERSION=0.1.0
ARG REVISION=unknown
ARG CREATED=""
ARG SOURCE=""

LABEL org.opencontainers.image.title="bearer-proxy" \
      org.opencontainers.image.description="Authenticating reverse proxy and sidecar: injects OAuth 2.0 client-credentials bearer tokens into plain HTTP requests and forwards them over HTTPS." \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.created="${CREATED}" \
      org.opencontainers.image.source="${SOURCE}" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.base.name="gcr.io/distroless/nodejs24-debian12:nonroot"

# An 8 MiB young generation (semi-space). Node 24 lets it grow to 64 MiB, which on the bench cost
# 55-80 MiB more peak RSS and 36-39 ms scavenge pauses against 16 (2026-11-23). 8 MiB against 16, on
# Node 24 at 2,000 req/s: peak RSS 127 -> 118 MiB (medians of 6 and 11 rounds), and 2% less CPU
# per small GET - bench/PROFILE.md, "An 8 MiB young generation for the image".
# Memory-bound sidecars set NODE_OPTIONS="--max-semi-space-size=1 --v8-pool-size=1" and
# MALLOC_TRIM_THRESHOLD_=131072 as well (the chart's sidecar template does): less RSS idle and
# under load for a few % more CPU per request. Setting NODE_OPTIONS replaces this value, so keep
# --max-semi-space-size in your own.
# Two glibc malloc arenas instead of 8 per core: V8's compiler threads leave their working memory
# in arenas of their own, which glibc keeps; with two, less peak RSS under load at the same CPU
# per request (docs/benchmark.md, "Memory and Node flags").
# V8 flags that NODE_OPTIONS refuses, the process sets itself at start (src/commands/v8-flags.ts):
# three times V8's inlining budget, and Node 24's WebAssembly tiering budget.
ENV NODE_ENV=production \
    NODE_OPTIONS="--max-semi-space-size=8" \
    MALLOC_ARENA_MAX=2

# Files stay owned by root: the non-root process can read but never modify its own code.
# The bundle needs no node_modules except the native bcrypt addon of the callers' password checks
# (@node-rs/bcrypt and its binary for this platform, installed by `npm ci` as an optional
# dependency; without it the checks fall back to bcryptjs on the event loop, with a warning).
WORKDIR /app
COPY --from=build /src/dist/bundle ./bundle
COPY --from=build /src/node_modules/@node-rs ./node_modules/@node-rs

# V8's code cache for this image's Node, made here because it is valid only for the Node build
# and V8 flags that made it (the build stage's Node may be another 24.x): `code-cache` starts the
# demo's proxy and emulator on free loopback ports, sends a request through, and saves the
# bytecode of what ran in /app/bundle/code-cache/ (no network beyond loopback). Every start
# is then ~30 ms sooner (bench/PROFILE.md, "The code cache"). Made as root, like the files beside
# it, so the process can read it but not change it; a start under other V8 flags (Node 24 counts
# few: the semi-space size and pool size are not among them) logs that V8 refused it and compiles
# from source. Exec form: the base has no shell.
USER 0:0
RUN ["/nodejs/bin/node", "/app/bundle/cli.cjs", "code-cache"]

# 65532 is distroless's "nonroot". Numeric so Kubernetes can check runAsNonRoot without
# reading /etc/passwd.
USER 65532:65532

# 8080: proxy listener. 9901: admin listener (/livez /readyz /startup /metrics /status).
# Both bind 127.0.0.1 unless configured (BEARER_PROXY_LISTEN / BEARER_PROXY_ADMIN_LISTEN or the
# config file): a sidecar must not offer authenticated access to the whole network. To publish
# them from a container, set 0.0.0.0 explicitly (see docs/docker.md).
EXPOSE 8080 9901

# No curl or shell here: the CLI itself checks readiness over the loopback admin listener.
# Kubernetes ignores HEALTHCHECK and uses the chart's probes instead. If you move the admin
# listener off 127.0.0.1:9901, override this with `--health-cmd` or pass `--admin URL`.
HEALTHCHECK --interval=30s --timeout=5s --start-period=30s --retries=3 \
  CMD ["/nodejs/bin/node", "/app/bundle/cli.cjs", "wait", "--timeout", "2s"]

ENTRYPOINT ["/nodejs/bin/node", "/app/bundle/cli.cjs"]
CMD ["run"]
