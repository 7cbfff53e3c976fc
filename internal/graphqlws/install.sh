#!/usr/bin/env bash
# install.sh installs graphql-ws and ws (pinned in package.json/package-lock.json)
# into node_modules here, for client.mjs. `npm ci` runs only when node_modules
# is missing or was installed from a different package-lock.json (tracked by
# a stamp file holding its sha256), so calling it before every run is cheap.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cd "$here"

stamp="node_modules/.bothy-lock.sha256"
want="$(sha256sum package-lock.json | cut -d' ' -f1)"
have=""
if [[ -f "$stamp" ]]; then
	have="$(cat "$stamp")"
fi

if [[ ! -d node_modules || "$have" != "$want" ]]; then
	if ! command -v npm >/dev/null 2>&1; then
		echo "$(basename "$0"): npm not found: install node (>= 18) and npm" >&2
		exit 1
	fi
	echo "graphqlws: npm ci in $here" >&2
	npm ci --ignore-scripts --no-audit --no-fund
	echo "$want" >"$stamp"
fi
