#!/usr/bin/env bash
# Runs every test dnssec-warden has, after installing the Debian packages they use as
# independent oracles and real peers. Safe to run again: installed packages are skipped.
set -euo pipefail
cd "$(dirname "$0")/.."

# postgresql: the store's tests on a throwaway cluster (test-support/src/postgres.rs).
# lintian, man-db and python3: tests/debian_package.sh (lintian on the .deb, the man pages
# rendered, the state database closed as the daemon closes it).
# pdns-server, pdns-backend-sqlite3 and sqlite3: tests/providers/powerdns.rs (a real PowerDNS
# Authoritative behind the provider client, its database made with the sqlite3 shell) and
# tests/e2e/e2e_powerdns.rs (the same as a second provider of the daemon, under the lab TLD) and
# tests/dns/registry_lab.rs (a child publishing CDS to the lab registry of the Knot TLD) and
# tests/e2e/e2e_registry.rs (the daemon closing the parent loop through that registry) and
# tests/providers/move_look.rs (two PowerDNS accounts of a signed move under a Knot root and TLD) and
# tests/e2e/e2e_signed_move.rs (the daemon moving a zone between them, Unbound probing all along).
# chromium, chromium-driver, tesseract-ocr and fonts-dejavu-core: tests/cli_web/browser_harness.rs
# and the web console's tests (headless chromium over WebDriver, test-support/src/browser.rs;
# the screenshots read by OCR, in the fonts chromium renders them with).
# openssl: tests/cli_web/web_security.rs (the console's TLS, a self-signed certificate).
# python3-venv: tests/providers/conformance.rs (the checkers' venv, lab/conformance/setup.sh).
packages=(ldnsutils knot knot-dnsutils unbound bind9-dnsutils dnsperf systemd prometheus
    postgresql lintian man-db python3 pdns-server pdns-backend-sqlite3 sqlite3
    chromium chromium-driver tesseract-ocr fonts-dejavu-core openssl python3-venv)
# Scratch space of this run, and how long each part took (printed at the end).
work=$(mktemp -d)
apt_pid=""
finish() {
    local status=$?
    # Never leave apt half done: a package install cut short breaks dpkg for the next run.
    [[ -z $apt_pid ]] || wait "$apt_pid" 2>/dev/null || true
    rm -rf "$work"
    exit "$status"
}
trap finish EXIT
part() {
    local name=$1 start=$SECONDS
    shift
    "$@"
    echo "$name $((SECONDS - start))" >>"$work/parts"
    echo "tests/run.sh: $name done in $((SECONDS - start)) s"
}

missing=()
for package in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" \
        || missing+=("$package")
