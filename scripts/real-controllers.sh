#!/usr/bin/env bash
# Builds the real control-plane components the end-to-end harness in tests/realk8s runs against,
# once per version, into a cache outside the checkout (so fresh clones on the same machine reuse
# them):
#
#   ${PARLEY_CACHE:-$HOME/.cache/parley}/real-controllers/
#     kube-apiserver-v1.36.3/kube-apiserver        k8s.io/kubernetes, built from the Go module proxy
#     etcd-v3.6.8/etcd                             a tiny launcher around go.etcd.io/etcd/server/v3/embed
#     kustomize-controller-v1.9.4/kustomize-controller
#     helm-controller-v1.6.0/helm-controller
#     crds-kustomize-controller-v1.9.4-helm-controller-v1.6.0-source-controller-v1.9.0/*.yaml
#
# Each artifact is built in its own generated wrapper module inside its cache directory (nothing is
# written to the checkout) and moved into place only when complete, so an interrupted run leaves no
# half-built binary behind and a second run prints "cached" for everything. Prints one line per
# artifact; exits non-zero naming the artifact that failed.
set -euo pipefail

export GOTOOLCHAIN=local
# The wrapper modules are not in any workspace and must resolve their own dependencies.
export GOWORK=off GOFLAGS=-mod=mod

KUBERNETES_VERSION=v1.36.3
STAGING_VERSION=v0.36.3 # k8s.io/kubernetes v1.X.Y ships its staging modules as v0.X.Y
ETCD_VERSION=v3.6.8     # the etcd server k8s.io/kubernetes v1.36.3 itself requires
KUSTOMIZE_CONTROLLER_VERSION=v1.9.4
HELM_CONTROLLER_VERSION=v1.6.0   # the newest whose go.mod this toolchain accepts (v1.7 needs Go 1.27)
SOURCE_CONTROLLER_VERSION=v1.9.0 # the source API kustomize-controller v1.9.4 is built against

CACHE="${PARLEY_CACHE:-$HOME/.cache/parley}/real-controllers"
mkdir -p "$CACHE"

die() {
	echo "real-controllers: $*" >&2
	exit 1
}

command -v go >/dev/null || die "go is not on PATH"
# A fresh machine has no jq: the JSON go prints is read by a small Go program of the repository.
ROOT=$(cd "$(dirname "$0")/.." && pwd)
MODJSON="$CACHE/bin/modjson"
mkdir -p "$CACHE/bin"
(cd "$ROOT" && go build -o "$MODJSON" ./scripts/modjson) || die "cannot build scripts/modjson"

# module_dir MODULE@VERSION prints the module's directory in the module cache, downloading it.
module_dir() {
	local json dir
	json=$(cd "$CACHE" && go mod download -json "$1") || die "go mod download $1 failed: $json"
	dir=$("$MODJSON" dir <<<"$json") || die "go mod download $1 returned no directory"
	echo "$dir"
}

