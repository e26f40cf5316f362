#!/usr/bin/env bash
# Makes the Python environment the conformance checkers run in (cloudflare_check.py,
# route53_check.py): a venv at the path given, with the packages of requirements.txt, the
# versions docs/providers/{cloudflare,route53}.md were written against, every file pinned
# by its hash. Idempotent: a venv that already has them is left as it is.
#
#   bash lab/conformance/setup.sh VENV      then VENV/bin/python lab/conformance/…_check.py
#
# Needs python3 with its venv module (Debian: the package python3-venv) and PyPI (or the
# index pip is configured with).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
venv=${1:?usage: setup.sh VENV (the path of the venv to make or reuse)}
requirements=$here/requirements.txt
stamp=$venv/.conformance-requirements.sha256
want=$(sha256sum "$requirements" | cut -d' ' -f1)

# Already made from these requirements, and the packages import: nothing to do.
if [[ -x $venv/bin/python && -f $stamp && $(cat "$stamp") == "$want" ]] \
    && "$venv/bin/python" -c 'import cloudflare, botocore' 2>/dev/null; then
    exit 0
fi

if [[ ! -x $venv/bin/python ]]; then
    log=$(mktemp)
    if ! python3 -m venv "$venv" >"$log" 2>&1; then
        cat "$log" >&2
        rm -f "$log"
        echo "lab/conformance/setup.sh: python3 -m venv $venv failed (Debian: apt-get install python3-venv)" >&2
        exit 1
    fi
    rm -f "$log"
fi
rm -f "$stamp"
# Bounded: each connection gives up after 30 s, with two retries, and the whole install
# after ten minutes. Not byte-compiled: the checkers import a small part of botocore and
# cloudflare, compiled as they are imported.
if ! timeout 600 "$venv/bin/python" -m pip install --quiet --disable-pip-version-check \
    --no-input --no-compile --timeout 30 --retries 2 --only-binary :all: --require-hashes \
    -r "$requirements"; then
    echo "lab/conformance/setup.sh: pip install -r $requirements into $venv failed" >&2
    exit 1
fi
if ! "$venv/bin/python" -c 'import cloudflare, botocore' 2>&1; then
    echo "lab/conformance/setup.sh: the packages do not import in $venv" >&2
    exit 1
fi
echo "$want" >"$stamp"
