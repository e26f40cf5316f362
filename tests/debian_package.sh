#!/usr/bin/env bash
# The Debian package, end to end on this machine: builds it (debian/build.sh), runs
# lintian on it, installs it with apt-get, checks what got installed (the user and group,
# the conffile and its group, the unit enabled and verified by systemd-analyze,
# check-config on the installed config, the man pages, `status` for a member of the
# group without sudo), then purges it and checks that no file of it is left.
#
# Run by tests/run.sh, as root (it installs a package). Not root: it says so and skips.
# It never touches a real installation: it refuses to run when a dnssec-warden package
# it did not install is present, or when /etc/dnssec-warden, /var/lib/dnssec-warden or a
# hand-installed unit exists. The system user and group dnssec-warden stay after the
# purge, as Debian policy has it for system users (files elsewhere may still be theirs).
set -euo pipefail
cd "$(dirname "$0")/.."

say() { echo "tests/debian_package.sh: $*"; }
fail() {
    say "FAIL: $*" >&2
    exit 1
}

if [[ $(id -u) -ne 0 ]]; then
    say "SKIP: needs root (it installs and purges the dnssec-warden package); run tests/run.sh as root"
    exit 0
fi

started=$(date +%s)
marker=/var/tmp/dnssec-warden-package-test.installed
probe_user=dwpkgtest
scratch=$(mktemp -d)
installed_by_us=""

cleanup() {
    local status=$?
    if [[ -n $installed_by_us ]]; then
        say "cleaning up: purging the package this test installed"
        DEBIAN_FRONTEND=noninteractive apt-get purge -y -qq dnssec-warden >/dev/null 2>&1 || true
        rm -f "$marker"
    fi
    userdel "$probe_user" >/dev/null 2>&1 || true
    rm -rf "$scratch"
    exit "$status"
}
trap cleanup EXIT

# A real installation is never disturbed. A package left by an interrupted run of this
# test (the marker says so) is purged first.
state=$(dpkg-query -W -f='${db:Status-Status}' dnssec-warden 2>/dev/null || true)
if [[ -n $state && $state != not-installed ]]; then
    [[ -e $marker ]] || fail "a dnssec-warden package (status: $state) is on this machine and this test did not install it: not touching it"
    say "purging the package an interrupted run of this test left"
    DEBIAN_FRONTEND=noninteractive apt-get purge -y -qq dnssec-warden >/dev/null
fi
rm -f "$marker"
for path in /etc/dnssec-warden /var/lib/dnssec-warden /var/lib/private/dnssec-warden \
    /etc/systemd/system/dnssec-warden.service /usr/local/bin/dnssec-warden; do
    [[ ! -e $path ]] || fail "$path exists (an installation by hand?): not touching it"
done

# --- build and lint -----------------------------------------------------------------
say "building the package (debian/build.sh)"
deb=$(bash debian/build.sh | tail -n 1)
[[ -f $deb ]] || fail "debian/build.sh printed no package path (got: $deb)"
say "built $deb"

say "lintian"
lintian_status=0
lint=$(lintian --pedantic --display-info --fail-on error,warning,info,pedantic "$deb" 2>&1) \
    || lintian_status=$?
grep -v '^running with root privileges' <<<"$lint" || true
((lintian_status == 0)) || fail "lintian reports tags that are not overridden (debian/lintian-overrides)"

# --- install --------------------------------------------------------------------------
say "apt-get install -y $deb"
touch "$marker"
installed_by_us=1
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$deb" >"$scratch/apt.log" 2>&1 \
    || { cat "$scratch/apt.log"; fail "apt-get install"; }
dpkg -L dnssec-warden >"$scratch/files"

getent passwd dnssec-warden >/dev/null || fail "no user dnssec-warden (sysusers.d)"
getent group dnssec-warden >/dev/null || fail "no group dnssec-warden (sysusers.d)"
[[ $(command -v dnssec-warden) == /usr/bin/dnssec-warden ]] || fail "dnssec-warden is not /usr/bin/dnssec-warden"
[[ $(stat -c '%U:%G %a' /etc/dnssec-warden/config.toml) == "root:dnssec-warden 640" ]] \
    || fail "config.toml is $(stat -c '%U:%G %a' /etc/dnssec-warden/config.toml), not root:dnssec-warden 640"
grep -q '^ /etc/dnssec-warden/config.toml ' <<<"$(dpkg-query -W -f='${Conffiles}\n' dnssec-warden)" \
    || fail "/etc/dnssec-warden/config.toml is no conffile"
unit=/usr/lib/systemd/system/dnssec-warden.service
[[ -f $unit ]] || fail "no $unit"
[[ -L /etc/systemd/system/multi-user.target.wants/dnssec-warden.service ]] \
    || fail "the unit is not enabled (no multi-user.target.wants link)"
for file in /usr/lib/sysusers.d/dnssec-warden.conf \
    /usr/share/dnssec-warden/prometheus/dnssec-warden.rules.yml \
    /usr/share/bash-completion/completions/dnssec-warden \
    /usr/share/zsh/vendor-completions/_dnssec-warden \
    /usr/share/fish/vendor_completions.d/dnssec-warden.fish \
    /usr/share/doc/dnssec-warden/copyright /usr/share/doc/dnssec-warden/changelog.Debian.gz; do
    [[ -s $file ]] || fail "$file missing or empty"
done
bash -c 'source /usr/share/bash-completion/completions/dnssec-warden && complete -p dnssec-warden' \
    >/dev/null || fail "the bash completion does not load"

