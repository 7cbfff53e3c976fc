#!/usr/bin/env bash
# npm-ci.sh DIR NAME installs the npm packages pinned in DIR's package.json
# and package-lock.json into DIR/node_modules, for the project's pinned npm
# tools (playground assets, GraphQL-over-HTTP audit, OpenAPI linters,
# graphql-ws client). `npm ci` runs only when node_modules is missing or was
# installed from a different package-lock.json (tracked by a stamp file
# holding its sha256), so calling it before every run is cheap. NAME only
# labels the message printed when it installs.
set -euo pipefail

dir="$1"
name="${2:-$(basename "$dir")}"
cd "$dir"

stamp="node_modules/.bothy-lock.sha256"
want="$(sha256sum package-lock.json | cut -d' ' -f1)"
have=""
if [[ -f "$stamp" ]]; then
	have="$(cat "$stamp")"
fi

if [[ ! -d node_modules || "$have" != "$want" ]]; then
	if ! command -v npm >/dev/null 2>&1; then
		echo "$name: npm not found: install node (>= 18) and npm" >&2
		exit 1
	fi
	echo "$name: npm ci in $dir" >&2
	npm ci --ignore-scripts --no-audit --no-fund
	echo "$want" >"$stamp"
fi
