#!/usr/bin/env bash
# Builds the local trainer image (default tag policyd-trainer:local) without any registry:
# `docker import` of a tiny root filesystem that holds only mount points and the merged-/usr
# symlinks (bin -> usr/bin, ...; /sbin stays a directory, where `--init` puts its init).
# Containers run the HOST's /usr, /etc, Python prefix and the
# project's venv, bind-mounted read-only at the same paths (see README.md for the run line).
#   deploy/trainer-image/build.sh [TAG]              into $DOCKER_HOST (or the default engine)
#   DOCKER_HOST=unix:///tmp/e1/docker.sock deploy/trainer-image/build.sh
# Prints the image id. Run it once per engine, or let a migration copy the image (policyd
# exports it from the source engine and loads it into the target when it is missing).
set -euo pipefail
tag=${1:-policyd-trainer:local}
root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
mkdir -p "$root"/{usr,etc,tmp,proc,sys,dev,root,run,var/tmp,ckpt}
chmod 1777 "$root/tmp" "$root/var/tmp"
mkdir -p "$root/sbin"   # a real directory: `docker run --init` mounts its init at /sbin/docker-init
for d in bin lib lib32 lib64 libx32; do
  if [ -L "/$d" ]; then
    ln -s "$(readlink "/$d")" "$root/$d"    # merged /usr (Debian 12): the link is enough
  elif [ -d "/$d" ]; then
    mkdir -p "$root/$d"                     # bind-mount the host's /$d there as well
  fi
done
tar --numeric-owner --owner=0 --group=0 -C "$root" -c . \
  | docker import --change 'ENV PYTHONUNBUFFERED=1' --change 'WORKDIR /tmp' \
      --message "policyd trainer: mount points only" - "$tag" >/dev/null
docker image inspect --format '{{.Id}}' "$tag"
