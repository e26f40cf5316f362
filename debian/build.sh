#!/usr/bin/env bash
# Builds the Debian package: target/debian/dnssec-warden_<version>-1_<arch>.deb.
#   bash debian/build.sh
# cargo-deb is installed (pinned below) when missing. The binary is built without the
# default feature `demo` (Cargo.toml, [package.metadata.deb]); its hidden command
# `__package-files` then writes the man pages, the completions and the package's
# config.toml (src/cli/package.rs) into target/package-files, and cargo-deb packs it all.
set -euo pipefail
cd "$(dirname "$0")/.."


target_dir=$(cargo metadata --format-version 1 --no-deps --locked \
    | grep -o '"target_directory":"[^"]*"' | cut -d'"' -f4)
# The same features as [package.metadata.deb], in the `dist` profile (Cargo.toml: fat LTO,
# one codegen unit); `cargo deb --no-build --profile dist` packs this binary.
# DNSSEC_WARDEN_DEB_PROFILE=dev packs an unoptimised build of the same features instead,
# and DNSSEC_WARDEN_DEB_PROFILE=tests packs, without building anything, the binary the
# test build left in target/debug (the default features and the tests' crash points,
# which act only under the tests' environment variable): the package test (tests/run.sh)
# checks the packaging, which depends on neither, without another build of every crate.
# Never ship either package.
profile=${DNSSEC_WARDEN_DEB_PROFILE:-dist}
case $profile in
dist) profile_dir=dist ;;
dev | tests) profile_dir=debug ;;
*)
    echo "debian/build.sh: DNSSEC_WARDEN_DEB_PROFILE is dist (the default), dev or tests, not '$profile'" >&2
    exit 2
    ;;
esac
CARGO_DEB_VERSION=3.8.0
if [[ $(cargo deb --version 2>/dev/null) != "cargo-deb $CARGO_DEB_VERSION" ]]; then
    echo "debian/build.sh: installing cargo-deb $CARGO_DEB_VERSION"
    # For the package test, the tool itself as a debug build: on a fresh machine it
    # installs in about half the time, and packs about as fast (docs/benchmarks.md).
    install_profile=()
    [[ $profile != tests ]] || install_profile=(--debug)
    cargo install cargo-deb --version "$CARGO_DEB_VERSION" --locked "${install_profile[@]}"
fi
cargo_profile=$profile
if [[ $profile == tests ]]; then
    cargo_profile=dev
    if [[ ! -x $target_dir/debug/dnssec-warden ]]; then
        echo "debian/build.sh: no $target_dir/debug/dnssec-warden to pack: build the tests first (cargo test --no-run)" >&2
        exit 2
    fi
else
    cargo build --profile "$profile" --locked --no-default-features --bin dnssec-warden
fi
"$target_dir/$profile_dir/dnssec-warden" __package-files target/package-files >/dev/null
# (cargo-deb warns that a dev profile is not for releases: it is not one.)
cargo deb --no-build --profile "$cargo_profile" --locked "$@"
