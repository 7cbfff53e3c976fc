#!/usr/bin/env bash
# install.sh installs the MCP TypeScript SDK, the MCP Inspector's command
# line and the MCP conformance suite (pinned in package.json/package-lock.json)
# into node_modules here, for client.mjs, authproxy.mjs and the Go tests of
# internal/mcpface, through the shared pinned-npm installer (cheap when
# nothing changed).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
"$here/../../platform/npmpin/npm-ci.sh" "$here" mcpjs
cd "$here"
