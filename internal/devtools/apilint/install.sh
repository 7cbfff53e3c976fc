#!/usr/bin/env bash
# install.sh installs the OpenAPI linters @redocly/cli and
# @stoplight/spectral-cli (pinned in package.json/package-lock.json) into
# node_modules here, for TestRedoclyLint and TestSpectralLint, through the
# shared pinned-npm installer (cheap when nothing changed).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
"$here/../../platform/npmpin/npm-ci.sh" "$here" apilint
cd "$here"