# copy_replaces GOMOD VERSION_FOR_LOCAL adds the replace directives of a dependency's go.mod to the
# wrapper module in the current directory: go only honours replaces of the main module, and these
# projects pin versions (or point at in-repository directories) with them. A local replace
# (./staging/src/k8s.io/api, ./api) becomes the published module at VERSION_FOR_LOCAL.
copy_replaces() {
	local gomod=$1 local_version=$2 old oldv new newv
	# "|" and not a tab: read merges runs of whitespace separators, which would shift empty fields.
	while IFS='|' read -r old oldv new newv; do
		if [[ "$new" == ./* || "$new" == ../* ]]; then
			new=$old
			newv=$local_version
		fi
		[[ -n "$oldv" ]] && old="$old@$oldv"
		go mod edit -replace="$old=$new@$newv"
	done < <(go mod edit -json "$gomod" | "$MODJSON" replaces)
}

# build NAME VERSION BINARY: runs the function build_NAME in a fresh wrapper module directory and
# moves the binary it writes to ./BINARY into the cache, unless it is there already.
build() {
	local name=$1 version=$2 binary=$3
	local dir="$CACHE/$name-$version"
	if [[ -x "$dir/$binary" ]]; then
		echo "cached  $dir/$binary"
		return
	fi
	local start=$SECONDS
	rm -rf "$dir/src"
	mkdir -p "$dir/src"
	# errexit is off inside any command that is the left side of || or &&, so the builder runs as a
	# plain statement in its own subshell with errexit on, and its status is checked afterwards.
	set +e
	(
		set -e
		cd "$dir/src"
		"build_${name//-/_}" "$version"
	) >"$dir/build.log" 2>&1
	local rc=$?
	set -e
	((rc == 0)) || die "building $name $version failed; the last lines of $dir/build.log:
$(tail -n 30 "$dir/build.log")"
	mv "$dir/src/$binary" "$dir/$binary"
	echo "built   $dir/$binary ($((SECONDS - start))s)"
}

build_kube_apiserver() {
	local kdir
	kdir=$(module_dir "k8s.io/kubernetes@$1")
	go mod init parley.local/kasbuild
	go mod edit -go="$(go mod edit -json "$kdir/go.mod" | "$MODJSON" go)"
	go mod edit -require="k8s.io/kubernetes@$1"
	copy_replaces "$kdir/go.mod" "$STAGING_VERSION"
	# cmd/kube-apiserver is a main package, so it cannot be imported for real; a build-tagged file
	# is enough for go mod tidy to record everything it needs.
	printf '//go:build tools\n\npackage tools\n\nimport _ "k8s.io/kubernetes/cmd/kube-apiserver"\n' >tools.go
	go mod tidy
	local minor=${1#v1.}
	minor=${minor%%.*}
	go build -trimpath -o kube-apiserver -ldflags "-s -w \
		-X k8s.io/component-base/version.gitVersion=$1 \
		-X k8s.io/component-base/version.gitMajor=1 \
		-X k8s.io/component-base/version.gitMinor=$minor \
		-X k8s.io/component-base/version.gitTreeState=clean" \
		k8s.io/kubernetes/cmd/kube-apiserver
}

build_etcd() {
	go mod init parley.local/etcdbuild
	cat >main.go <<'EOF'
// Command etcd runs a single-member etcd from go.etcd.io/etcd/server/v3/embed, for tests that
// start a real kube-apiserver: it prints "ready" once the server serves clients and stops on
// SIGINT or SIGTERM.
package main

import (
	"flag"
	"fmt"
	"log"
	"net/url"
	"os"
	"os/signal"
	"syscall"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
)

func main() {
	dir := flag.String("data-dir", "", "data directory")
	client := flag.Int("client-port", 0, "client port on 127.0.0.1")
	peer := flag.Int("peer-port", 0, "peer port on 127.0.0.1")
	flag.Parse()
	if *dir == "" || *client == 0 || *peer == 0 {
		log.Fatal("etcd: -data-dir, -client-port and -peer-port are required")
	}
	cu, _ := url.Parse(fmt.Sprintf("http://127.0.0.1:%d", *client))
	pu, _ := url.Parse(fmt.Sprintf("http://127.0.0.1:%d", *peer))
	cfg := embed.NewConfig()
	cfg.Dir = *dir
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{*cu}, []url.URL{*cu}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{*pu}, []url.URL{*pu}
	cfg.InitialCluster = cfg.Name + "=" + pu.String()
	cfg.LogLevel = "error"
	cfg.UnsafeNoFsync = true // throwaway test data: durability only costs time
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		log.Fatalf("etcd: start: %v", err)
	}
	select {
	case <-e.Server.ReadyNotify():
		fmt.Println("ready")
	case <-time.After(60 * time.Second):
		e.Server.Stop()
		log.Fatal("etcd: not ready after 60s")
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	select {
	case <-sig:
	case err := <-e.Err():
		log.Fatalf("etcd: %v", err)
	}
	e.Close()
}
EOF
	go mod edit -require="go.etcd.io/etcd/server/v3@$1"
	go mod tidy
	go build -trimpath -ldflags "-s -w" -o etcd .
}

# flux_controller NAME VERSION [MODULE@VERSION...]: builds a Flux controller's main package, with
# its own replaces, and any further requirements given.
flux_controller() {
	local name=$1 version=$2 dir
	shift 2
	dir=$(module_dir "github.com/fluxcd/$name@$version")
	go mod init "parley.local/$name-build"
	go mod edit -go="$(go mod edit -json "$dir/go.mod" | "$MODJSON" go)"
	go mod edit -require="github.com/fluxcd/$name@$version"
	copy_replaces "$dir/go.mod" "$version"
	local req
	for req in "$@"; do
		go mod edit -require="$req"
	done
	printf '//go:build tools\n\npackage tools\n\nimport _ "github.com/fluxcd/%s"\n' "$name" >tools.go
	go mod tidy
	go build -trimpath -ldflags "-s -w" -o "$name" "github.com/fluxcd/$name"
}

build_kustomize_controller() { flux_controller kustomize-controller "$1"; }

# helm-controller v1.6.0 asks for fluxcd/pkg/chartutil v1.27.0, which the module proxy here does not
# serve; the patch release v1.27.2 is API-compatible (same minor).
build_helm_controller() { flux_controller helm-controller "$1" github.com/fluxcd/pkg/chartutil@v1.27.2; }

crds() {
	local dir="$CACHE/crds-kustomize-controller-$KUSTOMIZE_CONTROLLER_VERSION-helm-controller-$HELM_CONTROLLER_VERSION-source-controller-$SOURCE_CONTROLLER_VERSION"
	local want=(kustomize.toolkit.fluxcd.io_kustomizations.yaml helm.toolkit.fluxcd.io_helmreleases.yaml
		source.toolkit.fluxcd.io_externalartifacts.yaml source.toolkit.fluxcd.io_gitrepositories.yaml
		source.toolkit.fluxcd.io_ocirepositories.yaml source.toolkit.fluxcd.io_buckets.yaml
		source.toolkit.fluxcd.io_helmcharts.yaml source.toolkit.fluxcd.io_helmrepositories.yaml)
	local f missing=0
	for f in "${want[@]}"; do
		[[ -s "$dir/$f" ]] || missing=1
	done
	if ((missing == 0)); then
		echo "cached  $dir"
		return
	fi
	local kc hc sc tmp
	kc=$(module_dir "github.com/fluxcd/kustomize-controller@$KUSTOMIZE_CONTROLLER_VERSION")
	hc=$(module_dir "github.com/fluxcd/helm-controller@$HELM_CONTROLLER_VERSION")
	sc=$(module_dir "github.com/fluxcd/source-controller@$SOURCE_CONTROLLER_VERSION")
	tmp=$(mktemp -d "$CACHE/crds.XXXXXX")
	for f in "${want[@]}"; do
		local src="$kc/config/crd/bases/$f"
		[[ "$f" == source.* ]] && src="$sc/config/crd/bases/$f"
		[[ "$f" == helm.* ]] && src="$hc/config/crd/bases/$f"
		[[ -s "$src" ]] || { rm -rf "$tmp"; die "CRD $f not found at $src"; }
		cp "$src" "$tmp/$f"
	done
	chmod -R u+w "$tmp" # files copied from the read-only module cache
	rm -rf "$dir"
	mv "$tmp" "$dir"
	echo "copied  $dir"
}

# One build at a time: each already uses every core.
build etcd "$ETCD_VERSION" etcd
build kube-apiserver "$KUBERNETES_VERSION" kube-apiserver
build kustomize-controller "$KUSTOMIZE_CONTROLLER_VERSION" kustomize-controller
build helm-controller "$HELM_CONTROLLER_VERSION" helm-controller
crds
