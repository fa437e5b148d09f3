# syntax=docker/dockerfile:1
# Worker and starter images for docker-compose.yml (and for production: the same
# binaries point at Temporal Cloud / a cluster, real Firestore, BigQuery and Gemini
# through environment variables).
#
#   docker build -t investigator .
#   docker run --rm investigator                 # the worker (default entrypoint)
#   docker run --rm --entrypoint /usr/local/bin/starter investigator --help

ARG GO_VERSION=1.26

FROM golang:${GO_VERSION} AS build
WORKDIR /src
# Dependencies first, so that source edits do not re-download modules.
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod \
    go mod download
COPY . .
RUN --mount=type=cache,target=/go/pkg/mod \
    --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/ ./worker ./starter

# Static, CA certificates and tzdata included, no shell, runs as uid 65532.
FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/worker /out/starter /usr/local/bin/
USER nonroot:nonroot
ENTRYPOINT ["/usr/local/bin/worker"]
