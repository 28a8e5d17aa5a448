# The "pulumi" set of ../build.sh (tools/build.sh --set pulumi): builds the
# Pulumi CLI and the Kubernetes provider plugin from the wrapper modules in
# this directory (.) and in ./kubernetes.  Sourced by ../build.sh after its
# argument parsing; uses its pins (PULUMI_*), helpers (log, die) and variables
# (TOOLS_DIR, CACHE_ROOT, NICE, MODE, FORCE, GO_VERSION, GO_PLATFORM).
# See ../README.md, "The Pulumi engine set".
#
# Bin dir: $CACHE_ROOT/pulumi-<key>/ with
#   pulumi                          github.com/pulumi/pulumi/pkg/v3/cmd/pulumi
#   pulumi-resource-kubernetes      github.com/pulumi/pulumi-kubernetes/provider/v4/cmd/pulumi-resource-kubernetes
#   manifest.json, build-seconds.txt
# There is no pulumi-language-python: its module is not served by the proxy
# here (README.md, "Why there is no Python language host").

# go command inside wrapper module $1 (a dir under tools/), at low priority.
pulumi_go() { local mod=$1; shift; (cd "$TOOLS_DIR/$mod" && nice -n "$NICE" go "$@"); }
PULUMI_MODULES=(pulumi pulumi/kubernetes)

