#!/usr/bin/env bash
# install.sh makes sdk/typescript usable: npm ci from package-lock.json
# through the shared pinned-npm installer (only when the lock changed), then
# npm run build into dist/ only when the sources, the lock or the build's
# configuration changed since the last build (dist/.bothy-build.sha256 holds
# their hash), so calling it before every test run is cheap.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
"$here/../../internal/platform/npmpin/npm-ci.sh" "$here" sdk-typescript
cd "$here"

stamp="dist/.bothy-build.sha256"
want="$(find src -type f -print0 | sort -z | xargs -0 sha256sum | cat - package.json package-lock.json tsconfig.json | sha256sum | cut -d' ' -f1)"
if [[ ! -f "$stamp" || "$(cat "$stamp")" != "$want" ]]; then
	echo "sdk-typescript: npm run build in $here" >&2
	# A clean dist: a source removed since the last build leaves no module behind.
	rm -rf dist
	npm run --silent build
	echo "$want" >"$stamp"
fi
