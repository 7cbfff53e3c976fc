#!/usr/bin/env bash
# venv.sh DIR makes DIR (bin/python-sdk in make sdk-python) a virtualenv with
# the packages pinned in sdk/python/requirements.lock, installed with
# --require-hashes, and the SDK itself (bothy-agent) installed into it from
# sdk/python. As with the npm installs (internal/platform/npmpin/npm-ci.sh),
# stamps holding sha256 sums keep the work cached: the virtualenv is made
# again only when the lock changed, and the SDK reinstalled only when its
# files changed, so calling it before every test run is cheap.
set -euo pipefail

venv="$1"
src="$(cd "$(dirname "$0")" && pwd)"

lockstamp="$venv/.bothy-lock.sha256"
want="$(sha256sum "$src/requirements.lock" | cut -d' ' -f1)"
if [[ ! -x "$venv/bin/python" || "$(cat "$lockstamp" 2>/dev/null)" != "$want" ]]; then
	if ! python3 -c 'import sys, venv, ensurepip; sys.exit(sys.version_info < (3, 10))' 2>/dev/null; then
		echo "sdk-python: python3 >= 3.10 with venv and ensurepip is needed (Debian: apt-get install python3-venv)" >&2
		exit 1
	fi
	echo "sdk-python: pip install --require-hashes into $venv" >&2
	rm -rf "$venv"
	python3 -m venv "$venv"
	# --no-deps: the lock lists every package, pinned with its hashes.
	"$venv/bin/python" -m pip install -q --disable-pip-version-check --no-deps --require-hashes -r "$src/requirements.lock"
	echo "$want" >"$lockstamp"
fi

pkgstamp="$venv/.bothy-sdk.sha256"
want="$(cd "$src" && find pyproject.toml README.md bothy_agent -type f ! -name '*.pyc' | LC_ALL=C sort | xargs sha256sum | sha256sum | cut -d' ' -f1)"
if [[ "$(cat "$pkgstamp" 2>/dev/null)" != "$want" ]]; then
	# The build backend (hatchling) is in the lock: nothing is fetched here.
	"$venv/bin/python" -m pip install -q --disable-pip-version-check --no-deps --no-build-isolation --no-index "$src"
	echo "$want" >"$pkgstamp"
fi
