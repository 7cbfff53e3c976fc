#!/usr/bin/env bash
# install.sh installs graphql-ws and ws (pinned in package.json/package-lock.json)
# into node_modules here, for client.mjs, through the shared pinned-npm
# installer (cheap when nothing changed).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
"$here/../../platform/npmpin/npm-ci.sh" "$here" graphqlws
cd "$here"
