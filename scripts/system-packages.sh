#!/usr/bin/env bash
# Installs the Debian packages some tests run for real, where they are missing:
#
#   postgresql   the server the PostgreSQL store and the replica tests start (internal/pgtest)
#   chromium     the browser tests/browser drives over the details pages (and scripts/screenshot.sh)
#
# As root with apt-get, missing packages are installed; otherwise the script says what is missing
# and how to install it, and those tests skip (under CI=true they fail instead: CI runs this as
# root). Prints one line per package.
set -euo pipefail

have_postgresql() { compgen -G '/usr/lib/postgresql/*/bin/pg_ctl' >/dev/null || command -v pg_ctl >/dev/null; }

missing=()
if [ -n "${PARLEY_PG_BIN:-}" ] || have_postgresql; then
	echo "system-packages: postgresql present"
else
	missing+=(postgresql)
fi
if [ -n "${PARLEY_CHROMIUM:-}" ] || command -v chromium >/dev/null || command -v chromium-browser >/dev/null; then
	echo "system-packages: chromium present"
else
	missing+=(chromium)
fi
[ ${#missing[@]} -eq 0 ] && exit 0

if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null; then
	echo "system-packages: installing ${missing[*]}"
	export DEBIAN_FRONTEND=noninteractive
	if ! apt-get install -y --no-install-recommends "${missing[@]}" >/tmp/parley-apt.log 2>&1; then
		# A fresh machine may not have the package lists yet.
		apt-get update >>/tmp/parley-apt.log 2>&1 || true
		apt-get install -y --no-install-recommends "${missing[@]}" >>/tmp/parley-apt.log 2>&1 ||
			{ echo "system-packages: apt-get install ${missing[*]} failed; see /tmp/parley-apt.log" >&2; exit 1; }
	fi
	echo "system-packages: installed ${missing[*]}"
else
	echo "system-packages: missing ${missing[*]}; install with: sudo apt-get install ${missing[*]} (the tests that need them skip)"
fi
