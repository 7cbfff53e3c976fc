#!/usr/bin/env bash
# fetch-assets.sh installs the pinned GraphiQL and React browser builds from
# the npm registry (package.json + package-lock.json in this folder) and
# copies the four files that internal/playground embeds into assets/.
#
# Run it (or `make generate`) before `go build` / `go test` so the binary
# serves GraphiQL without any CDN. The copied files are not committed
# (see .gitignore); only the pins are.
#
# The packages come through the shared pinned-npm installer
# (internal/platform/npmpin/npm-ci.sh), which runs `npm ci` only when needed.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
"$here/../platform/npmpin/npm-ci.sh" "$here" fetch-assets
cd "$here"

# source (under node_modules) -> name served under /playground/assets/
files=(
	"graphiql/graphiql.min.js:graphiql.min.js"
	"graphiql/graphiql.min.css:graphiql.min.css"
	"react/umd/react.production.min.js:react.production.min.js"
	"react-dom/umd/react-dom.production.min.js:react-dom.production.min.js"
)

mkdir -p assets
for f in "${files[@]}"; do
	src="node_modules/${f%%:*}"
	dst="assets/${f##*:}"
	if [[ ! -s "$src" ]]; then
		echo "fetch-assets: missing $src after npm ci" >&2
		exit 1
	fi
	# Copy via a hidden temp file (go:embed skips dot files) so an
	# interrupted run never leaves a half-written asset to embed.
	tmp="assets/.${f##*:}.tmp"
	cp "$src" "$tmp"
	mv -f "$tmp" "$dst"
done

echo "fetch-assets: copied ${#files[@]} files into $here/assets" >&2
