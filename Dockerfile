# One image, two processes: `codemode sandbox` and `codemode orchestrator` (or `codemode start`).
# Multi-stage: build with dev dependencies, ship production dependencies and dist/ only.
FROM node:20-bookworm-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci
COPY tsconfig.json buf.yaml buf.gen.yaml ./
COPY proto ./proto
COPY src ./src
COPY scripts ./scripts
COPY bin ./bin
# tsc, then scripts/bundle.mjs: dist/bundle/ holds the one-file bundles, their V8 code caches
# (from a training start on 127.0.0.1 during the build) and the preludes' bytecode. The caches
# fit this stage's Node exactly, which is why the runtime stage uses the same base image; a
# Node that refuses them still starts, only slower ("started" log line: codeCache "rejected").
RUN npm run build && npm prune --omit=dev

FROM node:20-bookworm-slim
RUN apt-get update && apt-get install -y --no-install-recommends tini && rm -rf /var/lib/apt/lists/*
WORKDIR /app
ENV NODE_ENV=production
# The C allocator (glibc): a fixed mmap threshold keeps buffers of 128 KiB and more out of
# its arenas. By default the threshold rises to the largest buffer freed so far (up to 32
# MiB), after which multi-MiB buffers (prepared VM images, large tool answers and inputs)
# come from the arenas, which keep what they freed: under hostile load the sidecar's RSS
# then grew for tens of minutes. Two arenas instead of eight per core bound the rest.
# (docs/operations.md, "Memory".)
ENV MALLOC_ARENA_MAX=2 MALLOC_MMAP_THRESHOLD_=131072
COPY --from=build /app/package.json ./
COPY --from=build /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
COPY bin ./bin
COPY proto ./proto
USER node
EXPOSE 7300 7301 7302
# gRPC health through the image's own CLI (no grpc_health_probe binary): exit 0 when SERVING.
# A sidecar is NOT_SERVING while its orchestrator link is down or it drains. For a container
# that runs only the orchestrator, set CODEMODE_HEALTH_ADDRESS=127.0.0.1:7301.
ENV CODEMODE_HEALTH_ADDRESS=127.0.0.1:7300
HEALTHCHECK --interval=10s --timeout=5s --start-period=20s --retries=3 \
  CMD ["node", "/app/bin/codemode.js", "health", "--timeout-ms", "4000"]
ENTRYPOINT ["/usr/bin/tini", "--", "node", "/app/bin/codemode.js"]
# Override with: sandbox --sandbox-address 0.0.0.0:7300 --orchestrator-address orchestrator:7302
#                (every sidecar replica with the same CODEMODE_SNAPSHOT_KEY secret, >= 32 chars;
#                the orchestrator's link port, with CODEMODE_LINK_TOKEN)
#            or: orchestrator --orchestrator-address 0.0.0.0:7301 --link-address 0.0.0.0:7302 --store redis://redis:6379
CMD ["start", "--sandbox-address", "0.0.0.0:7300", "--orchestrator-address", "0.0.0.0:7301"]