pulumi_json() {
  local s=$1
  s=${s//\\/\\\\}
  s=${s//\"/\\\"}
  printf '"%s"' "$s"
}

PULUMI_BINARIES=(pulumi pulumi-resource-kubernetes)
PULUMI_CLI_PKG=github.com/pulumi/pulumi/pkg/v3/cmd/pulumi
PULUMI_K8S_MOD=github.com/pulumi/pulumi-kubernetes/provider/v4
PULUMI_K8S_PKG=$PULUMI_K8S_MOD/cmd/pulumi-resource-kubernetes

pulumi_cache_key() {
  {
    printf 'set=pulumi\npulumi=%s\nkubernetesProvider=%s\nkubernetesProviderModule=%s\nrecipe=%s\ngo=%s\nplatform=%s\ncgo=%s\n' \
      "$PULUMI_VERSION" "$PULUMI_KUBERNETES_VERSION" "$PULUMI_KUBERNETES_MODULE" "$PULUMI_RECIPE_REVISION" \
      "$GO_VERSION" "$GO_PLATFORM" "$CGO_ENABLED"
    local m f
    for m in "${PULUMI_MODULES[@]}"; do
      for f in go.mod go.sum tools.go; do
        printf '== %s/%s\n' "$m" "$f"
        cat "$TOOLS_DIR/$m/$f"
      done
    done
  } | sha256sum | cut -c1-16
}

pulumi_complete_dir() {
  local d=$1 b
  [[ -f $d/manifest.json ]] || return 1
  for b in "${PULUMI_BINARIES[@]}"; do
    [[ -x $d/$b ]] || return 1
  done
}

pulumi_write_manifest() {
  local dir=$1 final=$2 sep b
  {
    printf '{\n'
    printf '  "schema": 1,\n'
    printf '  "set": "pulumi",\n'
    printf '  "cacheKey": %s,\n' "$(pulumi_json "$PKEY")"
    printf '  "binDir": %s,\n' "$(pulumi_json "$final")"
    printf '  "pulumi": %s,\n' "$(pulumi_json "$PULUMI_VERSION")"
    printf '  "kubernetesProvider": %s,\n' "$(pulumi_json "$PULUMI_KUBERNETES_VERSION")"
    printf '  "kubernetesProviderModule": %s,\n' "$(pulumi_json "$PULUMI_KUBERNETES_MOD@$PULUMI_KUBERNETES_MODULE")"
    printf '  "go": %s,\n' "$(pulumi_json "$GO_VERSION")"
    printf '  "platform": %s,\n' "$(pulumi_json "$GO_PLATFORM")"
    printf '  "binaries": {\n'
    sep=
    for b in "${PULUMI_BINARIES[@]}"; do
      printf '%s    %s: %s' "$sep" "$(pulumi_json "$b")" "$(pulumi_json "$final/$b")"
      sep=$',\n'
    done
    printf '\n  },\n'
    # What the engine sees: plugins found on PATH ("ambient") with these versions.
    printf '  "plugins": {"resource/kubernetes": %s},\n' "$(pulumi_json "${PULUMI_KUBERNETES_VERSION#v}")"
    printf '  "languageHosts": []\n'
    printf '}\n'
  } >"$dir/manifest.json.tmp"
  mv -f "$dir/manifest.json.tmp" "$dir/manifest.json"
}

pulumi_check_pin() {
  local mod=$1 path=$2 want=$3 got
  got=$(cd "$TOOLS_DIR/$mod" && go list -m -f '{{.Version}}' "$path")
  [[ $got == "$want" ]] || die "tools/$mod selects $path $got but build.sh pins $want: update tools/$mod/go.mod (see tools/README.md)"
}

pulumi_set_main() {
  PULUMI_KUBERNETES_MOD=$PULUMI_K8S_MOD
  PKEY=$(pulumi_cache_key)
  PBIN_DIR="$CACHE_ROOT/pulumi-$PKEY"

  if [[ $MODE == print-dir ]]; then
    printf '%s\n' "$PBIN_DIR"
    return 0
  fi
  if [[ $FORCE == 0 ]] && pulumi_complete_dir "$PBIN_DIR"; then
    log "cached: $PBIN_DIR"
    printf '%s\n' "$PBIN_DIR"
    return 0
  fi
  cached_only_exit "$PBIN_DIR"

  mkdir -p "$CACHE_ROOT"
  exec 9>"$CACHE_ROOT/.lock-pulumi-$PKEY"
  if ! flock -n 9; then
    log "another build of pulumi-$PKEY is running; waiting for it"
    flock 9
  fi
  if [[ $FORCE == 0 ]] && pulumi_complete_dir "$PBIN_DIR"; then
    log "cached: $PBIN_DIR"
    printf '%s\n' "$PBIN_DIR"
    return 0
  fi

  rm -rf "$CACHE_ROOT/.tmp-pulumi-$PKEY".* "$CACHE_ROOT/.old-pulumi-$PKEY".*
  TMP_DIR=$(mktemp -d "$CACHE_ROOT/.tmp-pulumi-$PKEY.XXXXXX")
  trap 'rm -rf "$TMP_DIR"' EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM

  log "building the pulumi set into $PBIN_DIR (go $GO_VERSION, $GO_PLATFORM)"
  log "pins: pulumi $PULUMI_VERSION, pulumi-kubernetes $PULUMI_KUBERNETES_VERSION ($PULUMI_K8S_MOD@$PULUMI_KUBERNETES_MODULE)"
  pulumi_check_pin pulumi github.com/pulumi/pulumi/pkg/v3 "$PULUMI_VERSION"
  pulumi_check_pin pulumi github.com/pulumi/pulumi/sdk/v3 "$PULUMI_VERSION"
  pulumi_check_pin pulumi/kubernetes "$PULUMI_K8S_MOD" "$PULUMI_KUBERNETES_MODULE"
  pulumi_check_pin pulumi/kubernetes github.com/pulumi/pulumi-kubernetes/sdk/v4 "$PULUMI_KUBERNETES_VERSION"

  local t_all=$SECONDS t0=$SECONDS timings
  local m
  for m in "${PULUMI_MODULES[@]}"; do
    log "downloading modules of tools/$m"
    pulumi_go "$m" mod download >&2
  done
  log "modules downloaded in $((SECONDS - t0))s"
  timings="download $((SECONDS - t0))"

  # The provider's main package embeds schema-embed.json and
  # terraform-mapping-embed.json, which upstream generates (go generate ->
  # generate.go with VERSION=<release>) and git-ignores, so they are not in
  # the module zip and `go build` of the package fails with "pattern
  # schema-embed.json: no matching files found".  The module cache is
  # read-only and -overlay may not replace files beneath GOMODCACHE, so:
  # copy the verified module out of the cache, run upstream's generator next
  # to it, and build with a temporary copy of the wrapper's go.mod (-modfile) that
  # replaces the provider module with that directory.  The directory has a
  # fixed path per cache key (recorded in the binary's build info), so
  # rebuilding gives the same bytes.
  local kdir pdir gen modfile
  kdir=$(cd "$TOOLS_DIR/pulumi/kubernetes" && go list -m -f '{{.Dir}}' "$PULUMI_K8S_MOD")
  [[ -n $kdir && -f $kdir/cmd/pulumi-resource-kubernetes/generate.go ]] \
    || die "cannot find $PULUMI_K8S_MOD/cmd/pulumi-resource-kubernetes/generate.go (module dir: $kdir)"
  PWORK="$CACHE_ROOT/.work-pulumi-$PKEY"
  rm -rf "$PWORK"
  mkdir -p "$PWORK"
  trap 'rm -rf "$TMP_DIR" "$PWORK"' EXIT
  pdir="$PWORK/pulumi-kubernetes-provider"
  cp -R "$kdir" "$pdir"
  chmod -R u+w "$pdir"
  gen="$PWORK/generate"
  mkdir -p "$gen"
  cp "$pdir/cmd/pulumi-resource-kubernetes/schema.json" "$pdir/cmd/pulumi-resource-kubernetes/terraform-mapping.json" "$gen/"
  # -modfile: resolve the generator's imports with the provider wrapper's go.mod/go.sum;
  # the go.mod in $gen only marks the module root (the generator's cwd).
  printf 'module generate\n' >"$gen/go.mod"
  log "[pulumi-resource-kubernetes] go run generate.go (schema-embed.json, version ${PULUMI_KUBERNETES_VERSION#v}) ..."
  t0=$SECONDS
  (cd "$gen" && VERSION=${PULUMI_KUBERNETES_VERSION#v} nice -n "$NICE" \
      go run -mod=readonly -modfile="$TOOLS_DIR/pulumi/kubernetes/go.mod" "$pdir/cmd/pulumi-resource-kubernetes/generate.go") >&2 \
    || die "[pulumi-resource-kubernetes] generate.go failed after $((SECONDS - t0))s"
  [[ -s $gen/schema-embed.json && -s $gen/terraform-mapping-embed.json ]] || die "generate.go wrote no embed files"
  cp "$gen/schema-embed.json" "$gen/terraform-mapping-embed.json" "$pdir/cmd/pulumi-resource-kubernetes/"
  log "[pulumi-resource-kubernetes] embed files generated in $((SECONDS - t0))s"
  timings+=$'\n'"generate-embeds $((SECONDS - t0))"
  modfile="$PWORK/build.mod"
  cp "$TOOLS_DIR/pulumi/kubernetes/go.mod" "$modfile"
  cp "$TOOLS_DIR/pulumi/kubernetes/go.sum" "$PWORK/build.sum"
  printf '\nreplace %s => %s\n' "$PULUMI_K8S_MOD" "$pdir" >>"$modfile"

  # Flags as in the upstream release builds (.goreleaser.yml of each repo).
  log "[pulumi] go build $PULUMI_CLI_PKG ..."
  t0=$SECONDS
  pulumi_go pulumi build -mod=readonly -trimpath -tags osusergo,grpcnotrace \
      -ldflags "-s -w -X github.com/pulumi/pulumi/sdk/v3/go/common/version.Version=$PULUMI_VERSION" \
      -o "$TMP_DIR/pulumi" "$PULUMI_CLI_PKG" \
    || die "[pulumi] go build failed after $((SECONDS - t0))s"
  log "[pulumi] built in $((SECONDS - t0))s ($(du -h "$TMP_DIR/pulumi" | cut -f1))"
  timings+=$'\n'"pulumi $((SECONDS - t0))"

  log "[pulumi-resource-kubernetes] go build $PULUMI_K8S_PKG ..."
  t0=$SECONDS
  pulumi_go pulumi/kubernetes build -mod=readonly -modfile="$modfile" -trimpath \
      -ldflags "-s -w -X $PULUMI_K8S_MOD/pkg/version.Version=$PULUMI_KUBERNETES_VERSION" \
      -o "$TMP_DIR/pulumi-resource-kubernetes" "$PULUMI_K8S_PKG" \
    || die "[pulumi-resource-kubernetes] go build failed after $((SECONDS - t0))s"
  log "[pulumi-resource-kubernetes] built in $((SECONDS - t0))s ($(du -h "$TMP_DIR/pulumi-resource-kubernetes" | cut -f1))"
  timings+=$'\n'"pulumi-resource-kubernetes $((SECONDS - t0))"

  "$TMP_DIR/pulumi" version >/dev/null || die "the built pulumi does not run"
  rm -rf "$PWORK"
  timings+=$'\n'"total $((SECONDS - t_all))"
  printf '%s\n' "$timings" >"$TMP_DIR/build-seconds.txt"
  pulumi_write_manifest "$TMP_DIR" "$PBIN_DIR"

  if [[ -e $PBIN_DIR ]]; then
    local old
    old=$(mktemp -d "$CACHE_ROOT/.old-pulumi-$PKEY.XXXXXX")
    mv "$PBIN_DIR" "$old/"
    rm -rf "$old"
  fi
  chmod 755 "$TMP_DIR"
  mv -T "$TMP_DIR" "$PBIN_DIR"
  trap - EXIT
  log "done in $((SECONDS - t_all))s: $PBIN_DIR"
  printf '%s\n' "$PBIN_DIR"
}