done
install_packages() {
    local sudo="" policy_set=""
    [[ $(id -u) -eq 0 ]] || sudo="sudo"
    # policy-rc.d 101: the packages must not start their own daemons (on port 53, or
    # PostgreSQL's system cluster); the test harness starts the servers it needs on
    # loopback addresses or unix sockets of its own (test-support/src/postgres.rs).
    if [[ ! -e /usr/sbin/policy-rc.d ]]; then
        $sudo sh -c 'printf "#!/bin/sh\nexit 101\n" > /usr/sbin/policy-rc.d && chmod +x /usr/sbin/policy-rc.d'
        policy_set=1
    fi
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "$@"
    [[ -z $policy_set ]] || $sudo rm -f /usr/sbin/policy-rc.d
}
# The packages install beside the builds (which need none of them), then the official
# `cloudflare` library and botocore, pinned, that tests/providers/conformance.rs holds the
# simulators' and clients' bodies to (a venv of this run: lab/conformance/setup.sh): apt
# and pip mostly wait on the network and the disk, the compiler on the cores. The tests
# wait for both.
prepare() {
    if ((${#missing[@]})); then
        install_packages "${missing[@]}" || return
    fi
    bash lab/conformance/setup.sh "$work/conformance-venv"
}
echo "tests/run.sh: installing ${missing[*]:-no Debian package} and the conformance checkers' Python packages (beside the builds; log at the end)"
prepare >"$work/apt.log" 2>&1 &
apt_pid=$!
packages_installed() {
    [[ -n $apt_pid ]] || return 0
    local status=0
    wait "$apt_pid" || status=$?
    apt_pid=""
    cat "$work/apt.log"
    if ((status != 0)); then
        echo "tests/run.sh: installing ${missing[*]:-} or the conformance checkers' venv failed (exit $status)" >&2
        return 1
    fi
}

# Here a missing browser fails the browser tests instead of skipping them.
export DNSSEC_WARDEN_REQUIRE_BROWSER=1

part "cargo fmt" cargo fmt --all --check
# Clippy lints the workspace's crates while the test build compiles them: `cargo clippy`
# is `cargo check` with clippy-driver as the workspace's compiler wrapper, and the same
# wrapper on `cargo test --no-run` gives the same lints (-D warnings) in a build whose
# artifacts the tests use; a separate `cargo clippy` compiled every crate a second time
# (a check is never reused by a build). Every target is linted: libraries, binaries,
# tests and benchmarks (built, not run). clippy-driver leaves MIR optimisations off in the
# crates it wraps; these are unoptimised test builds, never shipped.
linted() {
    RUSTC_WORKSPACE_WRAPPER="$(rustc --print sysroot)/bin/clippy-driver" \
        CLIPPY_ARGS="-D__CLIPPY_HACKERY__warnings__CLIPPY_HACKERY__" "$@"
}
# Library, binary and integration tests of every crate, and doc tests; not the benchmarks
# (measurements: `cargo bench --bench observe`, which print figures and assert nothing).
# The integration tests are six binaries, one a directory of tests/ (engine, store, dns,
# providers, cli_web, e2e; each main.rs says what it covers): one test binary per file
# was most of the build's link time, and the files of one group run beside each other.
# One group or one file: `cargo test --test e2e`, `cargo test --test e2e e2e_knot::`.
#
# Built once by cargo, then run here in three lanes at once (below), as cargo would run
# each (from its package's folder). Each binary's output is printed whole when the lanes
# are done, then one line per binary: its result, its time and the CPU time it used (user
# and system, its servers and daemons included).
logs=$work/logs
mkdir "$logs"
test_build() {
    linted cargo test --workspace --lib --bins --tests --benches --locked --no-run \
        --message-format=json-render-diagnostics >"$work/artifacts"
}
part "cargo test --no-run, linted by clippy" test_build
part "the Debian packages and the conformance venv" packages_installed
# (Here a missing checker fails the conformance tests instead of skipping them.)
export DNSSEC_WARDEN_CONFORMANCE_PYTHON="$work/conformance-venv/bin/python" DNSSEC_WARDEN_REQUIRE_CONFORMANCE=1
python3 - "$work/artifacts" >"$logs/binaries" <<'PY'
import json, os, sys
for line in open(sys.argv[1]):
    message = json.loads(line)
    if message.get("reason") == "compiler-artifact" and message.get("executable") \
            and message["profile"]["test"] and "bench" not in message["target"]["kind"]:
        target = message["target"]
        label = f"{target['name']}-{target['kind'][0]}"
        print(label, os.path.dirname(message["manifest_path"]), message["executable"])
PY
# One labelled command of a lane, from a folder: its output to its log, its result, time
# and CPU time to the results.
run_step() {
    local label=$1 dir=$2 status=0 TIMEFORMAT="%R %U %S"
    shift 2
    echo "tests/run.sh: $label started"
    # (`time` reports on the group's stderr, outside the command's own redirection.)
    { time { (cd "$dir" && "$@") >"$logs/$label.log" 2>&1; }; } 2>"$logs/$label.time" \
        || status=$?
    echo "$label $status $(cat "$logs/$label.time")" >>"$logs/results"
    echo "tests/run.sh: $label finished (exit $status)"
}
run_binaries() {
    local label dir exe
    while read -r label dir exe; do
        run_step "$label" "$dir" "$exe"
    done
}
# Two more steps, each after the binaries of a lane; they read the build and write no
# test's file:
# - the daemon without the simulated world (no `demo`, no lab crate), as the Debian
#   package is built (debian/build.sh), must compile and be clippy-clean too: built in
#   the test profile, linted as the test build was, with tokio's `test-util` (which the
#   test build's dev-dependencies turn on, and which only adds functions) so that every
#   dependency is the test build's own and only the daemon's crate is compiled again (a
#   `cargo clippy` checked every dependency a second time). It builds in a copy of the
#   test build's target directory made of hard links (no space, no time): in the
#   directory itself its daemon would replace, mid-run, the one the tests start;
# - the Debian package: built, linted, installed, checked, purged (root only; it says so
#   and skips otherwise, and never touches a dnssec-warden it did not install). Packed
#   from the test build's binary (debian/build.sh's `tests` mode): what is checked is the
#   packaging; `bash debian/build.sh` alone builds the shipped `dist` binary.
steps=(clippy-no-default debian-package)
no_default_build() {
    local target=${CARGO_TARGET_DIR:-target}
    rm -rf "$target/no-default" && mkdir "$target/no-default" \
        && cp -al "$target/debug" "$target/no-default/debug" \
        && CARGO_TARGET_DIR=$target/no-default linted cargo build --profile test \
            -p dnssec-warden --no-default-features --features tokio/test-util --lib --bins \
            --locked
    local status=$?
    rm -rf "$target/no-default"
    return "$status"
}
clippy_no_default() {
    run_step clippy-no-default . no_default_build
}
debian_package() {
    run_step debian-package . env DNSSEC_WARDEN_DEB_PROFILE=tests bash tests/debian_package.sh
}
# Three lanes of about equal length: the engine group's property tests (CPU on both
# cores, then the Debian package), the end-to-end group (real servers and daemons, mostly
# waiting on their timers) and every other binary (then the clippy run without the
# default feature).
{
    { grep '^engine-test ' "$logs/binaries" || true; } | run_binaries
    debian_package
} &
engine_lane=$!
{ grep '^e2e-test ' "$logs/binaries" || true; } | run_binaries &
e2e_lane=$!
{
    { grep -v -e '^engine-test ' -e '^e2e-test ' "$logs/binaries" || true; } | run_binaries
    clippy_no_default
} &
other_lane=$!
tests_started=$SECONDS
wait "$engine_lane" "$e2e_lane" "$other_lane"
echo "the test binaries, the clippy run without the default feature, the Debian package $((SECONDS - tests_started))" >>"$work/parts"
failed=0
while read -r label _ _; do
    echo "==== $label"
    cat "$logs/$label.log"
done < <(cat "$logs/binaries"; printf '%s\n' "${steps[@]}")
echo "==== tests/run.sh: each test binary's and step's result, time and CPU time"
while read -r label status real user sys; do
    echo "$label: $([[ $status -eq 0 ]] && echo ok || echo "FAILED (exit $status)") in" \
        "${real%.*} s (CPU ${user%.*} s user, ${sys%.*} s system)"
    [[ $status -eq 0 ]] || failed=1
done <"$logs/results"
if [[ $(wc -l <"$logs/results") -ne $(($(wc -l <"$logs/binaries") + ${#steps[@]})) ]]; then
    echo "tests/run.sh: a test binary or a step did not report" >&2
    failed=1
fi
((failed == 0)) || exit 1
# (Linted as the test build was, so that the library built there is the one used.)
part "doc tests" linted cargo test --workspace --doc --locked
echo "==== tests/run.sh: each part's time"
while read -r line; do
    echo "${line% *}: ${line##* } s"
done <"$work/parts"
echo "in all: $SECONDS s"
