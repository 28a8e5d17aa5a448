#!/usr/bin/env bash
# Loads the images of a kind set cache dir (tools/build.sh --set kind) into the Docker engine that
# DOCKER_HOST names, skipping each image the engine already holds with the same image ID.
#   tools/kind/load-images.sh "$(tools/build.sh --set kind | tail -1)"
set -euo pipefail
dir=${1:?usage: load-images.sh KIND_SET_DIR}
for archive in "$dir"/images/*.tar; do
  # The archive's manifest.json names the image config, whose file name is the image ID.
  id=sha256:$(tar -xOf "$archive" manifest.json | python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["Config"].split("/")[-1].removesuffix(".json"))')
  tag=$(tar -xOf "$archive" manifest.json | python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["RepoTags"][0])')
  if [[ $(docker image inspect --format '{{.Id}}' "$tag" 2>/dev/null) == "$id" ]]; then
    echo "[load-images] $tag already loaded" >&2
  else
    t0=$SECONDS
    docker load -q -i "$archive" >&2
    echo "[load-images] $tag loaded in $((SECONDS - t0))s" >&2
  fi
done
