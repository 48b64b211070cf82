#!/usr/bin/env bash
# Builds the pinned versitygw (version from tools/versitygw/go.mod), an
# S3-compatible server, from the Go module proxy into a cache directory, unless
# it is already built there. See README.md beside this file.
#
# Usage:
#   tools/versitygw/build.sh              build if missing; last stdout line = bin dir
#   tools/versitygw/build.sh --print-dir  print the bin dir only, build nothing
#
# Progress goes to stderr; stdout carries only the bin dir, so a Makefile can do
#   S3_BIN := $(shell tools/versitygw/build.sh --print-dir)/versitygw
#
# Environment:
#   TALOS_PROXMOX_TOOLCHAIN_DIR  cache root, shared with tools/toolchain/build.sh
#                                (default ${XDG_CACHE_HOME:-$HOME/.cache}/pulumi-talos-proxmox/toolchain)
#   GO                           go command to use (default: go)
set -euo pipefail

# shellcheck source=../lib/cachebuild.sh
. "$(dirname "${BASH_SOURCE[0]}")/../lib/cachebuild.sh"
cache_start versitygw 2,16 "$@"

# --- recipe: the version is the one the committed wrapper go.mod requires -----

MOD=github.com/versity/versitygw
PKG=$MOD/cmd/versitygw
BIN=versitygw
KEY_PREFIX=versitygw
# As upstream's Makefile: -X main.Version/Build/BuildTime; BuildTime is the release time the
# proxy records (@DATE@, filled in at build time), so the binary does not depend on when it was
# built. Static, without cgo (the posix backend needs none).
LDFLAGS_TMPL="-s -w -X main.Version=@VERSION@ -X main.Build=@SUM@ -X main.BuildTime=@DATE@"
RECIPE_EXTRA='cgo 0\n'
BUILD_CGO=0
BUILD_FLAGS=-trimpath
SMOKE=--version

go_tool_build