# Installed again over itself (the upgrade path: postinst configure with the old
# version): a change the administrator made to the conffile and its group stay.
say "apt-get install --reinstall (the upgrade path), the edited conffile kept"
echo '# edited by tests/debian_package.sh' >>/etc/dnssec-warden/config.toml
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --reinstall "$deb" >"$scratch/apt.log" 2>&1 \
    || { cat "$scratch/apt.log"; fail "apt-get install --reinstall"; }
grep -q 'edited by tests/debian_package.sh' <<<"$(tail -n 1 /etc/dnssec-warden/config.toml)" \
    || fail "the reinstall replaced the edited config.toml"
[[ $(stat -c '%U:%G %a' /etc/dnssec-warden/config.toml) == "root:dnssec-warden 640" ]] \
    || fail "after the reinstall config.toml is $(stat -c '%U:%G %a' /etc/dnssec-warden/config.toml)"

say "systemd-analyze verify $unit"
verify=$(systemd-analyze verify --man=no "$unit" 2>&1) || fail "systemd-analyze verify: $verify"
if grep -q dnssec-warden <<<"$verify"; then fail "systemd-analyze verify: $verify"; fi

# The installed config reads the API key from the credential the unit passes
# (LoadCredential=gcore-api-key:/etc/dnssec-warden/api-key). Outside systemd the test
# provides it the same way: an example key in a temporary $CREDENTIALS_DIRECTORY.
say "dnssec-warden check-config (installed config, example key as the credential)"
install -d -m 0700 "$scratch/credentials"
printf 'example-api-key\n' >"$scratch/credentials/gcore-api-key"
chmod 0600 "$scratch/credentials/gcore-api-key"
CREDENTIALS_DIRECTORY=$scratch/credentials dnssec-warden check-config \
    || fail "check-config on /etc/dnssec-warden/config.toml"
if env -u CREDENTIALS_DIRECTORY dnssec-warden check-config >/dev/null 2>&1; then
    fail "check-config passes without the credential: the installed config does not read it"
fi

say "man pages"
for page in $(grep '^/usr/share/man/man1/' "$scratch/files"); do
    warnings=$(MANWIDTH=80 man --warnings -l "$page" 2>&1 >/dev/null)
    [[ -z $warnings ]] || fail "man --warnings $page: $warnings"
done
# The page read whole first: `man | grep -q` under pipefail fails whenever grep stops
# reading before man has written its last line (SIGPIPE). Its synopsis is justified: as
# many spaces between the words as the line needs.
rendered=$(MANWIDTH=80 man dnssec-warden-status 2>/dev/null) || true
grep -qE 'dnssec-warden +status' <<<"$rendered" \
    || fail "man dnssec-warden-status does not render"

# `status` for a member of the group, without sudo. systemd is not running here, so the
# test does what the unit does: the state directory as StateDirectory= makes it (0750),
# a database written by the daemon's user with the unit's UMask=0027.
say "status as a member of the group dnssec-warden"
install -d -o dnssec-warden -g dnssec-warden -m 0750 /var/lib/dnssec-warden
install -d -m 0755 "$scratch/daemon"
printf '[database]\npath = "/var/lib/dnssec-warden/state.db"\n' >"$scratch/daemon/config.toml"
chmod 0644 "$scratch/daemon/config.toml"
chmod 0755 "$scratch"
runuser -u dnssec-warden -- sh -c "umask 0027 && dnssec-warden enable example.com --config $scratch/daemon/config.toml" >/dev/null
useradd --system --no-create-home --no-user-group -g nogroup -G dnssec-warden "$probe_user"
out=$(runuser -u "$probe_user" -- dnssec-warden status 2>&1) || fail "status as a group member: $out"
grep -q '^example.com\.' <<<"$out" || fail "status as a group member shows no example.com.: $out"
# The daemon stopped cleanly: its last connection folded the WAL into the file and
# removed it, and the reader may not create the WAL index in the 0750 directory.
runuser -u dnssec-warden -- python3 -c '
import sqlite3
db = sqlite3.connect("/var/lib/dnssec-warden/state.db")
db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
db.close()'
[[ ! -e /var/lib/dnssec-warden/state.db-wal ]] || fail "the WAL is still there after a clean close"
out=$(runuser -u "$probe_user" -- dnssec-warden status 2>&1) || fail "status as a group member, daemon stopped: $out"
grep -q '^example.com\.' <<<"$out" || fail "status as a group member, daemon stopped: $out"
if out=$(runuser -u nobody -- dnssec-warden status 2>&1); then
    fail "status works for a user outside the group: $out"
fi
grep -q 'Permission denied' <<<"$out" || fail "status outside the group: $out"
userdel "$probe_user"

# --- purge ----------------------------------------------------------------------------
say "apt-get purge -y dnssec-warden"
DEBIAN_FRONTEND=noninteractive apt-get purge -y -qq dnssec-warden >"$scratch/apt.log" 2>&1 \
    || { cat "$scratch/apt.log"; fail "apt-get purge"; }
installed_by_us=""
rm -f "$marker"
left=()
while read -r path; do
    [[ -e $path || -L $path ]] || continue
    # A directory other packages own too (/usr/share/man/man1, …) rightly stays.
    if [[ -d $path && ! -L $path ]] && dpkg -S "$path" >/dev/null 2>&1; then continue; fi
    left+=("$path")
done <"$scratch/files"
for path in /etc/dnssec-warden /var/lib/dnssec-warden \
    /etc/systemd/system/multi-user.target.wants/dnssec-warden.service; do
    [[ ! -e $path && ! -L $path ]] || left+=("$path")
done
((${#left[@]} == 0)) || fail "left behind after the purge: ${left[*]}"

say "OK in $(($(date +%s) - started)) s (the user and group dnssec-warden stay, as Debian policy has it)"
