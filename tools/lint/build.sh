#!/usr/bin/env bash
# Builds the pinned golangci-lint (version from tools/lint/go.mod) from the Go
# module proxy into a cache directory, unless it is already built there.
#
# Usage:
#   tools/lint/build.sh              build if missing; last stdout line = bin dir
#   tools/lint/build.sh --print-dir  print the bin dir only, build nothing
#
# Progress goes to stderr; stdout carries only the bin dir, so a Makefile can do
#   LINT := $(shell tools/lint/build.sh --print-dir)/golangci-lint
#
# Environment:
#   TALOS_PROXMOX_TOOLCHAIN_DIR  cache root, shared with tools/toolchain/build.sh
#                                (default ${XDG_CACHE_HOME:-$HOME/.cache}/pulumi-talos-proxmox/toolchain)
#   GO                           go command to use (default: go)
set -euo pipefail

# shellcheck source=../lib/cachebuild.sh
. "$(dirname "${BASH_SOURCE[0]}")/../lib/cachebuild.sh"
cache_start lint 2,15 "$@"

# --- recipe: the version is the one the committed wrapper go.mod requires -----

MOD=github.com/golangci/golangci-lint/v2
PKG=$MOD/cmd/golangci-lint
BIN=golangci-lint
KEY_PREFIX=golangci-lint
# As upstream's .goreleaser.yml: -s -w -X main.version/commit/date. main.date must be
# non-empty or `golangci-lint version` reports the wrapper module's "(devel)"; it is
# filled in at build time (@DATE@) with the release time the proxy records.
LDFLAGS_TMPL="-s -w -X main.version=@VERSION_BARE@ -X main.commit=@SUM@ -X main.date=@DATE@"

go_tool_build
